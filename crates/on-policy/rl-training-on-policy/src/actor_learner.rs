//! The env-runner side of the family's actor-learner algorithms (IMPALA, APPO), on rl-training-core's
//! runner / learner split: [`EnvRunner`] collects `n_steps` of a vector env with a copy of the
//! policy (reloaded when the published version changes) and sends a [`RunnerBatch`];
//! [`RunnerSet`] drives the runners on threads through a bounded [`ChannelTransport`] or in
//! lockstep, and hands the learner its next batch.

use crate::agent::BuildContext;
use crate::policy::{ActorCritic, PolicyKwargs};
use crate::remote::RemoteRunners;
use crate::rollout::{CollectorState, RolloutCollector, RolloutPolicy};
use rl_training_broker::{BrokerLink, UsedBatches};
use rl_training_core::Space;
use rl_training_core::actor_learner::{
    ChannelTransport, Intake, Runner, RunnerPool, RunnerReports, Tagged, Transport, Versioned,
};
use rl_training_core::agent::{EnvMaker, checked_flat_obs, iteration_charts, run_yaml};
use rl_training_core::algorithm::{Algorithm, Learner, LearnerState, Progress, RunStatus};
use rl_training_core::batch::{flatten_batch, tensor2};
use rl_training_core::buffers::RolloutBuffer;
use rl_training_core::burn::module::Module;
use rl_training_core::burn::tensor::Device;
use rl_training_core::checkpoint::{read_json, read_run, write_checkpoint};
use rl_training_core::config::{AlgoConfig, ConfigError, RunConfig, check};
use rl_training_core::logger::{Metrics, MetricsMean};
use rl_training_core::params::load_module_tensors;
use rl_training_core::vec_env::{EpisodeStats, VecEnv};
use rl_training_core::vtrace::{VTraceInput, VTraceOutput, vtrace};
use rl_training_core::{RlError, Rng};
use rl_training_curiosity::{Curiosity, load_plugin, save_plugin};
use serde::{Deserialize, Serialize};
use serde_json::Map;
use smart_default::SmartDefault;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// What a runner sends: a rollout (behaviour log-probabilities and values, rewards with the
/// truncation bootstrap, GAE computed with the behaviour values), the observations after its
/// last step, which envs' last step ended an episode, and the episodes that finished.
///
/// Two layouts: a runner's `[n_steps][n_envs]` (`chains` empty; one column per env), or the
/// multi-agent shell's chains (`chains` holds their lengths; the buffer is one column, each
/// agent's rows of the rollout one after the other, `last_obs` and `last_dones` one row per
/// chain), since agents act at different steps and finish at different times.
#[derive(Debug, Clone)]
pub struct RunnerBatch {
    /// The rollout, `[n_steps][n_envs]` (or chains in one column).
    pub buffer: RolloutBuffer,
    /// Flattened observations after the last step `[n_envs × obs_dim]` (or after each
    /// chain's last row).
    pub last_obs: Vec<f32>,
    /// 1 where the last step ended an episode (per env, or per chain).
    pub last_dones: Vec<f32>,
    /// Lengths of the chains in the buffer's one column (empty: the `[T][N]` layout).
    pub chains: Vec<usize>,
    /// Finished episodes.
    pub episodes: Vec<EpisodeStats>,
    /// Seconds the collection took.
    pub seconds: f64,
}

/// Rollout settings of the runners.
#[derive(Debug, Clone, Copy)]
pub struct RunnerSettings {
    /// Steps per env in a batch.
    pub n_steps: usize,
    /// Envs per runner.
    pub num_envs: usize,
    /// Discount (truncation bootstrap, GAE).
    pub gamma: f64,
    /// GAE λ of the behaviour advantages in the batch.
    pub gae_lambda: f64,
    /// gSDE: new exploration matrices every this many steps (-1: once per batch).
    pub sde_sample_freq: i64,
}

/// An env runner: a vector env, a copy of the policy (an [`ActorCritic`] unless `P` says
/// otherwise) and its own generators.
pub struct EnvRunner<P = ActorCritic> {
    /// Envs and rollout buffer.
    pub collector: RolloutCollector,
    policy: P,
    version: Option<u64>,
    rng: Rng,
    reseed: Rng,
    settings: RunnerSettings,
    infer: Device,
}

/// A lockstep runner's saved state.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunnerState {
    collector: CollectorState,
    rng: Rng,
    reseed: Rng,
}

impl<P: RolloutPolicy + Module> EnvRunner<P> {
    /// Runner `index` of `run`: its envs seeded from the run seed and the index, acting with
    /// `policy` (an inference copy on `infer`).
    pub fn new(
        run: &RunConfig,
        make_env: EnvMaker<'_>,
        settings: RunnerSettings,
        index: usize,
        policy: P,
        infer: Device,
    ) -> Result<Self, RlError> {
        let envs = (0..settings.num_envs)
            .map(|_| make_env(run))
            .collect::<Result<Vec<_>, _>>()?;
        let mut reseed = Rng::for_stream(run.seed, &format!("env-runner-{index}"));
        let collector = RolloutCollector::new(
            VecEnv::new(envs)?,
            settings.n_steps,
            reseed.next_seed() >> 16,
        )?;
        Ok(Self {
            collector,
            policy,
            version: None,
            rng: Rng::for_stream(run.seed, &format!("runner-policy-{index}")),
            reseed,
            settings,
            infer,
        })
    }

