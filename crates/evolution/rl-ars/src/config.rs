//! ARS hyperparameters: the seed table, sb3-contrib's names as aliases.

use rl_core::config::{AlgoConfig, ConfigError, from_kwargs_with_part};
use rl_evolution::{CoreSettings, HiddenActivation, PolicyArch, PolicyKeys};
use serde::{Deserialize, Serialize};
use smart_default::SmartDefault;

/// ARS hyperparameters (`algo_kwargs` of a run config).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, SmartDefault)]
#[serde(deny_unknown_fields, default)]
pub struct ArsConfig {
    /// Step size α of the parameter update.
    #[default(0.02)]
    #[serde(alias = "learning_rate")]
    pub step_size: f64,
    /// Exploration noise ν of the perturbations.
    #[default(0.03)]
    #[serde(alias = "delta_std")]
    pub noise_std: f64,
    /// Directions sampled per iteration (each evaluated at `θ + νδ` and `θ − νδ`).
    #[default(60)]
    #[serde(alias = "n_delta")]
    pub n_directions: usize,
    /// Directions kept for the update (the best by `max(r₊, r₋)`; V1/V2 without -t: all).
    #[default(20)]
    #[serde(alias = "n_top")]
    pub n_top_directions: usize,
    /// Episodes per perturbation, their mean return its score (sb3-contrib's name; both signs
    /// of a direction see the same starts).
    #[default(1)]
    pub n_eval_episodes: usize,
    /// Worker threads, one env each.
    #[default(8)]
    #[serde(alias = "num_actors", alias = "num_env_runners")]
    pub num_workers: usize,
    /// `linear` (the paper's) or `mlp`.
    #[default(PolicyArch::Linear)]
    pub policy: PolicyArch,
    /// Hidden layers of an MLP policy.
    #[default(vec![64, 64])]
    pub net_arch: Vec<usize>,
    /// Hidden activation of an MLP policy (`tanh` or `relu`).
    #[default(HiddenActivation::Relu)]
    #[serde(alias = "activation_fn")]
    pub activation: HiddenActivation,
    /// The policy keys shared with OpenAI-ES (flat in YAML: `normalize_obs`, `bias`,
    /// `squash_output`, `noise_table_size`).
    #[serde(flatten, skip_deserializing)]
    pub shared: PolicyKeys,
}

impl ArsConfig {
    /// The shell's settings.
    pub fn core(&self) -> CoreSettings {
        let (n, arch) = (self.num_workers, &self.net_arch);
        self.shared.settings(n, self.policy, arch, self.activation)
    }
}

impl AlgoConfig for ArsConfig {
    /// The shared policy keys are read apart from the rest (both strictly).
    fn from_kwargs(kw: &serde_json::Map<String, serde_json::Value>) -> Result<Self, ConfigError> {
        from_kwargs_with_part(kw, |c: &mut Self, p| c.shared = p)
    }

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
