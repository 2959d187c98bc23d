//! A2C's loss as a pure function (SB3's `A2C.train`).

use rl_training_core::burn::tensor::Tensor;
pub use rl_training_on_policy::loss::{entropy_loss, explained_variance, normalize_advantages};

/// The terms of one A2C update.
pub struct A2cLoss {
    /// `policy_loss + ent_coef · entropy_loss + vf_coef · value_loss`.
    pub total: Tensor<1>,
    /// `-mean(A · log π(a|s))`.
    pub policy: Tensor<1>,
    /// `mean((R - V(s))²)`.
    pub value: Tensor<1>,
    /// `-mean(entropy)` (or `mean(log π)` without a closed-form entropy).
    pub entropy: Tensor<1>,
}

/// A2C's loss from the log-probabilities of the taken actions, the policy entropies (if
/// closed-form), the value estimates, advantages and returns.
pub fn a2c_loss(
    log_prob: Tensor<1>,
    entropy: Option<Tensor<1>>,
    values: Tensor<1>,
    advantages: Tensor<1>,
    returns: Tensor<1>,
    ent_coef: f64,
    vf_coef: f64,
) -> A2cLoss {
    let policy = (advantages * log_prob.clone()).mean().neg();
    let value = rl_training_core::losses::mse(returns, values);
    let entropy = entropy_loss(entropy, log_prob);
    let total =
        policy.clone() + entropy.clone().mul_scalar(ent_coef) + value.clone().mul_scalar(vf_coef);
    A2cLoss {
        total,
        policy,
        value,
        entropy,
    }
}

#[cfg(all(test, feature = "flex"))]
mod tests {
    use super::*;
    use rl_training_core::batch::{host, tensor1};
    use rl_training_core::burn::tensor::Device;

    #[test]
    fn matches_a_hand_computed_batch() {
        let dev = Device::flex();
        let t = |v: &[f32]| tensor1(v.to_vec(), &dev);
        // Three samples: log π, entropy, V, A, R.
        let (logp, ent, v, adv, ret) = (
            [-0.5f32, -1.2, -0.1],
            [0.6f32, 0.4, 0.2],
            [1.0f32, 0.5, -0.5],
            [2.0f32, -1.0, 0.5],
            [2.5f32, 0.0, 0.5],
        );
        let l = a2c_loss(t(&logp), Some(t(&ent)), t(&v), t(&adv), t(&ret), 0.01, 0.5);
        // policy: -(2·-0.5 + -1·-1.2 + 0.5·-0.1)/3 = -(−1 + 1.2 − 0.05)/3 = −0.05
        // value: ((2.5−1)² + (0−0.5)² + (0.5+0.5)²)/3 = (2.25 + 0.25 + 1)/3 = 7/6
        // entropy: −(0.6 + 0.4 + 0.2)/3 = −0.4
        // total: −0.05 + 0.01·(−0.4) + 0.5·7/6 = 0.529333…
        let close = |x: Tensor<1>, want: f64| {
            let got = host(x)[0] as f64;
            assert!((got - want).abs() < 1e-6, "{got} vs {want}");
        };
        close(l.policy, -0.05);
        close(l.value, 7.0 / 6.0);
        close(l.entropy, -0.4);
        close(l.total, -0.05 - 0.004 + 7.0 / 12.0);
        // Without a closed-form entropy the estimate is −mean(−log π) = mean(log π).
        let l = a2c_loss(t(&logp), None, t(&v), t(&adv), t(&ret), 0.01, 0.5);
        close(l.entropy, (-0.5 - 1.2 - 0.1) / 3.0);
    }
}
