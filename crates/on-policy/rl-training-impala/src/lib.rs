//! rl-training-impala: IMPALA (Espeholt et al. 2018). Env runners (threads, each with its own vector
//! env and a copy of the policy) collect `n_steps`-step batches and send them, tagged with the
//! policy version they acted with, through rl-training-core's bounded [`ChannelTransport`]; the learner
//! corrects for the policy lag with V-trace, takes one gradient step per batch (plus replayed
//! ones with `replay_proportion`) and broadcasts versioned weights every
//! `broadcast_interval` updates. With `lockstep` the learner asks the runners in a fixed order
//! instead, so seeded runs are reproducible.
#![warn(missing_docs)]

pub mod config;
pub mod loss;

pub use config::{ImpalaConfig, OptType};

use rl_training_core::Rng;
pub use rl_training_core::agent::EnvMaker;
use rl_training_core::algorithm::{
    Learner, LearnerState, Progress, RlError, check_losses, state_entry,
};
use rl_training_core::batch::{host, tensor1, tensor2};
use rl_training_core::burn::module::Module;
use rl_training_core::burn::tensor::Device;
use rl_training_core::checkpoint::Checkpoint;
use rl_training_core::logger::Metrics;
use rl_training_core::optim::{FlatOptimizer, OptimizerKind};
use rl_training_core::params::{TensorMap, module_tensors, set_module_tensors};
pub use rl_training_on_policy::actor_learner::RunnerBatch;
use rl_training_on_policy::actor_learner::{ActorLearner, ActorLearnerAgent, LearnerSettings};
use rl_training_on_policy::multi_agent::{ActorLearnerPolicy, MultiAgentOnPolicy};
use rl_training_on_policy::{
    ActorCritic, BuildContext, PolicyKwargs, actor_critic_grads, load_policy_and_optimizer,
    save_policy_and_optimizer,
};
use serde_json::{Map, Value};
use std::collections::VecDeque;
use std::sync::Arc;

/// The learning side of IMPALA: the policy, its optimizer, the replay of recent batches and
/// the generator that draws from it.
pub struct ImpalaLearner {
    cfg: ImpalaConfig,
    device: Device,
    policy: ActorCritic,
    opt: FlatOptimizer,
    /// Recent batches for `replay_proportion` (not checkpointed: it starts empty).
    replay: VecDeque<Arc<RunnerBatch>>,
    rng: Rng,
    /// Batches replayed in the current iteration.
    replayed: u64,
}

/// An IMPALA agent: the learner and its env runners.
pub type Impala = ActorLearnerAgent<ImpalaLearner>;

/// A multi-agent IMPALA run: a learner per learned policy, the multi-agent shell as its
/// env runner (see [`ActorLearnerPolicy`]).
pub type MultiAgentImpala = MultiAgentOnPolicy<ActorLearnerPolicy<ImpalaLearner>>;

impl ImpalaLearner {
    /// A learner for `policy` (autodiff `device`).
    pub fn new(cfg: ImpalaConfig, policy: ActorCritic, device: Device, rng: Rng) -> Self {
        let kind = match cfg.opt_type {
            OptType::Adam => OptimizerKind::adam(cfg.epsilon),
            OptType::Rmsprop => OptimizerKind::RmsProp {
                alpha: cfg.decay,
                eps: cfg.epsilon,
            },
        };
        Self {
            opt: FlatOptimizer::new(kind, cfg.grad_clip),
            cfg,
            device,
            policy,
            replay: VecDeque::new(),
            rng,
            replayed: 0,
        }
    }
}

impl Learner for ImpalaLearner {
    type Batch = RunnerBatch;

