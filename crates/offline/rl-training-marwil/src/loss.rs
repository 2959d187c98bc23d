//! MARWIL's loss pieces (Wang et al. 2018; RLlib's `MARWILTorchLearner`): the advantage is the
//! discounted return minus the value estimate; a moving average of its squared norm scales
//! it; the policy maximizes the log-likelihood of the data's actions weighted by
//! `exp(β · A / (1e-8 + √avg))`; the value function fits the returns.

use rl_training_core::burn::tensor::Tensor;

/// The moving average of the squared advantage norm after one batch with mean squared
/// advantage `batch_sqd`.
pub fn update_sqd_adv_norm(avg: f64, batch_sqd: f64, rate: f64) -> f64 {
    avg + rate * (batch_sqd - avg)
}

/// `exp(β · A / (1e-8 + √avg))` per row; all ones when β = 0 (behaviour cloning).
pub fn advantage_weights(adv: &[f32], beta: f64, avg: f64) -> Vec<f32> {
    if beta == 0.0 {
        return vec![1.0; adv.len()];
    }
    let scale = beta / (1e-8 + avg.sqrt());
    adv.iter()
        .map(|&a| (scale * a as f64).exp() as f32)
        .collect()
}

/// `−mean(w · (log π(a|s) + c · mean log σ))`: the weighted imitation loss (`logstd_bonus`:
/// `c · mean log σ`, a scalar, for Gaussian policies).
pub fn policy_loss(
    logp: Tensor<1>,
    weights: Tensor<1>,
    logstd_bonus: Option<Tensor<1>>,
) -> Tensor<1> {
    let target = match logstd_bonus {
        Some(b) => logp + b,
        None => logp,
    };
    (target * weights).mean().neg()
}

/// `½ · mean((R − V)²)`.
pub fn value_loss(returns: Tensor<1>, values: Tensor<1>) -> Tensor<1> {
    (returns - values).square().mean().mul_scalar(0.5)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rl_training_core::batch::{host, tensor1};
    use rl_training_core::burn::tensor::Device;

    #[test]
    fn hand_computed_values() {
        // avg 100 → scale β / 10.
        let w = advantage_weights(&[10.0, -5.0, 0.0], 1.0, 100.0);
        let want = [1f64.exp(), (-0.5f64).exp(), 1.0];
        for (a, b) in w.iter().zip(want) {
            assert!((*a as f64 - b).abs() < 1e-6, "{a} {b}");
        }
        assert_eq!(advantage_weights(&[3.0, -1.0], 0.0, 4.0), vec![1.0, 1.0]);
        assert!((update_sqd_adv_norm(100.0, 200.0, 0.1) - 110.0).abs() < 1e-12);
        let dev = Device::flex();
        let l = policy_loss(
            tensor1(vec![-1.0, -2.0], &dev),
            tensor1(vec![2.0, 0.5], &dev),
            None,
        );
        // −(−2 − 1) / 2 = 1.5
        assert!((host(l)[0] - 1.5).abs() < 1e-6);
        let l = policy_loss(
            tensor1(vec![-1.0, -2.0], &dev),
            tensor1(vec![1.0, 1.0], &dev),
            Some(tensor1(vec![0.25], &dev)),
        );
        // −mean(−0.75, −1.75) = 1.25
        assert!((host(l)[0] - 1.25).abs() < 1e-6);
        let v = value_loss(tensor1(vec![3.0, 1.0], &dev), tensor1(vec![1.0, 1.0], &dev));
        assert!((host(v)[0] - 1.0).abs() < 1e-6);
    }
}
