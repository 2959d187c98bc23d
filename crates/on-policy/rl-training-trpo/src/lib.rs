//! rl-training-trpo: Trust Region Policy Optimization (Schulman et al. 2015) as sb3-contrib's `TRPO`:
//! the policy takes the natural-gradient step (conjugate gradient on Fisher-vector products)
//! scaled to the KL trust region and checked by a backtracking line search; the value function
//! is fitted by Adam on minibatches.
#![warn(missing_docs)]

pub mod config;
pub mod loss;

pub use config::TrpoConfig;

use rl_training_core::Rng;
use rl_training_core::algorithm::{Learner, LearnerState, Progress, RlError};
use rl_training_core::batch::{host, tensor1, tensor2};
use rl_training_core::buffers::RolloutBuffer;
use rl_training_core::burn::tensor::Device;
use rl_training_core::checkpoint::Checkpoint;
use rl_training_core::logger::Metrics;
use rl_training_core::optim::{FlatOptimizer, OptimizerKind};
use rl_training_core::params::{TensorMap, module_tensors, set_module_tensors};
use rl_training_core::params::{flat_grads, flat_params, set_flat};
pub use rl_training_on_policy::EnvMaker;
use rl_training_on_policy::agent::{load_with_minibatch_rng, save_with_minibatch_rng};
use rl_training_on_policy::{ActorCritic, BuildContext, OnPolicyAgent, OnPolicyLearner};
use serde_json::{Map, Value};

/// Name of the value optimizer's state inside `optimizer.safetensors`.
const OPT: &str = "adam";

/// The optimization half of TRPO: the policy, the value function's optimizer and the
/// minibatch generator.
pub struct TrpoLearner {
    cfg: TrpoConfig,
    device: Device,
    policy: ActorCritic,
    opt: FlatOptimizer,
    rng_batch: Rng,
}

impl TrpoLearner {
    /// The natural-gradient step of the policy on the rollout. Returns the metrics of the
    /// step.
    fn policy_step(&mut self, buf: &RolloutBuffer) -> Metrics {
        let cfg = &self.cfg;
        let dev = &self.device;
        let inner = dev.clone().inner();
        let (od, ad) = (buf.obs_dim, buf.act_dim);
        let idx: Vec<usize> = (0..buf.len()).step_by(cfg.sub_sampling_factor).collect();
        let b = idx.len();
        let obs_h = RolloutBuffer::gather(&buf.obs, od, &idx);
        let act_h = RolloutBuffer::gather(&buf.actions, ad, &idx);
        let old_logp: Vec<f32> = idx.iter().map(|&i| buf.log_probs[i]).collect();
        let mut adv: Vec<f32> = idx.iter().map(|&i| buf.advantages[i]).collect();
        if cfg.normalize_advantage {
            adv = loss::normalize_advantages(&adv);
        }
        let obs = tensor2(obs_h.clone(), b, od, dev);
        // The surrogate's gradient at the old parameters.
        let (logp, _) = self
            .policy
            .log_prob_entropy(obs.clone(), tensor2(act_h.clone(), b, ad, dev));
        let objective = loss::surrogate(
            logp,
            tensor1(old_logp.clone(), dev),
            tensor1(adv.clone(), dev),
        );
        let objective0 = host(objective.clone().inner())[0] as f64;
        let g = host(flat_grads(&self.policy, objective.backward(), dev).inner());
        let damping = cfg.cg_damping as f32;
        let policy = &self.policy;
        let fisher = loss::FisherProduct::new(policy, &obs);
        let fvp = |v: &[f32]| -> Vec<f32> {
            let mut f = fisher.apply(policy, &obs, v, dev);
            for (fi, &vi) in f.iter_mut().zip(v) {
                *fi += damping * vi;
            }
            f
        };
        let direction = loss::conjugate_gradient(fvp, &g, cfg.cg_max_steps, 1e-10);
        let max_step = loss::max_step_size(&direction, &fvp(&direction), cfg.target_kl);
        // The line search evaluates candidates on the inference copy: the old distribution,
        // observations, actions and advantages are fixed.
        let valid = fisher.valid();
        let obs_i = tensor2(obs_h, b, od, &inner);
        let act_i = tensor2(act_h, b, ad, &inner);
        let (old_logp_i, adv_i) = (tensor1(old_logp, &inner), tensor1(adv, &inner));
        let dist_out = |p: &ActorCritic| {
            let latent = p.pi.forward(obs_i.clone());
            let ls = p.dist_log_std(&latent);
            (p.action_head(latent), ls)
        };
        let (old_params, old_ls) = dist_out(valid);
        let theta0 = host(flat_params(valid));
        let search = loss::line_search(
            &theta0,
            &direction,
            max_step,
            cfg.line_search_shrinking_factor,
            cfg.line_search_max_iter,
            cfg.target_kl,
            objective0,
            |cand| {
                let p = set_flat(valid.clone(), tensor1(cand.to_vec(), &inner));
                let (params, ls) = dist_out(&p);
                let logp = p.dist.log_prob(params.clone(), ls.clone(), act_i.clone());
                let obj = loss::surrogate(logp, old_logp_i.clone(), adv_i.clone());
                let kl = p
                    .dist
                    .kl(params, ls, old_params.clone(), old_ls.clone())
                    .mean();
                (host(obj)[0] as f64, host(kl)[0] as f64)
            },
        );
        let mut m = Metrics::new();
        m.insert("losses/policy_objective".into(), search.objective);
        m.insert("losses/kl_divergence".into(), search.kl);
        m.insert(
            "losses/line_search_success".into(),
            search.params.is_some() as u8 as f64,
        );
        m.insert("losses/line_search_steps".into(), search.tries as f64);
        if let Some(p) = search.params {
            self.policy = set_flat(self.policy.clone(), tensor1(p, &inner));
        }
        if let Some(ls) = &self.policy.log_std {
            let s = host(ls.val().inner());
            let mean_std = s.iter().map(|&l| (l as f64).exp()).sum::<f64>() / s.len().max(1) as f64;
            m.insert("charts/std".into(), mean_std);
        }
        m
    }
}

