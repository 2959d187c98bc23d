//! rl-dqn: Deep Q-Networks (Mnih et al. 2015) as stable-baselines3's `DQN`, with every
//! Rainbow component selectable (Hessel et al. 2018): double Q-learning, dueling heads,
//! n-step returns, prioritized replay, C51 distributional heads and noisy nets.
#![warn(missing_docs)]

pub mod config;
pub mod loss;
pub mod model;

pub use config::{DqnConfig, QPolicyKwargs, TdLoss};
pub use model::{NetNoise, QNetwork, QNetworkConfig};

use rl_core::algorithm::{Algorithm, Learner, RlError, check_finite};
use rl_core::batch::{host, tensor1, tensor2};
use rl_core::burn::module::Module;
use rl_core::burn::tensor::activation::log_softmax;
use rl_core::burn::tensor::{Device, Tensor};
use rl_core::checkpoint::{read_json, read_module, read_run, write_checkpoint};
use rl_core::config::AlgoConfig;
use rl_core::config::RunConfig;

use rayon::prelude::*;
use rl_core::logger::Metrics;
use rl_core::optim::{FlatOptimizer, OptimizerKind};
use rl_core::params::{TensorMap, flat_grads, load_module_tensors, module_tensors, num_params};
use rl_core::replay::{Replay, TransitionBatch};
use rl_core::{Rng, Space};
pub use rl_off_policy::EnvMaker;
use rl_off_policy::{CoreState, OffPolicyCore};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Instant;

/// The optimization half of DQN: online and target networks, the optimizer, the noise RNG.
pub struct DqnLearner {
    cfg: DqnConfig,
    device: Device,
    online: QNetwork,
    target: QNetwork,
    opt: FlatOptimizer,
    rng_noise: Rng,
    support: Option<(Vec<f32>, Tensor<1>, Tensor<1>)>,
    td_errors: Vec<f32>,
    /// Env steps so far, for the schedules.
    pub num_timesteps: u64,
    /// The budget the schedules are relative to.
    pub total_timesteps: u64,
}

impl DqnLearner {
    /// A learner for `online` (autodiff `device`); the target starts as a copy.
    pub fn new(cfg: DqnConfig, online: QNetwork, device: Device, rng_noise: Rng) -> Self {
        let target = online.valid();
        let support = (cfg.num_atoms > 1).then(|| {
            let a = cfg.num_atoms;
            let dz = (cfg.v_max - cfg.v_min) / (a - 1) as f64;
            let z: Vec<f32> = (0..a).map(|i| (cfg.v_min + i as f64 * dz) as f32).collect();
            let zi = tensor1(z.clone(), &device.clone().inner());
            let za = tensor1(z.clone(), &device);
            (z, zi, za)
        });
        Self {
            opt: FlatOptimizer::new(OptimizerKind::adam(cfg.adam_eps), cfg.max_grad_norm),
            cfg,
            device,
            online,
            target,
            rng_noise,
            support,
            td_errors: Vec::new(),
            num_timesteps: 0,
            total_timesteps: 0,
        }
    }

    /// The online network.
    pub fn online(&self) -> &QNetwork {
        &self.online
    }

    /// The target network.
    pub fn target(&self) -> &QNetwork {
        &self.target
    }

    /// |TD error| (or the C51 cross-entropy) of each row of the last batch: the new priorities.
    pub fn td_errors(&self) -> &[f32] {
        &self.td_errors
    }

    /// Applies `k` target updates (see [`rl_off_policy::TargetUpdate`]).
    pub fn update_target(&mut self, k: u64) {
        if k > 0 {
            let online = self.online.valid();
            self.target = self
                .cfg
                .target_update()
                .apply(self.target.clone(), &online, k);
        }
    }

    fn support_inner(&self) -> Option<&Tensor<1>> {
        self.support.as_ref().map(|s| &s.1)
    }
}

impl Learner for DqnLearner {
    type Batch = TransitionBatch;

    /// One gradient step on a replay batch. Batches of 32 or more are split in two halves
    /// whose forward and backward passes run on the two cores at once (each half's loss is
    /// its share of the batch mean; the noisy nets use one noise sample for the whole batch).
    fn update(&mut self, batch: &mut TransitionBatch) -> Result<Metrics, RlError> {
        self.update_with(batch)
    }

    fn weights(&self) -> TensorMap {
        module_tensors(&self.online)
    }

