//! The agent the family shares: envs and rollout collector, counters, the generators that
//! draw actions, `predict`, checkpoints ([`OnPolicyCore`]), around a learner that implements
//! [`OnPolicyLearner`]; [`OnPolicyAgent`] is the [`Algorithm`] of PPO, A2C and the others.

use crate::actor_learner::{RunnerBatch, RunnerState};
use crate::policy::{ActorCritic, PolicyKwargs};
use crate::rollout::{CollectorState, RolloutCollector, RolloutInfo, RolloutPolicy, tensor2};
use crate::sync_runners::SyncRunners;
use rl_training_broker::{BrokerLink, UsedBatches};
use rl_training_core::actor_learner::Versioned;
use rl_training_core::agent::{
    EnvMaker, checked_flat_obs, iteration_charts, make_vec_env, run_yaml,
};
use rl_training_core::algorithm::{Algorithm, Learner, LearnerState, RunStatus, state_entry};
use rl_training_core::buffers::RolloutBuffer;
use rl_training_core::burn::module::Module;
use rl_training_core::burn::tensor::{Device, Tensor};
use rl_training_core::checkpoint::{
    Checkpoint, read_json, read_module, read_run, write_checkpoint,
};
use rl_training_core::config::{AlgoConfig, ConfigError, RunConfig, check, invalid};
use rl_training_core::logger::Metrics;
use rl_training_core::optim::FlatOptimizer;
use rl_training_core::params::{TensorMap, flat_grads, module_tensors, num_params};
use rl_training_core::{RlError, Rng, Space};
use rl_training_curiosity::{Curiosity, load_plugin, save_plugin};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::path::Path;
use std::time::Instant;

/// Counters, generators and collector state every on-policy agent saves (flattened into its
/// `state.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CoreState {
    /// Env steps so far.
    pub num_timesteps: u64,
    /// `train` calls so far.
    pub iterations: u64,
    /// Budget the schedules refer to.
    pub total_timesteps: u64,
    /// Action draws during collection.
    pub rng_policy: Rng,
    /// `predict` draws.
    pub rng_predict: Rng,
    /// Envs and last observations.
    pub collector: CollectorState,
    /// Normalization statistics of the first env (also inside `collector`; kept readable).
    pub env_stats: Vec<serde_json::Value>,
    /// `num_env_runners` in process: each runner's envs and generators.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runners: Vec<RunnerState>,
    /// `num_env_runners`: the last weights version published to the runners.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub runner_version: u64,
    /// Runner processes: the (runner, sequence) pairs of the batches used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_batches: Option<UsedBatches>,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// What one collection gave.
#[derive(Debug, Default)]
pub struct Rollout {
    /// Finished episodes.
    pub info: RolloutInfo,
    /// Env steps taken (all envs).
    pub steps: u64,
    /// Seconds spent.
    pub seconds: f64,
    /// The curiosity plugin's metrics (empty without one).
    pub plugin: Metrics,
}

/// Envs, rollout buffer, counters and generators of an on-policy agent.
pub struct OnPolicyCore {
    /// The run configuration.
    pub run: RunConfig,
    /// Envs and rollout buffer.
    pub collector: RolloutCollector,
    /// Action draws during collection.
    pub rng_policy: Rng,
    /// `predict` draws.
    pub rng_predict: Rng,
    /// Counters and spaces.
    pub status: RunStatus,
    /// Inference device (the training device without autodiff).
    pub infer: Device,
    /// Recurrent policies: the state `predict` carries from call to call.
    pub predict_state: Vec<f32>,
    /// Whether the next `predict` starts new episodes.
    pub predict_reset: bool,
    /// The curiosity plugin, if the run asks for one: it adds its bonus to each rollout's
    /// rewards before GAE.
    pub curiosity: Option<Curiosity>,
}

impl OnPolicyCore {
    /// Builds the envs and a buffer of `n_steps` per env; `infer` is the inference device.
    pub fn new(
        run: &RunConfig,
        make_env: EnvMaker<'_>,
        n_steps: usize,
        infer: Device,
    ) -> Result<Self, RlError> {
        let venv = make_vec_env(run, make_env)?;
        let obs_space = venv.observation_space().clone();
        let act_space = venv.action_space().clone();
        let env_seed = Rng::for_stream(run.seed, "env").next_seed() >> 16;
        Ok(Self {
            collector: RolloutCollector::new(venv, n_steps, env_seed)?,
            run: run.clone(),
            rng_policy: Rng::for_stream(run.seed, "policy"),
            rng_predict: Rng::for_stream(run.seed, "predict"),
            status: RunStatus::new(run.total_timesteps, obs_space, act_space),
            infer,
            predict_state: Vec::new(),
            predict_reset: true,
            curiosity: None,
        })
    }

