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
use rl_core::batch::{episode_metrics, host, tensor1, tensor2};
use rl_core::burn::module::Module;
use rl_core::burn::tensor::activation::log_softmax;
use rl_core::burn::tensor::{Device, Tensor};
use rl_core::checkpoint::{read_checkpoint, write_checkpoint};
use rl_core::config::RunConfig;
use rl_core::env::{Env, EnvError};
use rl_core::logger::Metrics;
use rl_core::optim::{FlatOptimizer, OptimizerKind};
use rl_core::params::{TensorMap, flat_grads, load_module_tensors, module_tensors, num_params};
use rl_core::replay::{Replay, ReplayMeta, TransitionBatch};
use rl_core::vec_env::VecEnv;
use rl_core::{Rng, Space};
use rl_off_policy::{Collector, CollectorState, restore_replay, save_replay};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Instant;

/// Builds one training env for a run (called `n_envs` times).
pub type EnvMaker<'a> = &'a dyn Fn(&RunConfig) -> Result<Box<dyn Env>, EnvError>;

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

    /// One gradient step on a replay batch.
    fn update(&mut self, batch: &mut TransitionBatch) -> Result<Metrics, RlError> {
        let lr = self
            .cfg
            .learning_rate
            .value(self.num_timesteps, self.total_timesteps);
        let b = batch.len();
        let od = batch.obs.len() / b.max(1);
        let n = self.online.n_actions();
        let inner = self.device.clone().inner();
        // Noise: one sample for the online net (this step's forward passes), one for the target.
        let noise_on = self.online.sample_noise(&mut self.rng_noise);
        let noise_tg = self.target.sample_noise(&mut self.rng_noise);
        let on_ad = noise_on.as_ref().map(|n| n.to_device(&self.device));
        let on_in = noise_on.as_ref().map(|n| n.to_device(&inner));
        let tg_in = noise_tg.as_ref().map(|n| n.to_device(&inner));
        let next = tensor2(batch.next_obs.clone(), b, od, &inner);
        let actions: Vec<usize> = batch.actions.iter().map(|&a| a as usize).collect();
        let mut mask = vec![0.0f32; b * n];
        for (i, &a) in actions.iter().enumerate() {
            mask[i * n + a.min(n - 1)] = 1.0;
        }
        let mask = tensor2(mask, b, n, &self.device);
        let weights = tensor1(batch.weights.clone(), &self.device);
        let obs = tensor2(batch.obs.clone(), b, od, &self.device);
        // The next action: argmax of the online net (double Q) or of the target net.
        let next_q_target =
            self.target
                .q_values(next.clone(), tg_in.as_deref(), self.support_inner());
        let next_actions = if self.cfg.double_q {
            let q =
                self.online
                    .valid()
                    .q_values(next.clone(), on_in.as_deref(), self.support_inner());
            loss::argmax_rows(&host(q), n)
        } else {
            loss::argmax_rows(&host(next_q_target.clone()), n)
        };
        let (loss, q_mean) = match &self.support {
            None => {
                let qn = host(next_q_target);
                let q_next: Vec<f32> = next_actions
                    .iter()
                    .enumerate()
                    .map(|(i, &a)| qn[i * n + a])
                    .collect();
                let y =
                    loss::td_targets(&batch.rewards, &batch.discounts, &batch.terminated, &q_next);
                let q = (self.online.q_values(obs, on_ad.as_deref(), None) * mask)
                    .sum_dim(1)
                    .reshape([b]);
                let qh = host(q.clone().inner());
                self.td_errors = qh.iter().zip(&y).map(|(q, y)| (q - y).abs()).collect();
                let l = loss::td_loss(
                    q,
                    tensor1(y, &self.device),
                    weights,
                    self.cfg.td_error_loss_fn,
                );
                (l, qh.iter().map(|&v| v as f64).sum::<f64>() / b as f64)
            }
            Some((z, _, za)) => {
                let a = z.len();
                let logits = self.target.forward(next, tg_in.as_deref());
                let probs = host(log_softmax(logits, 2).exp());
                let mut p_next = Vec::with_capacity(b * a);
                for (i, &act) in next_actions.iter().enumerate() {
                    p_next.extend_from_slice(&probs[(i * n + act) * a..(i * n + act + 1) * a]);
                }
                let disc: Vec<f32> = batch
                    .discounts
                    .iter()
                    .zip(&batch.terminated)
                    .map(|(&d, &t)| d * (1.0 - t))
                    .collect();
                let m = loss::categorical_projection(
                    &p_next,
                    &batch.rewards,
                    &disc,
                    self.cfg.v_min,
                    self.cfg.v_max,
                    a,
                );
                let logp = log_softmax(self.online.forward(obs, on_ad.as_deref()), 2);
                let logp_sa = (logp * mask.unsqueeze_dim::<3>(2))
                    .sum_dim(1)
                    .reshape([b, a]);
                let q = (logp_sa.clone().exp() * za.clone().unsqueeze_dim(0)).sum_dim(1);
                let ce = loss::categorical_cross_entropy(tensor2(m, b, a, &self.device), logp_sa);
                self.td_errors = host(ce.clone().inner());
                let q_mean = host(q.inner()).iter().map(|&v| v as f64).sum::<f64>() / b as f64;
                ((ce * weights).mean(), q_mean)
            }
        };
        let lv = host(loss.clone().inner())[0] as f64;
        if !lv.is_finite() {
            return Err(RlError::NonFinite {
                step: self.num_timesteps,
                metric: "losses/td_loss".into(),
                value: lv,
            });
        }
        let g = flat_grads(&self.online, loss.backward(), &self.device);
        let (online, stats) = self.opt.step_flat(lr, self.online.clone(), g);
        self.online = online;
        let mut m = Metrics::new();
        m.insert("losses/td_loss".into(), lv);
        m.insert("losses/q_values".into(), q_mean);
        m.insert("losses/grad_norm".into(), stats.grad_norm as f64);
        m.insert("charts/learning_rate".into(), lr);
        Ok(m)
    }

    fn weights(&self) -> TensorMap {
        module_tensors(&self.online)
    }

    fn set_weights(&mut self, weights: &TensorMap) -> Result<(), RlError> {
        self.online = load_module_tensors(self.online.clone(), weights, "weights", &self.device)?;
        Ok(())
    }
}

