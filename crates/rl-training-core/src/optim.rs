//! Optimizers over the flat parameter vector, with clipping by the global gradient norm.
//!
//! burn's `GradientClipping::Norm` clips each parameter tensor on its own; RL code (SB3's
//! `clip_grad_norm_`, CleanRL) clips by the norm over *all* parameters. Working on one flat
//! vector does that in a handful of tensor ops, keeps the optimizer state in walking order
//! (see [`crate::params`]), and saves it without burn's random parameter ids.

use crate::params::{TensorFileError, TensorMap, flat_grads, sub_flat, to_vec1};
use burn::module::Module;
use burn::tensor::{Device, Gradients, Tensor, TensorData};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// Which update rule.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum OptimizerKind {
    /// Adam (torch defaults: betas 0.9/0.999).
    Adam {
        /// First-moment decay.
        beta1: f64,
        /// Second-moment decay.
        beta2: f64,
        /// Denominator epsilon.
        eps: f64,
    },
    /// RMSprop as torch (not centered, no momentum): `v = alpha v + (1-alpha) g²`,
    /// `p -= lr g / (sqrt(v) + eps)`.
    RmsProp {
        /// Smoothing constant.
        alpha: f64,
        /// Denominator epsilon.
        eps: f64,
    },
}

impl OptimizerKind {
    /// Adam with torch's defaults and the given epsilon (SB3 PPO uses 1e-5).
    pub fn adam(eps: f64) -> Self {
        OptimizerKind::Adam {
            beta1: 0.9,
            beta2: 0.999,
            eps,
        }
    }
}

/// Result of one optimizer step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepStats {
    /// Global L2 norm of the gradient before clipping.
    pub grad_norm: f32,
}

/// Scales the flat gradient `g` so its L2 norm is at most `max_norm` (torch's
/// `clip_grad_norm_`: factor `max_norm / (norm + 1e-6)` when the norm exceeds `max_norm`);
/// returns the clipped gradient and the norm before clipping.
pub fn clip_global_norm(g: Tensor<1>, max_norm: Option<f64>) -> (Tensor<1>, f32) {
    let norm = g.clone().square().sum().sqrt().into_scalar::<f32>();
    match max_norm {
        Some(max) if (norm as f64) > max => (g.mul_scalar(max / (norm as f64 + 1e-6)), norm),
        _ => (g, norm),
    }
}

/// Adam's per-step constants (f32, as the loop uses them).
struct AdamConsts {
    b1: f32,
    c1: f32,
    b2: f32,
    c2: f32,
    sbc2: f32,
    eps: f32,
    scale: f32,
}

/// The update loops, compiled for the widest vector unit the CPU has (pulp picks it at run
/// time: AVX-512 or AVX2). Only exactly rounded operations (+, ×, ÷, √; nothing is fused) are
/// used, so every version gives the same bits; the wide ones do 8 or 16 divisions and square
/// roots at once where the baseline x86-64 build does 4.
mod simd {
    use super::AdamConsts;

    /// Adam's moment and step update over one chunk.
    pub(super) fn adam(m: &mut [f32], v: &mut [f32], d: &mut [f32], g: &[f32], c: &AdamConsts) {
        pulp::Arch::new().dispatch(
            #[inline(always)]
            || {
                // Zipped iterators (no bounds checks) vectorize.
                for (((mi, vi), di), &gi) in m.iter_mut().zip(v.iter_mut()).zip(d).zip(g) {
                    *mi = *mi * c.b1 + gi * c.c1;
                    *vi = *vi * c.b2 + (gi * gi) * c.c2;
                    *di = *mi / (vi.sqrt() / c.sbc2 + c.eps) * c.scale;
                }
            },
        )
    }

    /// RMSprop's square average and step over one chunk.
    pub(super) fn rmsprop(
        v: &mut [f32],
        d: &mut [f32],
        g: &[f32],
        a: f32,
        c: f32,
        eps: f32,
        lr: f32,
    ) {
        pulp::Arch::new().dispatch(
            #[inline(always)]
            || {
                for ((vi, di), &gi) in v.iter_mut().zip(d).zip(g) {
                    *vi = *vi * a + (gi * gi) * c;
                    *di = gi / (vi.sqrt() + eps) * lr;
                }
            },
        )
    }
}

