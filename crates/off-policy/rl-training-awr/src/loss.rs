//! AWR's pieces as pure functions: TD(λ) targets over a buffer laid out `[rows][n_envs]`,
//! advantage weights, the weighted log-likelihood.

use rl_training_core::buffers::compute_gae;
use rl_training_core::burn::tensor::Tensor;

/// TD(λ) returns `R_t = r_t + γ((1 − λ)V(s_{t+1}) + λR_{t+1})` over time-ordered rows
/// (computed as GAE + V). `rewards` must already include `γ·V(final_obs)` for truncated
/// (not terminated) steps; `dones` is 1 where an episode ended; `last_values` are
/// `V(next_obs)` of the newest row.
pub fn td_lambda_returns(
    rewards: &[f32],
    values: &[f32],
    dones: &[f32],
    last_values: &[f32],
    gamma: f32,
    lambda: f32,
) -> Vec<f32> {
    let n = last_values.len();
    let len = rewards.len();
    // episode_starts[t] = done[t − 1] of the same env.
    let mut starts = vec![0.0f32; len];
    starts[n.min(len)..].copy_from_slice(&dones[..len.saturating_sub(n)]);
    let last_dones = &dones[len - n..];
    let (mut adv, mut ret) = (vec![0.0; len], vec![0.0; len]);
    compute_gae(
        rewards,
        values,
        &starts,
        last_values,
        last_dones,
        gamma,
        lambda,
        &mut adv,
        &mut ret,
    );
    ret
}

/// `min(exp(A / β), max_weight)`, with `A` standardized first when `normalize`.
pub fn advantage_weights(adv: &[f32], beta: f64, max_weight: f64, normalize: bool) -> Vec<f32> {
    let n = adv.len().max(1) as f64;
    let (mean, std) = if normalize {
        let m = adv.iter().map(|&a| a as f64).sum::<f64>() / n;
        let v = adv.iter().map(|&a| (a as f64 - m).powi(2)).sum::<f64>() / n;
        (m, v.sqrt() + 1e-5)
    } else {
        (0.0, 1.0)
    };
    adv.iter()
        .map(|&a| (((a as f64 - mean) / std / beta).exp().min(max_weight)) as f32)
        .collect()
}

/// The policy loss `−mean(w · log π(a|s))`.
pub fn weighted_nll(log_prob: Tensor<1>, weights: Tensor<1>) -> Tensor<1> {
    (log_prob * weights).mean().neg()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn td_lambda_by_hand() {
        // One env, three steps, γ = 0.5, λ = 0.5, values 1, 2, 3, next value 4, no ends:
        // R2 = 1 + 0.5·4 = 3; R1 = 1 + 0.5·(0.5·3 + 0.5·3) = 2.5; R0 = 1 + 0.5·(0.5·2 + 0.5·2.5) = 2.125
        let r = td_lambda_returns(&[1.0; 3], &[1.0, 2.0, 3.0], &[0.0; 3], &[4.0], 0.5, 0.5);
        assert_eq!(r, vec![2.125, 2.5, 3.0]);
        // The episode ends at step 1: R1 = r1, and R0 sees only step 1.
        let r = td_lambda_returns(
            &[1.0; 3],
            &[1.0, 2.0, 3.0],
            &[0.0, 1.0, 0.0],
            &[4.0],
            0.5,
            0.5,
        );
        assert_eq!(r, vec![1.0 + 0.5 * (0.5 * 2.0 + 0.5 * 1.0), 1.0, 3.0]);
    }

    #[test]
    fn weights_are_clipped_exponentials() {
        let w = advantage_weights(&[0.0, 0.1, 10.0, -1.0], 0.05, 20.0, false);
        assert_eq!(w[0], 1.0);
        assert!((w[1] - 2f32.exp()).abs() < 1e-5);
        assert_eq!(w[2], 20.0);
        assert!((w[3] - (-20f32).exp()).abs() < 1e-12);
        let wn = advantage_weights(&[1.0, 3.0], 1.0, 20.0, true);
        assert!((wn[0] - (-1.0f32 / 1.00001).exp()).abs() < 1e-4, "{wn:?}");
    }
}