/// Counters and generators saved in `state.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SavedState {
    num_timesteps: u64,
    iterations: u64,
    total_timesteps: u64,
    n_calls: u64,
    credit: f64,
    optimizer_steps: u64,
    rng_act: Rng,
    rng_replay: Rng,
    rng_noise: Rng,
    rng_predict: Rng,
    collector: CollectorState,
    replay: Option<ReplayMeta>,
}

/// A DQN agent with its envs and replay buffer, ready to train.
pub struct Dqn {
    run: RunConfig,
    learner: DqnLearner,
    infer: Device,
    infer_net: Option<QNetwork>,
    collector: Collector,
    replay: Replay,
    rng_act: Rng,
    rng_replay: Rng,
    rng_predict: Rng,
    num_timesteps: u64,
    iterations: u64,
    total_timesteps: u64,
    n_calls: u64,
    credit: f64,
    obs_space: Space,
    act_space: Space,
    warnings: Vec<String>,
}

impl Dqn {
    /// A fresh agent for `run` (its `algo_kwargs` are DQN hyperparameters) on `device`.
    pub fn new(run: &RunConfig, make_env: EnvMaker<'_>, device: &Device) -> Result<Self, RlError> {
        let cfg = DqnConfig::from_kwargs(&run.algo_kwargs).map_err(RlError::Config)?;
        if run.n_envs == 0 {
            return Err(RlError::Config("n_envs: must be at least 1".into()));
        }
        let envs = (0..run.n_envs)
            .map(|_| make_env(run))
            .collect::<Result<Vec<_>, _>>()?;
        let venv = VecEnv::with_threads(envs, run.vec_env_threads)?;
        let obs_space = venv.observation_space().clone();
        let act_space = venv.action_space().clone();
        let Space::Discrete { n, .. } = act_space else {
            return Err(RlError::Config(format!(
                "dqn needs a Discrete action space; {} has {act_space:?}",
                run.env_id
            )));
        };
        let device = device.clone().autodiff();
        let infer = device.clone().inner();
        let mut rng_init = Rng::for_stream(run.seed, "init");
        let net = QNetworkConfig {
            d_input: obs_space.flat_dim(),
            n_actions: n as usize,
            net_arch: cfg.policy_kwargs.net_arch.clone(),
            hiddens: cfg.hiddens.clone(),
            activation: cfg.policy_kwargs.activation_fn,
            dueling: cfg.dueling,
            atoms: cfg.num_atoms,
            noisy_sigma0: cfg.noisy.then_some(cfg.sigma0),
        }
        .init(&mut rng_init, &device);
        let env_seed = Rng::for_stream(run.seed, "env").next_seed() >> 16;
        let collector = Collector::new(venv, env_seed)?;
        let replay = cfg
            .replay_options()
            .build(run.n_envs, obs_space.flat_dim(), 1);
        let mut learner = DqnLearner::new(cfg, net, device, Rng::for_stream(run.seed, "noise"));
        learner.total_timesteps = run.total_timesteps;
        Ok(Self {
            learner,
            run: run.clone(),
            infer,
            infer_net: None,
            collector,
            replay,
            rng_act: Rng::for_stream(run.seed, "policy"),
            rng_replay: Rng::for_stream(run.seed, "replay"),
            rng_predict: Rng::for_stream(run.seed, "predict"),
            num_timesteps: 0,
            iterations: 0,
            total_timesteps: run.total_timesteps,
            n_calls: 0,
            credit: 0.0,
            obs_space,
            act_space,
            warnings: Vec::new(),
        })
    }

