//! rl-training-awr: Advantage-Weighted Regression (Peng, Kumar, Zhang, Levine 2019). Each iteration
//! collects `n_steps` per env with the current stochastic policy into a FIFO replay of recent
//! samples, fits the value function to TD(λ) targets over the whole replay, then fits the
//! policy by weighted maximum likelihood with weights `min(exp(A / β), max_weight)`.
#![warn(missing_docs)]

pub mod config;
pub mod loss;

pub use config::AwrConfig;

use rl_training_core::algorithm::{Learner, LearnerState, Progress, RlError, state_entry};
use rl_training_core::batch::{host, tensor1, tensor2};
use rl_training_core::burn::module::Module;
use rl_training_core::burn::tensor::Device;
use rl_training_core::checkpoint::{Checkpoint, read_module};
use rl_training_core::config::{ConfigError, RunConfig};
use rl_training_core::logger::Metrics;
use rl_training_core::optim::{FlatOptimizer, OptimizerKind};
use rl_training_core::params::{
    TensorMap, flat_grads, load_module_tensors, module_tensors, num_params, set_module_tensors,
};
use rl_training_core::replay::{NStep, TransitionBatch};
use rl_training_core::{Rng, Space};
pub use rl_training_off_policy::EnvMaker;
use rl_training_off_policy::{
    ActMode, Feed, OffPolicyActor, OffPolicyAgent, OffPolicyLearner, OffPolicySettings,
    ReplayOptions, TrainFrequency,
};
use rl_training_on_policy::ActorCritic;
use serde_json::{Map, Value};

/// The learning side of AWR: the policy and value networks, their optimizers, the minibatch
/// generator.
pub struct AwrLearner {
    cfg: AwrConfig,
    device: Device,
    infer: Device,
    /// The policy (its value head is unused).
    policy: ActorCritic,
    /// The value function (its action head is unused).
    value: ActorCritic,
    opt_policy: FlatOptimizer,
    opt_value: FlatOptimizer,
    rng_batch: Rng,
    n_envs: usize,
    act_space: Space,
}

impl AwrLearner {
    /// The hyperparameters.
    pub fn config(&self) -> &AwrConfig {
        &self.cfg
    }

    /// The policy network.
    pub fn policy(&self) -> &ActorCritic {
        &self.policy
    }

    /// The value network.
    pub fn value(&self) -> &ActorCritic {
        &self.value
    }

    /// TD(λ) targets and value estimates over the whole replay (time-ordered rows).
    fn targets(&self, data: &TransitionBatch, n_envs: usize) -> (Vec<f32>, Vec<f32>) {
        let v_net = self.value.valid();
        let b = data.len();
        let od = data.obs.len() / b.max(1);
        let v = |x: Vec<f32>, rows: usize| host(v_net.values(tensor2(x, rows, od, &self.infer)));
        let values = v(data.obs.clone(), b);
        let gamma = self.cfg.gamma as f32;
        // Bootstrap truncated episodes from their true final observation, as the collector
        // of the on-policy family does.
        let trunc: Vec<usize> = (0..b)
            .filter(|&i| data.truncated[i] > 0.0 && data.terminated[i] == 0.0)
            .collect();
        let mut rewards = data.rewards.clone();
        if !trunc.is_empty() {
            let x = trunc
                .iter()
                .flat_map(|&i| data.next_obs[i * od..(i + 1) * od].iter().copied())
                .collect();
            for (k, vf) in v(x, trunc.len()).into_iter().enumerate() {
                rewards[trunc[k]] += gamma * vf;
            }
        }
        let dones: Vec<f32> = (0..b)
            .map(|i| (data.terminated[i] > 0.0 || data.truncated[i] > 0.0) as u8 as f32)
            .collect();
        let last = data.next_obs[(b - n_envs) * od..].to_vec();
        let last_values = v(last, n_envs);
        let ret = loss::td_lambda_returns(
            &rewards,
            &values,
            &dones,
            &last_values,
            gamma,
            self.cfg.gae_lambda as f32,
        );
        (ret, values)
    }
}

impl Learner for AwrLearner {
    type Batch = TransitionBatch;

