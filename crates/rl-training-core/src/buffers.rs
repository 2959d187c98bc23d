//! Buffers: the on-policy rollout buffer with GAE (SB3 semantics), and the replay-buffer
//! interfaces off-policy, offline and sequence-based algorithms build on.

use crate::rng::Rng;

/// Generalized advantage estimation exactly as SB3's `RolloutBuffer.compute_returns_and_advantage`.
///
/// All arrays are time-major `[T][n_envs]` flattened. `episode_starts[t]` = 1 when the
/// observation at `t` begins an episode; `last_values`/`last_dones` describe the observation
/// after the last step. Truncated episodes are bootstrapped by the collector (it adds
/// `gamma * V(final_obs)` to the reward), as SB3 does. Writes `advantages` and `returns`.
pub fn compute_gae(
    rewards: &[f32],
    values: &[f32],
    episode_starts: &[f32],
    last_values: &[f32],
    last_dones: &[f32],
    gamma: f32,
    gae_lambda: f32,
    advantages: &mut [f32],
    returns: &mut [f32],
) {
    let n = last_values.len();
    let t_len = rewards.len() / n;
    let mut last_gae = vec![0.0f32; n];
    for t in (0..t_len).rev() {
        for e in 0..n {
            let i = t * n + e;
            let (next_non_terminal, next_value) = if t == t_len - 1 {
                (1.0 - last_dones[e], last_values[e])
            } else {
                (1.0 - episode_starts[i + n], values[i + n])
            };
            let delta = rewards[i] + gamma * next_value * next_non_terminal - values[i];
            last_gae[e] = delta + gamma * gae_lambda * next_non_terminal * last_gae[e];
            advantages[i] = last_gae[e];
        }
    }
    for i in 0..rewards.len() {
        returns[i] = advantages[i] + values[i];
    }
}

/// Storage for one on-policy rollout of `n_steps × n_envs` transitions.
#[derive(Debug, Clone)]
pub struct RolloutBuffer {
    /// Steps per env.
    pub n_steps: usize,
    /// Number of envs.
    pub n_envs: usize,
    /// Network-input observation length.
    pub obs_dim: usize,
    /// Raw action length.
    pub act_dim: usize,
    /// Observations `[T·N × obs_dim]`.
    pub obs: Vec<f32>,
    /// Raw actions `[T·N × act_dim]`.
    pub actions: Vec<f32>,
    /// Rewards (truncation bootstrap already added).
    pub rewards: Vec<f32>,
    /// 1 where the observation starts an episode.
    pub episode_starts: Vec<f32>,
    /// Value estimates.
    pub values: Vec<f32>,
    /// Log-probabilities of the actions under the behaviour policy.
    pub log_probs: Vec<f32>,
    /// GAE advantages.
    pub advantages: Vec<f32>,
    /// Returns (advantages + values).
    pub returns: Vec<f32>,
    /// The observation after each step `[T·N × obs_dim]` (the true final one where an episode
    /// ended), for rewards that depend on it (AIRL's shaping).
    pub next_obs: Vec<f32>,
    /// The truncation bootstrap `γ·V(final observation)` included in each reward (0 elsewhere),
    /// so relabelled rewards can keep it.
    pub bootstraps: Vec<f32>,
    /// The values and done flags after the last step, with which advantages were computed
    /// (to recompute them after relabelling rewards).
    pub last_values: Vec<f32>,
    /// See [`last_values`](Self::last_values).
    pub last_dones: Vec<f32>,
    /// Recurrent policies: floats of recurrent state per env (0 for feed-forward ones).
    pub state_dim: usize,
    /// Recurrent policies: the state each step started from, `[T·N × state_dim]` (zero where
    /// an episode starts).
    pub states: Vec<f32>,
    pos: usize,
}

