//! Env runners that fill the learner's replay, Ape-X style (`num_env_runners` ≥ 1 in DQN or
//! SAC): each runner steps its share of the run's envs with the latest weights it has and
//! sends [`TransitionChunk`]s of `rollout_fragment_length` vector steps; the learner stores
//! them, does the gradient steps due for the env steps they hold (the same ratio as the
//! config gives in process) and publishes its weights after each iteration that changed
//! them. In process the runners take turns ([`ApexRunners::Lockstep`], checkpointed); with
//! `rl train --broker` they are `rl runner` processes ([`serve_apex_runner`]), acting
//! asynchronously with whatever version they last fetched.
//!
//! The learner's replay is [`linked`](rl_training_core::replay::Replay::linked): transitions of all
//! runners' envs arrive interleaved, and each names its env's previous one, so n-step returns
//! never sum across envs. A chunk carries its runner's count of chunks since its envs were
//! (re)started; a gap (a runner restarted, a chunk dropped) breaks the links, never joins two
//! episodes.
//!
//! The weights' version is the learner's env-step count when it published them, so a
//! runner's schedules (DQN's ε, random actions before `learning_starts`) follow the
//! learner's progress.

use crate::agent::{ActMode, OffPolicyActor, OffPolicyLearner, random_actions};
use crate::{Collector, CollectorState, TransitionSink};
use rl_training_broker::{
    Broker, BrokerLink, Reader, RemoteRunners, ServeSummary, UsedBatches, Wire, Writer,
    serve_batches,
};
use rl_training_core::actor_learner::{Runner, Transport, Versioned};
use rl_training_core::agent::EnvMaker;
use rl_training_core::algorithm::Progress;
use rl_training_core::burn::tensor::Device;
use rl_training_core::config::{AlgoConfig, ConfigError, RunConfig};
use rl_training_core::replay::{Replay, TransitionRef};
use rl_training_core::vec_env::{EpisodeStats, VecEnv};
use rl_training_core::{RlError, Rng, Space};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Leading bytes of an encoded [`TransitionChunk`] and its format version.
const MAGIC: &[u8; 4] = b"RLTC";
const FORMAT: u16 = 1;

/// How long the learner waits for a runner's chunk.
const RECV_TIMEOUT: Duration = Duration::from_secs(600);

/// One runner's transitions of `n_steps` vector steps of its `n_envs` envs, laid out
/// `[n_steps][n_envs]` row-major, as a replay stores them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TransitionChunk {
    /// Vector steps.
    pub n_steps: usize,
    /// Envs of the runner.
    pub n_envs: usize,
    /// Observation width (network encoding).
    pub obs_dim: usize,
    /// Stored action width.
    pub act_dim: usize,
    /// `[n × obs_dim]`.
    pub obs: Vec<f32>,
    /// `[n × act_dim]`, as the replay stores them.
    pub actions: Vec<f32>,
    /// `[n]`.
    pub rewards: Vec<f32>,
    /// `[n × obs_dim]`, the true next observation (the final one at episode ends).
    pub next_obs: Vec<f32>,
    /// `[n]`.
    pub terminated: Vec<bool>,
    /// `[n]`.
    pub truncated: Vec<bool>,
    /// Episodes that finished.
    pub episodes: Vec<EpisodeStats>,
    /// Chunks the runner sent since its envs were (re)started before this one: the learner
    /// links this chunk's transitions to the runner's previous ones only when it has that
    /// chunk, and only that one, before.
    pub index: u64,
    /// Seconds the collection took.
    pub seconds: f64,
}

impl TransitionChunk {
    /// An empty chunk for envs of these widths.
    pub fn new(n_envs: usize, obs_dim: usize, act_dim: usize) -> Self {
        Self {
            n_envs,
            obs_dim,
            act_dim,
            ..Self::default()
        }
    }

    /// Transitions held.
    pub fn len(&self) -> usize {
        self.rewards.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.rewards.is_empty()
    }
}

