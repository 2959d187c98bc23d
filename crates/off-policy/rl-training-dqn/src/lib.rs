//! rl-training-dqn: Deep Q-Networks (Mnih et al. 2015) as stable-baselines3's `DQN`, with every
//! Rainbow component selectable (Hessel et al. 2018): double Q-learning, dueling heads,
//! n-step returns, prioritized replay, C51 distributional heads and noisy nets.
#![warn(missing_docs)]

pub mod config;
pub mod loss;
pub mod model;

pub use config::{DqnConfig, QPolicyKwargs, TdLoss};
pub use model::{NetNoise, QNetwork, QNetworkConfig};

use rayon::prelude::*;
use rl_training_core::algorithm::{Learner, LearnerState, Progress, RlError, state_entry};
use rl_training_core::batch::{host, tensor1, tensor2};
use rl_training_core::burn::module::Module;
use rl_training_core::burn::tensor::activation::log_softmax;
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
    ActMode, OffPolicyActor, OffPolicyAgent, OffPolicyLearner, OffPolicySettings,
};
use serde_json::{Map, Value};

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
}

impl DqnLearner {
    /// A learner for `online` (autodiff `device`); the target starts as a copy.
    pub fn new(cfg: DqnConfig, online: QNetwork, device: Device, rng_noise: Rng) -> Self {
        let target = online.valid();
        let support = (cfg.num_atoms > 1).then(|| {
            let z = support_atoms(&cfg);
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

    /// Applies `k` target updates (see [`rl_training_off_policy::TargetUpdate`]).
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
    fn update(&mut self, batch: &TransitionBatch, progress: &Progress) -> Result<Metrics, RlError> {
        let lr = self.cfg.learning_rate.at(progress);
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
        rl_training_core::algorithm::check_losses(
            progress.num_timesteps,
            &[("losses/td_loss", lv)],
        )?;
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

    fn weights(&self) -> TensorMap {
        module_tensors(&self.online)
    }

    fn set_weights(&mut self, weights: &TensorMap) -> Result<(), RlError> {
        Ok(set_module_tensors(&mut self.online, weights, &self.device)?)
    }

    /// The online and target networks, Adam's state and the noise generator.
    fn save_state(&self) -> LearnerState {
        let mut opt = TensorMap::default();
        let mut state = LearnerState::default();
        state.insert("optimizer_steps", self.opt.save("adam", &mut opt));
        state.insert("rng_noise", &self.rng_noise);
        state.file("model.safetensors", self.weights().to_bytes());
        state.file(
            "target.safetensors",
            module_tensors(&self.target).to_bytes(),
        );
        state.file("optimizer.safetensors", opt.to_bytes());
        state
    }

    fn load_state(&mut self, ck: &Checkpoint, entries: &Map<String, Value>) -> Result<(), RlError> {
        let dev = self.device.clone();
        self.online = read_module(ck, "model.safetensors", self.online.clone(), &dev)?;
        // The target lives on the inference backend.
        self.target = read_module(ck, "target.safetensors", self.target.clone(), &dev)?.valid();
        let opt_file = ck.path_of("optimizer.safetensors");
        let mut opt_map = TensorMap::from_bytes(ck.file("optimizer.safetensors")?, &opt_file)?;
        let steps = state_entry(ck, entries, "optimizer_steps")?;
        let n = num_params(&self.online);
        self.opt
            .load("adam", &mut opt_map, steps, n, &opt_file, &dev)?;
        self.rng_noise = state_entry(ck, entries, "rng_noise")?;
        Ok(())
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

/// The acting side of DQN: an inference copy of the online network, the ε schedule.
pub struct DqnActor {
    net: QNetwork,
    support: Option<Tensor<1>>,
    cfg: DqnConfig,
    device: Device,
}

impl DqnActor {
    /// An actor for `net` (inference backend) with `cfg`'s exploration schedule.
    pub fn new(net: QNetwork, cfg: DqnConfig, device: Device) -> Self {
        let support = (cfg.num_atoms > 1).then(|| tensor1(support_atoms(&cfg), &device));
        Self {
            net,
            support,
            cfg,
            device,
        }
    }
}

impl OffPolicyActor for DqnActor {
    /// Greedy actions (mean weights for noisy nets) when deterministic; otherwise ε-greedy
    /// with ε where training stands and, for noisy nets, a fresh noise sample.
    fn act(
        &self,
        flat: &[f32],
        n: usize,
        rng: &mut Rng,
        mode: ActMode,
        p: &Progress,
    ) -> (Vec<f32>, Vec<f32>) {
        let explore = mode == ActMode::Explore;
        let noise = if explore {
            self.net.sample_noise(rng)
        } else {
            None
        };
        let d = flat.len() / n.max(1);
        let q = self.net.q_values(
            tensor2(flat.to_vec(), n, d, &self.device),
            noise.map(|z| z.to_device(&self.device)).as_deref(),
            self.support.as_ref(),
        );
        let greedy = loss::argmax_rows(&host(q), self.net.n_actions());
        let eps = self.cfg.epsilon_at(p.num_timesteps, p.total_timesteps);
        let n_actions = self.net.n_actions() as u64;
        let acts: Vec<f32> = greedy
            .into_iter()
            .map(|g| {
                if explore && rng.uniform() < eps {
                    rng.below(n_actions) as f32
                } else {
                    g as f32
                }
            })
            .collect();
        (acts.clone(), acts)
    }
}

/// The Q-network's shape for `cfg` and the spaces (observations, actions).
fn q_network(cfg: &DqnConfig, (obs_space, act_space): (&Space, &Space)) -> QNetworkConfig {
    QNetworkConfig {
        d_input: obs_space.flat_dim(),
        n_actions: act_space.flat_dim(),
        net_arch: cfg.policy_kwargs.net_arch.clone(),
        hiddens: cfg.hiddens.clone(),
        activation: cfg.policy_kwargs.activation_fn,
        dueling: cfg.dueling,
        atoms: cfg.num_atoms,
        noisy_sigma0: cfg.noisy.then_some(cfg.sigma0),
        head_gain: cfg.policy_kwargs.q_head_gain,
    }
}

/// The C51 atoms `v_min ..= v_max`.
fn support_atoms(cfg: &DqnConfig) -> Vec<f32> {
    let a = cfg.num_atoms;
    let dz = (cfg.v_max - cfg.v_min) / (a - 1) as f64;
    (0..a).map(|i| (cfg.v_min + i as f64 * dz) as f32).collect()
}

impl DqnLearner {
    /// ε where training stands.
    pub fn epsilon(&self, p: &Progress) -> f64 {
        self.cfg.epsilon_at(p.num_timesteps, p.total_timesteps)
    }
}

impl OffPolicyLearner for DqnLearner {
    type Config = DqnConfig;
    type Actor = DqnActor;
    const NAME: &'static str = "dqn";

    fn settings(cfg: &DqnConfig) -> OffPolicySettings {
        cfg.replay
            .settings(cfg.train_freq, cfg.batch_size, cfg.gamma)
    }

    fn stored_action_dim(space: &Space) -> Result<usize, String> {
        match space {
            Space::Discrete { .. } => Ok(1),
            other => Err(format!("dqn needs a Discrete action space, not {other:?}")),
        }
    }

    fn build(
        cfg: DqnConfig,
        run: &RunConfig,
        spaces: (&Space, &Space),
        device: Device,
    ) -> Result<Self, RlError> {
        let net = q_network(&cfg, spaces).init(&mut Rng::for_stream(run.seed, "init"), &device);
        Ok(Self::new(
            cfg,
            net,
            device,
            Rng::for_stream(run.seed, "noise"),
        ))
    }

    fn config(&self) -> &DqnConfig {
        &self.cfg
    }

    fn actor(&self) -> DqnActor {
        DqnActor::new(
            self.online.valid(),
            self.cfg.clone(),
            self.device.clone().inner(),
        )
    }

    fn actor_from_weights(
        cfg: &DqnConfig,
        spaces: (&Space, &Space),
        weights: &TensorMap,
        device: &Device,
    ) -> Result<DqnActor, RlError> {
        let net = q_network(cfg, spaces).init(&mut Rng::seed_from(0), device);
        let net = load_module_tensors(net, weights, "weights", device)?;
        Ok(DqnActor::new(net, cfg.clone(), device.clone()))
    }

    fn priorities(&self) -> &[f32] {
        &self.td_errors
    }

    /// The target updates that fell in the collection's env steps.
    fn after_collect(&mut self, calls_before: u64, calls_after: u64, n_envs: usize) {
        let k = self
            .cfg
            .target_update()
            .due(calls_before, calls_after, n_envs);
        self.update_target(k);
    }

    fn acting_metrics(&self, p: &Progress, m: &mut Metrics) {
        m.insert("charts/epsilon".into(), self.epsilon(p));
    }
}

/// A DQN agent with its envs and replay buffer, ready to train.
pub type Dqn = OffPolicyAgent<DqnLearner>;
