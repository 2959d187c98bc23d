//! CQL's loss pieces (Kumar et al. 2020, CQL(H); RLlib's `cql_torch_policy` for the
//! continuous form): the conservative penalty pushes Q down on a log-sum-exp over sampled
//! actions and up on the data's actions.

use rl_training_core::burn::tensor::Tensor;

/// Row-wise `log Σ_j exp(x_ij)` `[B]`, stabilized by the row maximum.
pub fn logsumexp_rows(x: Tensor<2>) -> Tensor<1> {
    let b = x.dims()[0];
    let m = x.clone().max_dim(1).detach();
    ((x - m.clone()).exp().sum_dim(1).log() + m).reshape([b])
}

/// The continuous CQL penalty of one critic:
/// `w · T · mean_s logsumexp_j(q_j / T) − w · mean(Q(s, a_data))`, over the `[B, 3N]`
/// importance-corrected values `[q_rand − log U, q_next − log π(a′|s′), q_curr − log π(a|s)]`
/// (`log U = A · log ½`, the uniform density on [−1, 1]^A). Log-probabilities are constants.
pub fn cql_penalty(
    sampled: [Tensor<2>; 3],
    log_densities: [Tensor<2>; 3],
    q_data: Tensor<1>,
    temperature: f64,
    min_q_weight: f64,
) -> Tensor<1> {
    let cat: Vec<Tensor<2>> = sampled
        .into_iter()
        .zip(log_densities)
        .map(|(q, l)| q - l)
        .collect();
    let cat = Tensor::cat(cat, 1);
    let lse = logsumexp_rows(cat.div_scalar(temperature)).mean();
    lse.mul_scalar(min_q_weight * temperature) - q_data.mean().mul_scalar(min_q_weight)
}

/// The discrete CQL(H) penalty `w · mean_s (logsumexp_a Q(s, a) − Q(s, a_data))`.
pub fn discrete_cql_penalty(q_all: Tensor<2>, q_data: Tensor<1>, min_q_weight: f64) -> Tensor<1> {
    (logsumexp_rows(q_all) - q_data)
        .mean()
        .mul_scalar(min_q_weight)
}

/// The behaviour-cloning actor loss of the first `bc_iters` steps:
/// `mean(α · log π(ã|s) − log π(a_data|s))`.
pub fn bc_actor_loss(logp_sampled: Tensor<1>, logp_data: Tensor<1>, alpha: f64) -> Tensor<1> {
    (logp_sampled.mul_scalar(alpha) - logp_data).mean()
}

/// The gradient of RLlib's α′ loss `−½ Σ_i α′ · (penalty_i − thresh)` with respect to
/// `log α′` (α′ = exp(log α′)), for the Lagrangian form.
pub fn alpha_prime_grad(alpha_prime: f64, penalties: &[f64], thresh: f64) -> f64 {
    -0.5 * alpha_prime * penalties.iter().map(|p| p - thresh).sum::<f64>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rl_training_core::batch::{host, tensor1, tensor2};
    use rl_training_core::burn::tensor::Device;

    #[test]
    fn hand_computed_values() {
        let dev = Device::flex();
        let x = tensor2(vec![0.0, 0.0, 1000.0, 1000.0], 2, 2, &dev);
        let l = host(logsumexp_rows(x));
        assert!((l[0] - 2f32.ln()).abs() < 1e-6 && (l[1] - (1000.0 + 2f32.ln())).abs() < 1e-3);
        // One state, N = 1: values [1, 2, 3] with log-densities [0, 1, 0] → [1, 1, 3];
        // T = 1: lse = ln(2e + e³); penalty = w (lse − q_data).
        let q = |v: f32| tensor2(vec![v], 1, 1, &dev);
        let p = cql_penalty(
            [q(1.0), q(2.0), q(3.0)],
            [q(0.0), q(1.0), q(0.0)],
            tensor1(vec![0.5], &dev),
            1.0,
            2.0,
        );
        let e = std::f64::consts::E;
        let want = 2.0 * ((2.0 * e + e.powi(3)).ln() - 0.5);
        assert!((host(p)[0] as f64 - want).abs() < 1e-5);
        // T = 2 scales inside and out: 2 · w · ln(Σ exp(v / 2)).
        let p = cql_penalty(
            [q(1.0), q(2.0), q(3.0)],
            [q(0.0), q(1.0), q(0.0)],
            tensor1(vec![0.0], &dev),
            2.0,
            1.0,
        );
        let want = 2.0 * (2.0 * 0.5f64.exp() + 1.5f64.exp()).ln();
        assert!((host(p)[0] as f64 - want).abs() < 1e-5);
        let d = discrete_cql_penalty(
            tensor2(vec![1.0, 2.0, 0.0, 0.0], 2, 2, &dev),
            tensor1(vec![2.0, 0.0], &dev),
            3.0,
        );
        let want = 3.0 * (((e + e * e).ln() - 2.0) + (2f64.ln())) / 2.0;
        assert!((host(d)[0] as f64 - want).abs() < 1e-5);
        let b = bc_actor_loss(
            tensor1(vec![-1.0, -3.0], &dev),
            tensor1(vec![-2.0, 0.0], &dev),
            0.5,
        );
        // mean(−0.5 + 2, −1.5 − 0) = 0
        assert!(host(b)[0].abs() < 1e-6);
        assert!((alpha_prime_grad(2.0, &[6.0, 8.0], 5.0) + 4.0).abs() < 1e-12);
    }

    #[test]
    fn log_prob_of_matches_the_sampled_log_prob() {
        use rl_training_core::Rng;
        let dev = Device::flex();
        let mut rng = Rng::seed_from(1);
        let actor = rl_training_sac::Actor::new(
            3,
            Some(2),
            0,
            &[8],
            rl_training_core::nn::Activation::Relu,
            &mut rng,
            &dev,
        );
        let obs = tensor2((0..15).map(|i| i as f32 * 0.1 - 0.7).collect(), 5, 3, &dev);
        let eps = tensor2(
            (0..10).map(|i| (i as f32 * 0.37).sin()).collect(),
            5,
            2,
            &dev,
        );
        let (a, logp) = actor.sample(obs.clone(), eps);
        let back = host(actor.log_prob_of(obs, a));
        for (x, y) in host(logp).iter().zip(&back) {
            assert!((x - y).abs() < 1e-3, "{x} {y}");
        }
    }
}
