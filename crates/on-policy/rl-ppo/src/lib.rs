//! rl-ppo: Proximal Policy Optimization with the clipped surrogate objective (Schulman et al.
//! 2017), following stable-baselines3's `PPO` step for step: rollouts with GAE, truncation
//! bootstrapped from the true final observation, per-minibatch advantage normalization,
//! optional value clipping and KL early stop, global-norm gradient clipping.
#![warn(missing_docs)]

pub mod config;
pub mod loss;

pub use config::PpoConfig;

use rl_core::algorithm::{Algorithm, Learner, RlError, check_finite};
use rl_core::buffers::RolloutBuffer;
use rl_core::burn::module::Module;
use rl_core::burn::tensor::Device;
use rl_core::checkpoint::{read_json, read_module, read_run, write_checkpoint};
use rl_core::config::AlgoConfig;
use rl_core::config::RunConfig;
use rl_core::env::{Env, EnvError};
use rl_core::logger::Metrics;
use rl_core::optim::{FlatOptimizer, OptimizerKind};
use rl_core::params::{TensorMap, flat_grads, load_module_tensors, module_tensors, num_params};
use rl_core::vec_env::VecEnv;
use rl_core::{Rng, Space};
use rl_on_policy::rollout::{flatten_batch, host, tensor2};
use rl_on_policy::{ActorCritic, CollectorState, RolloutCollector};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Instant;

/// Builds one training env for a run (called `n_envs` times).
pub type EnvMaker<'a> = &'a dyn Fn(&RunConfig) -> Result<Box<dyn Env>, EnvError>;

/// Counters and generators saved in `state.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SavedState {
    num_timesteps: u64,
    iterations: u64,
    total_timesteps: u64,
    optimizer_steps: u64,
    rng_policy: Rng,
    rng_batch: Rng,
    rng_predict: Rng,
    collector: CollectorState,
    env_stats: Vec<serde_json::Value>,
}

/// The optimization half of PPO: the policy, its optimizer and the minibatch generator. It
/// updates from any [`RolloutBuffer`], so collection can live elsewhere (other threads or
/// processes, as the actor-learner algorithms will need).
pub struct PpoLearner {
    cfg: PpoConfig,
    device: Device,
    policy: ActorCritic,
    opt: FlatOptimizer,
    rng_batch: Rng,
    /// Env steps so far, for the schedules.
    pub num_timesteps: u64,
    /// The budget the schedules are relative to.
    pub total_timesteps: u64,
}

impl PpoLearner {
    /// A learner for `policy` (on the autodiff `device`).
    pub fn new(
        cfg: PpoConfig,
        policy: ActorCritic,
        device: Device,
        rng_batch: Rng,
        total_timesteps: u64,
    ) -> Self {
        Self {
            opt: FlatOptimizer::new(OptimizerKind::adam(cfg.adam_eps), cfg.max_grad_norm),
            cfg,
            device,
            policy,
            rng_batch,
            num_timesteps: 0,
            total_timesteps,
        }
    }

    /// The policy network.
    pub fn policy(&self) -> &ActorCritic {
        &self.policy
    }
}

impl Learner for PpoLearner {
    type Batch = RolloutBuffer;

