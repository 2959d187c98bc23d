//! rl-bc: behaviour cloning — maximum likelihood of a dataset's actions. It is MARWIL with
//! `beta = 0` (RLlib's BC is the same), so the learner is [`rl_marwil::Marwil`]; this crate
//! gives it BC's own hyperparameter table, which has no discounting, advantage or value
//! settings, and needs no rewards in the data.
#![warn(missing_docs)]

use rl_core::algorithm::RlError;
use rl_core::burn::tensor::Device;
use rl_core::config::{AlgoConfig, RunConfig};
use rl_core::schedule::Schedule;
pub use rl_marwil::EnvMaker;
use rl_marwil::{Marwil, MarwilConfig};
use rl_on_policy::PolicyKwargs;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// A BC learner: MARWIL with β = 0.
pub type Bc = Marwil;

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
    fn validate(&self) -> Result<(), rl_core::config::ConfigError> {
        self.to_marwil().validate()
    }
}

/// A fresh BC learner for `run` (its `algo_kwargs` are [`BcConfig`]) on `device`.
pub fn new(run: &RunConfig, make_env: EnvMaker<'_>, device: &Device) -> Result<Bc, RlError> {
    let cfg = BcConfig::from_kwargs(&run.algo_kwargs).map_err(RlError::Config)?;
    let saved = serde_json::to_value(&cfg).expect("serializable");
    Marwil::build(run, cfg.to_marwil(), saved, "bc", make_env, device)
}

/// Loads a BC checkpoint; `device` overrides the saved one.
pub fn load(dir: &Path, make_env: EnvMaker<'_>, device: &Device) -> Result<Bc, RlError> {
    Marwil::load_with(dir, "bc", |run| new(run, make_env, device))
}
