//! The recurrent state-space model (DreamerV3's RSSM). The state is a deterministic part
//! `h` (a [`NormGru`]'s) and a stochastic part `z` (groups of categoricals). Each step:
//!
//! - sequence model: `h_t = GRU(dense([z_{t−1}, a_{t−1}]), h_{t−1})`;
//! - prior (dynamics predictor): `ẑ_t ~ p(z | h_t)`, what imagination samples;
//! - posterior (representation): `z_t ~ q(z | h_t, e_t)` with `e_t` the observation's
//!   embedding, what observing samples.
//!
//! Episodes start from `h = 0`, `z = 0` and a zero previous action (`is_first` resets a row).

use crate::categorical::{UNIMIX, straight_through_sample, unimix};
use crate::nets::{DenseStack, NormGru, linear_dreamer};
use crate::sizes::ModelDims;
use rl_training_core::Rng;
use rl_training_core::burn;
use rl_training_core::burn::module::Module;
use rl_training_core::burn::nn::Linear;
use rl_training_core::burn::tensor::{Device, Tensor};

/// A batch of RSSM states.
#[derive(Debug, Clone)]
pub struct RssmState {
    /// Deterministic state `[B, gru_units]`.
    pub h: Tensor<2>,
    /// Stochastic state `[B, C, K]` (one-hot samples, straight-through).
    pub z: Tensor<3>,
}

impl RssmState {
    /// The model state the heads read: `[h, flat z]`, `[B, gru_units + C·K]`.
    pub fn features(&self) -> Tensor<2> {
        let [b, c, k] = self.z.dims();
        Tensor::cat(vec![self.h.clone(), self.z.clone().reshape([b, c * k])], 1)
    }

    /// The same states with gradients cut (imagination starts from them).
    pub fn detach(self) -> Self {
        Self {
            h: self.h.detach(),
            z: self.z.detach(),
        }
    }
}

/// One observed step's outputs.
pub struct Observed {
    /// The new state (its `z` sampled from the posterior).
    pub state: RssmState,
    /// Posterior probabilities `[B, C, K]`.
    pub posterior: Tensor<3>,
    /// Prior probabilities `[B, C, K]`.
    pub prior: Tensor<3>,
}

/// The RSSM's networks.
#[derive(Module, Debug)]
pub struct Rssm {
    /// `[flat z, action] → dense_units`, the GRU's input.
    pub pre_gru: DenseStack,
    /// The sequence model.
    pub gru: NormGru,
    /// `h → dense_units` before the prior's logits.
    pub prior_net: DenseStack,
    /// Prior logits `C·K`.
    pub prior_logits: Linear,
    /// `[h, embedding] → dense_units` before the posterior's logits.
    pub post_net: DenseStack,
    /// Posterior logits `C·K`.
    pub post_logits: Linear,
    #[module(skip)]
    num_categoricals: usize,
    #[module(skip)]
    num_classes: usize,
}

impl Rssm {
    /// An RSSM of `dims` for `embed_dim`-wide observation embeddings and `action_dim`-wide
    /// actions (one-hot for discrete ones).
    pub fn new(
        dims: &ModelDims,
        embed_dim: usize,
        action_dim: usize,
        rng: &mut Rng,
        device: &Device,
    ) -> Self {
        let (u, g) = (dims.dense_units, dims.gru_units);
        let (c, k) = (dims.num_categoricals, dims.num_classes);
        Self {
            pre_gru: DenseStack::new(c * k + action_dim, u, 1, rng, device),
            gru: NormGru::new(u, g, rng, device),
            prior_net: DenseStack::new(g, u, 1, rng, device),
            prior_logits: linear_dreamer(u, c * k, true, rng, device),
            post_net: DenseStack::new(g + embed_dim, u, 1, rng, device),
            post_logits: linear_dreamer(u, c * k, true, rng, device),
            num_categoricals: c,
            num_classes: k,
        }
    }

    /// Width of [`RssmState::features`].
    pub fn feature_dim(&self) -> usize {
        self.gru.hidden() + self.num_categoricals * self.num_classes
    }

    /// `batch` fresh states: `h = 0`, `z = 0`.
    pub fn initial(&self, batch: usize, device: &Device) -> RssmState {
        RssmState {
            h: Tensor::zeros([batch, self.gru.hidden()], device),
            z: Tensor::zeros([batch, self.num_categoricals, self.num_classes], device),
        }
    }

    /// The sequence model's step: `h_t` from the previous state and action.
    fn next_h(&self, state: &RssmState, action: Tensor<2>) -> Tensor<2> {
        let [b, c, k] = state.z.dims();
        let z = state.z.clone().reshape([b, c * k]);
        let x = self.pre_gru.forward(Tensor::cat(vec![z, action], 1));
        self.gru.forward(x, state.h.clone())
    }

