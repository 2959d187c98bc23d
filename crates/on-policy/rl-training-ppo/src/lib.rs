//! rl-training-ppo: Proximal Policy Optimization with the clipped surrogate objective (Schulman et al.
//! 2017), following stable-baselines3's `PPO` step for step: rollouts with GAE, truncation
//! bootstrapped from the true final observation, per-minibatch advantage normalization,
//! optional value clipping and KL early stop, global-norm gradient clipping.
#![warn(missing_docs)]

pub mod config;
pub mod loss;

pub use config::PpoConfig;

use rl_training_core::Rng;
use rl_training_core::algorithm::{Learner, LearnerState, Progress, RlError};
use rl_training_core::buffers::RolloutBuffer;
use rl_training_core::burn::tensor::Device;
use rl_training_core::checkpoint::Checkpoint;
use rl_training_core::logger::Metrics;
use rl_training_core::optim::{FlatOptimizer, OptimizerKind};
use rl_training_core::params::{TensorMap, module_tensors, set_module_tensors};
pub use rl_training_on_policy::EnvMaker;
use rl_training_on_policy::agent::{load_with_minibatch_rng, save_with_minibatch_rng};
use rl_training_on_policy::rollout::{host, tensor2};
use rl_training_on_policy::{
    ActorCritic, BuildContext, OnPolicyAgent, OnPolicyLearner, actor_critic_grads,
};
use serde_json::{Map, Value};

/// The optimization half of PPO: the policy, its optimizer and the minibatch generator. It
/// updates from any [`RolloutBuffer`], so collection can live elsewhere (other threads or
/// processes, as the actor-learner algorithms will need).
pub struct PpoLearner {
    cfg: PpoConfig,
    device: Device,
    policy: ActorCritic,
    opt: FlatOptimizer,
    rng_batch: Rng,
}

impl PpoLearner {
    /// A learner for `policy` (on the autodiff `device`) drawing minibatches from `rng_batch`.
    pub fn new(cfg: PpoConfig, policy: ActorCritic, device: Device, rng_batch: Rng) -> Self {
        Self {
            opt: FlatOptimizer::new(OptimizerKind::adam(cfg.adam_eps), cfg.max_grad_norm),
            cfg,
            device,
            policy,
            rng_batch,
        }
    }

    /// The policy network.
    pub fn policy(&self) -> &ActorCritic {
        &self.policy
    }

    /// The policy network, to change (PPG's auxiliary phase trains it too).
    pub fn policy_mut(&mut self) -> &mut ActorCritic {
        &mut self.policy
    }
}

impl Learner for PpoLearner {
    type Batch = RolloutBuffer;

    /// One PPO update over a collected rollout (SB3's `PPO.train`).
    fn update(&mut self, buf: &RolloutBuffer, progress: &Progress) -> Result<Metrics, RlError> {
        let lr = self.cfg.learning_rate.at(progress);
        let clip = self.cfg.clip_range.at(progress);
        let clip_vf = self.cfg.clip_range_vf.as_ref().map(|s| s.at(progress));
        let mut stats = PpoStats::default();
        // The epochs step one flat parameter vector where the policy has that path; the
        // module's tensors get it back at the end, whatever happens. They run on a pool thread:
        // each minibatch splits into actor and critic halves (see `threads::on_pool`).
        self.policy.begin_flat();
        let result = rl_training_core::threads::on_pool(|| {
            self.epochs(buf, progress, lr, clip, clip_vf, &mut stats)
        });
        self.policy.end_flat();
        result?;
        Ok(stats.metrics(buf, lr, clip))
    }

    fn weights(&self) -> TensorMap {
        module_tensors(&self.policy)
    }

    fn set_weights(&mut self, weights: &TensorMap) -> Result<(), RlError> {
        Ok(set_module_tensors(&mut self.policy, weights, &self.device)?)
    }

    fn save_state(&self) -> LearnerState {
        save_with_minibatch_rng(&self.policy, &self.opt, "adam", &self.rng_batch)
    }

    fn load_state(&mut self, ck: &Checkpoint, entries: &Map<String, Value>) -> Result<(), RlError> {
        let (policy, opt) = (&mut self.policy, &mut self.opt);
        self.rng_batch = load_with_minibatch_rng(ck, entries, policy, opt, "adam", &self.device)?;
        Ok(())
    }
}