impl TransitionSink for TransitionChunk {
    fn add(
        &mut self,
        obs: &[f32],
        actions: &[f32],
        rewards: &[f32],
        next_obs: &[f32],
        terminated: &[bool],
        truncated: &[bool],
    ) {
        self.obs.extend_from_slice(obs);
        self.actions.extend_from_slice(actions);
        self.rewards.extend_from_slice(rewards);
        self.next_obs.extend_from_slice(next_obs);
        self.terminated.extend_from_slice(terminated);
        self.truncated.extend_from_slice(truncated);
        self.n_steps += 1;
    }
}

fn flags(v: &[bool]) -> Vec<f32> {
    v.iter().map(|&b| f32::from(u8::from(b))).collect()
}

fn unflags(v: Vec<f32>, field: &str) -> Result<Vec<bool>, String> {
    // By bits: −0.0 would not encode back to the same bytes.
    v.into_iter()
        .map(|x| match x.to_bits() {
            0 => Ok(false),
            b if b == 1.0f32.to_bits() => Ok(true),
            _ => Err(format!("{field}: {x}, expected 0 or 1")),
        })
        .collect()
}

impl Wire for TransitionChunk {
    fn encode(&self) -> Vec<u8> {
        // From the arrays' lengths: the widths of a decoded chunk may be anything.
        let values = 2 * self.obs.len() + self.actions.len() + 3 * self.len();
        let mut w = Writer::with_header(MAGIC, FORMAT, 64 + 4 * values);
        for d in [self.n_steps, self.n_envs, self.obs_dim, self.act_dim] {
            w.u64(d as u64);
        }
        w.f32s(&self.obs);
        w.f32s(&self.actions);
        w.f32s(&self.rewards);
        w.f32s(&self.next_obs);
        w.f32s(&flags(&self.terminated));
        w.f32s(&flags(&self.truncated));
        w.episodes(&self.episodes);
        w.u64(self.index);
        w.f64(self.seconds);
        w.0
    }

    fn decode(bytes: &[u8]) -> Result<Self, String> {
        let mut r = Reader::with_header(bytes, MAGIC, FORMAT, "a transition chunk")?;
        let n_steps = r.usize("n_steps")?;
        let n_envs = r.usize("n_envs")?;
        let obs_dim = r.usize("obs_dim")?;
        let act_dim = r.usize("act_dim")?;
        let n = n_steps
            .checked_mul(n_envs)
            .ok_or("n_steps × n_envs overflows")?;
        let times = |k: usize, field: &str| {
            n.checked_mul(k)
                .ok_or_else(|| format!("{field}: size overflows"))
        };
        let obs = r.f32s("obs", Some(times(obs_dim, "obs")?))?;
        let actions = r.f32s("actions", Some(times(act_dim, "actions")?))?;
        let rewards = r.f32s("rewards", Some(n))?;
        let next_obs = r.f32s("next_obs", Some(times(obs_dim, "next_obs")?))?;
        let terminated = unflags(r.f32s("terminated", Some(n))?, "terminated")?;
        let truncated = unflags(r.f32s("truncated", Some(n))?, "truncated")?;
        let episodes = r.episodes()?;
        let index = r.u64("index")?;
        let seconds = r.f64("seconds")?;
        r.finish()?;
        Ok(Self {
            n_steps,
            n_envs,
            obs_dim,
            act_dim,
            obs,
            actions,
            rewards,
            next_obs,
            terminated,
            truncated,
            episodes,
            index,
            seconds,
        })
    }
}

/// How runners collect: `num_env_runners` runners share the run's `n_envs` evenly and send
/// chunks of `rollout_fragment_length` vector steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunnerShape {
    /// Runners (0: the shell's own vector env).
    pub num_env_runners: usize,
    /// Vector steps per chunk.
    pub rollout_fragment_length: usize,
}