    /// On the whole replay (`data`, oldest rows first): `value_steps` value updates on TD(λ)
    /// targets, then `policy_steps` advantage-weighted regression steps.
    fn update(&mut self, data: &TransitionBatch, progress: &Progress) -> Result<Metrics, RlError> {
        let lr = self.cfg.learning_rate.at(progress);
        let ne = self.n_envs;
        let n = data.len();
        let od = data.obs.len() / n.max(1);
        let ad = data.actions.len() / n.max(1);
        let bs = self.cfg.batch_size.min(n);
        let dev = self.device.clone();
        let batch = |rng: &mut Rng| -> Vec<usize> {
            (0..bs).map(|_| rng.below(n as u64) as usize).collect()
        };
        let rows = |v: &[f32], d: usize, idx: &[usize]| -> Vec<f32> {
            idx.iter()
                .flat_map(|&i| v[i * d..(i + 1) * d].iter().copied())
                .collect()
        };
        // Value function on fixed TD(λ) targets.
        let (ret, _) = self.targets(data, ne);
        let mut v_loss = 0.0;
        for _ in 0..self.cfg.value_steps {
            let idx = batch(&mut self.rng_batch);
            let pred = self
                .value
                .values(tensor2(rows(&data.obs, od, &idx), bs, od, &dev));
            let target = tensor1(rows(&ret, 1, &idx), &dev);
            let l = (pred - target).square().mean().mul_scalar(0.5);
            v_loss = host(l.clone().inner())[0] as f64;
            let g = flat_grads(&self.value, l.backward(), &dev);
            self.value = self.opt_value.step_flat(lr, self.value.clone(), g).0;
        }
        // Advantages with the updated value function, then weighted regression.
        let (ret, values) = self.targets(data, ne);
        let adv: Vec<f32> = ret.iter().zip(&values).map(|(r, v)| r - v).collect();
        let w = loss::advantage_weights(
            &adv,
            self.cfg.beta,
            self.cfg.max_weight,
            self.cfg.normalize_advantage,
        );
        let mut p_loss = 0.0;
        for _ in 0..self.cfg.policy_steps {
            let idx = batch(&mut self.rng_batch);
            let obs = tensor2(rows(&data.obs, od, &idx), bs, od, &dev);
            let act = tensor2(rows(&data.actions, ad, &idx), bs, ad, &dev);
            let (logp, _) = self.policy.log_prob_entropy(obs, act);
            let l = loss::weighted_nll(logp, tensor1(rows(&w, 1, &idx), &dev));
            p_loss = host(l.clone().inner())[0] as f64;
            let g = flat_grads(&self.policy, l.backward(), &dev);
            self.policy = self.opt_policy.step_flat(lr, self.policy.clone(), g).0;
        }
        let mut m = Metrics::new();
        m.insert("losses/value_loss".into(), v_loss);
        m.insert("losses/policy_loss".into(), p_loss);
        let nw = w.len().max(1) as f64;
        m.insert(
            "losses/mean_weight".into(),
            w.iter().map(|&x| x as f64).sum::<f64>() / nw,
        );
        m.insert(
            "losses/clipped_weight_frac".into(),
            w.iter()
                .filter(|&&x| x as f64 >= self.cfg.max_weight)
                .count() as f64
                / nw,
        );
        m.insert("charts/learning_rate".into(), lr);
        m.insert("charts/replay_size".into(), n as f64);
        Ok(m)
    }

    /// The policy's weights: what the acting side needs.
    fn weights(&self) -> TensorMap {
        module_tensors(&self.policy)
    }

    fn set_weights(&mut self, weights: &TensorMap) -> Result<(), RlError> {
        Ok(set_module_tensors(&mut self.policy, weights, &self.device)?)
    }

    /// Both networks, both optimizers, the minibatch generator.
    fn save_state(&self) -> LearnerState {
        let mut opt = TensorMap::default();
        let mut state = LearnerState::default();
        state.insert("policy_steps", self.opt_policy.save("policy", &mut opt));
        state.insert("value_steps", self.opt_value.save("value", &mut opt));
        state.insert("rng_batch", &self.rng_batch);
        state.file(
            "policy.safetensors",
            module_tensors(&self.policy).to_bytes(),
        );
        state.file("value.safetensors", module_tensors(&self.value).to_bytes());
        state.file("optimizer.safetensors", opt.to_bytes());
        state
    }

    fn load_state(&mut self, ck: &Checkpoint, entries: &Map<String, Value>) -> Result<(), RlError> {
        let dev = self.device.clone();
        self.policy = read_module(ck, "policy.safetensors", self.policy.clone(), &dev)?;
        self.value = read_module(ck, "value.safetensors", self.value.clone(), &dev)?;
        let opt_file = ck.path_of("optimizer.safetensors");
        let mut opt = TensorMap::from_bytes(ck.file("optimizer.safetensors")?, &opt_file)?;
        let (np, nv) = (num_params(&self.policy), num_params(&self.value));
        let steps = state_entry(ck, entries, "policy_steps")?;
        self.opt_policy
            .load("policy", &mut opt, steps, np, &opt_file, &dev)?;
        let steps = state_entry(ck, entries, "value_steps")?;
        self.opt_value
            .load("value", &mut opt, steps, nv, &opt_file, &dev)?;
        self.rng_batch = state_entry(ck, entries, "rng_batch")?;
        Ok(())
    }
}

