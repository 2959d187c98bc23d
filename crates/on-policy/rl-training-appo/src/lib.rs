//! rl-training-appo: APPO, asynchronous PPO (RLlib's), on the family's actor-learner shell: env runners
//! on threads (or lockstep) send batches tagged with their policy version; the learner puts
//! each into a circular buffer of `circular_buffer_num_batches`, trains on a batch drawn from
//! it (`n_epochs` passes in minibatches of `batch_size`; each batch is used
//! `circular_buffer_iterations_per_batch` times), with PPO's clipped surrogate taken against a
//! target network (`target_network_update_freq`, `tau`) and the runner's behaviour policy
//! corrected by a clipped importance ratio (`target_worker_clipping`); advantages and value
//! targets by V-trace (`vtrace`) or the runners' GAE; optional adaptive KL penalty
//! (`use_kl_loss`, `kl_coeff`, `kl_target`).
#![warn(missing_docs)]

pub mod config;
pub mod loss;

pub use config::AppoConfig;

use rl_training_core::Rng;
pub use rl_training_core::agent::EnvMaker;
use rl_training_core::algorithm::{
    Learner, LearnerState, Progress, RlError, check_losses, state_entry,
};
use rl_training_core::batch::{host, tensor1, tensor2};
use rl_training_core::buffers::RolloutBuffer;
use rl_training_core::burn::module::Module;
use rl_training_core::burn::tensor::Device;
use rl_training_core::checkpoint::{Checkpoint, read_module};
use rl_training_core::logger::Metrics;
use rl_training_core::optim::{FlatOptimizer, OptimizerKind};
use rl_training_core::params::{TensorMap, module_tensors, polyak, set_module_tensors};
use rl_training_on_policy::actor_learner::{
    ActorLearner, ActorLearnerAgent, LearnerSettings, RunnerBatch, batch_vtrace,
};
use rl_training_on_policy::multi_agent::{ActorLearnerPolicy, MultiAgentOnPolicy};
use rl_training_on_policy::{
    ActorCritic, BuildContext, PolicyKwargs, actor_critic_grads, load_policy_and_optimizer,
    save_policy_and_optimizer,
};
use serde_json::{Map, Value};
use std::collections::VecDeque;
use std::sync::Arc;

/// The learning side of APPO: the policy, its optimizer and target network, the circular
/// buffer of recent batches, the adaptive KL coefficient, the minibatch generator.
pub struct AppoLearner {
    cfg: AppoConfig,
    device: Device,
    policy: ActorCritic,
    opt: FlatOptimizer,
    target: ActorCritic,
    /// Batches and how many more times each may be trained on (not checkpointed).
    circular: VecDeque<(Arc<RunnerBatch>, usize)>,
    kl_coeff: f64,
    rng: Rng,
    /// Learner updates so far (the target network's schedule).
    updates: u64,
}

/// An APPO agent: the learner and its env runners.
pub type Appo = ActorLearnerAgent<AppoLearner>;

/// A multi-agent APPO run: a learner per learned policy, the multi-agent shell as its
/// env runner (see [`ActorLearnerPolicy`]).
pub type MultiAgentAppo = MultiAgentOnPolicy<ActorLearnerPolicy<AppoLearner>>;

/// Host losses of one update, minibatch by minibatch.
#[derive(Default)]
struct Stats {
    pg: Vec<f64>,
    vf: Vec<f64>,
    ent: Vec<f64>,
    kl: Vec<f64>,
    clipfrac: Vec<f64>,
    grad_norm: Vec<f64>,
}

impl Stats {
    /// The update's metrics: means over its minibatches.
    fn metrics(&self) -> Metrics {
        let mean = rl_training_on_policy::loss::mean;
        let mut m = Metrics::new();
        m.insert("losses/policy_loss".into(), mean(&self.pg));
        m.insert("losses/value_loss".into(), mean(&self.vf));
        m.insert("losses/entropy".into(), mean(&self.ent));
        m.insert("losses/approx_kl".into(), mean(&self.kl));
        m.insert("losses/clipfrac".into(), mean(&self.clipfrac));
        m.insert("losses/grad_norm".into(), mean(&self.grad_norm));
        m
    }
}

impl Learner for AppoLearner {
    type Batch = RunnerBatch;

