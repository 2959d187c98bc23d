//! rl-training-cql: Conservative Q-Learning (Kumar et al. 2020) from a dataset. Continuous actions: on
//! SAC (RLlib's CQL): SAC's actor and twin critics (`rl-training-sac`'s networks), the critics' TD loss
//! plus the CQL(H) penalty over `num_actions` random, current-policy and next-policy actions per
//! state, the actor cloning the data's actions for the first `bc_iters` steps, optionally a
//! Lagrangian CQL weight. Discrete actions: on DQN, a Q-network with a Polyak target, the
//! Huber TD loss plus `min_q_weight · (logsumexp_a Q(s, a) − Q(s, a_data))`, greedy actions.
#![warn(missing_docs)]

pub mod config;
pub mod loss;

pub use config::CqlConfig;

pub use rl_training_core::agent::EnvMaker;
use rl_training_core::algorithm::{
    Learner, LearnerState, Progress, RlError, check_losses, state_entry,
};
use rl_training_core::batch::{host, tensor1, tensor2};
use rl_training_core::burn::module::Module;
use rl_training_core::burn::tensor::{Device, Tensor};
use rl_training_core::checkpoint::{Checkpoint, read_module};
use rl_training_core::config::RunConfig;
use rl_training_core::logger::Metrics;
use rl_training_core::optim::{FlatOptimizer, OptimizerKind};
use rl_training_core::params::{
    TensorMap, flat_grads, module_tensors, num_params, polyak, set_module_tensors,
};
use rl_training_core::{Rng, Space};
use rl_training_offline::{
    OfflineAgent, OfflineBatch, OfflineLearner, OfflineSettings, flat_batch_obs,
};
use rl_training_sac::loss::ScalarAdam;
use rl_training_sac::{Actor, Critics};
use serde_json::{Map, Value};

/// The action space's form.
#[derive(Debug, Clone)]
enum Kind {
    /// A bounded Box: actions are learned in [−1, 1] and rescaled.
    Continuous { low: Vec<f32>, high: Vec<f32> },
    /// `n` discrete actions from `start`.
    Discrete { n: usize, start: i64 },
}

/// The learning side of CQL: critics and their targets, the actor (continuous actions), the
/// optimizers, the entropy and Lagrangian coefficients, the noise generator.
pub struct CqlLearner {
    cfg: CqlConfig,
    obs_space: Space,
    device: Device,
    infer: Device,
    kind: Kind,
    /// The actor (continuous actions only).
    actor: Option<Actor>,
    critic: Critics,
    critic_target: Critics,
    opt_actor: FlatOptimizer,
    opt_critic: FlatOptimizer,
    log_alpha: f64,
    opt_alpha: ScalarAdam,
    learn_alpha: bool,
    target_entropy: f64,
    log_alpha_prime: f64,
    opt_alpha_prime: ScalarAdam,
    rng_noise: Rng,
    grad_steps: u64,
}

/// A CQL agent on a dataset.
pub type Cql = OfflineAgent<CqlLearner>;