/// Parameters per parallel chunk of the update loop.
const CHUNK: usize = 1 << 15;

/// A flat optimizer for one module. The moments live on the host: one fused loop over the
/// parameters replaces a dozen elementwise tensor ops (each a full pass with its own
/// allocation on flex), with the same f32 arithmetic in the same order.
#[derive(Debug, Clone)]
pub struct FlatOptimizer {
    kind: OptimizerKind,
    max_grad_norm: Option<f64>,
    step: u64,
    m: Option<Vec<f32>>,
    v: Option<Vec<f32>>,
}

impl FlatOptimizer {
    /// A new optimizer; `max_grad_norm` clips by the global norm when set.
    pub fn new(kind: OptimizerKind, max_grad_norm: Option<f64>) -> Self {
        Self {
            kind,
            max_grad_norm,
            step: 0,
            m: None,
            v: None,
        }
    }

    /// Number of steps taken.
    pub fn steps(&self) -> u64 {
        self.step
    }

    /// One step: reads the module's gradients from `grads`, clips, updates, returns the module.
    pub fn step<M: Module>(
        &mut self,
        lr: f64,
        module: M,
        grads: Gradients,
        device: &Device,
    ) -> (M, StepStats) {
        let g = flat_grads(&module, grads, device);
        self.step_flat(lr, module, g)
    }

    /// One step from an already flattened gradient (walking order, see [`crate::params`]).
    pub fn step_flat<M: Module>(&mut self, lr: f64, module: M, g: Tensor<1>) -> (M, StepStats) {
        let (delta, stats) = self.delta(lr, g);
        (sub_flat(module, delta), stats)
    }

    /// One step on a flat parameter vector `theta` (inner backend) itself: `theta − Δ` for the
    /// gradient `g` of the same layout. The same arithmetic as [`step_flat`](Self::step_flat)
    /// on a module whose flat parameters are `theta`.
    pub fn step_theta(
        &mut self,
        lr: f64,
        theta: Tensor<1>,
        g: Tensor<1>,
    ) -> (Tensor<1>, StepStats) {
        let (delta, stats) = self.delta(lr, g);
        (theta - delta, stats)
    }

    /// The step `Δ` (parameters decrease by it) for the flat gradient `g`, clipped first.
    fn delta(&mut self, lr: f64, g: Tensor<1>) -> (Tensor<1>, StepStats) {
        let (g, grad_norm) = clip_global_norm(g, self.max_grad_norm);
        let device = g.device();
        let g = to_vec1(g);
        self.step += 1;
        let n = g.len();
        let mut delta = vec![0.0f32; n];
        match self.kind {
            OptimizerKind::Adam { beta1, beta2, eps } => {
                let (b1, c1) = (beta1 as f32, (1.0 - beta1) as f32);
                let (b2, c2) = (beta2 as f32, (1.0 - beta2) as f32);
                let t = self.step as i32;
                let bc1 = 1.0 - beta1.powi(t);
                let bc2 = 1.0 - beta2.powi(t);
                let (sbc2, epsf, scale) = (bc2.sqrt() as f32, eps as f32, (lr / bc1) as f32);
                let m = self.m.get_or_insert_with(|| vec![0.0; n]);
                let v = self.v.get_or_insert_with(|| vec![0.0; n]);
                // Chunks run on all cores; each element's arithmetic is the same whatever the
                // split.
                m.par_chunks_mut(CHUNK)
                    .zip(v.par_chunks_mut(CHUNK))
                    .zip(delta.par_chunks_mut(CHUNK))
                    .zip(g.par_chunks(CHUNK))
                    .for_each(|(((m, v), d), g)| {
                        let c = AdamConsts {
                            b1,
                            c1,
                            b2,
                            c2,
                            sbc2,
                            eps: epsf,
                            scale,
                        };
                        simd::adam(m, v, d, g, &c)
                    });
            }
            OptimizerKind::RmsProp { alpha, eps } => {
                let (a, c) = (alpha as f32, (1.0 - alpha) as f32);
                let (epsf, lrf) = (eps as f32, lr as f32);
                let v = self.v.get_or_insert_with(|| vec![0.0; n]);
                v.par_chunks_mut(CHUNK)
                    .zip(delta.par_chunks_mut(CHUNK))
                    .zip(g.par_chunks(CHUNK))
                    .for_each(|((v, d), g)| simd::rmsprop(v, d, g, a, c, epsf, lrf));
            }
        }
        let delta = Tensor::from_data(TensorData::new(delta, [n]), &device);
        (delta, StepStats { grad_norm })
    }

