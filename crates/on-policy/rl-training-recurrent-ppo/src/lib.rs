//! rl-training-recurrent-ppo: PPO with LSTM policies (sb3-contrib's `RecurrentPPO`, "PPO-LSTM") for
//! partially observed tasks. Collection steps the LSTMs env by env, resetting a state where
//! its episode starts and storing the state every step started from; training cuts the
//! rollout into sequences of at most `sequence_length` steps that never cross an episode
//! start, pads them with masks, and runs PPO's clipped loss (masked means) over minibatches of
//! whole sequences from their stored initial states: truncated backpropagation through time.
#![warn(missing_docs)]

pub mod config;
pub mod loss;

pub use config::{LstmSettings, RecurrentPpoConfig};

use rl_training_core::Rng;
use rl_training_core::algorithm::{Learner, LearnerState, Progress, RlError};
use rl_training_core::buffers::RolloutBuffer;
use rl_training_core::burn::tensor::{Device, Tensor, TensorData};
use rl_training_core::checkpoint::Checkpoint;
use rl_training_core::logger::Metrics;
use rl_training_core::optim::{FlatOptimizer, OptimizerKind};
use rl_training_core::params::{TensorMap, module_tensors, set_module_tensors};
use rl_training_core::sequences::{Sequence, pad_sequences, sequence_minibatches, split_sequences};
use rl_training_core::{Space, batch::host, batch::tensor1, batch::tensor2};
pub use rl_training_on_policy::EnvMaker;
use rl_training_on_policy::agent::{load_with_minibatch_rng, save_with_minibatch_rng, split_grads};
use rl_training_on_policy::recurrent::RecurrentActorCritic;
use rl_training_on_policy::{BuildContext, OnPolicyAgent, OnPolicyLearner, PolicyFor};
use rl_training_ppo::{MinibatchLosses, PpoStats};
use serde_json::{Map, Value};

/// One minibatch of padded sequences, host side.
struct SequenceBatch {
    n_seq: usize,
    obs: Vec<f32>,
    actions: Vec<f32>,
    mask: Vec<f32>,
    old_log_probs: Vec<f32>,
    advantages: Vec<f32>,
    old_values: Vec<f32>,
    returns: Vec<f32>,
    /// Recurrent state each sequence starts from, `[n_seq × state_dim]`.
    init: Vec<f32>,
}

impl SequenceBatch {
    /// Gathers `seqs` from `buf`, padded to `len` steps.
    fn gather(buf: &RolloutBuffer, seqs: &[Sequence], len: usize) -> Self {
        let n = buf.n_envs;
        let pad1 = |v: &[f32]| pad_sequences(v, 1, n, seqs, len).0;
        let (obs, mask) = pad_sequences(&buf.obs, buf.obs_dim, n, seqs, len);
        let (mut actions, _) = pad_sequences(&buf.actions, buf.act_dim, n, seqs, len);
        // Padded steps take the sequence's first action, so that their (masked-out)
        // log-probabilities stay finite whatever the action space (a zero may be invalid).
        let ad = buf.act_dim;
        for (s, q) in seqs.iter().enumerate() {
            let first = buf.actions[q.index(0, n) * ad..(q.index(0, n) + 1) * ad].to_vec();
            for t in q.len..len {
                let o = (s * len + t) * ad;
                actions[o..o + ad].copy_from_slice(&first);
            }
        }
        let sd = buf.state_dim;
        let init = seqs
            .iter()
            .flat_map(|q| {
                let i = q.index(0, n);
                buf.states[i * sd..(i + 1) * sd].iter().copied()
            })
            .collect();
        Self {
            n_seq: seqs.len(),
            obs,
            actions,
            mask,
            old_log_probs: pad1(&buf.log_probs),
            advantages: pad1(&buf.advantages),
            old_values: pad1(&buf.values),
            returns: pad1(&buf.returns),
            init,
        }
    }

    /// Values at the real steps only.
    fn real(&self, v: &[f32]) -> Vec<f32> {
        v.iter()
            .zip(&self.mask)
            .filter(|(_, m)| **m > 0.5)
            .map(|(x, _)| *x)
            .collect()
    }
}

/// The optimization half of Recurrent PPO: the LSTM policy, its optimizer and the minibatch
/// generator.
pub struct RecurrentPpoLearner {
    cfg: RecurrentPpoConfig,
    device: Device,
    policy: RecurrentActorCritic,
    opt: FlatOptimizer,
    rng_batch: Rng,
}

impl RecurrentPpoLearner {
    /// A learner for `policy` (on the autodiff `device`) drawing minibatches from `rng_batch`.
    pub fn new(
        cfg: RecurrentPpoConfig,
        policy: RecurrentActorCritic,
        device: Device,
        rng_batch: Rng,
    ) -> Self {
        Self {
            opt: FlatOptimizer::new(OptimizerKind::adam(cfg.ppo.adam_eps), cfg.ppo.max_grad_norm),
            cfg,
            device,
            policy,
            rng_batch,
        }
    }
}

impl Learner for RecurrentPpoLearner {
    type Batch = RolloutBuffer;

