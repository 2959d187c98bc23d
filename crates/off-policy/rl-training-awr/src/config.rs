//! AWR hyperparameters: the seed table's names and defaults, the paper's (Peng et al. 2019)
//! for what the seed leaves open, its reference implementation's names as aliases.

use rl_training_core::config::AlgoConfig;
use rl_training_core::schedule::Schedule;
use rl_training_on_policy::{NetArch, PolicyKwargs};
use serde::{Deserialize, Serialize};
use smart_default::SmartDefault;

/// AWR hyperparameters (`algo_kwargs` of a run config).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, SmartDefault)]
#[serde(deny_unknown_fields, default)]
pub struct AwrConfig {
    /// Adam step size of both networks.
    #[default(Schedule::Constant(5e-4))]
    #[serde(alias = "lr")]
    pub learning_rate: Schedule,
    /// Transitions per gradient step.
    #[default(256)]
    pub batch_size: usize,
    /// Discount.
    #[default(0.99)]
    pub gamma: f64,
    /// TD(λ) of the value targets.
    #[default(0.95)]
    #[serde(alias = "lambda_", alias = "td_lambda")]
    pub gae_lambda: f64,
    /// Temperature β of the weights `exp(A / β)`.
    #[default(0.05)]
    #[serde(alias = "temperature", alias = "temp")]
    pub beta: f64,
    /// Upper bound of the weights.
    #[default(20.0)]
    #[serde(alias = "weight_clip")]
    pub max_weight: f64,
    /// Env steps per env between updates.
    #[default(2048)]
    #[serde(alias = "samples_per_iter")]
    pub n_steps: usize,
    /// The replay of recent samples (transitions).
    #[default(50_000)]
    pub buffer_size: usize,
    /// Value-function gradient steps per update.
    #[default(200)]
    #[serde(alias = "critic_steps")]
    pub value_steps: usize,
    /// Policy gradient steps per update.
    #[default(1000)]
    #[serde(alias = "actor_steps")]
    pub policy_steps: usize,
    /// Standardize advantages over the buffer before weighting (the reference
    /// implementation does).
    #[default(true)]
    pub normalize_advantage: bool,
    /// Global-norm gradient clipping (null: none).
    #[serde(alias = "grad_clip")]
    pub max_grad_norm: Option<f64>,
    /// Save the replay buffer with checkpoints.
    #[default(false)]
    pub store_buffer_in_checkpoints: bool,
    /// Network shape (the policy and the value function have separate networks).
    #[default(awr_networks())]
    pub policy_kwargs: PolicyKwargs,
}

/// The reference implementation's networks: separate [128, 64] ReLU MLPs.
fn awr_networks() -> PolicyKwargs {
    PolicyKwargs {
        net_arch: NetArch::Same(vec![128, 64]),
        activation_fn: rl_training_core::nn::Activation::Relu,
        ..PolicyKwargs::default()
    }
}

impl AlgoConfig for AwrConfig {
    /// Range checks with messages naming the field.
    fn validate(&self) -> Result<(), rl_training_core::config::ConfigError> {
        let err = |f: &str, m: &str| rl_training_core::config::invalid(f, m);
        for (f, v) in [
            ("batch_size", self.batch_size),
            ("n_steps", self.n_steps),
            ("buffer_size", self.buffer_size),
        ] {
            if v == 0 {
                return err(f, "must be at least 1");
            }
        }
        if self.learning_rate.initial() <= 0.0 {
            return err("learning_rate", "must be positive");
        }
        if !(0.0..=1.0).contains(&self.gamma) {
            return err("gamma", "must be in [0, 1]");
        }
        if !(0.0..=1.0).contains(&self.gae_lambda) {
            return err("gae_lambda", "must be in [0, 1]");
        }
        if !(self.beta > 0.0) {
            return err("beta", "must be positive");
        }
        if !(self.max_weight > 0.0) {
            return err("max_weight", "must be positive");
        }
        if self.max_grad_norm.is_some_and(|g| g <= 0.0) {
            return err(
                "max_grad_norm",
                "must be positive (or null for no clipping)",
            );
        }
        if self.policy_kwargs.shared {
            return err(
                "policy_kwargs.shared",
                "AWR trains separate policy and value networks",
            );
        }
        Ok(())
    }
}