impl RunnerShape {
    /// Envs per runner, or an error naming the key when they do not divide evenly.
    pub fn envs_per_runner(&self, run: &RunConfig) -> Result<usize, RlError> {
        let n = self.num_env_runners;
        if n == 0 || !run.n_envs.is_multiple_of(n) {
            return Err(RlError::Config(ConfigError::new(
                "algo_kwargs.num_env_runners",
                format!(
                    "{n} runners cannot share n_envs = {} evenly (n_envs must be a multiple of it)",
                    run.n_envs
                ),
            )));
        }
        if run.normalize.obs || run.normalize.reward {
            // Each runner's envs would keep statistics of their own.
            return Err(RlError::Config(ConfigError::new(
                "normalize",
                "observation or reward normalization is not available with num_env_runners",
            )));
        }
        Ok(run.n_envs / n)
    }

    /// Chunks the run's queue holds (the learner and the runner processes open the queue
    /// with this size): two per runner and two more, so runners act at most a few chunks
    /// ahead of the learner.
    pub fn queue_size(&self) -> usize {
        2 * self.num_env_runners + 2
    }
}

/// What a checkpoint keeps of a lockstep runner.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ApexRunnerState {
    /// Envs and last observations.
    pub collector: CollectorState,
    /// Exploration draws.
    pub rng: Rng,
    /// Chunks sent since the envs started.
    pub index: u64,
}

/// One runner: its share of the envs, its own exploration generator, and an acting copy
/// of the weights it last received.
pub struct ApexRunner<L: OffPolicyLearner> {
    cfg: L::Config,
    spaces: (Space, Space),
    collector: Collector,
    rng: Rng,
    reseed: Rng,
    actor: Option<(u64, L::Actor)>,
    device: Device,
    fragment: usize,
    learning_starts: u64,
    total_timesteps: u64,
    index: u64,
}

impl<L: OffPolicyLearner> ApexRunner<L> {
    /// Runner `index` of `run` with `num_envs` envs, acting on the inference `device`.
    pub fn new(
        run: &RunConfig,
        make_env: EnvMaker<'_>,
        cfg: L::Config,
        num_envs: usize,
        index: usize,
        device: Device,
    ) -> Result<Self, RlError> {
        let envs = (0..num_envs)
            .map(|_| make_env(run))
            .collect::<Result<Vec<_>, _>>()?;
        let venv = VecEnv::new(envs)?;
        let spaces = (
            venv.observation_space().clone(),
            venv.action_space().clone(),
        );
        let mut reseed = Rng::for_stream(run.seed, &format!("env-runner-{index}"));
        let collector = Collector::new(venv, reseed.next_seed() >> 16)?;
        let s = L::settings(&cfg);
        Ok(Self {
            fragment: s.runners.rollout_fragment_length,
            learning_starts: s.frequency.learning_starts,
            total_timesteps: run.total_timesteps,
            cfg,
            spaces,
            collector,
            rng: Rng::for_stream(run.seed, &format!("runner-policy-{index}")),
            reseed,
            actor: None,
            device,
            index: 0,
        })
    }

    /// What a checkpoint keeps.
    pub fn state(&self) -> Result<ApexRunnerState, RlError> {
        Ok(ApexRunnerState {
            collector: self.collector.state()?,
            rng: self.rng.clone(),
            index: self.index,
        })
    }

    /// Restores what [`state`](Self::state) saved.
    pub fn restore(&mut self, st: ApexRunnerState) -> Result<(), RlError> {
        self.collector.restore(&st.collector)?;
        self.rng = st.rng;
        self.index = st.index;
        Ok(())
    }

    /// The envs' normalization statistics.
    pub fn env_stats(&self) -> Vec<serde_json::Value> {
        self.collector.env.save_stats()
    }
}