    fn set_weights(&mut self, weights: &TensorMap) -> Result<(), RlError> {
        self.online = load_module_tensors(self.online.clone(), weights, "weights", &self.device)?;
        Ok(())
    }
}

impl DqnLearner {
    /// [`Learner::update`] on a borrowed batch.
    pub fn update_with(&mut self, batch: &TransitionBatch) -> Result<Metrics, RlError> {
        let lr = self
            .cfg
            .learning_rate
            .value(self.num_timesteps, self.total_timesteps);
        let b = batch.len();
        let inner = self.device.clone().inner();
        // Noise: one sample for the online net (this step's forward passes), one for the target.
        let noise_on = self.online.sample_noise(&mut self.rng_noise);
        let noise_tg = self.target.sample_noise(&mut self.rng_noise);
        let on_in = noise_on.as_ref().map(|n| n.to_device(&inner));
        let tg_in = noise_tg.as_ref().map(|n| n.to_device(&inner));
        let online_inner = self.cfg.double_q.then(|| self.online.valid());
        let halves: Vec<std::ops::Range<usize>> = if b >= 32 {
            vec![0..b / 2, b / 2..b]
        } else {
            std::iter::once(0..b).collect()
        };
        let ctx = HalfCtx {
            learner: self,
            batch,
            b,
            on_in: on_in.as_deref(),
            tg_in: tg_in.as_deref(),
            online_inner: online_inner.as_ref(),
            noise_on: noise_on.as_ref(),
        };
        let parts: Vec<HalfResult> = halves.par_iter().map(|r| ctx.run(r.clone())).collect();
        let (mut lv, mut q_sum, mut g_sum) = (0.0, 0.0, None);
        self.td_errors.clear();
        for p in parts {
            lv += p.loss;
            q_sum += p.q_sum;
            self.td_errors.extend(p.td);
            g_sum = Some(match g_sum {
                Some(g) => g + p.grads,
                None => p.grads,
            });
        }
        rl_core::algorithm::check_losses(self.num_timesteps, &[("losses/td_loss", lv)])?;
        let g = g_sum.expect("at least one half");
        let (online, stats) = self.opt.step_flat(lr, self.online.clone(), g);
        self.online = online;
        let mut m = Metrics::new();
        m.insert("losses/td_loss".into(), lv);
        m.insert("losses/q_values".into(), q_sum / b as f64);
        m.insert("losses/grad_norm".into(), stats.grad_norm as f64);
        m.insert("charts/learning_rate".into(), lr);
        Ok(m)
    }
}

/// What one half of a batch needs (shared, read-only, across the two threads).
struct HalfCtx<'a> {
    learner: &'a DqnLearner,
    batch: &'a TransitionBatch,
    b: usize,
    on_in: Option<&'a [model::LayerNoise]>,
    tg_in: Option<&'a [model::LayerNoise]>,
    online_inner: Option<&'a QNetwork>,
    noise_on: Option<&'a NetNoise>,
}

/// Target-network outputs for a batch: Q-values `[B × n]` and, for C51, the probabilities
/// `[B × n × atoms]`.
#[derive(Debug, Clone)]
struct TargetOut {
    q: Vec<f32>,
    probs: Option<Vec<f32>>,
}

/// One forward pass of the target network on `next`.
fn target_out(
    target: &QNetwork,
    next: Tensor<2>,
    noise: Option<&[model::LayerNoise]>,
    support: Option<&Tensor<1>>,
) -> TargetOut {
    let out = target.forward(next, noise);
    let [b, n, a] = out.dims();
    match support {
        Some(z) if a > 1 => {
            let p = log_softmax(out, 2).exp();
            let q = (p.clone() * z.clone().reshape([1, 1, a]))
                .sum_dim(2)
                .reshape([b, n]);
            TargetOut {
                q: host(q),
                probs: Some(host(p)),
            }
        }
        _ => TargetOut {
            q: host(out.reshape([b, n])),
            probs: None,
        },
    }
}

/// One half's loss (its share of the batch mean), Q sum, new priorities and gradient.
struct HalfResult {
    loss: f64,
    q_sum: f64,
    td: Vec<f32>,
    grads: Tensor<1>,
}

