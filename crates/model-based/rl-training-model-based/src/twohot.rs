//! symlog / symexp and the two-hot encoding (DreamerV3, "Robust predictions"): rewards and
//! values are predicted as a softmax over bins spaced evenly in symlog space, trained by
//! cross-entropy against a two-hot target, and read as the expected bin, mapped back with
//! symexp. Large and small targets then give gradients of the same size.

use rayon::prelude::*;
use rl_training_core::burn::tensor::activation::{log_softmax, softmax};
use rl_training_core::burn::tensor::{Device, Int, Tensor, TensorData};

/// `sign(x)·ln(|x| + 1)`.
pub fn symlog(x: f32) -> f32 {
    x.signum() * x.abs().ln_1p()
}

/// `sign(x)·(exp(|x|) − 1)`, the inverse of [`symlog`].
pub fn symexp(x: f32) -> f32 {
    x.signum() * x.abs().exp_m1()
}

/// [`symlog`] elementwise (its gradient is `1 / (|x| + 1)`).
pub fn symlog_tensor<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    x.clone().sign() * x.abs().log1p()
}

/// [`symexp`] elementwise.
pub fn symexp_tensor<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    x.clone().sign() * x.abs().exp().sub_scalar(1.0)
}

/// Bins evenly spaced in symlog space, ascending.
#[derive(Debug, Clone, PartialEq)]
pub struct TwoHot {
    bins: Vec<f32>,
}

impl TwoHot {
    /// `n ≥ 2` bins from `low` to `high` (symlog space).
    pub fn new(n: usize, low: f32, high: f32) -> Self {
        assert!(
            n >= 2 && high > low,
            "two-hot needs n ≥ 2 bins and high > low"
        );
        let step = (high - low) / (n - 1) as f32;
        let bins = (0..n).map(|i| low + step * i as f32).collect();
        Self { bins }
    }

    /// DreamerV3's (and RLlib's) 255 bins over `[−20, 20]`.
    pub fn dreamer() -> Self {
        Self::new(255, -20.0, 20.0)
    }

    /// Number of bins.
    pub fn len(&self) -> usize {
        self.bins.len()
    }

    /// Never true: there are at least two bins.
    pub fn is_empty(&self) -> bool {
        self.bins.is_empty()
    }

    /// The bin centres (symlog space).
    pub fn bins(&self) -> &[f32] {
        &self.bins
    }

    /// Where each value's two-hot target sits: the lower of its two bins and the weight of
    /// the upper one (the symlog clipped to the bins' range, split between its neighbouring
    /// bins in proportion to closeness, so the targets' expected bin is the symlog itself).
    pub fn split(&self, values: &[f32]) -> (Vec<i64>, Vec<f32>) {
        let k = self.bins.len();
        let (low, high) = (self.bins[0], self.bins[k - 1]);
        let step = (high - low) / (k - 1) as f32;
        values
            .iter()
            .map(|&v| {
                let pos = (symlog(v).clamp(low, high) - low) / step;
                let i = (pos.floor() as usize).min(k - 2);
                (i as i64, (pos - i as f32).clamp(0.0, 1.0))
            })
            .unzip()
    }

    /// Two-hot targets `[n × bins]` for `values` (original space), dense: see
    /// [`split`](Self::split).
    pub fn encode(&self, values: &[f32]) -> Vec<f32> {
        let k = self.bins.len();
        let mut out = vec![0.0f32; values.len() * k];
        let (lower, above) = self.split(values);
        for ((row, i), w) in out.chunks_mut(k).zip(lower).zip(above) {
            row[i as usize] += 1.0 - w;
            row[i as usize + 1] += w;
        }
        out
    }