    /// Fills the buffer with `policy` (its inference copy), lets the curiosity plugin add
    /// its bonus to the rewards, and computes GAE.
    pub fn collect(
        &mut self,
        policy: &(impl RolloutPolicy + Module),
        gamma: f64,
        gae_lambda: f64,
        sde_sample_freq: i64,
    ) -> Result<Rollout, RlError> {
        let t0 = Instant::now();
        let valid = policy.valid();
        let info = self.collector.collect_steps(
            &valid,
            &self.infer,
            &mut self.rng_policy,
            gamma as f32,
            sde_sample_freq,
        )?;
        self.rollout_done(info, gamma, gae_lambda, t0)
    }

    /// Counts the buffer's steps, lets the curiosity plugin add its bonus to the rewards and
    /// computes GAE.
    fn rollout_done(
        &mut self,
        info: RolloutInfo,
        gamma: f64,
        gae_lambda: f64,
        started: Instant,
    ) -> Result<Rollout, RlError> {
        let steps = self.collector.buffer.len() as u64;
        self.status.num_timesteps += steps;
        let seconds = started.elapsed().as_secs_f64();
        let (buf, g, l) = (&mut self.collector.buffer, gamma as f32, gae_lambda as f32);
        let plugin = match &mut self.curiosity {
            Some(c) => c.relabel_rollout(buf, g, l, &self.status.progress())?,
            None => {
                buf.recompute_returns_and_advantage(g, l);
                Metrics::new()
            }
        };
        Ok(Rollout {
            info,
            steps,
            seconds,
            plugin,
        })
    }

    /// What [`collect`](Self::collect) does, from rollouts that runners collected (in runner
    /// order, `n_steps` each): joins them into the buffer, lets the curiosity plugin add its
    /// bonus and computes GAE.
    pub fn take_rollouts(
        &mut self,
        batches: Vec<RunnerBatch>,
        gamma: f64,
        gae_lambda: f64,
        started: Instant,
    ) -> Result<Rollout, RlError> {
        let mut info = RolloutInfo::default();
        let mut offset = 0;
        let mut parts = Vec::with_capacity(batches.len());
        for b in batches {
            // Episode env indices as in one vector env of all the runners' envs.
            info.episodes.extend(b.episodes.into_iter().map(|mut e| {
                e.env += offset;
                e
            }));
            offset += b.buffer.n_envs;
            parts.push(b.buffer);
        }
        let joined = RolloutBuffer::join_envs(&parts).map_err(RlError::Other)?;
        if joined.n_envs != self.collector.buffer.n_envs {
            return Err(RlError::Other(format!(
                "the runners' rollouts hold {} envs, the run has n_envs = {}",
                joined.n_envs, self.collector.buffer.n_envs
            )));
        }
        self.collector.buffer = joined;
        self.rollout_done(info, gamma, gae_lambda, started)
    }

    /// Counts the iteration and adds the charts (episodes, SPS, time split); checks that
    /// every metric is finite.
    pub fn finish(
        &mut self,
        m: &mut Metrics,
        r: &Rollout,
        started: Instant,
    ) -> Result<(), RlError> {
        self.status.iterations += 1;
        m.extend(r.plugin.iter().map(|(k, v)| (k.clone(), *v)));
        iteration_charts(m, &r.info.episodes, r.steps, r.seconds, started);
        rl_training_core::algorithm::check_finite(self.status.num_timesteps, m)
    }

