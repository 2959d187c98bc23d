//! rl-training-ppg: Phasic Policy Gradient (Cobbe et al. 2021) for discrete actions. Policy phase:
//! PPO (`rl-training-ppo`'s learner) with separate policy and value networks for `n_policy_iters`
//! rollouts, each kept in the auxiliary buffer. Auxiliary phase: `n_aux_epochs` passes over
//! the buffer fitting an auxiliary value head on the policy network and the value network to
//! the rollouts' returns, while a KL term clones the pre-phase policy.
#![warn(missing_docs)]

pub mod config;
pub mod loss;

pub use config::PpgConfig;

use rl_training_core::algorithm::{Learner, LearnerState, Progress, RlError, state_entry};
use rl_training_core::batch::{host, tensor1, tensor2};
use rl_training_core::buffers::RolloutBuffer;
use rl_training_core::burn;
use rl_training_core::burn::module::Module;
use rl_training_core::burn::nn::Linear;
use rl_training_core::burn::tensor::Device;
use rl_training_core::checkpoint::Checkpoint;
use rl_training_core::config::RunConfig;
use rl_training_core::logger::Metrics;
use rl_training_core::nn::linear_orthogonal;
use rl_training_core::optim::{FlatOptimizer, OptimizerKind};
use rl_training_core::params::{
    TensorMap, flat_grads, load_module_tensors, module_tensors, num_params,
};
use rl_training_core::{Rng, Space};
pub use rl_training_on_policy::EnvMaker;
use rl_training_on_policy::{ActorCritic, BuildContext, OnPolicyAgent, OnPolicyLearner};
use rl_training_ppo::PpoLearner;
use serde_json::{Map, Value};

/// The policy network with PPG's auxiliary value head on its latent features, and the value
/// network (all inside `ac`): what the auxiliary phase trains.
#[derive(Module, Debug)]
pub struct PpgModel {
    /// Policy and value networks.
    pub ac: ActorCritic,
    /// Auxiliary value head on the policy trunk's output.
    pub aux: Linear,
}

/// The rollouts of the current policy phase: observations and the value targets (GAE
/// returns at collection time).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AuxBuffer {
    /// `[n × obs_dim]`.
    pub obs: Vec<f32>,
    /// `[n]`.
    pub returns: Vec<f32>,
}

impl AuxBuffer {
    /// Number of stored states.
    pub fn len(&self) -> usize {
        self.returns.len()
    }
    /// Whether empty.
    pub fn is_empty(&self) -> bool {
        self.returns.is_empty()
    }
}

/// The optimization half of PPG.
pub struct PpgLearner {
    cfg: PpgConfig,
    device: Device,
    ppo: PpoLearner,
    aux_head: Linear,
    aux_opt: FlatOptimizer,
    buffer: AuxBuffer,
    policy_iters: usize,
    rng_aux: Rng,
}

impl PpgLearner {
    /// A learner for `policy` (separate networks, on the autodiff `device`).
    pub fn new(cfg: PpgConfig, policy: ActorCritic, device: Device, run: &RunConfig) -> Self {
        let latent = match &cfg.policy_kwargs.net_arch {
            rl_training_on_policy::NetArch::Same(h) => h.last().copied(),
            rl_training_on_policy::NetArch::Split { pi, .. } => pi.last().copied(),
        }
        .unwrap_or(policy.action_net.weight.dims()[0]);
        let mut rng_init = Rng::for_stream(run.seed, "aux_head");
        let aux_head = linear_orthogonal(latent, 1, 1.0, &mut rng_init, &device);
        let ppo = PpoLearner::new(
            cfg.policy_phase(),
            policy,
            device.clone(),
            Rng::for_stream(run.seed, "minibatch"),
        );
        Self {
            aux_opt: FlatOptimizer::new(OptimizerKind::adam(cfg.adam_eps), cfg.max_grad_norm),
            cfg,
            device,
            ppo,
            aux_head,
            buffer: AuxBuffer::default(),
            policy_iters: 0,
            rng_aux: Rng::for_stream(run.seed, "aux"),
        }
    }

