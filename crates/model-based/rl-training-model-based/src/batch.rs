//! Replayed sequences: `B` windows of `T` consecutive env steps, laid out time-major
//! (`index = t·B + b`) because the world model walks them step by step.

use serde::{Deserialize, Serialize};

/// A batch of replayed sequences, time-major. Row `(t, b)` holds the observation `o_t`, the
/// action taken at it `a_t`, the reward received on arriving at it `r_t` (0 at an episode's
/// first step), and whether it starts an episode or ends one by termination.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SequenceBatch {
    /// Sequences `B`.
    pub batch_size: usize,
    /// Steps per sequence `T`.
    pub length: usize,
    /// Observation width (flat).
    pub obs_dim: usize,
    /// Action width (one-hot for discrete actions).
    pub act_dim: usize,
    /// `[T·B·obs_dim]`.
    pub obs: Vec<f32>,
    /// `[T·B·act_dim]`.
    pub actions: Vec<f32>,
    /// `[T·B]`.
    pub rewards: Vec<f32>,
    /// `[T·B]`, 1 where an episode starts.
    pub is_first: Vec<f32>,
    /// `[T·B]`, 1 where an episode ended by termination (no continuation).
    pub is_terminated: Vec<f32>,
}

impl SequenceBatch {
    /// `b` sequences of `t` steps, every value 0.
    pub fn zeros(b: usize, t: usize, obs_dim: usize, act_dim: usize) -> Self {
        let n = b * t;
        Self {
            batch_size: b,
            length: t,
            obs_dim,
            act_dim,
            obs: vec![0.0; n * obs_dim],
            actions: vec![0.0; n * act_dim],
            rewards: vec![0.0; n],
            is_first: vec![0.0; n],
            is_terminated: vec![0.0; n],
        }
    }

    /// Rows `T·B`.
    pub fn rows(&self) -> usize {
        self.batch_size * self.length
    }

    /// Checks that every array has the length the sizes imply; the error names the array.
    pub fn check(&self) -> Result<(), String> {
        let n = self.rows();
        for (name, len, want) in [
            ("obs", self.obs.len(), n * self.obs_dim),
            ("actions", self.actions.len(), n * self.act_dim),
            ("rewards", self.rewards.len(), n),
            ("is_first", self.is_first.len(), n),
            ("is_terminated", self.is_terminated.len(), n),
        ] {
            if len != want {
                return Err(format!(
                    "sequence batch: `{name}` has {len} values, expected {want}"
                ));
            }
        }
        Ok(())
    }
}
