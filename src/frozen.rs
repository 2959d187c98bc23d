//! Frozen policies of multi-agent runs loaded from checkpoints of any algorithm
//! (`multi_agent.policies.<id>.checkpoint`).

use rl_training_core::algorithm::{Algorithm, RlError};
use rl_training_core::burn::tensor::Device;
use rl_training_core::config::ConfigError;
use rl_training_core::env::{EnvError, Kwargs};
use rl_training_core::multi_agent::{FrozenSource, HeuristicPolicy, MultiAgentAlgorithm};
use rl_training_core::rng::Rng;
use rl_training_core::spaces::Space;
use serde_json::Value;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// The algorithm behind a checkpoint policy.
enum Loaded {
    /// A single-agent run's policy.
    Single(Box<dyn Algorithm + Send>),
    /// Policy `.1` of a multi-agent run.
    Multi(Box<dyn MultiAgentAlgorithm + Send>, String),
}

/// A checkpoint's policy acting deterministically (its mode), so that a resumed run replays
/// it exactly. Every agent it acts for shares the loaded algorithm; each instance (one per
/// agent and env) keeps its own recurrent state, zero at the agent's episode start and saved
/// in the run's checkpoints.
struct CheckpointPolicy {
    name: String,
    loaded: Arc<Mutex<Loaded>>,
    /// The recurrent state of a recurrent policy (empty: the episode's start).
    state: Vec<f32>,
}

impl HeuristicPolicy for CheckpointPolicy {
    fn name(&self) -> &str {
        &self.name
    }
    fn reset(&mut self, _rng: &mut Rng) {
        self.state.clear();
    }
    fn act(&mut self, obs: &[f32], _rng: &mut Rng) -> Result<Vec<f32>, RlError> {
        // A panic elsewhere while holding the lock leaves nothing half-updated here: acting
        // reads the weights, and the state it continues from is this instance's.
        let mut loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        match &mut *loaded {
            Loaded::Single(a) => a.predict_with_state(obs, &mut self.state, true),
            Loaded::Multi(a, policy) => a.predict_with_state(policy, obs, &mut self.state, true),
        }
    }
    fn fresh(&self) -> Box<dyn HeuristicPolicy> {
        Box::new(CheckpointPolicy {
            name: self.name.clone(),
            loaded: self.loaded.clone(),
            state: Vec::new(),
        })
    }
    fn save(&self) -> Value {
        Value::from(
            self.state
                .iter()
                .map(|&x| Value::from(x))
                .collect::<Vec<_>>(),
        )
    }
    fn load(&mut self, state: &Value) -> Result<(), EnvError> {
        self.state = match state {
            // Checkpoints from before recurrent frozen policies saved nothing.
            Value::Null => Vec::new(),
            v => serde_json::from_value(v.clone()).map_err(|e| EnvError::InvalidState {
                env: self.name.clone(),
                reason: format!("a frozen policy's saved recurrent state: {e}"),
            })?,
        };
        Ok(())
    }
}

fn mismatch(dir: &Path, what: &str, theirs: &Space, ours: &Space) -> RlError {
    RlError::Config(ConfigError::new(
        dir.display().to_string(),
        format!("its policy's {what} space is {theirs:?}, the agents' is {ours:?}"),
    ))
}

/// A frozen policy of a multi-agent run ([`rl_training_core::multi_agent::FrozenMaker`]): an env's
/// heuristic, or the policy of a checkpoint of any algorithm (a single-agent run's, or policy
/// `policy` of a multi-agent run's), checked against the agents' spaces. Loading keeps the
/// run's kernel level; the policy acts on `device`.
pub fn frozen_policy(
    env_id: &str,
    kwargs: &Kwargs,
    source: FrozenSource<'_>,
    device: &Device,
) -> Result<Box<dyn HeuristicPolicy>, RlError> {
    let FrozenSource::Checkpoint {
        dir,
        policy,
        observation_space,
        action_space,
    } = source
    else {
        return rl_training_envs::multi_agent::frozen(env_id, kwargs, source);
    };
    let ck = rl_training_core::checkpoint::read_checkpoint(dir)?;
    let run = rl_training_core::checkpoint::read_run_config(&ck)?;
    let (loaded, (obs, act)) = if crate::is_multi_agent(&run) {
        let a = crate::load_multi_agent_as_saved(dir, &ck.algorithm, device)?;
        if !a.core().learned_ids().iter().any(|id| id == policy) {
            return Err(RlError::Config(ConfigError::new(
                dir.display().to_string(),
                format!(
                    "a multi-agent checkpoint without a learned policy {policy:?} (learned: {}); \
                     set checkpoint_policy",
                    a.core().learned_ids().join(", ")
                ),
            )));
        }
        let spaces = a.core().spaces_of(policy)?;
        (Loaded::Multi(a, policy.to_string()), spaces)
    } else {
        let a = crate::load_as_saved(dir, &ck.algorithm, device)?;
        let spaces = (a.observation_space().clone(), a.action_space().clone());
        (Loaded::Single(a), spaces)
    };
    if &obs != observation_space {
        return Err(mismatch(dir, "observation", &obs, observation_space));
    }
    if &act != action_space {
        return Err(mismatch(dir, "action", &act, action_space));
    }
    Ok(Box::new(CheckpointPolicy {
        name: format!("checkpoint {}", dir.display()),
        loaded: Arc::new(Mutex::new(loaded)),
        state: Vec::new(),
    }))
}
