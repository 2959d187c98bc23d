//! Action distributions (SB3's): differentiable log-probs and entropies on tensors for the
//! losses, and host-side sampling from an RNG the algorithm owns.

use crate::rng::Rng;
use crate::spaces::Space;
use burn::tensor::{Int, Tensor, activation};
use serde::{Deserialize, Serialize};

const LOG_SQRT_2PI: f64 = 0.918_938_533_204_672_8; // ln(sqrt(2π))

/// Categorical `log_prob` of integer `actions` `[B]` under `logits` `[B, n]`.
pub fn categorical_log_prob(logits: Tensor<2>, actions: Tensor<1, Int>) -> Tensor<1> {
    let logp = activation::log_softmax(logits, 1);
    logp.gather(1, actions.unsqueeze_dim(1)).squeeze_dim(1)
}

/// Categorical entropy `[B]` of `logits` `[B, n]`.
pub fn categorical_entropy(logits: Tensor<2>) -> Tensor<1> {
    let logp = activation::log_softmax(logits, 1);
    let p = logp.clone().exp();
    (p * logp).sum_dim(1).squeeze_dim(1).neg()
}

/// Diagonal Gaussian `log_prob` summed over `D`, per-sample `[B]`.
pub fn diag_gaussian_log_prob(
    mean: Tensor<2>,
    log_std: Tensor<2>,
    actions: Tensor<2>,
) -> Tensor<1> {
    diag_gaussian_log_prob_per_dim(mean, log_std, actions)
        .sum_dim(1)
        .squeeze_dim(1)
}

/// Diagonal Gaussian `log_prob` per dimension `[B, D]`.
pub fn diag_gaussian_log_prob_per_dim(
    mean: Tensor<2>,
    log_std: Tensor<2>,
    actions: Tensor<2>,
) -> Tensor<2> {
    let var = log_std.clone().mul_scalar(2.0).exp();
    let d = actions - mean;
    (d.clone() * d).div(var.mul_scalar(2.0)).neg() - log_std.add_scalar(LOG_SQRT_2PI)
}

/// Diagonal Gaussian entropy `[B]`.
pub fn diag_gaussian_entropy(log_std: Tensor<2>) -> Tensor<1> {
    log_std
        .add_scalar(0.5 + LOG_SQRT_2PI)
        .sum_dim(1)
        .squeeze_dim(1)
}

/// Tanh-squashed diagonal Gaussian `log_prob` `[B]` from the pre-tanh sample `u` (SB3's SAC
/// path): `sum log N(u) - sum log(1 - tanh(u)² + 1e-6)`.
pub fn squashed_gaussian_log_prob(
    mean: Tensor<2>,
    log_std: Tensor<2>,
    gaussian_actions: Tensor<2>,
) -> Tensor<1> {
    let lp = diag_gaussian_log_prob(mean, log_std, gaussian_actions.clone());
    let a = activation::tanh(gaussian_actions);
    let corr = a
        .clone()
        .mul(a)
        .neg()
        .add_scalar(1.0)
        .add_scalar(1e-6)
        .log()
        .sum_dim(1)
        .squeeze_dim(1);
    lp - corr
}

/// Bernoulli `log_prob` summed over flags `[B]`; `actions` are 0/1 `[B, n]`.
pub fn bernoulli_log_prob(logits: Tensor<2>, actions: Tensor<2>) -> Tensor<1> {
    let lp1 = activation::log_sigmoid(logits.clone());
    let lp0 = activation::log_sigmoid(logits.neg());
    (actions.clone() * lp1 + actions.neg().add_scalar(1.0) * lp0)
        .sum_dim(1)
        .squeeze_dim(1)
}

/// Bernoulli entropy summed over flags `[B]`.
pub fn bernoulli_entropy(logits: Tensor<2>) -> Tensor<1> {
    let p = activation::sigmoid(logits.clone());
    let lp1 = activation::log_sigmoid(logits.clone());
    let lp0 = activation::log_sigmoid(logits.neg());
    (p.clone() * lp1 + p.neg().add_scalar(1.0) * lp0)
        .sum_dim(1)
        .squeeze_dim(1)
        .neg()
}

