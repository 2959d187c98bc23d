//! rl-training-off-policy: what DQN, SAC and the other replay-based learners share. The sample →
//! store → learn loop ([`Collector`], [`TrainFrequency`]), target networks ([`polyak`],
//! [`TargetUpdate`]), exploration ([`linear_epsilon`]), replay options and checkpointing of
//! the buffer ([`ReplayOptions`], [`save_replay`], [`restore_replay`]), and the agent shell
//! around an [`OffPolicyLearner`] ([`OffPolicyAgent`]).
#![warn(missing_docs)]

pub mod agent;
pub mod multi_agent;
pub mod runners;
pub use agent::{
    ActMode, Feed, OffPolicyActor, OffPolicyAgent, OffPolicyLearner, OffPolicySettings,
    random_actions,
};
pub use runners::RunnerShape;

use rl_training_core::algorithm::RunStatus;
use rl_training_core::batch::flatten_batch;
use rl_training_core::burn::module::Module;
use rl_training_core::checkpoint::Checkpoint;
use rl_training_core::config::{ConfigError, RunConfig, invalid};
use rl_training_core::env::{Env, EnvError};
use rl_training_core::logger::{Metrics, MetricsMean};
use rl_training_core::params::TensorMap;
use rl_training_core::replay::{
    NStep, PerParams, Replay, ReplayConfig, ReplayMeta, TransitionBatch,
};
use rl_training_core::vec_env::{EpisodeStats, VecEnv};
use rl_training_core::{RlError, Rng, Space};
use serde::{Deserialize, Serialize};
use smart_default::SmartDefault;

/// State of a [`Collector`] that must survive a checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CollectorState {
    /// Raw observations the next step starts from.
    pub last_obs: Vec<f32>,
    /// Env snapshots.
    pub envs: Vec<serde_json::Value>,
}

/// Where a [`Collector`] puts a vector step's transitions: a replay buffer, or a runner's
/// chunk on its way to the learner's replay.
pub trait TransitionSink {
    /// Stores one vector step: arrays of all envs, row-major.
    fn add(
        &mut self,
        obs: &[f32],
        actions: &[f32],
        rewards: &[f32],
        next_obs: &[f32],
        terminated: &[bool],
        truncated: &[bool],
    );
}

impl TransitionSink for Replay {
    fn add(
        &mut self,
        obs: &[f32],
        actions: &[f32],
        rewards: &[f32],
        next_obs: &[f32],
        terminated: &[bool],
        truncated: &[bool],
    ) {
        Replay::add(self, obs, actions, rewards, next_obs, terminated, truncated);
    }
}

/// Steps a vector env and stores every transition in a replay buffer, the true final
/// observation as `next_obs` at episode ends (so truncations bootstrap correctly).
pub struct Collector {
    /// The envs.
    pub env: VecEnv,
    space: Space,
    last_obs: Vec<f32>,
    flat: Vec<f32>,
    next_flat: Vec<f32>,
    next_raw: Vec<f32>,
    rewards: Vec<f32>,
}

impl Collector {
    /// Resets the envs with `seed`.
    pub fn new(mut env: VecEnv, seed: u64) -> Result<Self, EnvError> {
        let last_obs = env.reset(Some(seed))?.to_vec();
        let space = env.observation_space().clone();
        let mut flat = Vec::new();
        flatten_batch(&space, &last_obs, &mut flat);
        Ok(Self {
            env,
            space,
            last_obs,
            flat,
            next_flat: Vec::new(),
            next_raw: Vec::new(),
            rewards: Vec::new(),
        })
    }

    /// Network inputs `[n_envs × flat_dim]` for the current observations.
    pub fn obs(&self) -> &[f32] {
        &self.flat
    }

    /// Number of envs.
    pub fn num_envs(&self) -> usize {
        self.env.num_envs()
    }

