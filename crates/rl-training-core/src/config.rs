//! The run configuration (the seed's YAML format) and strict parsing helpers: unknown keys and
//! wrong types are errors that name the key (with its path) and list the allowed keys.

use crate::env::Kwargs;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// An invalid configuration value: where it is (`field`: a key path such as
/// `algo_kwargs.n_steps`, prefixed by the file it came from when there is one) and what was
/// expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ConfigError {
    /// The key (with its path) or file the error is about.
    pub field: String,
    /// What is wrong and what was expected.
    pub message: String,
}

impl ConfigError {
    /// An error about `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }

    /// The same error located in `file` (`ppo.yaml: algo_kwargs.n_steps`).
    pub fn in_file(self, file: &str) -> Self {
        let field = if self.field.is_empty() {
            file.to_string()
        } else {
            format!("{file}: {}", self.field)
        };
        Self { field, ..self }
    }
}

impl From<ConfigError> for String {
    fn from(e: ConfigError) -> String {
        e.to_string()
    }
}

/// Observation/reward normalization wrappers for the training envs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NormalizeConfig {
    /// Normalize observations with running statistics.
    pub obs: bool,
    /// Scale rewards by the running std of the discounted return.
    pub reward: bool,
    /// One set of statistics over all envs of the vector (SB3's `VecNormalize`) instead of
    /// one per env (Gymnasium's wrappers, CleanRL): see [`crate::vec_env::SharedNormalizer`].
    pub shared: bool,
}

/// Where an offline algorithm reads its data (RLlib's `offline_data` section).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OfflineDataConfig {
    /// The dataset: a path or a list of paths (RLlib's `input_`), each a `.parquet` or `.npz`
    /// file, a directory of them or a glob pattern; read in the order given.
    #[serde(alias = "input_")]
    pub input: DataInput,
    /// Rows of the shuffle window batches are drawn from (bounds memory for large files).
    #[serde(default = "shuffle_window")]
    pub shuffle_buffer_size: usize,
}

fn shuffle_window() -> usize {
    100_000
}

/// `offline_data.input`: one path (`input: data/expert.parquet`) or a list
/// (`input: [data/expert.parquet, data/noisy.parquet]`); never empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataInput(pub Vec<String>);

impl DataInput {
    /// One path.
    pub fn one(path: impl Into<String>) -> Self {
        Self(vec![path.into()])
    }
}

impl Serialize for DataInput {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0.as_slice() {
            [one] => s.serialize_str(one),
            many => many.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for DataInput {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = DataInput;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a dataset path, directory or glob, or a non-empty list of them")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<DataInput, E> {
                Ok(DataInput::one(v))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<DataInput, A::Error> {
                let mut out = Vec::new();
                while let Some(p) = a.next_element::<String>()? {
                    out.push(p);
                }
                if out.is_empty() {
                    return Err(serde::de::Error::invalid_length(0, &self));
                }
                Ok(DataInput(out))
            }
        }
        d.deserialize_any(V)
    }
}

/// A training run, as in `examples/configs/*.yaml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    /// Algorithm name (`ppo`, …).
    pub algorithm: String,
    /// Environment id (`CartPole-v1`, …).
    pub env_id: String,
    /// Keyword arguments for the env (`gymnasium.make(id, **env_kwargs)`).
    #[serde(default)]
    pub env_kwargs: Kwargs,
    /// Env-step budget.
    pub total_timesteps: u64,
    /// Number of parallel envs.
    #[serde(default = "one", alias = "num_env_runners", alias = "num_envs")]
    pub n_envs: usize,
    /// Threads stepping the envs (1: on the training thread).
    #[serde(default = "one")]
    pub vec_env_threads: usize,
    /// Run seed: weights, action sampling, minibatches and env seeds derive from it.
    #[serde(default)]
    pub seed: u64,
    /// `flex`, `wgpu[:N]` or `cuda[:N]`.
    #[serde(default = "flex")]
    pub device: String,
    /// flex's CPU kernel level: `auto` (the CPU's best, or `RL_KERNELS`), `avx2` or `avx512`
    /// (see [`crate::kernels`]).
    #[serde(default, skip_serializing_if = "is_auto")]
    pub kernels: crate::kernels::KernelLevel,
    /// Threads of flex's kernels (0: `RL_NUM_THREADS`, else one per core; see
    /// [`crate::threads`]). One count per process: the first run sets it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub num_threads: usize,
    /// Evaluate every this many env steps (0: only at the end).
    #[serde(default)]
    pub eval_freq: u64,
    /// Episodes per evaluation.
    #[serde(default = "ten")]
    pub n_eval_episodes: usize,
    /// Seed of the evaluation env (default: run seed + 10⁶).
    #[serde(default)]
    pub eval_seed: Option<u64>,
    /// Save a checkpoint every this many env steps (0: only at the end).
    #[serde(default)]
    pub checkpoint_freq: u64,
    /// Stop early once an evaluation reaches this mean return.
    #[serde(default)]
    pub return_threshold: Option<f64>,
    /// Stop after this many seconds of training.
    #[serde(default)]
    pub max_wall_seconds: Option<f64>,
    /// Normalization wrappers.
    #[serde(default)]
    pub normalize: NormalizeConfig,
    /// The dataset of an offline algorithm (BC, MARWIL, CQL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offline_data: Option<OfflineDataConfig>,
    /// A curiosity plugin for an online algorithm (`{type: icm, ...}`: rl-training-curiosity's keys,
    /// parsed strictly when the algorithm is built).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub curiosity: Option<serde_json::Value>,
    /// A multi-agent run (`env_id` a multi-agent env): its policies and which agent each acts
    /// for (RLlib's `multi_agent` settings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multi_agent: Option<crate::multi_agent::MultiAgentConfig>,
    /// Hyperparameters of the algorithm (its own names; RLlib aliases accepted).
    #[serde(default)]
    pub algo_kwargs: serde_json::Map<String, serde_json::Value>,
}

