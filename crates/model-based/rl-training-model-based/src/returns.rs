//! What the actor and critic learn from in imagination: λ-returns over an imagined
//! trajectory (DreamerV3 eq. 7) and the percentile scale that divides the advantages
//! (eq. 11–12).

use rl_training_core::burn::tensor::Tensor;
use serde::{Deserialize, Serialize};

/// λ-returns of an imagined trajectory, time-major `[H + 1, N]`: row `t` is the state after
/// `t` imagined steps, `rewards[t]` and `continues[t]` what the world model predicts on
/// arriving there (row 0's are unused), `values[t]` the critic's value of it:
///
/// `R_H = v_H`, `R_t = r_{t+1} + γ·c_{t+1}·((1 − λ)·v_{t+1} + λ·R_{t+1})`.
///
/// Returns `[H, N]` (the targets of rows `0..H`).
pub fn lambda_returns(
    rewards: Tensor<2>,
    continues: Tensor<2>,
    values: Tensor<2>,
    gamma: f64,
    lambda: f64,
) -> Tensor<2> {
    let h = values.dims()[0] - 1;
    let row = |t: &Tensor<2>, i: usize| t.clone().narrow(0, i, 1);
    let mut next = row(&values, h);
    let mut out = Vec::with_capacity(h);
    for t in (0..h).rev() {
        let bootstrap = row(&values, t + 1).mul_scalar(1.0 - lambda) + next.mul_scalar(lambda);
        next = row(&rewards, t + 1) + row(&continues, t + 1).mul_scalar(gamma) * bootstrap;
        out.push(next.clone());
    }
    out.reverse();
    Tensor::cat(out, 0)
}

/// The `q`-quantile (`0..=1`) of ascending `sorted` values, interpolating linearly between
/// neighbours (numpy's and jax's default).
pub fn quantile(sorted: &[f32], q: f64) -> f64 {
    match sorted.len() {
        0 => 0.0,
        n => {
            let pos = q.clamp(0.0, 1.0) * (n - 1) as f64;
            let (i, frac) = (pos.floor() as usize, pos - pos.floor());
            let lo = sorted[i] as f64;
            let hi = sorted[(i + 1).min(n - 1)] as f64;
            lo + (hi - lo) * frac
        }
    }
}

/// The return scale `S`: exponential moving averages of the 5th and 95th percentiles of the
/// λ-returns (from 0, decay `decay`); advantages are divided by `max(1, high − low)`, so
/// large returns are scaled down and small ones are not scaled up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReturnScale {
    /// EMA decay (RLlib's `return_normalization_decay`, 0.99).
    pub decay: f64,
    /// EMA of the 5th percentile.
    pub low: f64,
    /// EMA of the 95th percentile.
    pub high: f64,
}

impl ReturnScale {
    /// A fresh scale with EMAs at 0.
    pub fn new(decay: f64) -> Self {
        Self {
            decay,
            low: 0.0,
            high: 0.0,
        }
    }

    /// Moves the EMAs towards the percentiles of one batch of returns; returns the new
    /// divisor.
    pub fn update(&mut self, returns: &[f32]) -> f64 {
        let mut sorted: Vec<f32> = returns.iter().copied().filter(|r| r.is_finite()).collect();
        sorted.sort_by(f32::total_cmp);
        let (lo, hi) = (quantile(&sorted, 0.05), quantile(&sorted, 0.95));
        self.low = self.decay * self.low + (1.0 - self.decay) * lo;
        self.high = self.decay * self.high + (1.0 - self.decay) * hi;
        self.divisor()
    }

    /// `max(1, high − low)`.
    pub fn divisor(&self) -> f64 {
        (self.high - self.low).max(1.0)
    }
}

#[cfg(all(test, feature = "flex"))]
mod tests {
    use super::*;
    use rl_training_core::batch::{host, tensor2};
    use rl_training_core::burn::tensor::Device;

    #[test]
    fn lambda_returns_over_an_imagined_trajectory_by_hand() {
        let dev = Device::flex();
        // H = 3, two trajectories (columns); the second ends after its second step.
        let r = tensor2(vec![9.0, 9.0, 1.0, 0.0, 2.0, 1.0, 3.0, 5.0], 4, 2, &dev);
        let c = tensor2(vec![1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0], 4, 2, &dev);
        let v = tensor2(vec![0.0, 0.0, 10.0, 4.0, 20.0, 8.0, 30.0, 6.0], 4, 2, &dev);
        let (g, l) = (0.9f32, 0.5f32);
        let got = host(lambda_returns(r, c, v, g as f64, l as f64));
        // Column 0: R3 = 30; R2 = 3 + .9(.5·30 + .5·30) = 30; R1 = 2 + .9(.5·20 + .5·30)
        // = 24.5; R0 = 1 + .9(.5·10 + .5·24.5) = 16.525.
        // Column 1: R3 = 6; R2 = 5 + .9(.5·6 + .5·6) = 10.4; R1 = 1 + 0 = 1;
        // R0 = 0 + .9(.5·4 + .5·1) = 2.25.
        let want = [16.525f32, 2.25, 24.5, 1.0, 30.0, 10.4];
        for (a, b) in got.iter().zip(want) {
            assert!((a - b).abs() < 1e-4, "{got:?} vs {want:?}");
        }
    }

    #[test]
    fn lambda_one_is_the_discounted_return_and_zero_is_td() {
        let dev = Device::flex();
        let r = tensor2(vec![0.0, 1.0, 2.0, 4.0], 4, 1, &dev);
        let c = tensor2(vec![1.0; 4], 4, 1, &dev);
        let v = tensor2(vec![5.0, 6.0, 7.0, 8.0], 4, 1, &dev);
        let mc = host(lambda_returns(r.clone(), c.clone(), v.clone(), 0.5, 1.0));
        assert!((mc[0] - (1.0 + 0.5 * 2.0 + 0.25 * 4.0 + 0.125 * 8.0)).abs() < 1e-6);
        let td = host(lambda_returns(r, c, v, 0.5, 0.0));
        assert_eq!(td, vec![1.0 + 0.5 * 6.0, 2.0 + 0.5 * 7.0, 4.0 + 0.5 * 8.0]);
    }

    #[test]
    fn percentile_return_scale_by_hand() {
        // 0..=100: the 5th and 95th percentiles are 5 and 95.
        let returns: Vec<f32> = (0..=100).rev().map(|x| x as f32).collect();
        let mut s = ReturnScale::new(0.99);
        let d = s.update(&returns);
        assert!(
            (s.low - 0.05).abs() < 1e-9 && (s.high - 0.95).abs() < 1e-9,
            "{s:?}"
        );
        // 0.9 < 1: small returns are not scaled up.
        assert_eq!(d, 1.0);
        for _ in 0..2000 {
            s.update(&returns);
        }
        assert!((s.divisor() - 90.0).abs() < 1e-6, "{s:?}");
        // Linear interpolation between neighbours: 4 values, q = 0.5 → halfway.
        assert_eq!(quantile(&[1.0, 2.0, 4.0, 8.0], 0.5), 3.0);
        assert!((quantile(&[1.0, 2.0, 4.0, 8.0], 0.95) - 7.4).abs() < 1e-9);
    }
}
