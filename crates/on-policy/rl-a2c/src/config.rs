//! A2C hyperparameters: the seed table / SB3 names and defaults; RLlib's names accepted as
//! aliases.

use rl_core::config::AlgoConfig;
use rl_core::optim::OptimizerKind;
use rl_core::schedule::Schedule;
use rl_on_policy::{ActorCriticConfig, OnPolicyConfig, PolicyKwargs, RolloutSettings};
use serde::{Deserialize, Serialize};

/// A2C hyperparameters (`algo_kwargs` of a run config).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct A2cConfig {
    /// Step size: a number, `lin_<v>` or `[[t, v], …]`.
    #[serde(alias = "lr", alias = "lr_schedule")]
    pub learning_rate: Schedule,
    /// Steps per env per update.
    #[serde(alias = "rollout_fragment_length")]
    pub n_steps: usize,
    /// Discount.
    pub gamma: f64,
    /// GAE λ (1.0: plain n-step returns, as A2C).
    #[serde(alias = "lambda_", alias = "lambda")]
    pub gae_lambda: f64,
    /// Entropy bonus coefficient.
    #[serde(alias = "entropy_coeff")]
    pub ent_coef: f64,
    /// Value loss coefficient.
    #[serde(alias = "vf_loss_coeff")]
    pub vf_coef: f64,
    /// Clip gradients by their global norm (none when null).
    #[serde(alias = "grad_clip")]
    pub max_grad_norm: Option<f64>,
    /// Normalize the advantages of each update.
    pub normalize_advantage: bool,
    /// RMSprop (SB3's default for A2C: alpha 0.99, momentum 0, not centered); Adam when false.
    pub use_rms_prop: bool,
    /// RMSprop epsilon (outside the square root, as torch).
    pub rms_prop_eps: f64,
    /// Generalized state-dependent exploration (gSDE) for Box action spaces.
    pub use_sde: bool,
    /// gSDE: draw new exploration matrices every this many steps (-1: once per rollout).
    pub sde_sample_freq: i64,
    /// Network architecture and initialization.
    pub policy_kwargs: PolicyKwargs,
}

impl Default for A2cConfig {
    fn default() -> Self {
        Self {
            learning_rate: Schedule::Constant(7e-4),
            n_steps: 5,
            gamma: 0.99,
            gae_lambda: 1.0,
            ent_coef: 0.01,
            vf_coef: 0.5,
            max_grad_norm: Some(0.5),
            normalize_advantage: false,
            use_rms_prop: true,
            rms_prop_eps: 1e-5,
            use_sde: false,
            sde_sample_freq: -1,
            policy_kwargs: PolicyKwargs::default(),
        }
    }
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

impl OnPolicyConfig for A2cConfig {
    fn rollout_settings(&self) -> RolloutSettings {
        let (n, g, l) = (self.n_steps, self.gamma, self.gae_lambda);
        RolloutSettings::new(n, g, l, self.use_sde, self.sde_sample_freq)
    }
}

impl ActorCriticConfig for A2cConfig {
    fn policy_kwargs(&self) -> &PolicyKwargs {
        &self.policy_kwargs
    }
}

impl AlgoConfig for A2cConfig {
    /// Range checks with messages naming the field.
    fn validate(&self) -> Result<(), rl_core::config::ConfigError> {
        let err = |f: &str, m: &str| rl_core::config::invalid(f, m);
        if self.n_steps == 0 {
            return err("n_steps", "must be at least 1");
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
        if !(self.rms_prop_eps > 0.0) {
            return err("rms_prop_eps", "must be positive");
        }
        if self.max_grad_norm.is_some_and(|g| !(g > 0.0)) {
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
