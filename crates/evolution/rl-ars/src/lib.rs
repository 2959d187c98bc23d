//! rl-ars: Augmented Random Search (Mania et al. 2018, V2-t). Each iteration samples
//! `n_directions` perturbations δ from the shared noise table, evaluates `θ + νδ` and `θ − νδ`
//! (the mean of `n_eval_episodes` episodes each, both signs on the same env seeds) on the worker pool, keeps the
//! `n_top_directions` best by `max(r₊, r₋)` and steps
//! `θ ← θ + α / (b σ_R) Σ (r₊ − r₋) δ`, `σ_R` the standard deviation of the kept returns.
//! Observations are normalized by the statistics of every earlier iteration (V2).
#![warn(missing_docs)]

pub mod config;

pub use config::ArsConfig;

pub use rl_core::agent::EnvMaker;
use rl_core::algorithm::{Algorithm, RlError};
use rl_core::burn::tensor::Device;
use rl_core::checkpoint::read_run;
use rl_core::config::{AlgoConfig, RunConfig};
use rl_core::logger::Metrics;
use rl_evolution::EvolutionCore;
use std::path::Path;
use std::time::Instant;

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

/// An ARS agent with its workers, ready to train.
pub struct Ars {
    cfg: ArsConfig,
    core: EvolutionCore,
}

impl Ars {
    /// A fresh agent for `run` (`algo_kwargs` are [`ArsConfig`]); ARS runs on the host, the
    /// device is accepted for a uniform interface.
    pub fn new(run: &RunConfig, make_env: EnvMaker<'_>, _device: &Device) -> Result<Self, RlError> {
        let cfg = ArsConfig::from_kwargs(&run.algo_kwargs).map_err(RlError::Config)?;
        let core = EvolutionCore::new(run, make_env, &cfg.core())?;
        Ok(Self { cfg, core })
    }

    /// Loads a checkpoint written by [`Algorithm::save`].
    pub fn load(dir: &Path, make_env: EnvMaker<'_>, device: &Device) -> Result<Self, RlError> {
        let (ck, run) = read_run(dir, "ars")?;
        let mut a = Self::new(&run, make_env, device)?;
        a.core.restore(&ck)?;
        Ok(a)
    }

    /// The hyperparameters.
    pub fn config(&self) -> &ArsConfig {
        &self.cfg
    }

    /// The current flat parameters.
    pub fn params(&self) -> &[f32] {
        &self.core.params
    }
}

impl Algorithm for Ars {
    rl_evolution::evolution_accessors!("ars");

    fn train(&mut self) -> Result<Metrics, RlError> {
        let t0 = Instant::now();
        let c = &self.cfg;
        let offsets = self.core.sample_offsets(c.n_directions);
        let r = self
            .core
            .evaluate_perturbations(&offsets, c.noise_std, true, c.n_eval_episodes)?;
        let top = top_directions(&r.pos, &r.neg, c.n_top_directions);
        let kept: Vec<f64> = top.iter().flat_map(|&k| [r.pos[k], r.neg[k]]).collect();
        let kept_offsets: Vec<usize> = top.iter().map(|&k| offsets[k]).collect();
        let diffs: Vec<f64> = top.iter().map(|&k| r.pos[k] - r.neg[k]).collect();
        let g = self.core.weighted_noise(&kept_offsets, &diffs);
        let step = ars_step(&g, &kept, c.step_size, top.len());
        for (p, s) in self.core.params.iter_mut().zip(&step) {
            *p += *s as f32;
        }
        let mut m = Metrics::new();
        let norm = step.iter().map(|s| s * s).sum::<f64>().sqrt();
        m.insert("losses/update_norm".into(), norm);
        m.insert(
            "charts/top_return_mean".into(),
            kept.iter().sum::<f64>() / kept.len().max(1) as f64,
        );
        self.core.finish(&mut m, &r, t0);
        rl_core::algorithm::check_finite(self.core.num_timesteps, &m)?;
        Ok(m)
    }

    fn save(&self, dir: &Path) -> Result<(), RlError> {
        self.core
            .save(dir, "ars", &self.cfg, Vec::new(), serde_json::Map::new())
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
