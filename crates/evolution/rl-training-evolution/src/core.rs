//! The shell the evolution strategies share ([`EvolutionAgent`]): the run, the worker pool,
//! the noise table, observation statistics, counters and the generator; antithetic
//! evaluation, `predict` and checkpoints, around a [`Strategy`] (the learner: the flat
//! parameters and how a population's returns move them).

use crate::noise::NoiseTable;
use crate::policy::{FlatPolicy, HiddenActivation, ObsStats, PolicyArch};
use crate::pool::{Episode, WorkerPool};
use crate::remote::{Generation, RemoteWorkers};
use rl_training_broker::BrokerLink;
use rl_training_core::agent::{EnvMaker, checked_flat_obs, run_yaml};
use rl_training_core::algorithm::{Algorithm, Learner, LearnerState, RunStatus};
use rl_training_core::burn::tensor::Device;
use rl_training_core::checkpoint::{Checkpoint, read_json, read_run, write_checkpoint};
use rl_training_core::config::{AlgoConfig, RunConfig};
use rl_training_core::env::Env;
use rl_training_core::logger::Metrics;
use rl_training_core::params::TensorMap;
use rl_training_core::{RlError, Rng, Space};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// Policy and population settings the strategies share.
#[derive(Debug, Clone)]
pub struct CoreSettings {
    /// Worker threads (one env each).
    pub num_workers: usize,
    /// Policy architecture.
    pub policy: PolicyArch,
    /// Hidden layers of an MLP policy.
    pub net_arch: Vec<usize>,
    /// Hidden activation of an MLP policy.
    pub activation: HiddenActivation,
    /// Biases in the layers.
    pub bias: bool,
    /// Box actions: `tanh` outputs rescaled onto the bounds (else clipped outputs).
    pub squash_output: bool,
    /// Normalize observations with running statistics.
    pub normalize_obs: bool,
    /// Draws in the shared noise table.
    pub noise_table_size: usize,
}

/// An algorithm's defaults for the [`PolicyKeys`] whose defaults differ between OpenAI-ES
/// and ARS (the papers' settings: ES an MLP, ARS a linear policy).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PolicyDefault {
    /// `num_workers`.
    pub num_workers: usize,
    /// `policy`.
    pub policy: PolicyArch,
    /// `net_arch`.
    pub net_arch: &'static [usize],
    /// `activation`.
    pub activation: HiddenActivation,
}

impl PolicyDefault {
    /// An MLP policy of `net_arch` hidden layers, `num_workers` workers.
    pub const fn mlp(
        num_workers: usize,
        net_arch: &'static [usize],
        activation: HiddenActivation,
    ) -> Self {
        let policy = PolicyArch::Mlp;
        Self {
            num_workers,
            policy,
            net_arch,
            activation,
        }
    }

    /// A linear policy, `num_workers` workers; asked for an MLP, sb3-contrib's ARS default of
    /// two ReLU layers of 64.
    pub const fn linear(num_workers: usize) -> Self {
        Self {
            policy: PolicyArch::Linear,
            ..Self::mlp(num_workers, &[64, 64], HiddenActivation::Relu)
        }
    }
}

/// A config that gives the defaults of its [`PolicyKeys`] (implemented by the config type
/// itself: `PolicyKeys<EsConfig>`).
pub trait PolicyDefaults {
    /// The keys' defaults.
    const POLICY: PolicyDefault;
}

/// The policy and worker keys OpenAI-ES and ARS share: one list of names and aliases, each
/// algorithm's defaults from `D`. Flat in their YAML tables: the configs embed it with
/// `#[serde(flatten, skip_deserializing)]` and read it with
/// [`from_kwargs_with_part`](rl_training_core::config::from_kwargs_with_part).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default, bound = "")]
pub struct PolicyKeys<D: PolicyDefaults> {
    /// Worker threads, one env each.
    #[serde(alias = "num_actors", alias = "num_env_runners")]
    pub num_workers: usize,
    /// `linear` or `mlp`.
    pub policy: PolicyArch,
    /// Hidden layers of an MLP policy.
    pub net_arch: Vec<usize>,
    /// Hidden activation of an MLP policy (`tanh` or `relu`).
    #[serde(alias = "activation_fn")]
    pub activation: HiddenActivation,
    /// Normalize observations with running statistics (default true).
    #[serde(alias = "observation_filter_on")]
    pub normalize_obs: bool,
    /// Biases in the layers (default: for an MLP, not for a linear policy).
    #[serde(alias = "with_bias")]
    pub bias: Option<bool>,
    /// Box actions: `tanh` outputs rescaled onto the bounds, else clipped outputs (default:
    /// for an MLP, not for a linear policy, as sb3-contrib).
    pub squash_output: Option<bool>,
    /// Draws in the shared noise table (default 10,000,000).
    pub noise_table_size: usize,
    #[serde(skip)]
    defaults: std::marker::PhantomData<D>,
}

