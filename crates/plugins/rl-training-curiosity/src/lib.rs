//! Curiosity for any algorithm: a plugin that sees each training batch before the
//! algorithm's learner, adds an intrinsic reward to its rewards and trains its own module
//! with its own optimizer. The family shells call it (on-policy and actor-learner: on each
//! rollout before GAE; off-policy: on each replayed batch, recomputed with the current
//! module and never stored), so every algorithm gets it from its shell.
//!
//! `curiosity: {type: icm, ...}` in a run config selects the intrinsic curiosity module of
//! Pathak et al. 2017 ([`Icm`]) with RLlib's key names ([`IcmConfig`]); `{type: rnd, ...}`
//! random network distillation (Burda et al. 2018, [`Rnd`]) with CleanRL's ([`RndConfig`]).
#![warn(missing_docs)]

pub mod config;
pub mod icm;
pub mod loss;
pub mod model;
pub mod rnd;

pub use config::{CuriosityConfig, IcmConfig, RndConfig};
pub use icm::Icm;
pub use rnd::Rnd;

use rl_training_core::algorithm::{LearnerState, Progress};
use rl_training_core::buffers::RolloutBuffer;
use rl_training_core::burn::tensor::Device;
use rl_training_core::checkpoint::Checkpoint;
use rl_training_core::config::RunConfig;
use rl_training_core::logger::Metrics;
use rl_training_core::optim::FlatOptimizer;
use rl_training_core::params::TensorMap;
use rl_training_core::replay::{Replay, TransitionBatch};
use rl_training_core::{RlError, Space};
use serde_json::{Map, Value};

/// Transitions a plugin sees: network-input (flat) observations and next observations
/// `[n × obs_dim]`, and the actions `[n × act_dim]` in the action space's raw encoding.
#[derive(Debug, Clone, Copy)]
pub struct Transitions<'a> {
    /// Observations.
    pub obs: &'a [f32],
    /// Actions.
    pub actions: &'a [f32],
    /// The observation each transition led to (the true final one where an episode ended).
    pub next_obs: &'a [f32],
    /// Number of transitions.
    pub n: usize,
    /// A rollout's envs when the rows are time-major `[T][envs]` (RND's intrinsic-return
    /// filter runs per env); `None` for replayed batches without that order.
    pub envs: Option<usize>,
}

/// A curiosity plugin, as the shells hold it.
#[derive(Debug)]
pub enum Curiosity {
    /// The intrinsic curiosity module.
    Icm(Icm),
    /// Random network distillation.
    Rnd(Rnd),
}

impl Curiosity {
    /// The plugin `run.curiosity` asks for, if any, for the run's spaces; the module trains
    /// on `device` (an autodiff device) and draws from generators seeded by `run.seed`.
    pub fn from_run(
        run: &RunConfig,
        obs_space: &Space,
        act_space: &Space,
        device: &Device,
    ) -> Result<Option<Self>, RlError> {
        let Some(v) = &run.curiosity else {
            return Ok(None);
        };
        let cfg = CuriosityConfig::from_value(v).map_err(RlError::Config)?;
        Ok(Some(Self::new(
            &cfg, obs_space, act_space, run.seed, device,
        )?))
    }

    /// The plugin `cfg` describes.
    pub fn new(
        cfg: &CuriosityConfig,
        obs_space: &Space,
        act_space: &Space,
        seed: u64,
        device: &Device,
    ) -> Result<Self, RlError> {
        Ok(match cfg {
            CuriosityConfig::Icm(c) => Curiosity::Icm(
                Icm::new(c.clone(), obs_space, act_space, seed, device).map_err(RlError::Config)?,
            ),
            CuriosityConfig::Rnd(c) => Curiosity::Rnd(
                Rnd::new(c.clone(), obs_space, seed, device).map_err(RlError::Config)?,
            ),
        })
    }

    /// The bonus of the current module added to `rewards` (`[n]`, the rows of `t`), then
    /// `epochs` passes of training on `t` (`None`: the module's own setting).
    pub fn relabel(
        &mut self,
        t: &Transitions,
        rewards: &mut [f32],
        epochs: Option<usize>,
        progress: &Progress,
    ) -> Result<Metrics, RlError> {
        match self {
            Curiosity::Icm(icm) => icm.relabel(t, rewards, epochs, progress),
            Curiosity::Rnd(rnd) => rnd.relabel(t, rewards, epochs, progress),
        }
    }

    /// On-policy (GAE): the module's bonus for a collected rollout, then the advantages and
    /// returns (GAE with `gamma`, `gae_lambda`, from the last values the collector stored),
    /// then the module trains on the rollout. ICM adds its bonus to the rewards; RND keeps
    /// CleanRL's two streams (the env's rewards for the learner's returns, its own intrinsic
    /// critic for non-episodic intrinsic advantages, the advantages weighted
    /// `ext_coef : int_coef`).
    pub fn relabel_rollout(
        &mut self,
        buf: &mut RolloutBuffer,
        gamma: f32,
        gae_lambda: f32,
        progress: &Progress,
    ) -> Result<Metrics, RlError> {
        match self {
            Curiosity::Rnd(rnd) => rnd.relabel_rollout(buf, gamma, gae_lambda, progress),
            Curiosity::Icm(_) => self.relabel_rollout_rewards(buf, gamma, gae_lambda, progress),
        }
    }

