//! The family's shell: envs, replay buffer, counters, generators, collection, the gradient
//! steps due, `predict` and checkpoints ([`OffPolicyCore`]) around a learner that implements
//! [`OffPolicyLearner`]; [`OffPolicyAgent`] is the [`Algorithm`] of DQN, SAC and AWR.

use crate::runners::{ApexRunners, RunnerShape};
use crate::{Collected, CoreState, OffPolicyCore, ReplayOptions, TrainFrequency};
use rl_training_broker::BrokerLink;
use rl_training_core::agent::EnvMaker;
use rl_training_core::algorithm::{
    Algorithm, Learner, LearnerState, Progress, RunStatus, check_finite,
};
use rl_training_core::burn::tensor::Device;
use rl_training_core::checkpoint::{read_json, read_run, write_checkpoint};
use rl_training_core::config::{AlgoConfig, ConfigError, RunConfig};
use rl_training_core::logger::Metrics;
use rl_training_core::params::TensorMap;
use rl_training_core::replay::{Replay, TransitionBatch};
use rl_training_core::{RlError, Rng, Space};
use rl_training_curiosity::{Curiosity, load_plugin, save_plugin};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::path::Path;
use std::time::Instant;

/// How the shell feeds its learner after each collection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feed {
    /// The gradient steps due (see [`TrainFrequency`]), each on a batch sampled from the
    /// replay (DQN, SAC).
    Sampled,
    /// The whole replay, oldest rows first, once per iteration (AWR).
    WholeReplay,
}

/// The loop and replay settings of an off-policy config.
#[derive(Debug, Clone, PartialEq)]
pub struct OffPolicySettings {
    /// When to learn and how much.
    pub frequency: TrainFrequency,
    /// The replay buffer.
    pub replay: ReplayOptions,
    /// Discount (n-step returns are discounted with it when sampled).
    pub gamma: f64,
    /// Whether checkpoints carry the buffer (`store_buffer_in_checkpoints`).
    pub store_buffer: bool,
    /// How batches reach the learner.
    pub feed: Feed,
    /// Env runners (Ape-X), if any.
    pub runners: RunnerShape,
}

/// Whether an actor explores (collection, stochastic `predict`) or acts greedily.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActMode {
    /// Exploration as the algorithm defines it (ε-greedy, noise, a policy sample).
    Explore,
    /// The greedy action, or the mode of the policy.
    Deterministic,
}

/// The acting side of an off-policy algorithm: an inference copy of the weights, no
/// optimizer. Maps flat observations `[n × flat_dim]` to `(env actions, stored actions)`: the
/// actions the envs take, and the policy's encoding the replay keeps (SAC's in [−1, 1]).
pub trait OffPolicyActor {
    /// Actions for `n` observations at `progress` (for schedules such as ε).
    fn act(
        &self,
        flat_obs: &[f32],
        n: usize,
        rng: &mut Rng,
        mode: ActMode,
        progress: &Progress,
    ) -> (Vec<f32>, Vec<f32>);
}

/// What an off-policy algorithm adds to the shared shell: its hyperparameters and their loop
/// settings, how it builds its learner, and its acting side. Updates, weights and checkpoint
/// state come through [`Learner`].
pub trait OffPolicyLearner: Learner<Batch = TransitionBatch> + Sized {
    /// The hyperparameters (`algo_kwargs`).
    type Config: AlgoConfig + Serialize + Clone + Send;
    /// The acting side.
    type Actor: OffPolicyActor + Send;
    /// The algorithm's name in configs and checkpoints.
    const NAME: &'static str;

    /// The loop and replay settings.
    fn settings(cfg: &Self::Config) -> OffPolicySettings;
    /// Width of the actions the replay stores for this action space, or why the algorithm
    /// does not take it.
    fn stored_action_dim(space: &Space) -> Result<usize, String>;
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
    /// An acting side with the current weights (the in-process path: no copy through the
    /// host).
    fn actor(&self) -> Self::Actor;
    /// An acting side from `weights` alone (what [`Learner::weights`] gives) for the run's
    /// spaces (observations, actions), on the inference `device`: what a runner elsewhere
    /// builds.
    fn actor_from_weights(
        cfg: &Self::Config,
        spaces: (&Space, &Space),
        weights: &TensorMap,
        device: &Device,
    ) -> Result<Self::Actor, RlError>;
    /// New priorities of the last batch's rows (prioritized replay); none by default.
    fn priorities(&self) -> &[f32] {
        &[]
    }
    /// Called after each collection with the vector-step counts before and after it and
    /// the number of envs (DQN's target updates are counted in env steps).
    fn after_collect(&mut self, _calls_before: u64, _calls_after: u64, _n_envs: usize) {}
    /// Metrics of the acting side where training stands (DQN's ε).
    fn acting_metrics(&self, _progress: &Progress, _m: &mut Metrics) {}
}