    /// Actions of `policy` for raw observations (deterministic: the mode), clipped to the
    /// bounds of a Box action space. A recurrent policy continues from the state the previous
    /// call left (zero after [`reset_predict_state`](Self::reset_predict_state) or when the
    /// number of observations changes).
    pub fn predict(
        &mut self,
        policy: &(impl RolloutPolicy + Module),
        obs: &[f32],
        deterministic: bool,
    ) -> Result<Vec<f32>, RlError> {
        let (flat, n) = checked_flat_obs(&self.status.obs_space, &self.run.env_id, obs)?;
        let sd = policy.state_dim();
        if self.predict_state.len() != n * sd {
            self.predict_state = vec![0.0; n * sd];
            self.predict_reset = true;
        }
        let starts = vec![self.predict_reset as u8 as f32; n];
        self.predict_reset = false;
        let mut actions = policy.valid().sample_actions(
            tensor2(flat, n, self.status.obs_space.flat_dim(), &self.infer),
            &mut self.predict_state,
            &starts,
            &mut self.rng_predict,
            deterministic,
        );
        self.status.act_space.clip_to_bounds(&mut actions);
        Ok(actions)
    }

    /// The state to save.
    pub fn state(&self) -> Result<CoreState, RlError> {
        Ok(CoreState {
            num_timesteps: self.status.num_timesteps,
            iterations: self.status.iterations,
            total_timesteps: self.status.total_timesteps,
            rng_policy: self.rng_policy.clone(),
            rng_predict: self.rng_predict.clone(),
            collector: self.collector.state()?,
            env_stats: self.collector.env.save_stats(),
            runners: Vec::new(),
            runner_version: 0,
            used_batches: None,
        })
    }

    /// Restores a saved state.
    pub fn restore(&mut self, s: CoreState) -> Result<(), RlError> {
        self.collector.restore(&s.collector)?;
        self.status.num_timesteps = s.num_timesteps;
        self.status.iterations = s.iterations;
        self.status.total_timesteps = s.total_timesteps;
        self.rng_policy = s.rng_policy;
        self.rng_predict = s.rng_predict;
        Ok(())
    }

    /// `config.yaml` for a checkpoint with the complete hyperparameters `cfg`.
    pub fn run_to_save(&self, cfg: &impl Serialize) -> Result<Vec<u8>, RlError> {
        run_yaml(&self.run, self.status.total_timesteps, cfg)
    }
}

/// The flat gradient of `actor loss + critic loss` and what each closure reports besides its
/// loss, for an [`ActorCritic`] (see [`split_grads`]). During a flat update
/// ([`ActorCritic::begin_flat`]) each loss differentiates its own θ leaf, on two threads.
pub fn actor_critic_grads<A: Send, C: Send>(
    policy: &ActorCritic,
    device: &Device,
    actor: impl FnOnce(&ActorCritic) -> (Tensor<1>, A) + Send,
    critic: impl FnOnce(&ActorCritic) -> (Tensor<1>, C) + Send,
) -> (Tensor<1>, A, C) {
    if policy.flat.is_some() {
        let ((ga, a), (gc, c)) = rayon::join(
            || flat_leaf_grads(policy, actor),
            || flat_leaf_grads(policy, critic),
        );
        return (ga + gc, a, c);
    }
    split_grads(policy, policy.separate_trunks(), device, actor, critic)
}

/// The flat gradient over `policy`'s parameters of `actor loss + critic loss` and what each
/// closure reports besides its loss; each closure computes its loss from the policy it is
/// given. When `separate` (the two losses reach disjoint parameters) each loss gets its own
/// backward pass, the two on two threads (the gradient of the sum is the sum of the
/// gradients); otherwise one backward pass of the sum.
///
/// Each thread differentiates its own `fork` of the policy (fresh autodiff leaves, as SAC's
/// and DQN's halves): two threads growing graphs over the same parameter leaves can deadlock
/// in burn's graph locking (seen once in CI: one thread in `backward`, the other registering
/// a node). The numbers are those of one backward pass per loss on the policy itself.
pub fn split_grads<M: Module + Sync, A: Send, C: Send>(
    policy: &M,
    separate: bool,
    device: &Device,
    actor: impl FnOnce(&M) -> (Tensor<1>, A) + Send,
    critic: impl FnOnce(&M) -> (Tensor<1>, C) + Send,
) -> (Tensor<1>, A, C) {
    if separate {
        let ((ga, a), (gc, c)) = rayon::join(
            || fork_grads(policy, device, actor),
            || fork_grads(policy, device, critic),
        );
        (ga + gc, a, c)
    } else {
        let (la, a) = actor(policy);
        let (lc, c) = critic(policy);
        (flat_grads(policy, (la + lc).backward(), device), a, c)
    }
}

