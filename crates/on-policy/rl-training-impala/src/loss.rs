//! IMPALA's loss: V-trace targets from a runner batch, then the policy-gradient, value and
//! entropy terms (Espeholt et al. 2018; RLlib's `0.5 · mean((v_s − V)²)` value loss).

use rl_training_core::burn::tensor::Tensor;
pub use rl_training_on_policy::actor_learner::{batch_vtrace, discounts};

/// The policy-gradient term `−mean(A_pg · log π)`.
pub fn policy_gradient_loss(log_prob: Tensor<1>, pg_advantages: Tensor<1>) -> Tensor<1> {
    (pg_advantages * log_prob).mean().neg()
}

/// `(policy_loss, value_loss, entropy_loss)`: `−mean(A_pg · log π)`,
/// `0.5 · mean((v_s − V)²)` and `−mean(entropy)` (`mean(log π)` without a closed form) — the
/// terms [`crate::Impala`]'s update adds up.
pub fn impala_loss(
    log_prob: Tensor<1>,
    entropy: Option<Tensor<1>>,
    values: Tensor<1>,
    vs: Tensor<1>,
    pg_advantages: Tensor<1>,
) -> (Tensor<1>, Tensor<1>, Tensor<1>) {
    let pg = policy_gradient_loss(log_prob.clone(), pg_advantages);
    let vf = rl_training_on_policy::loss::half_mse(vs, values);
    let ent = rl_training_on_policy::loss::entropy_loss(entropy, log_prob);
    (pg, vf, ent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rl_training_core::batch::{host, tensor1};
    use rl_training_core::buffers::RolloutBuffer;
    use rl_training_core::burn::tensor::Device;

    #[test]
    fn discounts_end_where_the_next_step_starts_an_episode() {
        // T = 3, N = 2. Env 0 starts a new episode at step 2 (so step 1 ended one); env 1's
        // last step ended an episode (last_dones).
        let mut b = RolloutBuffer::new(3, 2, 1, 1);
        b.episode_starts = vec![1.0, 1.0, 0.0, 0.0, 1.0, 0.0];
        let d = discounts(&b, &[0.0, 1.0], 0.9);
        assert_eq!(d, vec![0.9, 0.9, 0.0, 0.9, 0.9, 0.0]);
    }

    #[test]
    fn on_policy_vtrace_gives_discounted_returns_and_the_loss_terms() {
        // One env, 3 steps, behaviour = target: v_s are discounted returns with the bootstrap.
        let mut b = RolloutBuffer::new(3, 1, 1, 1);
        b.episode_starts = vec![1.0, 0.0, 0.0];
        b.rewards = vec![1.0, 0.0, 2.0];
        b.log_probs = vec![-0.5, -0.7, -0.1];
        let batch = rl_training_on_policy::actor_learner::RunnerBatch {
            buffer: b.clone(),
            last_obs: vec![0.0],
            last_dones: vec![0.0],
            chains: Vec::new(),
            episodes: Vec::new(),
            seconds: 0.0,
        };
        let out = batch_vtrace(
            &batch,
            &b.log_probs.clone(),
            &[0.3, 0.1, -0.2],
            &[4.0],
            0.5,
            1.0,
            1.0,
        );
        // v_2 = 2 + 0.5·4 = 4, v_1 = 0 + 0.5·4 = 2, v_0 = 1 + 0.5·2 = 2.
        for (g, w) in out.vs.iter().zip([2.0, 2.0, 4.0]) {
            assert!((g - w).abs() < 1e-6, "{:?}", out.vs);
        }
        // A_pg = r + γ v_{t+1} − V: 1 + 1 − 0.3, 0 + 2 − 0.1, 2 + 2 + 0.2.
        for (g, w) in out.pg_advantages.iter().zip([1.7, 1.9, 4.2]) {
            assert!((g - w).abs() < 1e-6, "{:?}", out.pg_advantages);
        }
        let d = Device::flex();
        let (pg, vf, ent) = impala_loss(
            tensor1(vec![-0.5, -0.7, -0.1], &d),
            Some(tensor1(vec![0.6, 0.5, 0.4], &d)),
            tensor1(vec![0.3, 0.1, -0.2], &d),
            tensor1(vec![2.0, 2.0, 4.0], &d),
            tensor1(vec![1.7, 1.9, 4.2], &d),
        );
        let want_pg = (1.7 * 0.5 + 1.9 * 0.7 + 4.2 * 0.1) / 3.0;
        let want_vf = 0.5 * (1.7f64.powi(2) + 1.9f64.powi(2) + 4.2f64.powi(2)) / 3.0;
        assert!((host(pg)[0] as f64 - want_pg).abs() < 1e-5);
        assert!((host(vf)[0] as f64 - want_vf).abs() < 1e-5);
        assert!((host(ent)[0] as f64 + 0.5).abs() < 1e-6);
    }
}