    /// The state as named tensors (`prefix.m`, `prefix.v`) plus the step count.
    pub fn save(&self, prefix: &str, map: &mut TensorMap) -> u64 {
        for (name, t) in [("m", &self.m), ("v", &self.v)] {
            if let Some(t) = t {
                map.insert(format!("{prefix}.{name}"), vec![t.len()], t.clone());
            }
        }
        self.step
    }

    /// Restores what [`save`](Self::save) wrote, for a model of `n_params` parameters.
    pub fn load(
        &mut self,
        prefix: &str,
        map: &mut TensorMap,
        steps: u64,
        n_params: usize,
        file: &str,
        _device: &Device,
    ) -> Result<(), TensorFileError> {
        self.step = steps;
        let mut get = |name: &str| -> Result<Option<Vec<f32>>, TensorFileError> {
            let key = format!("{prefix}.{name}");
            if !map.0.contains_key(&key) {
                return Ok(None);
            }
            map.take(&key, &[n_params], file).map(Some)
        };
        self.m = get("m")?;
        self.v = get("v")?;
        let needs_m = matches!(self.kind, OptimizerKind::Adam { .. });
        if steps > 0 && (self.v.is_none() || (needs_m && self.m.is_none())) {
            return Err(TensorFileError::Tensor {
                file: file.into(),
                name: format!("{prefix}.v"),
                reason: "optimizer state missing for a run that has taken steps".into(),
            });
        }
        Ok(())
    }
}

#[cfg(all(test, feature = "flex"))]
mod tests {
    use super::*;
    use crate::nn::{Activation, MlpConfig};
    use crate::params::{flat_grads, param_infos, to_vec1};

    #[test]
    fn clips_by_the_global_norm_over_all_parameters() {
        let device = Device::flex().autodiff();
        let mut rng = crate::Rng::seed_from(0);
        let mlp = MlpConfig {
            d_input: 3,
            hidden: vec![5],
            d_output: Some(2),
            activation: Activation::Relu,
            output_gain: 1.0,
            hidden_gain: 1.0,
        }
        .init(&mut rng, &device);
        let x = Tensor::<2>::from_data(
            TensorData::new(vec![1.0f32, -2.0, 3.0, 0.5, 0.1, -0.4], [2, 3]),
            &device,
        );
        let g = flat_grads(
            &mlp,
            mlp.forward(x).sum().mul_scalar(100.0).backward(),
            &device,
        );
        let raw = to_vec1(g.clone());
        let norm = raw.iter().map(|v| (*v as f64).powi(2)).sum::<f64>().sqrt();
        assert!(norm > 1.0);
        let (clipped, reported) = clip_global_norm(g.clone(), Some(0.5));
        assert!((reported as f64 - norm).abs() < 1e-4 * norm);
        let c = to_vec1(clipped);
        // One factor for every parameter (global), so each tensor's share of the norm is kept;
        // per-tensor clipping would bring every tensor to norm <= 0.5 on its own instead.
        let factor = 0.5 / (norm + 1e-6);
        for (a, b) in c.iter().zip(&raw) {
            assert!(
                ((*a as f64) - (*b as f64) * factor).abs() < 1e-6,
                "{a} vs {b}·{factor}"
            );
        }
        let cn = c.iter().map(|v| (*v as f64).powi(2)).sum::<f64>().sqrt();
        assert!((cn - 0.5).abs() < 1e-5, "clipped norm {cn}");
        let mut o = 0;
        let per_tensor: Vec<f64> = param_infos(&mlp)
            .iter()
            .map(|p| {
                let n = p.numel();
                let s = c[o..o + n]
                    .iter()
                    .map(|v| (*v as f64).powi(2))
                    .sum::<f64>()
                    .sqrt();
                o += n;
                s
            })
            .collect();
        assert!(
            per_tensor.iter().sum::<f64>() > 0.5,
            "tensors share the global budget: {per_tensor:?}"
        );
        // Below the threshold nothing changes.
        let (same, _) = clip_global_norm(g, Some(1e9));
        assert_eq!(to_vec1(same), raw);
    }
}