    /// `n_epochs` passes over `batch` in minibatches; then the target network update when
    /// due and the KL coefficient's adaptation.
    fn update(&mut self, batch: &RunnerBatch, progress: &Progress) -> Result<Metrics, RlError> {
        let cfg = &self.cfg;
        let buf: &RolloutBuffer = &batch.buffer;
        let (b, n, od, ad) = (buf.len(), batch.bootstrap_rows(), buf.obs_dim, buf.act_dim);
        let infer = self.device.clone().inner();
        let (lr, ent_coef) = (cfg.learning_rate.at(progress), cfg.ent_coef.at(progress));
        let mut stats = Stats::default();
        // The target network's view of the whole batch (no gradients).
        let tv = self.target.valid();
        let t_out = tv.forward(tensor2(buf.obs.clone(), b, od, &infer));
        let t_params = host(t_out.params.clone());
        let t_log_std = t_out.log_std.clone().map(host).unwrap_or_default();
        let target_logp = host(tv.dist.log_prob(
            t_out.params,
            t_out.log_std,
            tensor2(buf.actions.clone(), b, ad, &infer),
        ));
        let (adv, targets) = if cfg.vtrace {
            let cur = self.policy.valid();
            let values = host(cur.values(tensor2(buf.obs.clone(), b, od, &infer)));
            let boot = host(cur.values(tensor2(batch.last_obs.clone(), n, od, &infer)));
            let vt = batch_vtrace(
                batch,
                &target_logp,
                &values,
                &boot,
                cfg.gamma,
                cfg.shared.vtrace_clip_rho,
                cfg.shared.vtrace_clip_c,
            );
            let f = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
            (f(&vt.pg_advantages), f(&vt.vs))
        } else {
            (buf.advantages.clone(), buf.returns.clone())
        };
        let pd = tv.dist.param_dim();
        let ls_rows = t_log_std.len() / pd.max(1);
        let mut kls = Vec::new();
        for _ in 0..cfg.n_epochs {
            for idx in buf.minibatches(cfg.batch_size, &mut self.rng) {
                let m = idx.len();
                let dev = &self.device;
                let pick = |v: &[f32]| idx.iter().map(|&i| v[i]).collect::<Vec<f32>>();
                let obs = tensor2(RolloutBuffer::gather(&buf.obs, od, &idx), m, od, dev);
                let actions = tensor2(RolloutBuffer::gather(&buf.actions, ad, &idx), m, ad, dev);
                let tp = tensor2(RolloutBuffer::gather(&t_params, pd, &idx), m, pd, dev);
                // State-independent log-std is one row; gSDE's is per sample.
                let tls = (!t_log_std.is_empty()).then(|| {
                    if ls_rows == 1 {
                        tensor2(t_log_std.clone(), 1, pd, dev)
                    } else {
                        tensor2(RolloutBuffer::gather(&t_log_std, pd, &idx), m, pd, dev)
                    }
                });
                let (policy, kl_coeff) = (&self.policy, self.kl_coeff);
                let actor = |policy: &ActorCritic| {
                    let latent = policy.actor_latent(obs.clone());
                    let log_std = policy.dist_log_std(&latent);
                    let params = policy.action_head(latent);
                    let logp = policy
                        .dist
                        .log_prob(params.clone(), log_std.clone(), actions);
                    let entropy = policy.dist.entropy(params.clone(), log_std.clone());
                    let (pg, ratio) = loss::appo_surrogate(
                        logp.clone(),
                        tensor1(pick(&target_logp), dev),
                        tensor1(pick(&buf.log_probs), dev),
                        tensor1(pick(&adv), dev),
                        cfg.clip_range,
                        cfg.target_worker_clipping,
                    );
                    let ent = rl_training_on_policy::loss::entropy_loss(entropy, logp);
                    let kl = policy.dist.kl(tp, tls, params, log_std).mean();
                    let mut total = pg.clone() + ent.clone().mul_scalar(ent_coef);
                    if cfg.use_kl_loss {
                        total = total + kl.clone().mul_scalar(kl_coeff);
                    }
                    let h =
                        |t: rl_training_core::burn::tensor::Tensor<1>| host(t.inner())[0] as f64;
                    let r = host(ratio.inner());
                    (total, (h(pg), h(ent), h(kl), r))
                };
                let critic = |policy: &ActorCritic| {
                    let vf = rl_training_on_policy::loss::half_mse(
                        tensor1(pick(&targets), dev),
                        policy.values(obs.clone()),
                    );
                    let h = host(vf.clone().inner())[0] as f64;
                    (vf.mul_scalar(cfg.vf_coef), h)
                };
                let (g, (pg, ent, kl, ratio), vf) = actor_critic_grads(policy, dev, actor, critic);
                check_losses(
                    progress.num_timesteps,
                    &[
                        ("losses/policy_loss", pg),
                        ("losses/value_loss", vf),
                        ("losses/entropy_loss", ent),
                    ],
                )?;
                let (p, step) = self.opt.step_flat(lr, self.policy.clone(), g);
                self.policy = p;
                let grad_norm = step.grad_norm;
                stats.pg.push(pg);
                stats.vf.push(vf);
                stats.ent.push(-ent);
                stats.kl.push(kl);
                kls.push(kl);
                stats
                    .clipfrac
                    .push(rl_training_on_policy::loss::clip_fraction(
                        &ratio,
                        cfg.clip_range,
                    ));
                stats.grad_norm.push(grad_norm as f64);
            }
        }
        self.updates += 1;
        if self.updates.is_multiple_of(cfg.target_network_update_freq) {
            self.target = polyak(self.target.clone(), &self.policy, cfg.tau);
        }
        if cfg.use_kl_loss {
            let mean_kl = rl_training_on_policy::loss::mean(&kls);
            self.kl_coeff = loss::adapt_kl_coeff(self.kl_coeff, mean_kl, cfg.kl_target);
        }
        Ok(stats.metrics())
    }

