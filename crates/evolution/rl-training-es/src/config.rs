//! OpenAI-ES hyperparameters: the seed table, OpenAI's / RLlib's names as aliases.

use rl_training_core::config::{AlgoConfig, ConfigError, check, from_kwargs_with_part, invalid};
use rl_training_evolution::{
    FitnessShaping, HiddenActivation, PolicyDefault, PolicyDefaults, PolicyKeys,
};
use serde::{Deserialize, Serialize};
use smart_default::SmartDefault;

/// OpenAI-ES hyperparameters (`algo_kwargs` of a run config).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, SmartDefault)]
#[serde(deny_unknown_fields, default)]
pub struct EsConfig {
    /// Adam step size.
    #[default(0.01)]
    #[serde(alias = "lr", alias = "stepsize")]
    pub learning_rate: f64,
    /// Standard deviation σ of the parameter noise.
    #[default(0.02)]
    #[serde(alias = "noise_stdev", alias = "sigma")]
    pub noise_std: f64,
    /// Episodes per iteration (with `antithetic`, `pop_size / 2` mirrored pairs).
    #[default(256)]
    #[serde(alias = "episodes_per_batch")]
    pub pop_size: usize,
    /// L2 coefficient (weight decay added to the negated gradient).
    #[default(0.005)]
    #[serde(alias = "l2coeff")]
    pub l2_coef: f64,
    /// `centered_rank` or `none`.
    #[default(FitnessShaping::CenteredRank)]
    #[serde(alias = "fitness_shaping")]
    pub reward_shaping: FitnessShaping,
    /// Mirrored sampling: each ε evaluated at `θ + σε` and `θ − σε`.
    #[default(true)]
    pub antithetic: bool,
    /// The policy and worker keys shared with ARS ([`PolicyKeys`], flat in YAML), with
    /// OpenAI-ES's defaults.
    #[serde(flatten, skip_deserializing)]
    pub shared: PolicyKeys<EsConfig>,
}

/// OpenAI-ES's policy defaults: an MLP of two hidden tanh layers.
impl PolicyDefaults for EsConfig {
    const POLICY: PolicyDefault = PolicyDefault::mlp(16, &[32, 32], HiddenActivation::Tanh);
}

impl AlgoConfig for EsConfig {
    /// The shared policy keys are read apart from the rest (both strictly).
    fn from_kwargs(kw: &serde_json::Map<String, serde_json::Value>) -> Result<Self, ConfigError> {
        from_kwargs_with_part(kw, |c: &mut Self, p| c.shared = p)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        check::positive("learning_rate", self.learning_rate)?;
        check::positive("noise_std", self.noise_std)?;
        if self.pop_size < 2 {
            return invalid("pop_size", "must be at least 2");
        }
        if self.antithetic && self.pop_size % 2 == 1 {
            return invalid("pop_size", "must be even with antithetic sampling");
        }
        if self.l2_coef < 0.0 {
            return invalid("l2_coef", "must be non-negative");
        }
        self.shared.validate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: serde_json::Value) -> Result<EsConfig, ConfigError> {
        EsConfig::from_kwargs(v.as_object().expect("a table"))
    }

    #[test]
    fn shared_policy_keys_and_own_keys_in_one_flat_table() {
        let c = parse(json!({"observation_filter_on": false, "with_bias": true, "pop_size": 8}))
            .unwrap();
        assert!(!c.shared.normalize_obs && c.shared.bias == Some(true));
        assert_eq!(c.pop_size, 8);
        // The saved config (flat, canonical names) reads back the same.
        let saved = serde_json::to_value(&c).unwrap();
        assert_eq!(saved["normalize_obs"], json!(false));
        assert_eq!(parse(saved).unwrap(), c);
        assert_eq!(parse(json!({})).unwrap(), EsConfig::default());
        for (bad, field) in [
            (
                json!({"noise_table_size": "many"}),
                "algo_kwargs.noise_table_size",
            ),
            (json!({"pop_size": "many"}), "algo_kwargs.pop_size"),
            (json!({"normalise_obs": true}), "algo_kwargs"),
        ] {
            let e = parse(bad.clone()).unwrap_err();
            assert!(e.field.starts_with(field), "{bad}: {e}");
        }
    }
}