/// Uniform random actions before `learning_starts`: Discrete actions drawn uniformly (stored
/// as taken); Box actions uniform in [−1, 1] (stored) and rescaled to the bounds for the env,
/// as SB3 samples them.
pub fn random_actions(space: &Space, n: usize, rng: &mut Rng) -> (Vec<f32>, Vec<f32>) {
    match space {
        Space::Box { low, high, .. } => {
            let a = low.len();
            let stored: Vec<f32> = (0..n * a)
                .map(|_| rng.uniform_range(-1.0, 1.0) as f32)
                .collect();
            let env = stored
                .iter()
                .enumerate()
                .map(|(i, &v)| low[i % a] + (v + 1.0) * 0.5 * (high[i % a] - low[i % a]))
                .collect();
            (env, stored)
        }
        Space::Discrete { n: k, .. } => {
            let v: Vec<f32> = (0..n).map(|_| rng.below(*k as u64) as f32).collect();
            (v.clone(), v)
        }
        other => {
            let (mut v, mut row) = (Vec::new(), Vec::new());
            for _ in 0..n {
                other.sample(rng, &mut row);
                v.extend_from_slice(&row);
            }
            (v.clone(), v)
        }
    }
}

/// What `state.json` holds: the shell's [`CoreState`] under `core`, the learner's entries
/// beside it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SavedState {
    core: CoreState,
    #[serde(flatten)]
    learner: Map<String, Value>,
}

/// An off-policy agent: the shared shell around the learner `L`.
pub struct OffPolicyAgent<L: OffPolicyLearner> {
    core: OffPolicyCore,
    settings: OffPolicySettings,
    learner: L,
    /// The acting side, kept while the weights do not change.
    actor: Option<L::Actor>,
    /// The curiosity plugin, if the run asks for one: it adds its bonus to each replayed
    /// batch.
    curiosity: Option<Curiosity>,
    /// Env runners that fill the replay (`num_env_runners` ≥ 1), instead of the shell's own
    /// vector env.
    runners: Option<ApexRunners<L>>,
}

impl<L: OffPolicyLearner> OffPolicyAgent<L> {
    /// A fresh agent for `run` (its `algo_kwargs` are `L`'s hyperparameters) on `device`
    /// (gradients are taken on `device.autodiff()`).
    pub fn new(run: &RunConfig, make_env: EnvMaker<'_>, device: &Device) -> Result<Self, RlError> {
        Self::build(run, make_env, device, None)
    }

    /// [`new`](Self::new) with the env runners (`num_env_runners` of them) in other processes:
    /// the learner posts the run on `link`'s broker and fills its replay with the chunks they
    /// send (they join with [`serve_apex_runner`](crate::runners::serve_apex_runner)).
    pub fn with_broker(
        run: &RunConfig,
        make_env: EnvMaker<'_>,
        device: &Device,
        link: &BrokerLink,
    ) -> Result<Self, RlError> {
        Self::build(run, make_env, device, Some(link))
    }

    fn build(
        run: &RunConfig,
        make_env: EnvMaker<'_>,
        device: &Device,
        link: Option<&BrokerLink>,
    ) -> Result<Self, RlError> {
        let cfg = L::Config::from_kwargs(&run.algo_kwargs).map_err(RlError::Config)?;
        let settings = L::settings(&cfg);
        let shape = settings.runners;
        if link.is_some() && shape.num_env_runners == 0 {
            return Err(RlError::Config(ConfigError::new(
                "algo_kwargs.num_env_runners",
                format!(
                    "{} over a broker fills its replay from runner processes: set \
                     num_env_runners to the number of runner processes (at least 1)",
                    L::NAME
                ),
            )));
        }
        let mut core = OffPolicyCore::new(run, make_env, &settings.replay, |space| {
            L::stored_action_dim(space)
                .map_err(|e| RlError::Config(ConfigError::new(&run.env_id, e)))
        })?;
        let spaces = (&core.status.obs_space, &core.status.act_space);
        let inference = device.clone();
        let device = device.clone().autodiff();
        let curiosity = Curiosity::from_run(run, spaces.0, spaces.1, &device)?;
        let runners = match (shape.num_env_runners, link) {
            (0, _) => None,
            (_, None) => Some(ApexRunners::lockstep(
                run, make_env, &cfg, shape, &inference,
            )?),
            (_, Some(link)) => Some(ApexRunners::remote(run, shape, link)?),
        };
        if runners.is_some() {
            // Transitions of all runners' envs arrive interleaved: one linked column.
            let c = core.replay.config();
            core.replay = settings.replay.build(1, c.obs_dim, c.act_dim).linked();
        }
        let learner = L::build(cfg, run, spaces, device)?;
        Ok(Self {
            core,
            settings,
            learner,
            actor: None,
            curiosity,
            runners,
        })
    }

