//! rl-training-marwil: Monotonic Advantage Re-Weighted Imitation Learning (Wang et al. 2018) as RLlib's
//! MARWIL. From a dataset of episodes: the value function fits the discounted returns, and
//! the policy maximizes the log-likelihood of the data's actions weighted by
//! `exp(β · (R − V) / (1e-8 + √avg))`, `avg` a moving average of the squared advantage. With
//! `β = 0` it is behaviour cloning (the `rl-training-bc` crate), which needs no rewards.
#![warn(missing_docs)]

pub mod config;
pub mod loss;

pub use config::MarwilConfig;

pub use rl_training_core::agent::EnvMaker;
use rl_training_core::algorithm::{
    Learner, LearnerState, Progress, RlError, check_losses, state_entry,
};
use rl_training_core::batch::{host, tensor1, tensor2};
use rl_training_core::burn::tensor::Device;
use rl_training_core::checkpoint::{Checkpoint, read_module};
use rl_training_core::config::{ConfigError, RunConfig};
use rl_training_core::logger::Metrics;
use rl_training_core::optim::{FlatOptimizer, OptimizerKind};
use rl_training_core::params::{
    TensorMap, flat_grads, module_tensors, num_params, set_module_tensors,
};
use rl_training_core::{Rng, Space};
use rl_training_offline::{
    OfflineAgent, OfflineBatch, OfflineLearner, OfflineSettings, flat_batch_obs,
};
use rl_training_on_policy::ActorCritic;
use serde_json::{Map, Value};

/// The learning side of MARWIL (with β = 0, of BC): the policy and value networks and their
/// optimizer, the moving average of the squared advantage.
pub struct MarwilLearner {
    cfg: MarwilConfig,
    device: Device,
    infer: Device,
    model: ActorCritic,
    opt: FlatOptimizer,
    sqd_adv_norm: f64,
    obs_space: Space,
    act_space: Space,
}

/// A MARWIL agent on a dataset.
pub type Marwil = OfflineAgent<MarwilLearner>;

impl MarwilLearner {
    /// A learner with fresh networks for the spaces (observations, actions) on the autodiff
    /// `device`, initialized from the run seed's `init` stream.
    pub fn new(
        cfg: MarwilConfig,
        seed: u64,
        (obs_space, act_space): (&Space, &Space),
        device: Device,
    ) -> Result<Self, RlError> {
        let mut rng = Rng::for_stream(seed, "init");
        let model = ActorCritic::new(obs_space, act_space, &cfg.policy_kwargs, &mut rng, &device)
            .map_err(|e| RlError::Config(ConfigError::new("policy", e)))?;
        Ok(Self {
            opt: FlatOptimizer::new(OptimizerKind::adam(1e-8), cfg.max_grad_norm),
            sqd_adv_norm: cfg.moving_average_sqd_adv_norm_start,
            infer: device.clone().inner(),
            device,
            cfg,
            model,
            obs_space: obs_space.clone(),
            act_space: act_space.clone(),
        })
    }

    /// The policy and value networks.
    pub fn model(&self) -> &ActorCritic {
        &self.model
    }

    /// The moving average of the squared advantage norm.
    pub fn sqd_adv_norm(&self) -> f64 {
        self.sqd_adv_norm
    }

    /// How the shell feeds a MARWIL learner with `cfg`.
    pub fn offline_settings(cfg: &MarwilConfig) -> OfflineSettings {
        let weighted = cfg.beta > 0.0;
        OfflineSettings {
            batch_size: cfg.batch_size,
            updates_per_iteration: cfg.updates_per_iteration,
            returns_gamma: weighted.then_some(cfg.gamma as f32),
            needs_rewards: weighted.then_some("MARWIL with beta > 0 needs rewards (beta 0 is BC)"),
        }
    }

    /// The learning rate and the advantage average where training stands.
    pub fn marwil_metrics(&self, progress: &Progress, m: &mut Metrics) {
        m.insert(
            "charts/learning_rate".into(),
            self.cfg.learning_rate.at(progress),
        );
        m.insert(
            "losses/moving_average_sqd_adv_norm".into(),
            self.sqd_adv_norm,
        );
    }

    /// The distribution's mode when `deterministic`, a policy sample otherwise (Box actions
    /// clipped to the bounds).
    pub fn predict(
        &self,
        flat: Vec<f32>,
        n: usize,
        rng: &mut Rng,
        deterministic: bool,
    ) -> Vec<f32> {
        let space = &self.act_space;
        self.model
            .predict_clipped(flat, n, &self.infer, rng, deterministic, space)
    }
}

impl Learner for MarwilLearner {
    type Batch = OfflineBatch;

    /// One gradient step on `b`: the value function toward the returns (β > 0), the policy
    /// by advantage-weighted log-likelihood.
    fn update(&mut self, b: &OfflineBatch, progress: &Progress) -> Result<Metrics, RlError> {
        let cfg = &self.cfg;
        let lr = cfg.learning_rate.at(progress);
        let n = b.data.len();
        let (obs, _) = flat_batch_obs(&self.obs_space, b);
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
        check_losses(progress.num_timesteps, &losses)?;
        let g = flat_grads(&self.model, total.backward(), &dev);
        self.model = self.opt.step_flat(lr, self.model.clone(), g).0;
        Ok(losses
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect())
    }

    fn weights(&self) -> TensorMap {
        module_tensors(&self.model)
    }

    fn set_weights(&mut self, weights: &TensorMap) -> Result<(), RlError> {
        Ok(set_module_tensors(&mut self.model, weights, &self.device)?)
    }

    /// The networks, the optimizer, the advantage average.
    fn save_state(&self) -> LearnerState {
        let mut opt = TensorMap::default();
        let mut state = LearnerState::default();
        state.insert("opt_steps", self.opt.save("model", &mut opt));
        state.insert("sqd_adv_norm", self.sqd_adv_norm);
        state.file("model.safetensors", module_tensors(&self.model).to_bytes());
        state.file("optimizer.safetensors", opt.to_bytes());
        state
    }

    fn load_state(&mut self, ck: &Checkpoint, entries: &Map<String, Value>) -> Result<(), RlError> {
        let dev = self.device.clone();
        self.model = read_module(ck, "model.safetensors", self.model.clone(), &dev)?;
        let opt_file = ck.path_of("optimizer.safetensors");
        let mut opt = TensorMap::from_bytes(ck.file("optimizer.safetensors")?, &opt_file)?;
        let (steps, np) = (
            state_entry(ck, entries, "opt_steps")?,
            num_params(&self.model),
        );
        self.opt
            .load("model", &mut opt, steps, np, &opt_file, &dev)?;
        self.sqd_adv_norm = state_entry(ck, entries, "sqd_adv_norm")?;
        Ok(())
    }
}

impl OfflineLearner for MarwilLearner {
    type Config = MarwilConfig;
    const NAME: &'static str = "marwil";

    fn settings(cfg: &MarwilConfig) -> OfflineSettings {
        Self::offline_settings(cfg)
    }

    fn build(
        cfg: MarwilConfig,
        run: &RunConfig,
        spaces: (&Space, &Space),
        device: Device,
    ) -> Result<Self, RlError> {
        Self::new(cfg, run.seed, spaces, device)
    }

    fn config(&self) -> &MarwilConfig {
        &self.cfg
    }

    fn act(&self, flat: Vec<f32>, n: usize, rng: &mut Rng, deterministic: bool) -> Vec<f32> {
        self.predict(flat, n, rng, deterministic)
    }

    fn iteration_metrics(&self, progress: &Progress, m: &mut Metrics) {
        self.marwil_metrics(progress, m);
    }
}