impl RolloutBuffer {
    /// An empty buffer.
    pub fn new(n_steps: usize, n_envs: usize, obs_dim: usize, act_dim: usize) -> Self {
        let n = n_steps * n_envs;
        Self {
            n_steps,
            n_envs,
            obs_dim,
            act_dim,
            obs: vec![0.0; n * obs_dim],
            actions: vec![0.0; n * act_dim],
            rewards: vec![0.0; n],
            episode_starts: vec![0.0; n],
            values: vec![0.0; n],
            log_probs: vec![0.0; n],
            advantages: vec![0.0; n],
            returns: vec![0.0; n],
            next_obs: vec![0.0; n * obs_dim],
            bootstraps: vec![0.0; n],
            last_values: vec![0.0; n_envs],
            last_dones: vec![0.0; n_envs],
            state_dim: 0,
            states: Vec::new(),
            pos: 0,
        }
    }

    /// Makes room for `state_dim` floats of recurrent state per step and env.
    pub fn set_state_dim(&mut self, state_dim: usize) {
        self.state_dim = state_dim;
        self.states = vec![0.0; self.len() * state_dim];
    }

    /// Stores the recurrent states the next step (the one [`add`](Self::add) stores next)
    /// starts from, `[N × state_dim]`.
    pub fn add_states(&mut self, states: &[f32]) {
        let w = self.n_envs * self.state_dim;
        self.states[self.pos * w..(self.pos + 1) * w].copy_from_slice(states);
    }

    /// Total number of transitions (`n_steps × n_envs`).
    pub fn len(&self) -> usize {
        self.n_steps * self.n_envs
    }

    /// Whether the buffer holds no transitions.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether all `n_steps` are stored.
    pub fn is_full(&self) -> bool {
        self.pos == self.n_steps
    }

    /// Empties the buffer for the next rollout.
    pub fn reset(&mut self) {
        self.pos = 0;
    }

    /// Stores one step for all envs.
    pub fn add(
        &mut self,
        obs: &[f32],
        actions: &[f32],
        rewards: &[f32],
        episode_starts: &[f32],
        values: &[f32],
        log_probs: &[f32],
    ) {
        assert!(self.pos < self.n_steps, "rollout buffer is full");
        let (n, p) = (self.n_envs, self.pos);
        self.obs[p * n * self.obs_dim..(p + 1) * n * self.obs_dim].copy_from_slice(obs);
        self.actions[p * n * self.act_dim..(p + 1) * n * self.act_dim].copy_from_slice(actions);
        self.rewards[p * n..(p + 1) * n].copy_from_slice(rewards);
        self.episode_starts[p * n..(p + 1) * n].copy_from_slice(episode_starts);
        self.values[p * n..(p + 1) * n].copy_from_slice(values);
        self.log_probs[p * n..(p + 1) * n].copy_from_slice(log_probs);
        self.bootstraps[p * n..(p + 1) * n].fill(0.0);
        self.pos += 1;
    }

    /// Adds `amount[e]` to the reward of env `e` at the last stored step (truncation bootstrap).
    pub fn add_to_last_rewards(&mut self, e: usize, amount: f32) {
        let i = (self.pos - 1) * self.n_envs + e;
        self.rewards[i] += amount;
        self.bootstraps[i] += amount;
    }

    /// Records the truncation bootstraps already included in the last stored step's rewards.
    pub fn set_last_bootstraps(&mut self, bootstraps: &[f32]) {
        let n = self.n_envs;
        let p = self.pos - 1;
        self.bootstraps[p * n..(p + 1) * n].copy_from_slice(bootstraps);
    }

    /// Stores the (flat) observations that followed the last stored step, `[N × obs_dim]`.
    pub fn set_last_next_obs(&mut self, next_obs: &[f32]) {
        let w = self.n_envs * self.obs_dim;
        let p = self.pos - 1;
        self.next_obs[p * w..(p + 1) * w].copy_from_slice(next_obs);
    }

    /// Stores the values and done flags after the last step, from which
    /// [`recompute_returns_and_advantage`](Self::recompute_returns_and_advantage) bootstraps.
    pub fn set_last_values(&mut self, last_values: &[f32], last_dones: &[f32]) {
        self.last_values.clear();
        self.last_values.extend_from_slice(last_values);
        self.last_dones.clear();
        self.last_dones.extend_from_slice(last_dones);
    }