    /// Loads a checkpoint written by [`Algorithm::save`]; `device` overrides the saved one.
    pub fn load(dir: &Path, make_env: EnvMaker<'_>, device: &Device) -> Result<Self, RlError> {
        let ck = read_checkpoint(dir)?;
        if ck.algorithm != "dqn" {
            return Err(RlError::Config(format!(
                "{}: checkpoint of algorithm {:?}, not dqn",
                dir.display(),
                ck.algorithm
            )));
        }
        let text = std::str::from_utf8(ck.file("config.yaml")?)
            .map_err(|e| RlError::Config(format!("{}: {e}", ck.path_of("config.yaml"))))?;
        let run =
            RunConfig::from_yaml(text, &[], &ck.path_of("config.yaml")).map_err(RlError::Config)?;
        let mut dqn = Self::new(&run, make_env, device)?;
        let state: SavedState = serde_json::from_slice(ck.file("state.json")?)
            .map_err(|e| RlError::Config(format!("{}: {e}", ck.path_of("state.json"))))?;
        let dev = dqn.learner.device.clone();
        for (file, net) in [
            ("model.safetensors", &mut dqn.learner.online),
            ("target.safetensors", &mut dqn.learner.target),
        ] {
            let path = ck.path_of(file);
            let w = TensorMap::from_bytes(ck.file(file)?, &path)?;
            *net = load_module_tensors(net.clone(), &w, &path, &dev)?;
        }
        // The target lives on the inference backend.
        dqn.learner.target = dqn.learner.target.valid();
        let opt_file = ck.path_of("optimizer.safetensors");
        let mut opt_map = TensorMap::from_bytes(ck.file("optimizer.safetensors")?, &opt_file)?;
        dqn.learner.opt.load(
            "adam",
            &mut opt_map,
            state.optimizer_steps,
            num_params(&dqn.learner.online),
            &opt_file,
            &dev,
        )?;
        dqn.collector.restore(&state.collector)?;
        if let Some(w) = restore_replay(
            &mut dqn.replay,
            dqn.learner.cfg.store_buffer_in_checkpoints,
            &ck,
            state.replay.as_ref(),
        )? {
            eprintln!("warning: {w}");
            dqn.warnings.push(w);
        }
        dqn.num_timesteps = state.num_timesteps;
        dqn.iterations = state.iterations;
        dqn.total_timesteps = state.total_timesteps;
        dqn.n_calls = state.n_calls;
        dqn.credit = state.credit;
        dqn.rng_act = state.rng_act;
        dqn.rng_replay = state.rng_replay;
        dqn.learner.rng_noise = state.rng_noise;
        dqn.rng_predict = state.rng_predict;
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
        &self.replay
    }

