//! The world model's stochastic state: `C` independent categoricals of `K` classes each
//! (`[B, C, K]` tensors). Every distribution mixes 1% of the uniform into its softmax
//! ("unimix", so no probability is 0 and KL terms stay finite), samples pass gradients to
//! the probabilities straight through, and the two KL terms between posterior and prior get
//! free bits.

use rl_training_core::Rng;
use rl_training_core::batch::host;
use rl_training_core::burn::tensor::activation::softmax;
use rl_training_core::burn::tensor::{Tensor, TensorData};

/// DreamerV3's share of the uniform in every categorical.
pub const UNIMIX: f64 = 0.01;

/// `(1 − mix)·softmax(logits) + mix / K` over the last dimension (`K` classes).
pub fn unimix<const D: usize>(logits: Tensor<D>, mix: f64) -> Tensor<D> {
    let k = logits.dims()[D - 1] as f64;
    softmax(logits, D - 1)
        .mul_scalar(1.0 - mix)
        .add_scalar(mix / k)
}

/// One class per categorical drawn from `probs` `[B, C, K]` with `rng` (on the host: the
/// generator is the algorithm's, so runs replay exactly), returned as the one-hot sample
/// plus `probs − sg(probs)`: the value is the sample, the gradient reaches the
/// probabilities as if the sample were them (straight-through).
pub fn straight_through_sample(probs: Tensor<3>, rng: &mut Rng) -> Tensor<3> {
    let [b, c, k] = probs.dims();
    let onehot = draw_one_hot(&host(probs.clone().detach()), k, rng);
    let sample = Tensor::<3>::from_data(TensorData::new(onehot, [b, c, k]), &probs.device());
    sample + probs.clone() - probs.detach()
}

/// One class drawn with `rng` for each row of `k` probabilities in `probs`, as one-hot rows
/// (the last class takes what rounding leaves above the cumulative sum).
pub fn draw_one_hot(probs: &[f32], k: usize, rng: &mut Rng) -> Vec<f32> {
    let mut onehot = vec![0.0f32; probs.len()];
    for (row, out) in probs.chunks(k).zip(onehot.chunks_mut(k)) {
        let u = rng.uniform() as f32;
        let mut acc = 0.0f32;
        let mut pick = k - 1;
        for (j, &pj) in row.iter().enumerate() {
            acc += pj;
            if u < acc {
                pick = j;
                break;
            }
        }
        out[pick] = 1.0;
    }
    onehot
}

/// The most likely class of each categorical as a one-hot `[B, C, K]` (no gradient).
pub fn mode(probs: Tensor<3>) -> Tensor<3> {
    let [b, c, k] = probs.dims();
    let onehot = argmax_one_hot(&host(probs.clone().detach()), k);
    Tensor::from_data(TensorData::new(onehot, [b, c, k]), &probs.device())
}

/// The most likely class of each row of `k` probabilities in `probs`, as one-hot rows (the
/// first of equals).
pub fn argmax_one_hot(probs: &[f32], k: usize) -> Vec<f32> {
    let mut onehot = vec![0.0f32; probs.len()];
    for (row, out) in probs.chunks(k).zip(onehot.chunks_mut(k)) {
        let best = (0..k).fold(0, |m, j| if row[j] > row[m] { j } else { m });
        out[best] = 1.0;
    }
    onehot
}

/// `KL(p ‖ q)` between the groups of categoricals `p`, `q` `[B, C, K]`, summed over the `C`
/// categoricals (the KL of the joint): `[B]`.
pub fn kl(p: Tensor<3>, q: Tensor<3>) -> Tensor<1> {
    (p.clone() * (p.log() - q.log())).sum_dims_squeeze::<1, _>(&[1, 2])
}

/// DreamerV3's two KL terms, per row.
pub struct KlTerms {
    /// `max(free_bits, KL(sg(posterior) ‖ prior))`: trains the prior towards the posterior.
    pub dynamics: Tensor<1>,
    /// `max(free_bits, KL(posterior ‖ sg(prior)))`: keeps the posterior predictable.
    pub representation: Tensor<1>,
}

/// [`KlTerms`] of `posterior` and `prior` probabilities `[B, C, K]`; below `free_bits`
/// nats a term is constant, so it no longer pulls (DreamerV3: 1 nat).
pub fn kl_terms(posterior: Tensor<3>, prior: Tensor<3>, free_bits: f64) -> KlTerms {
    KlTerms {
        dynamics: kl(posterior.clone().detach(), prior.clone()).clamp_min(free_bits),
        representation: kl(posterior, prior.detach()).clamp_min(free_bits),
    }
}

#[cfg(all(test, feature = "flex"))]
mod tests {
    use super::*;
    use rl_training_core::burn::tensor::Device;

    fn t3(v: Vec<f32>, dims: [usize; 3], dev: &Device) -> Tensor<3> {
        Tensor::from_data(TensorData::new(v, dims), dev)
    }