    /// The auxiliary buffer.
    pub fn aux_buffer(&self) -> &AuxBuffer {
        &self.buffer
    }

    /// Width of the (flattened) observations: the policy trunk's input.
    fn obs_dim(&self) -> usize {
        let p = self.ppo.policy();
        p.pi.layers
            .first()
            .map(|l| l.weight.dims()[0])
            .unwrap_or(p.action_net.weight.dims()[0])
    }

    /// The auxiliary phase over the buffer (then emptied).
    fn aux_phase(&mut self, lr: f64, step: u64, m: &mut Metrics) -> Result<(), RlError> {
        let dev = self.device.clone();
        let inner = dev.clone().inner();
        let od = self.buffer.obs.len() / self.buffer.len().max(1);
        let n = self.buffer.len();
        let mut model = PpgModel {
            ac: self.ppo.policy().clone(),
            aux: self.aux_head.clone(),
        };
        // The policy before the phase, the behaviour-cloning target.
        let valid = model.ac.valid();
        let old = host(valid.action_head(valid.pi.forward(tensor2(
            self.buffer.obs.clone(),
            n,
            od,
            &inner,
        ))));
        let pd = old.len() / n.max(1);
        let dist = model.ac.dist.clone();
        let (mut joint, mut kls, mut values) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..self.cfg.n_aux_epochs {
            let mut order: Vec<usize> = (0..n).collect();
            self.rng_aux.shuffle(&mut order);
            for idx in order.chunks(self.cfg.aux_batch_size) {
                let b = idx.len();
                let obs = tensor2(
                    RolloutBuffer::gather(&self.buffer.obs, od, idx),
                    b,
                    od,
                    &dev,
                );
                let targets: Vec<f32> = idx.iter().map(|&i| self.buffer.returns[i]).collect();
                let latent = model.ac.pi.forward(obs.clone());
                let logits = model.ac.action_head(latent.clone());
                let aux_values = model.aux.forward(latent).squeeze_dim::<1>(1);
                let l = loss::aux_loss(
                    &dist,
                    aux_values,
                    model.ac.values(obs),
                    tensor1(targets, &dev),
                    tensor2(RolloutBuffer::gather(&old, pd, idx), b, pd, &dev),
                    logits,
                    self.cfg.beta_clone,
                );
                let s = |t: &rl_training_core::burn::tensor::Tensor<1>| {
                    host(t.clone().inner())[0] as f64
                };
                let (tl, al, kl, vl) = (s(&l.total), s(&l.aux_value), s(&l.kl), s(&l.value));
                rl_training_core::algorithm::check_losses(step, &[("losses/aux_total_loss", tl)])?;
                joint.push(al);
                kls.push(kl);
                values.push(vl);
                let g = flat_grads(&model, l.total.backward(), &dev);
                model = self.aux_opt.step_flat(lr, model, g).0;
            }
        }
        *self.ppo.policy_mut() = model.ac;
        self.aux_head = model.aux;
        self.buffer = AuxBuffer::default();
        let mean = rl_training_on_policy::loss::mean;
        m.insert("losses/aux_value_loss".into(), mean(&joint));
        m.insert("losses/aux_kl".into(), mean(&kls));
        m.insert("losses/aux_distill_value_loss".into(), mean(&values));
        m.insert("charts/aux_phase".into(), 1.0);
        Ok(())
    }
}

impl Learner for PpgLearner {
    type Batch = RolloutBuffer;

    /// One policy-phase update (PPO) on the rollout, kept for the auxiliary phase, which runs
    /// after every `n_policy_iters` of them.
    fn update(&mut self, buf: &RolloutBuffer, progress: &Progress) -> Result<Metrics, RlError> {
        let mut m = self.ppo.update(buf, progress)?;
        let n = buf.len();
        self.buffer
            .obs
            .extend_from_slice(&buf.obs[..n * buf.obs_dim]);
        self.buffer.returns.extend_from_slice(&buf.returns[..n]);
        self.policy_iters += 1;
        if self.policy_iters >= self.cfg.n_policy_iters {
            self.policy_iters = 0;
            let lr = m["charts/learning_rate"];
            self.aux_phase(lr, progress.num_timesteps, &mut m)?;
        }
        Ok(m)
    }

