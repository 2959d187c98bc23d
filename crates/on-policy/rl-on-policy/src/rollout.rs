//! Rollout collection (SB3's `collect_rollouts`): steps a vector env with the current policy,
//! fills a [`RolloutBuffer`], bootstraps truncated episodes from their true final
//! observation, and computes GAE.

use crate::policy::ActorCritic;
use rl_core::Rng;
pub use rl_core::batch::{flatten_batch, host, tensor2};
use rl_core::buffers::RolloutBuffer;
use rl_core::burn::tensor::Device;
use rl_core::env::EnvError;
use rl_core::vec_env::{EpisodeStats, VecEnv};
use serde::{Deserialize, Serialize};

/// State of the collector that must survive a checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CollectorState {
    /// Raw observations the next step starts from.
    pub last_obs: Vec<f32>,
    /// 1 where the next observation begins an episode.
    pub last_episode_starts: Vec<f32>,
    /// Env snapshots.
    pub envs: Vec<serde_json::Value>,
}

/// Collects rollouts from a vector env.
pub struct RolloutCollector {
    /// The envs.
    pub env: VecEnv,
    /// The rollout storage.
    pub buffer: RolloutBuffer,
    last_obs: Vec<f32>,
    last_episode_starts: Vec<f32>,
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
            flat: Vec::new(),
        })
    }

    /// Saves what resuming needs.
    pub fn state(&self) -> Result<CollectorState, EnvError> {
        Ok(CollectorState {
            last_obs: self.last_obs.clone(),
            last_episode_starts: self.last_episode_starts.clone(),
            envs: self.env.snapshots()?,
        })
    }

    /// Restores a saved [`CollectorState`].
    pub fn restore(&mut self, s: &CollectorState) -> Result<(), EnvError> {
        let n = self.env.num_envs();
        if s.envs.len() != n
            || s.last_obs.len() != self.last_obs.len()
            || s.last_episode_starts.len() != n
        {
            return Err(EnvError::InvalidState {
                env: self.env.envs()[0].id().to_string(),
                reason: format!("checkpoint holds {} envs, the run has {n}", s.envs.len()),
            });
        }
        self.env.restore_snapshots(&s.envs)?;
        self.last_obs.clone_from(&s.last_obs);
        self.last_episode_starts.clone_from(&s.last_episode_starts);
        Ok(())
    }

    /// Fills the buffer with `n_steps` steps of every env using `policy` (inference device),
    /// drawing actions from `rng`, then computes advantages and returns. A gSDE policy draws
    /// its exploration matrices at the start and every `sde_sample_freq` steps when that is
    /// positive (SB3's `collect_rollouts`).
    pub fn collect(
        &mut self,
        policy: &ActorCritic,
        device: &Device,
        rng: &mut Rng,
        gamma: f32,
        gae_lambda: f32,
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
            let out = policy.forward(tensor2(self.flat.clone(), n, flat_dim, device));
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
                        .dist
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
            if !trunc_envs.is_empty() {
                let mut raw = Vec::new();
                for &e in &trunc_envs {
                    raw.extend_from_slice(self.env.final_obs(e));
                }
                let mut flat = Vec::new();
                flatten_batch(&space, &raw, &mut flat);
                let v = host(policy.values(tensor2(flat, trunc_envs.len(), flat_dim, device)));
                for (k, &e) in trunc_envs.iter().enumerate() {
                    rewards[e] += gamma * v[k];
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
            self.last_obs.copy_from_slice(self.env.obs());
            self.last_episode_starts.copy_from_slice(&dones);
            info.episodes.extend(self.env.drain_episodes());
        }
        flatten_batch(&space, &self.last_obs, &mut self.flat);
        let last_values = host(policy.values(tensor2(self.flat.clone(), n, flat_dim, device)));
        self.buffer
            .compute_returns_and_advantage(&last_values, &dones, gamma, gae_lambda);
        Ok(info)
    }
}