    /// What a checkpoint keeps of a lockstep runner.
    pub fn state(&self) -> Result<RunnerState, RlError> {
        Ok(RunnerState {
            collector: self.collector.state()?,
            rng: self.rng.clone(),
            reseed: self.reseed.clone(),
        })
    }

    /// Restores what [`state`](Self::state) saved.
    pub fn restore(&mut self, st: RunnerState) -> Result<(), RlError> {
        self.collector.restore(&st.collector)?;
        self.rng = st.rng;
        self.reseed = st.reseed;
        Ok(())
    }
}

/// Restores each of `runners` from its saved state (checked: as many as saved; `file` names
/// the checkpoint file).
pub fn restore_runners<P: RolloutPolicy + Module>(
    runners: &mut [EnvRunner<P>],
    states: Vec<RunnerState>,
    file: &str,
) -> Result<(), RlError> {
    if states.len() != runners.len() {
        return Err(RlError::Config(ConfigError::new(
            format!("{file}: runners"),
            format!("{} saved, the run has {}", states.len(), runners.len()),
        )));
    }
    for (r, st) in runners.iter_mut().zip(states) {
        r.restore(st)?;
    }
    Ok(())
}

impl<P: RolloutPolicy + Module> Runner for EnvRunner<P> {
    type Batch = RunnerBatch;

    fn collect(&mut self, w: &Versioned) -> Result<(u64, RunnerBatch), RlError> {
        if self.version != Some(w.version) {
            self.policy =
                load_module_tensors(self.policy.clone(), &w.weights, "weights", &self.infer)?;
            self.version = Some(w.version);
        }
        let t0 = Instant::now();
        let s = self.settings;
        let info = self.collector.collect(
            &self.policy,
            &self.infer,
            &mut self.rng,
            s.gamma as f32,
            s.gae_lambda as f32,
            s.sde_sample_freq,
        )?;
        let space = self.collector.env.observation_space().clone();
        let mut last_obs = Vec::new();
        flatten_batch(&space, self.collector.last_obs(), &mut last_obs);
        let batch = RunnerBatch {
            buffer: self.collector.buffer.clone(),
            last_obs,
            last_dones: self.collector.last_episode_starts().to_vec(),
            chains: Vec::new(),
            episodes: info.episodes,
            seconds: t0.elapsed().as_secs_f64(),
        };
        Ok((w.version, batch))
    }

    fn reset(&mut self) -> Result<(), RlError> {
        let seed = self.reseed.next_seed() >> 16;
        self.collector.reset_envs(seed)?;
        self.version = None;
        Ok(())
    }
}

/// The runners of an agent: in lockstep (the learner calls them in turn) or on threads.
pub enum RunnerSet {
    /// No threads; `latest` is what the runners act with.
    Lockstep {
        /// The runners.
        runners: Vec<EnvRunner>,
        /// The latest published weights.
        latest: Arc<Versioned>,
    },
    /// Runner processes over a broker (see [`crate::remote`]).
    Remote(Box<RemoteRunners>),
    /// One thread per runner.
    Threads {
        /// The threads.
        pool: RunnerPool<EnvRunner>,
        /// Batches in, weights out.
        transport: Arc<ChannelTransport<RunnerBatch>>,
        /// Panics and errors.
        reports: Arc<RunnerReports>,
    },
}