    #[test]
    fn unimix_probabilities_by_hand() {
        let dev = Device::flex();
        // Logits ln 1, ln 3 → softmax 0.25, 0.75 → 0.99·p + 0.01/2.
        let logits = t3(vec![0.0, 3f32.ln(), 0.0, 0.0], [1, 2, 2], &dev);
        let p = host(unimix(logits, UNIMIX));
        let want = [0.2525f32, 0.7475, 0.5, 0.5];
        for (a, b) in p.iter().zip(want) {
            assert!((a - b).abs() < 1e-6, "{p:?}");
        }
        // Even a hopeless class keeps mix / K.
        let p = host(unimix(
            t3(vec![-1e4, 0.0, 0.0, 0.0], [1, 1, 4], &dev),
            UNIMIX,
        ));
        assert!((p[0] - 0.0025).abs() < 1e-7, "{p:?}");
    }

    #[test]
    fn kl_with_free_bits_by_hand() {
        let dev = Device::flex().autodiff();
        // Two categoricals of two classes: KL = Σ_c Σ_k p log(p/q).
        let pv = vec![0.5f32, 0.5, 0.9, 0.1];
        let qv = vec![0.25f32, 0.75, 0.5, 0.5];
        let want: f32 = pv.iter().zip(&qv).map(|(p, q)| p * (p / q).ln()).sum();
        let got = host(kl(
            t3(pv.clone(), [1, 2, 2], &dev),
            t3(qv.clone(), [1, 2, 2], &dev),
        ));
        assert!((got[0] - want).abs() < 1e-6, "{got:?} vs {want}");
        // want ≈ 0.512: free bits of 1 nat hold both terms at 1 and stop their gradients;
        // free bits of 0.1 let them through.
        let post = t3(pv, [1, 2, 2], &dev).require_grad();
        let prior = t3(qv, [1, 2, 2], &dev).require_grad();
        let held = kl_terms(post.clone(), prior.clone(), 1.0);
        assert_eq!(host(held.dynamics.clone()), vec![1.0]);
        assert_eq!(host(held.representation.clone()), vec![1.0]);
        let g = (held.dynamics + held.representation).sum().backward();
        let gq = host(prior.grad(&g).unwrap());
        assert!(gq.iter().all(|x| *x == 0.0), "{gq:?}");
        let free = kl_terms(post.clone(), prior.clone(), 0.1);
        assert!((host(free.dynamics.clone())[0] - want).abs() < 1e-6);
        // The dynamics term trains only the prior, the representation term only the
        // posterior: ∂KL/∂q = −p/q.
        let g = free.dynamics.sum().backward();
        assert!(
            post.grad(&g)
                .is_none_or(|t| host(t).iter().all(|x| *x == 0.0))
        );
        let gq = host(prior.grad(&g).unwrap());
        for (a, b) in gq.iter().zip([-2.0f32, -0.5 / 0.75, -1.8, -0.2]) {
            assert!((a - b).abs() < 1e-5, "{gq:?}");
        }
        let g = free.representation.sum().backward();
        assert!(
            prior
                .grad(&g)
                .is_none_or(|t| host(t).iter().all(|x| *x == 0.0))
        );
        assert!(post.grad(&g).is_some());
    }

    #[test]
    fn straight_through_sample_is_one_hot_with_the_probabilities_gradient() {
        let dev = Device::flex().autodiff();
        let mut rng = Rng::seed_from(7);
        let probs = t3(vec![0.1f32, 0.2, 0.7, 0.6, 0.3, 0.1], [1, 2, 3], &dev).require_grad();
        let s = straight_through_sample(probs.clone(), &mut rng);
        let v = host(s.clone());
        for row in v.chunks(3) {
            assert_eq!(row.iter().filter(|x| **x == 1.0).count(), 1, "{v:?}");
            assert_eq!(row.iter().filter(|x| **x == 0.0).count(), 2, "{v:?}");
        }
        // d(Σ w·sample)/d probs = w: the sample passes gradients as the identity.
        let w = t3(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [1, 2, 3], &dev);
        let g = (s * w).sum().backward();
        assert_eq!(
            host(probs.grad(&g).unwrap()),
            vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
        );
        // The draws follow the probabilities: class frequencies over 20k samples.
        let mut counts = [0usize; 3];
        let p = t3(vec![0.1f32, 0.2, 0.7], [1, 1, 3], &Device::flex());
        for _ in 0..20_000 {
            let s = host(straight_through_sample(p.clone(), &mut rng));
            counts[s.iter().position(|x| *x == 1.0).unwrap()] += 1;
        }
        for (c, want) in counts.iter().zip([0.1, 0.2, 0.7]) {
            assert!((*c as f64 / 20_000.0 - want).abs() < 0.015, "{counts:?}");
        }
        assert_eq!(host(mode(p)), vec![0.0, 0.0, 1.0]);
    }
}
