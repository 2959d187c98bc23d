//! Loss pieces the family's algorithms share (SB3's formulas).

use rl_training_core::burn::tensor::Tensor;

/// SB3's per-minibatch advantage normalization: `(A - mean) / (std + 1e-8)` with the unbiased
/// (N-1) standard deviation. A single sample is left as is (SB3 skips normalization then).
pub fn normalize_advantages(adv: &[f32]) -> Vec<f32> {
    let n = adv.len();
    if n < 2 {
        return adv.to_vec();
    }
    let mean = adv.iter().map(|&a| a as f64).sum::<f64>() / n as f64;
    let var = adv.iter().map(|&a| (a as f64 - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let std = var.sqrt();
    adv.iter()
        .map(|&a| ((a as f64 - mean) / (std + 1e-8)) as f32)
        .collect()
}

/// SB3's entropy loss: `-mean(entropy)`, or `mean(log_prob)` (minus a one-sample entropy
/// estimate) for distributions without a closed-form entropy.
pub fn entropy_loss(entropy: Option<Tensor<1>>, log_prob: Tensor<1>) -> Tensor<1> {
    match entropy {
        Some(e) => e.mean().neg(),
        None => log_prob.mean(),
    }
}

/// Mean of `v` (0 for none).
pub fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// Explained variance `1 - Var(y - ŷ) / Var(y)` (NaN when `Var(y)` is 0, as SB3).
pub fn explained_variance(pred: &[f32], target: &[f32]) -> f64 {
    let n = target.len() as f64;
    let mean = |v: &mut dyn Iterator<Item = f64>| v.sum::<f64>() / n;
    let my = mean(&mut target.iter().map(|&x| x as f64));
    let vy = mean(&mut target.iter().map(|&x| (x as f64 - my).powi(2)));
    let diff: Vec<f64> = target
        .iter()
        .zip(pred)
        .map(|(&y, &p)| y as f64 - p as f64)
        .collect();
    let md = mean(&mut diff.iter().copied());
    let vd = mean(&mut diff.iter().map(|&d| (d - md).powi(2)));
    if vy == 0.0 { f64::NAN } else { 1.0 - vd / vy }
}

/// Adds the metrics every rollout update reports: the value function's explained variance
/// on the rollout (left out when undefined) and the learning rate.
pub fn rollout_metrics(
    m: &mut rl_training_core::logger::Metrics,
    values: &[f32],
    returns: &[f32],
    learning_rate: f64,
) {
    let ev = explained_variance(values, returns);
    if ev.is_finite() {
        m.insert("losses/explained_variance".into(), ev);
    }
    m.insert("charts/learning_rate".into(), learning_rate);
}

/// Fraction of ratios with `|ratio - 1| > clip_range`.
pub fn clip_fraction(ratio: &[f32], clip_range: f64) -> f64 {
    ratio
        .iter()
        .filter(|&&r| ((r - 1.0).abs() as f64) > clip_range)
        .count() as f64
        / ratio.len().max(1) as f64
}

/// The actor-learner value loss `0.5 · mean((targets − values)²)` (RLlib's IMPALA / APPO).
pub fn half_mse(targets: Tensor<1>, values: Tensor<1>) -> Tensor<1> {
    let err = targets - values;
    (err.clone() * err).mean().mul_scalar(0.5)
}
