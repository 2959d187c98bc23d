//! rl-es: OpenAI evolution strategies (Salimans et al. 2017). Each iteration draws
//! perturbations ε from the shared noise table (`pop_size / 2` mirrored pairs with
//! `antithetic`), evaluates `θ ± σε` on the worker pool (workers get offsets and hand back
//! returns), shapes the returns by centered rank, forms
//! `g = Σ_k (F(θ+σε_k) − F(θ−σε_k)) ε_k / pop_size` and steps Adam on `−g + l2_coef·θ`.
#![warn(missing_docs)]

pub mod config;

pub use config::EsConfig;

pub use rl_core::agent::EnvMaker;
use rl_core::algorithm::{Algorithm, RlError};
use rl_core::burn::tensor::Device;
use rl_core::checkpoint::read_run;
use rl_core::config::{AlgoConfig, RunConfig};
use rl_core::logger::Metrics;
use rl_core::params::TensorMap;
use rl_evolution::EvolutionCore;
use std::path::Path;
use std::time::Instant;

/// Adam on a flat vector (OpenAI-ES's: β₁ 0.9, β₂ 0.999, ε 1e-8, bias correction folded into
/// the step size). Moments are kept in f32, as saved in checkpoints, so a resumed run takes
/// the same steps.
#[derive(Debug, Clone, PartialEq)]
pub struct Adam {
    m: Vec<f32>,
    v: Vec<f32>,
    t: u64,
}

impl Adam {
    /// Zero moments for `n` parameters.
    pub fn new(n: usize) -> Self {
        Self {
            m: vec![0.0; n],
            v: vec![0.0; n],
            t: 0,
        }
    }

    /// One step on `theta` against the gradient `g` (minimizes).
    pub fn step(&mut self, theta: &mut [f32], g: &[f64], lr: f64) {
        let (b1, b2, eps) = (0.9f64, 0.999f64, 1e-8);
        self.t += 1;
        let a = lr * (1.0 - b2.powi(self.t as i32)).sqrt() / (1.0 - b1.powi(self.t as i32));
        for i in 0..theta.len() {
            let m = b1 * self.m[i] as f64 + (1.0 - b1) * g[i];
            let v = b2 * self.v[i] as f64 + (1.0 - b2) * g[i] * g[i];
            (self.m[i], self.v[i]) = (m as f32, v as f32);
            theta[i] -= (a * m / (v.sqrt() + eps)) as f32;
        }
    }
}

/// The ES gradient estimate from the returns: with `antithetic`, `pos[k]`/`neg[k]` of pair
/// `k`, weights `s(F₊) − s(F₋)` for shaped fitness `s` over all `2K` returns, divided by
/// `2K`; otherwise weights `s(F)` divided by `K`. Returns the per-perturbation weights.
pub fn es_weights(pos: &[f64], neg: &[f64], shaping: rl_evolution::FitnessShaping) -> Vec<f64> {
    let all: Vec<f64> = pos.iter().chain(neg).copied().collect();
    let shaped = shaping.apply(&all);
    let k = pos.len();
    let n = all.len() as f64;
    if neg.is_empty() {
        return shaped.iter().map(|s| s / n).collect();
    }
    (0..k).map(|i| (shaped[i] - shaped[k + i]) / n).collect()
}

/// An OpenAI-ES agent with its workers, ready to train.
pub struct Es {
    cfg: EsConfig,
    core: EvolutionCore,
    adam: Adam,
}

impl Es {
    /// A fresh agent for `run` (`algo_kwargs` are [`EsConfig`]); ES runs on the host, the
    /// device is accepted for a uniform interface.
    pub fn new(run: &RunConfig, make_env: EnvMaker<'_>, _device: &Device) -> Result<Self, RlError> {
        let cfg = EsConfig::from_kwargs(&run.algo_kwargs).map_err(RlError::Config)?;
        let core = EvolutionCore::new(run, make_env, &cfg.core())?;
        let adam = Adam::new(core.params.len());
        Ok(Self { cfg, core, adam })
    }

