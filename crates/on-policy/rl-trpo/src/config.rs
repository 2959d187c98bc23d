//! TRPO hyperparameters: the seed table, sb3-contrib's names and defaults otherwise; RLlib's
//! names accepted as aliases.

use rl_core::config::AlgoConfig;
use rl_core::schedule::Schedule;
use rl_on_policy::{ActorCriticConfig, OnPolicyConfig, PolicyKwargs, RolloutSettings};
use serde::{Deserialize, Serialize};

/// TRPO hyperparameters (`algo_kwargs` of a run config).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrpoConfig {
    /// Adam step size of the value function: a number, `lin_<v>` or `[[t, v], …]`.
    #[serde(alias = "lr", alias = "lr_schedule")]
    pub learning_rate: Schedule,
    /// Steps per env per rollout.
    #[serde(alias = "rollout_fragment_length")]
    pub n_steps: usize,
    /// Minibatch size of the value-function updates.
    #[serde(alias = "minibatch_size")]
    pub batch_size: usize,
    /// Discount.
    pub gamma: f64,
    /// GAE λ.
    #[serde(alias = "lambda_", alias = "lambda")]
    pub gae_lambda: f64,
    /// Trust region: the largest mean KL between the old and the new policy.
    pub target_kl: f64,
    /// Conjugate-gradient iterations for the natural-gradient direction.
    pub cg_max_steps: usize,
    /// Damping added to the Fisher matrix (`F + λI`).
    pub cg_damping: f64,
    /// Backtracking factor of the line search.
    pub line_search_shrinking_factor: f64,
    /// Line-search steps before giving up (the policy is then left unchanged).
    pub line_search_max_iter: usize,
    /// Passes over the rollout for the value function.
    pub n_critic_updates: usize,
    /// Use every k-th sample of the rollout for the policy step.
    pub sub_sampling_factor: usize,
    /// Normalize the advantages of the policy step.
    pub normalize_advantage: bool,
    /// Generalized state-dependent exploration (gSDE) for Box action spaces.
    pub use_sde: bool,
    /// gSDE: draw new exploration matrices every this many steps (-1: once per rollout).
    pub sde_sample_freq: i64,
    /// Network architecture and initialization (separate policy and value networks).
    pub policy_kwargs: PolicyKwargs,
}

impl Default for TrpoConfig {
    fn default() -> Self {
        Self {
            learning_rate: Schedule::Constant(1e-3),
            n_steps: 2048,
            batch_size: 128,
            gamma: 0.99,
            gae_lambda: 0.95,
            target_kl: 0.01,
            cg_max_steps: 10,
            cg_damping: 0.1,
            line_search_shrinking_factor: 0.8,
            line_search_max_iter: 10,
            n_critic_updates: 10,
            sub_sampling_factor: 1,
            normalize_advantage: true,
            use_sde: false,
            sde_sample_freq: -1,
            policy_kwargs: PolicyKwargs::default(),
        }
    }
}

impl OnPolicyConfig for TrpoConfig {
    fn rollout_settings(&self) -> RolloutSettings {
        let (n, g, l) = (self.n_steps, self.gamma, self.gae_lambda);
        RolloutSettings::new(n, g, l, self.use_sde, self.sde_sample_freq)
    }
}

impl ActorCriticConfig for TrpoConfig {
    fn policy_kwargs(&self) -> &PolicyKwargs {
        &self.policy_kwargs
    }
}

impl AlgoConfig for TrpoConfig {
    /// Range checks with messages naming the field.
    fn validate(&self) -> Result<(), rl_core::config::ConfigError> {
        let err = |f: &str, m: &str| rl_core::config::invalid(f, m);
        for (f, v) in [
            ("n_steps", self.n_steps),
            ("batch_size", self.batch_size),
            ("cg_max_steps", self.cg_max_steps),
            ("line_search_max_iter", self.line_search_max_iter),
            ("sub_sampling_factor", self.sub_sampling_factor),
        ] {
            if v == 0 {
                return err(f, "must be at least 1");
            }
        }
        if !(0.0..=1.0).contains(&self.gamma) {
            return err("gamma", "must be in [0, 1]");
        }
        if !(0.0..=1.0).contains(&self.gae_lambda) {
            return err("gae_lambda", "must be in [0, 1]");
        }
        if !(self.target_kl > 0.0) {
            return err("target_kl", "must be positive");
        }
        if !(self.cg_damping >= 0.0) {
            return err("cg_damping", "must be non-negative");
        }
        if !(self.line_search_shrinking_factor > 0.0 && self.line_search_shrinking_factor < 1.0) {
            return err("line_search_shrinking_factor", "must be in (0, 1)");
        }
        if self.learning_rate.initial() <= 0.0 {
            return err("learning_rate", "must be positive");
        }
        if self.policy_kwargs.shared {
            return err(
                "policy_kwargs.shared",
                "TRPO needs separate policy and value networks (the trust region covers the policy only)",
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
