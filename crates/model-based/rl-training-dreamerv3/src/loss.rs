//! DreamerV3's world-model loss as pure functions of tensors, each term named, per row.
//!
//! `L = L_pred + β_dyn·L_dyn + β_rep·L_rep` with `L_pred = decoder + reward + continue`
//! (negative log-likelihoods), `L_dyn = max(1, KL(sg(post) ‖ prior))`,
//! `L_rep = max(1, KL(post ‖ sg(prior)))`, `β_dyn = 0.5`, `β_rep = 0.1` (the paper's and
//! RLlib's values; the KL terms come from `rl_training_model_based::kl_terms`).

use rl_training_core::burn::tensor::Tensor;
use rl_training_core::burn::tensor::activation::log_sigmoid;

/// Free bits of the KL terms (nats).
pub const FREE_BITS: f64 = 1.0;
/// `β_dyn`: weight of the dynamics KL.
pub const KL_DYN_SCALE: f64 = 0.5;
/// `β_rep`: weight of the representation KL.
pub const KL_REP_SCALE: f64 = 0.1;

/// The decoder's loss: `Σ_d (prediction − target)²` per row (targets in symlog space for
/// vector observations, so this is the symlog squared error): `[N]`.
pub fn decoder_loss(prediction: Tensor<2>, target: Tensor<2>) -> Tensor<1> {
    (prediction - target)
        .square()
        .sum_dims_squeeze::<1, _>(&[1])
}

/// The continue head's loss: binary cross-entropy of `logit` `[N, 1]` against `target`
/// `[N]` (1: the episode goes on): `[N]`.
pub fn continue_loss(logit: Tensor<2>, target: Tensor<1>) -> Tensor<1> {
    let x = logit.squeeze_dim::<1>(1);
    let stop = target.clone().neg().add_scalar(1.0);
    -(target * log_sigmoid(x.clone()) + stop * log_sigmoid(x.neg()))
}

/// The prediction loss: the three negative log-likelihoods, per row.
pub fn prediction_loss(decoder: Tensor<1>, reward: Tensor<1>, cont: Tensor<1>) -> Tensor<1> {
    decoder + reward + cont
}

/// The world-model loss per row.
pub fn world_model_loss(
    prediction: Tensor<1>,
    dynamics: Tensor<1>,
    representation: Tensor<1>,
) -> Tensor<1> {
    prediction + dynamics.mul_scalar(KL_DYN_SCALE) + representation.mul_scalar(KL_REP_SCALE)
}

/// Weight of the critic's pull towards its slow EMA copy's predictions.
pub const CRITIC_EMA_REGULARIZER: f64 = 1.0;

/// The critic's loss per imagined state: two-hot cross-entropy against the λ-return
/// (`return_ce`) plus [`CRITIC_EMA_REGULARIZER`] × the cross-entropy against the slow
/// critic's prediction (`ema_ce`), weighted by the state's reach weight.
pub fn critic_loss(return_ce: Tensor<1>, ema_ce: Tensor<1>, weight: Tensor<1>) -> Tensor<1> {
    (return_ce + ema_ce.mul_scalar(CRITIC_EMA_REGULARIZER)) * weight
}

/// The actor's loss per imagined state for discrete actions (REINFORCE):
/// `−(sg(advantage)·log π(a|s) + η·H(π(·|s)))`, weighted by the state's reach weight;
/// `advantage = (R_λ − v) / max(1, S)`.
pub fn actor_loss(
    log_prob: Tensor<1>,
    advantage: Tensor<1>,
    entropy: Tensor<1>,
    entropy_scale: f64,
    weight: Tensor<1>,
) -> Tensor<1> {
    -(advantage.detach() * log_prob + entropy.mul_scalar(entropy_scale)) * weight
}

/// The actor's loss per imagined state for Box actions by dynamics backpropagation:
/// `−(R_λ / max(1, S) + η·H(π(·|s)))`, weighted by the state's reach weight; the λ-return
/// keeps its gradient through the world model to the actions.
pub fn actor_loss_dynamics(
    scaled_return: Tensor<1>,
    entropy: Tensor<1>,
    entropy_scale: f64,
    weight: Tensor<1>,
) -> Tensor<1> {
    -(scaled_return + entropy.mul_scalar(entropy_scale)) * weight
}

