//! PPO hyperparameters: SB3's names and defaults; RLlib's names accepted as aliases.

use rl_core::config::{AlgoConfig, ConfigError, check};
use rl_core::schedule::Schedule;
use rl_on_policy::{ActorCriticConfig, OnPolicyConfig, PolicyKwargs, RolloutSettings};
use serde::{Deserialize, Serialize};
use smart_default::SmartDefault;

/// PPO hyperparameters (`algo_kwargs` of a run config).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, SmartDefault)]
#[serde(deny_unknown_fields, default)]
pub struct PpoConfig {
    /// Adam step size: a number, `lin_<v>` or `[[t, v], …]`.
    #[default(Schedule::Constant(3e-4))]
    #[serde(alias = "lr", alias = "lr_schedule")]
    pub learning_rate: Schedule,
    /// Steps per env per rollout.
    #[default(2048)]
    #[serde(alias = "rollout_fragment_length")]
    pub n_steps: usize,
    /// Minibatch size.
    #[default(64)]
    #[serde(alias = "minibatch_size", alias = "sgd_minibatch_size")]
    pub batch_size: usize,
    /// Passes over each rollout.
    #[default(10)]
    #[serde(alias = "num_epochs", alias = "num_sgd_iter")]
    pub n_epochs: usize,
    /// Discount.
    #[default(0.99)]
    pub gamma: f64,
    /// GAE λ.
    #[default(0.95)]
    #[serde(alias = "lambda_", alias = "lambda")]
    pub gae_lambda: f64,
    /// Surrogate clipping ε (a number or schedule).
    #[default(Schedule::Constant(0.2))]
    #[serde(alias = "clip_param")]
    pub clip_range: Schedule,
    /// Value clipping around the old values (SB3's `clip_range_vf`); none by default.
    #[serde(alias = "vf_clip_param")]
    pub clip_range_vf: Option<Schedule>,
    /// Normalize advantages per minibatch.
    #[default(true)]
    pub normalize_advantage: bool,
    /// Entropy bonus coefficient.
    #[default(0.0)]
    #[serde(alias = "entropy_coeff")]
    pub ent_coef: f64,
    /// Value loss coefficient.
    #[default(0.5)]
    #[serde(alias = "vf_loss_coeff")]
    pub vf_coef: f64,
    /// Clip gradients by their global norm (none when absent or null).
    #[default(Some(0.5))]
    #[serde(alias = "grad_clip")]
    pub max_grad_norm: Option<f64>,
    /// Stop the epochs of an update early when the approximate KL exceeds 1.5 × this.
    pub target_kl: Option<f64>,
    /// Adam epsilon (SB3 PPO: 1e-5).
    #[default(1e-5)]
    #[serde(alias = "adam_epsilon")]
    pub adam_eps: f64,
    /// Generalized state-dependent exploration (gSDE) for Box action spaces.
    #[default(false)]
    pub use_sde: bool,
    /// gSDE: draw new exploration matrices every this many steps (-1: once per rollout).
    #[default(-1)]
    pub sde_sample_freq: i64,
    /// Network architecture and initialization.
    pub policy_kwargs: PolicyKwargs,
}

impl OnPolicyConfig for PpoConfig {
    fn rollout_settings(&self) -> RolloutSettings {
        let (n, g, l) = (self.n_steps, self.gamma, self.gae_lambda);
        RolloutSettings::new(n, g, l, self.use_sde, self.sde_sample_freq)
    }
}

impl ActorCriticConfig for PpoConfig {
    fn policy_kwargs(&self) -> &PolicyKwargs {
        &self.policy_kwargs
    }
}

impl AlgoConfig for PpoConfig {
    /// Range checks with messages naming the field.
    fn validate(&self) -> Result<(), ConfigError> {
        self.rollout_settings().validate()?;
        check::at_least_one(&[("batch_size", self.batch_size), ("n_epochs", self.n_epochs)])?;
        check::positive("learning_rate", self.learning_rate.initial())?;
        check::positive("clip_range", self.clip_range.initial())?;
        check::grad_clip("max_grad_norm", self.max_grad_norm)
    }
}
