//! Evolution strategies with workers in other processes, over the NATS broker (rl-training-broker).
//!
//! Each iteration the learner posts a [`Generation`] (the parameters, the perturbations'
//! noise offsets, σ, the env seeds' base and the observation statistics) in the run's
//! generations bucket and one task per episode on the run's task queue; worker processes
//! ([`serve_worker`]) take tasks, run the episode and send its return, length and
//! observation moments to the results queue; the learner puts them back in task order. A task
//! names everything its episode depends on (the noise table is rebuilt from the run seed by
//! every worker), so the results, and the run, are the same as with in-process workers,
//! whichever process ran what. A worker that dies leaves its task unacked: the broker hands it
//! to another after [`TASK_ACK_WAIT`].

use crate::core::{Strategy, flat_policy};
use crate::noise::NoiseTable;
use crate::policy::ObsStats;
use crate::pool::{Episode, episode};
use rl_training_broker::{
    BatchMeta, BatchQueue, Broker, BrokerError, BrokerLink, Queue, RunInfo, RunPost, ServeSummary,
    WeightsBucket,
};
use rl_training_core::RlError;
use rl_training_core::agent::EnvMaker;
use rl_training_core::config::{AlgoConfig, RunConfig};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The learner's tasks, read by the workers.
pub const TASKS: Queue = Queue {
    stream: "ES_TASKS",
    consumer: "workers",
};

/// The workers' results, read by the learner.
pub const RESULTS: Queue = Queue {
    stream: "ES_RESULTS",
    consumer: "learner",
};

/// A task taken by a worker that dies goes to another after this long.
pub const TASK_ACK_WAIT: Duration = Duration::from_secs(10);

/// Messages a queue holds at most (tasks of a generation are sent at once).
const QUEUE_CAPACITY: usize = 1 << 20;

/// How long the learner waits for a generation's results.
const GENERATION_TIMEOUT: Duration = Duration::from_secs(600);

/// One iteration's population as tasks: task `i` is candidate `i / per` (pair `k = candidate /
/// signs`, `−σ` for the second sign) and its episode `i % per`, on env seed
/// `base + k·per + episode` for both signs, so the two signs of a pair meet the same starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Generation {
    /// The parameters θ.
    pub theta: Vec<f32>,
    /// Noise offsets of the perturbations.
    pub offsets: Vec<usize>,
    /// Noise scale σ.
    pub sigma: f64,
    /// Evaluate `θ − σε` too.
    pub antithetic: bool,
    /// Episodes per candidate.
    pub per: usize,
    /// Base of the env seeds.
    pub base: u64,
}

impl Generation {
    /// Candidates per perturbation.
    pub fn signs(&self) -> usize {
        if self.antithetic { 2 } else { 1 }
    }

    /// Episodes to run.
    pub fn n_tasks(&self) -> usize {
        self.offsets.len() * self.signs() * self.per
    }

    /// Task `i`'s parameters and env seed.
    pub fn task(&self, noise: &NoiseTable, i: usize) -> (Vec<f32>, u64) {
        let (c, j) = (i / self.per, i % self.per);
        let signs = self.signs();
        let (k, neg) = (c / signs, c % signs == 1);
        let eps = noise.slice(self.offsets[k], self.theta.len());
        let s = if neg { -self.sigma } else { self.sigma } as f32;
        let p: Vec<f32> = self.theta.iter().zip(eps).map(|(t, e)| t + s * e).collect();
        (p, self.base.wrapping_add((k * self.per + j) as u64))
    }
}

/// What the generations bucket holds: a generation and the statistics its episodes
/// normalize observations with.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Posted {
    generation: Generation,
    stats: ObsStats,
}

/// A worker's answer to a task.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Answer {
    index: usize,
    /// The episode (return, length, observation moments), or the env's error.
    result: Result<(f64, usize, Vec<f64>, Vec<f64>), String>,
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The learner's side: the run's info for workers to join (while it lives: dropping it posts
/// that the run is over and the workers exit), the generations bucket, the task and result
/// queues.
pub struct RemoteWorkers {
    post: RunPost,
    generations: WeightsBucket,
    tasks: BatchQueue,
    results: BatchQueue,
    /// Worker processes restarted (by a local supervisor; shared with it).
    pub restarts: Arc<AtomicU64>,
    run_id: String,
    last_id: u64,
}

impl std::fmt::Debug for RemoteWorkers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteWorkers")
            .field("run_id", &self.run_id)
            .field("post", &self.post)
            .finish()
    }
}