    /// Warnings raised while loading (e.g. a replay buffer flag that disagrees).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The exploration rate now.
    pub fn epsilon(&self) -> f64 {
        self.learner
            .cfg
            .epsilon_at(self.num_timesteps, self.total_timesteps)
    }

    fn infer_net(&mut self) -> &QNetwork {
        if self.infer_net.is_none() {
            self.infer_net = Some(self.learner.online.valid());
        }
        self.infer_net.as_ref().expect("set above")
    }

    /// Greedy actions for `n` flat observations (noisy nets: a fresh noise sample from `rng`
    /// unless `deterministic`).
    fn greedy(
        &mut self,
        flat: &[f32],
        n: usize,
        deterministic: bool,
        noise_rng: Stream,
    ) -> Vec<usize> {
        let d = self.obs_space.flat_dim();
        let infer = self.infer.clone();
        let noise = if deterministic {
            None
        } else {
            let rng = match noise_rng {
                Stream::Act => &mut self.rng_act,
                Stream::Predict => &mut self.rng_predict,
            };
            self.learner.online.sample_noise(rng)
        };
        let support = self.learner.support_inner().cloned();
        let net = self.infer_net();
        let q = net.q_values(
            tensor2(flat.to_vec(), n, d, &infer),
            noise.as_ref().map(|z| z.to_device(&infer)).as_deref(),
            support.as_ref(),
        );
        loss::argmax_rows(&host(q), net.n_actions())
    }
}

#[derive(Clone, Copy)]
enum Stream {
    Act,
    Predict,
}

impl Algorithm for Dqn {
    fn name(&self) -> &str {
        "dqn"
    }
    fn num_timesteps(&self) -> u64 {
        self.num_timesteps
    }
    fn total_timesteps(&self) -> u64 {
        self.total_timesteps
    }
    fn set_total_timesteps(&mut self, total: u64) {
        self.total_timesteps = total;
    }
    fn observation_space(&self) -> &Space {
        &self.obs_space
    }
    fn action_space(&self) -> &Space {
        &self.act_space
    }

    /// `train_freq` vector steps of ε-greedy collection, the target updates that fell in
    /// them, then the gradient steps due.
    fn train(&mut self) -> Result<Metrics, RlError> {
        let t0 = Instant::now();
        let ne = self.collector.num_envs();
        let n_actions = self.learner.online.n_actions();
        let calls_before = self.n_calls;
        let mut episodes = Vec::new();
        let mut eps = self.epsilon();
        for _ in 0..self.learner.cfg.train_freq {
            eps = self.epsilon();
            let acts: Vec<f32> = if self.num_timesteps < self.learner.cfg.learning_starts {
                (0..ne)
                    .map(|_| self.rng_act.below(n_actions as u64) as f32)
                    .collect()
            } else {
                let flat = self.collector.obs().to_vec();
                let greedy = self.greedy(&flat, ne, false, Stream::Act);
                greedy
                    .into_iter()
                    .map(|g| {
                        if self.rng_act.uniform() < eps {
                            self.rng_act.below(n_actions as u64) as f32
                        } else {
                            g as f32
                        }
                    })
                    .collect()
            };
            episodes.extend(self.collector.step(&acts, &acts, &mut self.replay)?);
            self.n_calls += 1;
            self.num_timesteps += ne as u64;
        }
        let collected = (self.n_calls - calls_before) * ne as u64;
        let t_rollout = t0.elapsed().as_secs_f64();
        let k = self
            .learner
            .cfg
            .target_update()
            .due(calls_before, self.n_calls, ne);
        self.learner.update_target(k);
        let steps = self.learner.cfg.train_frequency().gradient_steps(
            self.num_timesteps,
            collected,
            &mut self.credit,
        );
        self.learner.num_timesteps = self.num_timesteps;
        self.learner.total_timesteps = self.total_timesteps;
        let gamma = self.learner.cfg.gamma as f32;
        let beta = self
            .learner
            .cfg
            .replay_options()
            .beta_at(self.num_timesteps, self.total_timesteps);
        let mut sums = Metrics::new();
        for _ in 0..steps {
            let mut batch = self.replay.sample(
                self.learner.cfg.batch_size,
                gamma,
                beta,
                &mut self.rng_replay,
            );
            let m = self.learner.update(&mut batch)?;
            self.replay
                .update_priorities(&batch.indices, self.learner.td_errors());
            for (k, v) in m {
                *sums.entry(k).or_insert(0.0) += v;
            }
        }
        if steps > 0 {
            self.infer_net = None;
        }
        let mut m: Metrics = sums
            .into_iter()
            .map(|(k, v)| (k, v / steps.max(1) as f64))
            .collect();
        self.iterations += 1;
        let secs = t0.elapsed().as_secs_f64();
        episode_metrics(&episodes, &mut m);
        m.insert("charts/epsilon".into(), eps);
        m.insert("charts/gradient_steps".into(), steps as f64);
        if self.learner.cfg.prioritized_replay {
            m.insert("charts/beta".into(), beta);
        }
        m.insert("charts/SPS".into(), collected as f64 / secs.max(1e-9));
        m.insert("time/rollout_seconds".into(), t_rollout);
        m.insert("time/update_seconds".into(), secs - t_rollout);
        check_finite(self.num_timesteps, &m)?;
        Ok(m)
    }

