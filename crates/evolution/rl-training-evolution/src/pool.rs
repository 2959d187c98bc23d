//! The worker pool: `num_workers` threads, each with its own env, run one episode per task and
//! hand back returns, lengths and observation moments in task order. Each task names its
//! parameters and its env seed, so results never depend on which thread ran what.

use crate::policy::{FlatPolicy, ObsStats};
use rl_training_core::env::{Env, EnvError};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// What one episode gave.
#[derive(Debug, Clone, PartialEq)]
pub struct Episode {
    /// Undiscounted return.
    pub ret: f64,
    /// Steps.
    pub len: usize,
    /// Per-element sum of the flattened observations seen (for [`ObsStats::merge`]).
    pub obs_sum: Vec<f64>,
    /// Per-element sum of their squares.
    pub obs_sq: Vec<f64>,
}

/// Envs for the workers and the policy they run.
pub struct WorkerPool {
    envs: Vec<Box<dyn Env>>,
    policy: FlatPolicy,
}

impl WorkerPool {
    /// One worker per env.
    pub fn new(envs: Vec<Box<dyn Env>>, policy: FlatPolicy) -> Self {
        Self { envs, policy }
    }

    /// Number of workers.
    pub fn num_workers(&self) -> usize {
        self.envs.len()
    }

    /// The policy.
    pub fn policy(&self) -> &FlatPolicy {
        &self.policy
    }

    /// The first worker's env (evaluation helpers, statistics).
    pub fn env(&self) -> &dyn Env {
        self.envs[0].as_ref()
    }

    /// Runs one episode for each of `n` tasks: `task(i)` gives the parameters and the env
    /// seed; observations are normalized with `stats`. Results come back in task order.
    pub fn run(
        &mut self,
        n: usize,
        stats: &ObsStats,
        task: &(dyn Fn(usize) -> (Vec<f32>, u64) + Sync),
    ) -> Result<Vec<Episode>, EnvError> {
        let next = AtomicUsize::new(0);
        let results: Mutex<Vec<Option<Result<Episode, EnvError>>>> =
            Mutex::new((0..n).map(|_| None).collect());
        let policy = &self.policy;
        std::thread::scope(|s| {
            for env in self.envs.iter_mut() {
                let (next, results) = (&next, &results);
                s.spawn(move || {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= n {
                            break;
                        }
                        let (params, seed) = task(i);
                        let ep = episode(env.as_mut(), policy, &params, stats, seed);
                        let failed = ep.is_err();
                        results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(ep);
                        if failed {
                            break;
                        }
                    }
                });
            }
        });
        let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
        results
            .into_iter()
            .map(|r| {
                r.unwrap_or_else(|| {
                    Err(EnvError::Make(
                        "a worker stopped after an env error before running this task".into(),
                    ))
                })
            })
            .collect()
    }
}

/// One episode of `policy` with `params` on `env`, reset with `seed`.
pub fn episode(
    env: &mut dyn Env,
    policy: &FlatPolicy,
    params: &[f32],
    stats: &ObsStats,
    seed: u64,
) -> Result<Episode, EnvError> {
    let mut obs = vec![0.0f32; env.observation_space().raw_dim()];
    env.reset(Some(seed), None, &mut obs)?;
    let d = policy.obs_dim;
    let (mut sum, mut sq) = (vec![0.0f64; d], vec![0.0f64; d]);
    let (mut ret, mut len) = (0.0, 0usize);
    loop {
        if stats.enabled {
            for (i, &x) in policy.flatten(&obs).iter().enumerate() {
                sum[i] += x as f64;
                sq[i] += (x as f64) * (x as f64);
            }
        }
        let a = policy.act(params, &obs, stats);
        let s = env.step(&a, &mut obs)?;
        ret += s.reward;
        len += 1;
        if s.terminated || s.truncated {
            break;
        }
    }
    Ok(Episode {
        ret,
        len,
        obs_sum: sum,
        obs_sq: sq,
    })
}
