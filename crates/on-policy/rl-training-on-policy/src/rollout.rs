//! Rollout collection (SB3's `collect_rollouts`): steps a vector env with the current policy,
//! fills a [`RolloutBuffer`], bootstraps truncated episodes from their true final
//! observation, and computes GAE.

use crate::policy::{ActorCritic, PolicyOutput, SdeNoise};
use rl_training_core::Rng;
pub use rl_training_core::batch::{flatten_batch, host, tensor2};
use rl_training_core::buffers::RolloutBuffer;
use rl_training_core::burn::tensor::{Device, Tensor};
use rl_training_core::distributions::DistKind;
use rl_training_core::env::EnvError;
use rl_training_core::vec_env::{EpisodeStats, VecEnv};
use serde::{Deserialize, Serialize};

/// What collection and `predict` need from a policy network: feed-forward
/// ([`ActorCritic`]) or recurrent, whose per-env state the caller keeps as flat rows of
/// [`state_dim`](Self::state_dim) floats.
pub trait RolloutPolicy {
    /// Floats of recurrent state per env (0: none).
    fn state_dim(&self) -> usize {
        0
    }
    /// Outputs for the observations `obs` `[n, d]` of `n` envs. A recurrent policy first
    /// zeroes the rows of `state` (`[n × state_dim]`) whose `episode_starts` is 1, then
    /// advances them by this step.
    fn step(&self, obs: Tensor<2>, state: &mut [f32], episode_starts: &[f32]) -> PolicyOutput;
    /// Values `[n]` of `obs` continuing from `state` (not changed), with the same resets.
    fn values_from(&self, obs: Tensor<2>, state: &[f32], episode_starts: &[f32]) -> Vec<f32>;
    /// The action distribution.
    fn dist(&self) -> &DistKind;
    /// gSDE exploration matrices for `rows_times_dim / act_dim` envs (None without gSDE).
    fn sde_noise(&self, rows_times_dim: usize, rng: &mut Rng) -> Option<SdeNoise>;

    /// Raw actions (not clipped) for `obs`, drawn with `rng` (the mode when
    /// `deterministic`), advancing `state` as [`step`](Self::step).
    fn sample_actions(
        &self,
        obs: Tensor<2>,
        state: &mut [f32],
        episode_starts: &[f32],
        rng: &mut Rng,
        deterministic: bool,
    ) -> Vec<f32> {
        let out = self.step(obs, state, episode_starts);
        let params = host(out.params);
        if let (Some(noise), Some(latent)) = (self.sde_noise(params.len(), rng), out.latent_sde) {
            return noise.act(&params, &host(latent), deterministic).0;
        }
        // Without gSDE the log-std is one state-independent row `[1, dim]`.
        let log_std = out.log_std.map(host).unwrap_or_default();
        let mut actions = Vec::new();
        self.dist()
            .sample(&params, &log_std, rng, deterministic, &mut actions);
        actions
    }
}

impl RolloutPolicy for ActorCritic {
    fn step(&self, obs: Tensor<2>, _state: &mut [f32], _starts: &[f32]) -> PolicyOutput {
        self.forward(obs)
    }
    fn values_from(&self, obs: Tensor<2>, _state: &[f32], _starts: &[f32]) -> Vec<f32> {
        host(self.values(obs))
    }
    fn dist(&self) -> &DistKind {
        &self.dist
    }
    fn sde_noise(&self, rows_times_dim: usize, rng: &mut Rng) -> Option<SdeNoise> {
        ActorCritic::sde_noise(self, rows_times_dim, rng)
    }
    fn sample_actions(
        &self,
        obs: Tensor<2>,
        _state: &mut [f32],
        _starts: &[f32],
        rng: &mut Rng,
        deterministic: bool,
    ) -> Vec<f32> {
        ActorCritic::sample_actions(self, obs, rng, deterministic)
    }
}

/// Zeroes the rows (`dim` floats each) of `state` whose `episode_starts` is 1.
pub fn reset_rows(state: &mut [f32], episode_starts: &[f32], dim: usize) {
    if dim == 0 {
        return;
    }
    for (row, &s) in state.chunks_mut(dim).zip(episode_starts) {
        if s > 0.5 {
            row.fill(0.0);
        }
    }
}

/// State of the collector that must survive a checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CollectorState {
    /// Raw observations the next step starts from.
    pub last_obs: Vec<f32>,
    /// 1 where the next observation begins an episode.
    pub last_episode_starts: Vec<f32>,
    /// Env snapshots.
    pub envs: Vec<serde_json::Value>,
    /// Recurrent policies: each env's state after its last step.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub states: Vec<f32>,
}

/// Collects rollouts from a vector env.
pub struct RolloutCollector {
    /// The envs.
    pub env: VecEnv,
    /// The rollout storage.
    pub buffer: RolloutBuffer,
    last_obs: Vec<f32>,
    last_episode_starts: Vec<f32>,
    last_states: Vec<f32>,
    flat: Vec<f32>,
}

