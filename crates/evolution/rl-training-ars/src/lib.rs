//! rl-training-ars: Augmented Random Search (Mania et al. 2018, V2-t). Each iteration samples
//! `n_directions` perturbations δ from the shared noise table, evaluates `θ + νδ` and `θ − νδ`
//! (the mean of `n_eval_episodes` episodes each, both signs on the same env seeds) on the worker pool, keeps the
//! `n_top_directions` best by `max(r₊, r₋)` and steps
//! `θ ← θ + α / (b σ_R) Σ (r₊ − r₋) δ`, `σ_R` the standard deviation of the kept returns.
//! Observations are normalized by the statistics of every earlier iteration (V2).
#![warn(missing_docs)]

pub mod config;

pub use config::ArsConfig;

pub use rl_training_core::agent::EnvMaker;
use rl_training_core::algorithm::{Learner, LearnerState, Progress, RlError};
use rl_training_core::checkpoint::Checkpoint;
use rl_training_core::logger::Metrics;
use rl_training_core::params::TensorMap;
use rl_training_evolution::{
    CoreSettings, Evaluated, EvolutionAgent, NoiseTable, Population, Strategy, read_theta,
    set_theta, theta_file, theta_tensors, weighted_noise,
};
use serde_json::{Map, Value};
use std::sync::Arc;

/// The directions to keep: indices of the `top` largest `max(pos, neg)` (ties by index).
pub fn top_directions(pos: &[f64], neg: &[f64], top: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..pos.len()).collect();
    let score = |i: usize| pos[i].max(neg[i]);
    idx.sort_by(|&a, &b| score(b).total_cmp(&score(a)));
    idx.truncate(top);
    idx
}

/// The ARS step `α / (b σ_R) Σ_k (r₊ − r₋) δ_k` over the kept directions, given
/// `Σ_k (r₊ − r₋) δ_k` and the kept returns.
pub fn ars_step(weighted: &[f64], kept_returns: &[f64], step_size: f64, top: usize) -> Vec<f64> {
    let n = kept_returns.len().max(1) as f64;
    let mean = kept_returns.iter().sum::<f64>() / n;
    let std = (kept_returns.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / n).sqrt();
    // Equal returns: no scale information, take σ_R = 1 (the update is 0 anyway when r₊ = r₋).
    let std = if std > 1e-8 { std } else { 1.0 };
    weighted
        .iter()
        .map(|g| step_size / (top as f64 * std) * g)
        .collect()
}

/// The learning side of ARS: the flat parameters and the shared noise table.
pub struct ArsLearner {
    cfg: ArsConfig,
    params: Vec<f32>,
    noise: Arc<NoiseTable>,
}

/// An ARS agent with its workers, ready to train.
pub type Ars = EvolutionAgent<ArsLearner>;

impl Learner for ArsLearner {
    type Batch = Evaluated;

    /// Keeps the `n_top_directions` best pairs and steps along their return differences,
    /// scaled by the kept returns' spread.
    fn update(&mut self, batch: &Evaluated, _progress: &Progress) -> Result<Metrics, RlError> {
        let c = &self.cfg;
        let r = &batch.returns;
        let top = top_directions(&r.pos, &r.neg, c.n_top_directions);
        let kept: Vec<f64> = top.iter().flat_map(|&k| [r.pos[k], r.neg[k]]).collect();
        let kept_offsets: Vec<usize> = top.iter().map(|&k| batch.offsets[k]).collect();
        let diffs: Vec<f64> = top.iter().map(|&k| r.pos[k] - r.neg[k]).collect();
        let g = weighted_noise(&self.noise, &kept_offsets, &diffs, self.params.len());
        let step = ars_step(&g, &kept, c.step_size, top.len());
        for (p, s) in self.params.iter_mut().zip(&step) {
            *p += *s as f32;
        }
        let mut m = Metrics::new();
        let norm = step.iter().map(|s| s * s).sum::<f64>().sqrt();
        m.insert("losses/update_norm".into(), norm);
        m.insert(
            "charts/top_return_mean".into(),
            kept.iter().sum::<f64>() / kept.len().max(1) as f64,
        );
        Ok(m)
    }

    fn weights(&self) -> TensorMap {
        theta_tensors(&self.params)
    }

    fn set_weights(&mut self, weights: &TensorMap) -> Result<(), RlError> {
        set_theta(&mut self.params, weights)
    }

    /// The parameters (ARS keeps no optimizer state).
    fn save_state(&self) -> LearnerState {
        let mut state = LearnerState::default();
        state.file("model.safetensors", theta_file(&self.params));
        state
    }

    fn load_state(
        &mut self,
        ck: &Checkpoint,
        _entries: &Map<String, Value>,
    ) -> Result<(), RlError> {
        self.params = read_theta(ck, self.params.len())?;
        Ok(())
    }
}

impl Strategy for ArsLearner {
    type Config = ArsConfig;
    const NAME: &'static str = "ars";

    fn core_settings(cfg: &ArsConfig) -> CoreSettings {
        cfg.shared.settings()
    }

    /// `n_directions` antithetic pairs, `n_eval_episodes` episodes per candidate.
    fn population(c: &ArsConfig) -> Population {
        Population {
            directions: c.n_directions,
            sigma: c.noise_std,
            antithetic: true,
            episodes: c.n_eval_episodes,
        }
    }

    fn build(cfg: ArsConfig, params: Vec<f32>, noise: Arc<NoiseTable>) -> Self {
        Self { cfg, params, noise }
    }

    fn config(&self) -> &ArsConfig {
        &self.cfg
    }

    fn params(&self) -> &[f32] {
        &self.params
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_best_directions_and_scales_by_their_spread() {
        let pos = [1.0, 5.0, 2.0, 0.0];
        let neg = [4.0, 0.0, 1.0, 3.0];
        assert_eq!(top_directions(&pos, &neg, 2), vec![1, 0]);
        // Kept returns 5, 0, 1, 4: mean 2.5, population std √(6.25+6.25+2.25+2.25)/2 = √4.25.
        let kept = [5.0, 0.0, 1.0, 4.0];
        let s = ars_step(&[2.0, -1.0], &kept, 0.1, 2);
        let want = 0.1 / (2.0 * 4.25f64.sqrt());
        assert!((s[0] - 2.0 * want).abs() < 1e-12 && (s[1] + want).abs() < 1e-12);
    }
}