fn one() -> usize {
    1
}
fn ten() -> usize {
    10
}
fn flex() -> String {
    "flex".into()
}
fn is_zero(n: &usize) -> bool {
    *n == 0
}
fn is_auto(k: &crate::kernels::KernelLevel) -> bool {
    *k == crate::kernels::KernelLevel::Auto
}

impl RunConfig {
    /// An error naming `curiosity` when the run asks for a plugin the algorithm cannot use,
    /// saying `why`.
    pub fn refuse_curiosity(&self, why: &str) -> Result<(), ConfigError> {
        match self.curiosity {
            Some(_) => Err(ConfigError::new(
                "curiosity",
                format!("{} takes no curiosity plugin: {why}", self.algorithm),
            )),
            None => Ok(()),
        }
    }

    /// Parses YAML text, applying `overrides` (`key=value`, dotted keys such as
    /// `algo_kwargs.n_steps=64`) first.
    pub fn from_yaml(text: &str, overrides: &[String], source: &str) -> Result<Self, ConfigError> {
        let mut v: serde_json::Value = serde_saphyr::from_str(text)
            .map_err(|e| ConfigError::new(source, format!("not valid YAML: {e}")))?;
        for o in overrides {
            apply_override(&mut v, o)?;
        }
        strict(v, "").map_err(|e| e.in_file(source))
    }

    /// The algorithm's discount `algo_kwargs.gamma` (0.99 when absent), which reward
    /// normalization uses.
    pub fn discount(&self) -> f64 {
        self.algo_kwargs
            .get("gamma")
            .and_then(|v| v.as_f64())
            .unwrap_or(0.99)
    }

    /// Applies the run's process-wide settings before anything is built: the kernel level
    /// (`kernels`, [`crate::kernels::apply`]) and the thread count (`num_threads`,
    /// [`crate::threads::apply`]).
    pub fn apply_process_settings(&self) -> Result<(), crate::algorithm::RlError> {
        crate::threads::apply(self.num_threads)?;
        crate::kernels::apply(self.kernels)?;
        Ok(())
    }

    /// The evaluation seed.
    pub fn eval_seed(&self) -> u64 {
        self.eval_seed.unwrap_or(self.seed.wrapping_add(1_000_000))
    }
}

/// Sets `key=value` (dotted path; value parsed as YAML) in a config tree.
pub fn apply_override(root: &mut serde_json::Value, spec: &str) -> Result<(), ConfigError> {
    let (key, val) = spec
        .split_once('=')
        .ok_or_else(|| ConfigError::new(format!("--set {spec:?}"), "expected key=value"))?;
    let val: serde_json::Value = serde_saphyr::from_str(val)
        .map_err(|e| ConfigError::new(format!("--set {key}"), e.to_string()))?;
    let mut cur = root;
    let parts: Vec<&str> = key.split('.').collect();
    for (i, p) in parts.iter().enumerate() {
        let obj = cur.as_object_mut().ok_or_else(|| {
            ConfigError::new(
                format!("--set {key}"),
                format!("{} is not a mapping", parts[..i].join(".")),
            )
        })?;
        if i + 1 == parts.len() {
            obj.insert(p.to_string(), val);
            return Ok(());
        }
        cur = obj
            .entry(p.to_string())
            .or_insert_with(|| serde_json::Value::Object(Default::default()));
    }
    Ok(())
}