#[cfg(all(test, feature = "flex"))]
mod tests {
    use super::*;
    use rl_training_core::batch::{host, tensor1, tensor2};
    use rl_training_core::burn::tensor::Device;

    #[test]
    fn world_model_terms_by_hand() {
        let dev = Device::flex();
        let d = host(decoder_loss(
            tensor2(vec![1.0, 2.0, 0.0, 0.0], 2, 2, &dev),
            tensor2(vec![0.0, 0.0, 3.0, -1.0], 2, 2, &dev),
        ));
        assert_eq!(d, vec![5.0, 10.0]);
        // Logit 0: ln 2 either way; logit 2 against 1: ln(1 + e⁻²); against 0: ln(1 + e²).
        let c = host(continue_loss(
            tensor2(vec![0.0, 2.0, 2.0], 3, 1, &dev),
            tensor1(vec![1.0, 1.0, 0.0], &dev),
        ));
        let want = [2f32.ln(), (-2f32).exp().ln_1p(), 2f32.exp().ln_1p()];
        for (a, b) in c.iter().zip(want) {
            assert!((a - b).abs() < 1e-5, "{c:?} vs {want:?}");
        }
        let p = prediction_loss(
            tensor1(vec![1.0], &dev),
            tensor1(vec![2.0], &dev),
            tensor1(vec![0.5], &dev),
        );
        let total = host(world_model_loss(
            p,
            tensor1(vec![2.0], &dev),
            tensor1(vec![3.0], &dev),
        ));
        assert!((total[0] - (3.5 + 0.5 * 2.0 + 0.1 * 3.0)).abs() < 1e-6);
    }

    #[test]
    fn behavior_terms_by_hand() {
        let dev = Device::flex().autodiff();
        let c = host(critic_loss(
            tensor1(vec![2.0, 1.0], &dev),
            tensor1(vec![0.5, 0.0], &dev),
            tensor1(vec![1.0, 0.5], &dev),
        ));
        assert_eq!(c, vec![2.5, 0.5]);
        // −(sg(A)·log π + η·H)·w; the gradient reaches log π as −A·w, never A.
        let logp = tensor1(vec![-0.5, -2.0], &dev).require_grad();
        let adv = tensor1(vec![1.5, -1.0], &dev).require_grad();
        let l = actor_loss(
            logp.clone(),
            adv.clone(),
            tensor1(vec![0.6, 0.2], &dev),
            0.1,
            tensor1(vec![1.0, 0.5], &dev),
        );
        let v = host(l.clone());
        assert!((v[0] - -(1.5 * -0.5 + 0.06)).abs() < 1e-6, "{v:?}");
        assert!((v[1] - -(-1.0 * -2.0 + 0.02) * 0.5).abs() < 1e-6, "{v:?}");
        let g = l.sum().backward();
        assert_eq!(host(logp.grad(&g).unwrap()), vec![-1.5, 0.5]);
        assert!(
            adv.grad(&g)
                .is_none_or(|t| host(t).iter().all(|x| *x == 0.0))
        );
        // Dynamics backpropagation: −(R/S + η·H)·w; the gradient reaches the scaled return
        // as −w (the return itself is the differentiated quantity).
        let ret = tensor1(vec![2.0, -1.0], &dev).require_grad();
        let l = actor_loss_dynamics(
            ret.clone(),
            tensor1(vec![0.6, 0.2], &dev),
            0.1,
            tensor1(vec![1.0, 0.5], &dev),
        );
        let v = host(l.clone());
        assert!((v[0] - -(2.0 + 0.06)).abs() < 1e-6, "{v:?}");
        assert!((v[1] - -(-1.0 + 0.02) * 0.5).abs() < 1e-6, "{v:?}");
        let g = l.sum().backward();
        assert_eq!(host(ret.grad(&g).unwrap()), vec![-1.0, -0.5]);
    }
}
