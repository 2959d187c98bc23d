//! The `Learner` and `Algorithm` traits, evaluation, callbacks and stop conditions.

use crate::checkpoint::{Checkpoint, CheckpointError};
use crate::env::{Env, EnvError};
use crate::logger::Metrics;
use crate::params::{TensorFileError, TensorMap};
use crate::spaces::Space;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::path::Path;
use std::time::{Duration, Instant};
use thiserror::Error;

/// Errors of training, evaluation and persistence.
#[derive(Debug, Error)]
pub enum RlError {
    /// An environment failed or misbehaved.
    #[error(transparent)]
    Env(#[from] EnvError),
    /// A checkpoint could not be read or written.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// Saved tensors are malformed.
    #[error(transparent)]
    Tensors(#[from] TensorFileError),
    /// A configuration value is invalid.
    #[error("config: {0}")]
    Config(#[from] crate::config::ConfigError),
    /// The kernel level asked for (`kernels`, `RL_KERNELS`) is unknown or beyond this CPU.
    #[error(transparent)]
    Kernels(#[from] crate::kernels::KernelError),
    /// The thread count asked for (`num_threads`, `RL_NUM_THREADS`) is not a count or differs
    /// from the one this process already runs.
    #[error(transparent)]
    Threads(#[from] crate::threads::ThreadsError),
    /// A loss or metric became NaN or infinite.
    #[error("training diverged at step {step}: metric {metric} is {value}")]
    NonFinite {
        /// Env steps taken when it happened.
        step: u64,
        /// The metric that went bad.
        metric: String,
        /// Its value.
        value: f64,
    },
    /// Training was interrupted (Ctrl-C / SIGINT, SIGTERM) and a checkpoint was saved first.
    #[error(
        "interrupted at {timesteps} env steps; checkpoint saved in {checkpoint} (continue with `rl resume {checkpoint}`)"
    )]
    Interrupted {
        /// Env steps taken.
        timesteps: u64,
        /// The checkpoint written before stopping.
        checkpoint: String,
    },
    /// Any other failure, described.
    #[error("{0}")]
    Other(String),
}

/// Fails with [`RlError::NonFinite`] naming the first of `losses` that is NaN or infinite.
pub fn check_losses(step: u64, losses: &[(&str, f64)]) -> Result<(), RlError> {
    match losses.iter().find(|(_, v)| !v.is_finite()) {
        Some((name, v)) => Err(RlError::NonFinite {
            step,
            metric: name.to_string(),
            value: *v,
        }),
        None => Ok(()),
    }
}

/// Fails with [`RlError::NonFinite`] if any metric is NaN or infinite.
pub fn check_finite(step: u64, metrics: &Metrics) -> Result<(), RlError> {
    for (k, &v) in metrics {
        if !v.is_finite() {
            return Err(RlError::NonFinite {
                step,
                metric: k.clone(),
                value: v,
            });
        }
    }
    Ok(())
}

/// Where training stands, handed to every [`Learner::update`] by the shell that owns the
/// counters (learners keep no copies of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Progress {
    /// Env steps taken so far, including those of the batch being learned from.
    pub num_timesteps: u64,
    /// The budget the schedules are relative to.
    pub total_timesteps: u64,
    /// Iterations (`train` calls) finished before this one.
    pub iteration: u64,
}

/// Where a run stands and what its envs look like: what every shell keeps, and what the
/// [`Algorithm`] accessors answer from.
#[derive(Debug, Clone, PartialEq)]
pub struct RunStatus {
    /// Env steps taken so far (offline: dataset rows trained on).
    pub num_timesteps: u64,
    /// `train` calls finished.
    pub iterations: u64,
    /// The budget the schedules are relative to.
    pub total_timesteps: u64,
    /// Observation space of the envs.
    pub obs_space: Space,
    /// Action space of the envs.
    pub act_space: Space,
}

impl RunStatus {
    /// A run that has not started, with a budget of `total_timesteps`.
    pub fn new(total_timesteps: u64, obs_space: Space, act_space: Space) -> Self {
        Self {
            num_timesteps: 0,
            iterations: 0,
            total_timesteps,
            obs_space,
            act_space,
        }
    }

    /// Where training stands, for a learner.
    pub fn progress(&self) -> Progress {
        Progress {
            num_timesteps: self.num_timesteps,
            total_timesteps: self.total_timesteps,
            iteration: self.iterations,
        }
    }
}

/// What a learner saves besides `config.yaml`: its checkpoint files (networks, optimizer
/// moments) and its entries of `state.json` (step counts, generators, scalars).
#[derive(Debug, Clone, Default)]
pub struct LearnerState {
    /// Checkpoint files by name.
    pub files: Vec<(&'static str, Vec<u8>)>,
    /// Entries of `state.json`.
    pub entries: Map<String, Value>,
}

impl LearnerState {
    /// Adds a `state.json` entry.
    pub fn insert(&mut self, key: &str, value: impl Serialize) {
        self.entries.insert(
            key.to_string(),
            serde_json::to_value(value).expect("state entries serialize"),
        );
    }

    /// Adds a checkpoint file.
    pub fn file(&mut self, name: &'static str, bytes: Vec<u8>) {
        self.files.push((name, bytes));
    }
}

/// Reads the `state.json` entry `key` that a [`Learner::save_state`] wrote, naming the file
/// and key when it is missing or malformed.
pub fn state_entry<T: serde::de::DeserializeOwned>(
    ck: &Checkpoint,
    entries: &Map<String, Value>,
    key: &str,
) -> Result<T, RlError> {
    entries
        .get(key)
        .cloned()
        .and_then(|v| serde_json::from_value(v).ok())
        .ok_or_else(|| {
            RlError::Config(crate::config::ConfigError::new(
                format!("{}: {key}", ck.path_of("state.json")),
                format!("missing, or not a valid {}", short_type_name::<T>()),
            ))
        })
}

/// `u64`, `Rng`: the last segment of a type's path, for messages.
fn short_type_name<T>() -> &'static str {
    let full = std::any::type_name::<T>();
    full.rsplit("::").next().unwrap_or(full)
}

/// The learning side of an algorithm: updates its networks from a batch. Every algorithm
/// implements it and its family's shell drives it; nothing in it collects experience.
pub trait Learner {
    /// What one update consumes (a rollout, a replay batch, a dataset batch…).
    type Batch;
    /// Updates from `batch` at `progress` and reports metrics.
    fn update(&mut self, batch: &Self::Batch, progress: &Progress) -> Result<Metrics, RlError>;
    /// The weights the acting side needs, by parameter path.
    fn weights(&self) -> TensorMap;
    /// Replaces those weights (e.g. from another learner or a checkpoint).
    fn set_weights(&mut self, weights: &TensorMap) -> Result<(), RlError>;
    /// Everything it needs to continue exactly: networks, optimizers, generators.
    fn save_state(&self) -> LearnerState;
    /// Restores what [`save_state`](Self::save_state) wrote into checkpoint `ck` (`entries`
    /// are the learner's part of its `state.json`).
    fn load_state(&mut self, ck: &Checkpoint, entries: &Map<String, Value>) -> Result<(), RlError>;
}

/// Mean and spread of evaluation returns.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalResult {
    /// Mean episodic return.
    pub mean_return: f64,
    /// Standard deviation of returns (population).
    pub std_return: f64,
    /// Mean episode length.
    pub mean_length: f64,
    /// Each episode's return.
    pub returns: Vec<f64>,
}

impl EvalResult {
    /// Summarizes `(return, length)` pairs.
    pub fn from_episodes(eps: &[(f64, usize)]) -> Self {
        let n = eps.len().max(1) as f64;
        let mean = eps.iter().map(|e| e.0).sum::<f64>() / n;
        let var = eps.iter().map(|e| (e.0 - mean).powi(2)).sum::<f64>() / n;
        Self {
            mean_return: mean,
            std_return: var.sqrt(),
            mean_length: eps.iter().map(|e| e.1 as f64).sum::<f64>() / n,
            returns: eps.iter().map(|e| e.0).collect(),
        }
    }
}

/// What happened, for callbacks.
#[derive(Debug)]
pub enum Event<'a> {
    /// An iteration (rollout + update) finished.
    Iteration {
        /// Env steps so far.
        timesteps: u64,
        /// Metrics of the iteration.
        metrics: &'a Metrics,
    },
    /// An evaluation finished.
    Eval {
        /// Env steps so far.
        timesteps: u64,
        /// Its result.
        result: &'a EvalResult,
    },
    /// A checkpoint was written.
    Checkpoint {
        /// Env steps so far.
        timesteps: u64,
        /// Where.
        path: &'a Path,
    },
}

