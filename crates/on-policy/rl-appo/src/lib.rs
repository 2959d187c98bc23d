//! rl-appo: APPO, asynchronous PPO (RLlib's), on the family's actor-learner shell: env runners
//! on threads (or lockstep) send batches tagged with their policy version; the learner puts
//! each into a circular buffer of `circular_buffer_num_batches`, trains on a batch drawn from
//! it (`n_epochs` passes in minibatches of `batch_size`; each batch is used
//! `circular_buffer_iterations_per_batch` times), with PPO's clipped surrogate taken against a
//! target network (`target_network_update_freq`, `tau`) and the runner's behaviour policy
//! corrected by a clipped importance ratio (`target_worker_clipping`); advantages and value
//! targets by V-trace (`vtrace`) or the runners' GAE; optional adaptive KL penalty
//! (`use_kl_loss`, `kl_coeff`, `kl_target`).
#![warn(missing_docs)]

pub mod config;
pub mod loss;

pub use config::AppoConfig;

pub use rl_core::agent::EnvMaker;
use rl_core::algorithm::{Algorithm, RlError};
use rl_core::batch::{host, tensor1, tensor2};
use rl_core::buffers::RolloutBuffer;
use rl_core::burn::module::Module;
use rl_core::burn::tensor::Device;
use rl_core::checkpoint::{read_module, read_run};
use rl_core::config::{AlgoConfig, RunConfig};
use rl_core::logger::Metrics;
use rl_core::optim::{FlatOptimizer, OptimizerKind};
use rl_core::params::{module_tensors, polyak};
use rl_on_policy::actor_learner::{
    ActorLearnerCore, LearnerSettings, RunnerBatch, RunnerSettings, Took, batch_vtrace,
};
use rl_on_policy::{ActorCritic, actor_critic_grads};
use std::collections::VecDeque;
use std::path::Path;
use std::time::Instant;

/// An APPO agent: the learner, its target network, the circular buffer and the env runners.
pub struct Appo {
    cfg: AppoConfig,
    core: ActorLearnerCore,
    target: ActorCritic,
    /// Batches and how many more times each may be trained on.
    circular: VecDeque<(RunnerBatch, usize)>,
    kl_coeff: f64,
}

#[derive(Default)]
struct Stats {
    pg: Vec<f64>,
    vf: Vec<f64>,
    ent: Vec<f64>,
    kl: Vec<f64>,
    clipfrac: Vec<f64>,
    grad_norm: Vec<f64>,
}

impl Appo {
    /// A fresh agent for `run` (`algo_kwargs` are [`AppoConfig`]).
    pub fn new(run: &RunConfig, make_env: EnvMaker<'_>, device: &Device) -> Result<Self, RlError> {
        let cfg = AppoConfig::from_kwargs(&run.algo_kwargs).map_err(RlError::Config)?;
        let settings = LearnerSettings {
            num_env_runners: cfg.num_env_runners,
            lockstep: cfg.lockstep,
            learner_queue_size: cfg.learner_queue_size,
            learner_queue_timeout: cfg.learner_queue_timeout,
            max_policy_lag: cfg.max_policy_lag,
            broadcast_interval: cfg.broadcast_interval,
            runner: RunnerSettings {
                n_steps: cfg.n_steps,
                num_envs: cfg.num_envs_per_env_runner,
                gamma: cfg.gamma,
                gae_lambda: if cfg.use_gae { cfg.gae_lambda } else { 1.0 },
            },
        };
        let core = ActorLearnerCore::new(
            run,
            make_env,
            device,
            &cfg.policy_kwargs,
            FlatOptimizer::new(OptimizerKind::adam(cfg.epsilon), cfg.grad_clip),
            settings,
        )?;
        Ok(Self {
            target: core.policy.clone(),
            kl_coeff: cfg.kl_coeff,
            cfg,
            core,
            circular: VecDeque::new(),
        })
    }

    /// Loads a checkpoint written by [`Algorithm::save`]; the circular buffer starts empty.
    pub fn load(dir: &Path, make_env: EnvMaker<'_>, device: &Device) -> Result<Self, RlError> {
        let (ck, run) = read_run(dir, "appo")?;
        let mut a = Self::new(&run, make_env, device)?;
        let state = a.core.restore(&ck)?;
        a.target = read_module(&ck, "target.safetensors", a.target.clone(), &a.core.device)?;
        a.kl_coeff = state
            .get("kl_coeff")
            .and_then(|v| v.as_f64())
            .ok_or_else(|| {
                RlError::Config(rl_core::config::ConfigError::new(
                    format!("{}: kl_coeff", ck.path_of("state.json")),
                    "expected a number",
                ))
            })?;
        Ok(a)
    }