    /// Cross-entropy of `logits` `[n, bins]` against the two-hot targets of `values`,
    /// per row: `[n]`. The same as [`loss`](Self::loss) of the dense targets, reading only the
    /// two bins each target touches.
    pub fn loss_of(&self, logits: Tensor<2>, values: &[f32]) -> Tensor<1> {
        let n = values.len();
        let device = logits.device();
        let (lower, above) = self.split(values);
        let upper: Vec<i64> = lower.iter().map(|i| i + 1).collect();
        let index = |v: Vec<i64>| Tensor::<2, Int>::from_data(TensorData::new(v, [n, 1]), &device);
        let w_up = Tensor::<1>::from_data(TensorData::new(above, [n]), &device);
        let lsm = log_softmax(logits, 1);
        let lo = lsm.clone().gather(1, index(lower)).squeeze_dim::<1>(1);
        let hi = lsm.gather(1, index(upper)).squeeze_dim::<1>(1);
        -(lo * w_up.clone().neg().add_scalar(1.0) + hi * w_up)
    }

    /// [`encode`](Self::encode) as a `[n, bins]` tensor.
    pub fn encode_tensor(&self, values: &[f32], device: &Device) -> Tensor<2> {
        let data = TensorData::new(self.encode(values), [values.len(), self.bins.len()]);
        Tensor::from_data(data, device)
    }

    /// The prediction of `logits` `[n, bins]`: the expected bin under their softmax (symlog
    /// space), mapped back with symexp: `[n]`.
    pub fn decode(&self, logits: Tensor<2>) -> Tensor<1> {
        symexp_tensor(self.expected_bin(logits))
    }

    /// [`decode`](Self::decode) of logits on the host, `[n × bins]` row-major: one pass per
    /// row (max, then the softmax-weighted sum of the bins), for predictions that need no
    /// gradient.
    pub fn decode_host(&self, logits: &[f32]) -> Vec<f32> {
        let k = self.bins.len();
        // Rows are independent: split over the cores (each row's arithmetic is the same
        // whatever the split).
        logits
            .par_chunks(k)
            .map(|row| {
                let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let (mut z, mut acc) = (0.0f32, 0.0f32);
                for (l, b) in row.iter().zip(&self.bins) {
                    let e = (l - max).exp();
                    z += e;
                    acc += e * b;
                }
                symexp(acc / z)
            })
            .collect()
    }

    /// Cross-entropies of host `logits` `[n × bins]` against the two-hot targets of each
    /// value slice in `targets`, and the gradient of `Σ_j Σ_i scale_i·CE_j,i` with respect to
    /// the logits, `scale_i·Σ_j (softmax − two-hot_j)` per row: one pass per row, where the
    /// tensor form takes a log-softmax forward and backward over the whole `[n, bins]` block.
    /// Returns one cross-entropy vector per target slice, and the gradient `[n × bins]`.
    pub fn ce_and_grad(
        &self,
        logits: &[f32],
        targets: &[&[f32]],
        scale: &[f32],
    ) -> (Vec<Vec<f32>>, Vec<f32>) {
        let k = self.bins.len();
        let splits: Vec<(Vec<i64>, Vec<f32>)> = targets.iter().map(|t| self.split(t)).collect();
        let mut grad = vec![0.0f32; logits.len()];
        let j = targets.len() as f32;
        // Rows are independent: split over the cores; each row's cross-entropies come back
        // in order.
        let per_row: Vec<Vec<f32>> = logits
            .par_chunks(k)
            .zip(grad.par_chunks_mut(k))
            .enumerate()
            .map(|(i, (row, g))| {
                let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let mut z = 0.0f32;
                for (l, gk) in row.iter().zip(g.iter_mut()) {
                    *gk = (l - max).exp();
                    z += *gk;
                }
                let lse = max + z.ln();
                let s = scale[i];
                for gk in g.iter_mut() {
                    *gk *= s * j / z;
                }
                splits
                    .iter()
                    .map(|(lower, above)| {
                        let (lo, w) = (lower[i] as usize, above[i]);
                        g[lo] -= s * (1.0 - w);
                        g[lo + 1] -= s * w;
                        lse - ((1.0 - w) * row[lo] + w * row[lo + 1])
                    })
                    .collect()
            })
            .collect();
        let ce = (0..targets.len())
            .map(|t| per_row.iter().map(|r| r[t]).collect())
            .collect();
        (ce, grad)
    }

