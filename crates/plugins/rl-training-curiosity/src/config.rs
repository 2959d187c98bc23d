//! The `curiosity:` section of a run config, parsed strictly: RLlib's ICM keys and defaults
//! (its `intrinsic_curiosity_model_based_curiosity.py` example) and CleanRL's RND keys
//! (`ppo_rnd_envpool.py`).

use rl_training_core::config::{ConfigError, strict};
use rl_training_core::nn::Activation;
use rl_training_core::schedule::Schedule;
use serde::{Deserialize, Serialize};
use smart_default::SmartDefault;

/// `curiosity: {type: icm, ...}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum CuriosityConfig {
    /// The intrinsic curiosity module (Pathak et al. 2017).
    Icm(IcmConfig),
    /// Random network distillation (Burda et al. 2018).
    Rnd(RndConfig),
}

impl CuriosityConfig {
    /// Parses and range-checks the `curiosity` table; errors name `curiosity.<field>`.
    pub fn from_value(v: &serde_json::Value) -> Result<Self, ConfigError> {
        let cfg: Self = strict(v.clone(), "curiosity")?;
        match &cfg {
            CuriosityConfig::Icm(c) => c.validate()?,
            CuriosityConfig::Rnd(c) => c.validate()?,
        }
        Ok(cfg)
    }
}

/// ICM hyperparameters (RLlib's names; `lr` is the module's own Adam step size).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, SmartDefault)]
#[serde(deny_unknown_fields, default)]
pub struct IcmConfig {
    /// Scale η of the intrinsic reward `η · ½‖φ̂(s′) − φ(s′)‖²` added to the env's reward:
    /// a number or a schedule (RLlib's `[[t, v], …]` in env steps, or `lin_<v>`). Off-policy
    /// the bonus is recomputed on every replayed batch, so a schedule reaches all of the replay.
    #[default(Schedule::Constant(0.05))]
    pub intrinsic_reward_coeff: Schedule,
    /// β in the module's loss `(1 − β)·inverse + β·forward`.
    #[default(0.2)]
    pub forward_loss_weight: f64,
    /// Size of the feature vector φ(s).
    #[default(288)]
    pub feature_dim: usize,
    /// Hidden layers of the feature net (observation → φ).
    #[default(vec![256, 256])]
    pub feature_net_hiddens: Vec<usize>,
    /// Their activation.
    #[default(Activation::Relu)]
    pub feature_net_activation: Activation,
    /// Hidden layers of the inverse net (φ(s), φ(s′) → action).
    #[default(vec![256])]
    pub inverse_net_hiddens: Vec<usize>,
    /// Their activation.
    #[default(Activation::Relu)]
    pub inverse_net_activation: Activation,
    /// Hidden layers of the forward net (φ(s), action → φ(s′)).
    #[default(vec![256])]
    pub forward_net_hiddens: Vec<usize>,
    /// Their activation.
    #[default(Activation::Relu)]
    pub forward_net_activation: Activation,
    /// Adam step size of the module.
    #[default(5e-4)]
    #[serde(alias = "learning_rate")]
    pub lr: f64,
    /// Passes over each on-policy rollout (a replayed off-policy batch gets one).
    #[default(1)]
    pub num_epochs: usize,
    /// Minibatch size of those passes.
    #[default(128)]
    pub minibatch_size: usize,
    /// Global-norm gradient clipping of the module (null: none).
    #[serde(alias = "max_grad_norm")]
    pub grad_clip: Option<f64>,
    /// Stop the forward loss's gradient at φ(s′), the target it is compared with, so that
    /// the forward loss cannot shrink the features (RLlib and Pathak et al.'s code let it
    /// through: false).
    #[default(false)]
    pub detach_forward_target: bool,
}

impl IcmConfig {
    /// Range checks naming the field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let err = |f: &str, m: &str| Err(ConfigError::new(format!("curiosity.{f}"), m));
        let (lo, hi) = self.intrinsic_reward_coeff.bounds();
        if lo < 0.0 || !hi.is_finite() {
            return err("intrinsic_reward_coeff", "must be a finite number >= 0");
        }
        if !(0.0..=1.0).contains(&self.forward_loss_weight) {
            return err("forward_loss_weight", "must be in [0, 1]");
        }
        if self.feature_dim == 0 {
            return err("feature_dim", "must be at least 1");
        }
        check_training(
            self.lr,
            self.num_epochs,
            self.minibatch_size,
            self.grad_clip,
        )
    }
}