impl RunnerSet {
    /// The runners of `s` acting with `policy` (an inference copy on `infer`), first with
    /// weights `initial`; threaded unless `s.lockstep`.
    pub fn new(
        run: &RunConfig,
        make_env: EnvMaker<'_>,
        s: &LearnerSettings,
        policy: &ActorCritic,
        infer: &Device,
        initial: Versioned,
    ) -> Result<Self, RlError> {
        let runners = (0..s.num_env_runners)
            .map(|i| EnvRunner::new(run, make_env, s.runner, i, policy.valid(), infer.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(if s.lockstep {
            RunnerSet::Lockstep {
                runners,
                latest: Arc::new(initial),
            }
        } else {
            let transport = Arc::new(ChannelTransport::new(s.learner_queue_size, initial));
            let reports = Arc::new(RunnerReports::default());
            let pool = RunnerPool::spawn(
                runners,
                transport.clone() as Arc<dyn Transport<RunnerBatch>>,
                reports.clone(),
            );
            RunnerSet::Threads {
                pool,
                transport,
                reports,
            }
        })
    }

    /// The next batch: from runner `i` in lockstep, else the oldest queued one (waiting up to
    /// `timeout`).
    pub fn next_batch(
        &mut self,
        i: usize,
        timeout: Duration,
    ) -> Result<Tagged<RunnerBatch>, RlError> {
        match self {
            RunnerSet::Lockstep { runners, latest } => {
                let k = i % runners.len();
                let (version, batch) = runners[k].collect(latest)?;
                Ok(Tagged {
                    version,
                    runner: k,
                    sent: Instant::now(),
                    batch,
                })
            }
            RunnerSet::Threads { transport, .. } => transport.recv(timeout).ok_or_else(|| {
                RlError::Other(format!(
                    "no batch from the env runners within learner_queue_timeout = {} s",
                    timeout.as_secs_f64()
                ))
            }),
            RunnerSet::Remote(r) => r.transport.recv(timeout).ok_or_else(|| {
                RlError::Other(format!(
                    "no batch from the runner processes of run {:?} within \
                     learner_queue_timeout = {} s (start runners with `rl runner --broker \
                     URL --run {}`)",
                    r.run_id,
                    timeout.as_secs_f64(),
                    r.run_id
                ))
            }),
        }
    }

    /// Makes `w` the weights the runners act with next.
    pub fn publish(&mut self, w: Arc<Versioned>) {
        match self {
            RunnerSet::Lockstep { latest, .. } => *latest = w,
            RunnerSet::Threads { transport, .. } => transport.publish(w),
            RunnerSet::Remote(r) => r.transport.publish(w),
        }
    }

    /// `(queued batches, runner restarts)`.
    pub fn health(&self) -> (usize, u64) {
        match self {
            RunnerSet::Lockstep { .. } => (0, 0),
            RunnerSet::Threads {
                transport, reports, ..
            } => (
                transport.queue_len(),
                reports.restarts.load(Ordering::SeqCst),
            ),
            RunnerSet::Remote(r) => (r.transport.queue_len(), r.restarts.load(Ordering::SeqCst)),
        }
    }

    /// Whether the learner calls the runners itself.
    pub fn is_lockstep(&self) -> bool {
        matches!(self, RunnerSet::Lockstep { .. })
    }

    /// Normalization statistics of the first lockstep runner's first env (threaded runners'
    /// envs live on their threads: None).
    pub fn env_stats(&self) -> Option<Vec<serde_json::Value>> {
        match self {
            RunnerSet::Lockstep { runners, .. } => Some(runners[0].collector.env.save_stats()),
            RunnerSet::Threads { .. } | RunnerSet::Remote(_) => None,
        }
    }

    /// Lockstep runners' states for a checkpoint (empty for threaded ones, which start new
    /// episodes after a load).
    pub fn states(&self) -> Result<Vec<RunnerState>, RlError> {
        match self {
            RunnerSet::Lockstep { runners, .. } => runners.iter().map(EnvRunner::state).collect(),
            RunnerSet::Threads { .. } | RunnerSet::Remote(_) => Ok(Vec::new()),
        }
    }

    /// Restores what [`states`](Self::states) saved and publishes `weights`; `file` names
    /// the checkpoint file in errors.
    pub fn restore(
        &mut self,
        states: Vec<RunnerState>,
        weights: Arc<Versioned>,
        file: &str,
    ) -> Result<(), RlError> {
        if let RunnerSet::Lockstep { runners, .. } = self {
            restore_runners(runners, states, file)?;
        }
        self.publish(weights);
        Ok(())
    }
}

impl Drop for RunnerSet {
    fn drop(&mut self) {
        if let RunnerSet::Threads {
            pool, transport, ..
        } = self
        {
            pool.shutdown(transport.as_ref());
        }
    }
}

/// What an actor-learner agent configures in the shared shell.
#[derive(Debug, Clone, Copy)]
pub struct LearnerSettings {
    /// Env runners.
    pub num_env_runners: usize,
    /// Runners and learner take turns (no threads).
    pub lockstep: bool,
    /// Batches the queue holds.
    pub learner_queue_size: usize,
    /// Seconds to wait for a batch.
    pub learner_queue_timeout: f64,
    /// Drop batches older than this many versions.
    pub max_policy_lag: Option<u64>,
    /// Learner updates between weight broadcasts.
    pub broadcast_interval: u64,
    /// The runners' rollouts.
    pub runner: RunnerSettings,
}

/// The runner, queue, V-trace and network keys IMPALA and APPO share, with the same defaults
/// (RLlib's names, older RLlib names as aliases; RLlib's APPO config extends IMPALA's). Flat
/// in their YAML tables: the configs embed it with `#[serde(flatten, skip_deserializing)]`
/// and read it with [`from_kwargs_with_part`](rl_training_core::config::from_kwargs_with_part).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, SmartDefault)]
#[serde(deny_unknown_fields, default)]
pub struct ActorLearnerKeys {
    /// Envs per runner.
    #[default(1)]
    #[serde(alias = "num_envs_per_worker")]
    pub num_envs_per_env_runner: usize,
    /// Batches the learner queue holds before runners block.
    #[default(16)]
    pub learner_queue_size: usize,
    /// Seconds the learner waits for a batch before failing.
    #[default(300.0)]
    pub learner_queue_timeout: f64,
    /// Learner updates between weight broadcasts.
    #[default(1)]
    pub broadcast_interval: u64,
    /// Batches produced more than this many learner versions ago are dropped (None: never).
    pub max_policy_lag: Option<u64>,
    /// Runners and learner take turns in a fixed order (reproducible; no threads).
    #[default(false)]
    pub lockstep: bool,
    /// ρ̄: V-trace's truncation of the importance weights in the value targets (and of the
    /// policy gradient's).
    #[default(1.0)]
    #[serde(alias = "vtrace_clip_rho_threshold")]
    pub vtrace_clip_rho: f64,
    /// c̄: V-trace's truncation of the trace-cutting weights.
    #[default(1.0)]
    #[serde(alias = "vtrace_clip_c_threshold")]
    pub vtrace_clip_c: f64,
    /// Network architecture and initialization.
    pub policy_kwargs: PolicyKwargs,
}

impl ActorLearnerKeys {
    /// The shell's settings for `num_env_runners` runners collecting `n_steps` per env
    /// (discount `gamma`, behaviour GAE λ `gae_lambda`).
    pub fn settings(
        &self,
        num_env_runners: usize,
        n_steps: usize,
        gamma: f64,
        gae_lambda: f64,
    ) -> LearnerSettings {
        LearnerSettings {
            num_env_runners,
            lockstep: self.lockstep,
            learner_queue_size: self.learner_queue_size,
            learner_queue_timeout: self.learner_queue_timeout,
            max_policy_lag: self.max_policy_lag,
            broadcast_interval: self.broadcast_interval,
            runner: RunnerSettings {
                n_steps,
                num_envs: self.num_envs_per_env_runner,
                gamma,
                gae_lambda,
                sde_sample_freq: -1,
            },
        }
    }

    /// Range checks with messages naming the field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let err = |f: &str, m: &str| rl_training_core::config::invalid(f, m);
        if self.num_envs_per_env_runner == 0 {
            return err("num_envs_per_env_runner", "must be at least 1");
        }
        if self.learner_queue_size == 0 {
            return err("learner_queue_size", "must be at least 1");
        }
        if !(self.learner_queue_timeout > 0.0) {
            return err("learner_queue_timeout", "must be positive (seconds)");
        }
        if self.broadcast_interval == 0 {
            return err("broadcast_interval", "must be at least 1");
        }
        check::positive("vtrace_clip_rho", self.vtrace_clip_rho)?;
        check::positive("vtrace_clip_c", self.vtrace_clip_c)
    }
}

/// What one `train` call took in: env steps, finished episodes, collection time.
#[derive(Debug, Default)]
pub struct Took {
    /// Env steps in the batches taken (admitted or dropped).
    pub steps: u64,
    /// Episodes that finished in them.
    pub episodes: Vec<EpisodeStats>,
    /// Seconds the runners spent collecting them.
    pub collect_seconds: f64,
}

/// Counters the shell saves in `state.json` (the learner's entries sit beside them).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CoreState {
    /// Env steps.
    pub num_timesteps: u64,
    /// `train` calls.
    pub iterations: u64,
    /// Budget.
    pub total_timesteps: u64,
    /// Learner updates (the policy version).
    pub version: u64,
    /// Updates since the last broadcast.
    pub updates_since_broadcast: u64,
    /// Batches dropped for their lag.
    pub dropped_batches: u64,
    /// `predict`'s generator.
    pub rng_predict: Rng,
    /// Lockstep runners (empty for threaded ones).
    pub runners: Vec<RunnerState>,
    /// Runner processes: the (runner, sequence) pairs of the batches used (their
    /// redeliveries to a restarted learner are skipped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_batches: Option<UsedBatches>,
}

