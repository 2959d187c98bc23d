//! What every agent shell shares: building the vector env, checking `predict` input, the
//! iteration charts and the run config it saves.

use crate::batch::{episode_metrics, flatten_batch};
use crate::config::{ConfigError, RunConfig};
use crate::env::{Env, EnvError};
use crate::logger::Metrics;
use crate::vec_env::{EpisodeStats, VecEnv};
use crate::{RlError, Space};
use serde::Serialize;

/// Builds one training env for a run (called `n_envs` times).
pub type EnvMaker<'a> = &'a dyn Fn(&RunConfig) -> Result<Box<dyn Env>, EnvError>;

/// The run's `n_envs` training envs as one vector env (`vec_env_threads` workers).
pub fn make_vec_env(run: &RunConfig, make_env: EnvMaker<'_>) -> Result<VecEnv, RlError> {
    if run.n_envs == 0 {
        return Err(RlError::Config(ConfigError::new(
            "n_envs",
            "must be at least 1",
        )));
    }
    let envs = (0..run.n_envs)
        .map(|_| make_env(run))
        .collect::<Result<Vec<_>, _>>()?;
    let mut venv = VecEnv::with_threads(envs, run.vec_env_threads)?;
    if run.normalize.shared {
        venv.share_normalization(run.normalize.obs, run.normalize.reward, run.discount())?;
    }
    Ok(venv)
}

/// Checks raw observations given to `predict` (a whole number of finite rows of `space`) and
/// flattens them: `(flat, rows)`.
pub fn checked_flat_obs(
    space: &Space,
    env_id: &str,
    obs: &[f32],
) -> Result<(Vec<f32>, usize), RlError> {
    let d = space.raw_dim();
    if obs.is_empty() || !obs.len().is_multiple_of(d.max(1)) {
        return Err(RlError::Config(ConfigError::new(
            "predict: observation",
            format!("{} values, expected a multiple of {d}", obs.len()),
        )));
    }
    if let Some(i) = obs.iter().position(|v| !v.is_finite()) {
        return Err(RlError::Env(EnvError::BadOutput {
            env: env_id.to_string(),
            reason: format!("observation element {i} is {}", obs[i]),
        }));
    }
    let mut flat = Vec::new();
    flatten_batch(space, obs, &mut flat);
    Ok((flat, obs.len() / d.max(1)))
}

/// CleanRL's charts for one iteration: episode returns and lengths, SPS, and the split of
/// the wall-clock time between collecting (`rollout_seconds`) and updating.
pub fn iteration_charts(
    m: &mut Metrics,
    episodes: &[EpisodeStats],
    steps: u64,
    rollout_seconds: f64,
    started: std::time::Instant,
) {
    let secs = started.elapsed().as_secs_f64();
    episode_metrics(episodes, m);
    m.insert("charts/SPS".into(), steps as f64 / secs.max(1e-9));
    m.insert("time/rollout_seconds".into(), rollout_seconds);
    m.insert("time/update_seconds".into(), secs - rollout_seconds);
}

/// `config.yaml` of a checkpoint: the run with the budget now and the complete
/// hyperparameters `cfg` (defaults included).
pub fn run_yaml(
    run: &RunConfig,
    total_timesteps: u64,
    cfg: &impl Serialize,
) -> Result<Vec<u8>, RlError> {
    let mut run = run.clone();
    run.total_timesteps = total_timesteps;
    run.algo_kwargs = match serde_json::to_value(cfg) {
        Ok(serde_json::Value::Object(m)) => m,
        _ => {
            return Err(RlError::Other(
                "hyperparameters do not serialize to a map".into(),
            ));
        }
    };
    serde_saphyr::to_string(&run)
        .map(String::into_bytes)
        .map_err(|e| RlError::Other(e.to_string()))
}
