//! OpenAI-ES hyperparameters: the seed table, OpenAI's / RLlib's names as aliases.

use rl_core::config::AlgoConfig;
use rl_evolution::{CoreSettings, FitnessShaping, HiddenActivation, PolicyArch};
use serde::{Deserialize, Serialize};

/// OpenAI-ES hyperparameters (`algo_kwargs` of a run config).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EsConfig {
    /// Adam step size.
    #[serde(alias = "lr", alias = "stepsize")]
    pub learning_rate: f64,
    /// Standard deviation σ of the parameter noise.
    #[serde(alias = "noise_stdev", alias = "sigma")]
    pub noise_std: f64,
    /// Episodes per iteration (with `antithetic`, `pop_size / 2` mirrored pairs).
    #[serde(alias = "episodes_per_batch")]
    pub pop_size: usize,
    /// Worker threads, one env each.
    #[serde(alias = "num_actors", alias = "num_env_runners")]
    pub num_workers: usize,
    /// L2 coefficient (weight decay added to the negated gradient).
    #[serde(alias = "l2coeff")]
    pub l2_coef: f64,
    /// `centered_rank` or `none`.
    #[serde(alias = "fitness_shaping")]
    pub reward_shaping: FitnessShaping,
    /// Mirrored sampling: each ε evaluated at `θ + σε` and `θ − σε`.
    pub antithetic: bool,
    /// Normalize observations with running statistics.
    #[serde(alias = "observation_filter_on")]
    pub normalize_obs: bool,
    /// `mlp` (default) or `linear`.
    pub policy: PolicyArch,
    /// Hidden tanh layers of the MLP policy.
    pub net_arch: Vec<usize>,
    /// Hidden activation of an MLP policy (`tanh` or `relu`).
    #[serde(alias = "activation_fn")]
    pub activation: HiddenActivation,
    /// Biases in the layers (default: for an MLP, not for a linear policy).
    #[serde(alias = "with_bias")]
    pub bias: Option<bool>,
    /// Box actions: `tanh` outputs rescaled onto the bounds, else clipped outputs (default:
    /// for an MLP, not for a linear policy, as sb3-contrib).
    pub squash_output: Option<bool>,
    /// Draws in the shared noise table.
    pub noise_table_size: usize,
}

impl Default for EsConfig {
    fn default() -> Self {
        Self {
            learning_rate: 0.01,
            noise_std: 0.02,
            pop_size: 256,
            num_workers: 16,
            l2_coef: 0.005,
            reward_shaping: FitnessShaping::CenteredRank,
            antithetic: true,
            normalize_obs: true,
            policy: PolicyArch::Mlp,
            net_arch: vec![32, 32],
            activation: HiddenActivation::Tanh,
            bias: None,
            squash_output: None,
            noise_table_size: 10_000_000,
        }
    }
}

impl EsConfig {
    /// The shell's settings.
    pub fn core(&self) -> CoreSettings {
        CoreSettings {
            num_workers: self.num_workers,
            policy: self.policy,
            net_arch: self.net_arch.clone(),
            activation: self.activation,
            bias: self.bias.unwrap_or(self.policy == PolicyArch::Mlp),
            squash_output: self.squash_output.unwrap_or(self.policy == PolicyArch::Mlp),
            normalize_obs: self.normalize_obs,
            noise_table_size: self.noise_table_size,
        }
    }
}

impl AlgoConfig for EsConfig {
    fn validate(&self) -> Result<(), rl_core::config::ConfigError> {
        let err = |f: &str, m: &str| rl_core::config::invalid(f, m);
        if !(self.learning_rate > 0.0) {
            return err("learning_rate", "must be positive");
        }
        if !(self.noise_std > 0.0) {
            return err("noise_std", "must be positive");
        }
        if self.pop_size < 2 {
            return err("pop_size", "must be at least 2");
        }
        if self.antithetic && self.pop_size % 2 == 1 {
            return err("pop_size", "must be even with antithetic sampling");
        }
        if self.num_workers == 0 {
            return err("num_workers", "must be at least 1");
        }
        if self.l2_coef < 0.0 {
            return err("l2_coef", "must be non-negative");
        }
        Ok(())
    }
}