impl HalfCtx<'_> {
    fn run(&self, r: std::ops::Range<usize>) -> HalfResult {
        let l = self.learner;
        let dev = &l.device;
        let inner = dev.clone().inner();
        let bh = r.len();
        let od = self.batch.obs.len() / self.b.max(1);
        let n = l.online.n_actions();
        let share = bh as f64 / self.b as f64;
        let sl = |v: &[f32], d: usize| v[r.start * d..r.end * d].to_vec();
        // Fresh autodiff leaves per half: burn's graph locking deadlocks when two threads
        // grow one graph.
        let online = l.online.clone().fork(dev);
        let on_ad = self.noise_on.map(|z| z.to_device(dev));
        let next = tensor2(sl(&self.batch.next_obs, od), bh, od, &inner);
        let mut mask = vec![0.0f32; bh * n];
        for (i, &a) in self.batch.actions[r.clone()].iter().enumerate() {
            mask[i * n + (a as usize).min(n - 1)] = 1.0;
        }
        let mask = tensor2(mask, bh, n, dev);
        let weights = tensor1(sl(&self.batch.weights, 1), dev);
        let obs = tensor2(sl(&self.batch.obs, od), bh, od, dev);
        let (rewards, discounts, terminated) = (
            &self.batch.rewards[r.clone()],
            &self.batch.discounts[r.clone()],
            &self.batch.terminated[r.clone()],
        );
        let a = l.cfg.num_atoms;
        let t = target_out(&l.target, next.clone(), self.tg_in, l.support_inner());
        // The next action: argmax of the online net (double Q) or of the target net.
        let next_actions = match self.online_inner {
            Some(on) => {
                loss::argmax_rows(&host(on.q_values(next, self.on_in, l.support_inner())), n)
            }
            None => loss::argmax_rows(&t.q, n),
        };
        let (total, q_sum, td) = match &l.support {
            None => {
                let qn = t.q;
                let q_next: Vec<f32> = next_actions
                    .iter()
                    .enumerate()
                    .map(|(i, &a)| qn[i * n + a])
                    .collect();
                let y = loss::td_targets(rewards, discounts, terminated, &q_next);
                let q = (online.q_values(obs, on_ad.as_deref(), None) * mask)
                    .sum_dim(1)
                    .reshape([bh]);
                let qh = host(q.clone().inner());
                let td = qh.iter().zip(&y).map(|(q, y)| (q - y).abs()).collect();
                let loss = loss::td_loss(q, tensor1(y, dev), weights, l.cfg.td_error_loss_fn);
                (loss, qh.iter().map(|&v| v as f64).sum::<f64>(), td)
            }
            Some((_, _, za)) => {
                let probs = t.probs.expect("distributional target");
                let mut p_next = Vec::with_capacity(bh * a);
                for (i, &act) in next_actions.iter().enumerate() {
                    p_next.extend_from_slice(&probs[(i * n + act) * a..(i * n + act + 1) * a]);
                }
                let disc: Vec<f32> = discounts
                    .iter()
                    .zip(terminated)
                    .map(|(&d, &t)| d * (1.0 - t))
                    .collect();
                let m = loss::categorical_projection(
                    &p_next,
                    rewards,
                    &disc,
                    l.cfg.v_min,
                    l.cfg.v_max,
                    a,
                );
                let logp = log_softmax(online.forward(obs, on_ad.as_deref()), 2);
                let logp_sa = (logp * mask.unsqueeze_dim::<3>(2))
                    .sum_dim(1)
                    .reshape([bh, a]);
                let q = (logp_sa.clone().exp() * za.clone().unsqueeze_dim(0)).sum_dim(1);
                let ce = loss::categorical_cross_entropy(tensor2(m, bh, a, dev), logp_sa);
                let td = host(ce.clone().inner());
                let q_sum = host(q.inner()).iter().map(|&v| v as f64).sum::<f64>();
                ((ce * weights).mean(), q_sum, td)
            }
        };
        let total = total.mul_scalar(share);
        let loss = host(total.clone().inner())[0] as f64;
        HalfResult {
            loss,
            q_sum,
            td,
            grads: flat_grads(&online, total.backward(), dev),
        }
    }
}

/// What `state.json` holds besides the family's [`CoreState`].
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SavedState {
    core: CoreState,
    optimizer_steps: u64,
    rng_noise: Rng,
}

/// A DQN agent with its envs and replay buffer, ready to train.
pub struct Dqn {
    core: OffPolicyCore,
    learner: DqnLearner,
    infer: Device,
    infer_net: Option<QNetwork>,
}