impl<L: OffPolicyLearner> Runner for ApexRunner<L>
where
    L::Config: Send,
    L::Actor: Send,
{
    type Batch = TransitionChunk;

    /// `rollout_fragment_length` vector steps with the actor of `w` (rebuilt when the
    /// version changed); uniform random actions while the learner's step count (the version)
    /// plus this chunk's steps is below `learning_starts`.
    fn collect(&mut self, w: &Versioned) -> Result<(u64, TransitionChunk), RlError> {
        let t0 = Instant::now();
        if self.actor.as_ref().is_none_or(|(v, _)| *v != w.version) {
            let spaces = (&self.spaces.0, &self.spaces.1);
            let actor = L::actor_from_weights(&self.cfg, spaces, &w.weights, &self.device)?;
            self.actor = Some((w.version, actor));
        }
        let (_, actor) = self.actor.as_ref().expect("set above");
        let n = self.collector.num_envs();
        let obs_dim = self.spaces.0.flat_dim();
        let act_dim = L::stored_action_dim(&self.spaces.1)
            .map_err(|e| RlError::Config(ConfigError::new("env", e)))?;
        let mut chunk = TransitionChunk::new(n, obs_dim, act_dim);
        for i in 0..self.fragment {
            let t = w.version + (i * n) as u64;
            let (env_a, stored) = if t < self.learning_starts {
                random_actions(&self.spaces.1, n, &mut self.rng)
            } else {
                let p = Progress {
                    num_timesteps: t,
                    total_timesteps: self.total_timesteps,
                    iteration: 0,
                };
                let obs = self.collector.obs().to_vec();
                actor.act(&obs, n, &mut self.rng, ActMode::Explore, &p)
            };
            let eps = self.collector.step(&env_a, &stored, &mut chunk)?;
            chunk.episodes.extend(eps);
        }
        chunk.index = self.index;
        self.index += 1;
        chunk.seconds = t0.elapsed().as_secs_f64();
        Ok((w.version, chunk))
    }

    fn reset(&mut self) -> Result<(), RlError> {
        self.collector.reset(self.reseed.next_seed() >> 16)?;
        self.index = 0;
        self.actor = None;
        Ok(())
    }
}

/// Where a runner's transitions left off in the learner's replay.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChunkLinks {
    /// The chunk index expected next from this runner.
    pub next_index: u64,
    /// Per env, the replay write number of its last transition (none after an episode end).
    pub last: Vec<Option<u64>>,
}

/// Where every runner's transitions left off in the learner's replay, by runner id.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ReplayLinks(pub BTreeMap<u32, ChunkLinks>);

impl ReplayLinks {
    /// Stores `chunk` of `runner` in `replay`, each transition linked to its env's previous
    /// one when the runner's previous chunk was the last one stored from it (an episode's
    /// end is linked to nothing). Returns how many transitions it held, or why a chunk whose
    /// widths do not fit the replay was refused.
    pub fn store(
        &mut self,
        runner: u32,
        chunk: &TransitionChunk,
        replay: &mut Replay,
    ) -> Result<usize, String> {
        let c = replay.config();
        if chunk.n_envs == 0 || (chunk.obs_dim, chunk.act_dim) != (c.obs_dim, c.act_dim) {
            return Err(format!(
                "chunk of runner {runner}: {} envs, observations of {} and actions of {} values; \
                 the replay stores observations of {} and actions of {}",
                chunk.n_envs, chunk.obs_dim, chunk.act_dim, c.obs_dim, c.act_dim
            ));
        }
        let k = chunk.n_envs;
        let links = self.0.entry(runner).or_default();
        if chunk.index != links.next_index || links.last.len() != k {
            links.last = vec![None; k];
        }
        links.next_index = chunk.index.wrapping_add(1);
        let (od, ad) = (chunk.obs_dim, chunk.act_dim);
        for i in 0..chunk.len() {
            let t = TransitionRef {
                obs: &chunk.obs[i * od..(i + 1) * od],
                action: &chunk.actions[i * ad..(i + 1) * ad],
                reward: chunk.rewards[i],
                next_obs: &chunk.next_obs[i * od..(i + 1) * od],
                terminated: chunk.terminated[i],
                truncated: chunk.truncated[i],
            };
            let e = i % k;
            let write = replay.add_after(t, links.last[e]);
            links.last[e] = (!(t.terminated || t.truncated)).then_some(write);
        }
        Ok(chunk.len())
    }
}

