//! rl-training-sac: Soft Actor-Critic (Haarnoja et al. 2018) as stable-baselines3's `SAC` —
//! tanh-squashed Gaussian actor, twin critics with Polyak-averaged targets, learned entropy
//! coefficient — and its discrete-action form (Christodoulou 2019): categorical actor,
//! critics over all actions, expectations instead of samples.
#![warn(missing_docs)]

pub mod config;
pub mod loss;
pub mod model;

pub use config::{AutoOr, SacConfig, SacPolicyKwargs};
pub use model::{Actor, Critics};

use rayon::prelude::*;
use rl_training_core::algorithm::{Learner, LearnerState, Progress, RlError, state_entry};
use rl_training_core::batch::{host, tensor1, tensor2};
use rl_training_core::burn::module::Module;
use rl_training_core::burn::tensor::{Device, Tensor};
use rl_training_core::checkpoint::{Checkpoint, read_module};
use rl_training_core::config::RunConfig;
use rl_training_core::logger::Metrics;
use rl_training_core::optim::{FlatOptimizer, OptimizerKind};
use rl_training_core::params::{
    TensorMap, flat_grads, load_module_tensors, module_tensors, num_params, set_module_tensors,
};
use rl_training_core::replay::TransitionBatch;
use rl_training_core::{Rng, Space};
pub use rl_training_off_policy::EnvMaker;
use rl_training_off_policy::{
    ActMode, OffPolicyActor, OffPolicyAgent, OffPolicyLearner, OffPolicySettings, polyak,
};
use serde_json::{Map, Value};

/// The optimization half of SAC.
pub struct SacLearner {
    cfg: SacConfig,
    device: Device,
    actor: Actor,
    critic: Critics,
    critic_target: Critics,
    opt_actor: FlatOptimizer,
    opt_critic: FlatOptimizer,
    log_alpha: f64,
    opt_alpha: loss::ScalarAdam,
    learn_alpha: bool,
    target_entropy: f64,
    /// Continuous action width, or `None` for discrete actions.
    act_dim: Option<usize>,
    n_actions: usize,
    rng_noise: Rng,
    grad_steps: u64,
    td_errors: Vec<f32>,
    /// Box bounds the acting side rescales to (continuous actions).
    bounds: Option<(Vec<f32>, Vec<f32>)>,
}

impl SacLearner {
    /// A learner for `actor` and `critic` (autodiff `device`); targets start as copies.
    /// `act_dim` is the continuous action width (`None`: `n_actions` discrete actions).
    pub fn new(
        cfg: SacConfig,
        actor: Actor,
        critic: Critics,
        act_dim: Option<usize>,
        n_actions: usize,
        device: Device,
        rng_noise: Rng,
    ) -> Self {
        let alpha0 = cfg.learned_alpha_init();
        let log_alpha = match (&cfg.ent_coef, alpha0) {
            (_, Some(a)) => a.ln(),
            (AutoOr::Value(v), None) => v.ln(),
            _ => 0.0,
        };
        Self {
            opt_actor: FlatOptimizer::new(OptimizerKind::adam(1e-8), cfg.max_grad_norm),
            opt_critic: FlatOptimizer::new(OptimizerKind::adam(1e-8), cfg.max_grad_norm),
            target_entropy: cfg.target_entropy_for(act_dim, n_actions),
            learn_alpha: alpha0.is_some(),
            critic_target: critic.valid(),
            cfg,
            device,
            actor,
            critic,
            log_alpha,
            opt_alpha: loss::ScalarAdam::default(),
            act_dim,
            n_actions,
            rng_noise,
            grad_steps: 0,
            td_errors: Vec::new(),
            bounds: None,
        }
    }

    /// The actor.
    pub fn actor(&self) -> &Actor {
        &self.actor
    }

    /// The critics.
    pub fn critic(&self) -> &Critics {
        &self.critic
    }

    /// The target critics.
    pub fn critic_target(&self) -> &Critics {
        &self.critic_target
    }

    /// The entropy coefficient α now.
    pub fn alpha(&self) -> f64 {
        self.log_alpha.exp()
    }

    /// |Q₁ − y| of each row of the last batch (new priorities).
    pub fn td_errors(&self) -> &[f32] {
        &self.td_errors
    }

    fn lr(&self, s: &Option<rl_training_core::schedule::Schedule>, p: &Progress) -> f64 {
        s.as_ref().unwrap_or(&self.cfg.learning_rate).at(p)
    }

    fn normal(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.rng_noise.normal() as f32).collect()
    }
}

