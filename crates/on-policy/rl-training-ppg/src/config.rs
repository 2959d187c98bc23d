//! PPG hyperparameters: the seed table, CleanRL's `ppg_procgen.py` defaults otherwise.

use rl_training_core::config::{AlgoConfig, ConfigError};
use rl_training_core::schedule::Schedule;
use rl_training_on_policy::{
    ActorCriticConfig, ActorCriticKeys, OnPolicyConfig, PolicyKwargs, RolloutSettings,
};
use rl_training_ppo::PpoConfig;
use serde::{Deserialize, Serialize};
use smart_default::SmartDefault;

/// PPG hyperparameters (`algo_kwargs` of a run config).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, SmartDefault)]
#[serde(deny_unknown_fields, default)]
pub struct PpgConfig {
    /// Adam step size of both phases: a number, `lin_<v>` or `[[t, v], …]`.
    #[default(Schedule::Constant(5e-4))]
    #[serde(alias = "lr", alias = "lr_schedule")]
    pub learning_rate: Schedule,
    /// Steps per env per rollout.
    #[default(256)]
    #[serde(alias = "rollout_fragment_length")]
    pub n_steps: usize,
    /// Minibatch size of the policy phase.
    #[default(64)]
    #[serde(alias = "minibatch_size")]
    pub batch_size: usize,
    /// Passes over each rollout in the policy phase (E_π).
    #[default(1)]
    pub n_policy_epochs: usize,
    /// Passes over the auxiliary buffer in the auxiliary phase (E_aux).
    #[default(6)]
    pub n_aux_epochs: usize,
    /// Policy-phase iterations (rollouts) between auxiliary phases (N_π).
    #[default(32)]
    pub n_policy_iters: usize,
    /// Minibatch size of the auxiliary phase.
    #[default(256)]
    pub aux_batch_size: usize,
    /// Weight of the behaviour-cloning KL in the auxiliary phase (β_clone).
    #[default(1.0)]
    pub beta_clone: f64,
    /// Surrogate clipping ε.
    #[default(Schedule::Constant(0.2))]
    #[serde(alias = "clip_param")]
    pub clip_range: Schedule,
    /// Discount.
    #[default(0.99)]
    pub gamma: f64,
    /// GAE λ.
    #[default(0.95)]
    #[serde(alias = "lambda_", alias = "lambda")]
    pub gae_lambda: f64,
    /// Entropy bonus coefficient (policy phase).
    #[default(0.01)]
    #[serde(alias = "entropy_coeff")]
    pub ent_coef: f64,
    /// Value loss coefficient (policy phase).
    #[default(0.5)]
    #[serde(alias = "vf_loss_coeff")]
    pub vf_coef: f64,
    /// Clip gradients by their global norm (both phases; none when null).
    #[default(Some(0.5))]
    #[serde(alias = "grad_clip")]
    pub max_grad_norm: Option<f64>,
    /// Normalize advantages per minibatch.
    #[default(true)]
    pub normalize_advantage: bool,
    /// Adam epsilon.
    #[default(1e-5)]
    #[serde(alias = "adam_epsilon")]
    pub adam_eps: f64,
    /// Policy and value networks (separate: PPG's point is to keep them apart).
    pub policy_kwargs: PolicyKwargs,
}

impl PpgConfig {
    /// The policy phase as PPO hyperparameters.
    pub fn policy_phase(&self) -> PpoConfig {
        PpoConfig {
            learning_rate: self.learning_rate.clone(),
            n_steps: self.n_steps,
            batch_size: self.batch_size,
            n_epochs: self.n_policy_epochs,
            gamma: self.gamma,
            gae_lambda: self.gae_lambda,
            clip_range: self.clip_range.clone(),
            clip_range_vf: None,
            normalize_advantage: self.normalize_advantage,
            ent_coef: self.ent_coef,
            vf_coef: self.vf_coef,
            max_grad_norm: self.max_grad_norm,
            target_kl: None,
            adam_eps: self.adam_eps,
            actor_critic: ActorCriticKeys {
                policy_kwargs: self.policy_kwargs.clone(),
                ..ActorCriticKeys::default()
            },
        }
    }
}

/// PPG collects without gSDE (discrete actions only).
impl OnPolicyConfig for PpgConfig {
    fn rollout_settings(&self) -> RolloutSettings {
        RolloutSettings::new(self.n_steps, self.gamma, self.gae_lambda, false, -1)
    }
}

impl ActorCriticConfig for PpgConfig {
    fn policy_kwargs(&self) -> &PolicyKwargs {
        &self.policy_kwargs
    }
}

impl AlgoConfig for PpgConfig {
    /// Range checks with messages naming the field (the policy phase's through PPO's).
    fn validate(&self) -> Result<(), ConfigError> {
        let err = |f: &str, m: &str| rl_training_core::config::invalid(f, m);
        if self.policy_kwargs.features_extractor_class
            != rl_training_on_policy::policy::FeaturesExtractor::Flatten
        {
            return err(
                "policy_kwargs.features_extractor_class",
                "PPG's auxiliary head reads the MLP trunk: FlattenExtractor only",
            );
        }
        for (f, v) in [
            ("n_policy_epochs", self.n_policy_epochs),
            ("n_policy_iters", self.n_policy_iters),
            ("aux_batch_size", self.aux_batch_size),
        ] {
            if v == 0 {
                return err(f, "must be at least 1");
            }
        }
        if !(self.beta_clone >= 0.0) {
            return err("beta_clone", "must be non-negative");
        }
        if self.policy_kwargs.shared {
            return err(
                "policy_kwargs.shared",
                "PPG keeps separate policy and value networks",
            );
        }
        self.policy_phase()
            .validate()
            .map_err(|e| match e.field.as_str() {
                "algo_kwargs.n_epochs" => ConfigError {
                    field: "algo_kwargs.n_policy_epochs".into(),
                    ..e
                },
                _ => e,
            })
    }
}
