//! ICM's losses as pure functions: the forward error (the intrinsic reward before its
//! coefficient, and the forward loss), the inverse loss, the module's total.

use rl_training_core::burn::tensor::Tensor;
use rl_training_core::burn::tensor::activation::log_softmax;

/// Per-row forward error `½‖φ̂(s′) − φ(s′)‖²` `[B]`. Gradients reach both the forward net and
/// the features of s′, as in Pathak et al.'s code and RLlib's, unless the caller detaches
/// the target (`detach_forward_target`).
pub fn forward_error(predicted_next_phi: Tensor<2>, next_phi: Tensor<2>) -> Tensor<1> {
    let d = predicted_next_phi - next_phi;
    (d.clone() * d)
        .sum_dim(1)
        .squeeze_dim::<1>(1)
        .mul_scalar(0.5)
}

/// How the inverse net's outputs are read: one softmax per discrete action part
/// (`[lo, hi)` columns, cross-entropy against the one-hot action) or, for Box actions,
/// values compared by mean squared error.
#[derive(Debug, Clone, PartialEq)]
pub enum ActionParts {
    /// Discrete or MultiDiscrete: the one-hot column ranges of each part.
    Categorical(Vec<(usize, usize)>),
    /// Box: every column is a value.
    Continuous,
}

/// The inverse loss `[1]`: the mean over rows of the summed cross-entropies of the discrete
/// parts, or the mean squared error of Box actions. `actions` is the encoded action
/// `[B, A]` (one-hot parts or values).
pub fn inverse_loss(predicted: Tensor<2>, actions: Tensor<2>, parts: &ActionParts) -> Tensor<1> {
    let b = predicted.dims()[0];
    match parts {
        ActionParts::Continuous => {
            let d = predicted - actions;
            (d.clone() * d).mean().reshape([1])
        }
        ActionParts::Categorical(ranges) => {
            let mut total: Option<Tensor<1>> = None;
            for &(lo, hi) in ranges {
                let logp = log_softmax(predicted.clone().slice([0..b, lo..hi]), 1);
                let onehot = actions.clone().slice([0..b, lo..hi]);
                let ce = (logp * onehot)
                    .sum()
                    .neg()
                    .div_scalar(b as f64)
                    .reshape([1]);
                total = Some(match total {
                    Some(t) => t + ce,
                    None => ce,
                });
            }
            total.expect("at least one discrete part")
        }
    }
}

/// The module's loss `(1 − β)·inverse + β·forward`.
pub fn icm_loss(inverse: Tensor<1>, forward: Tensor<1>, forward_loss_weight: f64) -> Tensor<1> {
    inverse.mul_scalar(1.0 - forward_loss_weight) + forward.mul_scalar(forward_loss_weight)
}

/// RND's predictor loss: the mean of `values` over the rows `mask` keeps (`kept` of them; 0
/// rows give 0), as CleanRL's `(loss * mask).sum() / max(mask.sum(), 1)`.
pub fn masked_mean(values: Tensor<1>, mask: Tensor<1>, kept: f32) -> Tensor<1> {
    (values * mask)
        .sum()
        .div_scalar(kept.max(1.0) as f64)
        .reshape([1])
}

#[cfg(all(test, feature = "flex"))]
mod tests {
    use super::*;
    use rl_training_core::batch::{host, tensor2};
    use rl_training_core::burn::tensor::Device;

    fn t(v: &[f32], r: usize, c: usize) -> Tensor<2> {
        tensor2(v.to_vec(), r, c, &Device::flex())
    }

    #[test]
    fn forward_error_is_half_the_squared_distance_per_row() {
        let e = host(forward_error(
            t(&[1.0, 2.0, 0.0, 0.0], 2, 2),
            t(&[0.0, 0.0, 0.0, 1.0], 2, 2),
        ));
        assert_eq!(e, vec![2.5, 0.5]);
    }

    #[test]
    fn inverse_loss_is_the_mean_cross_entropy_or_mse() {
        let parts = ActionParts::Categorical(vec![(0, 2)]);
        // Row 1: softmax(0, ln 3) = (1/4, 3/4), action 1 → −ln(3/4); row 2: (1/2, 1/2) → ln 2.
        let logits = t(&[0.0, 3f32.ln(), 0.0, 0.0], 2, 2);
        let l = host(inverse_loss(logits, t(&[0.0, 1.0, 1.0, 0.0], 2, 2), &parts))[0] as f64;
        let want = (-(0.75f64).ln() + 2f64.ln()) / 2.0;
        assert!((l - want).abs() < 1e-6, "{l} vs {want}");
        // Two discrete parts: the cross-entropies add.
        let two = ActionParts::Categorical(vec![(0, 2), (2, 4)]);
        let l2 = host(inverse_loss(
            t(&[0.0, 0.0, 0.0, 3f32.ln()], 1, 4),
            t(&[1.0, 0.0, 0.0, 1.0], 1, 4),
            &two,
        ))[0] as f64;
        assert!((l2 - (2f64.ln() - 0.75f64.ln())).abs() < 1e-6, "{l2}");
        let mse = host(inverse_loss(
            t(&[1.0, 2.0], 1, 2),
            t(&[0.0, 0.0], 1, 2),
            &ActionParts::Continuous,
        ))[0];
        assert_eq!(mse, 2.5);
    }

    #[test]
    fn the_masked_mean_averages_the_kept_rows() {
        let d = Device::flex();
        let v = rl_training_core::batch::tensor1(vec![1.0, 2.0, 4.0], &d);
        let m = rl_training_core::batch::tensor1(vec![1.0, 0.0, 1.0], &d);
        assert_eq!(host(masked_mean(v.clone(), m, 2.0))[0], 2.5);
        let none = rl_training_core::batch::tensor1(vec![0.0; 3], &d);
        assert_eq!(host(masked_mean(v, none, 0.0))[0], 0.0);
    }

    #[test]
    fn the_total_weighs_forward_by_beta() {
        let d = Device::flex();
        let l = host(icm_loss(
            rl_training_core::batch::tensor1(vec![1.0], &d),
            rl_training_core::batch::tensor1(vec![3.0], &d),
            0.2,
        ))[0];
        assert!((l - 1.4).abs() < 1e-6, "{l}");
    }
}