impl Learner for SacLearner {
    type Batch = TransitionBatch;

    /// One gradient step, as SB3's: critics toward soft targets from the
    /// target critics, the actor through the updated critics, the entropy coefficient (the α
    /// used in both losses is the one before its step, as SB3), then the target critics
    /// every `target_update_interval` steps.
    ///
    /// The batch is split in two halves whose forward and backward passes run on the two
    /// cores at once; each half's loss is its share of the batch mean, so the summed
    /// gradients are the full batch's, and the result does not depend on scheduling.
    fn update(&mut self, batch: &TransitionBatch, progress: &Progress) -> Result<Metrics, RlError> {
        let b = batch.len();
        let od = batch.obs.len() / b.max(1);
        let dev = self.device.clone();
        let inner = dev.clone().inner();
        let (lr_a, lr_c, lr_al) = (
            self.lr(&self.cfg.actor_lr, progress),
            self.lr(&self.cfg.critic_lr, progress),
            self.lr(&self.cfg.alpha_lr, progress),
        );
        let alpha = self.alpha();
        let n = self.n_actions;
        let a_dim = self.act_dim;
        let (eps_next, eps_pi) = match a_dim {
            Some(a) => (self.normal(b * a), self.normal(b * a)),
            None => (Vec::new(), Vec::new()),
        };
        let halves: Vec<std::ops::Range<usize>> = if b >= 2 {
            vec![0..b / 2, b / 2..b]
        } else {
            std::iter::once(0..b).collect()
        };
        let slice =
            |v: &[f32], d: usize, r: &std::ops::Range<usize>| v[r.start * d..r.end * d].to_vec();
        let actor_inner = self.actor.valid();
        let (critic, critic_target) = (&self.critic, &self.critic_target);
        let batch_ref = batch;
        // Critics.
        let parts: Vec<(Vec<f32>, Vec<f32>, f64, Tensor<1>)> = halves
            .par_iter()
            .map(|r| {
                // Each half differentiates its own copy of the parameters (fresh autodiff
                // leaves): burn's graph locking deadlocks when two threads grow one graph.
                let critic = critic.clone().fork(&dev);
                let critic = &critic;
                let bh = r.len();
                let share = bh as f64 / b as f64;
                let next = tensor2(slice(&batch_ref.next_obs, od, r), bh, od, &inner);
                let obs = tensor2(slice(&batch_ref.obs, od, r), bh, od, &dev);
                let v_next = match a_dim {
                    Some(a) => {
                        let eps = tensor2(slice(&eps_next, a, r), bh, a, &inner);
                        let (na, nlogp) = actor_inner.sample(next.clone(), eps);
                        let q = critic_target.min(Tensor::cat(vec![next, na], 1));
                        host(q.reshape([bh]) - nlogp.mul_scalar(alpha))
                    }
                    None => {
                        let lp = host(actor_inner.log_probs(next.clone()));
                        let q = host(critic_target.min(next));
                        loss::discrete_soft_value(&lp, &q, n, alpha as f32)
                    }
                };
                let y = loss::soft_targets(
                    &batch_ref.rewards[r.clone()],
                    &batch_ref.discounts[r.clone()],
                    &batch_ref.terminated[r.clone()],
                    &v_next,
                );
                let qs: Vec<Tensor<1>> = match a_dim {
                    Some(a) => {
                        let act = tensor2(slice(&batch_ref.actions, a, r), bh, a, &dev);
                        critic
                            .forward(Tensor::cat(vec![obs, act], 1))
                            .into_iter()
                            .map(|q| q.reshape([bh]))
                            .collect()
                    }
                    None => {
                        let mut mask = vec![0.0f32; bh * n];
                        for (i, &a) in batch_ref.actions[r.clone()].iter().enumerate() {
                            mask[i * n + (a as usize).min(n - 1)] = 1.0;
                        }
                        let mask = tensor2(mask, bh, n, &dev);
                        critic
                            .forward(obs)
                            .into_iter()
                            .map(|q| (q * mask.clone()).sum_dim(1).reshape([bh]))
                            .collect()
                    }
                };
                let q1 = host(qs[0].clone().inner());
                let w = tensor1(batch_ref.weights[r.clone()].to_vec(), &dev);
                let l = loss::critic_loss(qs, tensor1(y.clone(), &dev), w).mul_scalar(share);
                let lv = host(l.clone().inner())[0] as f64;
                (y, q1, lv, flat_grads(critic, l.backward(), &dev))
            })
            .collect();
        let mut q1_all = Vec::with_capacity(b);
        self.td_errors.clear();
        let mut cl = 0.0;
        let mut g_sum: Option<Tensor<1>> = None;
        for (y, q1, lv, g) in parts {
            self.td_errors
                .extend(q1.iter().zip(&y).map(|(q, y)| (q - y).abs()));
            q1_all.extend(q1);
            cl += lv;
            g_sum = Some(match g_sum {
                Some(s) => s + g,
                None => g,
            });
        }
        let g = g_sum.expect("at least one half");
        let (critic, cstats) = self.opt_critic.step_flat(lr_c, self.critic.clone(), g);
        self.critic = critic;
        // Actor, through the updated critics (their parameters frozen).
        let frozen = self.critic.clone().no_grad();
        let critic_inner = self.critic.valid();
        let actor = &self.actor;
        let parts: Vec<(f64, Vec<f32>, Tensor<1>)> = halves
            .par_iter()
            .map(|r| {
                let (actor, frozen) = (actor.clone().fork(&dev), frozen.clone().fork(&dev));
                let (actor, frozen) = (&actor, &frozen);
                let bh = r.len();
                let share = bh as f64 / b as f64;
                let obs = tensor2(slice(&batch_ref.obs, od, r), bh, od, &dev);
                let (l, stat) = match a_dim {
                    Some(a) => {
                        let eps = tensor2(slice(&eps_pi, a, r), bh, a, &dev);
                        let (act, logp) = actor.sample(obs.clone(), eps);
                        let q = frozen.min(Tensor::cat(vec![obs, act], 1)).reshape([bh]);
                        let stat = host(logp.clone().inner());
                        (loss::actor_loss(logp, q, alpha), stat)
                    }
                    None => {
                        let lp = actor.log_probs(obs.clone());
                        let h = host(lp.clone().inner());
                        // Σ_a π log π per state: what the α loss needs.
                        let stat = h
                            .chunks(n)
                            .map(|row| row.iter().map(|&l| l.exp() * l).sum())
                            .collect();
                        let q = Tensor::from_inner(critic_inner.min(obs.inner()));
                        (loss::discrete_actor_loss(lp, q, alpha), stat)
                    }
                };
                let l = l.mul_scalar(share);
                let lv = host(l.clone().inner())[0] as f64;
                (lv, stat, flat_grads(actor, l.backward(), &dev))
            })
            .collect();
        let mut al = 0.0;
        let mut alpha_stat = Vec::with_capacity(b);
        let mut g_sum: Option<Tensor<1>> = None;
        for (lv, stat, g) in parts {
            al += lv;
            alpha_stat.extend(stat);
            g_sum = Some(match g_sum {
                Some(s) => s + g,
                None => g,
            });
        }
        rl_training_core::algorithm::check_losses(
            progress.num_timesteps,
            &[("losses/qf_loss", cl), ("losses/actor_loss", al)],
        )?;
        let g = g_sum.expect("at least one half");
        let (actor, _) = self.opt_actor.step_flat(lr_a, self.actor.clone(), g);
        self.actor = actor;
        let mean_logp = alpha_stat.iter().map(|&v| v as f64).sum::<f64>() / b as f64;
        if self.learn_alpha {
            let g = loss::alpha_loss_grad(&alpha_stat, self.target_entropy);
            self.log_alpha = self.opt_alpha.step(self.log_alpha, g, lr_al);
        }
        self.grad_steps += 1;
        if self
            .grad_steps
            .is_multiple_of(self.cfg.target_update_interval)
        {
            let t = self.critic_target.clone();
            self.critic_target = polyak(t, &self.critic.valid(), self.cfg.tau);
        }
        let mut m = Metrics::new();
        m.insert("losses/qf_loss".into(), cl);
        m.insert("losses/actor_loss".into(), al);
        m.insert("losses/alpha".into(), alpha);
        m.insert(
            "losses/q_values".into(),
            q1_all.iter().map(|&v| v as f64).sum::<f64>() / b as f64,
        );
        m.insert("losses/entropy".into(), -mean_logp);
        m.insert("losses/qf_grad_norm".into(), cstats.grad_norm as f64);
        m.insert("charts/learning_rate".into(), lr_a);
        Ok(m)
    }

