//! APPO's surrogate (RLlib's `appo_torch_policy`): PPO's clipped objective with the ratio
//! taken against the target network, `r = clamp(π_target/μ, 0, c_w) · π/π_target`, where μ is
//! the behaviour policy of the runner and `c_w` = `target_worker_clipping`.

use rl_training_core::burn::tensor::Tensor;

/// `(−mean(min(A·r, A·clip(r, 1 − ε, 1 + ε))), r)` with
/// `r = clamp(exp(target_logp − behaviour_logp), 0, worker_clip) · exp(logp − target_logp)`.
pub fn appo_surrogate(
    logp: Tensor<1>,
    target_logp: Tensor<1>,
    behaviour_logp: Tensor<1>,
    advantages: Tensor<1>,
    clip: f64,
    worker_clip: f64,
) -> (Tensor<1>, Tensor<1>) {
    let is_ratio = (target_logp.clone() - behaviour_logp)
        .exp()
        .clamp(0.0, worker_clip);
    let ratio = is_ratio * (logp - target_logp).exp();
    let l1 = advantages.clone() * ratio.clone();
    let l2 = advantages * ratio.clone().clamp(1.0 - clip, 1.0 + clip);
    (l1.min_pair(l2).mean().neg(), ratio)
}

/// The adaptive KL coefficient (RLlib): ×1.5 when the KL exceeds twice the target, ×0.5 when
/// it is below half of it.
pub fn adapt_kl_coeff(coeff: f64, kl: f64, target: f64) -> f64 {
    if kl > 2.0 * target {
        coeff * 1.5
    } else if kl < 0.5 * target {
        coeff * 0.5
    } else {
        coeff
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rl_training_core::batch::{host, tensor1};
    use rl_training_core::burn::tensor::Device;

    #[test]
    fn surrogate_on_a_hand_computed_batch() {
        let d = Device::flex();
        // Step 0: target = behaviour, r = e^0.1 = 1.10517 (A = 1 → clipped at 1.2? no: 1.105).
        // Step 1: target/behaviour = e^1 = 2.718 → clamped to 2; π/π_target = e^-0.2 = 0.81873;
        //         r = 1.63746, A = 2 → min(3.27492, 2·1.2) = 2.4.
        // Step 2: target/behaviour = e^-0.5 = 0.60653, π/π_target = 1, r = 0.60653, A = −1 →
        //         min(−0.60653, −0.8) = −0.8.
        let (l, r) = appo_surrogate(
            tensor1(vec![-0.9, -1.2, -0.5], &d),
            tensor1(vec![-1.0, -1.0, -0.5], &d),
            tensor1(vec![-1.0, -2.0, 0.0], &d),
            tensor1(vec![1.0, 2.0, -1.0], &d),
            0.2,
            2.0,
        );
        let r = host(r);
        assert!(
            (r[0] - 1.105_171).abs() < 1e-5 && (r[1] - 1.637_462).abs() < 1e-5,
            "{r:?}"
        );
        let want = -(1.105_171 + 2.4 - 0.8) / 3.0;
        assert!((host(l)[0] - want).abs() < 1e-5);
        assert_eq!(adapt_kl_coeff(1.0, 0.05, 0.01), 1.5);
        assert_eq!(adapt_kl_coeff(1.0, 0.001, 0.01), 0.5);
        assert_eq!(adapt_kl_coeff(1.0, 0.01, 0.01), 1.0);
    }
}