/// `Σ_i f(i, offset_i, n_i)` over the categorical groups of a MultiDiscrete space (`n_i`
/// logits starting at column `offset_i`), summed left to right.
fn sum_over_groups(
    nvec: &[usize],
    mut f: impl FnMut(usize, usize, usize) -> Tensor<1>,
) -> Tensor<1> {
    let mut o = 0;
    let mut total: Option<Tensor<1>> = None;
    for (i, &n) in nvec.iter().enumerate() {
        let t = f(i, o, n);
        total = Some(match total {
            Some(acc) => acc + t,
            None => t,
        });
        o += n;
    }
    total.expect("at least one component")
}

/// The distribution family for an action space (SB3's `make_proba_distribution`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum DistKind {
    /// Discrete(n).
    Categorical {
        /// Number of actions.
        n: usize,
        /// Smallest action value.
        start: i64,
    },
    /// MultiDiscrete: independent categoricals.
    MultiCategorical {
        /// Sizes.
        nvec: Vec<usize>,
    },
    /// MultiBinary: independent Bernoullis.
    Bernoulli {
        /// Number of flags.
        n: usize,
    },
    /// Box: diagonal Gaussian with a state-independent `log_std` parameter.
    DiagGaussian {
        /// Action dimension.
        dim: usize,
    },
    /// Box with tanh squashing (SAC).
    SquashedDiagGaussian {
        /// Action dimension.
        dim: usize,
    },
}

impl DistKind {
    /// The family for `space` (Box → unsquashed Gaussian, as PPO/A2C).
    pub fn for_space(space: &Space) -> Result<Self, String> {
        Ok(match space {
            Space::Discrete { n, start } => DistKind::Categorical {
                n: *n,
                start: *start,
            },
            Space::MultiDiscrete { nvec } => DistKind::MultiCategorical { nvec: nvec.clone() },
            Space::MultiBinary { n } => DistKind::Bernoulli { n: *n },
            Space::Box { low, .. } => DistKind::DiagGaussian { dim: low.len() },
            other => return Err(format!("no action distribution for {}", other.describe())),
        })
    }

    /// Number of network outputs (logits or means).
    pub fn param_dim(&self) -> usize {
        match self {
            DistKind::Categorical { n, .. } => *n,
            DistKind::MultiCategorical { nvec } => nvec.iter().sum(),
            DistKind::Bernoulli { n } => *n,
            DistKind::DiagGaussian { dim } | DistKind::SquashedDiagGaussian { dim } => *dim,
        }
    }

    /// Whether the family has a `log_std` parameter.
    pub fn is_gaussian(&self) -> bool {
        matches!(
            self,
            DistKind::DiagGaussian { .. } | DistKind::SquashedDiagGaussian { .. }
        )
    }

    /// Log-probability `[B]` of raw `actions` `[B, act_dim]` given network outputs `params`
    /// `[B, param_dim]` and, for Gaussians, `log_std` `[B, dim]` (or broadcastable `[1, dim]`).
    pub fn log_prob(
        &self,
        params: Tensor<2>,
        log_std: Option<Tensor<2>>,
        actions: Tensor<2>,
    ) -> Tensor<1> {
        match self {
            DistKind::Categorical { start, .. } => {
                let a = actions.sub_scalar(*start as f64).squeeze_dim::<1>(1).int();
                categorical_log_prob(params, a)
            }
            DistKind::MultiCategorical { nvec } => sum_over_groups(nvec, |i, o, n| {
                let a = actions.clone().narrow(1, i, 1).squeeze_dim::<1>(1).int();
                categorical_log_prob(params.clone().narrow(1, o, n), a)
            }),
            DistKind::Bernoulli { .. } => bernoulli_log_prob(params, actions),
            DistKind::DiagGaussian { .. } => {
                let ls = log_std.expect("Gaussian needs log_std");
                let ls = ls.expand(params.dims());
                diag_gaussian_log_prob(params, ls, actions)
            }
            DistKind::SquashedDiagGaussian { .. } => {
                let ls = log_std.expect("Gaussian needs log_std");
                let ls = ls.expand(params.dims());
                squashed_gaussian_log_prob(params, ls, actions)
            }
        }
    }