    /// One PPO update over a collected rollout (SB3's `PPO.train`).
    fn update(&mut self, batch: &mut RolloutBuffer) -> Result<Metrics, RlError> {
        let total = self.total_timesteps;
        let lr = self.cfg.learning_rate.value(self.num_timesteps, total);
        let clip = self.cfg.clip_range.value(self.num_timesteps, total);
        let clip_vf = self
            .cfg
            .clip_range_vf
            .as_ref()
            .map(|s| s.value(self.num_timesteps, total));
        let buf: &RolloutBuffer = batch;
        let (od, ad) = (buf.obs_dim, buf.act_dim);
        let (mut pg, mut vl, mut ent, mut kls, mut cfs, mut gns) = (
            Vec::new(),
            Vec::new(),
            Vec::new(),
            Vec::new(),
            Vec::new(),
            Vec::new(),
        );
        let mut continue_training = true;
        'epochs: for _ in 0..self.cfg.n_epochs {
            for idx in buf.minibatches(self.cfg.batch_size, &mut self.rng_batch) {
                let b = idx.len();
                let pick = |v: &[f32]| idx.iter().map(|&i| v[i]).collect::<Vec<f32>>();
                let obs = tensor2(
                    RolloutBuffer::gather(&buf.obs, od, &idx),
                    b,
                    od,
                    &self.device,
                );
                let actions = tensor2(
                    RolloutBuffer::gather(&buf.actions, ad, &idx),
                    b,
                    ad,
                    &self.device,
                );
                let old_logp = pick(&buf.log_probs);
                let mut adv = pick(&buf.advantages);
                if self.cfg.normalize_advantage {
                    adv = loss::normalize_advantages(&adv);
                }
                let device = &self.device;
                let to1 = |v: Vec<f32>| tensor2(v, b, 1, device).squeeze_dim::<1>(1);
                let (policy, cfg) = (&self.policy, &self.cfg);
                // Policy-gradient and entropy terms: they reach only the policy parameters.
                let actor = || {
                    let (logp, entropy) = policy.log_prob_entropy(obs.clone(), actions);
                    let (policy_loss, ratio) = loss::clipped_surrogate(
                        logp.clone(),
                        to1(old_logp.clone()),
                        to1(adv),
                        clip,
                    );
                    // Without a closed-form entropy, SB3 uses -mean(log_prob).
                    let entropy_loss = match entropy {
                        Some(e) => e.mean().neg(),
                        None => logp.clone().mean(),
                    };
                    let loss = policy_loss.clone() + entropy_loss.clone().mul_scalar(cfg.ent_coef);
                    let stats = (
                        host(logp.inner()),
                        host(ratio.inner()),
                        host(policy_loss.inner())[0] as f64,
                        host(entropy_loss.inner())[0] as f64,
                    );
                    (loss, stats)
                };
                let critic = || {
                    let values = match &policy.vf {
                        Some(_) => policy.values(obs.clone()),
                        None => unreachable!("only called for separate networks"),
                    };
                    let value_loss = loss::value_loss(
                        values,
                        to1(pick(&buf.values)),
                        to1(pick(&buf.returns)),
                        clip_vf,
                    );
                    let v = host(value_loss.clone().inner())[0] as f64;
                    (value_loss.mul_scalar(cfg.vf_coef), v)
                };
                // Separate actor and critic networks: both halves (forward and backward) run on
                // the two cores at once; the gradient of the sum is the sum of the gradients.
                let (flat_grad, (logp_h, ratio_h, pl, el), vlv) = if policy.vf.is_some() {
                    let ((la, sa), (lc, vlv)) = rayon::join(
                        || {
                            let (l, st) = actor();
                            (l.backward(), st)
                        },
                        || {
                            let (l, v) = critic();
                            (l.backward(), v)
                        },
                    );
                    let g = flat_grads(policy, la, device) + flat_grads(policy, lc, device);
                    (g, sa, vlv)
                } else {
                    let (la, sa) = actor();
                    let values = policy.values(obs.clone());
                    let value_loss = loss::value_loss(
                        values,
                        to1(pick(&buf.values)),
                        to1(pick(&buf.returns)),
                        clip_vf,
                    );
                    let vlv = host(value_loss.clone().inner())[0] as f64;
                    let total = la + value_loss.mul_scalar(cfg.vf_coef);
                    (flat_grads(policy, total.backward(), device), sa, vlv)
                };
                let kl = loss::approx_kl(&logp_h, &old_logp);
                let tl = pl + cfg.ent_coef * el + cfg.vf_coef * vlv;
                if !tl.is_finite() {
                    let (metric, value) = [
                        ("losses/policy_loss", pl),
                        ("losses/value_loss", vlv),
                        ("losses/entropy_loss", el),
                    ]
                    .into_iter()
                    .find(|(_, v)| !v.is_finite())
                    .unwrap_or(("losses/total_loss", tl));
                    return Err(RlError::NonFinite {
                        step: self.num_timesteps,
                        metric: metric.into(),
                        value,
                    });
                }
                pg.push(pl);
                vl.push(vlv);
                ent.push(-el);
                kls.push(kl);
                cfs.push(loss::clip_fraction(&ratio_h, clip));
                if let Some(t) = self.cfg.target_kl
                    && kl > 1.5 * t
                {
                    continue_training = false;
                    break 'epochs;
                }
                let (policy, stats) = self.opt.step_flat(lr, self.policy.clone(), flat_grad);
                self.policy = policy;
                gns.push(stats.grad_norm as f64);
            }
        }
        let mean = |v: &[f64]| {
            if v.is_empty() {
                0.0
            } else {
                v.iter().sum::<f64>() / v.len() as f64
            }
        };
        let mut m = Metrics::new();
        m.insert("losses/policy_loss".into(), mean(&pg));
        m.insert("losses/value_loss".into(), mean(&vl));
        m.insert("losses/entropy".into(), mean(&ent));
        m.insert("losses/approx_kl".into(), mean(&kls));
        m.insert("losses/clipfrac".into(), mean(&cfs));
        m.insert("losses/grad_norm".into(), mean(&gns));
        let ev = loss::explained_variance(&buf.values, &buf.returns);
        if ev.is_finite() {
            m.insert("losses/explained_variance".into(), ev);
        }
        m.insert("charts/learning_rate".into(), lr);
        m.insert("charts/clip_range".into(), clip);
        m.insert(
            "charts/early_stop".into(),
            (!continue_training) as u8 as f64,
        );
        Ok(m)
    }

    fn weights(&self) -> TensorMap {
        module_tensors(&self.policy)
    }

    fn set_weights(&mut self, weights: &TensorMap) -> Result<(), RlError> {
        self.policy = load_module_tensors(self.policy.clone(), weights, "weights", &self.device)?;
        Ok(())
    }
}