/// What `state.json` holds: the shell's [`CoreState`] and the learner's entries, side by side.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SavedState {
    #[serde(flatten)]
    core: CoreState,
    #[serde(flatten)]
    learner: Map<String, serde_json::Value>,
}

/// What an actor-learner algorithm adds to the shared shell: its hyperparameters and runner
/// settings, how it builds its learner, which batches it learns from when one arrives, and
/// its policy (what the runners get). Each [`Learner::update`] is one learner update: one
/// policy version.
pub trait ActorLearner: Learner<Batch = RunnerBatch> + Sized {
    /// The hyperparameters (`algo_kwargs`).
    type Config: AlgoConfig + Serialize + Clone;
    /// The algorithm's name in configs and checkpoints.
    const NAME: &'static str;

    /// The runners, the queue, the lag limit and the broadcasts.
    fn settings(cfg: &Self::Config) -> LearnerSettings;
    /// The network shape of the policy (`policy_kwargs`).
    fn policy_kwargs(cfg: &Self::Config) -> &PolicyKwargs;
    /// A fresh policy for the spaces (observations, actions) from `rng`: what the learner
    /// starts from and what a runner loads published weights into.
    fn make_policy(
        cfg: &Self::Config,
        (obs_space, act_space): (&Space, &Space),
        rng: &mut Rng,
        device: &Device,
    ) -> Result<ActorCritic, RlError> {
        ActorCritic::new(obs_space, act_space, Self::policy_kwargs(cfg), rng, device)
            .map_err(|e| RlError::Config(ConfigError::new("policy", e)))
    }
    /// A learner for a fresh `policy` (made by [`make_policy`](Self::make_policy) from the
    /// run seed's `init` stream).
    fn build(cfg: Self::Config, policy: ActorCritic, ctx: &BuildContext) -> Result<Self, RlError>;
    /// The hyperparameters.
    fn config(&self) -> &Self::Config;
    /// The policy the runners act with.
    fn policy(&self) -> &ActorCritic;
    /// The batches to learn from, in order, now that `admitted` arrived (IMPALA: it, then
    /// replayed ones; APPO: one drawn from its circular buffer). Just `admitted` by default.
    fn schedule(&mut self, admitted: RunnerBatch) -> Vec<Arc<RunnerBatch>> {
        vec![Arc::new(admitted)]
    }
    /// Adds the iteration's metrics beyond the updates' means (learning rate, buffers) and
    /// starts counting the next iteration's.
    fn iteration_metrics(&mut self, _progress: &Progress, _m: &mut Metrics) {}
}

