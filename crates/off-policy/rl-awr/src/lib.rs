//! rl-awr: Advantage-Weighted Regression (Peng, Kumar, Zhang, Levine 2019). Each iteration
//! collects `n_steps` per env with the current stochastic policy into a FIFO replay of recent
//! samples, fits the value function to TD(λ) targets over the whole replay, then fits the
//! policy by weighted maximum likelihood with weights `min(exp(A / β), max_weight)`.
#![warn(missing_docs)]

pub mod config;
pub mod loss;

pub use config::AwrConfig;

use rl_core::Rng;
use rl_core::algorithm::{Algorithm, RlError, check_finite};
use rl_core::batch::{host, tensor1, tensor2};
use rl_core::burn::module::Module;
use rl_core::burn::tensor::Device;
use rl_core::checkpoint::{read_json, read_module, read_run, write_checkpoint};
use rl_core::config::AlgoConfig;
use rl_core::config::RunConfig;
use rl_core::logger::Metrics;
use rl_core::optim::{FlatOptimizer, OptimizerKind};
use rl_core::params::{TensorMap, flat_grads, module_tensors, num_params};
use rl_core::replay::{NStep, Replay, TransitionBatch};
pub use rl_off_policy::EnvMaker;
use rl_off_policy::{CoreState, OffPolicyCore, ReplayOptions};
use rl_on_policy::ActorCritic;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Instant;

/// What `state.json` holds besides the family's [`CoreState`].
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SavedState {
    core: CoreState,
    policy_steps: u64,
    value_steps: u64,
}

/// An AWR agent.
pub struct Awr {
    core: OffPolicyCore,
    cfg: AwrConfig,
    device: Device,
    infer: Device,
    /// The policy (its value head is unused).
    policy: ActorCritic,
    /// The value function (its action head is unused).
    value: ActorCritic,
    opt_policy: FlatOptimizer,
    opt_value: FlatOptimizer,
}

impl Awr {
    /// A fresh agent for `run` (its `algo_kwargs` are AWR hyperparameters) on `device`.
    pub fn new(run: &RunConfig, make_env: EnvMaker<'_>, device: &Device) -> Result<Self, RlError> {
        let cfg = AwrConfig::from_kwargs(&run.algo_kwargs).map_err(RlError::Config)?;
        let replay = ReplayOptions {
            buffer_size: cfg.buffer_size,
            n_step: NStep::Fixed(1),
            prioritized: false,
            alpha: 0.0,
            beta: 0.0,
            eps: 1e-6,
        };
        let core = OffPolicyCore::new(run, make_env, &replay, |space| Ok(space.raw_dim()))?;
        let device = device.clone().autodiff();
        let mut rng = Rng::for_stream(run.seed, "init");
        // Two single-purpose networks: each optimizer sees zero gradients for the head it
        // does not use, which Adam leaves untouched.
        let mut kw = cfg.policy_kwargs.clone();
        kw.shared = true;
        let build = |rng: &mut Rng| {
            ActorCritic::new(&core.obs_space, &core.act_space, &kw, rng, &device)
                .map_err(|e| RlError::Config(rl_core::config::ConfigError::new("policy", e)))
        };
        let policy = build(&mut rng)?;
        let value = build(&mut rng)?;
        Ok(Self {
            opt_policy: FlatOptimizer::new(OptimizerKind::adam(1e-8), cfg.max_grad_norm),
            opt_value: FlatOptimizer::new(OptimizerKind::adam(1e-8), cfg.max_grad_norm),
            infer: device.clone().inner(),
            device,
            core,
            cfg,
            policy,
            value,
        })
    }

    /// Loads a checkpoint written by [`Algorithm::save`]; `device` overrides the saved one.
    pub fn load(dir: &Path, make_env: EnvMaker<'_>, device: &Device) -> Result<Self, RlError> {
        let (ck, run) = read_run(dir, "awr")?;
        let mut awr = Self::new(&run, make_env, device)?;
        let state: SavedState = read_json(&ck, "state.json")?;
        let dev = awr.device.clone();
        awr.policy = read_module(&ck, "policy.safetensors", awr.policy.clone(), &dev)?;
        awr.value = read_module(&ck, "value.safetensors", awr.value.clone(), &dev)?;
        let opt_file = ck.path_of("optimizer.safetensors");
        let mut opt = TensorMap::from_bytes(ck.file("optimizer.safetensors")?, &opt_file)?;
        let (np, nv) = (num_params(&awr.policy), num_params(&awr.value));
        awr.opt_policy
            .load("policy", &mut opt, state.policy_steps, np, &opt_file, &dev)?;
        awr.opt_value
            .load("value", &mut opt, state.value_steps, nv, &opt_file, &dev)?;
        let store = awr.cfg.store_buffer_in_checkpoints;
        awr.core.restore(state.core, &ck, store)?;
        Ok(awr)
    }

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

