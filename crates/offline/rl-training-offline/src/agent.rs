//! The family's shell: the dataset stream, counters, `predict` and checkpoints
//! ([`OfflineCore`]) around a learner that implements [`OfflineLearner`]; [`OfflineAgent`] is
//! the [`Algorithm`] of BC, MARWIL and CQL.

use crate::{CoreState, OfflineBatch, OfflineCore};
use rl_training_core::agent::EnvMaker;
use rl_training_core::algorithm::{Algorithm, Learner, LearnerState, Progress, RunStatus};
use rl_training_core::burn::tensor::Device;
use rl_training_core::checkpoint::{read_json, read_run, write_checkpoint};
use rl_training_core::config::{AlgoConfig, ConfigError, RunConfig};
use rl_training_core::logger::{Metrics, MetricsMean};
use rl_training_core::{RlError, Rng, Space};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::path::Path;
use std::time::Instant;

/// How the shell feeds an offline learner.
#[derive(Debug, Clone, PartialEq)]
pub struct OfflineSettings {
    /// Dataset rows per update.
    pub batch_size: usize,
    /// Updates per `train` call.
    pub updates_per_iteration: usize,
    /// Discount of the returns the stream computes per row (MARWIL), if any.
    pub returns_gamma: Option<f32>,
    /// Why the learner needs a rewards column, when it does (the error says so).
    pub needs_rewards: Option<&'static str>,
}

/// What an offline algorithm adds to the shared shell: its hyperparameters and feeding, how
/// it builds its learner, and how its policy acts. Updates, weights and checkpoint state come
/// through [`Learner`] (each update on one [`OfflineBatch`]).
pub trait OfflineLearner: Learner<Batch = OfflineBatch> + Sized {
    /// The hyperparameters (`algo_kwargs`).
    type Config: AlgoConfig + Serialize + Clone;
    /// The algorithm's name in configs and checkpoints.
    const NAME: &'static str;

    /// Batch size, updates per iteration, what the data must hold.
    fn settings(cfg: &Self::Config) -> OfflineSettings;
    /// A learner with fresh networks for the run's spaces (observations, actions), on the
    /// autodiff `device`.
    fn build(
        cfg: Self::Config,
        run: &RunConfig,
        spaces: (&Space, &Space),
        device: Device,
    ) -> Result<Self, RlError>;
    /// The hyperparameters.
    fn config(&self) -> &Self::Config;
    /// Actions in the env's encoding for `n` flat observations: the mode (or greedy action)
    /// when `deterministic`, a policy sample otherwise.
    fn act(&self, flat_obs: Vec<f32>, n: usize, rng: &mut Rng, deterministic: bool) -> Vec<f32>;
    /// Adds the iteration's metrics beyond the updates' means.
    fn iteration_metrics(&self, _progress: &Progress, _m: &mut Metrics) {}
}

/// What `state.json` holds: the shell's [`CoreState`] under `core`, the learner's entries
/// beside it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SavedState {
    core: CoreState,
    #[serde(flatten)]
    learner: Map<String, Value>,
}

/// An offline agent: the shared shell around the learner `L`.
pub struct OfflineAgent<L: OfflineLearner> {
    core: OfflineCore,
    settings: OfflineSettings,
    learner: L,
}

impl<L: OfflineLearner> OfflineAgent<L> {
    /// A fresh agent for `run` (its `algo_kwargs` are `L`'s hyperparameters, its
    /// `offline_data.input` the dataset) on `device`; `make_env` builds the env whose spaces
    /// the data must fit (and which evaluations use).
    pub fn new(run: &RunConfig, make_env: EnvMaker<'_>, device: &Device) -> Result<Self, RlError> {
        run.refuse_curiosity(
            "offline algorithms learn from a dataset, not from their own env steps",
        )
        .map_err(RlError::Config)?;
        let cfg = L::Config::from_kwargs(&run.algo_kwargs).map_err(RlError::Config)?;
        let settings = L::settings(&cfg);
        let core = OfflineCore::new(run, make_env, None, settings.returns_gamma)?;
        let data = core.stream.dataset();
        if let (Some(why), false) = (settings.needs_rewards, data.spec().has_rewards) {
            return Err(RlError::Config(ConfigError::new(
                data.file(),
                format!("no rewards column; {why}"),
            )));
        }
        let spaces = (&core.status.obs_space, &core.status.act_space);
        let learner = L::build(cfg, run, spaces, device.clone().autodiff())?;
        Ok(Self {
            core,
            settings,
            learner,
        })
    }

    /// Loads a checkpoint written by [`Algorithm::save`]; `device` overrides the saved one.
    pub fn load(dir: &Path, make_env: EnvMaker<'_>, device: &Device) -> Result<Self, RlError> {
        let (ck, run) = read_run(dir, L::NAME)?;
        let mut agent = Self::new(&run, make_env, device)?;
        let state: SavedState = read_json(&ck, "state.json")?;
        agent.learner.load_state(&ck, &state.learner)?;
        agent.core.restore(state.core)?;
        Ok(agent)
    }

    /// The hyperparameters.
    pub fn config(&self) -> &L::Config {
        self.learner.config()
    }

    /// The learner (networks, optimizers).
    pub fn learner(&self) -> &L {
        &self.learner
    }
}

impl<L: OfflineLearner> Algorithm for OfflineAgent<L> {
    fn name(&self) -> &str {
        L::NAME
    }

    fn status(&self) -> &RunStatus {
        &self.core.status
    }

    fn status_mut(&mut self) -> &mut RunStatus {
        &mut self.core.status
    }

    /// `updates_per_iteration` updates, each on the next `batch_size` dataset rows; metrics
    /// are the updates' means.
    fn train(&mut self) -> Result<Metrics, RlError> {
        let t0 = Instant::now();
        let (n, bs) = (
            self.settings.updates_per_iteration,
            self.settings.batch_size,
        );
        let mut mean = MetricsMean::default();
        for _ in 0..n {
            let b = self.core.batch(bs)?;
            mean.add(self.learner.update(&b, &self.core.status.progress())?);
        }
        let mut m = mean.mean();
        self.learner
            .iteration_metrics(&self.core.status.progress(), &mut m);
        self.core.finish_metrics(&mut m, t0);
        Ok(m)
    }

    fn predict(&mut self, obs: &[f32], deterministic: bool) -> Result<Vec<f32>, RlError> {
        let (flat, n) = self.core.flat_obs(obs)?;
        let rng = &mut self.core.rng_predict;
        Ok(self.learner.act(flat, n, rng, deterministic))
    }

    fn save(&self, dir: &Path) -> Result<(), RlError> {
        let LearnerState {
            files: learner_files,
            entries,
        } = self.learner.save_state();
        let state = SavedState {
            core: self.core.state(),
            learner: entries,
        };
        let mut files = vec![("config.yaml", self.core.run_to_save(self.learner.config())?)];
        files.extend(learner_files);
        files.push((
            "state.json",
            serde_json::to_vec_pretty(&state).expect("serializable"),
        ));
        write_checkpoint(dir, L::NAME, &files)?;
        Ok(())
    }
}