/// An actor-learner agent: the env runners, the policy-lag intake, the policy versions and
/// their broadcasts, counters, `predict` and checkpoints around the learner `L`.
pub struct ActorLearnerAgent<L: ActorLearner> {
    run: RunConfig,
    learner: L,
    infer: Device,
    version: u64,
    updates_since_broadcast: u64,
    runners: RunnerSet,
    intake: Intake,
    rng_predict: Rng,
    status: RunStatus,
    env_stats: Vec<serde_json::Value>,
    settings: LearnerSettings,
    curiosity: Option<Curiosity>,
}

impl<L: ActorLearner> ActorLearnerAgent<L> {
    /// A fresh agent for `run` (its `algo_kwargs` are `L`'s hyperparameters): the learner's
    /// policy on `device.autodiff()`, the runners acting on `device` with its inference copy.
    pub fn new(run: &RunConfig, make_env: EnvMaker<'_>, device: &Device) -> Result<Self, RlError> {
        let mut a = Self::build(run, make_env, device, None)?;
        a.publish_current();
        Ok(a)
    }

    /// [`new`](Self::new) with the runners in other processes: the learner posts the run for
    /// them on `link`'s broker and takes their batches from it (the runners join with
    /// [`serve_runner`](crate::remote::serve_runner)).
    pub fn with_broker(
        run: &RunConfig,
        make_env: EnvMaker<'_>,
        device: &Device,
        link: &BrokerLink,
    ) -> Result<Self, RlError> {
        let mut a = Self::build(run, make_env, device, Some(link))?;
        a.publish_current();
        Ok(a)
    }

    /// Publishes the learner's weights as its current version.
    fn publish_current(&mut self) {
        let w = Arc::new(Versioned {
            version: self.version,
            weights: self.learner.weights(),
        });
        self.runners.publish(w);
    }

    fn build(
        run: &RunConfig,
        make_env: EnvMaker<'_>,
        device: &Device,
        link: Option<&BrokerLink>,
    ) -> Result<Self, RlError> {
        let cfg = L::Config::from_kwargs(&run.algo_kwargs).map_err(RlError::Config)?;
        if run.normalize.shared {
            // Each runner's envs live with the runner (on its thread): no one set to share.
            return Err(RlError::Config(ConfigError::new(
                "normalize.shared",
                "the actor-learner runners (IMPALA, APPO) normalize per env; set it to false",
            )));
        }
        let settings = L::settings(&cfg);
        let infer = device.clone();
        let probe = make_env(run)?;
        let (obs_space, act_space) = (
            probe.observation_space().clone(),
            probe.action_space().clone(),
        );
        let env_stats = probe.save_stats();
        let device = device.clone().autodiff();
        let spaces = (&obs_space, &act_space);
        let mut rng = Rng::for_stream(run.seed, "init");
        let policy = L::make_policy(&cfg, spaces, &mut rng, &device)?;
        let ctx = BuildContext {
            device,
            run,
            spaces,
        };
        let curiosity = Curiosity::from_run(run, &obs_space, &act_space, &ctx.device)?;
        let learner = L::build(cfg, policy, &ctx)?;
        let initial = Versioned {
            version: 0,
            weights: learner.weights(),
        };
        let runners = match link {
            None => RunnerSet::new(run, make_env, &settings, learner.policy(), &infer, initial)?,
            Some(link) => RunnerSet::Remote(Box::new(RemoteRunners::start(
                link,
                run,
                settings.learner_queue_size,
                initial,
            )?)),
        };
        Ok(Self {
            run: run.clone(),
            learner,
            infer,
            version: 0,
            updates_since_broadcast: 0,
            runners,
            intake: Intake::new(settings.max_policy_lag),
            rng_predict: Rng::for_stream(run.seed, "predict"),
            status: RunStatus::new(run.total_timesteps, obs_space, act_space),
            env_stats,
            settings,
            curiosity,
        })
    }

    /// Loads a checkpoint written by [`Algorithm::save`]; `device` overrides the saved one.
    /// Lockstep runners resume where they were; threaded runners start new episodes.
    pub fn load(dir: &Path, make_env: EnvMaker<'_>, device: &Device) -> Result<Self, RlError> {
        Self::load_with(dir, make_env, device, None)
    }