/// A PPO agent with its envs, ready to train.
pub struct Ppo {
    run: RunConfig,
    learner: PpoLearner,
    infer: Device,
    collector: RolloutCollector,
    rng_policy: Rng,
    rng_predict: Rng,
    num_timesteps: u64,
    iterations: u64,
    total_timesteps: u64,
    obs_space: Space,
    act_space: Space,
}

impl Ppo {
    /// A fresh agent for `run` (its `algo_kwargs` are PPO hyperparameters) on `device`
    /// (gradients are taken on `device.autodiff()`).
    pub fn new(run: &RunConfig, make_env: EnvMaker<'_>, device: &Device) -> Result<Self, RlError> {
        let cfg = PpoConfig::from_kwargs(&run.algo_kwargs).map_err(RlError::Config)?;
        if run.n_envs == 0 {
            return Err(RlError::Config("n_envs: must be at least 1".into()));
        }
        let envs = (0..run.n_envs)
            .map(|_| make_env(run))
            .collect::<Result<Vec<_>, _>>()?;
        let venv = VecEnv::with_threads(envs, run.vec_env_threads)?;
        let obs_space = venv.observation_space().clone();
        let act_space = venv.action_space().clone();
        let device = device.clone().autodiff();
        let infer = device.clone().inner();
        let mut rng_init = Rng::for_stream(run.seed, "init");
        let policy = ActorCritic::new(
            &obs_space,
            &act_space,
            &cfg.policy_kwargs,
            &mut rng_init,
            &device,
        )
        .map_err(RlError::Config)?;
        let env_seed = Rng::for_stream(run.seed, "env").next_seed() >> 16;
        let collector = RolloutCollector::new(venv, cfg.n_steps, env_seed)?;
        Ok(Self {
            learner: PpoLearner::new(
                cfg,
                policy,
                device,
                Rng::for_stream(run.seed, "minibatch"),
                run.total_timesteps,
            ),
            run: run.clone(),
            infer,
            collector,
            rng_policy: Rng::for_stream(run.seed, "policy"),
            rng_predict: Rng::for_stream(run.seed, "predict"),
            num_timesteps: 0,
            iterations: 0,
            total_timesteps: run.total_timesteps,
            obs_space,
            act_space,
        })
    }

    /// Loads a checkpoint written by [`Algorithm::save`]; `device` overrides the saved one.
    pub fn load(dir: &Path, make_env: EnvMaker<'_>, device: &Device) -> Result<Self, RlError> {
        let (ck, run) = read_run(dir, "ppo")?;
        let mut ppo = Self::new(&run, make_env, device)?;
        let state: SavedState = read_json(&ck, "state.json")?;
        let dev = ppo.learner.device.clone();
        ppo.learner.policy = read_module(&ck, "model.safetensors", ppo.learner.policy, &dev)?;
        let opt_file = ck.path_of("optimizer.safetensors");
        let mut opt_map = TensorMap::from_bytes(ck.file("optimizer.safetensors")?, &opt_file)?;
        ppo.learner.opt.load(
            "adam",
            &mut opt_map,
            state.optimizer_steps,
            num_params(&ppo.learner.policy),
            &opt_file,
            &ppo.learner.device,
        )?;
        ppo.collector.restore(&state.collector)?;
        ppo.num_timesteps = state.num_timesteps;
        ppo.iterations = state.iterations;
        ppo.total_timesteps = state.total_timesteps;
        ppo.rng_policy = state.rng_policy;
        ppo.learner.rng_batch = state.rng_batch;
        ppo.rng_predict = state.rng_predict;
        Ok(ppo)
    }