    /// The actor's weights: what the acting side needs.
    fn weights(&self) -> TensorMap {
        module_tensors(&self.actor)
    }

    fn set_weights(&mut self, weights: &TensorMap) -> Result<(), RlError> {
        Ok(set_module_tensors(&mut self.actor, weights, &self.device)?)
    }

    /// Actor, critics and target critics, both optimizers, α and its optimizer, the noise
    /// generator.
    fn save_state(&self) -> LearnerState {
        let mut opt = TensorMap::default();
        let mut state = LearnerState::default();
        state.insert("actor_steps", self.opt_actor.save("actor", &mut opt));
        state.insert("critic_steps", self.opt_critic.save("critic", &mut opt));
        state.insert("grad_steps", self.grad_steps);
        state.insert("log_alpha", self.log_alpha);
        state.insert("opt_alpha", &self.opt_alpha);
        state.insert("rng_noise", &self.rng_noise);
        state.file("actor.safetensors", module_tensors(&self.actor).to_bytes());
        state.file(
            "critic.safetensors",
            module_tensors(&self.critic).to_bytes(),
        );
        let target = module_tensors(&self.critic_target).to_bytes();
        state.file("critic_target.safetensors", target);
        state.file("optimizer.safetensors", opt.to_bytes());
        state
    }