impl CqlLearner {
    /// A learner with fresh networks for the spaces (observations, actions) on the autodiff
    /// `device`.
    fn with_spaces(
        cfg: CqlConfig,
        run: &RunConfig,
        (obs_space, act_space): (&Space, &Space),
        device: Device,
    ) -> Result<Self, RlError> {
        let kind = match act_space {
            Space::Discrete { n, start } => Kind::Discrete {
                n: *n,
                start: *start,
            },
            Space::Box { low, high, .. } if low.iter().chain(high).all(|v| v.is_finite()) => {
                Kind::Continuous {
                    low: low.clone(),
                    high: high.clone(),
                }
            }
            other => {
                return Err(RlError::Config(rl_training_core::config::ConfigError::new(
                    &run.env_id,
                    format!(
                        "cql needs a Discrete or a bounded Box action space, not {}",
                        other.describe()
                    ),
                )));
            }
        };
        let mut rng = Rng::for_stream(run.seed, "init");
        let (arch, act_fn) = (&cfg.policy_kwargs.net_arch, cfg.policy_kwargs.activation_fn);
        let d_obs = obs_space.flat_dim();
        let (actor, critic) = match &kind {
            Kind::Continuous { low, .. } => {
                let a = low.len();
                let actor = Actor::new(d_obs, Some(a), 0, arch, act_fn, &mut rng, &device);
                let n = if cfg.twin_q { 2 } else { 1 };
                let critic = Critics::new(n, d_obs + a, 1, arch, act_fn, &mut rng, &device);
                (Some(actor), critic)
            }
            Kind::Discrete { n, .. } => (
                None,
                Critics::new(1, d_obs, *n, arch, act_fn, &mut rng, &device),
            ),
        };
        let alpha0 = cfg.learned_alpha_init();
        let log_alpha = match (&cfg.ent_coef, alpha0) {
            (_, Some(a)) => a.ln(),
            (rl_training_sac::AutoOr::Value(v), None) => v.ln(),
            _ => 0.0,
        };
        let target_entropy = match (&cfg.target_entropy, &kind) {
            (rl_training_sac::AutoOr::Value(v), _) => *v,
            (_, Kind::Continuous { low, .. }) => -(low.len() as f64),
            (_, Kind::Discrete { .. }) => 0.0,
        };
        Ok(Self {
            opt_actor: FlatOptimizer::new(OptimizerKind::adam(1e-8), cfg.max_grad_norm),
            opt_critic: FlatOptimizer::new(OptimizerKind::adam(1e-8), cfg.max_grad_norm),
            critic_target: critic.valid(),
            learn_alpha: alpha0.is_some(),
            log_alpha,
            opt_alpha: ScalarAdam::default(),
            target_entropy,
            log_alpha_prime: 0.0,
            opt_alpha_prime: ScalarAdam::default(),
            rng_noise: Rng::for_stream(run.seed, "noise"),
            grad_steps: 0,
            infer: device.clone().inner(),
            device,
            obs_space: obs_space.clone(),
            cfg,
            kind,
            actor,
            critic,
        })
    }

    /// The hyperparameters.
    pub fn config(&self) -> &CqlConfig {
        &self.cfg
    }

    /// The critics (the Q-network for discrete actions).
    pub fn critic(&self) -> &Critics {
        &self.critic
    }

    /// The actor (continuous actions).
    pub fn actor(&self) -> Option<&Actor> {
        self.actor.as_ref()
    }

    /// Gradient steps so far.
    pub fn grad_steps(&self) -> u64 {
        self.grad_steps
    }

