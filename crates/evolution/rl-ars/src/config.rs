//! ARS hyperparameters: the seed table, sb3-contrib's names as aliases.

use rl_core::config::AlgoConfig;
use rl_evolution::{CoreSettings, HiddenActivation, PolicyArch};
use serde::{Deserialize, Serialize};

/// ARS hyperparameters (`algo_kwargs` of a run config).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ArsConfig {
    /// Step size α of the parameter update.
    #[serde(alias = "learning_rate")]
    pub step_size: f64,
    /// Exploration noise ν of the perturbations.
    #[serde(alias = "delta_std")]
    pub noise_std: f64,
    /// Directions sampled per iteration (each evaluated at `θ + νδ` and `θ − νδ`).
    #[serde(alias = "n_delta")]
    pub n_directions: usize,
    /// Directions kept for the update (the best by `max(r₊, r₋)`; V1/V2 without -t: all).
    #[serde(alias = "n_top")]
    pub n_top_directions: usize,
    /// Episodes per perturbation, their mean return its score (sb3-contrib's name; both signs
    /// of a direction see the same starts).
    pub n_eval_episodes: usize,
    /// Worker threads, one env each.
    #[serde(alias = "num_actors", alias = "num_env_runners")]
    pub num_workers: usize,
    /// Normalize observations with the statistics of all earlier iterations (ARS V2).
    pub normalize_obs: bool,
    /// `linear` (the paper's) or `mlp`.
    pub policy: PolicyArch,
    /// Hidden layers of an MLP policy.
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

impl Default for ArsConfig {
    fn default() -> Self {
        Self {
            step_size: 0.02,
            noise_std: 0.03,
            n_directions: 60,
            n_top_directions: 20,
            n_eval_episodes: 1,
            num_workers: 8,
            normalize_obs: true,
            policy: PolicyArch::Linear,
            net_arch: vec![64, 64],
            activation: HiddenActivation::Relu,
            bias: None,
            squash_output: None,
            noise_table_size: 10_000_000,
        }
    }
}

impl ArsConfig {
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

impl AlgoConfig for ArsConfig {
    fn validate(&self) -> Result<(), rl_core::config::ConfigError> {
        let err = |f: &str, m: &str| rl_core::config::invalid(f, m);
        if !(self.step_size > 0.0) {
            return err("step_size", "must be positive");
        }
        if !(self.noise_std > 0.0) {
            return err("noise_std", "must be positive");
        }
        if self.n_directions == 0 {
            return err("n_directions", "must be at least 1");
        }
        if self.n_top_directions == 0 || self.n_top_directions > self.n_directions {
            return err("n_top_directions", "must be in 1..=n_directions");
        }
        if self.n_eval_episodes == 0 {
            return err("n_eval_episodes", "must be at least 1");
        }
        if self.num_workers == 0 {
            return err("num_workers", "must be at least 1");
        }
        Ok(())
    }
}