    /// Steps every env with `env_actions` and stores the transitions with `stored_actions`
    /// (the policy's encoding, e.g. SAC's actions in [−1, 1]). Returns finished episodes.
    pub fn step(
        &mut self,
        env_actions: &[f32],
        stored_actions: &[f32],
        replay: &mut impl TransitionSink,
    ) -> Result<Vec<EpisodeStats>, EnvError> {
        self.env.step(env_actions)?;
        let n = self.env.num_envs();
        let d = self.space.raw_dim();
        self.next_raw.clear();
        self.next_raw.extend_from_slice(self.env.obs());
        for e in 0..n {
            if self.env.terminated()[e] || self.env.truncated()[e] {
                self.next_raw[e * d..(e + 1) * d].copy_from_slice(self.env.final_obs(e));
            }
        }
        flatten_batch(&self.space, &self.next_raw, &mut self.next_flat);
        self.rewards.clear();
        self.rewards
            .extend(self.env.rewards().iter().map(|&r| r as f32));
        replay.add(
            &self.flat,
            stored_actions,
            &self.rewards,
            &self.next_flat,
            self.env.terminated(),
            self.env.truncated(),
        );
        self.last_obs.copy_from_slice(self.env.obs());
        flatten_batch(&self.space, &self.last_obs, &mut self.flat);
        Ok(self.env.drain_episodes())
    }

    /// Starts new episodes in every env, seeded with `seed` (after a failure).
    pub fn reset(&mut self, seed: u64) -> Result<(), EnvError> {
        self.last_obs = self.env.reset(Some(seed))?.to_vec();
        flatten_batch(&self.space, &self.last_obs, &mut self.flat);
        Ok(())
    }

    /// Saves what resuming needs.
    pub fn state(&self) -> Result<CollectorState, EnvError> {
        Ok(CollectorState {
            last_obs: self.last_obs.clone(),
            envs: self.env.snapshots()?,
        })
    }

    /// Restores a saved [`CollectorState`].
    pub fn restore(&mut self, s: &CollectorState) -> Result<(), EnvError> {
        if s.last_obs.len() != self.last_obs.len() {
            return Err(EnvError::InvalidState {
                env: self.env.envs()[0].id().to_string(),
                reason: format!(
                    "checkpoint holds {} observation values, the run needs {}",
                    s.last_obs.len(),
                    self.last_obs.len()
                ),
            });
        }
        self.env.restore_snapshots(&s.envs)?;
        self.last_obs.clone_from(&s.last_obs);
        flatten_batch(&self.space, &self.last_obs, &mut self.flat);
        Ok(())
    }
}

/// When to learn: SB3's `learning_starts` / `train_freq` / `gradient_steps`, or RLlib's
/// `training_intensity` (replayed ÷ sampled transitions), which overrides the last two.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainFrequency {
    /// No updates until this many env steps have been taken.
    pub learning_starts: u64,
    /// Vector-env steps between updates.
    pub train_freq: usize,
    /// Gradient steps per update (−1: as many as env steps collected).
    pub gradient_steps: i64,
    /// Replayed ÷ sampled ratio; gradient steps = collected × intensity ÷ batch_size
    /// (fractions carried over).
    pub training_intensity: Option<f64>,
    /// Transitions per gradient step.
    pub batch_size: usize,
}

impl TrainFrequency {
    /// Range checks with messages naming the field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.train_freq == 0 {
            return invalid("train_freq", "must be at least 1");
        }
        if self.gradient_steps < -1 {
            return invalid("gradient_steps", "must be ≥ 0, or −1 for one per env step");
        }
        if self.batch_size == 0 {
            return invalid("batch_size", "must be at least 1");
        }
        if self
            .training_intensity
            .is_some_and(|t| !(t.is_finite() && t > 0.0))
        {
            return invalid("training_intensity", "must be a positive number");
        }
        Ok(())
    }

    /// Gradient steps due after `collected` more env steps, now at `num_timesteps`
    /// (`credit` carries the fraction of a step under `training_intensity`).
    pub fn gradient_steps(&self, num_timesteps: u64, collected: u64, credit: &mut f64) -> usize {
        if num_timesteps <= self.learning_starts {
            return 0;
        }
        match self.training_intensity {
            Some(ti) => {
                *credit += collected as f64 * ti / self.batch_size as f64;
                let k = credit.floor();
                *credit -= k;
                k as usize
            }
            None if self.gradient_steps < 0 => collected as usize,
            None => self.gradient_steps as usize,
        }
    }

    /// [`gradient_steps`](Self::gradient_steps) for `collected` env steps that did not come
    /// in calls of `train_freq` vector steps of `n_envs` envs (env runners' chunks): the same
    /// gradient steps per env step, `gradient_steps ÷ (train_freq × n_envs)`, fractions
    /// carried in `credit`.
    pub fn gradient_steps_per_env_step(
        &self,
        num_timesteps: u64,
        collected: u64,
        n_envs: usize,
        credit: &mut f64,
    ) -> usize {
        if self.training_intensity.is_some() || self.gradient_steps < 0 {
            return self.gradient_steps(num_timesteps, collected, credit);
        }
        if num_timesteps <= self.learning_starts {
            return 0;
        }
        *credit += collected as f64 * self.gradient_steps as f64
            / (self.train_freq * n_envs.max(1)) as f64;
        let k = credit.floor();
        *credit -= k;
        k as usize
    }
}