    /// Loads a checkpoint written by [`Algorithm::save`]; `device` overrides the saved one.
    pub fn load(dir: &Path, make_env: EnvMaker<'_>, device: &Device) -> Result<Self, RlError> {
        Self::load_with(dir, make_env, device, None)
    }

    /// [`load`](Self::load) with the env runners in other processes (see
    /// [`with_broker`](Self::with_broker)).
    pub fn load_with_broker(
        dir: &Path,
        make_env: EnvMaker<'_>,
        device: &Device,
        link: &BrokerLink,
    ) -> Result<Self, RlError> {
        Self::load_with(dir, make_env, device, Some(link))
    }

    fn load_with(
        dir: &Path,
        make_env: EnvMaker<'_>,
        device: &Device,
        link: Option<&BrokerLink>,
    ) -> Result<Self, RlError> {
        let (ck, run) = read_run(dir, L::NAME)?;
        let mut agent = Self::build(&run, make_env, device, link)?;
        let mut state: SavedState = read_json(&ck, "state.json")?;
        agent.learner.load_state(&ck, &state.learner)?;
        load_plugin(&mut agent.curiosity, &ck, &state.learner)?;
        if let (Some(r), Some(s)) = (&mut agent.runners, state.core.runners.take()) {
            r.restore(s, &ck.path_of("state.json"))?;
        }
        let store = agent.settings.store_buffer;
        agent.core.restore(state.core, &ck, store)?;
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

    /// The replay buffer.
    pub fn replay(&self) -> &Replay {
        &self.core.replay
    }

    /// Warnings raised while loading (e.g. a replay buffer flag that disagrees).
    pub fn warnings(&self) -> &[String] {
        &self.core.warnings
    }

    /// The run configuration.
    pub fn run_config(&self) -> &RunConfig {
        &self.core.run
    }

    /// The learner's gradient steps on batches sampled from the replay, as many as are due
    /// after `collected` env steps (from runners: at the rate per env step that the config
    /// gives the shell's own `n_envs`); their metrics averaged, and their number.
    fn sampled_updates(
        &mut self,
        collected: u64,
        progress: &Progress,
    ) -> Result<(Metrics, usize), RlError> {
        let s = &self.settings;
        let (t, credit) = (progress.num_timesteps, &mut self.core.credit);
        let steps = match self.runners {
            None => s.frequency.gradient_steps(t, collected, credit),
            Some(_) => {
                s.frequency
                    .gradient_steps_per_env_step(t, collected, self.core.run.n_envs, credit)
            }
        };
        let beta = s
            .replay
            .beta_at(progress.num_timesteps, progress.total_timesteps);
        let (batch_size, gamma) = (s.frequency.batch_size, s.gamma as f32);
        let (l, curiosity) = (&mut self.learner, &mut self.curiosity);
        let mut m = self
            .core
            .replay_steps(steps, batch_size, gamma, beta, |b, replay| {
                // The bonus of the current module, on this batch only: the replay keeps
                // the env's rewards.
                let plugin = match curiosity {
                    Some(c) => c.relabel_transitions(b, replay, gamma, progress)?,
                    None => Metrics::new(),
                };
                let mut m = l.update(b, progress)?;
                m.extend(plugin);
                Ok((m, l.priorities().to_vec()))
            })?;
        if steps > 0 {
            self.actor = None;
        }
        m.insert("charts/gradient_steps".into(), steps as f64);
        if self.settings.replay.prioritized {
            m.insert("charts/beta".into(), beta);
        }
        Ok((m, steps))
    }

    /// An iteration fed by env runners: one chunk into the replay, the gradient steps due,
    /// and the new weights published when they changed.
    fn train_from_runners(&mut self) -> Result<Metrics, RlError> {
        let t0 = Instant::now();
        let runners = self.runners.as_mut().expect("called with runners");
        let learner = &self.learner;
        runners.ensure_published(self.core.status.num_timesteps, || learner.weights());
        let (id, chunk) = runners.next_chunk()?;
        let calls_before = self.core.n_calls;
        let steps = runners.store(id, &chunk, &mut self.core.replay)? as u64;
        let k = runners.envs_per_runner;
        self.core.n_calls += chunk.n_steps as u64;
        self.core.status.num_timesteps += steps;
        let c = Collected {
            episodes: chunk.episodes,
            steps,
            calls_before,
            seconds: t0.elapsed().as_secs_f64(),
        };
        // Target updates are counted in env steps: vector steps of the runner's envs.
        self.learner
            .after_collect(calls_before, self.core.n_calls, k);
        let progress = self.core.status.progress();
        let (mut m, gradient_steps) = self.sampled_updates(steps, &progress)?;
        let runners = self.runners.as_mut().expect("called with runners");
        if gradient_steps > 0 {
            runners.publish(self.core.status.num_timesteps, self.learner.weights());
        }
        m.insert("perf/runner_restarts".into(), runners.restarts() as f64);
        self.learner.acting_metrics(&progress, &mut m);
        self.core.status.iterations += 1;
        self.core.finish_metrics(&mut m, &c, t0);
        check_finite(self.core.status.num_timesteps, &m)?;
        Ok(m)
    }
}

impl<L: OffPolicyLearner> Algorithm for OffPolicyAgent<L> {
    fn name(&self) -> &str {
        L::NAME
    }