/// Hyperparameters of an algorithm (`algo_kwargs`): parsed strictly (unknown keys and wrong
/// types are errors naming the key), then range-checked.
pub trait AlgoConfig: DeserializeOwned {
    /// Range checks, each error naming its field (`algo_kwargs.<field>`).
    fn validate(&self) -> Result<(), ConfigError>;

    /// Parses `algo_kwargs` strictly and checks value ranges.
    fn from_kwargs(kw: &serde_json::Map<String, serde_json::Value>) -> Result<Self, ConfigError> {
        let c: Self = strict(serde_json::Value::Object(kw.clone()), "algo_kwargs")?;
        c.validate()?;
        Ok(c)
    }
}

/// Deserializes `v` strictly: an error names the key path under `prefix`
/// (`algo_kwargs.n_steps: invalid type…`; an unknown key: `unknown field `foo`, expected one
/// of …`).
pub fn strict<T: DeserializeOwned>(v: serde_json::Value, prefix: &str) -> Result<T, ConfigError> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        let field = match (prefix.is_empty(), path == ".") {
            (_, true) => prefix.to_string(),
            (true, false) => path,
            (false, false) => format!("{prefix}.{path}"),
        };
        ConfigError::new(field, e.inner().to_string())
    })
}

/// Splits a flat table between a shared config part `P` and the rest: the keys `P` accepts
/// (aliases included, as serde knows them) go to the first map, the others to the second. A
/// config that embeds `P` (`#[serde(flatten, skip_deserializing)]`) parses each map
/// [`strict`]ly, so errors keep their field paths and unknown keys are still refused.
pub fn split_keys<P: DeserializeOwned>(
    kw: &serde_json::Map<String, serde_json::Value>,
) -> (
    serde_json::Map<String, serde_json::Value>,
    serde_json::Map<String, serde_json::Value>,
) {
    let keys = accepted_keys::<P>();
    kw.iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .partition(|(k, _)| keys.contains(&k.as_str()))
}

/// Parses `algo_kwargs` into a config `T` with a shared part `P` read separately (see
/// [`split_keys`]): `set` puts the part into the config; then `validate`.
pub fn from_kwargs_with_part<T: AlgoConfig, P: DeserializeOwned>(
    kw: &serde_json::Map<String, serde_json::Value>,
    set: impl FnOnce(&mut T, P),
) -> Result<T, ConfigError> {
    let (part, own) = split_keys::<P>(kw);
    let mut cfg: T = strict(serde_json::Value::Object(own), "algo_kwargs")?;
    set(
        &mut cfg,
        strict(serde_json::Value::Object(part), "algo_kwargs")?,
    );
    cfg.validate()?;
    Ok(cfg)
}

