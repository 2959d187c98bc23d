//! Regression losses shared by the algorithms.

use burn::tensor::Tensor;

/// Bootstrapped TD targets `r + discount · (1 − terminated) · v_next` on host arrays: DQN's
/// (v_next = the target net's Q of the chosen next action) and SAC's soft targets (v_next =
/// min Q − α log π). Truncated transitions keep their bootstrap; `discount` is γⁿ of an
/// n-step return.
pub fn td_targets(
    rewards: &[f32],
    discounts: &[f32],
    terminated: &[f32],
    v_next: &[f32],
) -> Vec<f32> {
    rewards
        .iter()
        .zip(discounts)
        .zip(terminated)
        .zip(v_next)
        .map(|(((&r, &d), &t), &v)| r + d * (1.0 - t) * v)
        .collect()
}

/// Elementwise Huber loss with threshold `delta`:
/// `0.5 d²` if `|d| <= delta`, else `delta (|d| - 0.5 delta)`, with `d = pred - target`.
pub fn huber<const D: usize>(pred: Tensor<D>, target: Tensor<D>, delta: f64) -> Tensor<D> {
    let d = pred - target;
    let a = d.clone().abs();
    let quad = d.clone() * d * 0.5;
    let lin = a.clone().sub_scalar(0.5 * delta).mul_scalar(delta);
    quad.mask_where(a.greater_elem(delta), lin)
}

/// Elementwise smooth L1 (torch's `smooth_l1_loss`, SB3's DQN loss with `beta` 1):
/// `0.5 d² / beta` if `|d| < beta`, else `|d| - 0.5 beta`.
pub fn smooth_l1<const D: usize>(pred: Tensor<D>, target: Tensor<D>, beta: f64) -> Tensor<D> {
    let d = pred - target;
    let a = d.clone().abs();
    let quad = (d.clone() * d).mul_scalar(0.5 / beta);
    let lin = a.clone().sub_scalar(0.5 * beta);
    quad.mask_where(a.greater_equal_elem(beta), lin)
}

/// Mean squared error (a scalar tensor `[1]`).
pub fn mse<const D: usize>(pred: Tensor<D>, target: Tensor<D>) -> Tensor<1> {
    let d = pred - target;
    (d.clone() * d).mean()
}

#[cfg(test)]
mod tests {
    #[test]
    fn td_targets_stop_at_terminal_states_only() {
        let y = super::td_targets(&[1.0, 1.0], &[0.9, 0.5], &[0.0, 1.0], &[10.0, 10.0]);
        assert_eq!(y, vec![10.0, 1.0]);
    }
}