impl Dqn {
    /// A fresh agent for `run` (its `algo_kwargs` are DQN hyperparameters) on `device`.
    pub fn new(run: &RunConfig, make_env: EnvMaker<'_>, device: &Device) -> Result<Self, RlError> {
        let cfg = DqnConfig::from_kwargs(&run.algo_kwargs).map_err(RlError::Config)?;
        let core = OffPolicyCore::new(run, make_env, &cfg.replay_options(), |space| match space {
            Space::Discrete { .. } => Ok(1),
            other => Err(RlError::Config(rl_core::config::ConfigError::new(
                &run.env_id,
                format!("dqn needs a Discrete action space, not {other:?}"),
            ))),
        })?;
        let Space::Discrete { n, .. } = core.act_space else {
            unreachable!("checked above")
        };
        let device = device.clone().autodiff();
        let mut rng_init = Rng::for_stream(run.seed, "init");
        let net = QNetworkConfig {
            d_input: core.obs_space.flat_dim(),
            n_actions: n,
            net_arch: cfg.policy_kwargs.net_arch.clone(),
            hiddens: cfg.hiddens.clone(),
            activation: cfg.policy_kwargs.activation_fn,
            dueling: cfg.dueling,
            atoms: cfg.num_atoms,
            noisy_sigma0: cfg.noisy.then_some(cfg.sigma0),
        }
        .init(&mut rng_init, &device);
        let mut learner =
            DqnLearner::new(cfg, net, device.clone(), Rng::for_stream(run.seed, "noise"));
        learner.total_timesteps = run.total_timesteps;
        Ok(Self {
            core,
            learner,
            infer: device.inner(),
            infer_net: None,
        })
    }

    /// Loads a checkpoint written by [`Algorithm::save`]; `device` overrides the saved one.
    pub fn load(dir: &Path, make_env: EnvMaker<'_>, device: &Device) -> Result<Self, RlError> {
        let (ck, run) = read_run(dir, "dqn")?;
        let mut dqn = Self::new(&run, make_env, device)?;
        let state: SavedState = read_json(&ck, "state.json")?;
        let dev = dqn.learner.device.clone();
        let l = &mut dqn.learner;
        l.online = read_module(&ck, "model.safetensors", l.online.clone(), &dev)?;
        // The target lives on the inference backend.
        l.target = read_module(&ck, "target.safetensors", l.target.clone(), &dev)?.valid();
        let opt_file = ck.path_of("optimizer.safetensors");
        let mut opt_map = TensorMap::from_bytes(ck.file("optimizer.safetensors")?, &opt_file)?;
        l.opt.load(
            "adam",
            &mut opt_map,
            state.optimizer_steps,
            num_params(&l.online),
            &opt_file,
            &dev,
        )?;
        l.rng_noise = state.rng_noise;
        let store = l.cfg.store_buffer_in_checkpoints;
        dqn.core.restore(state.core, &ck, store)?;
        Ok(dqn)
    }

    /// The hyperparameters.
    pub fn config(&self) -> &DqnConfig {
        &self.learner.cfg
    }

    /// The learner (networks, optimizer).
    pub fn learner(&self) -> &DqnLearner {
        &self.learner
    }

    /// The replay buffer.
    pub fn replay(&self) -> &Replay {
        &self.core.replay
    }

    /// Warnings raised while loading (e.g. a replay buffer flag that disagrees).
    pub fn warnings(&self) -> &[String] {
        &self.core.warnings
    }

    /// The exploration rate now.
    pub fn epsilon(&self) -> f64 {
        self.learner
            .cfg
            .epsilon_at(self.core.num_timesteps, self.core.total_timesteps)
    }
}

/// Greedy actions of `net` for `n` flat observations, with `noise` (noisy nets) if given.
fn greedy(
    net: &QNetwork,
    flat: &[f32],
    n: usize,
    noise: Option<NetNoise>,
    support: Option<&Tensor<1>>,
    device: &Device,
) -> Vec<usize> {
    let d = flat.len() / n.max(1);
    let q = net.q_values(
        tensor2(flat.to_vec(), n, d, device),
        noise.map(|z| z.to_device(device)).as_deref(),
        support,
    );
    loss::argmax_rows(&host(q), net.n_actions())
}

impl Algorithm for Dqn {
    rl_off_policy::core_accessors!("dqn");

