//! TRPO hyperparameters: the seed table, sb3-contrib's names and defaults otherwise; RLlib's
//! names accepted as aliases.

use rl_training_core::config::{AlgoConfig, ConfigError, check, from_kwargs_with_part};
use rl_training_core::schedule::Schedule;
use rl_training_on_policy::{ActorCriticKeys, ActorCriticKeysConfig, OnPolicyConfig};
use serde::{Deserialize, Serialize};
use smart_default::SmartDefault;

/// TRPO hyperparameters (`algo_kwargs` of a run config).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, SmartDefault)]
#[serde(deny_unknown_fields, default)]
pub struct TrpoConfig {
    /// Adam step size of the value function: a number, `lin_<v>` or `[[t, v], …]`.
    #[default(Schedule::Constant(1e-3))]
    #[serde(alias = "lr", alias = "lr_schedule")]
    pub learning_rate: Schedule,
    /// Steps per env per rollout.
    #[default(2048)]
    #[serde(alias = "rollout_fragment_length")]
    pub n_steps: usize,
    /// Minibatch size of the value-function updates.
    #[default(128)]
    #[serde(alias = "minibatch_size")]
    pub batch_size: usize,
    /// Discount.
    #[default(0.99)]
    pub gamma: f64,
    /// GAE λ.
    #[default(0.95)]
    #[serde(alias = "lambda_", alias = "lambda")]
    pub gae_lambda: f64,
    /// Trust region: the largest mean KL between the old and the new policy.
    #[default(0.01)]
    pub target_kl: f64,
    /// Conjugate-gradient iterations for the natural-gradient direction.
    #[default(10)]
    pub cg_max_steps: usize,
    /// Damping added to the Fisher matrix (`F + λI`).
    #[default(0.1)]
    pub cg_damping: f64,
    /// Backtracking factor of the line search.
    #[default(0.8)]
    pub line_search_shrinking_factor: f64,
    /// Line-search steps before giving up (the policy is then left unchanged).
    #[default(10)]
    pub line_search_max_iter: usize,
    /// Passes over the rollout for the value function.
    #[default(10)]
    pub n_critic_updates: usize,
    /// Use every k-th sample of the rollout for the policy step.
    #[default(1)]
    pub sub_sampling_factor: usize,
    /// Normalize the advantages of the policy step.
    #[default(true)]
    pub normalize_advantage: bool,
    /// gSDE and the network: `use_sde`, `sde_sample_freq`, `policy_kwargs` (flat in YAML).
    #[serde(flatten, skip_deserializing)]
    pub actor_critic: ActorCriticKeys,
}

impl AlgoConfig for TrpoConfig {
    /// The shared keys are read apart from the rest (both strictly).
    fn from_kwargs(kw: &serde_json::Map<String, serde_json::Value>) -> Result<Self, ConfigError> {
        from_kwargs_with_part(kw, |c: &mut Self, p| c.actor_critic = p)
    }

    /// Range checks with messages naming the field.
    fn validate(&self) -> Result<(), ConfigError> {
        let err = |f: &str, m: &str| rl_training_core::config::invalid(f, m);
        self.rollout_settings().validate()?;
        check::at_least_one(&[
            ("batch_size", self.batch_size),
            ("cg_max_steps", self.cg_max_steps),
            ("line_search_max_iter", self.line_search_max_iter),
            ("sub_sampling_factor", self.sub_sampling_factor),
        ])?;
        check::positive("target_kl", self.target_kl)?;
        check::positive("learning_rate", self.learning_rate.initial())?;
        if !(self.cg_damping >= 0.0) {
            return err("cg_damping", "must be non-negative");
        }
        if !(self.line_search_shrinking_factor > 0.0 && self.line_search_shrinking_factor < 1.0) {
            return err("line_search_shrinking_factor", "must be in (0, 1)");
        }
        if self.actor_critic.policy_kwargs.shared {
            return err(
                "policy_kwargs.shared",
                "TRPO needs separate policy and value networks (the trust region covers the policy only)",
            );
        }
        if self.actor_critic.policy_kwargs.features_extractor_class
            != rl_training_on_policy::policy::FeaturesExtractor::Flatten
        {
            return err(
                "policy_kwargs.features_extractor_class",
                "TRPO's Fisher products are derived for MLP policies only (FlattenExtractor)",
            );
        }
        Ok(())
    }
}

impl ActorCriticKeysConfig for TrpoConfig {
    fn rollout_keys(&self) -> (usize, f64, f64, &ActorCriticKeys) {
        (
            self.n_steps,
            self.gamma,
            self.gae_lambda,
            &self.actor_critic,
        )
    }
}
