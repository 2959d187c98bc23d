//! Recurrent PPO's loss terms: PPO's, averaged over the real (unpadded) steps of a minibatch
//! of sequences (sb3-contrib's masked means).

use rl_training_core::burn::tensor::Tensor;
use rl_training_on_policy::recurrent::masked_mean;
use rl_training_ppo::loss::{surrogate_terms, value_prediction};

/// Clipped surrogate loss `-Σ mask·min(A·r, A·clip(r)) / Σ mask` and the ratio `r`.
pub fn masked_surrogate(
    log_prob: Tensor<1>,
    old_log_prob: Tensor<1>,
    advantages: Tensor<1>,
    mask: Tensor<1>,
    clip_range: f64,
) -> (Tensor<1>, Tensor<1>) {
    let (objective, ratio) = surrogate_terms(log_prob, old_log_prob, advantages, clip_range);
    (masked_mean(objective, mask).neg(), ratio)
}

/// Value loss: the masked mean of `(returns − prediction)²` (prediction clipped around the
/// old values with `clip_range_vf`).
pub fn masked_value_loss(
    values: Tensor<1>,
    old_values: Tensor<1>,
    returns: Tensor<1>,
    mask: Tensor<1>,
    clip_range_vf: Option<f64>,
) -> Tensor<1> {
    let err = returns - value_prediction(values, old_values, clip_range_vf);
    masked_mean(err.clone() * err, mask)
}

/// Entropy loss `-masked_mean(entropy)` (`masked_mean(log_prob)` without a closed form).
pub fn masked_entropy_loss(
    entropy: Option<Tensor<1>>,
    log_prob: Tensor<1>,
    mask: Tensor<1>,
) -> Tensor<1> {
    match entropy {
        Some(e) => masked_mean(e, mask).neg(),
        None => masked_mean(log_prob, mask),
    }
}

/// Advantages normalized over the real steps (`mask` 1): `(A − mean) / (std + 1e-8)` with the
/// sample standard deviation, as SB3; padded entries stay 0.
pub fn normalize_masked(adv: &[f32], mask: &[f32]) -> Vec<f32> {
    let real: Vec<f32> = adv
        .iter()
        .zip(mask)
        .filter(|(_, m)| **m > 0.5)
        .map(|(a, _)| *a)
        .collect();
    let mut norm = rl_training_on_policy::loss::normalize_advantages(&real).into_iter();
    adv.iter()
        .zip(mask)
        .map(|(_, m)| {
            if *m > 0.5 {
                norm.next().unwrap_or(0.0)
            } else {
                0.0
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rl_training_core::batch::tensor1;
    use rl_training_core::burn::tensor::Device;

    fn v(t: Tensor<1>) -> f32 {
        rl_training_core::batch::host(t)[0]
    }

    /// A batch of 2 sequences × 3 steps with 2 padded steps equals PPO's plain means over
    /// the 4 real steps, computed here by hand.
    #[test]
    fn masked_terms_on_a_hand_computed_batch() {
        let d = Device::flex();
        let mask = [1.0f32, 1.0, 0.0, 1.0, 1.0, 0.0];
        let logp = [-0.5f32, -1.0, 9.0, -0.2, -2.0, 9.0];
        let old = [-0.6f32, -0.9, -9.0, -0.2, -1.5, -9.0];
        let adv = [1.0f32, -1.0, 50.0, 2.0, 0.5, -50.0];
        let (l, ratio) = masked_surrogate(
            tensor1(logp.to_vec(), &d),
            tensor1(old.to_vec(), &d),
            tensor1(adv.to_vec(), &d),
            tensor1(mask.to_vec(), &d),
            0.2,
        );
        // Real steps: r = e^0.1 = 1.10517 (A 1: min(1.10517, 1.10517) = 1.10517),
        // e^-0.1 = 0.904837 (A -1: min(-0.904837, -0.904837) = -0.904837),
        // 1 (A 2: 2), e^-0.5 = 0.606531 (A 0.5: min(0.303265, 0.4) = 0.303265).
        let want = -(1.105_171 - 0.904_837 + 2.0 + 0.303_265) / 4.0;
        assert!((v(l) - want).abs() < 1e-5, "{}", want);
        assert_eq!(rl_training_core::batch::host(ratio).len(), 6);

        let values = [0.5f32, 1.0, 100.0, -1.0, 0.0, -100.0];
        let returns = [1.0f32, 0.0, 0.0, 1.0, 3.0, 0.0];
        let vl = masked_value_loss(
            tensor1(values.to_vec(), &d),
            tensor1(values.to_vec(), &d),
            tensor1(returns.to_vec(), &d),
            tensor1(mask.to_vec(), &d),
            None,
        );
        // (0.25 + 1 + 4 + 9) / 4
        assert!((v(vl) - 14.25 / 4.0).abs() < 1e-6);
        // Clipped around old values 0 with c = 0.5: predictions 0.5, 0.5, -0.5, 0.
        let vl = masked_value_loss(
            tensor1(values.to_vec(), &d),
            tensor1(vec![0.0; 6], &d),
            tensor1(returns.to_vec(), &d),
            tensor1(mask.to_vec(), &d),
            Some(0.5),
        );
        assert!((v(vl) - (0.25 + 0.25 + 2.25 + 9.0) / 4.0).abs() < 1e-6);

        let ent = [0.7f32, 0.6, 100.0, 0.5, 0.2, 100.0];
        let el = masked_entropy_loss(
            Some(tensor1(ent.to_vec(), &d)),
            tensor1(logp.to_vec(), &d),
            tensor1(mask.to_vec(), &d),
        );
        assert!((v(el) + 2.0 / 4.0).abs() < 1e-6);
        let el = masked_entropy_loss(None, tensor1(logp.to_vec(), &d), tensor1(mask.to_vec(), &d));
        assert!((v(el) - (-3.7 / 4.0)).abs() < 1e-6);
    }

    #[test]
    fn advantages_normalize_over_real_steps_only() {
        let n = normalize_masked(&[1.0, 99.0, 3.0, -99.0], &[1.0, 0.0, 1.0, 0.0]);
        // mean 2, sample std √2.
        let s = 2f32.sqrt();
        assert!((n[0] + 1.0 / s).abs() < 1e-6 && (n[2] - 1.0 / s).abs() < 1e-6);
        assert_eq!((n[1], n[3]), (0.0, 0.0));
    }
}