    /// Entropy `[B]`, or `None` where there is no closed form (squashed Gaussian).
    pub fn entropy(&self, params: Tensor<2>, log_std: Option<Tensor<2>>) -> Option<Tensor<1>> {
        Some(match self {
            DistKind::Categorical { .. } => categorical_entropy(params),
            DistKind::MultiCategorical { nvec } => sum_over_groups(nvec, |_, o, n| {
                categorical_entropy(params.clone().narrow(1, o, n))
            }),
            DistKind::Bernoulli { .. } => bernoulli_entropy(params),
            DistKind::DiagGaussian { .. } => diag_gaussian_entropy(log_std?.expand(params.dims())),
            DistKind::SquashedDiagGaussian { .. } => return None,
        })
    }

    /// KL(p ‖ q) `[B]` between the distributions with parameters `p` and `q` (`[B,
    /// param_dim]`, Gaussians with their `log_std`, `[B, dim]` or `[1, dim]`),
    /// differentiable in both (torch's `kl_divergence`, summed over independent dimensions).
    /// The squashed Gaussian's KL is its Gaussian's (tanh is a bijection).
    pub fn kl(
        &self,
        p: Tensor<2>,
        p_log_std: Option<Tensor<2>>,
        q: Tensor<2>,
        q_log_std: Option<Tensor<2>>,
    ) -> Tensor<1> {
        let categorical = |p: Tensor<2>, q: Tensor<2>| {
            let lp = activation::log_softmax(p, 1);
            let lq = activation::log_softmax(q, 1);
            (lp.clone().exp() * (lp - lq))
                .sum_dim(1)
                .squeeze_dim::<1>(1)
        };
        match self {
            DistKind::Categorical { .. } => categorical(p, q),
            DistKind::MultiCategorical { nvec } => sum_over_groups(nvec, |_, o, n| {
                categorical(p.clone().narrow(1, o, n), q.clone().narrow(1, o, n))
            }),
            DistKind::Bernoulli { .. } => {
                let (lp1, lp0) = (
                    activation::log_sigmoid(p.clone()),
                    activation::log_sigmoid(p.neg()),
                );
                let (lq1, lq0) = (
                    activation::log_sigmoid(q.clone()),
                    activation::log_sigmoid(q.neg()),
                );
                (lp1.clone().exp() * (lp1 - lq1) + lp0.clone().exp() * (lp0 - lq0))
                    .sum_dim(1)
                    .squeeze_dim::<1>(1)
            }
            DistKind::DiagGaussian { .. } | DistKind::SquashedDiagGaussian { .. } => {
                let dims = p.dims();
                let lsp = p_log_std.expect("Gaussian needs log_std").expand(dims);
                let lsq = q_log_std.expect("Gaussian needs log_std").expand(dims);
                // log σq − log σp + (σp² + (μp − μq)²) / (2 σq²) − ½
                let var_p = lsp.clone().mul_scalar(2.0).exp();
                let var_q = lsq.clone().mul_scalar(2.0).exp();
                let num = var_p + (p - q).square();
                (lsq - lsp + num / var_q.mul_scalar(2.0))
                    .sub_scalar(0.5)
                    .sum_dim(1)
                    .squeeze_dim::<1>(1)
            }
        }
    }