pub use rl_training_core::params::polyak;

/// Target-network updates counted in env steps, as SB3's DQN: every `interval` env steps
/// (vector steps × envs) apply [`polyak`] with `tau`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TargetUpdate {
    /// Env steps between updates.
    pub interval: u64,
    /// Polyak coefficient (1: hard copy).
    pub tau: f64,
}

impl TargetUpdate {
    /// How many updates fall in the vector steps `calls_before + 1 ..= calls_after` with
    /// `n_envs` envs (SB3 updates when `calls % max(interval / n_envs, 1) == 0`).
    pub fn due(&self, calls_before: u64, calls_after: u64, n_envs: usize) -> u64 {
        let every = (self.interval / n_envs.max(1) as u64).max(1);
        calls_after / every - calls_before / every
    }

    /// Applies `k` updates at once (the online net did not change in between).
    pub fn apply<M: Module>(&self, target: M, online: &M, k: u64) -> M {
        if k == 0 {
            return target;
        }
        // k soft updates toward a fixed source = one with 1 − (1 − τ)^k.
        let tau = 1.0 - (1.0 - self.tau.clamp(0.0, 1.0)).powi(k.min(i32::MAX as u64) as i32);
        polyak(target, online, tau)
    }
}

/// SB3's linear exploration schedule: from `initial` to `final_value` over the first
/// `fraction` of training, then constant.
pub fn linear_epsilon(
    initial: f64,
    final_value: f64,
    fraction: f64,
    timestep: u64,
    total: u64,
) -> f64 {
    let progress = timestep as f64 / total.max(1) as f64;
    if fraction <= 0.0 || progress > fraction {
        final_value
    } else {
        initial + progress * (final_value - initial) / fraction
    }
}

/// The replay and training-loop keys DQN and SAC share, with the same defaults (SB3's; RLlib's
/// names as aliases). Flat in their YAML tables: the configs embed it with
/// `#[serde(flatten, skip_deserializing)]` and read it with
/// [`from_kwargs_with_part`](rl_training_core::config::from_kwargs_with_part).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, SmartDefault)]
#[serde(deny_unknown_fields, default)]
pub struct ReplayKeys {
    /// Replay capacity (transitions).
    #[default(1_000_000)]
    #[serde(alias = "replay_buffer_capacity")]
    pub buffer_size: usize,
    /// Env steps of random actions before learning starts.
    #[default(100)]
    #[serde(alias = "num_steps_sampled_before_learning_starts")]
    pub learning_starts: u64,
    /// Gradient steps per update (−1: one per env step collected).
    #[default(1)]
    pub gradient_steps: i64,
    /// Replayed ÷ sampled transitions; overrides `train_freq`/`gradient_steps` when set.
    pub training_intensity: Option<f64>,
    /// n-step returns: `n` or a range `[lo, hi]` drawn per sample.
    #[default(NStep::Fixed(1))]
    pub n_step: NStep,
    /// Proportional prioritized replay.
    #[default(false)]
    pub prioritized_replay: bool,
    /// PER α.
    #[default(0.6)]
    pub prioritized_replay_alpha: f64,
    /// PER β at the start (annealed to 1 by the end of training).
    #[default(0.4)]
    pub prioritized_replay_beta: f64,
    /// PER ε added to the priorities.
    #[default(1e-6)]
    pub prioritized_replay_eps: f64,
    /// Save the replay buffer with checkpoints.
    #[default(false)]
    pub store_buffer_in_checkpoints: bool,
    /// Env runners that fill the replay, Ape-X style (RLlib's name; 0: the shell steps its
    /// own vector env, as SB3). They share `n_envs` evenly; in process they take turns, with
    /// `rl train --broker` they are `rl runner` processes.
    #[default(0)]
    pub num_env_runners: usize,
    /// Vector steps per runner chunk (RLlib's name; default `train_freq`).
    pub rollout_fragment_length: Option<usize>,
}

