//! The environment interface, with Gymnasium semantics.
//!
//! Observations and actions are flat `f32` slices in their space's raw encoding (see
//! [`crate::spaces`]); the caller owns the observation buffer, so stepping allocates nothing.

use crate::spaces::Space;
use std::collections::BTreeMap;
use thiserror::Error;

/// Extra per-step information (Gymnasium's `info` dict, numeric values only).
pub type Info = BTreeMap<String, f64>;

/// Info key set by [`crate::wrappers::RecordEpisodeStatistics`] when an episode ends.
pub const EPISODE_RETURN: &str = "episode_return";
/// Info key for the episode's length, set with [`EPISODE_RETURN`].
pub const EPISODE_LENGTH: &str = "episode_length";

/// What `step` returns besides the observation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Step {
    /// Reward of this transition.
    pub reward: f64,
    /// The MDP reached a terminal state (no bootstrap).
    pub terminated: bool,
    /// The episode was cut short, e.g. by a time limit (bootstrap from the final observation).
    pub truncated: bool,
    /// Extra information.
    pub info: Info,
}

/// Errors from environments, wrappers and vector envs.
#[derive(Debug, Error)]
pub enum EnvError {
    /// An action outside the action space.
    #[error("env {env}: invalid action {action:?}: {reason}")]
    InvalidAction {
        /// Environment id.
        env: String,
        /// The action given.
        action: Vec<f32>,
        /// What is wrong with it.
        reason: String,
    },
    /// The env produced a non-finite or out-of-space observation or reward.
    #[error("env {env}: bad output: {reason}")]
    BadOutput {
        /// Environment id.
        env: String,
        /// What is wrong.
        reason: String,
    },
    /// `step` called before `reset`, or after the episode ended without a reset.
    #[error("env {env}: {reason}")]
    NeedsReset {
        /// Environment id.
        env: String,
        /// Explanation.
        reason: String,
    },
    /// Unknown id or bad keyword argument for `make`.
    #[error("{0}")]
    Make(String),
    /// The operation is not supported by this env.
    #[error("env {env}: {what} is not supported")]
    Unsupported {
        /// Environment id.
        env: String,
        /// Operation.
        what: String,
    },
    /// An env of a vector env failed (returned an error, produced a non-finite value or
    /// panicked): which env, at which step of the vector env, and what happened.
    #[error("env {index} ({env}) of the vector env, at step {step}: {source}")]
    InVector {
        /// Environment id.
        env: String,
        /// Index of the env in the vector env.
        index: usize,
        /// Vector-env steps taken, this one included (0: during the first reset).
        step: u64,
        /// What the env did.
        source: Box<EnvError>,
    },
    /// The env panicked; the vector env caught it so the run ends with an error, not an abort.
    #[error("panicked: {message}")]
    Panicked {
        /// The panic's message.
        message: String,
    },
    /// An invalid internal state given to `set_state`.
    #[error("env {env}: invalid state: {reason}")]
    InvalidState {
        /// Environment id.
        env: String,
        /// What is wrong.
        reason: String,
    },
}