    /// `M·u` row by row, with `M` the Fisher information of the distribution in its network
    /// outputs `params` (`[B × param_dim]`, host; Gaussians: the means, with `log_std` `[dim]`
    /// or per row `[B × dim]`),
    /// i.e. the Hessian of `KL(p_θ ‖ p_θ')` at `θ' = θ`. The Gaussian's Fisher in `log_std` is
    /// 2 per dimension, independent of the parameters.
    pub fn fisher_apply(&self, params: &[f32], log_std: &[f32], u: &[f32]) -> Vec<f32> {
        let pd = self.param_dim().max(1);
        let mut out = vec![0.0f32; u.len()];
        // Categorical with p = softmax(logits): M = diag(p) − p pᵀ.
        let categorical = |logits: &[f32], u: &[f32], o: &mut [f32]| {
            let m = logits.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
            let e: Vec<f32> = logits.iter().map(|&l| (l - m).exp()).collect();
            let z: f32 = e.iter().sum();
            let pu: f32 = e.iter().zip(u).map(|(&ei, &ui)| ei / z * ui).sum();
            for ((oi, &ei), &ui) in o.iter_mut().zip(&e).zip(u) {
                let p = ei / z;
                *oi = p * ui - p * pu;
            }
        };
        for (r, ((row, ur), or)) in params
            .chunks(pd)
            .zip(u.chunks(pd))
            .zip(out.chunks_mut(pd))
            .enumerate()
        {
            match self {
                DistKind::Categorical { .. } => categorical(row, ur, or),
                DistKind::MultiCategorical { nvec } => {
                    let mut o = 0;
                    for &n in nvec {
                        categorical(&row[o..o + n], &ur[o..o + n], &mut or[o..o + n]);
                        o += n;
                    }
                }
                DistKind::Bernoulli { .. } => {
                    for ((oi, &l), &ui) in or.iter_mut().zip(row).zip(ur) {
                        let p = 1.0 / (1.0 + (-l).exp());
                        *oi = p * (1.0 - p) * ui;
                    }
                }
                DistKind::DiagGaussian { .. } | DistKind::SquashedDiagGaussian { .. } => {
                    // Shared `[dim]` or per-row `[B × dim]` (gSDE) log_std.
                    let ls = if log_std.len() == params.len() {
                        &log_std[r * pd..(r + 1) * pd]
                    } else {
                        log_std
                    };
                    for ((oi, &ui), &ls) in or.iter_mut().zip(ur).zip(ls) {
                        *oi = ui * (-2.0 * ls).exp();
                    }
                }
            }
        }
        out
    }

    /// Samples (or takes the mode, when `deterministic`) one action for each row of `params`
    /// (`[B × param_dim]`, host memory), appending raw actions to `actions` and returning the
    /// log-probabilities (f32 arithmetic, as the tensor path).
    pub fn sample(
        &self,
        params: &[f32],
        log_std: &[f32],
        rng: &mut Rng,
        deterministic: bool,
        actions: &mut Vec<f32>,
    ) -> Vec<f32> {
        let pd = self.param_dim();
        let b = params.len() / pd.max(1);
        let mut logps = Vec::with_capacity(b);
        for row in params.chunks(pd) {
            let lp = match self {
                DistKind::Categorical { start, .. } => {
                    let (a, lp) = sample_categorical(row, rng, deterministic);
                    actions.push((a as i64 + start) as f32);
                    lp
                }
                DistKind::MultiCategorical { nvec } => {
                    let mut o = 0;
                    let mut lp = 0.0;
                    for &n in nvec {
                        let (a, l) = sample_categorical(&row[o..o + n], rng, deterministic);
                        actions.push(a as f32);
                        lp += l;
                        o += n;
                    }
                    lp
                }
                DistKind::Bernoulli { .. } => {
                    let mut lp = 0.0;
                    for &l in row {
                        let p = 1.0 / (1.0 + (-(l as f64)).exp());
                        let a = if deterministic {
                            p > 0.5
                        } else {
                            rng.uniform() < p
                        };
                        actions.push(a as u8 as f32);
                        lp += log_sigmoid(if a { l } else { -l });
                    }
                    lp
                }
                DistKind::DiagGaussian { .. } | DistKind::SquashedDiagGaussian { .. } => {
                    let squash = matches!(self, DistKind::SquashedDiagGaussian { .. });
                    let mut lp = 0.0f32;
                    for (i, &mu) in row.iter().enumerate() {
                        let ls = log_std[i % log_std.len()];
                        let std = ls.exp();
                        let u = if deterministic {
                            mu
                        } else {
                            mu + std * rng.normal() as f32
                        };
                        let z = (u - mu) / std;
                        lp += -0.5 * z * z - ls - LOG_SQRT_2PI as f32;
                        if squash {
                            let a = u.tanh();
                            lp -= ((1.0 - a * a) + 1e-6).ln();
                            actions.push(a);
                        } else {
                            actions.push(u);
                        }
                    }
                    lp
                }
            };
            logps.push(lp);
        }
        logps
    }
}

fn log_sigmoid(x: f32) -> f32 {
    // Stable: min(x, 0) - log1p(exp(-|x|)).
    x.min(0.0) - (-x.abs()).exp().ln_1p()
}