    fn status(&self) -> &RunStatus {
        &self.core.status
    }

    fn status_mut(&mut self) -> &mut RunStatus {
        &mut self.core.status
    }

    fn env_stats(&self) -> Vec<Value> {
        match self.runners.as_ref().and_then(ApexRunners::env_stats) {
            Some(s) => s,
            None => self.core.collector.env.save_stats(),
        }
    }

    /// `train_freq` vector steps of collection (uniform random actions before
    /// `learning_starts`), then the learner's updates: the gradient steps due on sampled
    /// batches, or one pass over the whole replay.
    fn train(&mut self) -> Result<Metrics, RlError> {
        if self.runners.is_some() {
            return self.train_from_runners();
        }
        let t0 = Instant::now();
        let f = &self.settings.frequency;
        let (train_freq, learning_starts) = (f.train_freq, f.learning_starts);
        let actor = match self.actor.take() {
            Some(a) => a,
            None => self.learner.actor(),
        };
        let space = self.core.status.act_space.clone();
        let before = self.core.status.progress();
        let c = self
            .core
            .collect(train_freq, learning_starts, |obs, n, rng, random, t| {
                let p = Progress {
                    num_timesteps: t,
                    ..before
                };
                Ok(if random {
                    random_actions(&space, n, rng)
                } else {
                    actor.act(obs, n, rng, ActMode::Explore, &p)
                })
            })?;
        self.actor = Some(actor);
        let n_envs = self.core.collector.num_envs();
        self.learner
            .after_collect(c.calls_before, self.core.n_calls, n_envs);
        let progress = self.core.status.progress();
        let mut m = match self.settings.feed {
            Feed::Sampled => self.sampled_updates(c.steps, &progress)?.0,
            Feed::WholeReplay => {
                let mut data = self.core.replay.chronological();
                let plugin = match &mut self.curiosity {
                    Some(c) => c.relabel_transitions(
                        &mut data,
                        &self.core.replay,
                        self.settings.gamma as f32,
                        &progress,
                    )?,
                    None => Metrics::new(),
                };
                self.actor = None;
                let mut m = self.learner.update(&data, &progress)?;
                m.extend(plugin);
                m
            }
        };
        self.learner.acting_metrics(&progress, &mut m);
        self.core.status.iterations += 1;
        self.core.finish_metrics(&mut m, &c, t0);
        check_finite(self.core.status.num_timesteps, &m)?;
        Ok(m)
    }

    /// The actor's deterministic action when `deterministic`, its exploring one otherwise.
    fn predict(&mut self, obs: &[f32], deterministic: bool) -> Result<Vec<f32>, RlError> {
        let (flat, n) = self.core.flat_obs(obs)?;
        let actor = match self.actor.take() {
            Some(a) => a,
            None => self.learner.actor(),
        };
        let mode = if deterministic {
            ActMode::Deterministic
        } else {
            ActMode::Explore
        };
        let progress = self.core.status.progress();
        let (env, _) = actor.act(&flat, n, &mut self.core.rng_predict, mode, &progress);
        self.actor = Some(actor);
        Ok(env)
    }

    fn save(&self, dir: &Path) -> Result<(), RlError> {
        let mut learner_state = self.learner.save_state();
        save_plugin(&self.curiosity, &mut learner_state);
        let LearnerState {
            files: learner_files,
            entries,
        } = learner_state;
        let (mut core, replay_file) = self.core.state(self.settings.store_buffer)?;
        core.runners = self.runners.as_ref().map(ApexRunners::state).transpose()?;
        let state = SavedState {
            core,
            learner: entries,
        };
        let mut files = vec![("config.yaml", self.core.run_to_save(self.learner.config())?)];
        files.extend(learner_files);
        files.push((
            "state.json",
            serde_json::to_vec_pretty(&state).expect("serializable"),
        ));
        files.extend(replay_file);
        write_checkpoint(dir, L::NAME, &files)?;
        Ok(())
    }
}
