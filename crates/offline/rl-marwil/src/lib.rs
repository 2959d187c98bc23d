//! rl-marwil: Monotonic Advantage Re-Weighted Imitation Learning (Wang et al. 2018) as RLlib's
//! MARWIL. From a dataset of episodes: the value function fits the discounted returns, and
//! the policy maximizes the log-likelihood of the data's actions weighted by
//! `exp(β · (R − V) / (1e-8 + √avg))`, `avg` a moving average of the squared advantage. With
//! `β = 0` it is behaviour cloning (the `rl-bc` crate), which needs no rewards.
#![warn(missing_docs)]

pub mod config;
pub mod loss;

pub use config::MarwilConfig;

use rl_core::Rng;
pub use rl_core::agent::EnvMaker;
use rl_core::algorithm::{Algorithm, RlError, check_losses};
use rl_core::batch::{host, tensor1, tensor2};
use rl_core::burn::tensor::Device;
use rl_core::checkpoint::{read_json, read_module, read_run, write_checkpoint};
use rl_core::config::{AlgoConfig, RunConfig};
use rl_core::logger::Metrics;
use rl_core::optim::{FlatOptimizer, OptimizerKind};
use rl_core::params::{TensorMap, flat_grads, module_tensors, num_params};
use rl_offline::{CoreState, OfflineCore};
use rl_on_policy::ActorCritic;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Instant;

/// What `state.json` holds besides the family's [`CoreState`].
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SavedState {
    core: CoreState,
    opt_steps: u64,
    sqd_adv_norm: f64,
}

/// A MARWIL (or, with β = 0, BC) learner on a dataset.
pub struct Marwil {
    core: OfflineCore,
    cfg: MarwilConfig,
    name: &'static str,
    /// The hyperparameters a checkpoint's config.yaml records (BC saves its own table).
    saved_kwargs: serde_json::Value,
    device: Device,
    infer: Device,
    model: ActorCritic,
    opt: FlatOptimizer,
    sqd_adv_norm: f64,
}

impl Marwil {
    /// A fresh learner for `run` (its `algo_kwargs` are MARWIL hyperparameters, its
    /// `offline_data.input` the dataset) on `device`; `make_env` builds the env whose spaces
    /// the data must fit (and which evaluations use).
    pub fn new(run: &RunConfig, make_env: EnvMaker<'_>, device: &Device) -> Result<Self, RlError> {
        let cfg = MarwilConfig::from_kwargs(&run.algo_kwargs).map_err(RlError::Config)?;
        let saved = serde_json::to_value(&cfg).expect("serializable");
        Self::build(run, cfg, saved, "marwil", make_env, device)
    }

    /// A learner with `cfg` already parsed, saving `saved_kwargs` as its hyperparameters and
    /// `name` as its algorithm (what BC uses).
    pub fn build(
        run: &RunConfig,
        cfg: MarwilConfig,
        saved_kwargs: serde_json::Value,
        name: &'static str,
        make_env: EnvMaker<'_>,
        device: &Device,
    ) -> Result<Self, RlError> {
        let weighted = cfg.beta > 0.0;
        let core = OfflineCore::new(run, make_env, None, weighted.then_some(cfg.gamma as f32))?;
        if weighted && !core.stream.dataset().spec().has_rewards {
            return Err(RlError::Config(rl_core::config::ConfigError::new(
                core.stream.dataset().file(),
                "no rewards column; MARWIL with beta > 0 needs rewards (beta 0 is BC)",
            )));
        }
        let device = device.clone().autodiff();
        let mut rng = Rng::for_stream(run.seed, "init");
        let model = ActorCritic::new(
            &core.obs_space,
            &core.act_space,
            &cfg.policy_kwargs,
            &mut rng,
            &device,
        )
        .map_err(|e| RlError::Config(rl_core::config::ConfigError::new("policy", e)))?;
        Ok(Self {
            opt: FlatOptimizer::new(OptimizerKind::adam(1e-8), cfg.max_grad_norm),
            sqd_adv_norm: cfg.moving_average_sqd_adv_norm_start,
            infer: device.clone().inner(),
            device,
            core,
            name,
            saved_kwargs,
            cfg,
            model,
        })
    }

    /// Loads a checkpoint written by [`Algorithm::save`]; `device` overrides the saved one.
    pub fn load(dir: &Path, make_env: EnvMaker<'_>, device: &Device) -> Result<Self, RlError> {
        Self::load_with(dir, "marwil", |run| Self::new(run, make_env, device))
    }

    /// Loads a checkpoint of algorithm `name`, building the fresh learner with `build`.
    pub fn load_with(
        dir: &Path,
        name: &str,
        build: impl FnOnce(&RunConfig) -> Result<Self, RlError>,
    ) -> Result<Self, RlError> {
        let (ck, run) = read_run(dir, name)?;
        let mut m = build(&run)?;
        let state: SavedState = read_json(&ck, "state.json")?;
        let dev = m.device.clone();
        m.model = read_module(&ck, "model.safetensors", m.model.clone(), &dev)?;
        let opt_file = ck.path_of("optimizer.safetensors");
        let mut opt = TensorMap::from_bytes(ck.file("optimizer.safetensors")?, &opt_file)?;
        let np = num_params(&m.model);
        m.opt
            .load("model", &mut opt, state.opt_steps, np, &opt_file, &dev)?;
        m.sqd_adv_norm = state.sqd_adv_norm;
        m.core.restore(state.core)?;
        Ok(m)
    }

