//! rl-cql: Conservative Q-Learning (Kumar et al. 2020) from a dataset. Continuous actions: on
//! SAC (RLlib's CQL): SAC's actor and twin critics (`rl-sac`'s networks), the critics' TD loss
//! plus the CQL(H) penalty over `num_actions` random, current-policy and next-policy actions per
//! state, the actor cloning the data's actions for the first `bc_iters` steps, optionally a
//! Lagrangian CQL weight. Discrete actions: on DQN, a Q-network with a Polyak target, the
//! Huber TD loss plus `min_q_weight · (logsumexp_a Q(s, a) − Q(s, a_data))`, greedy actions.
#![warn(missing_docs)]

pub mod config;
pub mod loss;

pub use config::CqlConfig;

pub use rl_core::agent::EnvMaker;
use rl_core::algorithm::{Algorithm, RlError, check_losses};
use rl_core::batch::{host, tensor1, tensor2};
use rl_core::burn::module::Module;
use rl_core::burn::tensor::{Device, Tensor};
use rl_core::checkpoint::{read_json, read_module, read_run, write_checkpoint};
use rl_core::config::{AlgoConfig, RunConfig};
use rl_core::logger::Metrics;
use rl_core::optim::{FlatOptimizer, OptimizerKind};
use rl_core::params::{TensorMap, flat_grads, module_tensors, num_params, polyak};
use rl_core::{Rng, Space};
use rl_offline::{CoreState, OfflineBatch, OfflineCore};
use rl_sac::loss::ScalarAdam;
use rl_sac::{Actor, Critics};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Instant;

/// The action space's form.
#[derive(Debug, Clone)]
enum Kind {
    /// A bounded Box: actions are learned in [−1, 1] and rescaled.
    Continuous { low: Vec<f32>, high: Vec<f32> },
    /// `n` discrete actions from `start`.
    Discrete { n: usize, start: i64 },
}

/// What `state.json` holds besides the family's [`CoreState`].
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SavedState {
    core: CoreState,
    actor_steps: u64,
    critic_steps: u64,
    grad_steps: u64,
    log_alpha: f64,
    opt_alpha: ScalarAdam,
    log_alpha_prime: f64,
    opt_alpha_prime: ScalarAdam,
    rng_noise: Rng,
}