    /// Computes advantages and returns (see [`compute_gae`]) from the last values and dones
    /// stored by [`set_last_values`](Self::set_last_values); again after the rewards changed
    /// (GAIL relabels them, a curiosity plugin adds its bonus).
    pub fn recompute_returns_and_advantage(&mut self, gamma: f32, gae_lambda: f32) {
        compute_gae(
            &self.rewards,
            &self.values,
            &self.episode_starts,
            &self.last_values,
            &self.last_dones,
            gamma,
            gae_lambda,
            &mut self.advantages,
            &mut self.returns,
        );
    }

    /// The rollouts of several runners side by side: env columns of `parts[0]`, then of
    /// `parts[1]` …, each step's rows in that order, as one vector env of all their envs would
    /// have stored them. The parts must agree in `n_steps`, `obs_dim`, `act_dim` and
    /// `state_dim` (an error names the first that differs).
    pub fn join_envs(parts: &[RolloutBuffer]) -> Result<RolloutBuffer, String> {
        let first = parts.first().ok_or("no rollouts to join")?;
        for (i, p) in parts.iter().enumerate() {
            let shape = |b: &RolloutBuffer| [b.n_steps, b.obs_dim, b.act_dim, b.state_dim];
            if let Some(k) = (0..4).find(|&k| shape(p)[k] != shape(first)[k]) {
                let field = ["n_steps", "obs_dim", "act_dim", "state_dim"][k];
                return Err(format!(
                    "rollout {i}: {field} is {}, rollout 0 has {}",
                    shape(p)[k],
                    shape(first)[k]
                ));
            }
        }
        for (i, p) in parts.iter().enumerate() {
            p.check_lengths().map_err(|e| format!("rollout {i}: {e}"))?;
        }
        let n_envs = parts.iter().map(|p| p.n_envs).sum();
        let mut out = RolloutBuffer::new(first.n_steps, n_envs, first.obs_dim, first.act_dim);
        out.set_state_dim(first.state_dim);
        out.last_values.clear();
        out.last_dones.clear();
        for p in parts {
            out.last_values.extend_from_slice(&p.last_values);
            out.last_dones.extend_from_slice(&p.last_dones);
        }
        // Each per-row array: for every step, the parts' rows of that step one after the other.
        let join = |pick: fn(&RolloutBuffer) -> &Vec<f32>, dim: usize, dst: &mut Vec<f32>| {
            dst.clear();
            for t in 0..first.n_steps {
                for p in parts {
                    let w = p.n_envs * dim;
                    dst.extend_from_slice(&pick(p)[t * w..(t + 1) * w]);
                }
            }
        };
        let (od, ad, sd) = (first.obs_dim, first.act_dim, first.state_dim);
        join(|b| &b.obs, od, &mut out.obs);
        join(|b| &b.actions, ad, &mut out.actions);
        join(|b| &b.rewards, 1, &mut out.rewards);
        join(|b| &b.episode_starts, 1, &mut out.episode_starts);
        join(|b| &b.values, 1, &mut out.values);
        join(|b| &b.log_probs, 1, &mut out.log_probs);
        join(|b| &b.advantages, 1, &mut out.advantages);
        join(|b| &b.returns, 1, &mut out.returns);
        join(|b| &b.next_obs, od, &mut out.next_obs);
        join(|b| &b.bootstraps, 1, &mut out.bootstraps);
        join(|b| &b.states, sd, &mut out.states);
        out.pos = first.n_steps;
        Ok(out)
    }

    /// Checks that every array holds as many values as the shape says (a buffer that came
    /// from another process); the error names the first that does not.
    pub fn check_lengths(&self) -> Result<(), String> {
        let n = self.len();
        let (od, ad, sd) = (self.obs_dim, self.act_dim, self.state_dim);
        let rows: [(&str, &Vec<f32>, usize); 13] = [
            ("obs", &self.obs, n * od),
            ("actions", &self.actions, n * ad),
            ("rewards", &self.rewards, n),
            ("episode_starts", &self.episode_starts, n),
            ("values", &self.values, n),
            ("log_probs", &self.log_probs, n),
            ("advantages", &self.advantages, n),
            ("returns", &self.returns, n),
            ("next_obs", &self.next_obs, n * od),
            ("bootstraps", &self.bootstraps, n),
            ("states", &self.states, n * sd),
            ("last_values", &self.last_values, self.n_envs),
            ("last_dones", &self.last_dones, self.n_envs),
        ];
        match rows.iter().find(|(_, v, len)| v.len() != *len) {
            Some((field, v, len)) => Err(format!(
                "{field} holds {} values, expected {len} ({} steps × {} envs)",
                v.len(),
                self.n_steps,
                self.n_envs
            )),
            None => Ok(()),
        }
    }