impl<D: PolicyDefaults> Default for PolicyKeys<D> {
    fn default() -> Self {
        Self {
            num_workers: D::POLICY.num_workers,
            policy: D::POLICY.policy,
            net_arch: D::POLICY.net_arch.to_vec(),
            activation: D::POLICY.activation,
            normalize_obs: true,
            bias: None,
            squash_output: None,
            noise_table_size: 10_000_000,
            defaults: std::marker::PhantomData,
        }
    }
}

impl<D: PolicyDefaults> PolicyKeys<D> {
    /// The shell's settings (bias and squashing resolved for the policy kind).
    pub fn settings(&self) -> CoreSettings {
        let mlp = self.policy == PolicyArch::Mlp;
        CoreSettings {
            num_workers: self.num_workers,
            policy: self.policy,
            net_arch: self.net_arch.clone(),
            activation: self.activation,
            bias: self.bias.unwrap_or(mlp),
            squash_output: self.squash_output.unwrap_or(mlp),
            normalize_obs: self.normalize_obs,
            noise_table_size: self.noise_table_size,
        }
    }

    /// Range checks of the shared keys.
    pub fn validate(&self) -> Result<(), rl_training_core::config::ConfigError> {
        let sizes = [
            ("num_workers", self.num_workers),
            ("noise_table_size", self.noise_table_size),
        ];
        rl_training_core::config::check::at_least_one(&sizes)
    }
}

/// Counters, generator and statistics the shell saves in `state.json` (the strategy's
/// entries sit beside them).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EvolutionState {
    /// Env steps so far.
    pub num_timesteps: u64,
    /// Iterations so far.
    pub iterations: u64,
    /// Budget.
    pub total_timesteps: u64,
    /// Draws perturbations and env seeds.
    pub rng: Rng,
    /// Observation statistics.
    pub obs_stats: ObsStats,
}

/// Returns of antithetic pairs and what they cost.
#[derive(Debug, Clone)]
pub struct PairReturns {
    /// Returns with `θ + σε`.
    pub pos: Vec<f64>,
    /// Returns with `θ − σε` (empty when not antithetic).
    pub neg: Vec<f64>,
    /// Every episode, in task order.
    pub episodes: Vec<Episode>,
}

/// The shared shell's state: workers, noise, statistics, counters.
pub struct EvolutionCore {
    /// The run configuration.
    pub run: RunConfig,
    /// Workers and the policy shape.
    pub pool: WorkerPool,
    /// Shared perturbations (the strategy holds the same table).
    pub noise: Arc<NoiseTable>,
    /// Observation statistics.
    pub stats: ObsStats,
    /// Draws perturbations and env seeds.
    pub rng: Rng,
    /// Counters and spaces.
    pub status: RunStatus,
    /// Worker processes over a broker, when the run has them (else the pool's threads).
    pub remote: Option<Box<RemoteWorkers>>,
}

/// The policy of `run` for `env`'s spaces (a Box observation space is required).
pub fn flat_policy(
    run: &RunConfig,
    env: &dyn Env,
    s: &CoreSettings,
) -> Result<FlatPolicy, RlError> {
    let (obs_space, act_space) = (env.observation_space(), env.action_space());
    if !matches!(obs_space, Space::Box { .. }) {
        return Err(RlError::Config(rl_training_core::config::ConfigError::new(
            &run.env_id,
            format!(
                "evolution strategies need a Box observation space, not {}",
                obs_space.describe()
            ),
        )));
    }
    FlatPolicy::new(
        obs_space,
        act_space,
        s.policy,
        &s.net_arch,
        s.activation,
        s.bias,
        s.squash_output,
    )
    .map_err(|e| RlError::Config(rl_training_core::config::ConfigError::new(&run.env_id, e)))
}