    /// One V-trace update of the policy on `batch`.
    fn update(&mut self, batch: &RunnerBatch, progress: &Progress) -> Result<Metrics, RlError> {
        let cfg = &self.cfg;
        let buf = &batch.buffer;
        let (b, n, od, ad) = (buf.len(), batch.bootstrap_rows(), buf.obs_dim, buf.act_dim);
        let lr = cfg.learning_rate.at(progress);
        let ent_coef = cfg.ent_coef.at(progress);
        let dev = &self.device;
        let obs = tensor2(buf.obs.clone(), b, od, dev);
        let actions = tensor2(buf.actions.clone(), b, ad, dev);
        // Targets from the current policy, without gradients (the same tensors, off the tape).
        let valid = self.policy.valid();
        let out = valid.forward(obs.clone().inner());
        let target_logp = host(valid.dist.log_prob(
            out.params,
            out.log_std,
            actions.clone().inner(),
        ));
        let values = host(out.values);
        let infer = dev.clone().inner();
        let bootstrap = host(valid.values(tensor2(batch.last_obs.clone(), n, od, &infer)));
        let vt = loss::batch_vtrace(
            batch,
            &target_logp,
            &values,
            &bootstrap,
            cfg.gamma,
            cfg.shared.vtrace_clip_rho,
            cfg.shared.vtrace_clip_c,
        );
        let f32s = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
        let (vs, pg_adv) = (f32s(&vt.vs), f32s(&vt.pg_advantages));
        let scalar =
            |t: &rl_training_core::burn::tensor::Tensor<1>| host(t.clone().inner())[0] as f64;
        let actor = |policy: &ActorCritic| {
            let (logp, entropy) = policy.log_prob_entropy(obs.clone(), actions);
            let pg = loss::policy_gradient_loss(logp.clone(), tensor1(pg_adv, dev));
            let ent = rl_training_on_policy::loss::entropy_loss(entropy, logp);
            let hs = (scalar(&pg), scalar(&ent));
            (pg + ent.mul_scalar(ent_coef), hs)
        };
        let critic = |policy: &ActorCritic| {
            let vf =
                rl_training_on_policy::loss::half_mse(tensor1(vs, dev), policy.values(obs.clone()));
            let h = scalar(&vf);
            (vf.mul_scalar(cfg.vf_coef), h)
        };
        let (g, (pg, ent), vf) = actor_critic_grads(&self.policy, dev, actor, critic);
        check_losses(
            progress.num_timesteps,
            &[
                ("losses/policy_loss", pg),
                ("losses/value_loss", vf),
                ("losses/entropy_loss", ent),
            ],
        )?;
        let (policy, step) = self.opt.step_flat(lr, self.policy.clone(), g);
        self.policy = policy;
        let rhos = &vt.clipped_rhos;
        let mut m = Metrics::new();
        m.insert("losses/policy_loss".into(), pg);
        m.insert("losses/value_loss".into(), vf);
        m.insert("losses/entropy".into(), -ent);
        m.insert("losses/grad_norm".into(), step.grad_norm as f64);
        m.insert(
            "losses/mean_clipped_rho".into(),
            rhos.iter().sum::<f64>() / rhos.len().max(1) as f64,
        );
        Ok(m)
    }

    fn weights(&self) -> TensorMap {
        module_tensors(&self.policy)
    }

    fn set_weights(&mut self, weights: &TensorMap) -> Result<(), RlError> {
        Ok(set_module_tensors(&mut self.policy, weights, &self.device)?)
    }

    /// The policy, the optimizer and the replay generator (the replay itself starts empty).
    fn save_state(&self) -> LearnerState {
        let mut state = save_policy_and_optimizer(&self.policy, &self.opt, "optimizer");
        state.insert("rng", &self.rng);
        state
    }

    fn load_state(&mut self, ck: &Checkpoint, entries: &Map<String, Value>) -> Result<(), RlError> {
        let (policy, opt) = (&mut self.policy, &mut self.opt);
        load_policy_and_optimizer(ck, entries, policy, opt, "optimizer", &self.device)?;
        self.rng = state_entry(ck, entries, "rng")?;
        Ok(())
    }
}

impl ActorLearner for ImpalaLearner {
    type Config = ImpalaConfig;
    const NAME: &'static str = "impala";

    /// IMPALA's runners compute no GAE (λ = 1): V-trace corrects the returns.
    fn settings(cfg: &ImpalaConfig) -> LearnerSettings {
        let n = cfg.num_env_runners;
        cfg.shared.settings(n, cfg.n_steps, cfg.gamma, 1.0)
    }

    fn policy_kwargs(cfg: &ImpalaConfig) -> &PolicyKwargs {
        &cfg.shared.policy_kwargs
    }

    fn build(cfg: ImpalaConfig, policy: ActorCritic, ctx: &BuildContext) -> Result<Self, RlError> {
        Ok(Self::new(
            cfg,
            policy,
            ctx.device.clone(),
            ctx.rng("learner"),
        ))
    }

    fn config(&self) -> &ImpalaConfig {
        &self.cfg
    }

    fn policy(&self) -> &ActorCritic {
        &self.policy
    }

    /// The batch, then `replay_proportion` replayed ones on average (drawn from the recent
    /// batches before the new one joins them).
    fn schedule(&mut self, admitted: RunnerBatch) -> Vec<Arc<RunnerBatch>> {
        let batch = Arc::new(admitted);
        let mut out = vec![batch.clone()];
        if self.cfg.replay_buffer_num_slots > 0 {
            let p = self.cfg.replay_proportion;
            let mut k = p.floor() as u64;
            if self.rng.uniform() < p - p.floor() {
                k += 1;
            }
            for _ in 0..k.min(self.replay.len() as u64) {
                let j = self.rng.below(self.replay.len() as u64) as usize;
                out.push(self.replay[j].clone());
                self.replayed += 1;
            }
            if self.replay.len() == self.cfg.replay_buffer_num_slots {
                self.replay.pop_front();
            }
            self.replay.push_back(batch);
        }
        out
    }

    fn iteration_metrics(&mut self, progress: &Progress, m: &mut Metrics) {
        m.insert(
            "charts/learning_rate".into(),
            self.cfg.learning_rate.at(progress),
        );
        m.insert("perf/replayed_batches".into(), self.replayed as f64);
        self.replayed = 0;
    }
}
