//! PPO hyperparameters: SB3's names and defaults; RLlib's names accepted as aliases.

use rl_training_core::config::{AlgoConfig, ConfigError, check, from_kwargs_with_part};
use rl_training_core::schedule::Schedule;
use rl_training_on_policy::{ActorCriticKeys, ActorCriticKeysConfig, OnPolicyConfig};
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
    /// gSDE and the network: `use_sde`, `sde_sample_freq`, `policy_kwargs` (flat in YAML).
    #[serde(flatten, skip_deserializing)]
    pub actor_critic: ActorCriticKeys,
}

impl AlgoConfig for PpoConfig {
    /// The shared keys are read apart from the rest (both strictly).
    fn from_kwargs(kw: &serde_json::Map<String, serde_json::Value>) -> Result<Self, ConfigError> {
        from_kwargs_with_part(kw, |c: &mut Self, p| c.actor_critic = p)
    }

    /// Range checks with messages naming the field.
    fn validate(&self) -> Result<(), ConfigError> {
        self.rollout_settings().validate()?;
        check::at_least_one(&[("batch_size", self.batch_size), ("n_epochs", self.n_epochs)])?;
        check::positive("learning_rate", self.learning_rate.initial())?;
        check::positive("clip_range", self.clip_range.initial())?;
        check::grad_clip("max_grad_norm", self.max_grad_norm)
    }
}

impl ActorCriticKeysConfig for PpoConfig {
    fn rollout_keys(&self) -> (usize, f64, f64, &ActorCriticKeys) {
        (
            self.n_steps,
            self.gamma,
            self.gae_lambda,
            &self.actor_critic,
        )
    }
}