    /// The prior's probabilities at `h` `[B, C, K]`.
    pub fn prior(&self, h: Tensor<2>) -> Tensor<3> {
        let b = h.dims()[0];
        let logits = self.prior_logits.forward(self.prior_net.forward(h));
        unimix(
            logits.reshape([b, self.num_categoricals, self.num_classes]),
            UNIMIX,
        )
    }

    /// One observed step: `is_first` `[B, 1]` (1 where an episode starts: the previous state
    /// and action are replaced by zeros), the previous action `[B, A]`, the observation's
    /// embedding `[B, E]`; `z_t` is drawn from the posterior with `rng`.
    pub fn observe(
        &self,
        state: RssmState,
        prev_action: Tensor<2>,
        embed: Tensor<2>,
        is_first: Tensor<2>,
        rng: &mut Rng,
    ) -> Observed {
        let draw = |p: Tensor<3>| straight_through_sample(p, rng);
        self.observe_with(state, prev_action, embed, is_first, draw)
    }

    /// [`observe`](Self::observe) with `z_t` chosen by `draw` from the posterior's
    /// probabilities (e.g. [`mode`](crate::categorical::mode) for deterministic acting).
    pub fn observe_with(
        &self,
        state: RssmState,
        prev_action: Tensor<2>,
        embed: Tensor<2>,
        is_first: Tensor<2>,
        draw: impl FnOnce(Tensor<3>) -> Tensor<3>,
    ) -> Observed {
        let keep = is_first.neg().add_scalar(1.0);
        let state = RssmState {
            h: state.h * keep.clone(),
            z: state.z * keep.clone().unsqueeze_dim::<3>(2),
        };
        let h = self.next_h(&state, prev_action * keep);
        let prior = self.prior(h.clone());
        let b = h.dims()[0];
        let logits = self.post_logits.forward(
            self.post_net
                .forward(Tensor::cat(vec![h.clone(), embed], 1)),
        );
        let posterior = unimix(
            logits.reshape([b, self.num_categoricals, self.num_classes]),
            UNIMIX,
        );
        let z = draw(posterior.clone());
        Observed {
            state: RssmState { h, z },
            posterior,
            prior,
        }
    }

    /// One imagined step: the next state under `action` `[B, A]`, its `z` drawn from the
    /// prior with `rng`.
    pub fn imagine(&self, state: RssmState, action: Tensor<2>, rng: &mut Rng) -> RssmState {
        let h = self.next_h(&state, action);
        let z = straight_through_sample(self.prior(h.clone()), rng);
        RssmState { h, z }
    }
}

#[cfg(all(test, feature = "flex"))]
mod tests {
    use super::*;
    use crate::sizes::ModelSize;
    use rl_training_core::batch::{host, tensor2};

    #[test]
    fn observe_resets_rows_that_start_an_episode_and_imagine_keeps_shapes() {
        let dev = Device::flex();
        let dims = ModelSize::Nano.dims();
        let mut rng = Rng::seed_from(0);
        let rssm = Rssm::new(&dims, 6, 2, &mut rng, &dev);
        assert_eq!(rssm.feature_dim(), 16 + 16);
        let embed = tensor2((0..12).map(|i| i as f32 * 0.1).collect(), 2, 6, &dev);
        let act = tensor2(vec![1.0, 0.0, 0.0, 1.0], 2, 2, &dev);
        let s0 = rssm.initial(2, &dev);
        let first = tensor2(vec![1.0, 1.0], 2, 1, &dev);
        let o1 = rssm.observe(s0, act.clone(), embed.clone(), first, &mut rng);
        // Row 0 starts again: its h equals the h of a fresh start, whatever came before.
        let cont = tensor2(vec![1.0, 0.0], 2, 1, &dev);
        let o2 = rssm.observe(o1.state.clone(), act.clone(), embed.clone(), cont, &mut rng);
        let (h1, h2) = (host(o1.state.h.clone()), host(o2.state.h.clone()));
        assert_eq!(h1[..16], h2[..16]);
        assert_ne!(h1[16..], h2[16..]);
        for p in [o2.posterior, o2.prior] {
            assert_eq!(p.dims(), [2, 4, 4]);
            let v = host(p);
            for row in v.chunks(4) {
                assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5);
                assert!(row.iter().all(|x| *x >= 0.01 / 4.0 - 1e-7));
            }
        }
        let s = rssm.imagine(o2.state, act, &mut rng);
        assert_eq!(s.features().dims(), [2, 32]);
        // One-hot samples (up to the rounding of `1 + p − p`).
        let z = host(s.z);
        for r in z.chunks(4) {
            assert_eq!(
                r.iter().filter(|x| (**x - 1.0).abs() < 1e-6).count(),
                1,
                "{r:?}"
            );
            assert_eq!(r.iter().filter(|x| x.abs() < 1e-6).count(), 3, "{r:?}");
        }
    }
}