/// θ's gradient of `f`'s loss on a fresh θ leaf of `policy` (on the flat path) and what `f`
/// reports besides it.
fn flat_leaf_grads<X>(
    policy: &ActorCritic,
    f: impl FnOnce(&ActorCritic) -> (Tensor<1>, X),
) -> (Tensor<1>, X) {
    let p = policy.flat_leaf().expect("called on the flat path");
    let (loss, x) = f(&p);
    let g = p
        .flat_grad(&loss.backward())
        .expect("called on the flat path");
    (g, x)
}

/// The flat gradient of `f`'s loss on a fork of `policy` (fresh autodiff leaves) and what
/// `f` reports besides it.
fn fork_grads<M: Module, X>(
    policy: &M,
    device: &Device,
    f: impl FnOnce(&M) -> (Tensor<1>, X),
) -> (Tensor<1>, X) {
    let p = policy.clone().fork(device);
    let (loss, x) = f(&p);
    (flat_grads(&p, loss.backward(), device), x)
}

/// How an on-policy algorithm collects: steps per env, discounting, gSDE.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RolloutSettings {
    /// Steps per env and rollout.
    pub n_steps: usize,
    /// Discount.
    pub gamma: f64,
    /// GAE λ.
    pub gae_lambda: f64,
    /// gSDE: `Some(sde_sample_freq)` when the config asks for it (`use_sde`).
    pub sde_sample_freq: Option<i64>,
    /// The config's `sde_sample_freq` as given, for [`RolloutSettings::validate`].
    sde_sample_freq_key: i64,
    /// Env runners that collect each rollout together, the run's `n_envs` split evenly
    /// among them (0: the shell's own vector env, as SB3; RLlib's `num_env_runners`).
    pub num_env_runners: usize,
}

impl RolloutSettings {
    /// Settings from a config's `n_steps`, `gamma`, `gae_lambda`, `use_sde` and
    /// `sde_sample_freq`.
    pub fn new(n_steps: usize, gamma: f64, gae_lambda: f64, use_sde: bool, sde_freq: i64) -> Self {
        Self {
            n_steps,
            gamma,
            gae_lambda,
            sde_sample_freq: use_sde.then_some(sde_freq),
            sde_sample_freq_key: sde_freq,
            num_env_runners: 0,
        }
    }

    /// Range checks of the keys these settings come from, each error naming its field
    /// (`sde_sample_freq` is checked with gSDE off too: a bad value is a typo either way).
    pub fn validate(&self) -> Result<(), ConfigError> {
        check::at_least_one(&[("n_steps", self.n_steps)])?;
        check::unit_interval("gamma", self.gamma)?;
        check::unit_interval("gae_lambda", self.gae_lambda)?;
        if self.sde_sample_freq_key == -1 || self.sde_sample_freq_key > 0 {
            Ok(())
        } else {
            invalid(
                "sde_sample_freq",
                "must be -1 (once per rollout) or positive",
            )
        }
    }
}

/// What the shell reads from an on-policy config.
pub trait OnPolicyConfig: AlgoConfig + Serialize + Clone {
    /// How rollouts are collected.
    fn rollout_settings(&self) -> RolloutSettings;
}

/// A config whose policy is an [`ActorCritic`]: its network shape (gSDE comes from
/// [`OnPolicyConfig::rollout_settings`]).
pub trait ActorCriticConfig: OnPolicyConfig {
    /// The network shape (`policy_kwargs`).
    fn policy_kwargs(&self) -> &PolicyKwargs;
}

/// The gSDE and network keys PPO, A2C and TRPO share, with the same defaults (SB3's names).
/// Flat in their YAML tables: the configs embed it with `#[serde(flatten, skip_deserializing)]`
/// and read it with [`from_kwargs_with_part`](rl_training_core::config::from_kwargs_with_part).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, smart_default::SmartDefault)]
#[serde(deny_unknown_fields, default)]
pub struct ActorCriticKeys {
    /// Generalized state-dependent exploration (gSDE) for Box action spaces.
    #[default(false)]
    pub use_sde: bool,
    /// gSDE: draw new exploration matrices every this many steps (-1: once per rollout).
    #[default(-1)]
    pub sde_sample_freq: i64,
    /// Env runners that collect each rollout together, `n_envs` split evenly among them, one
    /// rollout from each per iteration (synchronous; with `rl train --broker` they are
    /// processes). 0: the shell's own vector env. RLlib's name.
    #[default(0)]
    pub num_env_runners: usize,
    /// Network architecture and initialization.
    pub policy_kwargs: PolicyKwargs,
}