impl EvolutionCore {
    /// Builds `num_workers` envs, the policy shape and the noise table (from the run seed);
    /// returns it with the initial parameters (from the run's `init` stream).
    pub fn new(
        run: &RunConfig,
        make_env: EnvMaker<'_>,
        s: &CoreSettings,
    ) -> Result<(Self, Vec<f32>), RlError> {
        if run.normalize.shared {
            // Each worker steps its own env; there is no vector to share statistics over.
            return Err(RlError::Config(rl_training_core::config::ConfigError::new(
                "normalize.shared",
                "evolution strategies' workers each step one env; set it to false",
            )));
        }
        if s.num_workers == 0 {
            return Err(RlError::Config(rl_training_core::config::ConfigError::new(
                "algo_kwargs.num_workers",
                "must be at least 1",
            )));
        }
        let envs = (0..s.num_workers)
            .map(|_| make_env(run))
            .collect::<Result<Vec<_>, _>>()?;
        let obs_space = envs[0].observation_space().clone();
        let act_space = envs[0].action_space().clone();
        let policy = flat_policy(run, envs[0].as_ref(), s)?;
        let n = policy.num_params();
        if s.noise_table_size < n {
            return Err(RlError::Config(rl_training_core::config::ConfigError::new(
                "algo_kwargs.noise_table_size",
                format!(
                    "{} draws cannot hold a perturbation of {n} parameters",
                    s.noise_table_size
                ),
            )));
        }
        let params = policy.init(&mut Rng::for_stream(run.seed, "init"));
        let core = Self {
            stats: ObsStats::new(policy.obs_dim, s.normalize_obs),
            noise: Arc::new(NoiseTable::new(s.noise_table_size, run.seed)),
            pool: WorkerPool::new(envs, policy),
            rng: Rng::for_stream(run.seed, "evolution"),
            status: RunStatus::new(run.total_timesteps, obs_space, act_space),
            run: run.clone(),
            remote: None,
        };
        Ok((core, params))
    }

    /// Draws `n` noise offsets for `dim` parameters.
    pub fn sample_offsets(&mut self, n: usize, dim: usize) -> Vec<usize> {
        (0..n)
            .map(|_| self.noise.sample_offset(&mut self.rng, dim))
            .collect()
    }

    /// Evaluates `theta ± σ ε_k` for each offset (only `+` unless `antithetic`) over `episodes`
    /// episodes each (sb3-contrib's `n_eval_episodes`; the returns are their mean), episode `j`
    /// of pair `k` on env seed `base + k·episodes + j` for both signs, so the two signs of a pair
    /// meet the same starts; merges the observation statistics afterwards and counts the steps.
    pub fn evaluate_perturbations(
        &mut self,
        theta: &[f32],
        offsets: &[usize],
        sigma: f64,
        antithetic: bool,
        episodes: usize,
    ) -> Result<PairReturns, RlError> {
        let generation = Generation {
            theta: theta.to_vec(),
            offsets: offsets.to_vec(),
            sigma,
            antithetic,
            per: episodes.max(1),
            base: self.rng.next_seed() >> 16,
        };
        let (signs, per) = (generation.signs(), generation.per);
        let episodes = match &mut self.remote {
            None => {
                let noise = &self.noise;
                let task = |i: usize| generation.task(noise, i);
                self.pool.run(generation.n_tasks(), &self.stats, &task)?
            }
            Some(r) => r.run(&generation, &self.stats)?,
        };
        let mut out = PairReturns {
            pos: Vec::with_capacity(offsets.len()),
            neg: Vec::with_capacity(offsets.len()),
            episodes: Vec::new(),
        };
        for (c, eps) in episodes.chunks(per).enumerate() {
            let mean = eps.iter().map(|e| e.ret).sum::<f64>() / per as f64;
            if c % signs == 1 {
                out.neg.push(mean);
            } else {
                out.pos.push(mean);
            }
        }
        for ep in &episodes {
            self.status.num_timesteps += ep.len as u64;
            self.stats.merge(&ep.obs_sum, &ep.obs_sq, ep.len as f64);
        }
        out.episodes = episodes;
        Ok(out)
    }

