//! The `curiosity:` section of a run config: RLlib's ICM keys and defaults (its
//! `intrinsic_curiosity_model_based_curiosity.py` example), parsed strictly.

use rl_core::config::{ConfigError, strict};
use rl_core::nn::Activation;
use serde::{Deserialize, Serialize};

/// `curiosity: {type: icm, ...}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum CuriosityConfig {
    /// The intrinsic curiosity module (Pathak et al. 2017).
    Icm(IcmConfig),
}

impl CuriosityConfig {
    /// Parses and range-checks the `curiosity` table; errors name `curiosity.<field>`.
    pub fn from_value(v: &serde_json::Value) -> Result<Self, ConfigError> {
        let cfg: Self = strict(v.clone(), "curiosity")?;
        match &cfg {
            CuriosityConfig::Icm(c) => c.validate()?,
        }
        Ok(cfg)
    }
}

/// ICM hyperparameters (RLlib's names; `lr` is the module's own Adam step size).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IcmConfig {
    /// Scale η of the intrinsic reward `η · ½‖φ̂(s′) − φ(s′)‖²` added to the env's reward.
    pub intrinsic_reward_coeff: f64,
    /// β in the module's loss `(1 − β)·inverse + β·forward`.
    pub forward_loss_weight: f64,
    /// Size of the feature vector φ(s).
    pub feature_dim: usize,
    /// Hidden layers of the feature net (observation → φ).
    pub feature_net_hiddens: Vec<usize>,
    /// Their activation.
    pub feature_net_activation: Activation,
    /// Hidden layers of the inverse net (φ(s), φ(s′) → action).
    pub inverse_net_hiddens: Vec<usize>,
    /// Their activation.
    pub inverse_net_activation: Activation,
    /// Hidden layers of the forward net (φ(s), action → φ(s′)).
    pub forward_net_hiddens: Vec<usize>,
    /// Their activation.
    pub forward_net_activation: Activation,
    /// Adam step size of the module.
    #[serde(alias = "learning_rate")]
    pub lr: f64,
    /// Passes over each on-policy rollout (a replayed off-policy batch gets one).
    pub num_epochs: usize,
    /// Minibatch size of those passes.
    pub minibatch_size: usize,
    /// Global-norm gradient clipping of the module (null: none).
    #[serde(alias = "max_grad_norm")]
    pub grad_clip: Option<f64>,
}

impl Default for IcmConfig {
    fn default() -> Self {
        Self {
            intrinsic_reward_coeff: 0.05,
            forward_loss_weight: 0.2,
            feature_dim: 288,
            feature_net_hiddens: vec![256, 256],
            feature_net_activation: Activation::Relu,
            inverse_net_hiddens: vec![256],
            inverse_net_activation: Activation::Relu,
            forward_net_hiddens: vec![256],
            forward_net_activation: Activation::Relu,
            lr: 5e-4,
            num_epochs: 1,
            minibatch_size: 128,
            grad_clip: None,
        }
    }
}

impl IcmConfig {
    /// Range checks naming the field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let err = |f: &str, m: &str| Err(ConfigError::new(format!("curiosity.{f}"), m));
        if self.intrinsic_reward_coeff < 0.0 || !self.intrinsic_reward_coeff.is_finite() {
            return err("intrinsic_reward_coeff", "must be a finite number >= 0");
        }
        if !(0.0..=1.0).contains(&self.forward_loss_weight) {
            return err("forward_loss_weight", "must be in [0, 1]");
        }
        if self.feature_dim == 0 {
            return err("feature_dim", "must be at least 1");
        }
        if !(self.lr > 0.0 && self.lr.is_finite()) {
            return err("lr", "must be positive");
        }
        if self.num_epochs == 0 {
            return err("num_epochs", "must be at least 1");
        }
        if self.minibatch_size == 0 {
            return err("minibatch_size", "must be at least 1");
        }
        if self.grad_clip.is_some_and(|g| g <= 0.0) {
            return err("grad_clip", "must be positive (or null for no clipping)");
        }
        Ok(())
    }
}
