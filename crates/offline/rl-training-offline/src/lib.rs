//! rl-training-offline: what offline RL and imitation algorithms share. Datasets (Parquet streamed by
//! row group, NPZ as the seed's `expert_data_path`) with the spaces they declare and checks
//! that they fit the env; batches drawn through a bounded shuffle window; recording episodes
//! from a trained policy; and [`OfflineCore`], the training loop's bookkeeping (an offline
//! algorithm's "timesteps" are dataset rows trained on; it is evaluated in the env while it
//! trains from data).
#![warn(missing_docs)]

pub mod agent;
pub mod dataset;
pub mod npz_io;
pub mod parquet_io;
pub mod record;
pub mod stream;

pub use agent::{OfflineAgent, OfflineLearner, OfflineSettings};
pub use dataset::{DatasetError, DatasetSpec, Step, Transitions, discounted_returns};
pub use npz_io::{read_npz, write_npz};
pub use parquet_io::{ParquetDataset, ParquetWriter, write_parquet};
pub use record::{
    RecordOptions, from_replay, from_replay_envs, record, record_parts, write_dataset,
};
pub use stream::{BatchStream, Dataset, OfflineBatch, resolve_inputs};

use rl_training_core::agent::EnvMaker;
use rl_training_core::algorithm::{RlError, RunStatus};
use rl_training_core::config::RunConfig;
use rl_training_core::logger::Metrics;
use rl_training_core::{Rng, Space};
use serde::{Deserialize, Serialize};

use std::time::Instant;

/// Flat encodings of a batch's observations and next observations (`space`: the run's
/// observation space).
pub fn flat_batch_obs(space: &Space, b: &OfflineBatch) -> (Vec<f32>, Vec<f32>) {
    let mut obs = Vec::new();
    let mut next = Vec::new();
    rl_training_core::batch::flatten_batch(space, &b.data.obs, &mut obs);
    rl_training_core::batch::flatten_batch(space, &b.data.new_obs, &mut next);
    (obs, next)
}

/// What an offline algorithm's checkpoint keeps of its [`OfflineCore`]. The shuffle window is
/// not saved: the stream's draws are replayed on restore, so a resumed run continues exactly.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CoreState {
    /// Dataset rows trained on.
    pub num_timesteps: u64,
    /// Training iterations.
    pub iterations: u64,
    /// The batches the stream drew (replayed on restore).
    pub draws: Vec<(usize, u64)>,
    /// `predict`'s sampling.
    pub rng_predict: Rng,
}

/// The bookkeeping of an offline algorithm: spaces (from one env of the run), the batch
/// stream, counters and RNGs.
pub struct OfflineCore {
    /// The run.
    pub run: RunConfig,
    /// Counters (timesteps are dataset rows trained on) and spaces.
    pub status: RunStatus,
    /// Batches of the dataset.
    pub stream: BatchStream,
    /// `predict`'s sampling.
    pub rng_predict: Rng,
    started: Instant,
    steps_at_start: u64,
}

impl OfflineCore {
    /// Opens the dataset (`input`, else the run's `offline_data.input`), checks it fits the
    /// run's env, and streams it with returns discounted by `returns_gamma` when given.
    pub fn new(
        run: &RunConfig,
        make_env: EnvMaker<'_>,
        input: Option<&str>,
        returns_gamma: Option<f32>,
    ) -> Result<Self, RlError> {
        if run.normalize.obs || run.normalize.reward {
            return Err(RlError::Config(rl_training_core::config::ConfigError::new(
                "normalize",
                "offline algorithms train on the dataset's raw observations and rewards; set \
                 normalize.obs and normalize.reward to false",
            )));
        }
        let env = make_env(run)?;
        let (obs_space, act_space) = (env.observation_space().clone(), env.action_space().clone());
        let (entries, window) = match (input, &run.offline_data) {
            (Some(p), od) => (
                vec![p.to_string()],
                od.as_ref().map_or(100_000, |o| o.shuffle_buffer_size),
            ),
            (None, Some(od)) => (od.input.0.clone(), od.shuffle_buffer_size),
            (None, None) => {
                return Err(RlError::Config(rl_training_core::config::ConfigError::new(
                    "offline_data",
                    "missing; an offline algorithm needs offline_data: {input: PATH}",
                )));
            }
        };
        let mut ds = Dataset::open_all(&resolve_inputs(&entries)?)?;
        ds.fit(&run.env_id, &obs_space, &act_space)?;
        Ok(Self {
            run: run.clone(),
            status: RunStatus::new(run.total_timesteps, obs_space, act_space),
            stream: BatchStream::new(ds, window, returns_gamma, Rng::for_stream(run.seed, "data")),
            rng_predict: Rng::for_stream(run.seed, "predict"),
            started: Instant::now(),
            steps_at_start: 0,
        })
    }

    /// The next batch of `n` rows; counts them as timesteps.
    pub fn batch(&mut self, n: usize) -> Result<OfflineBatch, RlError> {
        let b = self.stream.next_batch(n)?;
        self.status.num_timesteps += b.data.len() as u64;
        Ok(b)
    }

    /// Checks and flattens observations given to `predict`.
    pub fn flat_obs(&self, obs: &[f32]) -> Result<(Vec<f32>, usize), RlError> {
        rl_training_core::agent::checked_flat_obs(&self.status.obs_space, &self.run.env_id, obs)
    }

    /// Adds the iteration's common metrics (samples per second, passes over the data) and
    /// counts the iteration.
    pub fn finish_metrics(&mut self, m: &mut Metrics, t0: Instant) {
        self.status.iterations += 1;
        let secs = self.started.elapsed().as_secs_f64().max(1e-9);
        m.insert(
            "charts/SPS".into(),
            (self.status.num_timesteps - self.steps_at_start) as f64 / secs,
        );
        m.insert("time/update_seconds".into(), t0.elapsed().as_secs_f64());
        m.insert("offline/epochs".into(), self.stream.epochs() as f64);
        m.insert(
            "offline/window_rows".into(),
            self.stream.window_rows() as f64,
        );
    }

    /// What a checkpoint keeps.
    pub fn state(&self) -> CoreState {
        CoreState {
            num_timesteps: self.status.num_timesteps,
            iterations: self.status.iterations,
            draws: self.stream.draws().to_vec(),
            rng_predict: self.rng_predict.clone(),
        }
    }

    /// Restores counters and RNGs from a checkpoint, and the stream by replaying its draws
    /// (a fresh core's stream must not have drawn yet).
    pub fn restore(&mut self, s: CoreState) -> Result<(), RlError> {
        self.stream.fast_forward(&s.draws)?;
        self.status.num_timesteps = s.num_timesteps;
        self.steps_at_start = s.num_timesteps;
        self.status.iterations = s.iterations;
        self.rng_predict = s.rng_predict;
        self.started = Instant::now();
        Ok(())
    }

    /// `config.yaml` of a checkpoint (the run with the budget now and hyperparameters `cfg`).
    pub fn run_to_save(&self, cfg: &impl Serialize) -> Result<Vec<u8>, RlError> {
        rl_training_core::agent::run_yaml(&self.run, self.status.total_timesteps, cfg)
    }
}