    /// The policy's weights: what the acting side needs (the auxiliary head is learner state,
    /// saved by [`save_state`](Learner::save_state)).
    fn weights(&self) -> TensorMap {
        self.ppo.weights()
    }

    fn set_weights(&mut self, weights: &TensorMap) -> Result<(), RlError> {
        self.ppo.set_weights(weights)
    }

    fn save_state(&self) -> LearnerState {
        let mut state = self.ppo.save_state();
        // The auxiliary head, its optimizer and the buffer of this policy phase.
        let mut aux = TensorMap::default();
        aux.extend_prefixed("head.", module_tensors(&self.aux_head));
        let steps = self.aux_opt.save("aux_adam", &mut aux);
        let od = self.obs_dim();
        aux.insert(
            "buffer.obs",
            vec![self.buffer.len(), od],
            self.buffer.obs.clone(),
        );
        aux.insert(
            "buffer.returns",
            vec![self.buffer.len()],
            self.buffer.returns.clone(),
        );
        state.file(AUX_FILE, aux.to_bytes());
        state.insert("aux_optimizer_steps", steps);
        state.insert("policy_iters", self.policy_iters);
        state.insert("rng_aux", &self.rng_aux);
        state
    }
    fn load_state(&mut self, ck: &Checkpoint, state: &Map<String, Value>) -> Result<(), RlError> {
        self.ppo.load_state(ck, state)?;
        let file = ck.path_of(AUX_FILE);
        let mut aux = TensorMap::from_bytes(ck.file(AUX_FILE)?, &file)?;
        let head = aux.split_off_prefix("head.");
        self.aux_head = load_module_tensors(self.aux_head.clone(), &head, &file, &self.device)?;
        let steps: u64 = state_entry(ck, state, "aux_optimizer_steps")?;
        // PpgModel's parameters: the actor-critic's, then the head's.
        let n_params = num_params(self.ppo.policy()) + num_params(&self.aux_head);
        self.aux_opt
            .load("aux_adam", &mut aux, steps, n_params, &file, &self.device)?;
        let od = self.obs_dim();
        let n = aux
            .0
            .get("buffer.returns")
            .map(|(s, _)| s.first().copied().unwrap_or(0))
            .unwrap_or(0);
        let obs = aux.take("buffer.obs", &[n, od], &file)?;
        let returns = aux.take("buffer.returns", &[n], &file)?;
        self.buffer = AuxBuffer { obs, returns };
        self.policy_iters = state_entry(ck, state, "policy_iters")?;
        self.rng_aux = state_entry(ck, state, "rng_aux")?;
        Ok(())
    }
}

/// A PPG agent with its envs, ready to train.
pub type Ppg = OnPolicyAgent<PpgLearner>;

const AUX_FILE: &str = "aux.safetensors";

impl OnPolicyLearner for PpgLearner {
    type Config = PpgConfig;
    type Policy = ActorCritic;
    const NAME: &'static str = "ppg";

    fn check_action_space(space: &Space) -> Result<(), String> {
        match space {
            Space::Discrete { .. } => Ok(()),
            other => Err(format!(
                "ppg takes a Discrete action space (the paper's setting), not {}",
                other.describe()
            )),
        }
    }
    fn build(cfg: PpgConfig, policy: ActorCritic, ctx: &BuildContext) -> Result<Self, RlError> {
        Ok(Self::new(cfg, policy, ctx.device.clone(), ctx.run))
    }
    fn config(&self) -> &PpgConfig {
        &self.cfg
    }
    fn policy(&self) -> &ActorCritic {
        self.ppo.policy()
    }
}