/// Samples from (or takes the argmax of) a categorical given logits; returns (index, log_prob).
fn sample_categorical(logits: &[f32], rng: &mut Rng, deterministic: bool) -> (usize, f32) {
    let max = logits.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
    let sum: f32 = logits.iter().map(|&l| (l - max).exp()).sum();
    let lse = max + sum.ln();
    let a = if deterministic {
        let mut best = 0;
        for i in 1..logits.len() {
            if logits[i] > logits[best] {
                best = i;
            }
        }
        best
    } else {
        let u = rng.uniform() as f32 * sum;
        let mut acc = 0.0;
        let mut pick = logits.len() - 1;
        for (i, &l) in logits.iter().enumerate() {
            acc += (l - max).exp();
            if u < acc {
                pick = i;
                break;
            }
        }
        pick
    };
    (a, logits[a] - lse)
}

#[cfg(all(test, feature = "flex"))]
mod tests {
    use super::*;
    use burn::tensor::{Device, TensorData};

    fn t2(v: Vec<f32>, r: usize, c: usize) -> Tensor<2> {
        Tensor::from_data(TensorData::new(v, [r, c]), &Device::flex())
    }

    fn host(t: Tensor<1>) -> Vec<f32> {
        t.into_data().try_into_vec::<f32>().unwrap()
    }

    #[test]
    fn multicategorical_and_bernoulli_agree_with_host_sampling_and_closed_forms() {
        let mut rng = Rng::seed_from(4);
        // MultiCategorical [3, 2]: log-prob is the sum of the parts.
        let kind = DistKind::MultiCategorical { nvec: vec![3, 2] };
        let logits = vec![
            0.5f32, -1.0, 2.0, 0.3, -0.3, /* row 2 */ -2.0, 0.0, 1.0, 1.5, 0.5,
        ];
        let mut acts = Vec::new();
        let lp_host = kind.sample(&logits, &[], &mut rng, false, &mut acts);
        let lp = host(kind.log_prob(t2(logits.clone(), 2, 5), None, t2(acts.clone(), 2, 2)));
        for (a, b) in lp.iter().zip(&lp_host) {
            assert!((a - b).abs() < 1e-5, "{a} vs {b}");
        }
        // Entropy of a uniform MultiCategorical is sum(ln n).
        let h = host(kind.entropy(t2(vec![0.0; 5], 1, 5), None).unwrap());
        assert!((h[0] - (3f32.ln() + 2f32.ln())).abs() < 1e-5);
        // Bernoulli: p = sigmoid(l); log-prob of 1 is ln p.
        let kind = DistKind::Bernoulli { n: 2 };
        let l = vec![0.7f32, -1.2];
        let lp = host(kind.log_prob(t2(l.clone(), 1, 2), None, t2(vec![1.0, 0.0], 1, 2)));
        let p0 = 1.0 / (1.0 + (-0.7f32).exp());
        let p1 = 1.0 / (1.0 + 1.2f32.exp());
        assert!((lp[0] - (p0.ln() + (1.0 - p1).ln())).abs() < 1e-5);
        let h = host(kind.entropy(t2(vec![0.0, 0.0], 1, 2), None).unwrap());
        assert!((h[0] - 2.0 * 2f32.ln()).abs() < 1e-5);
        let mut acts = Vec::new();
        let lp_host = kind.sample(&l, &[], &mut rng, true, &mut acts);
        assert_eq!(acts, vec![1.0, 0.0], "mode");
        assert!((lp_host[0] - lp[0]).abs() < 1e-5);
        // Sampling frequencies follow the probabilities.
        let kind = DistKind::Categorical { n: 3, start: 0 };
        let logits = [0.0f32, 1.0, 2.0];
        let mut counts = [0usize; 3];
        for _ in 0..30_000 {
            let mut a = Vec::new();
            kind.sample(&logits, &[], &mut rng, false, &mut a);
            counts[a[0] as usize] += 1;
        }
        let z: f32 = logits.iter().map(|l| l.exp()).sum();
        for i in 0..3 {
            let want = logits[i].exp() / z;
            let got = counts[i] as f32 / 30_000.0;
            assert!((got - want).abs() < 0.015, "action {i}: {got} vs {want}");
        }
    }
}