    /// The hyperparameters.
    pub fn config(&self) -> &AppoConfig {
        &self.cfg
    }

    /// The learner's policy.
    pub fn policy(&self) -> &ActorCritic {
        &self.core.policy
    }

    /// `n_epochs` passes over `batch` (taken out of the circular buffer meanwhile).
    fn train_on(&mut self, batch: &RunnerBatch, stats: &mut Stats) -> Result<(), RlError> {
        let cfg = &self.cfg;
        let core = &mut self.core;
        let buf: &RolloutBuffer = &batch.buffer;
        let (b, n, od, ad) = (buf.len(), buf.n_envs, buf.obs_dim, buf.act_dim);
        let infer = core.device.clone().inner();
        let (lr, ent_coef) = (
            cfg.learning_rate
                .value(core.num_timesteps, core.total_timesteps),
            cfg.ent_coef.value(core.num_timesteps, core.total_timesteps),
        );
        // The target network's view of the whole batch (no gradients).
        let tv = self.target.valid();
        let t_out = tv.forward(tensor2(buf.obs.clone(), b, od, &infer));
        let t_params = host(t_out.params.clone());
        let t_log_std = t_out.log_std.clone().map(host).unwrap_or_default();
        let target_logp = host(tv.dist.log_prob(
            t_out.params,
            t_out.log_std,
            tensor2(buf.actions.clone(), b, ad, &infer),
        ));
        let (adv, targets) = if cfg.vtrace {
            let cur = core.policy.valid();
            let values = host(cur.values(tensor2(buf.obs.clone(), b, od, &infer)));
            let boot = host(cur.values(tensor2(batch.last_obs.clone(), n, od, &infer)));
            let vt = batch_vtrace(
                buf,
                &batch.last_dones,
                &target_logp,
                &values,
                &boot,
                cfg.gamma,
                cfg.vtrace_clip_rho,
                cfg.vtrace_clip_c,
            );
            let f = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
            (f(&vt.pg_advantages), f(&vt.vs))
        } else {
            (buf.advantages.clone(), buf.returns.clone())
        };
        let pd = tv.dist.param_dim();
        let ls_rows = t_log_std.len() / pd.max(1);
        let mut kls = Vec::new();
        for _ in 0..cfg.n_epochs {
            for idx in buf.minibatches(cfg.batch_size, &mut core.rng) {
                let m = idx.len();
                let dev = &core.device;
                let pick = |v: &[f32]| idx.iter().map(|&i| v[i]).collect::<Vec<f32>>();
                let obs = tensor2(RolloutBuffer::gather(&buf.obs, od, &idx), m, od, dev);
                let actions = tensor2(RolloutBuffer::gather(&buf.actions, ad, &idx), m, ad, dev);
                let tp = tensor2(RolloutBuffer::gather(&t_params, pd, &idx), m, pd, dev);
                // State-independent log-std is one row; gSDE's is per sample.
                let tls = (!t_log_std.is_empty()).then(|| {
                    if ls_rows == 1 {
                        tensor2(t_log_std.clone(), 1, pd, dev)
                    } else {
                        tensor2(RolloutBuffer::gather(&t_log_std, pd, &idx), m, pd, dev)
                    }
                });
                let (policy, kl_coeff) = (&core.policy, self.kl_coeff);
                let actor = |policy: &ActorCritic| {
                    let latent = policy.pi.forward(obs.clone());
                    let log_std = policy.dist_log_std(&latent);
                    let params = policy.action_net.forward(latent);
                    let logp = policy
                        .dist
                        .log_prob(params.clone(), log_std.clone(), actions);
                    let entropy = policy.dist.entropy(params.clone(), log_std.clone());
                    let (pg, ratio) = loss::appo_surrogate(
                        logp.clone(),
                        tensor1(pick(&target_logp), dev),
                        tensor1(pick(&buf.log_probs), dev),
                        tensor1(pick(&adv), dev),
                        cfg.clip_range,
                        cfg.target_worker_clipping,
                    );
                    let ent = rl_on_policy::loss::entropy_loss(entropy, logp);
                    let kl = policy.dist.kl(tp, tls, params, log_std).mean();
                    let mut total = pg.clone() + ent.clone().mul_scalar(ent_coef);
                    if cfg.use_kl_loss {
                        total = total + kl.clone().mul_scalar(kl_coeff);
                    }
                    let h = |t: rl_core::burn::tensor::Tensor<1>| host(t.inner())[0] as f64;
                    let r = host(ratio.inner());
                    (total, (h(pg), h(ent), h(kl), r))
                };
                let critic = |policy: &ActorCritic| {
                    let vf = rl_on_policy::loss::half_mse(
                        tensor1(pick(&targets), dev),
                        policy.values(obs.clone()),
                    );
                    let h = host(vf.clone().inner())[0] as f64;
                    (vf.mul_scalar(cfg.vf_coef), h)
                };
                let (g, (pg, ent, kl, ratio), vf) = actor_critic_grads(policy, dev, actor, critic);
                let grad_norm = core.apply_gradient(
                    lr,
                    g,
                    &[
                        ("losses/policy_loss", pg),
                        ("losses/value_loss", vf),
                        ("losses/entropy_loss", ent),
                    ],
                )?;
                stats.pg.push(pg);
                stats.vf.push(vf);
                stats.ent.push(-ent);
                stats.kl.push(kl);
                kls.push(kl);
                stats
                    .clipfrac
                    .push(rl_on_policy::loss::clip_fraction(&ratio, cfg.clip_range));
                stats.grad_norm.push(grad_norm as f64);
            }
        }
        core.updated();
        if core.version.is_multiple_of(cfg.target_network_update_freq) {
            self.target = polyak(self.target.clone(), &core.policy, cfg.tau);
        }
        if cfg.use_kl_loss {
            let mean_kl = rl_on_policy::loss::mean(&kls);
            self.kl_coeff = loss::adapt_kl_coeff(self.kl_coeff, mean_kl, cfg.kl_target);
        }
        Ok(())
    }
}

