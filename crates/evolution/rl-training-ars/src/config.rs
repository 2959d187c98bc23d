//! ARS hyperparameters: the seed table, sb3-contrib's names as aliases.

use rl_training_core::config::{AlgoConfig, ConfigError, check, from_kwargs_with_part, invalid};
use rl_training_evolution::{PolicyDefault, PolicyDefaults, PolicyKeys};
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
    /// The policy and worker keys shared with OpenAI-ES ([`PolicyKeys`], flat in YAML), with
    /// ARS's defaults.
    #[serde(flatten, skip_deserializing)]
    pub shared: PolicyKeys<ArsConfig>,
}

/// ARS's policy defaults: the paper's linear policy (an MLP as sb3-contrib's when asked).
impl PolicyDefaults for ArsConfig {
    const POLICY: PolicyDefault = PolicyDefault::linear(8);
}

impl AlgoConfig for ArsConfig {
    /// The shared policy keys are read apart from the rest (both strictly).
    fn from_kwargs(kw: &serde_json::Map<String, serde_json::Value>) -> Result<Self, ConfigError> {
        from_kwargs_with_part(kw, |c: &mut Self, p| c.shared = p)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        check::positive("step_size", self.step_size)?;
        check::positive("noise_std", self.noise_std)?;
        check::at_least_one(&[
            ("n_directions", self.n_directions),
            ("n_eval_episodes", self.n_eval_episodes),
        ])?;
        if self.n_top_directions == 0 || self.n_top_directions > self.n_directions {
            return invalid("n_top_directions", "must be in 1..=n_directions");
        }
        self.shared.validate()
    }
}
