//! rl-training-bc: behaviour cloning — maximum likelihood of a dataset's actions. It is MARWIL with
//! `beta = 0` (RLlib's BC is the same), so [`BcLearner`] is [`rl_training_marwil::MarwilLearner`] with
//! BC's own hyperparameter table, which has no discounting, advantage or value settings, and
//! needs no rewards in the data.
#![warn(missing_docs)]

use rl_training_core::algorithm::{Learner, LearnerState, Progress, RlError};
use rl_training_core::burn::tensor::Device;
use rl_training_core::checkpoint::Checkpoint;
use rl_training_core::config::{AlgoConfig, RunConfig};
use rl_training_core::logger::Metrics;
use rl_training_core::params::TensorMap;
use rl_training_core::schedule::Schedule;
use rl_training_core::{Rng, Space};
pub use rl_training_marwil::EnvMaker;
use rl_training_marwil::{MarwilConfig, MarwilLearner};
use rl_training_offline::{OfflineAgent, OfflineBatch, OfflineLearner, OfflineSettings};
use rl_training_on_policy::PolicyKwargs;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::path::Path;

/// A BC agent on a dataset.
pub type Bc = OfflineAgent<BcLearner>;

/// The learning side of BC: MARWIL's with β = 0, keeping BC's hyperparameter table (what its
/// checkpoints record).
pub struct BcLearner {
    cfg: BcConfig,
    marwil: MarwilLearner,
}

impl BcLearner {
    /// The MARWIL learner that does the work.
    pub fn marwil(&self) -> &MarwilLearner {
        &self.marwil
    }
}

/// BC hyperparameters (`algo_kwargs`): MARWIL's defaults for what they share.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BcConfig {
    /// Adam step size.
    #[serde(alias = "lr")]
    pub learning_rate: Schedule,
    /// Dataset rows per gradient step.
    #[serde(alias = "train_batch_size", alias = "train_batch_size_per_learner")]
    pub batch_size: usize,
    /// Weight of the mean log-std bonus (Gaussian policies).
    #[serde(alias = "bc_logstd_coeff")]
    pub bc_logstd_coef: f64,
    /// Global-norm gradient clipping (null: none).
    #[serde(alias = "grad_clip")]
    pub max_grad_norm: Option<f64>,
    /// Gradient steps per training iteration.
    pub updates_per_iteration: usize,
    /// Network shape.
    pub policy_kwargs: PolicyKwargs,
}

impl Default for BcConfig {
    fn default() -> Self {
        let m = MarwilConfig::default();
        Self {
            learning_rate: m.learning_rate,
            batch_size: m.batch_size,
            bc_logstd_coef: m.bc_logstd_coef,
            max_grad_norm: m.max_grad_norm,
            updates_per_iteration: m.updates_per_iteration,
            policy_kwargs: m.policy_kwargs,
        }
    }
}

impl BcConfig {
    /// The MARWIL configuration BC runs: β = 0, no value loss.
    pub fn to_marwil(&self) -> MarwilConfig {
        MarwilConfig {
            learning_rate: self.learning_rate.clone(),
            batch_size: self.batch_size,
            beta: 0.0,
            vf_coef: 0.0,
            bc_logstd_coef: self.bc_logstd_coef,
            max_grad_norm: self.max_grad_norm,
            updates_per_iteration: self.updates_per_iteration,
            policy_kwargs: self.policy_kwargs.clone(),
            ..MarwilConfig::default()
        }
    }
}

impl AlgoConfig for BcConfig {
    fn validate(&self) -> Result<(), rl_training_core::config::ConfigError> {
        self.to_marwil().validate()
    }
}

impl Learner for BcLearner {
    type Batch = OfflineBatch;

    fn update(&mut self, batch: &OfflineBatch, progress: &Progress) -> Result<Metrics, RlError> {
        self.marwil.update(batch, progress)
    }

    fn weights(&self) -> TensorMap {
        self.marwil.weights()
    }

    fn set_weights(&mut self, weights: &TensorMap) -> Result<(), RlError> {
        self.marwil.set_weights(weights)
    }

    fn save_state(&self) -> LearnerState {
        self.marwil.save_state()
    }

    fn load_state(&mut self, ck: &Checkpoint, entries: &Map<String, Value>) -> Result<(), RlError> {
        self.marwil.load_state(ck, entries)
    }
}

impl OfflineLearner for BcLearner {
    type Config = BcConfig;
    const NAME: &'static str = "bc";

    fn settings(cfg: &BcConfig) -> OfflineSettings {
        MarwilLearner::offline_settings(&cfg.to_marwil())
    }

    fn build(
        cfg: BcConfig,
        run: &RunConfig,
        spaces: (&Space, &Space),
        device: Device,
    ) -> Result<Self, RlError> {
        let marwil = MarwilLearner::new(cfg.to_marwil(), run.seed, spaces, device)?;
        Ok(Self { cfg, marwil })
    }

    fn config(&self) -> &BcConfig {
        &self.cfg
    }

    fn act(&self, flat: Vec<f32>, n: usize, rng: &mut Rng, deterministic: bool) -> Vec<f32> {
        self.marwil.predict(flat, n, rng, deterministic)
    }

    fn iteration_metrics(&self, progress: &Progress, m: &mut Metrics) {
        self.marwil.marwil_metrics(progress, m);
    }
}

/// A fresh BC agent for `run` (its `algo_kwargs` are [`BcConfig`]) on `device`.
pub fn new(run: &RunConfig, make_env: EnvMaker<'_>, device: &Device) -> Result<Bc, RlError> {
    Bc::new(run, make_env, device)
}

/// Loads a BC checkpoint; `device` overrides the saved one.
pub fn load(dir: &Path, make_env: EnvMaker<'_>, device: &Device) -> Result<Bc, RlError> {
    Bc::load(dir, make_env, device)
}