/// A Gymnasium-style environment.
pub trait Env: Send {
    /// Registry id (e.g. `CartPole-v1`) or a descriptive name.
    fn id(&self) -> &str;
    /// The observation space.
    fn observation_space(&self) -> &Space;
    /// The action space.
    fn action_space(&self) -> &Space;
    /// Starts an episode; `seed` reseeds the env's generator (Gymnasium's `reset(seed=…)`),
    /// `None` continues it; `options` are Gymnasium's reset options (e.g. `low`/`high` for the
    /// classic-control reset draw). Writes the first observation into `obs` (length `raw_dim`).
    fn reset(
        &mut self,
        seed: Option<u64>,
        options: Option<&Kwargs>,
        obs: &mut [f32],
    ) -> Result<Info, EnvError>;
    /// Applies `action` (raw encoding) and writes the next observation into `obs`.
    fn step(&mut self, action: &[f32], obs: &mut [f32]) -> Result<Step, EnvError>;
    /// Announces the action the next [`step`](Env::step) will take, so that a backend that
    /// steps many envs in one call (rl-training-gymnasium: one Python call per vector step) can add it
    /// to `batch`; [`VecEnv`](crate::vec_env::VecEnv) runs the batch, and each env's `step`
    /// then picks up its result. A wrapper that changes actions stages the changed one.
    /// Default: nothing staged, the env steps alone.
    fn stage(&mut self, _action: &[f32], _batch: &mut StepBatch) -> Result<(), EnvError> {
        Ok(())
    }
    /// The raw internal state (for conformance tests and debugging), if exposed.
    fn state(&self) -> Option<Vec<f64>> {
        None
    }
    /// Sets the raw internal state, if supported.
    fn set_state(&mut self, _state: &[f64]) -> Result<(), EnvError> {
        Err(EnvError::Unsupported {
            env: self.id().to_string(),
            what: "set_state".into(),
        })
    }
    /// A text rendering of the current state (Gymnasium's `ansi` mode), if any.
    fn render(&self) -> Option<String> {
        None
    }
    /// Statistics that wrappers keep (normalizers), outermost first, to save in checkpoints.
    fn save_stats(&self) -> Vec<serde_json::Value> {
        Vec::new()
    }
    /// Restores what [`save_stats`](Env::save_stats) returned; each wrapper takes the entry
    /// tagged with its name, so an evaluation env without reward normalization can take the
    /// observation statistics of a training env that has both.
    fn load_stats(&mut self, _stats: &[serde_json::Value]) -> Result<(), EnvError> {
        Ok(())
    }
    /// Switches normalizing wrappers between updating their statistics (training) and not.
    fn set_training(&mut self, _training: bool) {}
    /// Everything needed to continue this env exactly where it is (state, generator, wrapper
    /// counters), for bit-identical resume from a checkpoint.
    fn snapshot(&self) -> Result<serde_json::Value, EnvError> {
        Err(EnvError::Unsupported {
            env: self.id().to_string(),
            what: "snapshot (needed to save a resumable checkpoint)".into(),
        })
    }
    /// Restores a [`snapshot`](Env::snapshot).
    fn restore(&mut self, _snapshot: &serde_json::Value) -> Result<(), EnvError> {
        Err(EnvError::Unsupported {
            env: self.id().to_string(),
            what: "restore".into(),
        })
    }
}

/// Reads field `key` of a snapshot, with an error naming the env and the field.
pub fn snap_field<T: serde::de::DeserializeOwned>(
    env: &str,
    snap: &serde_json::Value,
    key: &str,
) -> Result<T, EnvError> {
    let v = snap.get(key).ok_or_else(|| EnvError::InvalidState {
        env: env.to_string(),
        reason: format!("snapshot lacks field {key:?}"),
    })?;
    serde_json::from_value(v.clone()).map_err(|e| EnvError::InvalidState {
        env: env.to_string(),
        reason: format!("snapshot field {key:?}: {e}"),
    })
}

impl Env for Box<dyn Env> {
    fn id(&self) -> &str {
        (**self).id()
    }
    fn observation_space(&self) -> &Space {
        (**self).observation_space()
    }
    fn action_space(&self) -> &Space {
        (**self).action_space()
    }
    fn reset(
        &mut self,
        seed: Option<u64>,
        options: Option<&Kwargs>,
        obs: &mut [f32],
    ) -> Result<Info, EnvError> {
        (**self).reset(seed, options, obs)
    }
    fn step(&mut self, action: &[f32], obs: &mut [f32]) -> Result<Step, EnvError> {
        (**self).step(action, obs)
    }
    fn stage(&mut self, action: &[f32], batch: &mut StepBatch) -> Result<(), EnvError> {
        (**self).stage(action, batch)
    }
    fn state(&self) -> Option<Vec<f64>> {
        (**self).state()
    }
    fn set_state(&mut self, state: &[f64]) -> Result<(), EnvError> {
        (**self).set_state(state)
    }
    fn render(&self) -> Option<String> {
        (**self).render()
    }
    fn save_stats(&self) -> Vec<serde_json::Value> {
        (**self).save_stats()
    }
    fn load_stats(&mut self, stats: &[serde_json::Value]) -> Result<(), EnvError> {
        (**self).load_stats(stats)
    }
    fn set_training(&mut self, training: bool) {
        (**self).set_training(training)
    }
    fn snapshot(&self) -> Result<serde_json::Value, EnvError> {
        (**self).snapshot()
    }
    fn restore(&mut self, snapshot: &serde_json::Value) -> Result<(), EnvError> {
        (**self).restore(snapshot)
    }
}

/// Steps that envs of one backend take together ([`Env::stage`]): each backend keeps one
/// [`BatchPart`], and [`run`](StepBatch::run) runs each part once (e.g. one Python call for
/// all of a vector's Gymnasium envs) before the envs' `step` calls pick up their results.
#[derive(Default)]
pub struct StepBatch {
    parts: Vec<Box<dyn BatchPart>>,
}

