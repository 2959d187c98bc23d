//! A2C hyperparameters: the seed table / SB3 names and defaults; RLlib's names accepted as
//! aliases.

use rl_training_core::config::{AlgoConfig, ConfigError, check, from_kwargs_with_part};
use rl_training_core::optim::OptimizerKind;
use rl_training_core::schedule::Schedule;
use rl_training_on_policy::{ActorCriticKeys, ActorCriticKeysConfig, OnPolicyConfig};
use serde::{Deserialize, Serialize};
use smart_default::SmartDefault;

/// A2C hyperparameters (`algo_kwargs` of a run config).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, SmartDefault)]
#[serde(deny_unknown_fields, default)]
pub struct A2cConfig {
    /// Step size: a number, `lin_<v>` or `[[t, v], …]`.
    #[default(Schedule::Constant(7e-4))]
    #[serde(alias = "lr", alias = "lr_schedule")]
    pub learning_rate: Schedule,
    /// Steps per env per update.
    #[default(5)]
    #[serde(alias = "rollout_fragment_length")]
    pub n_steps: usize,
    /// Discount.
    #[default(0.99)]
    pub gamma: f64,
    /// GAE λ (1.0: plain n-step returns, as A2C).
    #[default(1.0)]
    #[serde(alias = "lambda_", alias = "lambda")]
    pub gae_lambda: f64,
    /// Entropy bonus coefficient.
    #[default(0.01)]
    #[serde(alias = "entropy_coeff")]
    pub ent_coef: f64,
    /// Value loss coefficient.
    #[default(0.5)]
    #[serde(alias = "vf_loss_coeff")]
    pub vf_coef: f64,
    /// Clip gradients by their global norm (none when null).
    #[default(Some(0.5))]
    #[serde(alias = "grad_clip")]
    pub max_grad_norm: Option<f64>,
    /// Normalize the advantages of each update.
    #[default(false)]
    pub normalize_advantage: bool,
    /// RMSprop (SB3's default for A2C: alpha 0.99, momentum 0, not centered); Adam when false.
    #[default(true)]
    pub use_rms_prop: bool,
    /// RMSprop epsilon (outside the square root, as torch).
    #[default(1e-5)]
    pub rms_prop_eps: f64,
    /// gSDE and the network: `use_sde`, `sde_sample_freq`, `policy_kwargs` (flat in YAML).
    #[serde(flatten, skip_deserializing)]
    pub actor_critic: ActorCriticKeys,
}

impl A2cConfig {
    /// The update rule: RMSprop (alpha 0.99, `rms_prop_eps`) or Adam (SB3's policy default,
    /// eps 1e-5).
    pub fn optimizer(&self) -> OptimizerKind {
        if self.use_rms_prop {
            OptimizerKind::RmsProp {
                alpha: 0.99,
                eps: self.rms_prop_eps,
            }
        } else {
            OptimizerKind::adam(1e-5)
        }
    }
}

impl AlgoConfig for A2cConfig {
    /// The shared keys are read apart from the rest (both strictly).
    fn from_kwargs(kw: &serde_json::Map<String, serde_json::Value>) -> Result<Self, ConfigError> {
        from_kwargs_with_part(kw, |c: &mut Self, p| c.actor_critic = p)
    }

    /// Range checks with messages naming the field.
    fn validate(&self) -> Result<(), ConfigError> {
        self.rollout_settings().validate()?;
        check::positive("learning_rate", self.learning_rate.initial())?;
        check::positive("rms_prop_eps", self.rms_prop_eps)?;
        check::grad_clip("max_grad_norm", self.max_grad_norm)
    }
}

impl ActorCriticKeysConfig for A2cConfig {
    fn rollout_keys(&self) -> (usize, f64, f64, &ActorCriticKeys) {
        (
            self.n_steps,
            self.gamma,
            self.gae_lambda,
            &self.actor_critic,
        )
    }
}