/// What a checkpoint keeps of an [`ApexRunners`].
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ApexState {
    /// Links per runner id.
    pub links: ReplayLinks,
    /// The last version published.
    pub version: Option<u64>,
    /// Lockstep runners' states.
    #[serde(default)]
    pub lockstep: Vec<ApexRunnerState>,
    /// The lockstep runner whose turn is next.
    #[serde(default)]
    pub next: usize,
    /// Chunks taken from the broker (by runner and sequence; redeliveries skipped).
    #[serde(default)]
    pub used: Option<UsedBatches>,
}

/// Where the chunks come from.
pub enum ApexSource<L: OffPolicyLearner> {
    /// Runners in process, called in turn.
    Lockstep {
        /// The runners.
        runners: Vec<ApexRunner<L>>,
        /// Whose turn is next.
        next: usize,
        /// The weights they act with.
        weights: Option<Versioned>,
    },
    /// Runner processes over a broker.
    Remote(Box<RemoteRunners<TransitionChunk>>),
}

/// The learner's side of Ape-X runners: where chunks come from, how they link into the
/// replay, the weights published to them.
pub struct ApexRunners<L: OffPolicyLearner> {
    /// The source.
    pub source: ApexSource<L>,
    /// Envs per runner.
    pub envs_per_runner: usize,
    links: ReplayLinks,
    version: Option<u64>,
    /// The newest version in the broker's bucket when the learner started (a learner that
    /// died may have published versions after its last checkpoint).
    floor: u64,
}