    /// Counts the iteration and adds the charts every strategy reports.
    pub fn finish(&mut self, m: &mut Metrics, r: &PairReturns, started: Instant) {
        self.status.iterations += 1;
        if let Some(w) = &self.remote {
            m.insert(
                "perf/runner_restarts".into(),
                w.restarts.load(std::sync::atomic::Ordering::SeqCst) as f64,
            );
        }
        let eps = &r.episodes;
        let n = eps.len().max(1) as f64;
        let steps: usize = eps.iter().map(|e| e.len).sum();
        let secs = started.elapsed().as_secs_f64().max(1e-9);
        m.insert(
            "charts/episodic_return".into(),
            eps.iter().map(|e| e.ret).sum::<f64>() / n,
        );
        m.insert("charts/episodic_length".into(), steps as f64 / n);
        m.insert(
            "charts/population_return_max".into(),
            eps.iter().map(|e| e.ret).fold(f64::NEG_INFINITY, f64::max),
        );
        m.insert("charts/SPS".into(), steps as f64 / secs);
        m.insert("perf/env_steps_per_s".into(), steps as f64 / secs);
        m.insert("perf/evaluations_per_s".into(), eps.len() as f64 / secs);
        m.insert("perf/num_workers".into(), self.pool.num_workers() as f64);
        m.insert("perf/episodes".into(), eps.len() as f64);
    }

    /// Deterministic actions of parameters `theta` for raw observations (rows).
    pub fn predict(&self, theta: &[f32], obs: &[f32]) -> Result<Vec<f32>, RlError> {
        checked_flat_obs(&self.status.obs_space, &self.run.env_id, obs)?;
        let d = self.status.obs_space.raw_dim().max(1);
        Ok(obs
            .chunks(d)
            .flat_map(|o| self.pool.policy().act(theta, o, &self.stats))
            .collect())
    }

    /// The counters, generator and statistics to save.
    pub fn state(&self) -> EvolutionState {
        EvolutionState {
            num_timesteps: self.status.num_timesteps,
            iterations: self.status.iterations,
            total_timesteps: self.status.total_timesteps,
            rng: self.rng.clone(),
            obs_stats: self.stats.clone(),
        }
    }

    /// Restores what [`state`](Self::state) gave (`file` names `state.json` in errors).
    pub fn restore(&mut self, s: EvolutionState, file: &str) -> Result<(), RlError> {
        if s.obs_stats.rms.mean.len() != self.stats.rms.mean.len() {
            return Err(RlError::Config(rl_training_core::config::ConfigError::new(
                format!("{file}: obs_stats"),
                format!(
                    "{} elements, the policy observes {}",
                    s.obs_stats.rms.mean.len(),
                    self.stats.rms.mean.len()
                ),
            )));
        }
        self.status.num_timesteps = s.num_timesteps;
        self.status.iterations = s.iterations;
        self.status.total_timesteps = s.total_timesteps;
        self.rng = s.rng;
        self.stats = s.obs_stats;
        Ok(())
    }
}

/// One iteration's evaluated population, what a [`Strategy`] learns from: the perturbations
/// (noise-table offsets) and their returns.
#[derive(Debug, Clone)]
pub struct Evaluated {
    /// Noise offsets of the perturbations.
    pub offsets: Vec<usize>,
    /// Their returns.
    pub returns: PairReturns,
}

/// What a strategy has the shell evaluate each iteration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Population {
    /// Perturbations (pairs when antithetic).
    pub directions: usize,
    /// Noise scale σ.
    pub sigma: f64,
    /// Evaluate `θ − σε` too.
    pub antithetic: bool,
    /// Episodes per candidate (their mean is its return).
    pub episodes: usize,
}

/// What an evolution strategy adds to the shared shell: its hyperparameters, the population
/// it asks for, and its learner (the flat parameters and how a population's returns move
/// them, through [`Learner`]).
pub trait Strategy: Learner<Batch = Evaluated> + Sized {
    /// The hyperparameters (`algo_kwargs`).
    type Config: AlgoConfig + Serialize + Clone;
    /// The algorithm's name in configs and checkpoints.
    const NAME: &'static str;

    /// Workers, policy shape, noise table.
    fn core_settings(cfg: &Self::Config) -> CoreSettings;
    /// The population each iteration evaluates.
    fn population(cfg: &Self::Config) -> Population;
    /// A learner starting from `params`, with the shell's noise table.
    fn build(cfg: Self::Config, params: Vec<f32>, noise: Arc<NoiseTable>) -> Self;
    /// The hyperparameters.
    fn config(&self) -> &Self::Config;
    /// The current flat parameters.
    fn params(&self) -> &[f32];
}