    fn load_state(&mut self, ck: &Checkpoint, entries: &Map<String, Value>) -> Result<(), RlError> {
        let dev = self.device.clone();
        self.actor = read_module(ck, "actor.safetensors", self.actor.clone(), &dev)?;
        self.critic = read_module(ck, "critic.safetensors", self.critic.clone(), &dev)?;
        let target = self.critic_target.clone();
        self.critic_target = read_module(ck, "critic_target.safetensors", target, &dev)?.valid();
        let opt_file = ck.path_of("optimizer.safetensors");
        let mut opt = TensorMap::from_bytes(ck.file("optimizer.safetensors")?, &opt_file)?;
        let steps = state_entry(ck, entries, "actor_steps")?;
        let n = num_params(&self.actor);
        self.opt_actor
            .load("actor", &mut opt, steps, n, &opt_file, &dev)?;
        let steps = state_entry(ck, entries, "critic_steps")?;
        let n = num_params(&self.critic);
        self.opt_critic
            .load("critic", &mut opt, steps, n, &opt_file, &dev)?;
        self.grad_steps = state_entry(ck, entries, "grad_steps")?;
        self.log_alpha = state_entry(ck, entries, "log_alpha")?;
        self.opt_alpha = state_entry(ck, entries, "opt_alpha")?;
        self.rng_noise = state_entry(ck, entries, "rng_noise")?;
        Ok(())
    }
}

/// Policy actions for `n` flat observations: `(env actions, stored actions)`. Continuous:
/// stored in [−1, 1], rescaled to the bounds for the env.
fn act(
    actor: &Actor,
    flat: &[f32],
    n: usize,
    deterministic: bool,
    rng: &mut Rng,
    bounds: &Option<(Vec<f32>, Vec<f32>)>,
    clip: bool,
    device: &Device,
) -> (Vec<f32>, Vec<f32>) {
    let d = flat.len() / n.max(1);
    let obs = tensor2(flat.to_vec(), n, d, device);
    match bounds {
        Some((lo, hi)) => {
            let a = lo.len();
            let squashed = if deterministic {
                host(actor.mean_action(obs))
            } else {
                let eps = (0..n * a).map(|_| rng.normal() as f32).collect();
                host(actor.sample(obs, tensor2(eps, n, a, device)).0)
            };
            let env = squashed
                .iter()
                .enumerate()
                .map(|(i, &s)| {
                    let (l, h) = (lo[i % a], hi[i % a]);
                    let v = l + (s + 1.0) * 0.5 * (h - l);
                    if clip { v.clamp(l, h) } else { v }
                })
                .collect();
            (env, squashed)
        }
        None => {
            let lp = host(actor.log_probs(obs));
            let k = lp.len() / n.max(1);
            let acts: Vec<f32> = lp
                .chunks(k)
                .map(|row| {
                    if deterministic {
                        let mut best = 0;
                        for (i, &v) in row.iter().enumerate() {
                            if v > row[best] {
                                best = i;
                            }
                        }
                        best as f32
                    } else {
                        let u = rng.uniform() as f32;
                        let mut c = 0.0;
                        let mut pick = k - 1;
                        for (i, &l) in row.iter().enumerate() {
                            c += l.exp();
                            if u < c {
                                pick = i;
                                break;
                            }
                        }
                        pick as f32
                    }
                })
                .collect();
            (acts.clone(), acts)
        }
    }
}

