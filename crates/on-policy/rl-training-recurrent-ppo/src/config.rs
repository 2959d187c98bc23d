//! Recurrent PPO hyperparameters: PPO's (SB3 names, RLlib aliases) with the seed's defaults
//! for the recurrent variant, plus the LSTM settings. In YAML they are one flat table, as
//! sb3-contrib's keyword arguments.

use rl_training_core::config::{AlgoConfig, ConfigError, accepted_keys, strict};
use rl_training_core::schedule::Schedule;
use rl_training_ppo::PpoConfig;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use smart_default::SmartDefault;

/// The LSTM part of the configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, SmartDefault)]
#[serde(deny_unknown_fields, default)]
pub struct LstmSettings {
    /// LSTM units.
    #[default(256)]
    pub lstm_hidden_size: usize,
    /// Stacked LSTM layers.
    #[default(1)]
    pub n_lstm_layers: usize,
    /// The critic reads the actor's LSTM output (detached) instead of its own LSTM.
    #[default(false)]
    pub shared_lstm: bool,
    /// A separate critic LSTM (sb3-contrib's `enable_critic_lstm`; must be true unless
    /// `shared_lstm`).
    #[default(true)]
    pub enable_critic_lstm: bool,
    /// Truncated backpropagation through time: training sequences hold at most this many
    /// steps (RLlib's `max_seq_len`).
    #[default(16)]
    #[serde(alias = "max_seq_len")]
    pub sequence_length: usize,
}

/// Recurrent PPO hyperparameters (`algo_kwargs` of a run config).
#[derive(Debug, Clone, PartialEq)]
pub struct RecurrentPpoConfig {
    /// PPO's hyperparameters (`learning_rate`, `n_steps`, `batch_size` in steps, …).
    pub ppo: PpoConfig,
    /// The LSTM settings.
    pub lstm: LstmSettings,
}

impl Default for RecurrentPpoConfig {
    /// The seed table: `learning_rate` 3e-4, `n_steps` 128, `batch_size` 128, `n_epochs` 10,
    /// `clip_range` 0.2, `lstm_hidden_size` 256, `n_lstm_layers` 1, `sequence_length` 16;
    /// the rest as sb3-contrib's `RecurrentPPO`.
    fn default() -> Self {
        Self {
            ppo: PpoConfig {
                learning_rate: Schedule::Constant(3e-4),
                n_steps: 128,
                batch_size: 128,
                n_epochs: 10,
                clip_range: Schedule::Constant(0.2),
                ..PpoConfig::default()
            },
            lstm: LstmSettings::default(),
        }
    }
}

impl RecurrentPpoConfig {
    /// Parses a flat table: the LSTM keys go to [`LstmSettings`], the rest to PPO's
    /// (defaults of this algorithm where absent); `source` prefixes error messages.
    fn from_map(map: &Map<String, Value>, source: &str) -> Result<Self, ConfigError> {
        let mut ppo = serde_json::to_value(Self::default().ppo)
            .expect("serializable")
            .as_object()
            .cloned()
            .unwrap_or_default();
        let mut lstm = Map::new();
        // The LSTM keys, aliases included, as serde knows them.
        let lstm_keys = accepted_keys::<LstmSettings>();
        for (k, v) in map {
            if lstm_keys.contains(&k.as_str()) {
                lstm.insert(k.clone(), v.clone());
            } else {
                ppo.insert(k.clone(), v.clone());
            }
        }
        // PPO's defaults are spelled with their canonical names; an alias given by the user
        // (`lr`, `num_epochs`, …) replaces its default instead of clashing with it.
        for (alias, name) in ALIASES {
            if map.contains_key(alias) && !map.contains_key(name) {
                ppo.remove(name);
            }
        }
        Ok(Self {
            // PPO's own parse: its shared keys (gSDE, `policy_kwargs`) are read apart.
            ppo: PpoConfig::from_kwargs(&ppo)?,
            lstm: strict(Value::Object(lstm), source)?,
        })
    }
}

/// PPO's serde aliases, `(alias, field)` (a unit test checks the table against serde's).
const ALIASES: [(&str, &str); 15] = [
    ("lr", "learning_rate"),
    ("lr_schedule", "learning_rate"),
    ("rollout_fragment_length", "n_steps"),
    ("minibatch_size", "batch_size"),
    ("sgd_minibatch_size", "batch_size"),
    ("num_epochs", "n_epochs"),
    ("num_sgd_iter", "n_epochs"),
    ("lambda_", "gae_lambda"),
    ("lambda", "gae_lambda"),
    ("clip_param", "clip_range"),
    ("vf_clip_param", "clip_range_vf"),
    ("entropy_coeff", "ent_coef"),
    ("vf_loss_coeff", "vf_coef"),
    ("grad_clip", "max_grad_norm"),
    ("adam_epsilon", "adam_eps"),
];

impl Serialize for RecurrentPpoConfig {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = serde_json::to_value(&self.ppo)
            .map_err(serde::ser::Error::custom)?
            .as_object()
            .cloned()
            .unwrap_or_default();
        let lstm = serde_json::to_value(&self.lstm).map_err(serde::ser::Error::custom)?;
        map.extend(lstm.as_object().cloned().unwrap_or_default());
        map.serialize(s)
    }
}