impl ReplayKeys {
    /// When to learn, with the algorithm's `train_freq` and `batch_size`.
    pub fn train_frequency(&self, train_freq: usize, batch_size: usize) -> TrainFrequency {
        TrainFrequency {
            learning_starts: self.learning_starts,
            train_freq,
            gradient_steps: self.gradient_steps,
            training_intensity: self.training_intensity,
            batch_size,
        }
    }

    /// The replay buffer.
    pub fn options(&self) -> ReplayOptions {
        ReplayOptions {
            buffer_size: self.buffer_size,
            n_step: self.n_step,
            prioritized: self.prioritized_replay,
            alpha: self.prioritized_replay_alpha,
            beta: self.prioritized_replay_beta,
            eps: self.prioritized_replay_eps,
        }
    }

    /// The shell's settings for sampled gradient steps of `batch_size` every `train_freq`
    /// vector steps, discount `gamma`.
    pub fn settings(&self, train_freq: usize, batch_size: usize, gamma: f64) -> OffPolicySettings {
        OffPolicySettings {
            frequency: self.train_frequency(train_freq, batch_size),
            replay: self.options(),
            gamma,
            store_buffer: self.store_buffer_in_checkpoints,
            feed: Feed::Sampled,
            runners: RunnerShape {
                num_env_runners: self.num_env_runners,
                rollout_fragment_length: self.rollout_fragment_length.unwrap_or(train_freq),
            },
        }
    }

    /// Range checks with messages naming the field (`train_freq` and `batch_size` are the
    /// algorithm's).
    pub fn validate(&self, train_freq: usize, batch_size: usize) -> Result<(), ConfigError> {
        self.train_frequency(train_freq, batch_size).validate()?;
        if self.rollout_fragment_length == Some(0) {
            return invalid("rollout_fragment_length", "must be at least 1");
        }
        self.options().validate()
    }
}

/// Replay options common to the family (built from [`ReplayKeys`], or by AWR itself).
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayOptions {
    /// Capacity in transitions.
    pub buffer_size: usize,
    /// n-step returns.
    pub n_step: NStep,
    /// Prioritized replay on/off.
    pub prioritized: bool,
    /// PER α.
    pub alpha: f64,
    /// PER β at the start (annealed linearly to 1 over the run).
    pub beta: f64,
    /// PER ε.
    pub eps: f64,
}

impl ReplayOptions {
    /// A buffer for `n_envs` envs with these widths.
    pub fn build(&self, n_envs: usize, obs_dim: usize, act_dim: usize) -> Replay {
        Replay::new(ReplayConfig {
            capacity: self.buffer_size,
            n_envs,
            obs_dim,
            act_dim,
            n_step: self.n_step,
            prioritized: self.prioritized.then_some(PerParams {
                alpha: self.alpha,
                eps: self.eps,
            }),
        })
    }

    /// β after `timestep` of `total` env steps.
    pub fn beta_at(&self, timestep: u64, total: u64) -> f64 {
        let f = (timestep as f64 / total.max(1) as f64).min(1.0);
        self.beta + (1.0 - self.beta) * f
    }

    /// Range checks with messages naming the field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.buffer_size == 0 {
            return invalid("buffer_size", "must be at least 1");
        }
        self.n_step.validate().or_else(|e| invalid("n_step", e))?;
        if self.prioritized {
            if !(self.alpha >= 0.0) {
                return invalid("prioritized_replay_alpha", "must be ≥ 0");
            }
            if !(0.0..=1.0).contains(&self.beta) {
                return invalid("prioritized_replay_beta", "must be in [0, 1]");
            }
            if !(self.eps > 0.0) {
                return invalid("prioritized_replay_eps", "must be positive");
            }
        }
        Ok(())
    }
}

/// Checkpoint file of the replay buffer.
pub const REPLAY_FILE: &str = "replay.safetensors";