/// One backend's share of a [`StepBatch`]: the staged steps it runs together.
pub trait BatchPart: Send + 'static {
    /// Runs the staged steps. A failure of one env's step belongs in that env's result (its
    /// `step` reports it, naming the env); an error here fails the whole vector step.
    fn run(&mut self) -> Result<(), EnvError>;
    /// `self`, for [`StepBatch::part`] to find a part by its type.
    fn as_any(&mut self) -> &mut dyn std::any::Any;
}

impl StepBatch {
    /// The part of type `P`, created empty on first use.
    pub fn part<P: BatchPart + Default>(&mut self) -> &mut P {
        let i = match self.parts.iter_mut().position(|p| p.as_any().is::<P>()) {
            Some(i) => i,
            None => {
                self.parts.push(Box::new(P::default()));
                self.parts.len() - 1
            }
        };
        self.parts[i]
            .as_any()
            .downcast_mut::<P>()
            .expect("found by its type")
    }

    /// Whether no env staged anything.
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// Runs every part once, then empties the batch.
    pub fn run(&mut self) -> Result<(), EnvError> {
        let parts = std::mem::take(&mut self.parts);
        for mut p in parts {
            p.run()?;
        }
        Ok(())
    }
}

/// Validates an action against the space, with an error naming the env.
pub fn check_action(env: &str, space: &Space, action: &[f32]) -> Result<(), EnvError> {
    space
        .check(action)
        .map_err(|reason| EnvError::InvalidAction {
            env: env.to_string(),
            action: action.to_vec(),
            reason,
        })
}

/// Keyword arguments for `make` (`gymnasium.make(id, **kwargs)`), as YAML/JSON values.
pub type Kwargs = BTreeMap<String, serde_json::Value>;

/// Builds an env from keyword arguments.
pub type EnvFactory = fn(&Kwargs) -> Result<Box<dyn Env>, EnvError>;

/// A registry of env ids, as `gymnasium.register` / `gymnasium.make`.
#[derive(Default, Clone)]
pub struct Registry {
    entries: BTreeMap<String, (EnvFactory, Option<usize>)>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }
    /// Registers `id` with its factory and default time limit (`max_episode_steps`).
    pub fn register(&mut self, id: &str, factory: EnvFactory, max_episode_steps: Option<usize>) {
        self.entries
            .insert(id.to_string(), (factory, max_episode_steps));
    }
    /// Registered ids, sorted.
    pub fn ids(&self) -> Vec<&str> {
        self.entries.keys().map(String::as_str).collect()
    }
    /// Default time limit of `id`.
    pub fn max_episode_steps(&self, id: &str) -> Option<usize> {
        self.entries.get(id).and_then(|e| e.1)
    }
    /// Builds `id`, wrapped in its TimeLimit (override with the `max_episode_steps` kwarg).
    pub fn make(&self, id: &str, kwargs: &Kwargs) -> Result<Box<dyn Env>, EnvError> {
        let (factory, default_max) = self.entries.get(id).ok_or_else(|| {
            EnvError::Make(format!(
                "unknown env id {id:?}; registered: {}",
                self.ids().join(", ")
            ))
        })?;
        let mut kw = kwargs.clone();
        let max = match kw.remove("max_episode_steps") {
            None => *default_max,
            Some(serde_json::Value::Null) => None,
            Some(v) => Some(v.as_u64().ok_or_else(|| {
                EnvError::Make(format!(
                    "{id}: max_episode_steps must be a positive integer, got {v}"
                ))
            })? as usize),
        };
        let env = factory(&kw)?;
        Ok(match max {
            Some(m) => Box::new(crate::wrappers::TimeLimit::new(env, m)),
            None => env,
        })
    }
}

/// Reads an optional keyword argument, with an error naming it when its type is wrong.
pub fn kwarg<T: serde::de::DeserializeOwned>(
    env: &str,
    kwargs: &Kwargs,
    key: &str,
) -> Result<Option<T>, EnvError> {
    match kwargs.get(key) {
        None => Ok(None),
        Some(v) => serde_json::from_value(v.clone())
            .map(Some)
            .map_err(|e| EnvError::Make(format!("{env}: keyword argument {key:?}: {e}"))),
    }
}

/// Rejects keyword arguments outside `allowed`, naming the bad key and the allowed ones.
pub fn check_kwargs(env: &str, kwargs: &Kwargs, allowed: &[&str]) -> Result<(), EnvError> {
    for k in kwargs.keys() {
        if !allowed.contains(&k.as_str()) {
            return Err(EnvError::Make(format!(
                "{env}: unknown keyword argument {k:?}; allowed: {}",
                if allowed.is_empty() {
                    "none".to_string()
                } else {
                    allowed.join(", ")
                }
            )));
        }
    }
    Ok(())
}
