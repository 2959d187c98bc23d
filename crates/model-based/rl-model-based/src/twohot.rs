//! symlog / symexp and the two-hot encoding (DreamerV3, "Robust predictions"): rewards and
//! values are predicted as a softmax over bins spaced evenly in symlog space, trained by
//! cross-entropy against a two-hot target, and read as the expected bin, mapped back with
//! symexp. Large and small targets then give gradients of the same size.

use rl_core::burn::tensor::activation::{log_softmax, softmax};
use rl_core::burn::tensor::{Device, Tensor, TensorData};

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

    /// Two-hot targets `[n × bins]` for `values` (original space): each value's symlog,
    /// clipped to the bins' range, split between its two neighbouring bins in proportion to
    /// closeness, so the targets' expected bin is the symlog itself.
    pub fn encode(&self, values: &[f32]) -> Vec<f32> {
        let k = self.bins.len();
        let (low, high) = (self.bins[0], self.bins[k - 1]);
        let step = (high - low) / (k - 1) as f32;
        let mut out = vec![0.0f32; values.len() * k];
        for (row, &v) in out.chunks_mut(k).zip(values) {
            let y = symlog(v).clamp(low, high);
            let pos = (y - low) / step;
            let i = (pos.floor() as usize).min(k - 2);
            let above = (pos - i as f32).clamp(0.0, 1.0);
            row[i] += 1.0 - above;
            row[i + 1] += above;
        }
        out
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
    use rl_core::batch::{host, tensor1, tensor2};

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
        let decoded = host(th.decode(tensor2(logits, n, th.len(), &dev)));
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