/// The acting side of SAC: an inference copy of the actor, the Box bounds.
pub struct SacActor {
    actor: Actor,
    bounds: Option<(Vec<f32>, Vec<f32>)>,
    clip_actions: bool,
    device: Device,
}

impl OffPolicyActor for SacActor {
    /// The squashed mean (continuous) or the most likely action (discrete) when
    /// deterministic; a policy sample otherwise.
    fn act(
        &self,
        flat: &[f32],
        n: usize,
        rng: &mut Rng,
        mode: ActMode,
        _progress: &Progress,
    ) -> (Vec<f32>, Vec<f32>) {
        let deterministic = mode == ActMode::Deterministic;
        let (bounds, clip) = (&self.bounds, self.clip_actions);
        act(
            &self.actor,
            flat,
            n,
            deterministic,
            rng,
            bounds,
            clip,
            &self.device,
        )
    }
}

impl OffPolicyLearner for SacLearner {
    type Config = SacConfig;
    type Actor = SacActor;
    const NAME: &'static str = "sac";

    fn settings(cfg: &SacConfig) -> OffPolicySettings {
        cfg.replay
            .settings(cfg.train_freq, cfg.batch_size, cfg.gamma)
    }

    fn stored_action_dim(space: &Space) -> Result<usize, String> {
        match space {
            Space::Discrete { .. } => Ok(1),
            Space::Box { low, high, .. }
                if low.iter().chain(high.iter()).all(|v| v.is_finite()) =>
            {
                Ok(low.len())
            }
            other => Err(format!(
                "sac needs a Discrete or a bounded Box action space, not {other:?}"
            )),
        }
    }

    fn build(
        cfg: SacConfig,
        run: &RunConfig,
        (obs_space, act_space): (&Space, &Space),
        device: Device,
    ) -> Result<Self, RlError> {
        let (act_dim, n_actions) = action_shape(act_space);
        let mut rng = Rng::for_stream(run.seed, "init");
        let (arch, act_fn) = (&cfg.policy_kwargs.net_arch, cfg.policy_kwargs.activation_fn);
        let d_obs = obs_space.flat_dim();
        let actor = Actor::new(d_obs, act_dim, n_actions, arch, act_fn, &mut rng, &device);
        let n_critics = if cfg.twin_q { 2 } else { 1 };
        let critic = match act_dim {
            Some(a) => Critics::new(n_critics, d_obs + a, 1, arch, act_fn, &mut rng, &device),
            None => Critics::new(n_critics, d_obs, n_actions, arch, act_fn, &mut rng, &device),
        };
        let rng_noise = Rng::for_stream(run.seed, "noise");
        let mut learner = Self::new(cfg, actor, critic, act_dim, n_actions, device, rng_noise);
        learner.bounds = act_space.bounds().map(|(l, h)| (l.to_vec(), h.to_vec()));
        Ok(learner)
    }

    fn config(&self) -> &SacConfig {
        &self.cfg
    }

    fn actor(&self) -> SacActor {
        SacActor {
            actor: self.actor.valid(),
            bounds: self.bounds.clone(),
            clip_actions: self.cfg.clip_actions,
            device: self.device.clone().inner(),
        }
    }

    fn actor_from_weights(
        cfg: &SacConfig,
        (obs_space, act_space): (&Space, &Space),
        weights: &TensorMap,
        device: &Device,
    ) -> Result<SacActor, RlError> {
        let (act_dim, n_actions) = action_shape(act_space);
        let (arch, act_fn) = (&cfg.policy_kwargs.net_arch, cfg.policy_kwargs.activation_fn);
        let d_obs = obs_space.flat_dim();
        let rng = &mut Rng::seed_from(0);
        let actor = Actor::new(d_obs, act_dim, n_actions, arch, act_fn, rng, device);
        Ok(SacActor {
            actor: load_module_tensors(actor, weights, "weights", device)?,
            bounds: act_space.bounds().map(|(l, h)| (l.to_vec(), h.to_vec())),
            clip_actions: cfg.clip_actions,
            device: device.clone(),
        })
    }

    fn priorities(&self) -> &[f32] {
        &self.td_errors
    }
}

/// `(continuous width, discrete actions)`: `(Some(d), 0)` for a Box, `(None, n)` otherwise.
fn action_shape(space: &Space) -> (Option<usize>, usize) {
    match space {
        Space::Box { low, .. } => (Some(low.len()), 0),
        other => (None, other.flat_dim()),
    }
}

/// A SAC agent with its envs and replay buffer.
pub type Sac = OffPolicyAgent<SacLearner>;