    /// The expected bin under the softmax of `logits` `[n, bins]` (symlog space): `[n]`.
    pub fn expected_bin(&self, logits: Tensor<2>) -> Tensor<1> {
        let bins = Tensor::<1>::from_data(
            TensorData::new(self.bins.clone(), [self.bins.len()]),
            &logits.device(),
        );
        (softmax(logits, 1) * bins.unsqueeze_dim::<2>(0)).sum_dims_squeeze::<1, _>(&[1])
    }

    /// Cross-entropy `−Σ target·log softmax(logits)` per row: `[n]`.
    pub fn loss(logits: Tensor<2>, targets: Tensor<2>) -> Tensor<1> {
        -(targets * log_softmax(logits, 1)).sum_dims_squeeze::<1, _>(&[1])
    }
}

#[cfg(all(test, feature = "flex"))]
mod tests {
    use super::*;
    use rl_training_core::batch::{host, tensor1, tensor2};

    #[test]
    fn symlog_and_symexp_by_hand_and_inverse() {
        assert_eq!(symlog(0.0), 0.0);
        assert!((symlog(1.0) - 2f32.ln()).abs() < 1e-7);
        assert!((symlog(-9.0) + 10f32.ln()).abs() < 1e-6);
        assert!((symexp(10f32.ln()) - 9.0).abs() < 1e-5);
        for x in [-1e4f32, -3.5, -1e-3, 0.0, 2e-3, 0.7, 42.0, 1e5] {
            let back = symexp(symlog(x));
            assert!((back - x).abs() <= 1e-5 * x.abs().max(1.0), "{x} → {back}");
        }
        let dev = Device::flex();
        let xs = vec![-100.0f32, -1.0, 0.0, 0.5, 3.0];
        let t = host(symlog_tensor(tensor1(xs.clone(), &dev)));
        for (a, x) in t.iter().zip(&xs) {
            assert!((a - symlog(*x)).abs() < 1e-6);
        }
        let back = host(symexp_tensor(tensor1(t, &dev)));
        for (b, x) in back.iter().zip(&xs) {
            assert!((b - x).abs() < 1e-4 * x.abs().max(1.0));
        }
    }

    #[test]
    fn symlog_gradient_is_one_over_one_plus_abs() {
        let dev = Device::flex().autodiff();
        let x = tensor1(vec![-3.0, 0.5, 9.0], &dev).require_grad();
        let g = symlog_tensor(x.clone()).sum().backward();
        let gx = host(x.grad(&g).unwrap());
        for (g, want) in gx.iter().zip([0.25f32, 1.0 / 1.5, 0.1]) {
            assert!((g - want).abs() < 1e-6, "{g} vs {want}");
        }
    }

    #[test]
    fn two_hot_targets_by_hand() {
        // Bins −2, −1, 0, 1, 2 (symlog space).
        let th = TwoHot::new(5, -2.0, 2.0);
        // symexp(0.25) sits a quarter of the way from bin 0 to bin 1.
        let t = th.encode(&[symexp(0.25), 0.0, 1e9, -1e9]);
        let want = [
            [0.0, 0.0, 0.75, 0.25, 0.0],
            [0.0, 0.0, 1.0, 0.0, 0.0],
            [0.0, 0.0, 0.0, 0.0, 1.0],
            [1.0, 0.0, 0.0, 0.0, 0.0],
        ];
        for (row, w) in t.chunks(5).zip(want) {
            for (a, b) in row.iter().zip(w) {
                assert!((a - b).abs() < 1e-6, "{row:?} vs {w:?}");
            }
        }
    }