/// `Σ_k w_k ε_k` over the perturbations at `offsets` of `noise`, for `dim` parameters.
pub fn weighted_noise(
    noise: &NoiseTable,
    offsets: &[usize],
    weights: &[f64],
    dim: usize,
) -> Vec<f64> {
    let mut g = vec![0.0f64; dim];
    for (&o, &w) in offsets.iter().zip(weights) {
        for (gi, &e) in g.iter_mut().zip(noise.slice(o, dim)) {
            *gi += w * e as f64;
        }
    }
    g
}

/// The flat parameters as tensor `theta`: a strategy's weights.
pub fn theta_tensors(params: &[f32]) -> TensorMap {
    let mut model = TensorMap::default();
    model.insert("theta", vec![params.len()], params.to_vec());
    model
}

/// Replaces `params` by tensor `theta` of `weights` (the same length).
pub fn set_theta(params: &mut Vec<f32>, weights: &TensorMap) -> Result<(), RlError> {
    *params = weights.clone().take("theta", &[params.len()], "weights")?;
    Ok(())
}

/// `model.safetensors` with the flat parameters as tensor `theta`.
pub fn theta_file(params: &[f32]) -> Vec<u8> {
    theta_tensors(params).to_bytes()
}

/// Reads the parameters [`theta_file`] wrote (`n` of them) from checkpoint `ck`.
pub fn read_theta(ck: &Checkpoint, n: usize) -> Result<Vec<f32>, RlError> {
    let file = ck.path_of("model.safetensors");
    let mut model = TensorMap::from_bytes(ck.file("model.safetensors")?, &file)?;
    Ok(model.take("theta", &[n], &file)?)
}

/// What `state.json` holds: the shell's [`EvolutionState`] and the strategy's entries.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SavedState {
    #[serde(flatten)]
    core: EvolutionState,
    #[serde(flatten)]
    learner: serde_json::Map<String, serde_json::Value>,
}

/// An evolution agent: the shared shell around the strategy `L`.
pub struct EvolutionAgent<L: Strategy> {
    core: EvolutionCore,
    learner: L,
}

impl<L: Strategy> EvolutionAgent<L> {
    /// A fresh agent for `run` (its `algo_kwargs` are `L`'s hyperparameters); strategies run
    /// on the host, the device is accepted for a uniform interface.
    pub fn new(run: &RunConfig, make_env: EnvMaker<'_>, _device: &Device) -> Result<Self, RlError> {
        run.refuse_curiosity("evolution strategies learn from episode returns, not transitions")
            .map_err(RlError::Config)?;
        let cfg = L::Config::from_kwargs(&run.algo_kwargs).map_err(RlError::Config)?;
        let (core, params) = EvolutionCore::new(run, make_env, &L::core_settings(&cfg))?;
        let learner = L::build(cfg, params, core.noise.clone());
        Ok(Self { core, learner })
    }

    /// [`new`](Self::new) with the episodes run by worker processes that join the run on
    /// `link`'s broker (`rl runner`); the results are the same as with the in-process
    /// workers.
    pub fn with_broker(
        run: &RunConfig,
        make_env: EnvMaker<'_>,
        device: &Device,
        link: &BrokerLink,
    ) -> Result<Self, RlError> {
        let mut a = Self::new(run, make_env, device)?;
        a.core.remote = Some(Box::new(RemoteWorkers::start(link, run)?));
        Ok(a)
    }

    /// [`load`](Self::load) with worker processes (see [`with_broker`](Self::with_broker)).
    pub fn load_with_broker(
        dir: &Path,
        make_env: EnvMaker<'_>,
        device: &Device,
        link: &BrokerLink,
    ) -> Result<Self, RlError> {
        let mut a = Self::load(dir, make_env, device)?;
        let run = a.core.run.clone();
        a.core.remote = Some(Box::new(RemoteWorkers::start(link, &run)?));
        Ok(a)
    }

    /// Loads a checkpoint written by [`Algorithm::save`].
    pub fn load(dir: &Path, make_env: EnvMaker<'_>, device: &Device) -> Result<Self, RlError> {
        let (ck, run) = read_run(dir, L::NAME)?;
        let mut a = Self::new(&run, make_env, device)?;
        let s: SavedState = read_json(&ck, "state.json")?;
        a.learner.load_state(&ck, &s.learner)?;
        a.core.restore(s.core, &ck.path_of("state.json"))?;
        Ok(a)
    }