    /// Greedy actions (mean weights for noisy nets) when `deterministic`; otherwise ε-greedy
    /// with the current ε and, for noisy nets, a fresh noise sample.
    fn predict(&mut self, obs: &[f32], deterministic: bool) -> Result<Vec<f32>, RlError> {
        let d = self.obs_space.raw_dim();
        if obs.is_empty() || !obs.len().is_multiple_of(d.max(1)) {
            return Err(RlError::Config(format!(
                "predict: observation of {} values, expected a multiple of {d}",
                obs.len()
            )));
        }
        if let Some(i) = obs.iter().position(|v| !v.is_finite()) {
            return Err(RlError::Env(EnvError::BadOutput {
                env: self.run.env_id.clone(),
                reason: format!("observation element {i} is {}", obs[i]),
            }));
        }
        let n = obs.len() / d.max(1);
        let mut flat = Vec::new();
        rl_core::batch::flatten_batch(&self.obs_space, obs, &mut flat);
        let greedy = self.greedy(&flat, n, deterministic, Stream::Predict);
        let eps = if deterministic { 0.0 } else { self.epsilon() };
        let n_actions = self.learner.online.n_actions() as u64;
        Ok(greedy
            .into_iter()
            .map(|g| {
                if eps > 0.0 && self.rng_predict.uniform() < eps {
                    self.rng_predict.below(n_actions) as f32
                } else {
                    g as f32
                }
            })
            .collect())
    }

    fn env_stats(&self) -> Vec<serde_json::Value> {
        self.collector.env.envs()[0].save_stats()
    }

    fn save(&self, dir: &Path) -> Result<(), RlError> {
        let mut run = self.run.clone();
        run.total_timesteps = self.total_timesteps;
        run.algo_kwargs = match serde_json::to_value(&self.learner.cfg).expect("serializable") {
            serde_json::Value::Object(m) => m,
            _ => unreachable!("DqnConfig serializes to a map"),
        };
        let mut opt = TensorMap::default();
        let optimizer_steps = self.learner.opt.save("adam", &mut opt);
        let (replay_file, replay_meta) =
            save_replay(&self.replay, self.learner.cfg.store_buffer_in_checkpoints);
        let state = SavedState {
            num_timesteps: self.num_timesteps,
            iterations: self.iterations,
            total_timesteps: self.total_timesteps,
            n_calls: self.n_calls,
            credit: self.credit,
            optimizer_steps,
            rng_act: self.rng_act.clone(),
            rng_replay: self.rng_replay.clone(),
            rng_noise: self.learner.rng_noise.clone(),
            rng_predict: self.rng_predict.clone(),
            collector: self.collector.state()?,
            replay: replay_meta,
        };
        let mut files = vec![
            (
                "config.yaml",
                serde_yaml::to_string(&run)
                    .map_err(|e| RlError::Other(e.to_string()))?
                    .into_bytes(),
            ),
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