    fn normal(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.rng_noise.normal() as f32).collect()
    }

    fn lrs(&self, p: &Progress) -> (f64, f64, f64) {
        let (t, tot) = (p.num_timesteps, p.total_timesteps);
        (
            self.cfg.lr(&self.cfg.actor_lr, t, tot),
            self.cfg.lr(&self.cfg.critic_lr, t, tot),
            self.cfg.lr(&None, t, tot),
        )
    }

    fn finish_step(&mut self) {
        self.grad_steps += 1;
        if self
            .grad_steps
            .is_multiple_of(self.cfg.target_update_interval)
        {
            let t = self.critic_target.clone();
            self.critic_target = polyak(t, &self.critic.valid(), self.cfg.tau);
        }
    }

    /// One continuous CQL step; returns its metrics.
    fn update_continuous(
        &mut self,
        b: &OfflineBatch,
        progress: &Progress,
    ) -> Result<Vec<(&'static str, f64)>, RlError> {
        let Kind::Continuous { low, high } = self.kind.clone() else {
            unreachable!("continuous kind")
        };
        let cfg = self.cfg.clone();
        let (lr_a, lr_c, lr_al) = self.lrs(progress);
        let n = b.data.len();
        let ad = low.len();
        let (obs, next) = flat_batch_obs(&self.obs_space, b);
        let od = obs.len() / n.max(1);
        let (dev, inner) = (self.device.clone(), self.infer.clone());
        // Data actions into the actor's [−1, 1].
        let acts: Vec<f32> = b
            .data
            .actions
            .iter()
            .enumerate()
            .map(|(i, &a)| {
                let (l, h) = (low[i % ad], high[i % ad]);
                (2.0 * (a - l) / (h - l) - 1.0).clamp(-1.0, 1.0)
            })
            .collect();
        let alpha = self.log_alpha.exp();
        let actor_i = self.actor.as_ref().expect("continuous actor").valid();
        // TD targets from the target critics at policy actions in s′.
        let eps = self.normal(n * ad);
        let next_t = tensor2(next.clone(), n, od, &inner);
        let (na, nlogp) = actor_i.sample(next_t.clone(), tensor2(eps, n, ad, &inner));
        let mut v = host(
            self.critic_target
                .min(Tensor::cat(vec![next_t, na], 1))
                .reshape([n]),
        );
        if !cfg.deterministic_backup {
            for (v, l) in v.iter_mut().zip(host(nlogp)) {
                *v -= alpha as f32 * l;
            }
        }
        let discounts = vec![cfg.gamma as f32; n];
        let term: Vec<f32> = b.data.terminated.iter().map(|&t| t as u8 as f32).collect();
        let y = rl_training_sac::loss::soft_targets(&b.data.rewards, &discounts, &term, &v);
        // Sampled actions of the CQL term: N per state, uniform, π(·|s) and π(·|s′).
        let k = cfg.num_actions;
        let repeat = |x: &[f32]| -> Vec<f32> {
            x.chunks(od)
                .flat_map(|row| std::iter::repeat_n(row, k).flatten().copied())
                .collect()
        };
        let (obs_rep, next_rep) = (repeat(&obs), repeat(&next));
        let rand_a: Vec<f32> = (0..n * k * ad)
            .map(|_| self.rng_noise.uniform_range(-1.0, 1.0) as f32)
            .collect();
        let e1 = self.normal(n * k * ad);
        let e2 = self.normal(n * k * ad);
        let (ca, clogp) = actor_i.sample(
            tensor2(obs_rep.clone(), n * k, od, &inner),
            tensor2(e1, n * k, ad, &inner),
        );
        let (na2, nlogp2) = actor_i.sample(
            tensor2(next_rep, n * k, od, &inner),
            tensor2(e2, n * k, ad, &inner),
        );
        let obs_rep_d = tensor2(obs_rep, n * k, od, &dev);
        let q_at = |a: Vec<f32>| -> Vec<Tensor<2>> {
            let input = Tensor::cat(vec![obs_rep_d.clone(), tensor2(a, n * k, ad, &dev)], 1);
            self.critic
                .forward(input)
                .into_iter()
                .map(|q| q.reshape([n, k]))
                .collect()
        };
        let (q_rand, q_curr, q_next) = (q_at(rand_a), q_at(host(ca)), q_at(host(na2)));
        let dens = |v: Vec<f32>| tensor2(v, n, k, &dev);
        let rand_density = vec![ad as f32 * 0.5f32.ln(); n * k];
        let (clogp, nlogp2) = (host(clogp), host(nlogp2));
        let obs_d = tensor2(obs.clone(), n, od, &dev);
        let act_d = tensor2(acts, n, ad, &dev);
        let q_data: Vec<Tensor<1>> = self
            .critic
            .forward(Tensor::cat(vec![obs_d.clone(), act_d.clone()], 1))
            .into_iter()
            .map(|q| q.reshape([n]))
            .collect();
        let y_t = tensor1(y, &dev);
        let alpha_prime = self.log_alpha_prime.exp().clamp(0.0, 1e6);
        let mut total: Option<Tensor<1>> = None;
        let (mut td_sum, mut pen_raw) = (0.0, Vec::new());
        let q1_mean = host(q_data[0].clone().inner())
            .iter()
            .map(|&q| q as f64)
            .sum::<f64>()
            / n as f64;
        for (i, qd) in q_data.into_iter().enumerate() {
            let td = rl_training_core::losses::mse(qd.clone(), y_t.clone());
            let pen = loss::cql_penalty(
                [q_rand[i].clone(), q_next[i].clone(), q_curr[i].clone()],
                [
                    dens(rand_density.clone()),
                    dens(nlogp2.clone()),
                    dens(clogp.clone()),
                ],
                qd,
                cfg.temperature,
                cfg.min_q_weight,
            );
            td_sum += host(td.clone().inner())[0] as f64;
            pen_raw.push(host(pen.clone().inner())[0] as f64);
            let pen = if cfg.lagrangian {
                pen.sub_scalar(cfg.lagrangian_thresh)
                    .mul_scalar(alpha_prime)
            } else {
                pen
            };
            let l = td + pen;
            total = Some(match total {
                Some(t) => t + l,
                None => l,
            });
        }
        let cql_sum: f64 = pen_raw.iter().sum();
        check_losses(
            progress.num_timesteps,
            &[("losses/qf_loss", td_sum), ("losses/cql_loss", cql_sum)],
        )?;
        let g = flat_grads(&self.critic, total.expect("a critic").backward(), &dev);
        self.critic = self.opt_critic.step_flat(lr_c, self.critic.clone(), g).0;
        if cfg.lagrangian {
            let g = loss::alpha_prime_grad(alpha_prime, &pen_raw, cfg.lagrangian_thresh);
            self.log_alpha_prime = self.opt_alpha_prime.step(self.log_alpha_prime, g, lr_c);
        }
        // Actor: behaviour cloning first, then SAC's loss through the updated critics.
        let eps = self.normal(n * ad);
        let actor = self.actor.take().expect("continuous actor");
        let (pa, plogp) = actor.sample(obs_d.clone(), tensor2(eps, n, ad, &dev));
        let plogp_host = host(plogp.clone().inner());
        let bc_phase = self.grad_steps < cfg.bc_iters;
        let a_loss = if bc_phase {
            loss::bc_actor_loss(plogp, actor.log_prob_of(obs_d, act_d), alpha)
        } else {
            let frozen = self.critic.clone().no_grad();
            let q = frozen.min(Tensor::cat(vec![obs_d, pa], 1)).reshape([n]);
            rl_training_sac::loss::actor_loss(plogp, q, alpha)
        };
        let al = host(a_loss.clone().inner())[0] as f64;
        check_losses(progress.num_timesteps, &[("losses/actor_loss", al)])?;
        let g = flat_grads(&actor, a_loss.backward(), &dev);
        self.actor = Some(self.opt_actor.step_flat(lr_a, actor, g).0);
        if self.learn_alpha {
            let g = rl_training_sac::loss::alpha_loss_grad(&plogp_host, self.target_entropy);
            self.log_alpha = self.opt_alpha.step(self.log_alpha, g, lr_al);
        }
        self.finish_step();
        let ent = -plogp_host.iter().map(|&l| l as f64).sum::<f64>() / n as f64;
        Ok(vec![
            ("losses/qf_loss", td_sum),
            ("losses/cql_loss", cql_sum),
            ("losses/actor_loss", al),
            ("losses/alpha", alpha),
            ("losses/alpha_prime", alpha_prime),
            ("losses/q_values", q1_mean),
            ("losses/entropy", ent),
            ("losses/bc_phase", bc_phase as u8 as f64),
        ])
    }

    /// One discrete CQL step; returns its metrics.
    fn update_discrete(
        &mut self,
        b: &OfflineBatch,
        progress: &Progress,
    ) -> Result<Vec<(&'static str, f64)>, RlError> {
        let Kind::Discrete { n: na, start } = self.kind.clone() else {
            unreachable!("discrete kind")
        };
        let (_, lr_c, _) = self.lrs(progress);
        let n = b.data.len();
        let (obs, next) = flat_batch_obs(&self.obs_space, b);
        let od = obs.len() / n.max(1);
        let (dev, inner) = (self.device.clone(), self.infer.clone());
        let q_next = host(self.critic_target.forward(tensor2(next, n, od, &inner))[0].clone());
        let v: Vec<f32> = q_next
            .chunks(na)
            .map(|row| row.iter().copied().fold(f32::NEG_INFINITY, f32::max))
            .collect();
        let discounts = vec![self.cfg.gamma as f32; n];
        let term: Vec<f32> = b.data.terminated.iter().map(|&t| t as u8 as f32).collect();
        let y = rl_training_sac::loss::soft_targets(&b.data.rewards, &discounts, &term, &v);
        let mut mask = vec![0.0f32; n * na];
        for (i, &a) in b.data.actions.iter().enumerate() {
            mask[i * na + ((a as i64 - start) as usize).min(na - 1)] = 1.0;
        }
        let q_all = self.critic.forward(tensor2(obs, n, od, &dev))[0].clone();
        let q_data = (q_all.clone() * tensor2(mask, n, na, &dev))
            .sum_dim(1)
            .reshape([n]);
        let td = rl_training_core::losses::smooth_l1(q_data.clone(), tensor1(y, &dev), 1.0).mean();
        let q_mean = host(q_data.clone().inner())
            .iter()
            .map(|&q| q as f64)
            .sum::<f64>()
            / n as f64;
        let pen = loss::discrete_cql_penalty(q_all, q_data, self.cfg.min_q_weight);
        let (tv, pv) = (
            host(td.clone().inner())[0] as f64,
            host(pen.clone().inner())[0] as f64,
        );
        check_losses(
            progress.num_timesteps,
            &[("losses/qf_loss", tv), ("losses/cql_loss", pv)],
        )?;
        let g = flat_grads(&self.critic, (td + pen).backward(), &dev);
        self.critic = self.opt_critic.step_flat(lr_c, self.critic.clone(), g).0;
        self.finish_step();
        Ok(vec![
            ("losses/qf_loss", tv),
            ("losses/cql_loss", pv),
            ("losses/q_values", q_mean),
        ])
    }
}

