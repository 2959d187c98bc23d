//! MARWIL hyperparameters: the seed table's names and defaults (RLlib's `MARWILConfig`), RLlib's
//! names as aliases.

use rl_training_core::config::AlgoConfig;
use rl_training_core::schedule::Schedule;
use rl_training_on_policy::{NetArch, PolicyKwargs};
use serde::{Deserialize, Serialize};
use smart_default::SmartDefault;

/// MARWIL hyperparameters (`algo_kwargs` of a run config).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, SmartDefault)]
#[serde(deny_unknown_fields, default)]
pub struct MarwilConfig {
    /// Adam step size.
    #[default(Schedule::Constant(1e-4))]
    #[serde(alias = "lr")]
    pub learning_rate: Schedule,
    /// Dataset rows per gradient step.
    #[default(2048)]
    #[serde(alias = "train_batch_size", alias = "train_batch_size_per_learner")]
    pub batch_size: usize,
    /// Discount of the returns the value function fits.
    #[default(0.99)]
    pub gamma: f64,
    /// Advantage weighting: 0 is behaviour cloning.
    #[default(1.0)]
    pub beta: f64,
    /// Weight of the value loss.
    #[default(1.0)]
    #[serde(alias = "vf_coeff")]
    pub vf_coef: f64,
    /// Weight of the mean log-std bonus (Gaussian policies): keeps the cloned policy's spread.
    #[default(0.0)]
    #[serde(alias = "bc_logstd_coeff")]
    pub bc_logstd_coef: f64,
    /// Rate of the moving average of the squared advantage norm.
    #[default(1e-8)]
    pub moving_average_sqd_adv_norm_update_rate: f64,
    /// Its starting value.
    #[default(100.0)]
    pub moving_average_sqd_adv_norm_start: f64,
    /// Global-norm gradient clipping (null: none).
    #[serde(alias = "grad_clip")]
    pub max_grad_norm: Option<f64>,
    /// Gradient steps per training iteration.
    #[default(1)]
    pub updates_per_iteration: usize,
    /// Network shape (separate policy and value networks).
    #[default(marwil_networks())]
    pub policy_kwargs: PolicyKwargs,
}

/// RLlib's MARWIL networks: separate [256, 256] MLPs.
fn marwil_networks() -> PolicyKwargs {
    PolicyKwargs {
        net_arch: NetArch::Same(vec![256, 256]),
        ..PolicyKwargs::default()
    }
}

impl AlgoConfig for MarwilConfig {
    /// Range checks with messages naming the field.
    fn validate(&self) -> Result<(), rl_training_core::config::ConfigError> {
        let err = |f: &str, m: &str| rl_training_core::config::invalid(f, m);
        if self.batch_size == 0 {
            return err("batch_size", "must be at least 1");
        }
        if self.updates_per_iteration == 0 {
            return err("updates_per_iteration", "must be at least 1");
        }
        if self.learning_rate.initial() <= 0.0 {
            return err("learning_rate", "must be positive");
        }
        if !(0.0..=1.0).contains(&self.gamma) {
            return err("gamma", "must be in [0, 1]");
        }
        if !(self.beta >= 0.0) || !self.beta.is_finite() {
            return err(
                "beta",
                "must be a finite number >= 0 (0: behaviour cloning)",
            );
        }
        for (f, v) in [
            ("vf_coef", self.vf_coef),
            ("bc_logstd_coef", self.bc_logstd_coef),
        ] {
            if !(v >= 0.0) {
                return err(f, "must be >= 0");
            }
        }
        if !(0.0..=1.0).contains(&self.moving_average_sqd_adv_norm_update_rate) {
            return err(
                "moving_average_sqd_adv_norm_update_rate",
                "must be in [0, 1]",
            );
        }
        if !(self.moving_average_sqd_adv_norm_start > 0.0) {
            return err("moving_average_sqd_adv_norm_start", "must be positive");
        }
        if self.max_grad_norm.is_some_and(|g| !(g > 0.0)) {
            return err(
                "max_grad_norm",
                "must be positive (or null for no clipping)",
            );
        }
        if self.policy_kwargs.shared {
            return err(
                "policy_kwargs.shared",
                "MARWIL trains separate policy and value networks",
            );
        }
        Ok(())
    }
}
