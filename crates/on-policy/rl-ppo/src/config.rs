//! PPO hyperparameters: SB3's names and defaults; RLlib's names accepted as aliases.

use rl_core::config::AlgoConfig;
use rl_core::schedule::Schedule;
use rl_on_policy::{ActorCriticConfig, OnPolicyConfig, PolicyKwargs, RolloutSettings};
use serde::{Deserialize, Serialize};

/// PPO hyperparameters (`algo_kwargs` of a run config).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PpoConfig {
    /// Adam step size: a number, `lin_<v>` or `[[t, v], …]`.
    #[serde(alias = "lr", alias = "lr_schedule")]
    pub learning_rate: Schedule,
    /// Steps per env per rollout.
    #[serde(alias = "rollout_fragment_length")]
    pub n_steps: usize,
    /// Minibatch size.
    #[serde(alias = "minibatch_size", alias = "sgd_minibatch_size")]
    pub batch_size: usize,
    /// Passes over each rollout.
    #[serde(alias = "num_epochs", alias = "num_sgd_iter")]
    pub n_epochs: usize,
    /// Discount.
    pub gamma: f64,
    /// GAE λ.
    #[serde(alias = "lambda_", alias = "lambda")]
    pub gae_lambda: f64,
    /// Surrogate clipping ε (a number or schedule).
    #[serde(alias = "clip_param")]
    pub clip_range: Schedule,
    /// Value clipping around the old values (SB3's `clip_range_vf`); none by default.
    #[serde(alias = "vf_clip_param")]
    pub clip_range_vf: Option<Schedule>,
    /// Normalize advantages per minibatch.
    pub normalize_advantage: bool,
    /// Entropy bonus coefficient.
    #[serde(alias = "entropy_coeff")]
    pub ent_coef: f64,
    /// Value loss coefficient.
    #[serde(alias = "vf_loss_coeff")]
    pub vf_coef: f64,
    /// Clip gradients by their global norm (none when absent or null).
    #[serde(alias = "grad_clip")]
    pub max_grad_norm: Option<f64>,
    /// Stop the epochs of an update early when the approximate KL exceeds 1.5 × this.
    pub target_kl: Option<f64>,
    /// Adam epsilon (SB3 PPO: 1e-5).
    #[serde(alias = "adam_epsilon")]
    pub adam_eps: f64,
    /// Generalized state-dependent exploration (gSDE) for Box action spaces.
    pub use_sde: bool,
    /// gSDE: draw new exploration matrices every this many steps (-1: once per rollout).
    pub sde_sample_freq: i64,
    /// Network architecture and initialization.
    pub policy_kwargs: PolicyKwargs,
}

impl Default for PpoConfig {
    fn default() -> Self {
        Self {
            learning_rate: Schedule::Constant(3e-4),
            n_steps: 2048,
            batch_size: 64,
            n_epochs: 10,
            gamma: 0.99,
            gae_lambda: 0.95,
            clip_range: Schedule::Constant(0.2),
            clip_range_vf: None,
            normalize_advantage: true,
            ent_coef: 0.0,
            vf_coef: 0.5,
            max_grad_norm: Some(0.5),
            target_kl: None,
            adam_eps: 1e-5,
            use_sde: false,
            sde_sample_freq: -1,
            policy_kwargs: PolicyKwargs::default(),
        }
    }
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
    fn validate(&self) -> Result<(), rl_core::config::ConfigError> {
        let err = |f: &str, m: &str| rl_core::config::invalid(f, m);
        if self.n_steps == 0 {
            return err("n_steps", "must be at least 1");
        }
        if self.batch_size == 0 {
            return err("batch_size", "must be at least 1");
        }
        if self.n_epochs == 0 {
            return err("n_epochs", "must be at least 1");
        }
        if !(0.0..=1.0).contains(&self.gamma) {
            return err("gamma", "must be in [0, 1]");
        }
        if !(0.0..=1.0).contains(&self.gae_lambda) {
            return err("gae_lambda", "must be in [0, 1]");
        }
        if self.learning_rate.initial() <= 0.0 {
            return err("learning_rate", "must be positive");
        }
        if self.clip_range.initial() <= 0.0 {
            return err("clip_range", "must be positive");
        }
        if self.max_grad_norm.is_some_and(|g| g <= 0.0) {
            return err(
                "max_grad_norm",
                "must be positive (or null for no clipping)",
            );
        }
        if self.sde_sample_freq == 0 || self.sde_sample_freq < -1 {
            return err(
                "sde_sample_freq",
                "must be -1 (once per rollout) or positive",
            );
        }
        Ok(())
    }
}