    /// The hyperparameters.
    pub fn config(&self) -> &MarwilConfig {
        &self.cfg
    }

    /// The policy and value networks.
    pub fn model(&self) -> &ActorCritic {
        &self.model
    }

    /// The moving average of the squared advantage norm.
    pub fn sqd_adv_norm(&self) -> f64 {
        self.sqd_adv_norm
    }

    /// One gradient step on the next batch; returns its losses.
    fn update(&mut self, lr: f64) -> Result<[(&'static str, f64); 5], RlError> {
        let cfg = &self.cfg;
        let b = self.core.batch(cfg.batch_size)?;
        let n = b.data.len();
        let (obs, _) = self.core.flat_batch_obs(&b);
        let d = obs.len() / n.max(1);
        let dev = self.device.clone();
        let obs = tensor2(obs, n, d, &dev);
        let act = tensor2(b.data.actions.clone(), n, b.data.act_dim, &dev);
        let (logp, _) = self.model.log_prob_entropy(obs.clone(), act);
        let (weights, v_loss) = if cfg.beta > 0.0 {
            let values = self.model.values(obs);
            let returns = tensor1(b.returns.clone(), &dev);
            let adv = host((returns.clone() - values.clone().detach()).inner());
            let sqd = adv.iter().map(|&a| (a as f64).powi(2)).sum::<f64>() / n as f64;
            // The average moves before weighting, as RLlib's.
            self.sqd_adv_norm = loss::update_sqd_adv_norm(
                self.sqd_adv_norm,
                sqd,
                cfg.moving_average_sqd_adv_norm_update_rate,
            );
            (
                loss::advantage_weights(&adv, cfg.beta, self.sqd_adv_norm),
                Some(loss::value_loss(returns, values)),
            )
        } else {
            (vec![1.0; n], None)
        };
        let bonus = match (&self.model.log_std, cfg.bc_logstd_coef > 0.0) {
            (Some(p), true) => Some(p.val().mean().mul_scalar(cfg.bc_logstd_coef)),
            _ => None,
        };
        let mean_w = weights.iter().map(|&w| w as f64).sum::<f64>() / n as f64;
        let mean_logp = host(logp.clone().inner())
            .iter()
            .map(|&l| l as f64)
            .sum::<f64>()
            / n as f64;
        let p_loss = loss::policy_loss(logp, tensor1(weights, &dev), bonus);
        let pv = host(p_loss.clone().inner())[0] as f64;
        let (total, vv) = match v_loss {
            Some(v) => {
                let vv = host(v.clone().inner())[0] as f64;
                (p_loss + v.mul_scalar(cfg.vf_coef), vv)
            }
            None => (p_loss, 0.0),
        };
        let losses = [
            ("losses/policy_loss", pv),
            ("losses/value_loss", vv),
            ("losses/mean_weight", mean_w),
            ("losses/log_likelihood", mean_logp),
            ("losses/total_loss", pv + cfg.vf_coef * vv),
        ];
        check_losses(self.core.num_timesteps, &losses)?;
        let g = flat_grads(&self.model, total.backward(), &dev);
        self.model = self.opt.step_flat(lr, self.model.clone(), g).0;
        Ok(losses)
    }
}

impl Algorithm for Marwil {
    fn name(&self) -> &str {
        self.name
    }
    fn num_timesteps(&self) -> u64 {
        self.core.num_timesteps
    }
    fn total_timesteps(&self) -> u64 {
        self.core.total_timesteps
    }
    fn set_total_timesteps(&mut self, total: u64) {
        self.core.total_timesteps = total;
    }
    fn observation_space(&self) -> &rl_core::Space {
        &self.core.obs_space
    }
    fn action_space(&self) -> &rl_core::Space {
        &self.core.act_space
    }

    /// `updates_per_iteration` gradient steps, each on `batch_size` dataset rows.
    fn train(&mut self) -> Result<Metrics, RlError> {
        let t0 = Instant::now();
        let lr = self
            .cfg
            .learning_rate
            .value(self.core.num_timesteps, self.core.total_timesteps);
        let mut m = Metrics::new();
        for _ in 0..self.cfg.updates_per_iteration {
            for (k, v) in self.update(lr)? {
                m.insert(k.into(), v);
            }
        }
        m.insert("charts/learning_rate".into(), lr);
        m.insert(
            "losses/moving_average_sqd_adv_norm".into(),
            self.sqd_adv_norm,
        );
        self.core.finish_metrics(&mut m, t0);
        Ok(m)
    }

    /// The distribution's mode when `deterministic`, a policy sample otherwise (Box actions
    /// clipped to the bounds).
    fn predict(&mut self, obs: &[f32], deterministic: bool) -> Result<Vec<f32>, RlError> {
        let (flat, n) = self.core.flat_obs(obs)?;
        Ok(self.model.predict_clipped(
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
        let opt_steps = self.opt.save("model", &mut opt);
        let state = SavedState {
            core: self.core.state(),
            opt_steps,
            sqd_adv_norm: self.sqd_adv_norm,
        };
        let files = vec![
            ("config.yaml", self.core.run_to_save(&self.saved_kwargs)?),
            ("model.safetensors", module_tensors(&self.model).to_bytes()),
            ("optimizer.safetensors", opt.to_bytes()),
            (
                "state.json",
                serde_json::to_vec_pretty(&state).expect("serializable"),
            ),
        ];
        write_checkpoint(dir, self.name, &files)?;
        Ok(())
    }
}
