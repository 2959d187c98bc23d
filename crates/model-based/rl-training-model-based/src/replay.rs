//! The sequence replay: each env's steps in order, in a ring of `capacity / n_envs` rows,
//! sampled as windows of `T` consecutive rows (RLlib's `EpisodeReplayBuffer` for DreamerV3:
//! a window may cross an episode boundary, where `is_first` restarts the model state, and
//! every window's first row is marked `is_first`, since its model state starts fresh).

use crate::batch::SequenceBatch;
use rl_training_core::Rng;
use serde::{Deserialize, Serialize};

/// One stored step: the observation, the action taken at it (zeros at an episode's last
/// observation, where none was taken), the reward received on arriving at it, and whether it
/// starts an episode or ends one by termination.
#[derive(Debug, Clone, Copy)]
pub struct StepRow<'a> {
    /// Flat observation.
    pub obs: &'a [f32],
    /// Action (one-hot for discrete actions).
    pub action: &'a [f32],
    /// Reward received on arriving here.
    pub reward: f32,
    /// First observation of an episode.
    pub is_first: bool,
    /// Terminal observation (the episode ended by termination).
    pub is_terminated: bool,
}

/// One env's ring of rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Track {
    obs: Vec<f32>,
    actions: Vec<f32>,
    rewards: Vec<f32>,
    is_first: Vec<f32>,
    is_terminated: Vec<f32>,
    /// Index of the oldest row.
    head: usize,
    /// Rows held.
    len: usize,
}

/// Every env's steps in order, oldest dropped first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SequenceReplay {
    obs_dim: usize,
    act_dim: usize,
    per_env: usize,
    tracks: Vec<Track>,
    /// Rows ever added.
    added: u64,
}

impl SequenceReplay {
    /// A replay of `capacity` rows in all, shared evenly by `n_envs` envs.
    pub fn new(capacity: usize, n_envs: usize, obs_dim: usize, act_dim: usize) -> Self {
        let per_env = (capacity / n_envs.max(1)).max(1);
        // Tracks grow as rows arrive (a large capacity of image rows is never allocated
        // ahead), then turn into rings.
        let track = Track {
            obs: Vec::new(),
            actions: Vec::new(),
            rewards: Vec::new(),
            is_first: Vec::new(),
            is_terminated: Vec::new(),
            head: 0,
            len: 0,
        };
        Self {
            obs_dim,
            act_dim,
            per_env,
            tracks: vec![track; n_envs],
            added: 0,
        }
    }

    /// Checks a replay read from a file against the run's shape (`n_envs` tracks of
    /// `obs_dim`- and `act_dim`-wide rows) and its own bookkeeping; the message says what is
    /// off.
    pub fn validate(&self, n_envs: usize, obs_dim: usize, act_dim: usize) -> Result<(), String> {
        if (self.tracks.len(), self.obs_dim, self.act_dim) != (n_envs, obs_dim, act_dim) {
            return Err(format!(
                "holds {} envs of {}-wide observations and {}-wide actions; the run has {n_envs}, {obs_dim} and {act_dim}",
                self.tracks.len(),
                self.obs_dim,
                self.act_dim
            ));
        }
        for (e, t) in self.tracks.iter().enumerate() {
            let rows = t.rewards.len();
            let consistent = rows <= self.per_env
                && t.obs.len() == rows * obs_dim
                && t.actions.len() == rows * act_dim
                && t.is_first.len() == rows
                && t.is_terminated.len() == rows
                && t.len <= rows
                && (t.head == 0 || (rows == self.per_env && t.head < rows));
            if !consistent {
                return Err(format!(
                    "env {e}'s track is inconsistent ({rows} rows of {} allowed, {} held from {})",
                    self.per_env, t.len, t.head
                ));
            }
        }
        Ok(())
    }

    /// Rows held.
    pub fn len(&self) -> usize {
        self.tracks.iter().map(|t| t.len).sum()
    }

    /// True before the first row.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Rows ever added.
    pub fn added(&self) -> u64 {
        self.added
    }