/// Whether training goes on after a callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// Keep training.
    Continue,
    /// Stop after this event.
    Stop,
}

/// Something that watches training.
pub trait Callback {
    /// Called on every event.
    fn on_event(&mut self, event: &Event<'_>) -> Control;
}

impl<F: FnMut(&Event<'_>) -> Control> Callback for F {
    fn on_event(&mut self, event: &Event<'_>) -> Control {
        self(event)
    }
}

/// When to stop training (the first that holds).
#[derive(Debug, Clone, Default)]
pub struct StopConditions {
    /// Env-step budget.
    pub total_timesteps: u64,
    /// Stop once an evaluation's mean return reaches this.
    pub return_threshold: Option<f64>,
    /// Stop after this much wall-clock time.
    pub wall_time: Option<Duration>,
}

impl StopConditions {
    /// Whether to stop now.
    pub fn reached(&self, timesteps: u64, started: Instant, last_eval: Option<f64>) -> bool {
        timesteps >= self.total_timesteps
            || matches!((self.return_threshold, last_eval), (Some(t), Some(r)) if r >= t)
            || self.wall_time.is_some_and(|w| started.elapsed() >= w)
    }
}

/// A complete RL algorithm: collects experience and learns from it.
pub trait Algorithm {
    /// Short name (`ppo`, `dqn`, …).
    fn name(&self) -> &str;
    /// Counters and spaces.
    fn status(&self) -> &RunStatus;
    /// Counters and spaces, to change.
    fn status_mut(&mut self) -> &mut RunStatus;
    /// Env steps taken so far.
    fn num_timesteps(&self) -> u64 {
        self.status().num_timesteps
    }
    /// The budget the schedules are relative to.
    fn total_timesteps(&self) -> u64 {
        self.status().total_timesteps
    }
    /// Changes the budget (e.g. when resuming with more steps).
    fn set_total_timesteps(&mut self, total: u64) {
        self.status_mut().total_timesteps = total;
    }
    /// Where training stands, as a learner's update receives it.
    fn progress(&self) -> Progress {
        self.status().progress()
    }
    /// One iteration (collect + update); returns its metrics.
    fn train(&mut self) -> Result<Metrics, RlError>;
    /// Actions (raw encoding) for one observation (raw encoding).
    fn predict(&mut self, obs: &[f32], deterministic: bool) -> Result<Vec<f32>, RlError>;
    /// Starts `predict` afresh: a recurrent policy forgets the state it carries between calls
    /// (SB3's `episode_start`). [`evaluate`](Self::evaluate) calls it at every episode start;
    /// stateless policies ignore it.
    fn reset_predict_state(&mut self) {}
    /// [`predict`](Self::predict) continuing from a state the caller keeps (a recurrent
    /// policy's; empty at an episode's start), updated in place; the state `predict` carries
    /// is left as it was, so one loaded policy can act for several agents. Stateless policies
    /// ignore `state`.
    fn predict_with_state(
        &mut self,
        obs: &[f32],
        state: &mut Vec<f32>,
        deterministic: bool,
    ) -> Result<Vec<f32>, RlError> {
        let _ = state;
        self.predict(obs, deterministic)
    }
    /// Observation space the policy expects.
    fn observation_space(&self) -> &Space {
        &self.status().obs_space
    }
    /// Action space the policy produces.
    fn action_space(&self) -> &Space {
        &self.status().act_space
    }
    /// Wrapper statistics (normalizers) an evaluation env must share with training.
    fn env_stats(&self) -> Vec<serde_json::Value> {
        Vec::new()
    }
    /// Writes a checkpoint directory.
    fn save(&self, dir: &Path) -> Result<(), RlError>;

