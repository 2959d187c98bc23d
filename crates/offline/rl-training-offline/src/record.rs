//! Making datasets: episodes played by a trained policy (optionally with ε-random actions,
//! for mixed-quality data), transitions taken from a replay buffer, and writing either
//! format by file extension.

use crate::dataset::{DatasetError, DatasetSpec, Step, Transitions};
use crate::npz_io::write_npz;
use crate::parquet_io::{DEFAULT_ROWS_PER_GROUP, write_parquet};
use rl_training_core::algorithm::{Algorithm, RlError};
use rl_training_core::env::Env;
use rl_training_core::replay::TransitionBatch;
use rl_training_core::{Rng, Space};
use std::path::Path;

/// How [`record`] plays.
#[derive(Debug, Clone)]
pub struct RecordOptions {
    /// Episodes to play.
    pub episodes: usize,
    /// Probability of a uniformly random action instead of the policy's, per step.
    pub epsilon: f64,
    /// Episode `i` resets with `seed + i`; random actions draw from an RNG of this seed.
    pub seed: u64,
    /// The policy's most likely action (else a sample).
    pub deterministic: bool,
    /// First episode id written (to concatenate recordings).
    pub first_eps_id: i64,
}

impl Default for RecordOptions {
    fn default() -> Self {
        Self {
            episodes: 10,
            epsilon: 0.0,
            seed: 0,
            deterministic: true,
            first_eps_id: 0,
        }
    }
}

/// Plays `opts.episodes` episodes of `algo` on `env` and returns every step (the true final
/// observation as `new_obs` at episode ends).
pub fn record(
    algo: &mut dyn Algorithm,
    env: &mut dyn Env,
    opts: &RecordOptions,
) -> Result<Transitions, RlError> {
    if !(0.0..=1.0).contains(&opts.epsilon) {
        return Err(RlError::Config(rl_training_core::config::ConfigError::new(
            "epsilon",
            format!("{} is not in [0, 1]", opts.epsilon),
        )));
    }
    env.load_stats(&algo.env_stats())?;
    env.set_training(false);
    let obs_space = env.observation_space().clone();
    let act_space: Space = env.action_space().clone();
    let (od, ad) = (obs_space.raw_dim(), act_space.raw_dim());
    let mut out = Transitions::new(od, ad);
    let mut rng = Rng::for_stream(opts.seed, "record");
    let mut obs = vec![0.0; od];
    let mut next = vec![0.0; od];
    let mut random = Vec::with_capacity(ad);
    for i in 0..opts.episodes {
        env.reset(Some(opts.seed.wrapping_add(i as u64)), None, &mut obs)?;
        algo.reset_predict_state();
        let eps_id = opts.first_eps_id + i as i64;
        let mut t = 0i64;
        loop {
            let policy_action = algo.predict(&obs, opts.deterministic)?;
            let action = if opts.epsilon > 0.0 && rng.uniform() < opts.epsilon {
                random.clear();
                act_space.sample(&mut rng, &mut random);
                random.clone()
            } else {
                policy_action
            };
            next.copy_from_slice(&obs);
            let s = env.step(&action, &mut next)?;
            out.push(Step {
                eps_id,
                t,
                obs: &obs,
                action: &action,
                reward: s.reward as f32,
                terminated: s.terminated,
                truncated: s.truncated,
                new_obs: &next,
                action_logp: None,
            });
            std::mem::swap(&mut obs, &mut next);
            t += 1;
            if s.terminated || s.truncated {
                break;
            }
        }
    }
    Ok(out)
}

/// Transitions of a one-env replay in time order (`chronological()`), episodes numbered from
/// their ends; `action` maps a stored action row to the env's (SAC stores squashed actions
/// in [−1, 1]).
pub fn from_replay(
    batch: &TransitionBatch,
    act_dim: usize,
    action: impl Fn(&[f32]) -> Vec<f32>,
) -> Transitions {
    let n = batch.len();
    let od = batch.obs.len() / n.max(1);
    let stored = batch.actions.len() / n.max(1);
    let mut out = Transitions::new(od, act_dim);
    let (mut eps, mut t) = (0i64, 0i64);
    for i in 0..n {
        let a = action(&batch.actions[i * stored..(i + 1) * stored]);
        let (term, trunc) = (batch.terminated[i] > 0.0, batch.truncated[i] > 0.0);
        out.push(Step {
            eps_id: eps,
            t,
            obs: &batch.obs[i * od..(i + 1) * od],
            action: &a,
            reward: batch.rewards[i],
            terminated: term,
            truncated: trunc,
            new_obs: &batch.next_obs[i * od..(i + 1) * od],
            action_logp: None,
        });
        t += 1;
        if term || trunc {
            eps += 1;
            t = 0;
        }
    }
    out
}