/// Every key a serde struct accepts: its fields' names and their aliases, as serde's derive
/// lists them (tables that repeat a config's keys are checked against this).
pub fn accepted_keys<T: DeserializeOwned>() -> Vec<&'static str> {
    use serde::de::{Error, Visitor, value::Error as E};
    struct Keys<'a>(&'a mut Vec<&'static str>);
    impl<'de> serde::Deserializer<'de> for Keys<'_> {
        type Error = E;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, E> {
            Err(E::custom("not a struct"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, E> {
            self.0.extend_from_slice(fields);
            Err(E::custom("keys only"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
            identifier ignored_any
        }
    }
    let mut keys = Vec::new();
    let _ = T::deserialize(Keys(&mut keys));
    keys
}

/// `Err(ConfigError)` for `algo_kwargs.<field>`: the form every `validate` uses.
pub fn invalid<T>(field: &str, message: impl Into<String>) -> Result<T, ConfigError> {
    Err(ConfigError::new(format!("algo_kwargs.{field}"), message))
}

/// The range checks configs share, each error naming `algo_kwargs.<field>` with the same
/// words everywhere.
pub mod check {
    use super::{ConfigError, invalid};

    /// Counts and sizes: each must be at least 1.
    pub fn at_least_one(fields: &[(&str, usize)]) -> Result<(), ConfigError> {
        match fields.iter().find(|(_, v)| *v == 0) {
            Some((f, _)) => invalid(f, "must be at least 1"),
            None => Ok(()),
        }
    }

    /// Discounts, λ and fractions: in [0, 1].
    pub fn unit_interval(field: &str, v: f64) -> Result<(), ConfigError> {
        if (0.0..=1.0).contains(&v) {
            Ok(())
        } else {
            invalid(field, "must be in [0, 1]")
        }
    }

    /// Step sizes and scales: above 0 (NaN refused).
    pub fn positive(field: &str, v: f64) -> Result<(), ConfigError> {
        if v > 0.0 {
            Ok(())
        } else {
            invalid(field, "must be positive")
        }
    }

    /// A global-norm gradient clip: none, or above 0.
    pub fn grad_clip(field: &str, v: Option<f64>) -> Result<(), ConfigError> {
        match v {
            Some(g) if !(g > 0.0) => invalid(field, "must be positive (or null for no clipping)"),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str =
        "algorithm: ppo\nenv_id: CartPole-v1\ntotal_timesteps: 1000\nalgo_kwargs:\n  n_steps: 32\n";

    #[test]
    fn a_key_given_twice_is_an_error_naming_it() {
        let e = RunConfig::from_yaml(&format!("{BASE}  n_steps: 64\n"), &[], "dup.yaml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("dup.yaml") && e.contains("duplicate") && e.contains("n_steps"),
            "{e}"
        );
    }

    #[test]
    fn offline_input_takes_a_path_or_a_list() {
        let one = RunConfig::from_yaml(
            &format!("{BASE}offline_data: {{input: a.parquet}}\n"),
            &[],
            "t",
        )
        .unwrap();
        assert_eq!(one.offline_data.unwrap().input, DataInput::one("a.parquet"));
        let y = format!("{BASE}offline_data:\n  input_: [a.parquet, d/*.npz]\n");
        let many = RunConfig::from_yaml(&y, &[], "t").unwrap();
        let input = many.offline_data.clone().unwrap().input;
        assert_eq!(
            input.0,
            vec!["a.parquet".to_string(), "d/*.npz".to_string()]
        );
        // The saved config (config.yaml) reads back the same.
        let back =
            RunConfig::from_yaml(&crate::runner::config_yaml(&many).unwrap(), &[], "t").unwrap();
        assert_eq!(back, many);
        for bad in ["input: []", "input: 3", "input: [a.parquet, 3]"] {
            let y = format!("{BASE}offline_data: {{{bad}}}\n");
            let e = RunConfig::from_yaml(&y, &[], "t").unwrap_err();
            assert!(e.field.starts_with("t: offline_data.input"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_kernel_level_is_a_checked_key_saved_only_when_pinned() {
        use crate::kernels::KernelLevel;
        let c = RunConfig::from_yaml(BASE, &["kernels=avx2".into()], "t").unwrap();
        assert_eq!(c.kernels, KernelLevel::Avx2);
        let saved = crate::runner::config_yaml(&c).unwrap();
        assert!(saved.contains("kernels: avx2"), "{saved}");
        assert_eq!(RunConfig::from_yaml(&saved, &[], "t").unwrap(), c);
        let auto = RunConfig::from_yaml(BASE, &[], "t").unwrap();
        assert_eq!(auto.kernels, KernelLevel::Auto);
        assert!(
            !crate::runner::config_yaml(&auto)
                .unwrap()
                .contains("kernels")
        );
        let e = RunConfig::from_yaml(&format!("{BASE}kernels: avx1024\n"), &[], "t").unwrap_err();
        assert!(
            e.field == "t: kernels" && e.message.contains("avx512"),
            "{e}"
        );
    }

    #[test]
    fn accepted_keys_are_the_fields_and_their_aliases() {
        assert_eq!(
            accepted_keys::<NormalizeConfig>(),
            ["obs", "reward", "shared"]
        );
        let keys = accepted_keys::<OfflineDataConfig>();
        assert!(
            keys.contains(&"input") && keys.contains(&"input_"),
            "{keys:?}"
        );
    }

    #[test]
    fn parses_and_overrides() {
        let c = RunConfig::from_yaml(
            BASE,
            &[
                "seed=3".into(),
                "algo_kwargs.batch_size=64".into(),
                "num_env_runners=4".into(),
            ],
            "t.yaml",
        )
        .unwrap();
        assert_eq!((c.seed, c.n_envs), (3, 4));
        assert_eq!(c.algo_kwargs["batch_size"], 64);
        assert_eq!(c.device, "flex");
    }

    #[test]
    fn errors_name_the_key() {
        let e = RunConfig::from_yaml(&format!("{BASE}colour: red\n"), &[], "t.yaml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("t.yaml") && e.contains("colour") && e.contains("total_timesteps"),
            "{e}"
        );
        let e = RunConfig::from_yaml(&BASE.replace("1000", "lots"), &[], "t.yaml").unwrap_err();
        assert!(
            e.field == "t.yaml: total_timesteps" && e.message.contains("invalid type"),
            "{e}"
        );
        let e = RunConfig::from_yaml("algorithm: ppo\n", &[], "t.yaml").unwrap_err();
        assert!(
            e.field == "t.yaml" && e.message.contains("missing field"),
            "{e}"
        );
        // A value out of range: the field with its path.
        let e = crate::config::invalid::<()>("n_steps", "must be positive").unwrap_err();
        assert_eq!(e.to_string(), "algo_kwargs.n_steps: must be positive");
    }
}