/// A CQL learner on a dataset.
pub struct Cql {
    core: OfflineCore,
    cfg: CqlConfig,
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

impl Cql {
    /// A fresh learner for `run` (its `algo_kwargs` are CQL hyperparameters, its
    /// `offline_data.input` the dataset) on `device`.
    pub fn new(run: &RunConfig, make_env: EnvMaker<'_>, device: &Device) -> Result<Self, RlError> {
        let cfg = CqlConfig::from_kwargs(&run.algo_kwargs).map_err(RlError::Config)?;
        let core = OfflineCore::new(run, make_env, None, None)?;
        if !core.stream.dataset().spec().has_rewards {
            return Err(RlError::Config(rl_core::config::ConfigError::new(
                core.stream.dataset().file(),
                "no rewards column; CQL learns Q-values from rewards",
            )));
        }
        let kind = match &core.act_space {
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
                return Err(RlError::Config(rl_core::config::ConfigError::new(
                    &run.env_id,
                    format!(
                        "cql needs a Discrete or a bounded Box action space, not {}",
                        other.describe()
                    ),
                )));
            }
        };
        let device = device.clone().autodiff();
        let mut rng = Rng::for_stream(run.seed, "init");
        let (arch, act_fn) = (&cfg.policy_kwargs.net_arch, cfg.policy_kwargs.activation_fn);
        let d_obs = core.obs_space.flat_dim();
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
            (rl_sac::AutoOr::Value(v), None) => v.ln(),
            _ => 0.0,
        };
        let target_entropy = match (&cfg.target_entropy, &kind) {
            (rl_sac::AutoOr::Value(v), _) => *v,
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
            core,
            cfg,
            kind,
            actor,
            critic,
        })
    }

    /// Loads a checkpoint written by [`Algorithm::save`]; `device` overrides the saved one.
    pub fn load(dir: &Path, make_env: EnvMaker<'_>, device: &Device) -> Result<Self, RlError> {
        let (ck, run) = read_run(dir, "cql")?;
        let mut c = Self::new(&run, make_env, device)?;
        let state: SavedState = read_json(&ck, "state.json")?;
        let dev = c.device.clone();
        let opt_file = ck.path_of("optimizer.safetensors");
        let mut opt = TensorMap::from_bytes(ck.file("optimizer.safetensors")?, &opt_file)?;
        if let Some(actor) = c.actor.take() {
            let actor = read_module(&ck, "actor.safetensors", actor, &dev)?;
            let np = num_params(&actor);
            c.opt_actor
                .load("actor", &mut opt, state.actor_steps, np, &opt_file, &dev)?;
            c.actor = Some(actor);
        }
        c.critic = read_module(&ck, "critic.safetensors", c.critic.clone(), &dev)?;
        c.critic_target = read_module(
            &ck,
            "critic_target.safetensors",
            c.critic_target.clone(),
            &dev,
        )?
        .valid();
        let np = num_params(&c.critic);
        c.opt_critic
            .load("critic", &mut opt, state.critic_steps, np, &opt_file, &dev)?;
        c.grad_steps = state.grad_steps;
        c.log_alpha = state.log_alpha;
        c.opt_alpha = state.opt_alpha;
        c.log_alpha_prime = state.log_alpha_prime;
        c.opt_alpha_prime = state.opt_alpha_prime;
        c.rng_noise = state.rng_noise;
        c.core.restore(state.core)?;
        Ok(c)
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

    fn lrs(&self) -> (f64, f64, f64) {
        let (t, tot) = (self.core.num_timesteps, self.core.total_timesteps);
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
    fn update_continuous(&mut self, b: &OfflineBatch) -> Result<Vec<(&'static str, f64)>, RlError> {
        let Kind::Continuous { low, high } = self.kind.clone() else {
            unreachable!("continuous kind")
        };
        let cfg = self.cfg.clone();
        let (lr_a, lr_c, lr_al) = self.lrs();
        let n = b.data.len();
        let ad = low.len();
        let (obs, next) = self.core.flat_batch_obs(b);
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
        let y = rl_sac::loss::soft_targets(&b.data.rewards, &discounts, &term, &v);
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
            let td = rl_core::losses::mse(qd.clone(), y_t.clone());
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
            self.core.num_timesteps,
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
            rl_sac::loss::actor_loss(plogp, q, alpha)
        };
        let al = host(a_loss.clone().inner())[0] as f64;
        check_losses(self.core.num_timesteps, &[("losses/actor_loss", al)])?;
        let g = flat_grads(&actor, a_loss.backward(), &dev);
        self.actor = Some(self.opt_actor.step_flat(lr_a, actor, g).0);
        if self.learn_alpha {
            let g = rl_sac::loss::alpha_loss_grad(&plogp_host, self.target_entropy);
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
    fn update_discrete(&mut self, b: &OfflineBatch) -> Result<Vec<(&'static str, f64)>, RlError> {
        let Kind::Discrete { n: na, start } = self.kind.clone() else {
            unreachable!("discrete kind")
        };
        let (_, lr_c, _) = self.lrs();
        let n = b.data.len();
        let (obs, next) = self.core.flat_batch_obs(b);
        let od = obs.len() / n.max(1);
        let (dev, inner) = (self.device.clone(), self.infer.clone());
        let q_next = host(self.critic_target.forward(tensor2(next, n, od, &inner))[0].clone());
        let v: Vec<f32> = q_next
            .chunks(na)
            .map(|row| row.iter().copied().fold(f32::NEG_INFINITY, f32::max))
            .collect();
        let discounts = vec![self.cfg.gamma as f32; n];
        let term: Vec<f32> = b.data.terminated.iter().map(|&t| t as u8 as f32).collect();
        let y = rl_sac::loss::soft_targets(&b.data.rewards, &discounts, &term, &v);
        let mut mask = vec![0.0f32; n * na];
        for (i, &a) in b.data.actions.iter().enumerate() {
            mask[i * na + ((a as i64 - start) as usize).min(na - 1)] = 1.0;
        }
        let q_all = self.critic.forward(tensor2(obs, n, od, &dev))[0].clone();
        let q_data = (q_all.clone() * tensor2(mask, n, na, &dev))
            .sum_dim(1)
            .reshape([n]);
        let td = rl_core::losses::smooth_l1(q_data.clone(), tensor1(y, &dev), 1.0).mean();
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
            self.core.num_timesteps,
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

impl Algorithm for Cql {
    rl_core::algorithm_counters!("cql");

    /// `updates_per_iteration` gradient steps, each on `batch_size` dataset rows.
    fn train(&mut self) -> Result<Metrics, RlError> {
        let t0 = Instant::now();
        let mut m = Metrics::new();
        for _ in 0..self.cfg.updates_per_iteration {
            let b = self.core.batch(self.cfg.batch_size)?;
            let stats = match self.kind {
                Kind::Continuous { .. } => self.update_continuous(&b)?,
                Kind::Discrete { .. } => self.update_discrete(&b)?,
            };
            for (k, v) in stats {
                m.insert(k.into(), v);
            }
        }
        m.insert("charts/learning_rate".into(), self.lrs().2);
        m.insert("charts/gradient_steps".into(), self.grad_steps as f64);
        self.core.finish_metrics(&mut m, t0);
        Ok(m)
    }

    /// Continuous: the squashed mean when `deterministic`, a policy sample otherwise,
    /// rescaled to the bounds. Discrete: the greedy action.
    fn predict(&mut self, obs: &[f32], deterministic: bool) -> Result<Vec<f32>, RlError> {
        let (flat, n) = self.core.flat_obs(obs)?;
        let d = flat.len() / n;
        let x = tensor2(flat, n, d, &self.infer);
        Ok(match &self.kind {
            Kind::Continuous { low, high } => {
                let a = low.len();
                let actor = self.actor.as_ref().expect("continuous actor").valid();
                let s = if deterministic {
                    host(actor.mean_action(x))
                } else {
                    let eps = (0..n * a)
                        .map(|_| self.core.rng_predict.normal() as f32)
                        .collect();
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
        })
    }

    fn save(&self, dir: &Path) -> Result<(), RlError> {
        let mut opt = TensorMap::default();
        let actor_steps = match &self.actor {
            Some(_) => self.opt_actor.save("actor", &mut opt),
            None => 0,
        };
        let critic_steps = self.opt_critic.save("critic", &mut opt);
        let state = SavedState {
            core: self.core.state(),
            actor_steps,
            critic_steps,
            grad_steps: self.grad_steps,
            log_alpha: self.log_alpha,
            opt_alpha: self.opt_alpha.clone(),
            log_alpha_prime: self.log_alpha_prime,
            opt_alpha_prime: self.opt_alpha_prime.clone(),
            rng_noise: self.rng_noise.clone(),
        };
        let mut files = vec![
            ("config.yaml", self.core.run_to_save(&self.cfg)?),
            (
                "critic.safetensors",
                module_tensors(&self.critic).to_bytes(),
            ),
            (
                "critic_target.safetensors",
                module_tensors(&self.critic_target).to_bytes(),
            ),
            ("optimizer.safetensors", opt.to_bytes()),
            (
                "state.json",
                serde_json::to_vec_pretty(&state).expect("serializable"),
            ),
        ];
        if let Some(a) = &self.actor {
            files.push(("actor.safetensors", module_tensors(a).to_bytes()));
        }
        write_checkpoint(dir, "cql", &files)?;
        Ok(())
    }
}