    /// [`load`](Self::load) with the runners in other processes (see
    /// [`with_broker`](Self::with_broker)): batches the checkpoint had used are skipped when
    /// the broker redelivers them.
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
        let mut a = Self::build(&run, make_env, device, link)?;
        let s: SavedState = read_json(&ck, "state.json")?;
        a.learner.load_state(&ck, &s.learner)?;
        load_plugin(&mut a.curiosity, &ck, &s.learner)?;
        let c = s.core;
        a.status.num_timesteps = c.num_timesteps;
        a.status.iterations = c.iterations;
        a.status.total_timesteps = c.total_timesteps;
        a.version = c.version;
        a.updates_since_broadcast = c.updates_since_broadcast;
        a.intake.dropped = c.dropped_batches;
        a.rng_predict = c.rng_predict;
        if let (RunnerSet::Remote(r), Some(used)) = (&a.runners, c.used_batches) {
            r.transport.set_used(used);
        }
        let weights = Arc::new(Versioned {
            version: a.version,
            weights: a.learner.weights(),
        });
        a.runners
            .restore(c.runners, weights, &ck.path_of("state.json"))?;
        Ok(a)
    }

    /// The hyperparameters.
    pub fn config(&self) -> &L::Config {
        self.learner.config()
    }

    /// The learner.
    pub fn learner(&self) -> &L {
        &self.learner
    }

    /// The learner's policy.
    pub fn policy(&self) -> &ActorCritic {
        self.learner.policy()
    }

    /// Learner updates so far (the policy version).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The next batch for the learner (runner `i`'s in lockstep), counted in `took`; None when
    /// it is dropped for its lag.
    fn next_admitted(&mut self, i: usize, took: &mut Took) -> Result<Option<RunnerBatch>, RlError> {
        let timeout = Duration::from_secs_f64(self.settings.learner_queue_timeout);
        let t = self.runners.next_batch(i, timeout)?;
        let b = &t.batch;
        let n = b.buffer.len() as u64;
        took.steps += n;
        took.collect_seconds += b.seconds;
        took.episodes.extend(b.episodes.iter().copied());
        self.status.num_timesteps += n;
        Ok(self.intake.admit(t, self.version).map(|t| t.batch))
    }

    /// Counts a learner update and broadcasts the weights when due.
    fn updated(&mut self) {
        self.version += 1;
        self.updates_since_broadcast += 1;
        if self.updates_since_broadcast >= self.settings.broadcast_interval {
            self.updates_since_broadcast = 0;
            let w = Arc::new(Versioned {
                version: self.version,
                weights: self.learner.weights(),
            });
            self.runners.publish(w);
        }
    }

    /// Counts the iteration and adds the lag, queue, restart and throughput metrics and
    /// CleanRL's charts; checks that every metric is finite.
    fn finish(&mut self, m: &mut Metrics, took: &Took, started: Instant) -> Result<(), RlError> {
        self.status.iterations += 1;
        let (lag, queued) = self.intake.take_lags();
        m.insert("perf/policy_lag".into(), lag);
        m.insert("time/queue_seconds".into(), queued);
        m.insert("perf/dropped_batches".into(), self.intake.dropped as f64);
        m.insert("perf/learner_version".into(), self.version as f64);
        let (queue_len, restarts) = self.runners.health();
        m.insert("perf/learner_queue_len".into(), queue_len as f64);
        m.insert("perf/runner_restarts".into(), restarts as f64);
        m.insert(
            "perf/env_steps_per_s".into(),
            took.steps as f64 / started.elapsed().as_secs_f64().max(1e-9),
        );
        // Lockstep collection is part of the iteration; threaded runners collect while the
        // learner works, so only the learner's time counts as update time.
        let rollout_s = if self.runners.is_lockstep() {
            took.collect_seconds
        } else {
            0.0
        };
        iteration_charts(m, &took.episodes, took.steps, rollout_s, started);
        rl_training_core::algorithm::check_finite(self.status.num_timesteps, m)
    }
}

impl<L: ActorLearner> Algorithm for ActorLearnerAgent<L> {
    fn name(&self) -> &str {
        L::NAME
    }

    fn status(&self) -> &RunStatus {
        &self.status
    }

    fn status_mut(&mut self) -> &mut RunStatus {
        &mut self.status
    }

    /// Normalization statistics an evaluation env needs.
    fn env_stats(&self) -> Vec<serde_json::Value> {
        self.runners
            .env_stats()
            .unwrap_or_else(|| self.env_stats.clone())
    }

