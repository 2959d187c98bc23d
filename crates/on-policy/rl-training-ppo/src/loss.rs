//! PPO's loss terms as pure functions (SB3's `PPO.train` formulas).

use rl_training_core::burn::tensor::Tensor;
pub use rl_training_on_policy::loss::{
    clip_fraction, entropy_loss, explained_variance, normalize_advantages,
};

/// Clipped surrogate: returns `(policy_loss, ratio)` with
/// `ratio = exp(log_prob - old_log_prob)` and
/// `policy_loss = -mean(min(A·ratio, A·clamp(ratio, 1-ε, 1+ε)))`.
pub fn clipped_surrogate(
    log_prob: Tensor<1>,
    old_log_prob: Tensor<1>,
    advantages: Tensor<1>,
    clip_range: f64,
) -> (Tensor<1>, Tensor<1>) {
    let (objective, ratio) = surrogate_terms(log_prob, old_log_prob, advantages, clip_range);
    (objective.mean().neg(), ratio)
}

/// Per-sample clipped objective `min(A·ratio, A·clamp(ratio, 1-ε, 1+ε))` and the ratio (for
/// losses that weight samples, e.g. masked sequences).
pub fn surrogate_terms(
    log_prob: Tensor<1>,
    old_log_prob: Tensor<1>,
    advantages: Tensor<1>,
    clip_range: f64,
) -> (Tensor<1>, Tensor<1>) {
    let ratio = (log_prob - old_log_prob).exp();
    let l1 = advantages.clone() * ratio.clone();
    let l2 = advantages * ratio.clone().clamp(1.0 - clip_range, 1.0 + clip_range);
    (l1.min_pair(l2), ratio)
}

/// Value loss: `mse(returns, values)`, or with `clip_range_vf` SB3's
/// `mse(returns, old_values + clamp(values - old_values, -c, c))`.
pub fn value_loss(
    values: Tensor<1>,
    old_values: Tensor<1>,
    returns: Tensor<1>,
    clip_range_vf: Option<f64>,
) -> Tensor<1> {
    rl_training_core::losses::mse(returns, value_prediction(values, old_values, clip_range_vf))
}

/// The prediction the value loss scores: `values`, or with `clip_range_vf`
/// `old_values + clamp(values - old_values, -c, c)`.
pub fn value_prediction(
    values: Tensor<1>,
    old_values: Tensor<1>,
    clip_range_vf: Option<f64>,
) -> Tensor<1> {
    match clip_range_vf {
        Some(c) => old_values.clone() + (values - old_values).clamp(-c, c),
        None => values,
    }
}

/// Approximate KL `mean((ratio - 1) - log ratio)` (Schulman's k3 estimator, as SB3).
pub fn approx_kl(log_prob: &[f32], old_log_prob: &[f32]) -> f64 {
    let n = log_prob.len().max(1) as f64;
    log_prob
        .iter()
        .zip(old_log_prob)
        .map(|(&l, &o)| {
            let lr = (l - o) as f64;
            (lr.exp() - 1.0) - lr
        })
        .sum::<f64>()
        / n
}
