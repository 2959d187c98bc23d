//! PPG's auxiliary-phase loss as a pure function (Cobbe et al. 2021, eq. 2 and 3).

use rl_training_core::burn::tensor::Tensor;
use rl_training_core::distributions::DistKind;

/// The terms of one auxiliary-phase minibatch.
pub struct AuxLoss {
    /// `aux_value + β_clone · kl + value`: what the step minimizes (the first two reach the
    /// policy network, the last the value network).
    pub total: Tensor<1>,
    /// `½ mean((V_aux(s) − V_targ)²)`, the auxiliary value head on the policy network.
    pub aux_value: Tensor<1>,
    /// `mean KL(π_old(·|s) ‖ π_θ(·|s))`, the behaviour-cloning term.
    pub kl: Tensor<1>,
    /// `½ mean((V(s) − V_targ)²)`, the value network's distillation.
    pub value: Tensor<1>,
}

/// PPG's auxiliary loss from the auxiliary head's values, the value network's values, the
/// value targets, and the policy's outputs before the phase (`old`, constant) and now (`new`).
pub fn aux_loss(
    dist: &DistKind,
    aux_values: Tensor<1>,
    values: Tensor<1>,
    targets: Tensor<1>,
    old: Tensor<2>,
    new: Tensor<2>,
    beta_clone: f64,
) -> AuxLoss {
    let aux_value = rl_training_core::losses::mse(aux_values, targets.clone()).mul_scalar(0.5);
    let value = rl_training_core::losses::mse(values, targets).mul_scalar(0.5);
    let kl = dist.kl(old, None, new, None).mean();
    let total = aux_value.clone() + kl.clone().mul_scalar(beta_clone) + value.clone();
    AuxLoss {
        total,
        aux_value,
        kl,
        value,
    }
}

#[cfg(all(test, feature = "flex"))]
mod tests {
    use super::*;
    use rl_training_core::batch::{host, tensor1, tensor2};
    use rl_training_core::burn::tensor::Device;

    #[test]
    fn matches_a_hand_computed_batch() {
        let dev = Device::flex();
        let dist = DistKind::Categorical { n: 2, start: 0 };
        // Two states. Old policy: logits [0, 0] (p = ½, ½) and [ln 3, 0] (p = ¾, ¼);
        // new policy: logits [ln 3, 0] (¾, ¼) and [ln 3, 0] (unchanged).
        let l3 = 3f32.ln();
        let old = tensor2(vec![0.0, 0.0, l3, 0.0], 2, 2, &dev);
        let new = tensor2(vec![l3, 0.0, l3, 0.0], 2, 2, &dev);
        let l = aux_loss(
            &dist,
            tensor1(vec![1.0, 2.0], &dev),
            tensor1(vec![0.5, 3.5], &dev),
            tensor1(vec![2.0, 2.0], &dev),
            old,
            new,
            0.5,
        );
        // aux: ½ · ((1−2)² + 0²)/2 = 0.25; value: ½ · (1.5² + 1.5²)/2 = 1.125.
        // KL row 1: ½ ln(½ / ¾) + ½ ln(½ / ¼) = ½ ln(4/3) ≈ 0.143841; row 2: 0 → mean 0.0719205.
        let kl = 0.5 * (4.0f64 / 3.0).ln() / 2.0;
        let close = |t: Tensor<1>, want: f64| {
            let got = host(t)[0] as f64;
            assert!((got - want).abs() < 1e-6, "{got} vs {want}");
        };
        close(l.aux_value, 0.25);
        close(l.value, 1.125);
        close(l.kl, kl);
        close(l.total, 0.25 + 0.5 * kl + 1.125);
    }
}