    /// The hyperparameters.
    pub fn config(&self) -> &PpoConfig {
        &self.learner.cfg
    }

    /// The policy network.
    pub fn policy(&self) -> &ActorCritic {
        &self.learner.policy
    }

    /// The learner (policy, optimizer, update).
    pub fn learner(&self) -> &PpoLearner {
        &self.learner
    }

    /// The last collected rollout.
    pub fn rollout_buffer(&self) -> &RolloutBuffer {
        &self.collector.buffer
    }

    /// The run configuration.
    pub fn run_config(&self) -> &RunConfig {
        &self.run
    }
}

impl Algorithm for Ppo {
    fn name(&self) -> &str {
        "ppo"
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

    fn train(&mut self) -> Result<Metrics, RlError> {
        let t0 = Instant::now();
        let infer_policy = self.learner.policy.valid();
        let (gamma, lam) = (
            self.learner.cfg.gamma as f32,
            self.learner.cfg.gae_lambda as f32,
        );
        let info =
            self.collector
                .collect(&infer_policy, &self.infer, &mut self.rng_policy, gamma, lam)?;
        let steps = (self.collector.buffer.len()) as u64;
        self.num_timesteps += steps;
        let t_rollout = t0.elapsed().as_secs_f64();
        self.learner.num_timesteps = self.num_timesteps;
        self.learner.total_timesteps = self.total_timesteps;
        let mut m = self.learner.update(&mut self.collector.buffer)?;
        self.iterations += 1;
        let secs = t0.elapsed().as_secs_f64();
        rl_core::batch::episode_metrics(&info.episodes, &mut m);
        m.insert("charts/SPS".into(), steps as f64 / secs.max(1e-9));
        m.insert("time/rollout_seconds".into(), t_rollout);
        m.insert("time/update_seconds".into(), secs - t_rollout);
        check_finite(self.num_timesteps, &m)?;
        Ok(m)
    }

    fn predict(&mut self, obs: &[f32], deterministic: bool) -> Result<Vec<f32>, RlError> {
        let d = self.obs_space.raw_dim();
        if !obs.len().is_multiple_of(d.max(1)) || obs.is_empty() {
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
        flatten_batch(&self.obs_space, obs, &mut flat);
        let p = self.learner.policy.valid();
        let mut actions = p.sample_actions(
            tensor2(flat, n, self.obs_space.flat_dim(), &self.infer),
            &mut self.rng_predict,
            deterministic,
        );
        self.act_space.clip_to_bounds(&mut actions);
        Ok(actions)
    }

    fn env_stats(&self) -> Vec<serde_json::Value> {
        self.collector.env.envs()[0].save_stats()
    }

    fn save(&self, dir: &Path) -> Result<(), RlError> {
        let mut run = self.run.clone();
        run.total_timesteps = self.total_timesteps;
        // Store the complete hyperparameters, defaults included.
        run.algo_kwargs = match serde_json::to_value(&self.learner.cfg).expect("serializable") {
            serde_json::Value::Object(m) => m,
            _ => unreachable!("PpoConfig serializes to a map"),
        };
        let mut opt = TensorMap::default();
        let optimizer_steps = self.learner.opt.save("adam", &mut opt);
        let state = SavedState {
            num_timesteps: self.num_timesteps,
            iterations: self.iterations,
            total_timesteps: self.total_timesteps,
            optimizer_steps,
            rng_policy: self.rng_policy.clone(),
            rng_batch: self.learner.rng_batch.clone(),
            rng_predict: self.rng_predict.clone(),
            collector: self.collector.state()?,
            env_stats: self.env_stats(),
        };
        write_checkpoint(
            dir,
            "ppo",
            &[
                (
                    "config.yaml",
                    serde_yaml::to_string(&run)
                        .map_err(|e| RlError::Other(e.to_string()))?
                        .into_bytes(),
                ),
                ("model.safetensors", self.learner.weights().to_bytes()),
                ("optimizer.safetensors", opt.to_bytes()),
                (
                    "state.json",
                    serde_json::to_vec_pretty(&state).expect("serializable"),
                ),
            ],
        )?;
        Ok(())
    }
}
