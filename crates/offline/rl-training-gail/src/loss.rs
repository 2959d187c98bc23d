//! GAIL / AIRL loss pieces: the discriminator's logistic loss (expert labelled 1), the policy's
//! rewards, and a gradient penalty estimated by finite differences (burn's autodiff has no
//! second-order gradients).

use rl_training_core::burn::tensor::Tensor;
use rl_training_core::burn::tensor::activation::softplus;

/// Binary cross-entropy with expert rows labelled 1 and policy rows 0, from logits:
/// `mean softplus(−l_expert) + mean softplus(l_policy)` (each half averaged, as imitation's).
pub fn disc_loss(expert_logits: Tensor<1>, policy_logits: Tensor<1>) -> Tensor<1> {
    softplus(expert_logits.neg(), 1.0).mean() + softplus(policy_logits, 1.0).mean()
}

/// GAIL's policy reward `−log(1 − D) = softplus(logit)` per row (host).
pub fn gail_reward(logits: &[f32]) -> Vec<f32> {
    logits
        .iter()
        .map(|&l| if l > 20.0 { l } else { (l.exp()).ln_1p() })
        .collect()
}

/// `(‖∇ₓ d‖ − 1)²` averaged over rows, from `k` directional finite differences per row:
/// `diffs[j]` holds `(d(x + ε u_j) − d(x)) / ε` for unit directions `u_j`, so
/// `‖∇‖² ≈ dim / k · Σ_j diff_j²` (an unbiased estimate for uniformly random directions).
pub fn gradient_penalty(diffs: Vec<Tensor<1>>, dim: usize) -> Tensor<1> {
    let k = diffs.len();
    let sq = diffs
        .into_iter()
        .map(|d| d.square())
        .reduce(|a, b| a + b)
        .expect("at least one direction");
    let norm = sq
        .mul_scalar(dim as f64 / k as f64)
        .add_scalar(1e-12)
        .sqrt();
    norm.sub_scalar(1.0).square().mean()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rl_training_core::batch::{host, tensor1};
    use rl_training_core::burn::tensor::Device;

    #[test]
    fn hand_computed_values() {
        let dev = Device::flex();
        // softplus(0) = ln 2 on both halves.
        let l = disc_loss(tensor1(vec![0.0, 0.0], &dev), tensor1(vec![0.0], &dev));
        assert!((host(l)[0] - 2.0 * 2f32.ln()).abs() < 1e-6);
        // A confident, right discriminator has a small loss.
        let l = disc_loss(tensor1(vec![10.0], &dev), tensor1(vec![-10.0], &dev));
        assert!(host(l)[0] < 1e-3);
        let r = gail_reward(&[0.0, 30.0, -30.0]);
        assert!((r[0] - 2f32.ln()).abs() < 1e-6 && (r[1] - 30.0).abs() < 1e-4 && r[2] < 1e-6);
        // d = x·w with ‖w‖ = 2 in 2 dims, directions e1 and e2: diffs 2 cos θ, 2 sin θ → ‖∇‖ = 2.
        let gp = gradient_penalty(
            vec![
                tensor1(vec![2.0 * 0.6], &dev),
                tensor1(vec![2.0 * 0.8], &dev),
            ],
            2,
        );
        assert!((host(gp)[0] - 1.0).abs() < 1e-5);
    }
}