    /// Loads a checkpoint written by [`Algorithm::save`].
    pub fn load(dir: &Path, make_env: EnvMaker<'_>, device: &Device) -> Result<Self, RlError> {
        let (ck, run) = read_run(dir, "es")?;
        let mut a = Self::new(&run, make_env, device)?;
        let state = a.core.restore(&ck)?;
        let n = a.core.params.len();
        let file = ck.path_of("optimizer.safetensors");
        let mut map = TensorMap::from_bytes(ck.file("optimizer.safetensors")?, &file)?;
        a.adam.m = map.take("adam.m", &[n], &file)?;
        a.adam.v = map.take("adam.v", &[n], &file)?;
        a.adam.t = state
            .get("adam_t")
            .and_then(|v| v.as_u64())
            .ok_or_else(|| {
                RlError::Config(rl_core::config::ConfigError::new(
                    format!("{}: adam_t", ck.path_of("state.json")),
                    "expected a non-negative integer",
                ))
            })?;
        Ok(a)
    }

    /// The hyperparameters.
    pub fn config(&self) -> &EsConfig {
        &self.cfg
    }

    /// The current flat parameters.
    pub fn params(&self) -> &[f32] {
        &self.core.params
    }
}

impl Algorithm for Es {
    rl_evolution::evolution_accessors!("es");

    fn train(&mut self) -> Result<Metrics, RlError> {
        let t0 = Instant::now();
        let c = &self.cfg;
        let k = if c.antithetic {
            c.pop_size / 2
        } else {
            c.pop_size
        };
        let offsets = self.core.sample_offsets(k);
        let r = self
            .core
            .evaluate_perturbations(&offsets, c.noise_std, c.antithetic, 1)?;
        let w = es_weights(&r.pos, &r.neg, c.reward_shaping);
        let g = self.core.weighted_noise(&offsets, &w);
        // Ascend the fitness: Adam minimizes −g, plus weight decay.
        let grad: Vec<f64> = g
            .iter()
            .zip(&self.core.params)
            .map(|(g, &p)| -g + c.l2_coef * p as f64)
            .collect();
        let before = self.core.params.clone();
        self.adam
            .step(&mut self.core.params, &grad, c.learning_rate);
        let mut m = Metrics::new();
        m.insert(
            "losses/grad_norm".into(),
            g.iter().map(|x| x * x).sum::<f64>().sqrt(),
        );
        m.insert(
            "losses/update_norm".into(),
            before
                .iter()
                .zip(&self.core.params)
                .map(|(a, b)| ((a - b) as f64).powi(2))
                .sum::<f64>()
                .sqrt(),
        );
        m.insert(
            "charts/param_norm".into(),
            self.core
                .params
                .iter()
                .map(|p| (*p as f64).powi(2))
                .sum::<f64>()
                .sqrt(),
        );
        self.core.finish(&mut m, &r, t0);
        rl_core::algorithm::check_finite(self.core.num_timesteps, &m)?;
        Ok(m)
    }

    fn save(&self, dir: &Path) -> Result<(), RlError> {
        let n = self.adam.m.len();
        let mut opt = TensorMap::default();
        opt.insert("adam.m", vec![n], self.adam.m.clone());
        opt.insert("adam.v", vec![n], self.adam.v.clone());
        let mut state = serde_json::Map::new();
        state.insert("adam_t".into(), self.adam.t.into());
        self.core.save(
            dir,
            "es",
            &self.cfg,
            vec![("optimizer.safetensors", opt.to_bytes())],
            state,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rl_evolution::FitnessShaping;

    #[test]
    fn antithetic_weights_are_rank_differences() {
        // Returns: pos [3, 1], neg [0, 2] → ranks over [3, 1, 0, 2]: 3→0.5, 1→-1/6, 0→-0.5,
        // 2→1/6; weights (0.5+0.5)/4, (-1/6-1/6)/4.
        let w = es_weights(&[3.0, 1.0], &[0.0, 2.0], FitnessShaping::CenteredRank);
        assert!(
            (w[0] - 0.25).abs() < 1e-12 && (w[1] + 1.0 / 12.0).abs() < 1e-12,
            "{w:?}"
        );
        let w = es_weights(&[3.0, 1.0], &[], FitnessShaping::None);
        assert_eq!(w, vec![1.5, 0.5]);
    }

    #[test]
    fn adam_first_step_moves_each_parameter_by_lr() {
        let mut a = Adam::new(2);
        let mut th = [0.0f32, 1.0];
        a.step(&mut th, &[2.0, -0.5], 0.01);
        // First step: m̂/√v̂ = sign(g).
        assert!(
            (th[0] + 0.01).abs() < 1e-6 && (th[1] - 1.01).abs() < 1e-6,
            "{th:?}"
        );
    }
}