/// What one rollout produced besides the buffer.
#[derive(Debug, Default, Clone)]
pub struct RolloutInfo {
    /// Episodes that finished during the rollout.
    pub episodes: Vec<EpisodeStats>,
}

impl RolloutCollector {
    /// Resets the envs with `seed` and prepares a buffer of `n_steps` per env.
    pub fn new(mut env: VecEnv, n_steps: usize, seed: u64) -> Result<Self, EnvError> {
        let n = env.num_envs();
        let last_obs = env.reset(Some(seed))?.to_vec();
        let buffer = RolloutBuffer::new(
            n_steps,
            n,
            env.observation_space().flat_dim(),
            env.act_dim(),
        );
        Ok(Self {
            env,
            buffer,
            last_obs,
            last_episode_starts: vec![1.0; n],
            last_states: Vec::new(),
            flat: Vec::new(),
        })
    }

    /// Keeps `state_dim` floats of recurrent state per env (zero at first), stored with every
    /// step in the buffer.
    pub fn set_state_dim(&mut self, state_dim: usize) {
        let n = self.env.num_envs();
        self.last_states = vec![0.0; n * state_dim];
        self.buffer.set_state_dim(state_dim);
    }

    /// Raw observations the next step starts from.
    pub fn last_obs(&self) -> &[f32] {
        &self.last_obs
    }

    /// 1 where the next observation begins an episode (after the last collection: which
    /// envs' final step ended an episode).
    pub fn last_episode_starts(&self) -> &[f32] {
        &self.last_episode_starts
    }

    /// Starts new episodes in every env (reset with `seed`), zero recurrent states.
    pub fn reset_envs(&mut self, seed: u64) -> Result<(), EnvError> {
        self.last_obs = self.env.reset(Some(seed))?.to_vec();
        self.last_episode_starts.fill(1.0);
        self.last_states.fill(0.0);
        Ok(())
    }

    /// Saves what resuming needs.
    pub fn state(&self) -> Result<CollectorState, EnvError> {
        Ok(CollectorState {
            last_obs: self.last_obs.clone(),
            last_episode_starts: self.last_episode_starts.clone(),
            envs: self.env.snapshots()?,
            states: self.last_states.clone(),
        })
    }

    /// Restores a saved [`CollectorState`].
    pub fn restore(&mut self, s: &CollectorState) -> Result<(), EnvError> {
        let n = self.env.num_envs();
        if s.envs.len() != n
            || s.last_obs.len() != self.last_obs.len()
            || s.last_episode_starts.len() != n
            || s.states.len() != self.last_states.len()
        {
            return Err(EnvError::InvalidState {
                env: self.env.envs()[0].id().to_string(),
                reason: format!(
                    "checkpoint holds {} envs and {} recurrent-state floats, the run has {n} and {}",
                    s.envs.len(),
                    s.states.len(),
                    self.last_states.len()
                ),
            });
        }
        self.env.restore_snapshots(&s.envs)?;
        self.last_obs.clone_from(&s.last_obs);
        self.last_episode_starts.clone_from(&s.last_episode_starts);
        self.last_states.clone_from(&s.states);
        Ok(())
    }

    /// Fills the buffer with `n_steps` steps of every env using `policy` (inference device),
    /// drawing actions from `rng`, then computes advantages and returns. A gSDE policy draws
    /// its exploration matrices at the start and every `sde_sample_freq` steps when that is
    /// positive (SB3's `collect_rollouts`). A recurrent policy's states advance step by step
    /// and reset where episodes start; the buffer keeps the state each step started from.
    pub fn collect(
        &mut self,
        policy: &impl RolloutPolicy,
        device: &Device,
        rng: &mut Rng,
        gamma: f32,
        gae_lambda: f32,
        sde_sample_freq: i64,
    ) -> Result<RolloutInfo, EnvError> {
        let info = self.collect_steps(policy, device, rng, gamma, sde_sample_freq)?;
        self.buffer
            .recompute_returns_and_advantage(gamma, gae_lambda);
        Ok(info)
    }

