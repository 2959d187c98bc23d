//! rl-training-es: OpenAI evolution strategies (Salimans et al. 2017). Each iteration draws
//! perturbations ε from the shared noise table (`pop_size / 2` mirrored pairs with
//! `antithetic`), evaluates `θ ± σε` on the worker pool (workers get offsets and hand back
//! returns), shapes the returns by centered rank, forms
//! `g = Σ_k (F(θ+σε_k) − F(θ−σε_k)) ε_k / pop_size` and steps Adam on `−g + l2_coef·θ`.
#![warn(missing_docs)]

pub mod config;

pub use config::EsConfig;

pub use rl_training_core::agent::EnvMaker;
use rl_training_core::algorithm::{Learner, LearnerState, Progress, RlError, state_entry};
use rl_training_core::checkpoint::Checkpoint;
use rl_training_core::logger::Metrics;
use rl_training_core::params::TensorMap;
use rl_training_evolution::{
    CoreSettings, Evaluated, EvolutionAgent, NoiseTable, Population, Strategy, read_theta,
    set_theta, theta_file, theta_tensors, weighted_noise,
};
use serde_json::{Map, Value};
use std::sync::Arc;

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
pub fn es_weights(
    pos: &[f64],
    neg: &[f64],
    shaping: rl_training_evolution::FitnessShaping,
) -> Vec<f64> {
    let all: Vec<f64> = pos.iter().chain(neg).copied().collect();
    let shaped = shaping.apply(&all);
    let k = pos.len();
    let n = all.len() as f64;
    if neg.is_empty() {
        return shaped.iter().map(|s| s / n).collect();
    }
    (0..k).map(|i| (shaped[i] - shaped[k + i]) / n).collect()
}

/// The learning side of OpenAI-ES: the flat parameters, Adam, the shared noise table.
pub struct EsLearner {
    cfg: EsConfig,
    params: Vec<f32>,
    adam: Adam,
    noise: Arc<NoiseTable>,
}

/// An OpenAI-ES agent with its workers, ready to train.
pub type Es = EvolutionAgent<EsLearner>;

impl Learner for EsLearner {
    type Batch = Evaluated;

    /// Rank-shaped returns weight their perturbations into the gradient estimate `g`; Adam
    /// steps on `−g + l2_coef·θ` (ascending the fitness, with weight decay).
    fn update(&mut self, batch: &Evaluated, _progress: &Progress) -> Result<Metrics, RlError> {
        let c = &self.cfg;
        let r = &batch.returns;
        let w = es_weights(&r.pos, &r.neg, c.reward_shaping);
        let g = weighted_noise(&self.noise, &batch.offsets, &w, self.params.len());
        let grad: Vec<f64> = g
            .iter()
            .zip(&self.params)
            .map(|(g, &p)| -g + c.l2_coef * p as f64)
            .collect();
        let before = self.params.clone();
        self.adam.step(&mut self.params, &grad, c.learning_rate);
        let norm = |v: &mut dyn Iterator<Item = f64>| v.map(|x| x * x).sum::<f64>().sqrt();
        let mut m = Metrics::new();
        m.insert("losses/grad_norm".into(), norm(&mut g.iter().copied()));
        m.insert(
            "losses/update_norm".into(),
            norm(&mut before.iter().zip(&self.params).map(|(a, b)| (a - b) as f64)),
        );
        m.insert(
            "charts/param_norm".into(),
            norm(&mut self.params.iter().map(|&p| p as f64)),
        );
        Ok(m)
    }

    fn weights(&self) -> TensorMap {
        theta_tensors(&self.params)
    }

    fn set_weights(&mut self, weights: &TensorMap) -> Result<(), RlError> {
        set_theta(&mut self.params, weights)
    }

    /// The parameters and Adam's moments and step count.
    fn save_state(&self) -> LearnerState {
        let n = self.adam.m.len();
        let mut opt = TensorMap::default();
        opt.insert("adam.m", vec![n], self.adam.m.clone());
        opt.insert("adam.v", vec![n], self.adam.v.clone());
        let mut state = LearnerState::default();
        state.file("model.safetensors", theta_file(&self.params));
        state.file("optimizer.safetensors", opt.to_bytes());
        state.insert("adam_t", self.adam.t);
        state
    }

    fn load_state(&mut self, ck: &Checkpoint, entries: &Map<String, Value>) -> Result<(), RlError> {
        let n = self.params.len();
        self.params = read_theta(ck, n)?;
        let file = ck.path_of("optimizer.safetensors");
        let mut map = TensorMap::from_bytes(ck.file("optimizer.safetensors")?, &file)?;
        self.adam.m = map.take("adam.m", &[n], &file)?;
        self.adam.v = map.take("adam.v", &[n], &file)?;
        self.adam.t = state_entry(ck, entries, "adam_t")?;
        Ok(())
    }
}

impl Strategy for EsLearner {
    type Config = EsConfig;
    const NAME: &'static str = "es";

    fn core_settings(cfg: &EsConfig) -> CoreSettings {
        cfg.shared.settings()
    }

    /// `pop_size` candidates: `pop_size / 2` mirrored pairs with `antithetic`.
    fn population(c: &EsConfig) -> Population {
        Population {
            directions: if c.antithetic {
                c.pop_size / 2
            } else {
                c.pop_size
            },
            sigma: c.noise_std,
            antithetic: c.antithetic,
            episodes: 1,
        }
    }

    fn build(cfg: EsConfig, params: Vec<f32>, noise: Arc<NoiseTable>) -> Self {
        Self {
            adam: Adam::new(params.len()),
            cfg,
            params,
            noise,
        }
    }

    fn config(&self) -> &EsConfig {
        &self.cfg
    }

    fn params(&self) -> &[f32] {
        &self.params
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rl_training_evolution::FitnessShaping;

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