/// The acting side of AWR: an inference copy of the policy.
pub struct AwrActor {
    policy: ActorCritic,
    act_space: Space,
    device: Device,
}

impl OffPolicyActor for AwrActor {
    /// The distribution's mode when deterministic, a policy sample otherwise; the replay
    /// keeps the raw sample, the envs get it clipped to a Box's bounds.
    fn act(
        &self,
        flat: &[f32],
        n: usize,
        rng: &mut Rng,
        mode: ActMode,
        _progress: &Progress,
    ) -> (Vec<f32>, Vec<f32>) {
        let d = flat.len() / n.max(1);
        let obs = tensor2(flat.to_vec(), n, d, &self.device);
        let raw = self
            .policy
            .sample_actions(obs, rng, mode == ActMode::Deterministic);
        let mut env = raw.clone();
        self.act_space.clip_to_bounds(&mut env);
        (env, raw)
    }
}

impl OffPolicyLearner for AwrLearner {
    type Config = AwrConfig;
    type Actor = AwrActor;
    const NAME: &'static str = "awr";

    /// `n_steps` per env between updates, a FIFO replay of recent samples, one pass over it.
    fn settings(cfg: &AwrConfig) -> OffPolicySettings {
        OffPolicySettings {
            frequency: TrainFrequency {
                learning_starts: 0,
                train_freq: cfg.n_steps,
                gradient_steps: 1,
                training_intensity: None,
                batch_size: cfg.batch_size,
            },
            replay: ReplayOptions {
                buffer_size: cfg.buffer_size,
                n_step: NStep::Fixed(1),
                prioritized: false,
                alpha: 0.0,
                beta: 0.0,
                eps: 1e-6,
            },
            gamma: cfg.gamma,
            store_buffer: cfg.store_buffer_in_checkpoints,
            feed: Feed::WholeReplay,
            // AWR steps its own envs (its whole replay is recent samples).
            runners: rl_training_off_policy::RunnerShape {
                num_env_runners: 0,
                rollout_fragment_length: cfg.n_steps,
            },
        }
    }

    /// Actions are stored raw (any space the policy handles).
    fn stored_action_dim(space: &Space) -> Result<usize, String> {
        Ok(space.raw_dim())
    }

    fn build(
        cfg: AwrConfig,
        run: &RunConfig,
        (obs_space, act_space): (&Space, &Space),
        device: Device,
    ) -> Result<Self, RlError> {
        let mut rng = Rng::for_stream(run.seed, "init");
        // Two single-purpose networks: each optimizer sees zero gradients for the head it
        // does not use, which Adam leaves untouched.
        let spaces = (obs_space, act_space);
        let policy = awr_network(&cfg, spaces, &mut rng, &device)?;
        let value = awr_network(&cfg, spaces, &mut rng, &device)?;
        Ok(Self {
            opt_policy: FlatOptimizer::new(OptimizerKind::adam(1e-8), cfg.max_grad_norm),
            opt_value: FlatOptimizer::new(OptimizerKind::adam(1e-8), cfg.max_grad_norm),
            infer: device.clone().inner(),
            device,
            cfg,
            policy,
            value,
            // The stream the shell's replay sampling would use: AWR samples its own minibatches.
            rng_batch: Rng::for_stream(run.seed, "replay"),
            n_envs: run.n_envs,
            act_space: act_space.clone(),
        })
    }

    fn config(&self) -> &AwrConfig {
        &self.cfg
    }

    fn actor(&self) -> AwrActor {
        AwrActor {
            policy: self.policy.valid(),
            act_space: self.act_space.clone(),
            device: self.infer.clone(),
        }
    }

    fn actor_from_weights(
        cfg: &AwrConfig,
        spaces: (&Space, &Space),
        weights: &TensorMap,
        device: &Device,
    ) -> Result<AwrActor, RlError> {
        let policy = awr_network(cfg, spaces, &mut Rng::seed_from(0), device)?;
        Ok(AwrActor {
            policy: load_module_tensors(policy, weights, "weights", device)?,
            act_space: spaces.1.clone(),
            device: device.clone(),
        })
    }
}

/// One of AWR's two networks (an actor-critic with a shared trunk, one head used).
fn awr_network(
    cfg: &AwrConfig,
    (obs_space, act_space): (&Space, &Space),
    rng: &mut Rng,
    device: &Device,
) -> Result<ActorCritic, RlError> {
    let mut kw = cfg.policy_kwargs.clone();
    kw.shared = true;
    ActorCritic::new(obs_space, act_space, &kw, rng, device)
        .map_err(|e| RlError::Config(ConfigError::new("policy", e)))
}

/// An AWR agent with its envs and replay of recent samples.
pub type Awr = OffPolicyAgent<AwrLearner>;