impl Learner for CqlLearner {
    type Batch = OfflineBatch;

    /// One CQL gradient step on `batch` (continuous or discrete form).
    fn update(&mut self, batch: &OfflineBatch, progress: &Progress) -> Result<Metrics, RlError> {
        let stats = match self.kind {
            Kind::Continuous { .. } => self.update_continuous(batch, progress)?,
            Kind::Discrete { .. } => self.update_discrete(batch, progress)?,
        };
        Ok(stats.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }

    /// The acting side's weights: the actor (continuous) or the Q-network (discrete).
    fn weights(&self) -> TensorMap {
        match &self.actor {
            Some(a) => module_tensors(a),
            None => module_tensors(&self.critic),
        }
    }

    fn set_weights(&mut self, weights: &TensorMap) -> Result<(), RlError> {
        match &mut self.actor {
            Some(a) => set_module_tensors(a, weights, &self.device)?,
            None => set_module_tensors(&mut self.critic, weights, &self.device)?,
        }
        Ok(())
    }

    /// Networks, optimizers, both coefficients and their optimizers, the noise generator.
    fn save_state(&self) -> LearnerState {
        let mut opt = TensorMap::default();
        let mut state = LearnerState::default();
        let actor_steps = match &self.actor {
            Some(_) => self.opt_actor.save("actor", &mut opt),
            None => 0,
        };
        state.insert("actor_steps", actor_steps);
        state.insert("critic_steps", self.opt_critic.save("critic", &mut opt));
        state.insert("grad_steps", self.grad_steps);
        state.insert("log_alpha", self.log_alpha);
        state.insert("opt_alpha", &self.opt_alpha);
        state.insert("log_alpha_prime", self.log_alpha_prime);
        state.insert("opt_alpha_prime", &self.opt_alpha_prime);
        state.insert("rng_noise", &self.rng_noise);
        state.file(
            "critic.safetensors",
            module_tensors(&self.critic).to_bytes(),
        );
        let target = module_tensors(&self.critic_target).to_bytes();
        state.file("critic_target.safetensors", target);
        state.file("optimizer.safetensors", opt.to_bytes());
        if let Some(a) = &self.actor {
            state.file("actor.safetensors", module_tensors(a).to_bytes());
        }
        state
    }

    fn load_state(&mut self, ck: &Checkpoint, entries: &Map<String, Value>) -> Result<(), RlError> {
        let dev = self.device.clone();
        let opt_file = ck.path_of("optimizer.safetensors");
        let mut opt = TensorMap::from_bytes(ck.file("optimizer.safetensors")?, &opt_file)?;
        if let Some(actor) = self.actor.take() {
            let actor = read_module(ck, "actor.safetensors", actor, &dev)?;
            let (steps, np) = (state_entry(ck, entries, "actor_steps")?, num_params(&actor));
            self.opt_actor
                .load("actor", &mut opt, steps, np, &opt_file, &dev)?;
            self.actor = Some(actor);
        }
        self.critic = read_module(ck, "critic.safetensors", self.critic.clone(), &dev)?;
        let target = self.critic_target.clone();
        self.critic_target = read_module(ck, "critic_target.safetensors", target, &dev)?.valid();
        let (steps, np) = (
            state_entry(ck, entries, "critic_steps")?,
            num_params(&self.critic),
        );
        self.opt_critic
            .load("critic", &mut opt, steps, np, &opt_file, &dev)?;
        self.grad_steps = state_entry(ck, entries, "grad_steps")?;
        self.log_alpha = state_entry(ck, entries, "log_alpha")?;
        self.opt_alpha = state_entry(ck, entries, "opt_alpha")?;
        self.log_alpha_prime = state_entry(ck, entries, "log_alpha_prime")?;
        self.opt_alpha_prime = state_entry(ck, entries, "opt_alpha_prime")?;
        self.rng_noise = state_entry(ck, entries, "rng_noise")?;
        Ok(())
    }
}

impl OfflineLearner for CqlLearner {
    type Config = CqlConfig;
    const NAME: &'static str = "cql";