/// A config made of its own keys, the three rollout keys and [`ActorCriticKeys`]:
/// [`OnPolicyConfig`] and [`ActorCriticConfig`] follow from it.
pub trait ActorCriticKeysConfig: AlgoConfig + Serialize + Clone {
    /// `n_steps`, `gamma`, `gae_lambda` and the shared keys.
    fn rollout_keys(&self) -> (usize, f64, f64, &ActorCriticKeys);
}

impl<C: ActorCriticKeysConfig> OnPolicyConfig for C {
    fn rollout_settings(&self) -> RolloutSettings {
        let (n, g, l, k) = self.rollout_keys();
        RolloutSettings {
            num_env_runners: k.num_env_runners,
            ..RolloutSettings::new(n, g, l, k.use_sde, k.sde_sample_freq)
        }
    }
}

impl<C: ActorCriticKeysConfig> ActorCriticConfig for C {
    fn policy_kwargs(&self) -> &PolicyKwargs {
        &self.rollout_keys().3.policy_kwargs
    }
}

/// A policy network that a config of type `C` describes.
pub trait PolicyFor<C>: Module + RolloutPolicy + Sync + Sized {
    /// A fresh network for the spaces, initialized from `rng`.
    fn for_config(
        cfg: &C,
        obs_space: &Space,
        act_space: &Space,
        rng: &mut Rng,
        device: &Device,
    ) -> Result<Self, String>;
    /// A fresh network whose critic is centralized (MAPPO): the actor reads `obs_space`, the
    /// critic that and `critic_extra` more features after it. Policies without one refuse.
    fn centralized_for_config(
        _cfg: &C,
        _obs_space: &Space,
        _critic_extra: usize,
        _act_space: &Space,
        _rng: &mut Rng,
        _device: &Device,
    ) -> Result<Self, String> {
        Err("this algorithm's policy has no centralized critic".into())
    }
}

impl<C: ActorCriticConfig> PolicyFor<C> for ActorCritic {
    fn for_config(
        cfg: &C,
        obs_space: &Space,
        act_space: &Space,
        rng: &mut Rng,
        device: &Device,
    ) -> Result<Self, String> {
        let use_sde = cfg.rollout_settings().sde_sample_freq.is_some();
        ActorCritic::with_sde(
            obs_space,
            act_space,
            cfg.policy_kwargs(),
            use_sde,
            rng,
            device,
        )
    }
    fn centralized_for_config(
        cfg: &C,
        obs_space: &Space,
        critic_extra: usize,
        act_space: &Space,
        rng: &mut Rng,
        device: &Device,
    ) -> Result<Self, String> {
        if cfg.rollout_settings().sde_sample_freq.is_some() {
            return Err("use_sde: gSDE with a centralized critic is not supported".into());
        }
        ActorCritic::centralized(
            obs_space,
            critic_extra,
            act_space,
            cfg.policy_kwargs(),
            rng,
            device,
        )
    }
}

/// What a learner is built with besides its hyperparameters and policy.
pub struct BuildContext<'a> {
    /// The autodiff device.
    pub device: Device,
    /// The run.
    pub run: &'a RunConfig,
    /// Observation and action spaces of the run's envs.
    pub spaces: (&'a Space, &'a Space),
}

impl BuildContext<'_> {
    /// The run seed's generator `stream` (e.g. `"minibatch"`).
    pub fn rng(&self, stream: &str) -> Rng {
        Rng::for_stream(self.run.seed, stream)
    }
}

/// What an on-policy algorithm adds to the shared agent: its hyperparameters and policy
/// types, how it builds its learner around a fresh policy, and the policy the shell collects
/// with. Updates, weights and checkpoint state come through [`Learner`].
pub trait OnPolicyLearner: Learner<Batch = RolloutBuffer> + Sized {
    /// The hyperparameters (`algo_kwargs`).
    type Config: OnPolicyConfig;
    /// The policy network ([`ActorCritic`] or a recurrent one).
    type Policy: PolicyFor<Self::Config>;
    /// The algorithm's name in configs and checkpoints.
    const NAME: &'static str;