    /// `train_freq` vector steps of ε-greedy collection, the target updates that fell in
    /// them, then the gradient steps due.
    fn train(&mut self) -> Result<Metrics, RlError> {
        let t0 = Instant::now();
        let ne = self.core.collector.num_envs();
        let cfg = self.learner.cfg.clone();
        let total = self.core.total_timesteps;
        let net = match self.infer_net.take() {
            Some(n) => n,
            None => self.learner.online.valid(),
        };
        let support = self.learner.support_inner().cloned();
        let n_actions = net.n_actions() as u64;
        let infer = self.infer.clone();
        let mut eps = cfg.epsilon_at(self.core.num_timesteps, total);
        let c = self.core.collect(
            cfg.train_freq,
            cfg.learning_starts,
            |obs, n, rng, random, t| {
                eps = cfg.epsilon_at(t, total);
                let acts = if random {
                    (0..n).map(|_| rng.below(n_actions) as f32).collect()
                } else {
                    let noise = net.sample_noise(rng);
                    greedy(&net, obs, n, noise, support.as_ref(), &infer)
                        .into_iter()
                        .map(|g| {
                            if rng.uniform() < eps {
                                rng.below(n_actions) as f32
                            } else {
                                g as f32
                            }
                        })
                        .collect::<Vec<f32>>()
                };
                Ok((acts.clone(), acts))
            },
        )?;
        self.infer_net = Some(net);
        let k = cfg
            .target_update()
            .due(c.calls_before, self.core.n_calls, ne);
        self.learner.update_target(k);
        let steps = cfg.train_frequency().gradient_steps(
            self.core.num_timesteps,
            c.steps,
            &mut self.core.credit,
        );
        self.learner.num_timesteps = self.core.num_timesteps;
        self.learner.total_timesteps = total;
        let beta = cfg.replay_options().beta_at(self.core.num_timesteps, total);
        let l = &mut self.learner;
        let mut m = self
            .core
            .replay_steps(steps, cfg.batch_size, cfg.gamma as f32, beta, |b| {
                let m = l.update_with(b)?;
                Ok((m, l.td_errors().to_vec()))
            })?;
        if steps > 0 {
            self.infer_net = None;
        }
        self.core.iterations += 1;
        m.insert("charts/epsilon".into(), eps);
        m.insert("charts/gradient_steps".into(), steps as f64);
        if cfg.prioritized_replay {
            m.insert("charts/beta".into(), beta);
        }
        self.core.finish_metrics(&mut m, &c, t0);
        check_finite(self.core.num_timesteps, &m)?;
        Ok(m)
    }

    /// Greedy actions (mean weights for noisy nets) when `deterministic`; otherwise ε-greedy
    /// with the current ε and, for noisy nets, a fresh noise sample.
    fn predict(&mut self, obs: &[f32], deterministic: bool) -> Result<Vec<f32>, RlError> {
        let (flat, n) = self.core.flat_obs(obs)?;
        let eps = if deterministic { 0.0 } else { self.epsilon() };
        let net = match self.infer_net.take() {
            Some(n) => n,
            None => self.learner.online.valid(),
        };
        let rng = &mut self.core.rng_predict;
        let noise = if deterministic {
            None
        } else {
            net.sample_noise(rng)
        };
        let g = greedy(
            &net,
            &flat,
            n,
            noise,
            self.learner.support_inner(),
            &self.infer,
        );
        let n_actions = net.n_actions() as u64;
        self.infer_net = Some(net);
        Ok(g.into_iter()
            .map(|g| {
                if eps > 0.0 && rng.uniform() < eps {
                    rng.below(n_actions) as f32
                } else {
                    g as f32
                }
            })
            .collect())
    }

    fn save(&self, dir: &Path) -> Result<(), RlError> {
        let mut opt = TensorMap::default();
        let optimizer_steps = self.learner.opt.save("adam", &mut opt);
        let (core, replay_file) = self
            .core
            .state(self.learner.cfg.store_buffer_in_checkpoints)?;
        let state = SavedState {
            core,
            optimizer_steps,
            rng_noise: self.learner.rng_noise.clone(),
        };
        let mut files = vec![
            ("config.yaml", self.core.run_to_save(&self.learner.cfg)?),
            ("model.safetensors", self.learner.weights().to_bytes()),
            (
                "target.safetensors",
                module_tensors(&self.learner.target).to_bytes(),
            ),
            ("optimizer.safetensors", opt.to_bytes()),
            (
                "state.json",
                serde_json::to_vec_pretty(&state).expect("serializable"),
            ),
        ];
        files.extend(replay_file);
        write_checkpoint(dir, "dqn", &files)?;
        Ok(())
    }
}