    /// Actor-learner (V-trace targets come from rewards): adds the intrinsic rewards to a
    /// rollout's rewards (RND: `ext_coef · r + int_coef · r_int`), recomputes its GAE
    /// advantages and returns, then trains the module on the rollout.
    pub fn relabel_rollout_rewards(
        &mut self,
        buf: &mut RolloutBuffer,
        gamma: f32,
        gae_lambda: f32,
        progress: &Progress,
    ) -> Result<Metrics, RlError> {
        let n_envs = buf.n_envs;
        let RolloutBuffer {
            obs,
            actions,
            next_obs,
            rewards,
            ..
        } = buf;
        let t = Transitions {
            obs,
            actions,
            next_obs,
            n: rewards.len(),
            envs: Some(n_envs),
        };
        let m = self.relabel(&t, rewards, None, progress)?;
        buf.recompute_returns_and_advantage(gamma, gae_lambda);
        Ok(m)
    }

    /// Off-policy: adds the intrinsic rewards of the current module to a batch replayed from
    /// `replay` (the replay keeps the env's rewards), then trains the module once on what it
    /// scored. A row whose return sums `m > 1` steps (n-step returns) gets the discounted sum
    /// `Σ_k γ^k b_k` of its steps' bonuses, as its return sums their rewards: the module
    /// scores and trains on those one-step transitions, never on the row's m-step jump, whose
    /// end depends on the drawn `m` and the later actions and so stays unpredictable (a
    /// bonus that never fades).
    pub fn relabel_transitions(
        &mut self,
        b: &mut TransitionBatch,
        replay: &Replay,
        gamma: f32,
        progress: &Progress,
    ) -> Result<Metrics, RlError> {
        if b.lengths.iter().all(|&m| m <= 1) {
            let TransitionBatch {
                obs,
                actions,
                next_obs,
                rewards,
                ..
            } = b;
            let t = Transitions {
                obs,
                actions,
                next_obs,
                n: rewards.len(),
                envs: None,
            };
            return self.relabel(&t, rewards, Some(1), progress);
        }
        let steps = replay.one_step_transitions(b);
        let t = Transitions {
            obs: &steps.obs,
            actions: &steps.actions,
            next_obs: &steps.next_obs,
            n: steps.len(),
            envs: None,
        };
        let mut bonus = vec![0.0; t.n];
        let m = self.relabel(&t, &mut bonus, Some(1), progress)?;
        for (r, s) in b
            .rewards
            .iter_mut()
            .zip(steps.discounted_sums(&bonus, gamma))
        {
            *r += s;
        }
        Ok(m)
    }

    /// The module's state: its files and a `curiosity` entry in `state.json`.
    pub fn save_state(&self) -> LearnerState {
        match self {
            Curiosity::Icm(icm) => icm.save_state(),
            Curiosity::Rnd(rnd) => rnd.save_state(),
        }
    }

    /// Restores what [`save_state`](Self::save_state) wrote.
    pub fn load_state(
        &mut self,
        ck: &Checkpoint,
        entries: &Map<String, Value>,
    ) -> Result<(), RlError> {
        match self {
            Curiosity::Icm(icm) => icm.load_state(ck, entries),
            Curiosity::Rnd(rnd) => rnd.load_state(ck, entries),
        }
    }
}

/// Adds the state of `plugin`, if any, to a learner's checkpoint state.
pub fn save_plugin(plugin: &Option<Curiosity>, state: &mut LearnerState) {
    if let Some(c) = plugin {
        let s = c.save_state();
        state.files.extend(s.files);
        state.entries.extend(s.entries);
    }
}

/// Restores what [`save_plugin`] added, if the run has a plugin.
pub fn load_plugin(
    plugin: &mut Option<Curiosity>,
    ck: &Checkpoint,
    entries: &Map<String, Value>,
) -> Result<(), RlError> {
    match plugin {
        Some(c) => c.load_state(ck, entries),
        None => Ok(()),
    }
}

/// Adds `bonus` to `rewards` and records its mean as `curiosity/intrinsic_reward_mean`.
pub(crate) fn add_bonus(rewards: &mut [f32], bonus: &[f32], m: &mut Metrics) {
    for (r, b) in rewards.iter_mut().zip(bonus) {
        *r += b;
    }
    let mean = bonus.iter().map(|&b| b as f64).sum::<f64>() / bonus.len().max(1) as f64;
    m.insert("curiosity/intrinsic_reward_mean".into(), mean);
}

/// The module's Adam state as `curiosity_optimizer.safetensors`; returns Adam's step count.
pub(crate) fn save_optimizer(opt: &FlatOptimizer, state: &mut LearnerState) -> u64 {
    let mut map = TensorMap::default();
    let steps = opt.save("adam", &mut map);
    state.file("curiosity_optimizer.safetensors", map.to_bytes());
    steps
}

/// Restores [`save_optimizer`]'s file for a module of `n_params` parameters.
pub(crate) fn load_optimizer(
    ck: &Checkpoint,
    opt: &mut FlatOptimizer,
    steps: u64,
    n_params: usize,
    device: &Device,
) -> Result<(), RlError> {
    let file = ck.path_of("curiosity_optimizer.safetensors");
    let mut map = TensorMap::from_bytes(ck.file("curiosity_optimizer.safetensors")?, &file)?;
    Ok(opt.load("adam", &mut map, steps, n_params, &file, device)?)
}

/// `n` rows of width `d` picked by `rows` (minibatch gathering).
pub(crate) fn gather(src: &[f32], d: usize, rows: &[usize]) -> Vec<f32> {
    rows.iter()
        .flat_map(|&i| src[i * d..(i + 1) * d].iter().copied())
        .collect()
}