    /// A fresh policy network for the spaces, initialized from `rng`.
    fn make_policy(
        cfg: &Self::Config,
        obs_space: &Space,
        act_space: &Space,
        rng: &mut Rng,
        device: &Device,
    ) -> Result<Self::Policy, String> {
        Self::Policy::for_config(cfg, obs_space, act_space, rng, device)
    }
    /// Rejects action spaces the algorithm does not handle (all by default).
    fn check_action_space(_space: &Space) -> Result<(), String> {
        Ok(())
    }
    /// A learner for a fresh `policy`; fails on what it needs besides the policy (GAIL:
    /// expert data that is missing or does not fit).
    fn build(cfg: Self::Config, policy: Self::Policy, ctx: &BuildContext) -> Result<Self, RlError>;
    /// The hyperparameters.
    fn config(&self) -> &Self::Config;
    /// The policy network.
    fn policy(&self) -> &Self::Policy;
}

/// `model.safetensors` and `optimizer.safetensors` (state under `prefix`) for a learner with
/// one policy and one optimizer; `optimizer_steps` goes to `state.json`.
pub fn save_policy_and_optimizer(
    policy: &impl Module,
    opt: &FlatOptimizer,
    prefix: &str,
) -> LearnerState {
    let mut map = TensorMap::default();
    let steps = opt.save(prefix, &mut map);
    let mut state = LearnerState::default();
    state.insert("optimizer_steps", steps);
    state.file(
        "model.safetensors",
        rl_training_core::params::module_tensors(policy).to_bytes(),
    );
    state.file("optimizer.safetensors", map.to_bytes());
    state
}

/// Reads what [`save_policy_and_optimizer`] wrote into `policy` and `opt`.
pub fn load_policy_and_optimizer<M: Module>(
    ck: &Checkpoint,
    state: &Map<String, Value>,
    policy: &mut M,
    opt: &mut FlatOptimizer,
    prefix: &str,
    device: &Device,
) -> Result<(), RlError> {
    let steps: u64 = state_entry(ck, state, "optimizer_steps")?;
    *policy = read_module(ck, "model.safetensors", policy.clone(), device)?;
    let file = ck.path_of("optimizer.safetensors");
    let mut map = TensorMap::from_bytes(ck.file("optimizer.safetensors")?, &file)?;
    opt.load(prefix, &mut map, steps, num_params(policy), &file, device)?;
    Ok(())
}

/// [`save_policy_and_optimizer`] plus the minibatch generator (`rng_batch` in `state.json`).
pub fn save_with_minibatch_rng(
    policy: &impl Module,
    opt: &FlatOptimizer,
    prefix: &str,
    rng_batch: &Rng,
) -> LearnerState {
    let mut state = save_policy_and_optimizer(policy, opt, prefix);
    state.insert("rng_batch", rng_batch);
    state
}

/// Reads what [`save_with_minibatch_rng`] wrote; returns the minibatch generator.
pub fn load_with_minibatch_rng<M: Module>(
    ck: &Checkpoint,
    state: &Map<String, Value>,
    policy: &mut M,
    opt: &mut FlatOptimizer,
    prefix: &str,
    device: &Device,
) -> Result<Rng, RlError> {
    load_policy_and_optimizer(ck, state, policy, opt, prefix, device)?;
    state_entry(ck, state, "rng_batch")
}

/// What `state.json` holds: the shell's [`CoreState`] and the learner's entries, side by side.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SavedState {
    #[serde(flatten)]
    core: CoreState,
    #[serde(flatten)]
    learner: Map<String, Value>,
}

/// An on-policy agent: the shared shell around the learner `L`.
pub struct OnPolicyAgent<L: OnPolicyLearner> {
    core: OnPolicyCore,
    learner: L,
    /// `num_env_runners` ≥ 1: the runners that collect each rollout.
    runners: Option<SyncRunners<L::Policy>>,
    /// The last weights version published to the runners.
    runner_version: u64,
}

impl<L: OnPolicyLearner> OnPolicyAgent<L> {
    /// A fresh agent for `run` (its `algo_kwargs` are `L`'s hyperparameters) on `device`
    /// (gradients are taken on `device.autodiff()`).
    pub fn new(run: &RunConfig, make_env: EnvMaker<'_>, device: &Device) -> Result<Self, RlError> {
        Self::build(run, make_env, device, None)
    }