impl Algorithm for Appo {
    rl_on_policy::actor_learner_accessors!("appo");

    /// One batch from every runner; after each, one training pass on a batch drawn from the
    /// circular buffer.
    fn train(&mut self) -> Result<Metrics, RlError> {
        let t0 = Instant::now();
        let mut stats = Stats::default();
        let mut took = Took::default();
        for i in 0..self.cfg.num_env_runners {
            let Some(batch) = self.core.next_admitted(i, &mut took)? else {
                continue;
            };
            if self.circular.len() == self.cfg.circular_buffer_num_batches {
                self.circular.pop_front();
            }
            self.circular
                .push_back((batch, self.cfg.circular_buffer_iterations_per_batch));
            let j = self.core.rng.below(self.circular.len() as u64) as usize;
            let (batch, uses) = self
                .circular
                .remove(j)
                .expect("index drawn below the length");
            self.train_on(&batch, &mut stats)?;
            if uses > 1 {
                self.circular.insert(j, (batch, uses - 1));
            }
        }
        let mean = rl_on_policy::loss::mean;
        let mut m = Metrics::new();
        m.insert("losses/policy_loss".into(), mean(&stats.pg));
        m.insert("losses/value_loss".into(), mean(&stats.vf));
        m.insert("losses/entropy".into(), mean(&stats.ent));
        m.insert("losses/approx_kl".into(), mean(&stats.kl));
        m.insert("losses/clipfrac".into(), mean(&stats.clipfrac));
        m.insert("losses/grad_norm".into(), mean(&stats.grad_norm));
        m.insert("charts/kl_coeff".into(), self.kl_coeff);
        m.insert(
            "charts/learning_rate".into(),
            self.cfg
                .learning_rate
                .value(self.core.num_timesteps, self.core.total_timesteps),
        );
        m.insert(
            "perf/circular_buffer_len".into(),
            self.circular.len() as f64,
        );
        self.core.finish(&mut m, &took, t0)?;
        Ok(m)
    }

    fn save(&self, dir: &Path) -> Result<(), RlError> {
        let mut state = serde_json::Map::new();
        state.insert("kl_coeff".into(), self.kl_coeff.into());
        self.core.save(
            dir,
            "appo",
            &self.cfg,
            vec![(
                "target.safetensors",
                module_tensors(&self.target).to_bytes(),
            )],
            state,
        )
    }
}