    /// Appends `row` to env `env`'s steps (dropping its oldest when full).
    pub fn push(&mut self, env: usize, row: StepRow<'_>) {
        let (od, ad, cap) = (self.obs_dim, self.act_dim, self.per_env);
        let t = &mut self.tracks[env];
        let i = (t.head + t.len) % cap;
        let (first, term) = (row.is_first as u8 as f32, row.is_terminated as u8 as f32);
        if i == t.rewards.len() {
            t.obs.extend_from_slice(row.obs);
            t.actions.extend_from_slice(row.action);
            t.rewards.push(row.reward);
            t.is_first.push(first);
            t.is_terminated.push(term);
        } else {
            t.obs[i * od..(i + 1) * od].copy_from_slice(row.obs);
            t.actions[i * ad..(i + 1) * ad].copy_from_slice(row.action);
            t.rewards[i] = row.reward;
            t.is_first[i] = first;
            t.is_terminated[i] = term;
        }
        if t.len < cap {
            t.len += 1;
        } else {
            t.head = (t.head + 1) % cap;
        }
        self.added += 1;
    }

    /// `b` windows of `t` consecutive rows, each from a start drawn uniformly over every
    /// env's possible starts, time-major; `None` while no env holds `t` rows.
    pub fn sample(&self, b: usize, t: usize, rng: &mut Rng) -> Option<SequenceBatch> {
        let starts: Vec<usize> = self
            .tracks
            .iter()
            .map(|tr| (tr.len + 1).saturating_sub(t))
            .collect();
        let total: usize = starts.iter().sum();
        if total == 0 || t == 0 {
            return None;
        }
        let (od, ad, cap) = (self.obs_dim, self.act_dim, self.per_env);
        let mut out = SequenceBatch::zeros(b, t, od, ad);
        for col in 0..b {
            let mut k = rng.below(total as u64) as usize;
            let env = starts
                .iter()
                .position(|&s| {
                    if k < s {
                        true
                    } else {
                        k -= s;
                        false
                    }
                })
                .unwrap_or(0);
            let tr = &self.tracks[env];
            for step in 0..t {
                let src = (tr.head + k + step) % cap;
                let dst = step * b + col;
                out.obs[dst * od..(dst + 1) * od]
                    .copy_from_slice(&tr.obs[src * od..(src + 1) * od]);
                out.actions[dst * ad..(dst + 1) * ad]
                    .copy_from_slice(&tr.actions[src * ad..(src + 1) * ad]);
                out.rewards[dst] = tr.rewards[src];
                out.is_first[dst] = if step == 0 { 1.0 } else { tr.is_first[src] };
                out.is_terminated[dst] = tr.is_terminated[src];
            }
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push(r: &mut SequenceReplay, env: usize, v: f32, first: bool) {
        r.push(
            env,
            StepRow {
                obs: &[v],
                action: &[v * 10.0],
                reward: v,
                is_first: first,
                is_terminated: false,
            },
        );
    }

    #[test]
    fn windows_are_consecutive_rows_of_one_env_oldest_dropped_first() {
        // Two envs, 4 rows each.
        let mut r = SequenceReplay::new(8, 2, 1, 1);
        let mut rng = Rng::seed_from(0);
        for v in 0..3 {
            push(&mut r, 0, v as f32, v == 0);
        }
        assert!(
            r.sample(2, 4, &mut rng).is_none(),
            "no env holds 4 rows yet"
        );
        for v in 3..6 {
            push(&mut r, 0, v as f32, false);
        }
        push(&mut r, 1, 100.0, true);
        // Env 0 holds 2, 3, 4, 5 (0 and 1 dropped); env 1 one row: every window is env 0's.
        assert_eq!(r.len(), 5);
        let b = r.sample(3, 4, &mut rng).unwrap();
        b.check().unwrap();
        for col in 0..3 {
            let w: Vec<f32> = (0..4).map(|t| b.obs[t * 3 + col]).collect();
            assert_eq!(w, vec![2.0, 3.0, 4.0, 5.0]);
            let a: Vec<f32> = (0..4).map(|t| b.actions[t * 3 + col]).collect();
            assert_eq!(a, vec![20.0, 30.0, 40.0, 50.0]);
            // The window's first row starts the model state; the rest keep their flags.
            let f: Vec<f32> = (0..4).map(|t| b.is_first[t * 3 + col]).collect();
            assert_eq!(f, vec![1.0, 0.0, 0.0, 0.0]);
        }
        // What a file holds is checked against the run's shape and itself.
        r.validate(2, 1, 1).unwrap();
        assert!(r.validate(2, 3, 1).unwrap_err().contains("3"));
        let mut bad = r.clone();
        bad.tracks[1].rewards.push(0.0);
        assert!(bad.validate(2, 1, 1).unwrap_err().contains("env 1"));
        // Windows of 2: starts spread over both envs' possible starts (3 + 0 for env 0 and 1).
        for _ in 0..20 {
            let b = r.sample(1, 2, &mut rng).unwrap();
            assert_eq!(b.obs[1], b.obs[0] + 1.0);
        }
    }
}