    /// [`new`](Self::new) with the runners (`num_env_runners` of them) in other processes: the
    /// learner posts the run on `link`'s broker and gathers one rollout from each runner per
    /// iteration (they join with [`serve_sync_runner`](crate::remote::serve_sync_runner)).
    pub fn with_broker(
        run: &RunConfig,
        make_env: EnvMaker<'_>,
        device: &Device,
        link: &BrokerLink,
    ) -> Result<Self, RlError> {
        Self::build(run, make_env, device, Some(link))
    }

    fn build(
        run: &RunConfig,
        make_env: EnvMaker<'_>,
        device: &Device,
        link: Option<&BrokerLink>,
    ) -> Result<Self, RlError> {
        let cfg = L::Config::from_kwargs(&run.algo_kwargs).map_err(RlError::Config)?;
        let rs = cfg.rollout_settings();
        if link.is_some() && rs.num_env_runners == 0 {
            return Err(RlError::Config(ConfigError::new(
                "algo_kwargs.num_env_runners",
                format!(
                    "{} over a broker gathers one rollout per runner process each iteration: \
                     set num_env_runners to the number of runner processes (at least 1)",
                    L::NAME
                ),
            )));
        }
        let device = device.clone().autodiff();
        let mut core = OnPolicyCore::new(run, make_env, rs.n_steps, device.clone().inner())?;
        L::check_action_space(&core.status.act_space)
            .map_err(|e| RlError::Config(ConfigError::new(&run.env_id, e)))?;
        let policy = L::make_policy(
            &cfg,
            &core.status.obs_space,
            &core.status.act_space,
            &mut Rng::for_stream(run.seed, "init"),
            &device,
        )
        .map_err(|e| {
            RlError::Config(match e.strip_prefix("use_sde: ") {
                Some(m) => ConfigError::new("algo_kwargs.use_sde", m),
                None => ConfigError::new("policy", e),
            })
        })?;
        core.collector.set_state_dim(policy.state_dim());
        core.curiosity =
            Curiosity::from_run(run, &core.status.obs_space, &core.status.act_space, &device)?;
        let ctx = BuildContext {
            device,
            run,
            spaces: (&core.status.obs_space, &core.status.act_space),
        };
        let runners = match (rs.num_env_runners, link) {
            (0, _) => None,
            (_, None) => {
                let infer = core.infer.clone();
                let copy = policy.valid();
                Some(SyncRunners::lockstep(run, make_env, &rs, &copy, &infer)?)
            }
            (_, Some(link)) => Some(SyncRunners::remote(run, &rs, link)?),
        };
        let learner = L::build(cfg, policy, &ctx)?;
        Ok(Self {
            learner,
            core,
            runner_version: runners.as_ref().map_or(0, |r| r.published_version()),
            runners,
        })
    }

    /// Loads a checkpoint written by [`Algorithm::save`]; `device` overrides the saved one.
    pub fn load(dir: &Path, make_env: EnvMaker<'_>, device: &Device) -> Result<Self, RlError> {
        Self::load_with(dir, make_env, device, None)
    }

    /// [`load`](Self::load) with the runners in other processes (see
    /// [`with_broker`](Self::with_broker)). The next version published is above any in the
    /// broker's bucket, so runners that acted for a learner that died act again.
    pub fn load_with_broker(
        dir: &Path,
        make_env: EnvMaker<'_>,
        device: &Device,
        link: &BrokerLink,
    ) -> Result<Self, RlError> {
        Self::load_with(dir, make_env, device, Some(link))
    }

    fn load_with(
        dir: &Path,
        make_env: EnvMaker<'_>,
        device: &Device,
        link: Option<&BrokerLink>,
    ) -> Result<Self, RlError> {
        let (ck, run) = read_run(dir, L::NAME)?;
        let mut agent = Self::build(&run, make_env, device, link)?;
        let mut state: SavedState = read_json(&ck, "state.json")?;
        agent.learner.load_state(&ck, &state.learner)?;
        load_plugin(&mut agent.core.curiosity, &ck, &state.learner)?;
        let runner_states = std::mem::take(&mut state.core.runners);
        agent.runner_version = agent.runner_version.max(state.core.runner_version);
        if let Some(used) = state.core.used_batches.take()
            && let Some(SyncRunners::Remote { runners, .. }) = &agent.runners
        {
            runners.transport.set_used(used);
        }
        if let Some(r) = &mut agent.runners {
            r.restore(runner_states, &ck.path_of("state.json"))?;
        }
        agent.core.restore(state.core)?;
        Ok(agent)
    }