    /// [`collect`](Self::collect) without the advantages: fills the buffer and stores the
    /// values and done flags after the last step in it, so that a plugin can change the
    /// rewards before [`RolloutBuffer::recompute_returns_and_advantage`] runs.
    pub fn collect_steps(
        &mut self,
        policy: &impl RolloutPolicy,
        device: &Device,
        rng: &mut Rng,
        gamma: f32,
        sde_sample_freq: i64,
    ) -> Result<RolloutInfo, EnvError> {
        let n = self.env.num_envs();
        let space = self.env.observation_space().clone();
        let flat_dim = space.flat_dim();
        let act_space = self.env.action_space().clone();
        let bounds = act_space.bounds().map(|(l, h)| (l.to_vec(), h.to_vec()));
        let mut info = RolloutInfo::default();
        self.buffer.reset();
        let mut actions = Vec::new();
        let mut clipped = Vec::new();
        let mut rewards = vec![0.0f32; n];
        let mut dones = vec![0.0f32; n];
        let mut boot = vec![0.0f32; n];
        let (mut next_raw, mut next_flat) = (Vec::new(), Vec::new());
        let act_dim = self.env.act_dim();
        let mut noise = policy.sde_noise(n * act_dim, rng);
        for step in 0..self.buffer.n_steps {
            if noise.is_some()
                && sde_sample_freq > 0
                && step > 0
                && step as i64 % sde_sample_freq == 0
            {
                noise = policy.sde_noise(n * act_dim, rng);
            }
            flatten_batch(&space, &self.last_obs, &mut self.flat);
            let sd = self.buffer.state_dim;
            reset_rows(&mut self.last_states, &self.last_episode_starts, sd);
            if sd > 0 {
                self.buffer.add_states(&self.last_states);
            }
            let out = policy.step(
                tensor2(self.flat.clone(), n, flat_dim, device),
                &mut self.last_states,
                &self.last_episode_starts,
            );
            let params = host(out.params);
            let values = host(out.values);
            actions.clear();
            let log_probs = match (&noise, out.latent_sde) {
                (Some(noise), Some(latent)) => {
                    let (a, lp) = noise.act(&params, &host(latent), false);
                    actions.extend(a);
                    lp
                }
                _ => {
                    let log_std = out.log_std.map(host).unwrap_or_default();
                    policy
                        .dist()
                        .sample(&params, &log_std, rng, false, &mut actions)
                }
            };
            // Box actions are clipped to the bounds for the env; the buffer keeps the raw sample.
            let env_actions = match &bounds {
                Some((lo, hi)) => {
                    clipped.clear();
                    clipped.extend(
                        actions
                            .iter()
                            .enumerate()
                            .map(|(i, &a)| a.clamp(lo[i % lo.len()], hi[i % hi.len()])),
                    );
                    &clipped
                }
                None => &actions,
            };
            self.env.step(env_actions)?;
            for e in 0..n {
                rewards[e] = self.env.rewards()[e] as f32;
                let (term, trunc) = (self.env.terminated()[e], self.env.truncated()[e]);
                dones[e] = (term || trunc) as u8 as f32;
            }
            // Bootstrap truncated (not terminated) episodes from the true final observation.
            let trunc_envs: Vec<usize> = (0..n)
                .filter(|&e| self.env.truncated()[e] && !self.env.terminated()[e])
                .collect();
            boot.iter_mut().for_each(|b| *b = 0.0);
            if !trunc_envs.is_empty() {
                let mut raw = Vec::new();
                for &e in &trunc_envs {
                    raw.extend_from_slice(self.env.final_obs(e));
                }
                let mut flat = Vec::new();
                flatten_batch(&space, &raw, &mut flat);
                // A recurrent critic continues from the state this step left.
                let sd = self.buffer.state_dim;
                let states: Vec<f32> = trunc_envs
                    .iter()
                    .flat_map(|&e| self.last_states[e * sd..(e + 1) * sd].iter().copied())
                    .collect();
                let v = policy.values_from(
                    tensor2(flat, trunc_envs.len(), flat_dim, device),
                    &states,
                    &vec![0.0; trunc_envs.len()],
                );
                for (k, &e) in trunc_envs.iter().enumerate() {
                    rewards[e] += gamma * v[k];
                    boot[e] = gamma * v[k];
                }
            }
            self.buffer.add(
                &self.flat,
                &actions,
                &rewards,
                &self.last_episode_starts,
                &values,
                &log_probs,
            );
            self.buffer.set_last_bootstraps(&boot);
            // The observation each step led to: the true final one where an episode ended.
            next_raw.clear();
            next_raw.extend_from_slice(self.env.obs());
            let od = next_raw.len() / n.max(1);
            for e in 0..n {
                if dones[e] > 0.0 {
                    next_raw[e * od..(e + 1) * od].copy_from_slice(self.env.final_obs(e));
                }
            }
            flatten_batch(&space, &next_raw, &mut next_flat);
            self.buffer.set_last_next_obs(&next_flat);
            self.last_obs.copy_from_slice(self.env.obs());
            self.last_episode_starts.copy_from_slice(&dones);
            info.episodes.extend(self.env.drain_episodes());
        }
        flatten_batch(&space, &self.last_obs, &mut self.flat);
        let last_values = policy.values_from(
            tensor2(self.flat.clone(), n, flat_dim, device),
            &self.last_states,
            &dones,
        );
        self.buffer.set_last_values(&last_values, &dones);
        Ok(info)
    }
}
