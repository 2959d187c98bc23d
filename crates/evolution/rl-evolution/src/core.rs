//! The shell the evolution strategies share: the run, the worker pool, the noise table, the
//! flat parameters and observation statistics, counters and the generator; antithetic
//! evaluation, `predict`, and checkpoints.

use crate::noise::NoiseTable;
use crate::policy::{FlatPolicy, HiddenActivation, ObsStats, PolicyArch};
use crate::pool::{Episode, WorkerPool};
use rl_core::agent::{EnvMaker, checked_flat_obs, run_yaml};
use rl_core::checkpoint::{Checkpoint, read_json, write_checkpoint};
use rl_core::config::RunConfig;
use rl_core::logger::Metrics;
use rl_core::params::TensorMap;
use rl_core::{RlError, Rng, Space};
use serde::{Deserialize, Serialize};
use std::path::Path;
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

/// Counters, generator and statistics saved in `state.json`.
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

/// The shared shell.
pub struct EvolutionCore {
    /// The run configuration.
    pub run: RunConfig,
    /// Workers and the policy shape.
    pub pool: WorkerPool,
    /// Shared perturbations.
    pub noise: NoiseTable,
    /// Observation statistics.
    pub stats: ObsStats,
    /// The current parameters.
    pub params: Vec<f32>,
    /// Draws perturbations and env seeds.
    pub rng: Rng,
    /// Env steps so far.
    pub num_timesteps: u64,
    /// Iterations so far.
    pub iterations: u64,
    /// Budget.
    pub total_timesteps: u64,
    /// Observation space.
    pub obs_space: Space,
    /// Action space.
    pub act_space: Space,
}

impl EvolutionCore {
    /// Builds `num_workers` envs, the policy (initialized from the run's `init` stream) and
    /// the noise table (from the run seed).
    pub fn new(run: &RunConfig, make_env: EnvMaker<'_>, s: &CoreSettings) -> Result<Self, RlError> {
        if run.normalize.shared {
            // Each worker steps its own env; there is no vector to share statistics over.
            return Err(RlError::Config(rl_core::config::ConfigError::new(
                "normalize.shared",
                "evolution strategies' workers each step one env; set it to false",
            )));
        }
        if s.num_workers == 0 {
            return Err(RlError::Config(rl_core::config::ConfigError::new(
                "algo_kwargs.num_workers",
                "must be at least 1",
            )));
        }
        let envs = (0..s.num_workers)
            .map(|_| make_env(run))
            .collect::<Result<Vec<_>, _>>()?;
        let obs_space = envs[0].observation_space().clone();
        let act_space = envs[0].action_space().clone();
        if !matches!(obs_space, Space::Box { .. }) {
            return Err(RlError::Config(rl_core::config::ConfigError::new(
                &run.env_id,
                format!(
                    "evolution strategies need a Box observation space, not {}",
                    obs_space.describe()
                ),
            )));
        }
        let policy = FlatPolicy::new(
            &obs_space,
            &act_space,
            s.policy,
            &s.net_arch,
            s.activation,
            s.bias,
            s.squash_output,
        )
        .map_err(|e| RlError::Config(rl_core::config::ConfigError::new(&run.env_id, e)))?;
        let n = policy.num_params();
        if s.noise_table_size < n {
            return Err(RlError::Config(rl_core::config::ConfigError::new(
                "algo_kwargs.noise_table_size",
                format!(
                    "{} draws cannot hold a perturbation of {n} parameters",
                    s.noise_table_size
                ),
            )));
        }
        let params = policy.init(&mut Rng::for_stream(run.seed, "init"));
        Ok(Self {
            stats: ObsStats::new(policy.obs_dim, s.normalize_obs),
            noise: NoiseTable::new(s.noise_table_size, run.seed),
            pool: WorkerPool::new(envs, policy),
            params,
            rng: Rng::for_stream(run.seed, "evolution"),
            num_timesteps: 0,
            iterations: 0,
            total_timesteps: run.total_timesteps,
            obs_space,
            act_space,
            run: run.clone(),
        })
    }

    /// Draws `n` noise offsets for the current parameter count.
    pub fn sample_offsets(&mut self, n: usize) -> Vec<usize> {
        let dim = self.params.len();
        (0..n)
            .map(|_| self.noise.sample_offset(&mut self.rng, dim))
            .collect()
    }