impl RemoteWorkers {
    /// Connects the learner of `run` to `link`'s broker and posts the run for workers.
    pub fn start(link: &BrokerLink, run: &RunConfig) -> Result<Self, RlError> {
        let b = &link.broker;
        let post = b.post_run(&RunInfo {
            rl_version: rl_training_broker::protocol_version(),
            algorithm: run.algorithm.to_ascii_lowercase(),
            config_yaml: rl_training_core::runner::config_yaml(run)?,
        })?;
        // Results an earlier learner took and never acked come back at once.
        b.take_over(RESULTS)?;
        Ok(Self {
            post,
            generations: b.weights()?,
            tasks: b.queue(TASKS, QUEUE_CAPACITY, TASK_ACK_WAIT)?,
            results: b.queue(RESULTS, QUEUE_CAPACITY, Duration::from_secs(30))?,
            restarts: link.restarts.clone(),
            run_id: b.run_id().to_string(),
            last_id: 0,
        })
    }

    /// Runs `generation`'s episodes on the workers (observations normalized with `stats`);
    /// the episodes in task order.
    pub fn run(
        &mut self,
        generation: &Generation,
        stats: &ObsStats,
    ) -> Result<Vec<Episode>, RlError> {
        // Unique per learner and increasing: results of an earlier generation (or learner)
        // never pass for this one's.
        let id = unix_ms().max(self.last_id + 1);
        self.last_id = id;
        let n = generation.n_tasks();
        let posted = Posted {
            generation: generation.clone(),
            stats: stats.clone(),
        };
        self.generations
            .put(id, &serde_json::to_vec(&posted).expect("serializable"))?;
        for i in 0..n {
            let meta = BatchMeta {
                runner: 0,
                // Unique per message within the server's duplicate window.
                seq: (id << 20) | i as u64,
                version: id,
            };
            let payload = (i as u64).to_le_bytes().to_vec();
            self.tasks
                .send(meta, payload.into(), Duration::from_secs(30))?;
        }
        let mut out: Vec<Option<Episode>> = vec![None; n];
        let mut got = 0;
        let deadline = Instant::now() + GENERATION_TIMEOUT;
        while got < n {
            if Instant::now() > deadline {
                return Err(RlError::Other(format!(
                    "{} of {n} episodes of the generation came back within {} s (are workers \
                     running? `rl runner --broker URL --run {}`)",
                    got,
                    GENERATION_TIMEOUT.as_secs(),
                    self.run_id
                )));
            }
            let d = match self.results.recv(Duration::from_secs(1)) {
                Ok(Some(d)) => d,
                Ok(None) => continue,
                Err(BrokerError::Message { .. }) => continue,
                Err(_) => {
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
            };
            // Taken: acked whatever it holds (a stale or malformed answer is dropped).
            let _ = self.results.ack(&d);
            if d.meta.version != id {
                continue;
            }
            let Ok(a) = serde_json::from_slice::<Answer>(&d.payload) else {
                continue;
            };
            if a.index >= n || out[a.index].is_some() {
                continue;
            }
            let (ret, len, obs_sum, obs_sq) = a.result.map_err(|e| {
                RlError::Other(format!(
                    "worker {}, episode {}: {e}",
                    d.meta.runner, a.index
                ))
            })?;
            out[a.index] = Some(Episode {
                ret,
                len,
                obs_sum,
                obs_sq,
            });
            got += 1;
        }
        Ok(out.into_iter().map(|e| e.expect("all filled")).collect())
    }
}

/// A worker process's loop for the run `broker` belongs to (whose config `run` came from the
/// run's [`RunInfo`]): claims an id, then runs the episodes of tasks until the learner posts
/// that the run is over or `stop` is set.
pub fn serve_worker<L: Strategy>(
    broker: &Broker,
    run: &RunConfig,
    make_env: EnvMaker<'_>,
    stop: &AtomicBool,
) -> Result<ServeSummary, RlError> {
    let cfg = L::Config::from_kwargs(&run.algo_kwargs).map_err(RlError::Config)?;
    let s = L::core_settings(&cfg);
    let mut env = make_env(run)?;
    let policy = flat_policy(run, env.as_ref(), &s)?;
    let noise = NoiseTable::new(s.noise_table_size, run.seed);
    let board = broker.board()?;
    let id = board.claim_runner_id()?;
    let tasks = broker.queue(TASKS, QUEUE_CAPACITY, TASK_ACK_WAIT)?;
    let results = broker.queue(RESULTS, QUEUE_CAPACITY, Duration::from_secs(30))?;
    let generations = broker.weights()?;
    let mut summary = ServeSummary {
        runner: id,
        ..ServeSummary::default()
    };
    let (done, finished, sent) = (
        AtomicBool::new(false),
        AtomicBool::new(false),
        AtomicU64::new(0),
    );
    let mut current: Option<(u64, Posted)> = None;
    let result = std::thread::scope(|scope| {
        scope.spawn(|| {
            board.beat_until_end(id, &sent, stop, &done, || {
                finished.store(true, Ordering::SeqCst)
            })
        });
        let r = (|| -> Result<(), RlError> {
            while !finished.load(Ordering::SeqCst) {
                let d = match tasks.recv(Duration::from_millis(500)) {
                    Ok(Some(d)) => d,
                    Ok(None) | Err(BrokerError::Message { .. }) => continue,
                    Err(_) => {
                        std::thread::sleep(Duration::from_millis(50));
                        continue;
                    }
                };
                let gen_id = d.meta.version;
                if current.as_ref().is_none_or(|(g, _)| *g != gen_id) {
                    current = match generations.latest() {
                        Ok(Some((v, bytes))) if v == gen_id => {
                            serde_json::from_slice(&bytes).ok().map(|p| (v, p))
                        }
                        _ => None,
                    };
                }
                let Some((_, posted)) = current.as_ref().filter(|(g, _)| *g == gen_id) else {
                    // A task of an older generation (or an unreadable one): nobody waits
                    // for it.
                    let _ = tasks.ack(&d);
                    continue;
                };
                let index = d
                    .payload
                    .get(..8)
                    .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")) as usize)
                    .filter(|&i| i < posted.generation.n_tasks());
                let Some(index) = index else {
                    let _ = tasks.ack(&d);
                    continue;
                };
                let (params, seed) = posted.generation.task(&noise, index);
                let ep = episode(env.as_mut(), &policy, &params, &posted.stats, seed);
                let answer = Answer {
                    index,
                    result: ep
                        .map(|e| (e.ret, e.len, e.obs_sum, e.obs_sq))
                        .map_err(|e| e.to_string()),
                };
                let meta = BatchMeta {
                    runner: id,
                    seq: summary.batches,
                    version: gen_id,
                };
                let payload = serde_json::to_vec(&answer).expect("serializable");
                loop {
                    if finished.load(Ordering::SeqCst) {
                        return Ok(());
                    }
                    match results.send(meta, payload.clone().into(), Duration::from_millis(500)) {
                        Ok(()) => break,
                        Err(BrokerError::Full { .. } | BrokerError::JetStream { .. }) => {
                            std::thread::sleep(Duration::from_millis(50))
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
                // Acked once answered: a worker that dies first leaves it to another.
                let _ = tasks.ack(&d);
                summary.batches += 1;
                sent.store(summary.batches, Ordering::SeqCst);
            }
            Ok(())
        })();
        done.store(true, Ordering::SeqCst);
        r
    });
    let _ = board.heartbeat(id, summary.batches);
    result.map(|()| summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_pair_signs_on_the_same_seed_and_mirror_the_noise() {
        let noise = NoiseTable::new(1000, 3);
        let g = Generation {
            theta: vec![1.0, 2.0, 3.0],
            offsets: vec![10, 500],
            sigma: 0.5,
            antithetic: true,
            per: 2,
            base: 100,
        };
        assert_eq!(g.n_tasks(), 8);
        // Task 0: pair 0, +σ, episode 0; task 2: pair 0, −σ, episode 0; task 5: pair 1, +σ,
        // episode 1.
        let (p0, s0) = g.task(&noise, 0);
        let (p2, s2) = g.task(&noise, 2);
        let (_, s5) = g.task(&noise, 5);
        assert_eq!((s0, s2, s5), (100, 100, 103));
        let eps = noise.slice(10, 3);
        for i in 0..3 {
            assert_eq!(p0[i], g.theta[i] + 0.5 * eps[i]);
            assert_eq!(p2[i], g.theta[i] - 0.5 * eps[i]);
        }
        let back: Generation = serde_json::from_slice(&serde_json::to_vec(&g).unwrap()).unwrap();
        assert_eq!(back, g);
    }
}