    /// The hyperparameters.
    pub fn config(&self) -> &L::Config {
        self.learner.config()
    }

    /// The policy network.
    pub fn policy(&self) -> &L::Policy {
        self.learner.policy()
    }

    /// The learner.
    pub fn learner(&self) -> &L {
        &self.learner
    }

    /// The last collected rollout.
    pub fn rollout_buffer(&self) -> &RolloutBuffer {
        &self.core.collector.buffer
    }

    /// The run configuration.
    pub fn run_config(&self) -> &RunConfig {
        &self.core.run
    }
}

impl<L: OnPolicyLearner> Algorithm for OnPolicyAgent<L> {
    fn name(&self) -> &str {
        L::NAME
    }

    fn status(&self) -> &RunStatus {
        &self.core.status
    }

    fn status_mut(&mut self) -> &mut RunStatus {
        &mut self.core.status
    }

    fn env_stats(&self) -> Vec<Value> {
        match self.runners.as_ref().and_then(SyncRunners::env_stats) {
            Some(stats) => stats,
            None => self.core.collector.env.save_stats(),
        }
    }

    fn train(&mut self) -> Result<Metrics, RlError> {
        let t0 = Instant::now();
        let s = self.learner.config().rollout_settings();
        let sde_freq = s.sde_sample_freq.unwrap_or(-1);
        let r = match &mut self.runners {
            None => self
                .core
                .collect(self.learner.policy(), s.gamma, s.gae_lambda, sde_freq)?,
            Some(runners) => {
                self.runner_version += 1;
                let w = Versioned {
                    version: self.runner_version,
                    weights: module_tensors(self.learner.policy()),
                };
                let batches = runners.gather(w)?;
                self.core
                    .take_rollouts(batches, s.gamma, s.gae_lambda, t0)?
            }
        };
        let mut m = self
            .learner
            .update(&self.core.collector.buffer, &self.core.status.progress())?;
        if let Some(SyncRunners::Remote { runners, stale, .. }) = &self.runners {
            let restarts = runners.restarts.load(std::sync::atomic::Ordering::SeqCst);
            m.insert("perf/runner_restarts".into(), restarts as f64);
            m.insert("perf/stale_batches".into(), *stale as f64);
        }
        self.core.finish(&mut m, &r, t0)?;
        Ok(m)
    }

    fn predict(&mut self, obs: &[f32], deterministic: bool) -> Result<Vec<f32>, RlError> {
        self.core.predict(self.learner.policy(), obs, deterministic)
    }

    fn reset_predict_state(&mut self) {
        self.core.predict_reset = true;
    }

    fn predict_with_state(
        &mut self,
        obs: &[f32],
        state: &mut Vec<f32>,
        deterministic: bool,
    ) -> Result<Vec<f32>, RlError> {
        let own_reset = self.core.predict_reset;
        let own = std::mem::replace(&mut self.core.predict_state, std::mem::take(state));
        self.core.predict_reset = self.core.predict_state.is_empty();
        let actions = self.core.predict(self.learner.policy(), obs, deterministic);
        *state = std::mem::replace(&mut self.core.predict_state, own);
        self.core.predict_reset = own_reset;
        actions
    }

    fn save(&self, dir: &Path) -> Result<(), RlError> {
        let mut learner_state = self.learner.save_state();
        save_plugin(&self.core.curiosity, &mut learner_state);
        let LearnerState {
            mut files,
            entries: learner,
        } = learner_state;
        let mut core = self.core.state()?;
        if let Some(r) = &self.runners {
            core.runners = r.states()?;
            core.runner_version = self.runner_version;
            if let SyncRunners::Remote { runners, .. } = r {
                core.used_batches = Some(runners.transport.used());
            }
        }
        let state = SavedState { core, learner };
        files.insert(
            0,
            ("config.yaml", self.core.run_to_save(self.learner.config())?),
        );
        files.push((
            "state.json",
            serde_json::to_vec_pretty(&state).expect("serializable"),
        ));
        write_checkpoint(dir, L::NAME, &files)?;
        Ok(())
    }
}