impl<L: OffPolicyLearner> ApexRunners<L>
where
    L::Config: Send,
    L::Actor: Send,
{
    /// `shape.num_env_runners` runners of `run` in process.
    pub fn lockstep(
        run: &RunConfig,
        make_env: EnvMaker<'_>,
        cfg: &L::Config,
        shape: RunnerShape,
        infer: &Device,
    ) -> Result<Self, RlError> {
        let k = shape.envs_per_runner(run)?;
        let runners = (0..shape.num_env_runners)
            .map(|i| ApexRunner::new(run, make_env, cfg.clone(), k, i, infer.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            source: ApexSource::Lockstep {
                runners,
                next: 0,
                weights: None,
            },
            envs_per_runner: k,
            links: ReplayLinks::default(),
            version: None,
            floor: 0,
        })
    }

    /// The learner's side of runner processes that join `link`'s broker (with
    /// [`serve_apex_runner`]).
    pub fn remote(run: &RunConfig, shape: RunnerShape, link: &BrokerLink) -> Result<Self, RlError> {
        let k = shape.envs_per_runner(run)?;
        let placeholder = Versioned {
            version: 0,
            weights: Default::default(),
        };
        let runners = RemoteRunners::start(link, run, shape.queue_size(), placeholder)?;
        let floor = runners.transport.latest().version;
        Ok(Self {
            source: ApexSource::Remote(Box::new(runners)),
            envs_per_runner: k,
            links: ReplayLinks::default(),
            version: None,
            floor,
        })
    }

    /// Publishes `weights()` unless the runners have weights from this learner: a fresh
    /// run's at version `num_timesteps`; restored lockstep runners get the checkpoint's
    /// version again (a resumed run acts as the uninterrupted one).
    pub fn ensure_published(
        &mut self,
        num_timesteps: u64,
        weights: impl FnOnce() -> rl_training_core::params::TensorMap,
    ) {
        match &mut self.source {
            ApexSource::Lockstep { weights: w, .. } if w.is_none() => {
                let version = *self.version.get_or_insert(num_timesteps);
                *w = Some(Versioned {
                    version,
                    weights: weights(),
                });
            }
            ApexSource::Remote(_) if self.version.is_none() => {
                self.publish(num_timesteps, weights())
            }
            _ => {}
        }
    }

    /// Makes `weights` the runners' weights, as the version for a learner at `num_timesteps`
    /// (above any published before, this learner's or a dead one's).
    pub fn publish(&mut self, num_timesteps: u64, weights: rl_training_core::params::TensorMap) {
        let above = self.version.map_or(self.floor, |v| v.max(self.floor)) + 1;
        let version = if self.version.is_none() && self.floor == 0 {
            num_timesteps
        } else {
            num_timesteps.max(above)
        };
        self.version = Some(version);
        let w = Versioned { version, weights };
        match &mut self.source {
            ApexSource::Lockstep { weights, .. } => *weights = Some(w),
            ApexSource::Remote(r) => r.transport.publish(Arc::new(w)),
        }
    }

    /// The next chunk: the next lockstep runner's, or one from the broker; with its runner.
    pub fn next_chunk(&mut self) -> Result<(u32, TransitionChunk), RlError> {
        let (runner, chunk) = match &mut self.source {
            ApexSource::Lockstep {
                runners,
                next,
                weights,
            } => {
                let w = weights
                    .as_ref()
                    .ok_or_else(|| RlError::Other("no weights published to the runners".into()))?;
                let i = *next;
                *next = (i + 1) % runners.len();
                (i as u32, runners[i].collect(w)?.1)
            }
            ApexSource::Remote(r) => {
                let t = r.transport.recv(RECV_TIMEOUT).ok_or_else(|| {
                    RlError::Other(format!(
                        "no transition chunk arrived within {} s (start runners with \
                         `rl runner --broker URL --run {}`)",
                        RECV_TIMEOUT.as_secs(),
                        r.run_id
                    ))
                })?;
                (t.runner as u32, t.batch)
            }
        };
        if chunk.n_envs != self.envs_per_runner {
            return Err(RlError::Other(format!(
                "chunk of runner {runner}: {} envs, the run's runners have {} each",
                chunk.n_envs, self.envs_per_runner
            )));
        }
        Ok((runner, chunk))
    }

    /// Stores `chunk` of `runner` in `replay` (see [`ReplayLinks::store`]).
    pub fn store(
        &mut self,
        runner: u32,
        chunk: &TransitionChunk,
        replay: &mut Replay,
    ) -> Result<usize, RlError> {
        self.links
            .store(runner, chunk, replay)
            .map_err(RlError::Other)
    }

    /// Runner processes restarted (0 in process).
    pub fn restarts(&self) -> u64 {
        match &self.source {
            ApexSource::Lockstep { .. } => 0,
            ApexSource::Remote(r) => r.restarts.load(Ordering::SeqCst),
        }
    }

    /// Normalization statistics of the first lockstep runner's envs.
    pub fn env_stats(&self) -> Option<Vec<serde_json::Value>> {
        match &self.source {
            ApexSource::Lockstep { runners, .. } => Some(runners[0].env_stats()),
            ApexSource::Remote(_) => None,
        }
    }

    /// What a checkpoint keeps.
    pub fn state(&self) -> Result<ApexState, RlError> {
        let mut s = ApexState {
            links: self.links.clone(),
            version: self.version,
            ..ApexState::default()
        };
        match &self.source {
            ApexSource::Lockstep { runners, next, .. } => {
                s.lockstep = runners
                    .iter()
                    .map(ApexRunner::state)
                    .collect::<Result<_, _>>()?;
                s.next = *next;
            }
            ApexSource::Remote(r) => s.used = Some(r.transport.used()),
        }
        Ok(s)
    }

    /// Restores what [`state`](Self::state) saved; `file` names the checkpoint file.
    pub fn restore(&mut self, s: ApexState, file: &str) -> Result<(), RlError> {
        self.links = s.links;
        match &mut self.source {
            ApexSource::Lockstep { runners, next, .. } => {
                if s.lockstep.len() != runners.len() {
                    return Err(RlError::Config(ConfigError::new(
                        file,
                        format!(
                            "holds {} env runners, the run has {}",
                            s.lockstep.len(),
                            runners.len()
                        ),
                    )));
                }
                for (r, st) in runners.iter_mut().zip(s.lockstep) {
                    r.restore(st)?;
                }
                *next = s.next % runners.len();
                // Published again from the restored learner, with this version.
                self.version = s.version;
            }
            ApexSource::Remote(r) => {
                if let Some(used) = s.used {
                    r.transport.set_used(used);
                }
                self.floor = self.floor.max(s.version.unwrap_or(0));
            }
        }
        Ok(())
    }
}