    fn weights(&self) -> TensorMap {
        module_tensors(&self.policy)
    }

    fn set_weights(&mut self, weights: &TensorMap) -> Result<(), RlError> {
        Ok(set_module_tensors(&mut self.policy, weights, &self.device)?)
    }

    /// The policy, the optimizer, the target network, the KL coefficient, the update count
    /// and the generator (the circular buffer starts empty).
    fn save_state(&self) -> LearnerState {
        let mut state = save_policy_and_optimizer(&self.policy, &self.opt, "optimizer");
        state.file(
            "target.safetensors",
            module_tensors(&self.target).to_bytes(),
        );
        state.insert("kl_coeff", self.kl_coeff);
        state.insert("updates", self.updates);
        state.insert("rng", &self.rng);
        state
    }

    fn load_state(&mut self, ck: &Checkpoint, entries: &Map<String, Value>) -> Result<(), RlError> {
        let (policy, opt) = (&mut self.policy, &mut self.opt);
        load_policy_and_optimizer(ck, entries, policy, opt, "optimizer", &self.device)?;
        self.target = read_module(ck, "target.safetensors", self.target.clone(), &self.device)?;
        self.kl_coeff = state_entry(ck, entries, "kl_coeff")?;
        self.updates = state_entry(ck, entries, "updates")?;
        self.rng = state_entry(ck, entries, "rng")?;
        Ok(())
    }
}

impl ActorLearner for AppoLearner {
    type Config = AppoConfig;
    const NAME: &'static str = "appo";

    /// The runners' GAE (`use_gae`) gives the advantages when V-trace is off.
    fn settings(cfg: &AppoConfig) -> LearnerSettings {
        let lambda = if cfg.use_gae { cfg.gae_lambda } else { 1.0 };
        let n = cfg.num_env_runners;
        cfg.shared.settings(n, cfg.n_steps, cfg.gamma, lambda)
    }

    fn policy_kwargs(cfg: &AppoConfig) -> &PolicyKwargs {
        &cfg.shared.policy_kwargs
    }

    /// The target network starts as a copy of the policy.
    fn build(cfg: AppoConfig, policy: ActorCritic, ctx: &BuildContext) -> Result<Self, RlError> {
        Ok(Self {
            opt: FlatOptimizer::new(OptimizerKind::adam(cfg.epsilon), cfg.grad_clip),
            target: policy.clone(),
            kl_coeff: cfg.kl_coeff,
            cfg,
            device: ctx.device.clone(),
            policy,
            circular: VecDeque::new(),
            rng: ctx.rng("learner"),
            updates: 0,
        })
    }

    fn config(&self) -> &AppoConfig {
        &self.cfg
    }

    fn policy(&self) -> &ActorCritic {
        &self.policy
    }

    /// The batch joins the circular buffer; one batch drawn from it is learned from (and
    /// leaves it after `circular_buffer_iterations_per_batch` uses).
    fn schedule(&mut self, admitted: RunnerBatch) -> Vec<Arc<RunnerBatch>> {
        if self.circular.len() == self.cfg.circular_buffer_num_batches {
            self.circular.pop_front();
        }
        let uses = self.cfg.circular_buffer_iterations_per_batch;
        self.circular.push_back((Arc::new(admitted), uses));
        let j = self.rng.below(self.circular.len() as u64) as usize;
        let (batch, uses) = self
            .circular
            .remove(j)
            .expect("index drawn below the length");
        if uses > 1 {
            self.circular.insert(j, (batch.clone(), uses - 1));
        }
        vec![batch]
    }

    fn iteration_metrics(&mut self, progress: &Progress, m: &mut Metrics) {
        m.insert("charts/kl_coeff".into(), self.kl_coeff);
        m.insert(
            "charts/learning_rate".into(),
            self.cfg.learning_rate.at(progress),
        );
        m.insert(
            "perf/circular_buffer_len".into(),
            self.circular.len() as f64,
        );
    }
}