    /// Evaluates `θ ± σ ε_k` for each offset (only `+` unless `antithetic`) over `episodes`
    /// episodes each (sb3-contrib's `n_eval_episodes`; the returns are their mean), episode `j`
    /// of pair `k` on env seed `base + k·episodes + j` for both signs, so the two signs of a pair
    /// meet the same starts; merges the observation statistics afterwards and counts the steps.
    pub fn evaluate_perturbations(
        &mut self,
        offsets: &[usize],
        sigma: f64,
        antithetic: bool,
        episodes: usize,
    ) -> Result<PairReturns, RlError> {
        let base = self.rng.next_seed() >> 16;
        let signs = if antithetic { 2 } else { 1 };
        let per = episodes.max(1);
        let (theta, noise, dim) = (&self.params, &self.noise, self.params.len());
        // Task i: candidate i / per (pair k, sign), its episode i % per.
        let task = |i: usize| {
            let (c, j) = (i / per, i % per);
            let (k, neg) = (c / signs, c % signs == 1);
            let eps = noise.slice(offsets[k], dim);
            let s = if neg { -sigma } else { sigma } as f32;
            let p: Vec<f32> = theta.iter().zip(eps).map(|(t, e)| t + s * e).collect();
            (p, base.wrapping_add((k * per + j) as u64))
        };
        let episodes = self
            .pool
            .run(offsets.len() * signs * per, &self.stats, &task)?;
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
            self.num_timesteps += ep.len as u64;
            self.stats.merge(&ep.obs_sum, &ep.obs_sq, ep.len as f64);
        }
        out.episodes = episodes;
        Ok(out)
    }

    /// `Σ_k w_k ε_k` over the perturbations at `offsets`.
    pub fn weighted_noise(&self, offsets: &[usize], weights: &[f64]) -> Vec<f64> {
        let dim = self.params.len();
        let mut g = vec![0.0f64; dim];
        for (&o, &w) in offsets.iter().zip(weights) {
            for (gi, &e) in g.iter_mut().zip(self.noise.slice(o, dim)) {
                *gi += w * e as f64;
            }
        }
        g
    }

    /// Counts the iteration and adds the charts every strategy reports.
    pub fn finish(&mut self, m: &mut Metrics, r: &PairReturns, started: Instant) {
        self.iterations += 1;
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

    /// Deterministic actions of the current parameters for raw observations (rows).
    pub fn predict(&self, obs: &[f32]) -> Result<Vec<f32>, RlError> {
        checked_flat_obs(&self.obs_space, &self.run.env_id, obs)?;
        let d = self.obs_space.raw_dim().max(1);
        Ok(obs
            .chunks(d)
            .flat_map(|o| self.pool.policy().act(&self.params, o, &self.stats))
            .collect())
    }

    /// Writes `config.yaml` (with `cfg`), `model.safetensors` (`theta`), `extra` files and
    /// `state.json` (counters, generator, statistics and `extra_state`).
    pub fn save(
        &self,
        dir: &Path,
        name: &str,
        cfg: &impl Serialize,
        extra: Vec<(&'static str, Vec<u8>)>,
        extra_state: serde_json::Map<String, serde_json::Value>,
    ) -> Result<(), RlError> {
        let mut model = TensorMap::default();
        model.insert("theta", vec![self.params.len()], self.params.clone());
        let mut state = match serde_json::to_value(EvolutionState {
            num_timesteps: self.num_timesteps,
            iterations: self.iterations,
            total_timesteps: self.total_timesteps,
            rng: self.rng.clone(),
            obs_stats: self.stats.clone(),
        }) {
            Ok(serde_json::Value::Object(m)) => m,
            _ => unreachable!("a struct serializes to an object"),
        };
        state.extend(extra_state);
        let mut files = vec![
            (
                "config.yaml",
                run_yaml(&self.run, self.total_timesteps, cfg)?,
            ),
            ("model.safetensors", model.to_bytes()),
        ];
        files.extend(extra);
        files.push((
            "state.json",
            serde_json::to_vec_pretty(&state).expect("serializable"),
        ));
        write_checkpoint(dir, name, &files)?;
        Ok(())
    }

    /// Restores what [`save`](Self::save) wrote; returns `state.json` for the strategy's
    /// own entries.
    pub fn restore(
        &mut self,
        ck: &Checkpoint,
    ) -> Result<serde_json::Map<String, serde_json::Value>, RlError> {
        let file = ck.path_of("model.safetensors");
        let mut model = TensorMap::from_bytes(ck.file("model.safetensors")?, &file)?;
        self.params = model.take("theta", &[self.params.len()], &file)?;
        let raw: serde_json::Map<String, serde_json::Value> = read_json(ck, "state.json")?;
        let s: EvolutionState = read_json(ck, "state.json")?;
        if s.obs_stats.rms.mean.len() != self.stats.rms.mean.len() {
            return Err(RlError::Config(rl_core::config::ConfigError::new(
                format!("{}: obs_stats", ck.path_of("state.json")),
                format!(
                    "{} elements, the policy observes {}",
                    s.obs_stats.rms.mean.len(),
                    self.stats.rms.mean.len()
                ),
            )));
        }
        self.num_timesteps = s.num_timesteps;
        self.iterations = s.iterations;
        self.total_timesteps = s.total_timesteps;
        self.rng = s.rng;
        self.stats = s.obs_stats;
        Ok(raw)
    }
}

/// The [`Algorithm`](rl_core::algorithm::Algorithm) accessors for a strategy with a `core`
/// field.
#[macro_export]
macro_rules! evolution_accessors {
    ($name:expr) => {
        $crate::__rl_core::algorithm_counters!($name);
        fn predict(
            &mut self,
            obs: &[f32],
            _deterministic: bool,
        ) -> Result<Vec<f32>, $crate::__rl_core::RlError> {
            self.core.predict(obs)
        }
    };
}
