//! SAC's losses as pure functions (continuous: Haarnoja et al. 2018 as SB3; discrete:
//! Christodoulou 2019, expectations over the action distribution instead of samples).

use rl_training_core::burn::tensor::Tensor;

/// Soft TD targets: rl-training-core's bootstrapped targets with `v_next` = min Q − α log π.
pub use rl_training_core::losses::td_targets as soft_targets;

/// Critic loss `½ Σ_i mean(w · (Q_i − y)²)` over the critics' `[B]` predictions.
pub fn critic_loss(qs: Vec<Tensor<1>>, target: Tensor<1>, weights: Tensor<1>) -> Tensor<1> {
    qs.into_iter()
        .map(|q| {
            ((q - target.clone()).square() * weights.clone())
                .mean()
                .mul_scalar(0.5)
        })
        .reduce(|a, b| a + b)
        .expect("at least one critic")
}

/// Continuous actor loss `mean(α·log π(a|s) − min_i Q_i(s, a))`, `a ~ π` reparameterized.
pub fn actor_loss(log_prob: Tensor<1>, min_q: Tensor<1>, alpha: f64) -> Tensor<1> {
    (log_prob.mul_scalar(alpha) - min_q).mean()
}

/// Discrete actor loss `mean_s Σ_a π(a|s)·(α·log π(a|s) − min_i Q_i(s, a))`.
pub fn discrete_actor_loss(log_probs: Tensor<2>, min_q: Tensor<2>, alpha: f64) -> Tensor<1> {
    let b = log_probs.dims()[0];
    let p = log_probs.clone().exp();
    (p * (log_probs.mul_scalar(alpha) - min_q))
        .sum_dim(1)
        .reshape([b])
        .mean()
}

/// Discrete soft state value `Σ_a π(a|s')·(min_i Q'_i(s', a) − α·log π(a|s'))` per row
/// (host arrays `[B × n]`).
pub fn discrete_soft_value(log_probs: &[f32], min_q: &[f32], n: usize, alpha: f32) -> Vec<f32> {
    log_probs
        .chunks(n)
        .zip(min_q.chunks(n))
        .map(|(lp, q)| {
            lp.iter()
                .zip(q)
                .map(|(&l, &q)| l.exp() * (q - alpha * l))
                .sum()
        })
        .collect()
}

/// Gradient of the entropy-coefficient loss `−log α · mean(log π + H̄)` with respect to
/// `log α` (SB3's `ent_coef_loss`); for discrete policies pass `Σ_a π log π` per state.
pub fn alpha_loss_grad(log_probs: &[f32], target_entropy: f64) -> f64 {
    let n = log_probs.len().max(1) as f64;
    -log_probs
        .iter()
        .map(|&l| l as f64 + target_entropy)
        .sum::<f64>()
        / n
}

/// Adam on one scalar (the learned log α), as torch's Adam with default betas.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ScalarAdam {
    m: f64,
    v: f64,
    t: i32,
}

impl ScalarAdam {
    /// One step: returns the updated value.
    pub fn step(&mut self, x: f64, grad: f64, lr: f64) -> f64 {
        let (b1, b2, eps) = (0.9, 0.999, 1e-8);
        self.t += 1;
        self.m = b1 * self.m + (1.0 - b1) * grad;
        self.v = b2 * self.v + (1.0 - b2) * grad * grad;
        let mh = self.m / (1.0 - b1.powi(self.t));
        let vh = self.v / (1.0 - b2.powi(self.t));
        x - lr * mh / (vh.sqrt() + eps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rl_training_core::batch::{host, tensor1, tensor2};
    use rl_training_core::burn::tensor::Device;

    #[test]
    fn hand_computed_losses() {
        let dev = Device::flex();
        // Two critics, B = 2, target (1, 2), weights (1, 0.5):
        // ½·mean(1·(0.5−1)², 0.5·(3−2)²) + ½·mean(1·(1−1)², 0.5·(2−2)²) = ½·(0.25 + 0.5)/2 = 0.1875
        let l = critic_loss(
            vec![tensor1(vec![0.5, 3.0], &dev), tensor1(vec![1.0, 2.0], &dev)],
            tensor1(vec![1.0, 2.0], &dev),
            tensor1(vec![1.0, 0.5], &dev),
        );
        assert!((host(l)[0] - 0.1875).abs() < 1e-7);
        // Discrete actor: π = (0.25, 0.75), α = 0.5, Q = (1, 2):
        // 0.25·(0.5·ln .25 − 1) + 0.75·(0.5·ln .75 − 2)
        let lp = tensor2(vec![0.25f32.ln(), 0.75f32.ln()], 1, 2, &dev);
        let want = 0.25 * (0.5 * 0.25f64.ln() - 1.0) + 0.75 * (0.5 * 0.75f64.ln() - 2.0);
        let got = host(discrete_actor_loss(
            lp,
            tensor2(vec![1.0, 2.0], 1, 2, &dev),
            0.5,
        ))[0];
        assert!((got as f64 - want).abs() < 1e-6, "{got} vs {want}");
        let v = discrete_soft_value(&[0.25f32.ln(), 0.75f32.ln()], &[1.0, 2.0], 2, 0.5);
        let want_v = 0.25 * (1.0 - 0.5 * 0.25f64.ln()) + 0.75 * (2.0 - 0.5 * 0.75f64.ln());
        assert!((v[0] as f64 - want_v).abs() < 1e-6);
        // log π = −1 everywhere, H̄ = −2: grad = −(−1 − 2) = 3, so α shrinks.
        assert_eq!(alpha_loss_grad(&[-1.0, -1.0], -2.0), 3.0);
    }

    #[test]
    fn scalar_adam_first_step_is_lr_times_sign() {
        let mut a = ScalarAdam::default();
        let x = a.step(0.0, 0.3, 0.01);
        assert!((x + 0.01).abs() < 1e-9, "{x}");
    }
}
