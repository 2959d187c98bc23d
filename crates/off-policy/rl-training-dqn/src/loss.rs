//! DQN's losses as pure functions: TD targets, the Huber/MSE TD loss with importance
//! weights, and C51's categorical projection and cross-entropy.

use crate::config::TdLoss;
use rl_training_core::burn::tensor::Tensor;
use rl_training_core::losses::smooth_l1;

pub use rl_training_core::losses::td_targets;

/// Index of the largest value in each row of `[rows × n]` (the first on ties, as argmax).
pub fn argmax_rows(values: &[f32], n: usize) -> Vec<usize> {
    values
        .chunks(n)
        .map(|row| {
            let mut best = 0;
            for (i, &v) in row.iter().enumerate() {
                if v > row[best] {
                    best = i;
                }
            }
            best
        })
        .collect()
}

/// Importance-weighted mean of the elementwise TD loss between `q` and `target` (`[B]`):
/// Huber δ=1 or ½·δ². Returns the scalar loss.
pub fn td_loss(q: Tensor<1>, target: Tensor<1>, weights: Tensor<1>, kind: TdLoss) -> Tensor<1> {
    let per = match kind {
        TdLoss::Huber => smooth_l1(q, target, 1.0),
        TdLoss::Mse => (q - target).square().mul_scalar(0.5),
    };
    (per * weights).mean()
}

/// C51's projection of the shifted target distribution onto the fixed support
/// `z_i = v_min + i·Δz`: each atom `r + γⁿ(1−done)·z_j` (clipped to `[v_min, v_max]`) splits
/// its probability `p_j` between its two neighbouring atoms in proportion to closeness.
/// `next_probs` is `[B × atoms]`; `discounts` already include `(1 − terminated)`.
pub fn categorical_projection(
    next_probs: &[f32],
    rewards: &[f32],
    discounts: &[f32],
    v_min: f64,
    v_max: f64,
    atoms: usize,
) -> Vec<f32> {
    let dz = (v_max - v_min) / (atoms - 1) as f64;
    let mut m = vec![0.0f32; next_probs.len()];
    for (b, probs) in next_probs.chunks(atoms).enumerate() {
        let (r, g) = (rewards[b] as f64, discounts[b] as f64);
        let row = &mut m[b * atoms..(b + 1) * atoms];
        for (j, &p) in probs.iter().enumerate() {
            let tz = (r + g * (v_min + j as f64 * dz)).clamp(v_min, v_max);
            let pos = (tz - v_min) / dz;
            let (l, u) = (pos.floor() as usize, pos.ceil() as usize);
            if l == u {
                // Lands exactly on an atom: all of it goes there.
                row[l] += p;
            } else {
                row[l] += p * (u as f64 - pos) as f32;
                row[u] += p * (pos - l as f64) as f32;
            }
        }
    }
    m
}

/// Cross-entropy `−Σ_i m_i log p_i` per row (`[B, atoms]` → `[B]`).
pub fn categorical_cross_entropy(target: Tensor<2>, log_probs: Tensor<2>) -> Tensor<1> {
    let b = target.dims()[0];
    (target * log_probs).sum_dim(1).reshape([b]).neg()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn projection_matches_a_hand_computed_case() {
        // Support {-2, -1, 0, 1, 2} (Δz = 1). Row 0: r = 0.5, γ = 0.5, probs on atoms
        // 0 (z=-2) and 4 (z=2): targets 0.5 + 0.5·(-2) = -0.5 → half to -1, half to 0;
        // 0.5 + 0.5·2 = 1.5 → half to 1, half to 2.
        // Row 1: terminal (discount 0), r = 3 → clipped to 2: everything on the last atom.
        // Row 2: r = 0, γ = 1: the distribution is copied unchanged.
        let probs = [
            0.4, 0.0, 0.0, 0.0, 0.6, //
            0.2, 0.2, 0.2, 0.2, 0.2, //
            0.1, 0.2, 0.3, 0.25, 0.15,
        ];
        let m = categorical_projection(&probs, &[0.5, 3.0, 0.0], &[0.5, 0.0, 1.0], -2.0, 2.0, 5);
        let want = [
            0.0, 0.2, 0.2, 0.3, 0.3, //
            0.0, 0.0, 0.0, 0.0, 1.0, //
            0.1, 0.2, 0.3, 0.25, 0.15,
        ];
        for (i, (g, w)) in m.iter().zip(want).enumerate() {
            assert!((g - w).abs() < 1e-6, "m[{i}] = {g}, want {w}");
        }
        for row in m.chunks(5) {
            assert!(
                (row.iter().sum::<f32>() - 1.0).abs() < 1e-6,
                "mass is preserved"
            );
        }
    }

    #[test]
    fn targets_stop_at_terminal_states_only() {
        let y = td_targets(&[1.0, 1.0], &[0.9, 0.9], &[0.0, 1.0], &[10.0, 10.0]);
        assert_eq!(y, vec![10.0, 1.0]);
        assert_eq!(argmax_rows(&[1.0, 3.0, 3.0, 5.0, 0.0, -1.0], 3), vec![1, 0]);
    }
}