    #[test]
    fn two_hot_round_trip_and_loss() {
        let th = TwoHot::dreamer();
        let dev = Device::flex();
        let values = vec![-1234.5f32, -3.0, -0.01, 0.0, 0.3, 7.0, 500.0];
        let targets = th.encode(&values);
        // Logits whose softmax is the target itself decode back to the value.
        let logits: Vec<f32> = targets.iter().map(|p| p.max(1e-12).ln()).collect();
        let n = values.len();
        let on_host = th.decode_host(&logits);
        let decoded = host(th.decode(tensor2(logits, n, th.len(), &dev)));
        for (a, b) in on_host.iter().zip(&decoded) {
            assert!(
                (a - b).abs() <= 1e-5 * b.abs().max(1.0),
                "{on_host:?} vs {decoded:?}"
            );
        }
        for (d, v) in decoded.iter().zip(&values) {
            assert!((d - v).abs() <= 1e-4 * v.abs().max(1.0), "{v} → {d}");
        }
        // Cross-entropy by hand: uniform logits cost ln(255) whatever the target; a target
        // split 0.75/0.25 against logits ln 0.75, ln 0.25 (rest −∞ in effect) costs its
        // entropy.
        let tt = th.encode_tensor(&values, &dev);
        let uniform = Tensor::<2>::zeros([n, th.len()], &dev);
        for l in host(TwoHot::loss(uniform, tt)) {
            assert!((l - 255f32.ln()).abs() < 1e-4, "{l}");
        }
        // The gathered form equals the dense one.
        let lg: Vec<f32> = (0..n * th.len())
            .map(|i| ((i * 7919) % 23) as f32 * 0.1)
            .collect();
        let dense = host(TwoHot::loss(
            tensor2(lg.clone(), n, th.len(), &dev),
            th.encode_tensor(&values, &dev),
        ));
        let gathered = host(th.loss_of(tensor2(lg, n, th.len(), &dev), &values));
        for (a, b) in dense.iter().zip(&gathered) {
            assert!((a - b).abs() < 1e-5, "{dense:?} vs {gathered:?}");
        }
        // The host pass: the same cross-entropies, and the gradient autodiff takes.
        let adev = Device::flex().autodiff();
        let lg: Vec<f32> = (0..n * th.len())
            .map(|i| ((i * 31) % 17) as f32 * 0.2)
            .collect();
        let other: Vec<f32> = values.iter().map(|v| v * 0.5 + 1.0).collect();
        let scale: Vec<f32> = (0..n).map(|i| 0.5 + i as f32 * 0.1).collect();
        let (ce, grad) = th.ce_and_grad(&lg, &[&values, &other], &scale);
        let lt = tensor2(lg, n, th.len(), &adev).require_grad();
        let a = th.loss_of(lt.clone(), &values);
        let b = th.loss_of(lt.clone(), &other);
        for (x, y) in ce[0].iter().zip(host(a.clone())) {
            assert!((x - y).abs() < 1e-4, "{x} vs {y}");
        }
        for (x, y) in ce[1].iter().zip(host(b.clone())) {
            assert!((x - y).abs() < 1e-4, "{x} vs {y}");
        }
        let total = ((a + b) * rl_training_core::batch::tensor1(scale, &adev)).sum();
        let g = host(lt.grad(&total.backward()).unwrap());
        for (x, y) in grad.iter().zip(&g) {
            assert!((x - y).abs() < 1e-5, "{x} vs {y}");
        }
        let small = TwoHot::new(5, -2.0, 2.0);
        let target = small.encode_tensor(&[symexp(0.25)], &dev);
        let lg = tensor2(
            vec![-30.0, -30.0, 0.75f32.ln(), 0.25f32.ln(), -30.0],
            1,
            5,
            &dev,
        );
        let want = -(0.75f32 * 0.75f32.ln() + 0.25 * 0.25f32.ln());
        let got = host(TwoHot::loss(lg, target))[0];
        assert!((got - want).abs() < 1e-5, "{got} vs {want}");
    }
}