    /// Minibatch index lists covering a random permutation of all transitions (the last one
    /// may be smaller, as SB3).
    pub fn minibatches(&self, batch_size: usize, rng: &mut Rng) -> Vec<Vec<usize>> {
        rng.permutation(self.len())
            .chunks(batch_size.max(1))
            .map(|c| c.to_vec())
            .collect()
    }

    /// Gathers rows `idx` of a `[len × dim]` array.
    pub fn gather(data: &[f32], dim: usize, idx: &[usize]) -> Vec<f32> {
        let mut out = Vec::with_capacity(idx.len() * dim);
        for &i in idx {
            out.extend_from_slice(&data[i * dim..(i + 1) * dim]);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Step `t` of env `e`: every value tells which (t, e) it came from.
    fn fill(b: &mut RolloutBuffer, envs: std::ops::Range<usize>) {
        let v = |t: usize, e: usize, k: f32| (t * 10 + e) as f32 + k;
        for t in 0..b.n_steps {
            let rows = |k: f32, dim: usize| -> Vec<f32> {
                envs.clone()
                    .flat_map(|e| (0..dim).map(move |d| v(t, e, k + d as f32 * 0.01)))
                    .collect()
            };
            b.add(
                &rows(0.1, b.obs_dim),
                &rows(0.2, b.act_dim),
                &rows(0.3, 1),
                &rows(0.4, 1),
                &rows(0.5, 1),
                &rows(0.6, 1),
            );
            b.set_last_bootstraps(&rows(0.7, 1));
            b.set_last_next_obs(&rows(0.8, b.obs_dim));
        }
        let last: Vec<f32> = envs.clone().map(|e| e as f32).collect();
        b.set_last_values(&last, &last);
    }

    #[test]
    fn joined_rollouts_equal_one_rollout_of_all_their_envs() {
        let mut whole = RolloutBuffer::new(3, 3, 2, 1);
        fill(&mut whole, 0..3);
        let mut a = RolloutBuffer::new(3, 1, 2, 1);
        fill(&mut a, 0..1);
        let mut b = RolloutBuffer::new(3, 2, 2, 1);
        fill(&mut b, 1..3);
        let mut joined = RolloutBuffer::join_envs(&[a, b]).unwrap();
        assert_eq!(joined.n_envs, 3);
        assert_eq!(joined.obs, whole.obs);
        assert_eq!(joined.actions, whole.actions);
        assert_eq!(joined.rewards, whole.rewards);
        assert_eq!(joined.episode_starts, whole.episode_starts);
        assert_eq!(joined.log_probs, whole.log_probs);
        assert_eq!(joined.next_obs, whole.next_obs);
        assert_eq!(joined.bootstraps, whole.bootstraps);
        assert_eq!(joined.last_values, whole.last_values);
        whole.recompute_returns_and_advantage(0.9, 0.8);
        joined.recompute_returns_and_advantage(0.9, 0.8);
        assert_eq!(joined.advantages, whole.advantages);
        assert!(joined.is_full());
    }

    #[test]
    fn rollouts_that_do_not_fit_together_are_an_error_naming_the_field() {
        let a = RolloutBuffer::new(3, 1, 2, 1);
        let e = RolloutBuffer::join_envs(&[a.clone(), RolloutBuffer::new(4, 1, 2, 1)]);
        assert_eq!(e.unwrap_err(), "rollout 1: n_steps is 4, rollout 0 has 3");
        let mut short = a.clone();
        short.last_values.pop();
        let e = RolloutBuffer::join_envs(&[a, short]).unwrap_err();
        assert!(
            e.starts_with("rollout 1: last_values holds 0 values, expected 1"),
            "{e}"
        );
        assert!(RolloutBuffer::join_envs(&[]).is_err());
    }
}