/// RND hyperparameters (CleanRL's names and defaults where it has them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, SmartDefault)]
#[serde(deny_unknown_fields, default)]
pub struct RndConfig {
    /// Weight of the intrinsic stream: on-policy of its advantages, on replayed batches of
    /// the normalized intrinsic reward in the reward the learner sees.
    #[default(1.0)]
    pub int_coef: f64,
    /// Weight of the env's stream (CleanRL weighs the two advantages 2 : 1).
    #[default(2.0)]
    pub ext_coef: f64,
    /// Discount of the intrinsic return whose running standard deviation normalizes the
    /// intrinsic reward.
    #[default(0.99)]
    pub int_gamma: f64,
    /// Fraction of each batch's rows the predictor trains on.
    #[default(0.25)]
    pub update_proportion: f64,
    /// Size of the target's and the predictor's outputs.
    #[default(512)]
    pub feature_dim: usize,
    /// Hidden layers of the fixed random target net.
    #[default(vec![256, 256])]
    pub target_net_hiddens: Vec<usize>,
    /// Hidden layers of the predictor.
    #[default(vec![256, 256])]
    pub predictor_net_hiddens: Vec<usize>,
    /// Hidden layers of the intrinsic critic. On-policy, RND keeps CleanRL's two value
    /// streams: this net (the plugin's own, beside the algorithm's critic, so every on-policy
    /// algorithm gets it) learns the non-episodic intrinsic return, and the learner sees the
    /// advantages `ext_coef · A_ext + int_coef · A_int`.
    #[default(vec![256, 256])]
    pub int_value_net_hiddens: Vec<usize>,
    /// Activation of both.
    #[default(Activation::Relu)]
    pub activation: Activation,
    /// Normalized observations are clipped to `[-obs_clip, obs_clip]`.
    #[default(5.0)]
    pub obs_clip: f64,
    /// Adam step size of the predictor.
    #[default(1e-4)]
    #[serde(alias = "learning_rate")]
    pub lr: f64,
    /// Passes over each on-policy rollout (a replayed off-policy batch gets one).
    #[default(1)]
    pub num_epochs: usize,
    /// Minibatch size of those passes.
    #[default(128)]
    pub minibatch_size: usize,
    /// Global-norm gradient clipping of the predictor (null: none).
    #[serde(alias = "max_grad_norm")]
    pub grad_clip: Option<f64>,
}

impl RndConfig {
    /// Range checks naming the field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let err = |f: &str, m: &str| Err(ConfigError::new(format!("curiosity.{f}"), m));
        for (f, v) in [("int_coef", self.int_coef), ("ext_coef", self.ext_coef)] {
            if v < 0.0 || !v.is_finite() {
                return err(f, "must be a finite number >= 0");
            }
        }
        if !(0.0..1.0).contains(&self.int_gamma) {
            return err("int_gamma", "must be in [0, 1)");
        }
        if !(self.update_proportion > 0.0 && self.update_proportion <= 1.0) {
            return err("update_proportion", "must be in (0, 1]");
        }
        if self.feature_dim == 0 {
            return err("feature_dim", "must be at least 1");
        }
        for (f, h) in [
            ("target_net_hiddens", &self.target_net_hiddens),
            ("predictor_net_hiddens", &self.predictor_net_hiddens),
            ("int_value_net_hiddens", &self.int_value_net_hiddens),
        ] {
            if h.contains(&0) {
                return err(f, "layer sizes must be at least 1");
            }
        }
        if !(self.obs_clip > 0.0) {
            return err("obs_clip", "must be positive");
        }
        check_training(
            self.lr,
            self.num_epochs,
            self.minibatch_size,
            self.grad_clip,
        )
    }
}

/// The checks of the keys both modules' own training has: `lr`, `num_epochs`,
/// `minibatch_size`, `grad_clip`.
fn check_training(
    lr: f64,
    num_epochs: usize,
    minibatch_size: usize,
    grad_clip: Option<f64>,
) -> Result<(), ConfigError> {
    let err = |f: &str, m: &str| Err(ConfigError::new(format!("curiosity.{f}"), m));
    if !(lr > 0.0 && lr.is_finite()) {
        return err("lr", "must be positive");
    }
    if num_epochs == 0 {
        return err("num_epochs", "must be at least 1");
    }
    if minibatch_size == 0 {
        return err("minibatch_size", "must be at least 1");
    }
    if grad_clip.is_some_and(|g| g <= 0.0) {
        return err("grad_clip", "must be positive (or null for no clipping)");
    }
    Ok(())
}