    /// The hyperparameters.
    pub fn config(&self) -> &L::Config {
        self.learner.config()
    }

    /// The strategy (its parameters and optimizer).
    pub fn learner(&self) -> &L {
        &self.learner
    }

    /// The current flat parameters.
    pub fn params(&self) -> &[f32] {
        self.learner.params()
    }
}

impl<L: Strategy> Algorithm for EvolutionAgent<L> {
    fn name(&self) -> &str {
        L::NAME
    }

    fn status(&self) -> &RunStatus {
        &self.core.status
    }

    fn status_mut(&mut self) -> &mut RunStatus {
        &mut self.core.status
    }

    /// Draws the population's perturbations, evaluates them on the workers, and lets the
    /// strategy step from their returns.
    fn train(&mut self) -> Result<Metrics, RlError> {
        let t0 = Instant::now();
        let pop = L::population(self.learner.config());
        let dim = self.learner.params().len();
        let offsets = self.core.sample_offsets(pop.directions, dim);
        let returns = self.core.evaluate_perturbations(
            self.learner.params(),
            &offsets,
            pop.sigma,
            pop.antithetic,
            pop.episodes,
        )?;
        let batch = Evaluated { offsets, returns };
        let mut m = self.learner.update(&batch, &self.progress())?;
        self.core.finish(&mut m, &batch.returns, t0);
        rl_training_core::algorithm::check_finite(self.core.status.num_timesteps, &m)?;
        Ok(m)
    }

    /// The parameters' deterministic actions (strategies' policies have no noise).
    fn predict(&mut self, obs: &[f32], _deterministic: bool) -> Result<Vec<f32>, RlError> {
        self.core.predict(self.learner.params(), obs)
    }

    fn save(&self, dir: &Path) -> Result<(), RlError> {
        let LearnerState {
            files: learner_files,
            entries,
        } = self.learner.save_state();
        let state = SavedState {
            core: self.core.state(),
            learner: entries,
        };
        let cfg = self.learner.config();
        let run = &self.core.run;
        let mut files = vec![(
            "config.yaml",
            run_yaml(run, self.core.status.total_timesteps, cfg)?,
        )];
        files.extend(learner_files);
        files.push((
            "state.json",
            serde_json::to_vec_pretty(&state).expect("serializable"),
        ));
        write_checkpoint(dir, L::NAME, &files)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Test defaults: an MLP of one hidden layer, 2 workers.
    #[derive(Debug, Clone, PartialEq)]
    struct Small;
    impl PolicyDefaults for Small {
        const POLICY: PolicyDefault = PolicyDefault::mlp(2, &[8], HiddenActivation::Tanh);
    }

    #[test]
    fn policy_keys_are_the_documented_list() {
        // The one list of the policy keys OpenAI-ES and ARS share, aliases included.
        assert_eq!(
            rl_training_core::config::accepted_keys::<PolicyKeys<Small>>(),
            [
                "num_actors",
                "num_env_runners",
                "num_workers",
                "policy",
                "net_arch",
                "activation",
                "activation_fn",
                "normalize_obs",
                "observation_filter_on",
                "bias",
                "with_bias",
                "squash_output",
                "noise_table_size",
            ]
        );
    }

    #[test]
    fn bias_and_squashing_default_to_the_policy_kind() {
        let keys = PolicyKeys::<Small>::default();
        let mlp = keys.settings();
        assert!(mlp.bias && mlp.squash_output && mlp.normalize_obs);
        assert_eq!((mlp.num_workers, mlp.net_arch), (2, vec![8]));
        let linear = PolicyKeys {
            policy: PolicyArch::Linear,
            ..keys.clone()
        };
        let linear = linear.settings();
        assert!(!linear.bias && !linear.squash_output);
        let given = PolicyKeys {
            bias: Some(false),
            ..keys
        };
        let s = given.settings();
        assert!(!s.bias && s.squash_output);
        // Defaults fill what a table leaves out; the marker is not a key.
        let read: PolicyKeys<Small> =
            serde_json::from_value(serde_json::json!({"policy": "linear"})).unwrap();
        assert_eq!(
            (read.policy, read.net_arch.clone()),
            (PolicyArch::Linear, vec![8])
        );
        assert!(
            serde_json::to_value(&read)
                .unwrap()
                .get("defaults")
                .is_none()
        );
    }
}