    /// Trains until `stop` holds, calling `callback` after each iteration.
    fn learn(&mut self, stop: &StopConditions, callback: &mut dyn Callback) -> Result<(), RlError> {
        let started = Instant::now();
        while !stop.reached(self.num_timesteps(), started, None) {
            let m = self.train()?;
            if callback.on_event(&Event::Iteration {
                timesteps: self.num_timesteps(),
                metrics: &m,
            }) == Control::Stop
            {
                break;
            }
        }
        Ok(())
    }

    /// Mean return of `n_episodes` on `env`, episode `i` reset with `seed + i`.
    fn evaluate(
        &mut self,
        env: &mut dyn Env,
        n_episodes: usize,
        deterministic: bool,
        seed: u64,
    ) -> Result<EvalResult, RlError> {
        env.load_stats(&self.env_stats())?;
        env.set_training(false);
        evaluate_episodes(env, n_episodes, seed, |obs, start| {
            if start {
                self.reset_predict_state();
            }
            self.predict(obs, deterministic)
        })
    }
}

/// `n_episodes` episodes of `env` acting with `act(observation, episode_start)`, episode `i`
/// reset with `seed + i`: their returns and lengths.
pub fn evaluate_episodes(
    env: &mut dyn Env,
    n_episodes: usize,
    seed: u64,
    mut act: impl FnMut(&[f32], bool) -> Result<Vec<f32>, RlError>,
) -> Result<EvalResult, RlError> {
    let mut obs = vec![0.0; env.observation_space().raw_dim()];
    let mut eps = Vec::with_capacity(n_episodes);
    for i in 0..n_episodes {
        env.reset(Some(seed.wrapping_add(i as u64)), None, &mut obs)?;
        let (mut ret, mut len) = (0.0, 0usize);
        loop {
            let a = act(&obs, len == 0)?;
            let s = env.step(&a, &mut obs)?;
            ret += s.reward;
            len += 1;
            if s.terminated || s.truncated {
                break;
            }
        }
        eps.push((ret, len));
    }
    Ok(EvalResult::from_episodes(&eps))
}