    /// One PPO update over a collected rollout, minibatches of whole sequences
    /// (sb3-contrib's `RecurrentPPO.train`, sequences capped at `sequence_length`), on a pool
    /// thread: each minibatch splits into actor and critic halves (see `threads::on_pool`).
    fn update(&mut self, buf: &RolloutBuffer, progress: &Progress) -> Result<Metrics, RlError> {
        rl_training_core::threads::on_pool(|| self.epochs(buf, progress))
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

/// A Recurrent PPO agent with its envs, ready to train.
pub type RecurrentPpo = OnPolicyAgent<RecurrentPpoLearner>;

impl RecurrentPpoLearner {
    /// The update's epochs (see [`Learner::update`]).
    fn epochs(&mut self, buf: &RolloutBuffer, progress: &Progress) -> Result<Metrics, RlError> {
        let cfg = &self.cfg.ppo;
        let lr = cfg.learning_rate.at(progress);
        let clip = cfg.clip_range.at(progress);
        let clip_vf = cfg.clip_range_vf.as_ref().map(|s| s.at(progress));
        let len = self.cfg.lstm.sequence_length;
        let seqs = split_sequences(&buf.episode_starts, buf.n_steps, buf.n_envs, len);
        let mut stats = PpoStats::default();
        'epochs: for _ in 0..cfg.n_epochs {
            for mb in sequence_minibatches(&seqs, cfg.batch_size, &mut self.rng_batch) {
                let chosen: Vec<Sequence> = mb.iter().map(|&i| seqs[i]).collect();
                let mut b = SequenceBatch::gather(buf, &chosen, len);
                if cfg.normalize_advantage {
                    b.advantages = loss::normalize_masked(&b.advantages, &b.mask);
                }
                let device = &self.device;
                let rows = b.n_seq * len;
                let t1 = |v: &[f32]| tensor1(v.to_vec(), device);
                let obs = Tensor::<3>::from_data(
                    TensorData::new(b.obs.clone(), [b.n_seq, len, buf.obs_dim]),
                    device,
                );
                let policy = &self.policy;
                let b = &b;
                // Policy-gradient and entropy terms: they reach only the actor's parameters.
                let actor = |policy: &RecurrentActorCritic| {
                    let (params, log_std) = policy.actor_sequences(obs.clone(), &b.init);
                    let actions = tensor2(b.actions.clone(), rows, buf.act_dim, device);
                    let dist = &policy.ac.dist;
                    let logp = dist.log_prob(params.clone(), log_std.clone(), actions);
                    let entropy = dist.entropy(params, log_std);
                    let mask = t1(&b.mask);
                    let (policy_loss, ratio) = loss::masked_surrogate(
                        logp.clone(),
                        t1(&b.old_log_probs),
                        t1(&b.advantages),
                        mask.clone(),
                        clip,
                    );
                    let entropy_loss = loss::masked_entropy_loss(entropy, logp.clone(), mask);
                    let total = policy_loss.clone() + entropy_loss.clone().mul_scalar(cfg.ent_coef);
                    let stats = (
                        host(logp.inner()),
                        host(ratio.inner()),
                        host(policy_loss.inner())[0] as f64,
                        host(entropy_loss.inner())[0] as f64,
                    );
                    (total, stats)
                };
                let critic = |policy: &RecurrentActorCritic| {
                    let value_loss = loss::masked_value_loss(
                        policy.critic_sequences(obs.clone(), &b.init),
                        t1(&b.old_values),
                        t1(&b.returns),
                        t1(&b.mask),
                        clip_vf,
                    );
                    let v = host(value_loss.clone().inner())[0] as f64;
                    (value_loss.mul_scalar(cfg.vf_coef), v)
                };
                // Separate MLPs after the LSTMs: the two losses reach disjoint parameters.
                let (flat_grad, (logp_h, ratio_h, pl, el), vlv) =
                    split_grads(policy, policy.ac.vf.is_some(), device, actor, critic);
                let losses = MinibatchLosses {
                    policy: pl,
                    value: vlv,
                    entropy: el,
                    approx_kl: rl_training_ppo::loss::approx_kl(
                        &b.real(&logp_h),
                        &b.real(&b.old_log_probs),
                    ),
                    clipfrac: rl_training_ppo::loss::clip_fraction(&b.real(&ratio_h), clip),
                };
                if stats.record(&losses, cfg, progress.num_timesteps)? {
                    break 'epochs;
                }
                let (policy, step) = self.opt.step_flat(lr, self.policy.clone(), flat_grad);
                self.policy = policy;
                stats.grad_norms.push(step.grad_norm as f64);
            }
        }
        let mut m = stats.metrics(buf, lr, clip);
        m.insert("charts/sequences".into(), seqs.len() as f64);
        Ok(m)
    }
}

impl OnPolicyLearner for RecurrentPpoLearner {
    type Config = RecurrentPpoConfig;
    type Policy = RecurrentActorCritic;
    const NAME: &'static str = "recurrent_ppo";

    fn build(
        cfg: RecurrentPpoConfig,
        policy: RecurrentActorCritic,
        ctx: &BuildContext,
    ) -> Result<Self, RlError> {
        Ok(Self::new(
            cfg,
            policy,
            ctx.device.clone(),
            ctx.rng("minibatch"),
        ))
    }

    fn config(&self) -> &RecurrentPpoConfig {
        &self.cfg
    }

    fn policy(&self) -> &RecurrentActorCritic {
        &self.policy
    }
}

/// The LSTM policy a Recurrent PPO config describes.
impl PolicyFor<RecurrentPpoConfig> for RecurrentActorCritic {
    fn for_config(
        cfg: &RecurrentPpoConfig,
        obs_space: &Space,
        act_space: &Space,
        rng: &mut Rng,
        device: &Device,
    ) -> Result<Self, String> {
        let (l, p) = (&cfg.lstm, &cfg.ppo);
        let (hidden, layers, shared) = (l.lstm_hidden_size, l.n_lstm_layers, l.shared_lstm);
        let kw = &p.actor_critic.policy_kwargs;
        RecurrentActorCritic::new(
            obs_space,
            act_space,
            kw,
            hidden,
            layers,
            shared,
            p.actor_critic.use_sde,
            rng,
            device,
        )
    }
}