impl PpoLearner {
    /// PPO's epochs over `buf`, minibatch by minibatch, until done or the KL early stop.
    fn epochs(
        &mut self,
        buf: &RolloutBuffer,
        progress: &Progress,
        lr: f64,
        clip: f64,
        clip_vf: Option<f64>,
        stats: &mut PpoStats,
    ) -> Result<(), RlError> {
        let (od, ad) = (buf.obs_dim, buf.act_dim);
        'epochs: for _ in 0..self.cfg.n_epochs {
            for idx in buf.minibatches(self.cfg.batch_size, &mut self.rng_batch) {
                let b = idx.len();
                let pick = |v: &[f32]| idx.iter().map(|&i| v[i]).collect::<Vec<f32>>();
                let obs = tensor2(
                    RolloutBuffer::gather(&buf.obs, od, &idx),
                    b,
                    od,
                    &self.device,
                );
                let actions = tensor2(
                    RolloutBuffer::gather(&buf.actions, ad, &idx),
                    b,
                    ad,
                    &self.device,
                );
                let old_logp = pick(&buf.log_probs);
                let mut adv = pick(&buf.advantages);
                if self.cfg.normalize_advantage {
                    adv = loss::normalize_advantages(&adv);
                }
                let device = &self.device;
                let to1 = |v: Vec<f32>| tensor2(v, b, 1, device).squeeze_dim::<1>(1);
                let (policy, cfg) = (&self.policy, &self.cfg);
                // Policy-gradient and entropy terms: they reach only the policy parameters.
                let actor = |policy: &ActorCritic| {
                    let (logp, entropy) = policy.log_prob_entropy(obs.clone(), actions);
                    let (policy_loss, ratio) = loss::clipped_surrogate(
                        logp.clone(),
                        to1(old_logp.clone()),
                        to1(adv),
                        clip,
                    );
                    let entropy_loss = loss::entropy_loss(entropy, logp.clone());
                    let loss = policy_loss.clone() + entropy_loss.clone().mul_scalar(cfg.ent_coef);
                    let stats = (
                        host(logp.inner()),
                        host(ratio.inner()),
                        host(policy_loss.inner())[0] as f64,
                        host(entropy_loss.inner())[0] as f64,
                    );
                    (loss, stats)
                };
                let critic = |policy: &ActorCritic| {
                    let value_loss = loss::value_loss(
                        policy.values(obs.clone()),
                        to1(pick(&buf.values)),
                        to1(pick(&buf.returns)),
                        clip_vf,
                    );
                    let v = host(value_loss.clone().inner())[0] as f64;
                    (value_loss.mul_scalar(cfg.vf_coef), v)
                };
                let (flat_grad, (logp_h, ratio_h, pl, el), vlv) =
                    actor_critic_grads(policy, device, actor, critic);
                let losses = MinibatchLosses {
                    policy: pl,
                    value: vlv,
                    entropy: el,
                    approx_kl: loss::approx_kl(&logp_h, &old_logp),
                    clipfrac: loss::clip_fraction(&ratio_h, clip),
                };
                if stats.record(&losses, cfg, progress.num_timesteps)? {
                    break 'epochs;
                }
                let step = self.policy.step(&mut self.opt, lr, flat_grad);
                stats.grad_norms.push(step.grad_norm as f64);
            }
        }
        Ok(())
    }
}

/// The losses of one PPO minibatch (host values).
#[derive(Debug, Clone, Copy)]
pub struct MinibatchLosses {
    /// Clipped surrogate loss.
    pub policy: f64,
    /// Value loss (before `vf_coef`).
    pub value: f64,
    /// Entropy loss (before `ent_coef`).
    pub entropy: f64,
    /// Approximate KL between the old and the current policy.
    pub approx_kl: f64,
    /// Fraction of clipped ratios.
    pub clipfrac: f64,
}

/// What PPO's epochs record minibatch by minibatch, and the update's metrics from it (shared
/// with the recurrent variant).
#[derive(Debug, Default)]
pub struct PpoStats {
    losses: Vec<MinibatchLosses>,
    /// Global gradient norms before clipping, one per optimizer step.
    pub grad_norms: Vec<f64>,
    early_stop: bool,
}

impl PpoStats {
    /// Records a minibatch; fails when its loss is not finite; returns whether the KL
    /// early stop (`approx_kl > 1.5 × target_kl`) ends the update before this step.
    pub fn record(
        &mut self,
        l: &MinibatchLosses,
        cfg: &PpoConfig,
        step: u64,
    ) -> Result<bool, RlError> {
        let total = l.policy + cfg.ent_coef * l.entropy + cfg.vf_coef * l.value;
        rl_training_core::algorithm::check_losses(
            step,
            &[
                ("losses/policy_loss", l.policy),
                ("losses/value_loss", l.value),
                ("losses/entropy_loss", l.entropy),
                ("losses/total_loss", total),
            ],
        )?;
        self.losses.push(*l);
        self.early_stop = cfg.target_kl.is_some_and(|t| l.approx_kl > 1.5 * t);
        Ok(self.early_stop)
    }

    /// CleanRL's metrics of the update (means over minibatches) and the rollout's.
    pub fn metrics(&self, buf: &RolloutBuffer, lr: f64, clip: f64) -> Metrics {
        let mean = |f: fn(&MinibatchLosses) -> f64| {
            rl_training_on_policy::loss::mean(&self.losses.iter().map(f).collect::<Vec<_>>())
        };
        let mut m = Metrics::new();
        m.insert("losses/policy_loss".into(), mean(|l| l.policy));
        m.insert("losses/value_loss".into(), mean(|l| l.value));
        m.insert("losses/entropy".into(), mean(|l| -l.entropy));
        m.insert("losses/approx_kl".into(), mean(|l| l.approx_kl));
        m.insert("losses/clipfrac".into(), mean(|l| l.clipfrac));
        m.insert(
            "losses/grad_norm".into(),
            rl_training_on_policy::loss::mean(&self.grad_norms),
        );
        rl_training_on_policy::loss::rollout_metrics(&mut m, &buf.values, &buf.returns, lr);
        m.insert("charts/clip_range".into(), clip);
        m.insert("charts/early_stop".into(), self.early_stop as u8 as f64);
        m
    }
}

/// A PPO agent with its envs, ready to train.
pub type Ppo = OnPolicyAgent<PpoLearner>;

impl OnPolicyLearner for PpoLearner {
    type Config = PpoConfig;
    type Policy = ActorCritic;
    const NAME: &'static str = "ppo";

    /// The minibatch order comes from the run's `minibatch` generator.
    fn build(cfg: PpoConfig, policy: ActorCritic, ctx: &BuildContext) -> Result<Self, RlError> {
        let rng = ctx.rng("minibatch");
        Ok(Self::new(cfg, policy, ctx.device.clone(), rng))
    }

    fn config(&self) -> &PpoConfig {
        &self.cfg
    }

    fn policy(&self) -> &ActorCritic {
        &self.policy
    }
}