/// A runner process's loop for an Ape-X run (DQN, SAC with `num_env_runners`) that `broker`
/// belongs to, whose config `run` came from the run's info: chunks of its share of the envs,
/// acting with the latest weights, until the run is over ([`serve_batches`]).
pub fn serve_apex_runner<L: OffPolicyLearner>(
    broker: &Broker,
    run: &RunConfig,
    make_env: EnvMaker<'_>,
    device: &Device,
    stop: &AtomicBool,
) -> Result<ServeSummary, RlError>
where
    L::Config: Send,
    L::Actor: Send,
{
    let cfg = L::Config::from_kwargs(&run.algo_kwargs).map_err(RlError::Config)?;
    let shape = L::settings(&cfg).runners;
    let k = shape.envs_per_runner(run)?;
    serve_batches(broker, shape.queue_size(), false, stop, |id| {
        ApexRunner::<L>::new(run, make_env, cfg, k, id as usize, device.clone())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk() -> TransitionChunk {
        let mut c = TransitionChunk::new(2, 3, 1);
        for s in 0..2 {
            let o: Vec<f32> = (0..6).map(|i| (s * 6 + i) as f32).collect();
            c.add(
                &o,
                &[s as f32, 1.0],
                &[1.0, -0.5],
                &o.iter().map(|x| x + 0.5).collect::<Vec<_>>(),
                &[false, s == 1],
                &[s == 1, false],
            );
        }
        c.episodes.push(EpisodeStats {
            env: 1,
            ret: 3.0,
            len: 3,
        });
        c.index = 7;
        c.seconds = 0.25;
        c
    }

    #[test]
    fn a_chunk_survives_the_wire_bit_for_bit() {
        let c = chunk();
        let back = TransitionChunk::decode(&c.encode()).unwrap();
        assert_eq!(back, c);
        assert_eq!(back.encode(), c.encode());
    }

    #[test]
    fn the_fuzz_seed_is_a_chunk_that_encodes_back_to_its_bytes() {
        let seed = include_bytes!("../../../../fuzz/corpus/broker/chunk_cartpole_2x1.bin");
        let c = TransitionChunk::decode(seed).unwrap();
        assert_eq!((c.n_steps, c.n_envs, c.obs_dim, c.len()), (2, 1, 4, 2));
        assert_eq!((c.terminated.clone(), c.index), (vec![false, true], 3));
        assert_eq!(c.encode(), seed.to_vec());
    }

    #[test]
    fn a_chunk_of_absurd_widths_encodes_back_without_overflow() {
        // Found by the broker fuzz target: no rows, an obs_dim near 2^63.
        let seed = include_bytes!("../../../../fuzz/corpus/broker/chunk_capacity_overflow.bin");
        let c = TransitionChunk::decode(seed).unwrap();
        assert_eq!(c.encode(), seed.to_vec());
    }

    #[test]
    fn a_malformed_chunk_is_an_error_naming_the_field() {
        let bytes = chunk().encode();
        let e = TransitionChunk::decode(&bytes[..bytes.len() - 2]).unwrap_err();
        assert!(e.contains("seconds"), "{e}");
        let e = TransitionChunk::decode(b"RLRB\x01\x00").unwrap_err();
        assert!(e.contains("RLTC"), "{e}");
        let mut more = bytes.clone();
        more.push(0);
        assert!(
            TransitionChunk::decode(&more)
                .unwrap_err()
                .contains("after")
        );
        // n_steps claims 2^40 rows: refused before anything is allocated.
        let mut huge = bytes.clone();
        huge[6..14].copy_from_slice(&(1u64 << 40).to_le_bytes());
        assert!(TransitionChunk::decode(&huge).unwrap_err().contains("obs"));
        let e = unflags(vec![0.0, 0.5], "terminated").unwrap_err();
        assert!(e.contains("terminated: 0.5"), "{e}");
        assert!(unflags(vec![-0.0], "truncated").is_err());
    }

    /// A chunk of `steps` vector steps of 2 envs: env `e`'s reward at step `s` is
    /// `10·e + s + 1 + 100·base`, nothing ends.
    fn rewards_chunk(steps: usize, base: usize, index: u64) -> TransitionChunk {
        let mut c = TransitionChunk::new(2, 1, 1);
        for s in 0..steps {
            let r: Vec<f32> = (0..2)
                .map(|e| (10 * e + s + 1 + 100 * base) as f32)
                .collect();
            c.add(
                &[0.0, 0.0],
                &[0.0, 0.0],
                &r,
                &[0.0, 0.0],
                &[false; 2],
                &[false; 2],
            );
        }
        c.index = index;
        c
    }

    #[test]
    fn chunks_link_per_env_across_runners_and_a_gap_breaks_the_links() {
        use rl_training_core::replay::{NStep, ReplayConfig};
        let mut replay = Replay::new(ReplayConfig {
            capacity: 64,
            n_envs: 1,
            obs_dim: 1,
            act_dim: 1,
            n_step: NStep::Fixed(3),
            prioritized: None,
        })
        .linked();
        let mut r = ReplayLinks::default();
        // Runner 0's chunk 0, runner 1's chunk 0, runner 0's chunk 1, runner 1's chunk 3.
        r.store(0, &rewards_chunk(2, 0, 0), &mut replay).unwrap();
        r.store(1, &rewards_chunk(2, 5, 0), &mut replay).unwrap();
        r.store(0, &rewards_chunk(2, 1, 1), &mut replay).unwrap();
        r.store(1, &rewards_chunk(2, 6, 3), &mut replay).unwrap();
        // The successors of each stored transition: writes are numbered in order.
        let succ = |j: usize| replay.successor(j);
        // Runner 0, env 0: writes 0, 2 (chunk 0), then 8, 10 (chunk 1): linked across.
        assert_eq!(succ(0), Some(2));
        assert_eq!(succ(2), Some(8));
        assert_eq!(succ(8), Some(10));
        // Runner 0, env 1: 1 → 3 → 9 → 11.
        assert_eq!((succ(1), succ(3), succ(9)), (Some(3), Some(9), Some(11)));
        // Runner 1: 4 → 6 (env 0), 5 → 7 (env 1); its chunk 3 does not follow chunk 0.
        assert_eq!((succ(4), succ(5)), (Some(6), Some(7)));
        assert_eq!((succ(6), succ(7)), (None, None));
        assert_eq!(succ(12), Some(14));
    }

    #[test]
    fn an_episode_end_is_not_linked_to_the_next_episode() {
        use rl_training_core::replay::{NStep, ReplayConfig};
        let mut replay = Replay::new(ReplayConfig {
            capacity: 16,
            n_envs: 1,
            obs_dim: 1,
            act_dim: 1,
            n_step: NStep::Fixed(3),
            prioritized: None,
        })
        .linked();
        let mut r = ReplayLinks::default();
        let mut c = rewards_chunk(2, 0, 0);
        c.truncated[0] = true; // env 0 ends at step 0
        r.store(0, &c, &mut replay).unwrap();
        assert_eq!(replay.successor(0), None);
        assert_eq!(replay.successor(1), Some(3));
        // A chunk of other widths is refused, naming them.
        let mut wide = rewards_chunk(1, 0, 1);
        wide.obs_dim = 3;
        let e = r.store(0, &wide, &mut replay).unwrap_err();
        assert!(
            e.contains("observations of 3") && e.contains("stores observations of 1"),
            "{e}"
        );
    }
}