/// Transitions of a replay of `n_envs` envs stored `[rows][n_envs]` in time order
/// (`chronological()`): each env's steps are taken apart, converted by [`from_replay`] and
/// appended env after env, episode ids numbered across them.
pub fn from_replay_envs(
    batch: &TransitionBatch,
    n_envs: usize,
    act_dim: usize,
    action: impl Fn(&[f32]) -> Vec<f32>,
) -> Transitions {
    let ne = n_envs.max(1);
    if ne == 1 {
        return from_replay(batch, act_dim, action);
    }
    let n = batch.len();
    let od = batch.obs.len() / n.max(1);
    let stored = batch.actions.len() / n.max(1);
    let mut out = Transitions::new(od, act_dim);
    for e in 0..ne {
        let rows: Vec<usize> = (e..n).step_by(ne).collect();
        let pick = |v: &[f32], w: usize| -> Vec<f32> {
            rows.iter()
                .flat_map(|&i| v[i * w..(i + 1) * w].iter().copied())
                .collect()
        };
        let one = TransitionBatch {
            obs: pick(&batch.obs, od),
            next_obs: pick(&batch.next_obs, od),
            actions: pick(&batch.actions, stored),
            rewards: rows.iter().map(|&i| batch.rewards[i]).collect(),
            terminated: rows.iter().map(|&i| batch.terminated[i]).collect(),
            truncated: rows.iter().map(|&i| batch.truncated[i]).collect(),
            indices: Vec::new(),
            discounts: Vec::new(),
            weights: Vec::new(),
            lengths: Vec::new(),
        };
        let mut part = from_replay(&one, act_dim, &action);
        let offset = out.num_episodes() as i64;
        part.eps_id.iter_mut().for_each(|id| *id += offset);
        out.extend(&part);
    }
    out
}

/// Writes `data` by `path`'s extension: `.parquet` or `.npz`, creating missing parent
/// directories (`rl record … --out data/expert.parquet` in a fresh clone).
pub fn write_dataset(
    path: &Path,
    data: &Transitions,
    spec: &DatasetSpec,
) -> Result<(), DatasetError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| DatasetError::io(&dir.display().to_string(), e))?;
    }
    match path.extension().and_then(|e| e.to_str()) {
        Some("parquet") => write_parquet(path, data, spec, DEFAULT_ROWS_PER_GROUP),
        Some("npz") => write_npz(path, data, spec),
        _ => Err(DatasetError::corrupt(
            &path.display().to_string(),
            None,
            "unknown dataset format: expected a .parquet or .npz file",
        )),
    }
}

/// Records several parts — `(episodes, epsilon, seed)` each — of `algo` on `env` into one
/// dataset at `path` (format by extension), episodes numbered across parts. Returns the rows.
pub fn record_parts(
    algo: &mut dyn Algorithm,
    env: &mut dyn Env,
    path: &Path,
    parts: &[(usize, f64, u64)],
) -> Result<Transitions, RlError> {
    let spec = DatasetSpec::from_spaces(env.observation_space(), env.action_space());
    let mut all = Transitions::new(spec.obs_dim(), spec.act_dim());
    for &(episodes, epsilon, seed) in parts {
        let opts = RecordOptions {
            episodes,
            epsilon,
            seed,
            deterministic: true,
            first_eps_id: all.num_episodes() as i64,
        };
        let first = all.is_empty();
        let d = record(algo, env, &opts)?;
        if first {
            all = d;
        } else {
            all.extend(&d);
        }
    }
    write_dataset(path, &all, &spec)?;
    Ok(all)
}
