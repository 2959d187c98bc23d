//! rl-training-a2c: Advantage Actor-Critic, the synchronous variant of A3C (Mnih et al. 2016), as
//! stable-baselines3's `A2C`: short rollouts from parallel envs, one gradient step per
//! rollout on the whole batch, n-step returns (GAE with λ = 1 by default), RMSprop.
#![warn(missing_docs)]

pub mod config;
pub mod loss;

pub use config::A2cConfig;

use rl_training_core::algorithm::{Learner, LearnerState, Progress, RlError};
use rl_training_core::batch::{host, tensor1, tensor2};
use rl_training_core::buffers::RolloutBuffer;
use rl_training_core::burn::tensor::Device;
use rl_training_core::checkpoint::Checkpoint;
use rl_training_core::logger::Metrics;
use rl_training_core::optim::FlatOptimizer;
use rl_training_core::params::flat_grads;
use rl_training_core::params::{TensorMap, module_tensors, set_module_tensors};
pub use rl_training_on_policy::EnvMaker;
use rl_training_on_policy::{
    ActorCritic, BuildContext, OnPolicyAgent, OnPolicyLearner, load_policy_and_optimizer,
    save_policy_and_optimizer,
};
use serde_json::{Map, Value};

/// Name of the optimizer state inside `optimizer.safetensors`.
const OPT: &str = "optimizer";

/// The optimization half of A2C: the policy and its optimizer. It updates from any
/// [`RolloutBuffer`].
pub struct A2cLearner {
    cfg: A2cConfig,
    device: Device,
    policy: ActorCritic,
    opt: FlatOptimizer,
}

impl A2cLearner {
    /// A learner for `policy` (on the autodiff `device`).
    pub fn new(cfg: A2cConfig, policy: ActorCritic, device: Device) -> Self {
        Self {
            opt: FlatOptimizer::new(cfg.optimizer(), cfg.max_grad_norm),
            cfg,
            device,
            policy,
        }
    }

    /// The policy network.
    pub fn policy(&self) -> &ActorCritic {
        &self.policy
    }
}

impl Learner for A2cLearner {
    type Batch = RolloutBuffer;

    /// One gradient step on the whole rollout (SB3's `A2C.train`).
    fn update(&mut self, buf: &RolloutBuffer, progress: &Progress) -> Result<Metrics, RlError> {
        let lr = self.cfg.learning_rate.at(progress);
        let (n, od, ad) = (buf.len(), buf.obs_dim, buf.act_dim);
        let dev = &self.device;
        let obs = tensor2(buf.obs[..n * od].to_vec(), n, od, dev);
        let actions = tensor2(buf.actions[..n * ad].to_vec(), n, ad, dev);
        let mut adv = buf.advantages[..n].to_vec();
        if self.cfg.normalize_advantage {
            adv = loss::normalize_advantages(&adv);
        }
        let (logp, entropy) = self.policy.log_prob_entropy(obs.clone(), actions);
        let values = self.policy.values(obs);
        let l = loss::a2c_loss(
            logp,
            entropy,
            values,
            tensor1(adv, dev),
            tensor1(buf.returns[..n].to_vec(), dev),
            self.cfg.ent_coef,
            self.cfg.vf_coef,
        );
        let scalar =
            |t: &rl_training_core::burn::tensor::Tensor<1>| host(t.clone().inner())[0] as f64;
        let (pl, vl, el, tl) = (
            scalar(&l.policy),
            scalar(&l.value),
            scalar(&l.entropy),
            scalar(&l.total),
        );
        rl_training_core::algorithm::check_losses(
            progress.num_timesteps,
            &[
                ("losses/policy_loss", pl),
                ("losses/value_loss", vl),
                ("losses/entropy_loss", el),
                ("losses/total_loss", tl),
            ],
        )?;
        let g = flat_grads(&self.policy, l.total.backward(), dev);
        let (policy, stats) = self.opt.step_flat(lr, self.policy.clone(), g);
        self.policy = policy;
        let mut m = Metrics::new();
        m.insert("losses/policy_loss".into(), pl);
        m.insert("losses/value_loss".into(), vl);
        m.insert("losses/entropy".into(), -el);
        m.insert("losses/grad_norm".into(), stats.grad_norm as f64);
        rl_training_on_policy::loss::rollout_metrics(
            &mut m,
            &buf.values[..n],
            &buf.returns[..n],
            lr,
        );
        Ok(m)
    }

    fn weights(&self) -> TensorMap {
        module_tensors(&self.policy)
    }

    fn set_weights(&mut self, weights: &TensorMap) -> Result<(), RlError> {
        Ok(set_module_tensors(&mut self.policy, weights, &self.device)?)
    }

    fn save_state(&self) -> LearnerState {
        save_policy_and_optimizer(&self.policy, &self.opt, OPT)
    }

    fn load_state(&mut self, ck: &Checkpoint, entries: &Map<String, Value>) -> Result<(), RlError> {
        let (policy, opt) = (&mut self.policy, &mut self.opt);
        load_policy_and_optimizer(ck, entries, policy, opt, OPT, &self.device)
    }
}

/// An A2C agent with its envs, ready to train.
pub type A2c = OnPolicyAgent<A2cLearner>;

impl OnPolicyLearner for A2cLearner {
    type Config = A2cConfig;
    type Policy = ActorCritic;
    const NAME: &'static str = "a2c";

    /// A2C draws no minibatches: it needs nothing from the run.
    fn build(cfg: A2cConfig, policy: ActorCritic, ctx: &BuildContext) -> Result<Self, RlError> {
        Ok(Self::new(cfg, policy, ctx.device.clone()))
    }

    fn config(&self) -> &A2cConfig {
        &self.cfg
    }

    fn policy(&self) -> &ActorCritic {
        &self.policy
    }
}