    /// One batch from every runner; for each admitted one, the learner updates on the
    /// batches it schedules (each update one policy version, broadcast when due). Metrics are
    /// the updates' means.
    fn train(&mut self) -> Result<Metrics, RlError> {
        let t0 = Instant::now();
        let mut took = Took::default();
        let (mut updates, mut plugin) = (MetricsMean::default(), MetricsMean::default());
        let (gamma, lambda) = (self.settings.runner.gamma, self.settings.runner.gae_lambda);
        for i in 0..self.settings.num_env_runners {
            let Some(mut batch) = self.next_admitted(i, &mut took)? else {
                continue;
            };
            // The curiosity bonus joins each admitted batch once, before any learning (and
            // before IMPALA's replay stores it).
            if let Some(c) = &mut self.curiosity {
                let progress = self.status.progress();
                let buf = &mut batch.buffer;
                let (g, l) = (gamma as f32, lambda as f32);
                plugin.add(c.relabel_rollout_rewards(buf, g, l, &progress)?);
            }
            for b in self.learner.schedule(batch) {
                updates.add(self.learner.update(&b, &self.progress())?);
                self.updated();
            }
        }
        let mut m = updates.mean();
        m.extend(plugin.mean());
        let progress = self.progress();
        self.learner.iteration_metrics(&progress, &mut m);
        self.finish(&mut m, &took, t0)?;
        Ok(m)
    }

    /// Actions for raw observations (deterministic: the mode), clipped to Box bounds.
    fn predict(&mut self, obs: &[f32], deterministic: bool) -> Result<Vec<f32>, RlError> {
        let (flat, n) = checked_flat_obs(&self.status.obs_space, &self.run.env_id, obs)?;
        let mut a = self.learner.policy().valid().sample_actions(
            tensor2(flat, n, self.status.obs_space.flat_dim(), &self.infer),
            &mut self.rng_predict,
            deterministic,
        );
        self.status.act_space.clip_to_bounds(&mut a);
        Ok(a)
    }

    fn save(&self, dir: &Path) -> Result<(), RlError> {
        let mut learner_state = self.learner.save_state();
        save_plugin(&self.curiosity, &mut learner_state);
        let LearnerState {
            files: learner_files,
            entries,
        } = learner_state;
        let state = SavedState {
            core: CoreState {
                num_timesteps: self.status.num_timesteps,
                iterations: self.status.iterations,
                total_timesteps: self.status.total_timesteps,
                version: self.version,
                updates_since_broadcast: self.updates_since_broadcast,
                dropped_batches: self.intake.dropped,
                rng_predict: self.rng_predict.clone(),
                runners: self.runners.states()?,
                used_batches: match &self.runners {
                    RunnerSet::Remote(r) => Some(r.transport.used()),
                    _ => None,
                },
            },
            learner: entries,
        };
        let cfg = self.learner.config();
        let mut files = vec![(
            "config.yaml",
            run_yaml(&self.run, self.status.total_timesteps, cfg)?,
        )];
        files.extend(learner_files);
        files.push((
            "state.json",
            serde_json::to_vec_pretty(&state).expect("serializable"),
        ));
        write_checkpoint(dir, L::NAME, &files)?;
        Ok(())
    }
}

/// `γ (1 − done_t)` for every step of a batch laid out `[T][N]`: step `t` of env `e` ended an
/// episode when the next observation starts one (`episode_starts[t + 1]`, or `last_dones`
/// after the last step). Truncated episodes count as ended here: their reward already holds
/// `γ V(final observation)` from the runner.
pub fn discounts(buf: &RolloutBuffer, last_dones: &[f32], gamma: f64) -> Vec<f64> {
    column_discounts(&buf.episode_starts, buf.n_envs, last_dones, gamma)
}

/// [`discounts`] for `episode_starts` laid out `[T][n]`.
fn column_discounts(episode_starts: &[f32], n: usize, last_dones: &[f32], gamma: f64) -> Vec<f64> {
    let t_len = episode_starts.len() / n.max(1);
    (0..t_len * n)
        .map(|i| {
            let (t, e) = (i / n, i % n);
            let done = if t + 1 < t_len {
                episode_starts[(t + 1) * n + e]
            } else {
                last_dones[e]
            };
            gamma * (1.0 - done as f64)
        })
        .collect()
}

impl RunnerBatch {
    /// Rows of `last_obs`: one per env column, or one per chain.
    pub fn bootstrap_rows(&self) -> usize {
        self.last_dones.len()
    }
}