impl Learner for TrpoLearner {
    type Batch = RolloutBuffer;

    /// One TRPO update (sb3-contrib's `TRPO.train`): the policy step, then
    /// `n_critic_updates` passes of value regression in minibatches.
    fn update(&mut self, buf: &RolloutBuffer, progress: &Progress) -> Result<Metrics, RlError> {
        let lr = self.cfg.learning_rate.at(progress);
        let mut m = self.policy_step(buf);
        let od = buf.obs_dim;
        let mut value_losses = Vec::new();
        for _ in 0..self.cfg.n_critic_updates {
            for idx in buf.minibatches(self.cfg.batch_size, &mut self.rng_batch) {
                let b = idx.len();
                let obs = tensor2(
                    RolloutBuffer::gather(&buf.obs, od, &idx),
                    b,
                    od,
                    &self.device,
                );
                let returns: Vec<f32> = idx.iter().map(|&i| buf.returns[i]).collect();
                let vl = rl_training_core::losses::mse(
                    tensor1(returns, &self.device),
                    self.policy.values(obs),
                );
                let v = host(vl.clone().inner())[0] as f64;
                let step = progress.num_timesteps;
                rl_training_core::algorithm::check_losses(step, &[("losses/value_loss", v)])?;
                value_losses.push(v);
                // The value loss reaches only the value network (separate networks).
                let g = flat_grads(&self.policy, vl.backward(), &self.device);
                self.policy = self.opt.step_flat(lr, self.policy.clone(), g).0;
            }
        }
        m.insert(
            "losses/value_loss".into(),
            rl_training_on_policy::loss::mean(&value_losses),
        );
        rl_training_on_policy::loss::rollout_metrics(&mut m, &buf.values, &buf.returns, lr);
        Ok(m)
    }

    fn weights(&self) -> TensorMap {
        module_tensors(&self.policy)
    }

    fn set_weights(&mut self, weights: &TensorMap) -> Result<(), RlError> {
        Ok(set_module_tensors(&mut self.policy, weights, &self.device)?)
    }

    /// The policy, the value optimizer and the minibatch generator (the natural-gradient
    /// step keeps no state).
    fn save_state(&self) -> LearnerState {
        save_with_minibatch_rng(&self.policy, &self.opt, OPT, &self.rng_batch)
    }

    fn load_state(&mut self, ck: &Checkpoint, entries: &Map<String, Value>) -> Result<(), RlError> {
        let (policy, opt) = (&mut self.policy, &mut self.opt);
        self.rng_batch = load_with_minibatch_rng(ck, entries, policy, opt, OPT, &self.device)?;
        Ok(())
    }
}

/// A TRPO agent with its envs, ready to train.
pub type Trpo = OnPolicyAgent<TrpoLearner>;

impl OnPolicyLearner for TrpoLearner {
    type Config = TrpoConfig;
    type Policy = ActorCritic;
    const NAME: &'static str = "trpo";

    /// The value function's minibatch order comes from the run's `minibatch` generator.
    fn build(cfg: TrpoConfig, policy: ActorCritic, ctx: &BuildContext) -> Result<Self, RlError> {
        Ok(Self {
            // SB3's policies use Adam with eps 1e-5; TRPO does not clip gradients.
            opt: FlatOptimizer::new(OptimizerKind::adam(1e-5), None),
            cfg,
            device: ctx.device.clone(),
            policy,
            rng_batch: ctx.rng("minibatch"),
        })
    }

    fn config(&self) -> &TrpoConfig {
        &self.cfg
    }

    fn policy(&self) -> &ActorCritic {
        &self.policy
    }
}
