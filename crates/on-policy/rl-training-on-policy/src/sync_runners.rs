//! Synchronous env runners of the on-policy shell (`num_env_runners` ≥ 1 in PPO, A2C or TRPO):
//! every iteration each runner collects one rollout of its share of the run's envs with the
//! same published weights, and the shell joins the rollouts in runner order into one
//! (RLlib's synchronous sampling). In process the runners take turns ([`SyncRunners::Lockstep`]);
//! with `rl train --broker` they are processes ([`SyncRunners::Remote`]), and because a
//! runner's envs and generators depend only on its index, both give the same batches.

use crate::actor_learner::{EnvRunner, RunnerBatch, RunnerSettings, RunnerState, restore_runners};
use crate::agent::RolloutSettings;
use crate::remote::RemoteRunners;
use crate::rollout::RolloutPolicy;
use rl_training_broker::BrokerLink;
use rl_training_core::RlError;
use rl_training_core::actor_learner::{Runner, Transport, Versioned};
use rl_training_core::agent::EnvMaker;
use rl_training_core::burn::module::Module;
use rl_training_core::burn::tensor::Device;
use rl_training_core::config::{ConfigError, RunConfig};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the learner waits for the runners' rollouts of one iteration.
const GATHER_TIMEOUT: Duration = Duration::from_secs(600);

/// What each of `rs.num_env_runners` runners collects per iteration: `n_steps` of
/// `run.n_envs / num_env_runners` envs (an error when that does not divide evenly).
pub fn runner_settings(rs: &RolloutSettings, run: &RunConfig) -> Result<RunnerSettings, RlError> {
    let n = rs.num_env_runners;
    if n == 0 || !run.n_envs.is_multiple_of(n) {
        return Err(RlError::Config(ConfigError::new(
            "algo_kwargs.num_env_runners",
            format!(
                "{n} runners cannot share n_envs = {} evenly (n_envs must be a multiple of it)",
                run.n_envs
            ),
        )));
    }
    Ok(RunnerSettings {
        n_steps: rs.n_steps,
        num_envs: run.n_envs / n,
        gamma: rs.gamma,
        gae_lambda: rs.gae_lambda,
        sde_sample_freq: rs.sde_sample_freq.unwrap_or(-1),
    })
}

/// Batches the run's queue holds for `num_env_runners` synchronous runners: an iteration's
/// rollouts and room for stale ones (the learner and the runner processes open the queue
/// with the same size).
pub fn sync_queue_size(num_env_runners: usize) -> usize {
    2 * num_env_runners + 2
}

/// The runners of a synchronous on-policy run.
pub enum SyncRunners<P> {
    /// In process, called in turn by the learner.
    Lockstep(Vec<EnvRunner<P>>),
    /// Runner processes over a broker.
    Remote {
        /// The learner's side of the broker.
        runners: Box<RemoteRunners>,
        /// Rollouts per iteration (the config's `num_env_runners`).
        count: usize,
        /// Envs per rollout.
        envs_per_runner: usize,
        /// Batches of an older version (a runner that was slow or acted for a learner that
        /// died) dropped so far.
        stale: u64,
    },
}

impl<P: RolloutPolicy + Module> SyncRunners<P> {
    /// `rs.num_env_runners` runners of `run` acting with copies of `policy` (on `infer`).
    pub fn lockstep(
        run: &RunConfig,
        make_env: EnvMaker<'_>,
        rs: &RolloutSettings,
        policy: &P,
        infer: &Device,
    ) -> Result<Self, RlError> {
        let s = runner_settings(rs, run)?;
        let runners = (0..rs.num_env_runners)
            .map(|i| EnvRunner::new(run, make_env, s, i, policy.clone(), infer.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(SyncRunners::Lockstep(runners))
    }

    /// The learner's side of runner processes that join `link`'s broker (with
    /// [`serve_sync_runner`](crate::remote::serve_sync_runner)).
    pub fn remote(
        run: &RunConfig,
        rs: &RolloutSettings,
        link: &BrokerLink,
    ) -> Result<Self, RlError> {
        let s = runner_settings(rs, run)?;
        let count = rs.num_env_runners;
        let placeholder = Versioned {
            version: 0,
            weights: Default::default(),
        };
        let runners = RemoteRunners::start(link, run, sync_queue_size(count), placeholder)?;
        Ok(SyncRunners::Remote {
            runners: Box::new(runners),
            count,
            envs_per_runner: s.num_envs,
            stale: 0,
        })
    }

    /// The newest version in the broker's weights bucket (a learner that died may have
    /// published versions after its last checkpoint; 0 in process or when none).
    pub fn published_version(&self) -> u64 {
        match self {
            SyncRunners::Lockstep(_) => 0,
            SyncRunners::Remote { runners, .. } => runners.transport.latest().version,
        }
    }

    /// One rollout per runner, in runner order, all collected with `w`.
    pub fn gather(&mut self, w: Versioned) -> Result<Vec<RunnerBatch>, RlError> {
        match self {
            SyncRunners::Lockstep(runners) => runners
                .iter_mut()
                .map(|r| r.collect(&w).map(|(_, b)| b))
                .collect(),
            SyncRunners::Remote {
                runners,
                count,
                envs_per_runner,
                stale,
            } => {
                let version = w.version;
                runners.transport.publish(Arc::new(w));
                let deadline = Instant::now() + GATHER_TIMEOUT;
                // By runner id: the order of the envs in the joined rollout.
                let mut got = BTreeMap::new();
                while got.len() < *count {
                    let left = deadline.saturating_duration_since(Instant::now());
                    let t = runners.transport.recv(left).ok_or_else(|| {
                        RlError::Other(format!(
                            "{} of {count} rollouts of version {version} arrived within {} s \
                             (start runners with `rl runner --broker URL --run {}`)",
                            got.len(),
                            GATHER_TIMEOUT.as_secs(),
                            runners.run_id
                        ))
                    })?;
                    if t.version != version {
                        *stale += 1;
                        continue;
                    }
                    let b = &t.batch.buffer;
                    if b.n_envs != *envs_per_runner || !t.batch.chains.is_empty() {
                        return Err(RlError::Other(format!(
                            "rollout of runner {}: {} envs, the run's runners have {} each",
                            t.runner, b.n_envs, envs_per_runner
                        )));
                    }
                    got.entry(t.runner).or_insert(t.batch);
                }
                Ok(got.into_values().collect())
            }
        }
    }

    /// Lockstep runners' states for a checkpoint (none for runner processes).
    pub fn states(&self) -> Result<Vec<RunnerState>, RlError> {
        match self {
            SyncRunners::Lockstep(runners) => runners.iter().map(EnvRunner::state).collect(),
            SyncRunners::Remote { .. } => Ok(Vec::new()),
        }
    }

    /// Restores what [`states`](Self::states) saved; `file` names the checkpoint file.
    pub fn restore(&mut self, states: Vec<RunnerState>, file: &str) -> Result<(), RlError> {
        match self {
            SyncRunners::Lockstep(runners) => restore_runners(runners, states, file),
            SyncRunners::Remote { .. } => Ok(()),
        }
    }

    /// Normalization statistics of the first lockstep runner's envs.
    pub fn env_stats(&self) -> Option<Vec<serde_json::Value>> {
        match self {
            SyncRunners::Lockstep(r) => Some(r[0].collector.env.save_stats()),
            SyncRunners::Remote { .. } => None,
        }
    }
}