    /// The replay of recent samples.
    pub fn replay(&self) -> &Replay {
        &self.core.replay
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

impl Algorithm for Awr {
    rl_off_policy::core_accessors!("awr");

    /// Collect `n_steps` per env, `value_steps` value updates on TD(λ) targets, then
    /// `policy_steps` advantage-weighted regression steps.
    fn train(&mut self) -> Result<Metrics, RlError> {
        let t0 = Instant::now();
        let pol = self.policy.valid();
        let (infer, space) = (self.infer.clone(), self.core.act_space.clone());
        let c = self
            .core
            .collect(self.cfg.n_steps, 0, |obs, n, rng, _, _| {
                let d = obs.len() / n.max(1);
                let raw = pol.sample_actions(tensor2(obs.to_vec(), n, d, &infer), rng, false);
                let mut env = raw.clone();
                space.clip_to_bounds(&mut env);
                Ok((env, raw))
            })?;
        let lr = self
            .cfg
            .learning_rate
            .value(self.core.num_timesteps, self.core.total_timesteps);
        let ne = self.core.collector.num_envs();
        let data = self.core.replay.chronological();
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
        let (ret, _) = self.targets(&data, ne);
        let mut v_loss = 0.0;
        for _ in 0..self.cfg.value_steps {
            let idx = batch(&mut self.core.rng_replay);
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
        let (ret, values) = self.targets(&data, ne);
        let adv: Vec<f32> = ret.iter().zip(&values).map(|(r, v)| r - v).collect();
        let w = loss::advantage_weights(
            &adv,
            self.cfg.beta,
            self.cfg.max_weight,
            self.cfg.normalize_advantage,
        );
        let mut p_loss = 0.0;
        for _ in 0..self.cfg.policy_steps {
            let idx = batch(&mut self.core.rng_replay);
            let obs = tensor2(rows(&data.obs, od, &idx), bs, od, &dev);
            let act = tensor2(rows(&data.actions, ad, &idx), bs, ad, &dev);
            let (logp, _) = self.policy.log_prob_entropy(obs, act);
            let l = loss::weighted_nll(logp, tensor1(rows(&w, 1, &idx), &dev));
            p_loss = host(l.clone().inner())[0] as f64;
            let g = flat_grads(&self.policy, l.backward(), &dev);
            self.policy = self.opt_policy.step_flat(lr, self.policy.clone(), g).0;
        }
        self.core.iterations += 1;
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
        self.core.finish_metrics(&mut m, &c, t0);
        check_finite(self.core.num_timesteps, &m)?;
        Ok(m)
    }

    /// The distribution's mode when `deterministic`, a policy sample otherwise (Box actions
    /// clipped to the bounds).
    fn predict(&mut self, obs: &[f32], deterministic: bool) -> Result<Vec<f32>, RlError> {
        let (flat, n) = self.core.flat_obs(obs)?;
        Ok(self.policy.predict_clipped(
            flat,
            n,
            &self.infer,
            &mut self.core.rng_predict,
            deterministic,
            &self.core.act_space,
        ))
    }

    fn save(&self, dir: &Path) -> Result<(), RlError> {
        let mut opt = TensorMap::default();
        let policy_steps = self.opt_policy.save("policy", &mut opt);
        let value_steps = self.opt_value.save("value", &mut opt);
        let (core, replay_file) = self.core.state(self.cfg.store_buffer_in_checkpoints)?;
        let state = SavedState {
            core,
            policy_steps,
            value_steps,
        };
        let mut files = vec![
            ("config.yaml", self.core.run_to_save(&self.cfg)?),
            (
                "policy.safetensors",
                module_tensors(&self.policy).to_bytes(),
            ),
            ("value.safetensors", module_tensors(&self.value).to_bytes()),
            ("optimizer.safetensors", opt.to_bytes()),
            (
                "state.json",
                serde_json::to_vec_pretty(&state).expect("serializable"),
            ),
        ];
        files.extend(replay_file);
        write_checkpoint(dir, "awr", &files)?;
        Ok(())
    }
}
