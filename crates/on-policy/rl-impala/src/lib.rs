//! rl-impala: IMPALA (Espeholt et al. 2018). Env runners (threads, each with its own vector
//! env and a copy of the policy) collect `n_steps`-step batches and send them, tagged with the
//! policy version they acted with, through rl-core's bounded [`ChannelTransport`]; the learner
//! corrects for the policy lag with V-trace, takes one gradient step per batch (plus replayed
//! ones with `replay_proportion`) and broadcasts versioned weights every
//! `broadcast_interval` updates. With `lockstep` the learner asks the runners in a fixed order
//! instead, so seeded runs are reproducible.
#![warn(missing_docs)]

pub mod config;
pub mod loss;

pub use config::{ImpalaConfig, OptType};

pub use rl_core::agent::EnvMaker;
use rl_core::algorithm::{Algorithm, RlError};
use rl_core::batch::{host, tensor1, tensor2};
use rl_core::burn::module::Module;
use rl_core::burn::tensor::Device;
use rl_core::checkpoint::read_run;
use rl_core::config::{AlgoConfig, RunConfig};
use rl_core::logger::Metrics;
use rl_core::optim::{FlatOptimizer, OptimizerKind};
pub use rl_on_policy::actor_learner::RunnerBatch;
use rl_on_policy::actor_learner::{ActorLearnerCore, LearnerSettings, RunnerSettings, Took};
use rl_on_policy::{ActorCritic, actor_critic_grads};
use std::collections::VecDeque;
use std::path::Path;
use std::time::Instant;

/// An IMPALA agent: the learner and its env runners.
pub struct Impala {
    cfg: ImpalaConfig,
    core: ActorLearnerCore,
    replay: VecDeque<RunnerBatch>,
}

/// Host losses of one `train` call.
#[derive(Default)]
struct UpdateStats {
    pg: Vec<f64>,
    vf: Vec<f64>,
    ent: Vec<f64>,
    grad_norm: Vec<f64>,
    rho: Vec<f64>,
}

impl Impala {
    /// A fresh agent for `run` (`algo_kwargs` are [`ImpalaConfig`]); gradients on
    /// `device.autodiff()`, runners act on `device`.
    pub fn new(run: &RunConfig, make_env: EnvMaker<'_>, device: &Device) -> Result<Self, RlError> {
        let cfg = ImpalaConfig::from_kwargs(&run.algo_kwargs).map_err(RlError::Config)?;
        let kind = match cfg.opt_type {
            OptType::Adam => OptimizerKind::adam(cfg.epsilon),
            OptType::Rmsprop => OptimizerKind::RmsProp {
                alpha: cfg.decay,
                eps: cfg.epsilon,
            },
        };
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
                gae_lambda: 1.0,
            },
        };
        let core = ActorLearnerCore::new(
            run,
            make_env,
            device,
            &cfg.policy_kwargs,
            FlatOptimizer::new(kind, cfg.grad_clip),
            settings,
        )?;
        Ok(Self {
            cfg,
            core,
            replay: VecDeque::new(),
        })
    }

    /// Loads a checkpoint written by [`Algorithm::save`]; `device` overrides the saved one.
    /// Lockstep runners resume where they were; threaded runners start new episodes; the
    /// replay buffer starts empty.
    pub fn load(dir: &Path, make_env: EnvMaker<'_>, device: &Device) -> Result<Self, RlError> {
        let (ck, run) = read_run(dir, "impala")?;
        let mut a = Self::new(&run, make_env, device)?;
        a.core.restore(&ck)?;
        Ok(a)
    }

    /// The hyperparameters.
    pub fn config(&self) -> &ImpalaConfig {
        &self.cfg
    }

    /// The learner's policy.
    pub fn policy(&self) -> &ActorCritic {
        &self.core.policy
    }

    /// Learner updates so far (the policy version).
    pub fn version(&self) -> u64 {
        self.core.version
    }
}