    fn settings(cfg: &CqlConfig) -> OfflineSettings {
        OfflineSettings {
            batch_size: cfg.batch_size,
            updates_per_iteration: cfg.updates_per_iteration,
            returns_gamma: None,
            needs_rewards: Some("CQL learns Q-values from rewards"),
        }
    }

    fn build(
        cfg: CqlConfig,
        run: &RunConfig,
        spaces: (&Space, &Space),
        device: Device,
    ) -> Result<Self, RlError> {
        Self::with_spaces(cfg, run, spaces, device)
    }

    fn config(&self) -> &CqlConfig {
        &self.cfg
    }

    /// Continuous: the squashed mean when `deterministic`, a policy sample otherwise,
    /// rescaled to the bounds. Discrete: the greedy action.
    fn act(&self, flat: Vec<f32>, n: usize, rng: &mut Rng, deterministic: bool) -> Vec<f32> {
        let d = flat.len() / n.max(1);
        let x = tensor2(flat, n, d, &self.infer);
        match &self.kind {
            Kind::Continuous { low, high } => {
                let a = low.len();
                let actor = self.actor.as_ref().expect("continuous actor").valid();
                let s = if deterministic {
                    host(actor.mean_action(x))
                } else {
                    let eps = (0..n * a).map(|_| rng.normal() as f32).collect();
                    host(actor.sample(x, tensor2(eps, n, a, &self.infer)).0)
                };
                s.iter()
                    .enumerate()
                    .map(|(i, &v)| {
                        let (l, h) = (low[i % a], high[i % a]);
                        (l + (v + 1.0) * 0.5 * (h - l)).clamp(l, h)
                    })
                    .collect()
            }
            Kind::Discrete { n: na, start } => {
                let q = host(self.critic.valid().forward(x)[0].clone());
                q.chunks(*na)
                    .map(|row| {
                        let mut best = 0;
                        for (i, &v) in row.iter().enumerate() {
                            if v > row[best] {
                                best = i;
                            }
                        }
                        (best as i64 + start) as f32
                    })
                    .collect()
            }
        }
    }

    fn iteration_metrics(&self, progress: &Progress, m: &mut Metrics) {
        m.insert("charts/learning_rate".into(), self.lrs(progress).2);
        m.insert("charts/gradient_steps".into(), self.grad_steps as f64);
    }
}