/// The buffer's file entry for a checkpoint, when `store` (`store_buffer_in_checkpoints`).
pub fn save_replay(
    replay: &Replay,
    store: bool,
) -> (Option<(&'static str, Vec<u8>)>, Option<ReplayMeta>) {
    if !store {
        return (None, None);
    }
    let (map, meta) = replay.save();
    (Some((REPLAY_FILE, map.to_bytes())), Some(meta))
}

/// Restores the buffer from checkpoint `ck` when both the run (`store`) and the checkpoint
/// have it. When they disagree, the buffer starts empty or the saved one is ignored, and
/// the returned warning says which (RLlib does the same).
pub fn restore_replay(
    replay: &mut Replay,
    store: bool,
    ck: &Checkpoint,
    meta: Option<&ReplayMeta>,
) -> Result<Option<String>, RlError> {
    let saved = ck.has(REPLAY_FILE) && meta.is_some();
    match (store, saved) {
        (true, true) => {
            let file = ck.path_of(REPLAY_FILE);
            let map = TensorMap::from_bytes(ck.file(REPLAY_FILE)?, &file)?;
            replay.load(map, meta.expect("checked"), &file)?;
            Ok(None)
        }
        (true, false) => Ok(Some(format!(
            "{}: store_buffer_in_checkpoints is true but the checkpoint holds no replay buffer; \
             training resumes with an empty buffer",
            ck.dir.display()
        ))),
        (false, true) => Ok(Some(format!(
            "{}: the checkpoint holds a replay buffer but store_buffer_in_checkpoints is false; \
             the saved buffer is ignored and training resumes with an empty one",
            ck.dir.display()
        ))),
        (false, false) => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_keys_are_the_documented_list() {
        // The one list of the shared keys and their aliases, as serde reads them.
        assert_eq!(
            rl_training_core::config::accepted_keys::<ReplayKeys>(),
            [
                "buffer_size",
                "replay_buffer_capacity",
                "learning_starts",
                "num_steps_sampled_before_learning_starts",
                "gradient_steps",
                "training_intensity",
                "n_step",
                "prioritized_replay",
                "prioritized_replay_alpha",
                "prioritized_replay_beta",
                "prioritized_replay_eps",
                "store_buffer_in_checkpoints",
                "num_env_runners",
                "rollout_fragment_length",
            ]
        );
    }

    #[test]
    fn training_intensity_carries_fractions() {
        let f = TrainFrequency {
            learning_starts: 10,
            train_freq: 1,
            gradient_steps: 1,
            training_intensity: Some(16.0),
            batch_size: 64,
        };
        let mut credit = 0.0;
        assert_eq!(
            f.gradient_steps(10, 1, &mut credit),
            0,
            "not before learning_starts"
        );
        let steps: usize = (11..=18).map(|t| f.gradient_steps(t, 1, &mut credit)).sum();
        assert_eq!(steps, 2, "8 sampled × 16 / 64 = 2 replayed batches");
        let g = TrainFrequency {
            training_intensity: None,
            gradient_steps: -1,
            ..f.clone()
        };
        assert_eq!(g.gradient_steps(100, 8, &mut credit), 8);
    }

    #[test]
    fn runner_chunks_get_the_gradient_steps_per_env_step_of_the_config() {
        // In process: 4 gradient steps every 8 vector steps of 2 envs = 0.25 per env step.
        let f = TrainFrequency {
            learning_starts: 0,
            train_freq: 8,
            gradient_steps: 4,
            training_intensity: None,
            batch_size: 32,
        };
        let mut credit = 0.0;
        // Chunks of 6 env steps: 1.5 steps each, the half carried.
        let steps: Vec<usize> = (1..=4)
            .map(|i| f.gradient_steps_per_env_step(6 * i, 6, 2, &mut credit))
            .collect();
        assert_eq!(steps, [1, 2, 1, 2]);
        assert_eq!(credit, 0.0);
    }

    #[test]
    fn target_updates_follow_sb3_counting() {
        let t = TargetUpdate {
            interval: 10,
            tau: 1.0,
        };
        assert_eq!(t.due(0, 9, 1), 0);
        assert_eq!(t.due(9, 10, 1), 1);
        assert_eq!(t.due(0, 256, 1), 25);
        // 4 envs: every 10 / 4 = 2 vector steps
        assert_eq!(t.due(0, 4, 4), 2);
    }

    #[test]
    fn sb3_linear_epsilon() {
        let e = |t| linear_epsilon(1.0, 0.04, 0.16, t, 50_000);
        assert_eq!(e(0), 1.0);
        assert!((e(4_000) - (1.0 - 0.5 * 0.96)).abs() < 1e-12);
        assert_eq!(e(8_001), 0.04);
        assert_eq!(e(50_000), 0.04);
    }

    #[test]
    fn per_beta_anneals_to_one() {
        let o = ReplayOptions {
            buffer_size: 10,
            n_step: NStep::Fixed(1),
            prioritized: true,
            alpha: 0.6,
            beta: 0.4,
            eps: 1e-6,
        };
        assert_eq!(o.beta_at(0, 100), 0.4);
        assert!((o.beta_at(50, 100) - 0.7).abs() < 1e-12);
        assert_eq!(o.beta_at(200, 100), 1.0);
    }
}

pub use rl_training_core::agent::EnvMaker;

/// Counters, generators and collector state every off-policy agent saves.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CoreState {
    /// Env steps so far.
    pub num_timesteps: u64,
    /// `train` calls so far.
    pub iterations: u64,
    /// Budget the schedules refer to.
    pub total_timesteps: u64,
    /// Vector-env steps so far.
    pub n_calls: u64,
    /// Fractional gradient steps owed under `training_intensity`.
    pub credit: f64,
    /// Exploration draws.
    pub rng_act: Rng,
    /// Replay sampling.
    pub rng_replay: Rng,
    /// `predict` draws.
    pub rng_predict: Rng,
    /// Envs and last observations.
    pub collector: CollectorState,
    /// The saved buffer's scalars, when stored.
    pub replay: Option<ReplayMeta>,
    /// Env runners' links, versions and (in process) states, when the run has runners.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runners: Option<runners::ApexState>,
}

/// What [`OffPolicyCore::collect`] gathered.
#[derive(Debug, Default)]
pub struct Collected {
    /// Episodes that finished.
    pub episodes: Vec<EpisodeStats>,
    /// Env steps taken (all envs).
    pub steps: u64,
    /// Vector steps before collection.
    pub calls_before: u64,
    /// Seconds spent.
    pub seconds: f64,
}

/// The agent shell shared by the family: envs, replay buffer, counters, generators.
pub struct OffPolicyCore {
    /// The run configuration.
    pub run: RunConfig,
    /// The envs.
    pub collector: Collector,
    /// The replay buffer.
    pub replay: Replay,
    /// Exploration draws.
    pub rng_act: Rng,
    /// Replay sampling.
    pub rng_replay: Rng,
    /// `predict` draws.
    pub rng_predict: Rng,
    /// Counters and spaces.
    pub status: RunStatus,
    /// Vector-env steps so far.
    pub n_calls: u64,
    /// Fractional gradient steps owed.
    pub credit: f64,
    /// Warnings raised while loading.
    pub warnings: Vec<String>,
}

impl OffPolicyCore {
    /// Builds the envs and an empty buffer storing actions of width `stored_act_dim`.
    pub fn new(
        run: &RunConfig,
        make_env: EnvMaker<'_>,
        replay: &ReplayOptions,
        stored_act_dim: impl Fn(&Space) -> Result<usize, RlError>,
    ) -> Result<Self, RlError> {
        let venv = rl_training_core::agent::make_vec_env(run, make_env)?;
        let obs_space = venv.observation_space().clone();
        let act_space = venv.action_space().clone();
        let act_dim = stored_act_dim(&act_space)?;
        let env_seed = Rng::for_stream(run.seed, "env").next_seed() >> 16;
        let collector = Collector::new(venv, env_seed)?;
        Ok(Self {
            replay: replay.build(run.n_envs, obs_space.flat_dim(), act_dim),
            run: run.clone(),
            collector,
            rng_act: Rng::for_stream(run.seed, "policy"),
            rng_replay: Rng::for_stream(run.seed, "replay"),
            rng_predict: Rng::for_stream(run.seed, "predict"),
            status: RunStatus::new(run.total_timesteps, obs_space.clone(), act_space),
            n_calls: 0,
            credit: 0.0,
            warnings: Vec::new(),
        })
    }

    /// Steps the envs `train_freq` times. `act(flat_obs, n_envs, rng, random)` returns the
    /// env actions and the actions to store; `random` is true before `learning_starts`.
    pub fn collect(
        &mut self,
        train_freq: usize,
        learning_starts: u64,
        mut act: impl FnMut(&[f32], usize, &mut Rng, bool, u64) -> Result<(Vec<f32>, Vec<f32>), RlError>,
    ) -> Result<Collected, RlError> {
        let t0 = std::time::Instant::now();
        let ne = self.collector.num_envs();
        let mut out = Collected {
            calls_before: self.n_calls,
            ..Default::default()
        };
        for _ in 0..train_freq {
            let random = self.status.num_timesteps < learning_starts;
            let obs = self.collector.obs().to_vec();
            let (env_a, stored) = act(
                &obs,
                ne,
                &mut self.rng_act,
                random,
                self.status.num_timesteps,
            )?;
            out.episodes
                .extend(self.collector.step(&env_a, &stored, &mut self.replay)?);
            self.n_calls += 1;
            self.status.num_timesteps += ne as u64;
            out.steps += ne as u64;
        }
        out.seconds = t0.elapsed().as_secs_f64();
        Ok(out)
    }

    /// Checks raw observations for `predict` and flattens them: `(flat, rows)`.
    pub fn flat_obs(&self, obs: &[f32]) -> Result<(Vec<f32>, usize), RlError> {
        rl_training_core::agent::checked_flat_obs(&self.status.obs_space, &self.run.env_id, obs)
    }

    /// Runs `steps` gradient steps: samples a batch (`batch_size`, discount `gamma`, PER
    /// exponent `beta`), lets `update` learn from it (it sees the replay the batch came
    /// from) and return its metrics and new priorities, feeds those back, and returns each
    /// metric's mean over the steps.
    pub fn replay_steps(
        &mut self,
        steps: usize,
        batch_size: usize,
        gamma: f32,
        beta: f64,
        mut update: impl FnMut(&mut TransitionBatch, &Replay) -> Result<(Metrics, Vec<f32>), RlError>,
    ) -> Result<Metrics, RlError> {
        let mut mean = MetricsMean::default();
        for _ in 0..steps {
            let mut batch = self
                .replay
                .sample(batch_size, gamma, beta, &mut self.rng_replay);
            let (m, priorities) = update(&mut batch, &self.replay)?;
            self.replay.update_priorities(&batch.indices, &priorities);
            mean.add(m);
        }
        Ok(mean.mean())
    }

    /// CleanRL's charts for an iteration: episodes, SPS and time split.
    pub fn finish_metrics(&self, m: &mut Metrics, c: &Collected, started: std::time::Instant) {
        rl_training_core::agent::iteration_charts(m, &c.episodes, c.steps, c.seconds, started);
    }

    /// The state to save, and the buffer file when `store`.
    #[allow(clippy::type_complexity)]
    pub fn state(
        &self,
        store: bool,
    ) -> Result<(CoreState, Option<(&'static str, Vec<u8>)>), RlError> {
        let (file, meta) = save_replay(&self.replay, store);
        Ok((
            CoreState {
                num_timesteps: self.status.num_timesteps,
                iterations: self.status.iterations,
                total_timesteps: self.status.total_timesteps,
                n_calls: self.n_calls,
                credit: self.credit,
                rng_act: self.rng_act.clone(),
                rng_replay: self.rng_replay.clone(),
                rng_predict: self.rng_predict.clone(),
                collector: self.collector.state()?,
                replay: meta,
                runners: None,
            },
            file,
        ))
    }

    /// Restores a saved state (and the buffer, see [`restore_replay`]); warnings are printed
    /// and kept in `warnings`.
    pub fn restore(&mut self, s: CoreState, ck: &Checkpoint, store: bool) -> Result<(), RlError> {
        self.collector.restore(&s.collector)?;
        if let Some(w) = restore_replay(&mut self.replay, store, ck, s.replay.as_ref())? {
            eprintln!("warning: {w}");
            self.warnings.push(w);
        }
        self.status.num_timesteps = s.num_timesteps;
        self.status.iterations = s.iterations;
        self.status.total_timesteps = s.total_timesteps;
        self.n_calls = s.n_calls;
        self.credit = s.credit;
        self.rng_act = s.rng_act;
        self.rng_replay = s.rng_replay;
        self.rng_predict = s.rng_predict;
        Ok(())
    }

    /// The run config to save: the budget now and the complete hyperparameters `cfg`.
    pub fn run_to_save(&self, cfg: &impl Serialize) -> Result<Vec<u8>, RlError> {
        rl_training_core::agent::run_yaml(&self.run, self.status.total_timesteps, cfg)
    }
}