/// One V-trace update of `core`'s policy on `batch` (a function of the shell and the
/// hyperparameters, so replayed batches need not be copied out of the agent).
fn learn(
    core: &mut ActorLearnerCore,
    cfg: &ImpalaConfig,
    batch: &RunnerBatch,
    stats: &mut UpdateStats,
) -> Result<(), RlError> {
    let buf = &batch.buffer;
    let (b, n, od, ad) = (buf.len(), buf.n_envs, buf.obs_dim, buf.act_dim);
    let lr = cfg
        .learning_rate
        .value(core.num_timesteps, core.total_timesteps);
    let ent_coef = cfg.ent_coef.value(core.num_timesteps, core.total_timesteps);
    let dev = &core.device;
    let obs = tensor2(buf.obs.clone(), b, od, dev);
    let actions = tensor2(buf.actions.clone(), b, ad, dev);
    // Targets from the current policy, without gradients (the same tensors, off the tape).
    let valid = core.policy.valid();
    let out = valid.forward(obs.clone().inner());
    let target_logp = host(
        valid
            .dist
            .log_prob(out.params, out.log_std, actions.clone().inner()),
    );
    let values = host(out.values);
    let infer = dev.clone().inner();
    let bootstrap = host(valid.values(tensor2(batch.last_obs.clone(), n, od, &infer)));
    let vt = loss::batch_vtrace(
        buf,
        &batch.last_dones,
        &target_logp,
        &values,
        &bootstrap,
        cfg.gamma,
        cfg.vtrace_clip_rho,
        cfg.vtrace_clip_c,
    );
    let f32s = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
    let (vs, pg_adv) = (f32s(&vt.vs), f32s(&vt.pg_advantages));
    let policy = &core.policy;
    let scalar = |t: &rl_core::burn::tensor::Tensor<1>| host(t.clone().inner())[0] as f64;
    let actor = |policy: &ActorCritic| {
        let (logp, entropy) = policy.log_prob_entropy(obs.clone(), actions);
        let pg = loss::policy_gradient_loss(logp.clone(), tensor1(pg_adv, dev));
        let ent = rl_on_policy::loss::entropy_loss(entropy, logp);
        let hs = (scalar(&pg), scalar(&ent));
        (pg + ent.mul_scalar(ent_coef), hs)
    };
    let critic = |policy: &ActorCritic| {
        let vf = rl_on_policy::loss::half_mse(tensor1(vs, dev), policy.values(obs.clone()));
        let h = scalar(&vf);
        (vf.mul_scalar(cfg.vf_coef), h)
    };
    let (g, (pg, ent), vf) = actor_critic_grads(policy, dev, actor, critic);
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
    stats.grad_norm.push(grad_norm as f64);
    stats
        .rho
        .push(vt.clipped_rhos.iter().sum::<f64>() / vt.clipped_rhos.len().max(1) as f64);
    core.updated();
    Ok(())
}

impl Algorithm for Impala {
    rl_on_policy::actor_learner_accessors!("impala");

    /// One batch from every runner (`num_env_runners` learner updates, plus replays).
    fn train(&mut self) -> Result<Metrics, RlError> {
        let t0 = Instant::now();
        let mut stats = UpdateStats::default();
        let mut took = Took::default();
        let mut replayed = 0u64;
        for i in 0..self.cfg.num_env_runners {
            let Some(batch) = self.core.next_admitted(i, &mut took)? else {
                continue;
            };
            learn(&mut self.core, &self.cfg, &batch, &mut stats)?;
            if self.cfg.replay_buffer_num_slots > 0 {
                let p = self.cfg.replay_proportion;
                let mut k = p.floor() as u64;
                if self.core.rng.uniform() < p - p.floor() {
                    k += 1;
                }
                for _ in 0..k.min(self.replay.len() as u64) {
                    let j = self.core.rng.below(self.replay.len() as u64) as usize;
                    learn(&mut self.core, &self.cfg, &self.replay[j], &mut stats)?;
                    replayed += 1;
                }
                if self.replay.len() == self.cfg.replay_buffer_num_slots {
                    self.replay.pop_front();
                }
                self.replay.push_back(batch);
            }
        }
        let mean = rl_on_policy::loss::mean;
        let mut m = Metrics::new();
        m.insert("losses/policy_loss".into(), mean(&stats.pg));
        m.insert("losses/value_loss".into(), mean(&stats.vf));
        m.insert("losses/entropy".into(), mean(&stats.ent));
        m.insert("losses/grad_norm".into(), mean(&stats.grad_norm));
        m.insert("losses/mean_clipped_rho".into(), mean(&stats.rho));
        m.insert(
            "charts/learning_rate".into(),
            self.cfg
                .learning_rate
                .value(self.core.num_timesteps, self.core.total_timesteps),
        );
        m.insert("perf/replayed_batches".into(), replayed as f64);
        self.core.finish(&mut m, &took, t0)?;
        Ok(m)
    }

    fn save(&self, dir: &Path) -> Result<(), RlError> {
        self.core
            .save(dir, "impala", &self.cfg, Vec::new(), serde_json::Map::new())
    }
}