impl<'de> Deserialize<'de> for RecurrentPpoConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let map = Map::deserialize(d)?;
        Self::from_map(&map, "algo_kwargs").map_err(serde::de::Error::custom)
    }
}

impl rl_training_on_policy::OnPolicyConfig for RecurrentPpoConfig {
    fn rollout_settings(&self) -> rl_training_on_policy::RolloutSettings {
        self.ppo.rollout_settings()
    }
}

impl AlgoConfig for RecurrentPpoConfig {
    fn from_kwargs(kw: &Map<String, Value>) -> Result<Self, ConfigError> {
        let c = Self::from_map(kw, "algo_kwargs")?;
        c.validate()?;
        Ok(c)
    }

    /// PPO's range checks and the LSTM's, with messages naming the field.
    fn validate(&self) -> Result<(), ConfigError> {
        self.ppo.validate()?;
        let err = |f: &str, m: &str| rl_training_core::config::invalid(f, m);
        if self.ppo.actor_critic.policy_kwargs.features_extractor_class
            != rl_training_on_policy::policy::FeaturesExtractor::Flatten
        {
            return err(
                "policy_kwargs.features_extractor_class",
                "the LSTM reads flattened observations: FlattenExtractor only",
            );
        }
        let l = &self.lstm;
        if l.lstm_hidden_size == 0 {
            return err("lstm_hidden_size", "must be at least 1");
        }
        if l.n_lstm_layers == 0 {
            return err("n_lstm_layers", "must be at least 1");
        }
        if l.sequence_length == 0 {
            return err("sequence_length", "must be at least 1");
        }
        if !l.shared_lstm && !l.enable_critic_lstm {
            return err(
                "enable_critic_lstm",
                "false needs shared_lstm: true (a critic without any LSTM is not supported)",
            );
        }
        if l.shared_lstm && l.enable_critic_lstm {
            return err(
                "enable_critic_lstm",
                "must be false with shared_lstm: true (the critic reads the actor's LSTM)",
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<RecurrentPpoConfig, ConfigError> {
        let v: Value = serde_json::from_str(yaml).unwrap();
        RecurrentPpoConfig::from_kwargs(v.as_object().unwrap())
    }

    #[test]
    fn seed_defaults_and_one_flat_table() {
        let c = parse("{}").unwrap();
        assert_eq!(c, RecurrentPpoConfig::default());
        assert_eq!(c.ppo.n_steps, 128);
        assert_eq!(c.ppo.batch_size, 128);
        assert_eq!(c.lstm.lstm_hidden_size, 256);
        assert_eq!(c.lstm.sequence_length, 16);
        let c = parse(r#"{"n_steps": 32, "lstm_hidden_size": 64, "max_seq_len": 8, "lr": 0.001}"#)
            .unwrap();
        assert_eq!((c.ppo.n_steps, c.lstm.lstm_hidden_size), (32, 64));
        assert_eq!(c.lstm.sequence_length, 8);
        assert_eq!(c.ppo.learning_rate, Schedule::Constant(1e-3));
        // What it writes, it reads back.
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(parse(&v.to_string()).unwrap(), c);
    }

    #[test]
    fn the_alias_table_is_ppo_configs() {
        let canonical = serde_json::to_value(PpoConfig::default()).unwrap();
        let canonical = canonical.as_object().unwrap();
        // Every alias serde accepts is in the table...
        for key in accepted_keys::<PpoConfig>() {
            assert!(
                canonical.contains_key(key) || ALIASES.iter().any(|(a, _)| *a == key),
                "{key}: an alias of PpoConfig missing from ALIASES"
            );
        }
        // ... and each entry is an alias of its field: both spellings at once clash.
        for (alias, name) in ALIASES {
            let v = &canonical[name];
            let both = serde_json::json!({ alias: v, name: v });
            let e = strict::<PpoConfig>(both, "algo_kwargs").unwrap_err();
            assert!(
                e.message.contains(&format!("duplicate field `{name}`")),
                "{alias} -> {name}: {e}"
            );
        }
        // The LSTM keys come from serde: the alias `max_seq_len` among them.
        assert!(accepted_keys::<LstmSettings>().contains(&"max_seq_len"));
    }

    #[test]
    fn bad_keys_and_values_name_the_field() {
        let e = parse(r#"{"lstm_hiden_size": 64}"#).unwrap_err();
        assert!(e.message.contains("lstm_hiden_size"), "{e}");
        let e = parse(r#"{"lstm_hidden_size": 0}"#).unwrap_err();
        assert_eq!(e.field, "algo_kwargs.lstm_hidden_size", "{e}");
        let e = parse(r#"{"sequence_length": "long"}"#).unwrap_err();
        assert_eq!(e.field, "algo_kwargs.sequence_length", "{e}");
        let e = parse(r#"{"enable_critic_lstm": false}"#).unwrap_err();
        assert_eq!(e.field, "algo_kwargs.enable_critic_lstm", "{e}");
        let e = parse(r#"{"batch_size": 0}"#).unwrap_err();
        assert_eq!(e.field, "algo_kwargs.batch_size", "{e}");
    }
}