/// V-trace for a batch: behaviour log-probabilities from the runner, `target_logp` and
/// `values` (one per row) from the learner's current policy, `bootstrap` its values of
/// `last_obs` (one per [`bootstrap_rows`](RunnerBatch::bootstrap_rows)). Chains are
/// traced one by one, each from its own bootstrap.
#[allow(clippy::too_many_arguments)]
pub fn batch_vtrace(
    batch: &RunnerBatch,
    target_logp: &[f32],
    values: &[f32],
    bootstrap: &[f32],
    gamma: f64,
    rho_bar: f64,
    c_bar: f64,
) -> VTraceOutput {
    let buf = &batch.buffer;
    let f = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<f64>>();
    let log_rhos: Vec<f64> = target_logp
        .iter()
        .zip(&buf.log_probs)
        .map(|(&t, &b)| t as f64 - b as f64)
        .collect();
    // Rows `rows` laid out `[T][n]`, with their `last_dones` and bootstrap values.
    let trace = |rows: std::ops::Range<usize>, n: usize, last_dones: &[f32], boot: &[f32]| {
        vtrace(
            &VTraceInput {
                log_rhos: &log_rhos[rows.clone()],
                discounts: &column_discounts(
                    &buf.episode_starts[rows.clone()],
                    n,
                    last_dones,
                    gamma,
                ),
                rewards: &f(&buf.rewards[rows.clone()]),
                values: &f(&values[rows]),
                bootstrap_value: &f(boot),
            },
            n,
            rho_bar,
            c_bar,
            rho_bar,
        )
    };
    if batch.chains.is_empty() {
        return trace(0..buf.len(), buf.n_envs, &batch.last_dones, bootstrap);
    }
    let mut out = VTraceOutput {
        vs: Vec::with_capacity(buf.len()),
        pg_advantages: Vec::with_capacity(buf.len()),
        clipped_rhos: Vec::with_capacity(buf.len()),
        cs: Vec::with_capacity(buf.len()),
        deltas: Vec::with_capacity(buf.len()),
    };
    let mut start = 0;
    // Each chain is a one-column rollout of its own.
    for (c, &len) in batch.chains.iter().enumerate() {
        let o = trace(
            start..start + len,
            1,
            &batch.last_dones[c..=c],
            &bootstrap[c..=c],
        );
        out.vs.extend(o.vs);
        out.pg_advantages.extend(o.pg_advantages);
        out.clipped_rhos.extend(o.clipped_rhos);
        out.cs.extend(o.cs);
        out.deltas.extend(o.deltas);
        start += len;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch of two env columns traced as two chains (the columns one after the other)
    /// gives the same targets and advantages, row for row.
    #[test]
    fn chains_trace_like_the_columns_they_were_cut_from() {
        let (t_len, n) = (4, 2);
        let mut cols = RolloutBuffer::new(t_len, n, 1, 1);
        // Env 0 starts an episode at step 2; env 1's last step ends one.
        cols.episode_starts = vec![1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0];
        cols.rewards = vec![1.0, 0.5, -0.3, 2.0, 0.7, 0.1, 0.2, -1.0];
        cols.log_probs = vec![-0.5, -0.7, -0.1, -1.2, -0.3, -0.9, -0.4, -0.6];
        let target = [-0.4, -0.9, -0.3, -1.0, -0.2, -0.5, -0.6, -0.7];
        let values = [0.3, 0.1, -0.2, 0.4, 0.5, 0.0, 0.8, -0.1];
        let boot = [1.5, -0.5];
        let last_dones = vec![0.0, 1.0];
        let columns = RunnerBatch {
            buffer: cols.clone(),
            last_obs: vec![0.0; n],
            last_dones: last_dones.clone(),
            chains: Vec::new(),
            episodes: Vec::new(),
            seconds: 0.0,
        };
        let want = batch_vtrace(&columns, &target, &values, &boot, 0.9, 1.0, 0.8);
        // The chain layout: env 0's rows, then env 1's.
        let order: Vec<usize> = (0..n)
            .flat_map(|e| (0..t_len).map(move |t| t * n + e))
            .collect();
        let pick = |v: &[f32]| order.iter().map(|&i| v[i]).collect::<Vec<f32>>();
        let mut one = RolloutBuffer::new(t_len * n, 1, 1, 1);
        one.episode_starts = pick(&cols.episode_starts);
        one.rewards = pick(&cols.rewards);
        one.log_probs = pick(&cols.log_probs);
        let chains = RunnerBatch {
            buffer: one,
            last_obs: vec![0.0; n],
            last_dones,
            chains: vec![t_len; n],
            episodes: Vec::new(),
            seconds: 0.0,
        };
        let got = batch_vtrace(
            &chains,
            &pick(&target),
            &pick(&values),
            &boot,
            0.9,
            1.0,
            0.8,
        );
        for (k, &i) in order.iter().enumerate() {
            assert!((got.vs[k] - want.vs[i]).abs() < 1e-12, "row {k}");
            assert!((got.pg_advantages[k] - want.pg_advantages[i]).abs() < 1e-12);
            assert!((got.clipped_rhos[k] - want.clipped_rhos[i]).abs() < 1e-12);
        }
    }

    #[test]
    fn actor_learner_keys_are_the_documented_list_and_checked() {
        // The one list of the keys IMPALA and APPO share, with their aliases, as serde reads them.
        assert_eq!(
            rl_training_core::config::accepted_keys::<ActorLearnerKeys>(),
            [
                "num_envs_per_env_runner",
                "num_envs_per_worker",
                "learner_queue_size",
                "learner_queue_timeout",
                "broadcast_interval",
                "max_policy_lag",
                "lockstep",
                "vtrace_clip_rho",
                "vtrace_clip_rho_threshold",
                "vtrace_clip_c",
                "vtrace_clip_c_threshold",
                "policy_kwargs",
            ]
        );
        let bad = ActorLearnerKeys {
            vtrace_clip_c: 0.0,
            ..ActorLearnerKeys::default()
        };
        assert_eq!(
            bad.validate().unwrap_err().field,
            "algo_kwargs.vtrace_clip_c"
        );
        assert!(ActorLearnerKeys::default().validate().is_ok());
    }
}
