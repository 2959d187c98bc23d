//! The discriminator: GAIL's `D(s, a) = σ(g(s, a))`, or AIRL's
//! `f(s, a, s′) = g(s, a) + γ (1 − terminated) h(s′) − h(s)` with `D = σ(f − log π(a|s))`.

use crate::config::RewardType;
use rl_training_core::Rng;
use rl_training_core::burn;
use rl_training_core::burn::module::Module;
use rl_training_core::burn::tensor::{Device, Tensor};
use rl_training_core::nn::{Activation, Mlp, MlpConfig};

/// What one batch of transitions gives the discriminator.
#[derive(Debug, Clone)]
pub struct DiscInput {
    /// `[B, obs + act]`: flat observations and flat (one-hot for discrete) actions.
    pub obs_act: Tensor<2>,
    /// `[B, obs]` flat observations (AIRL).
    pub obs: Tensor<2>,
    /// `[B, obs]` flat next observations (AIRL).
    pub next_obs: Tensor<2>,
    /// `[B]` γ·(1 − terminated) (AIRL).
    pub discount: Tensor<1>,
    /// `[B]` log π(a|s) of the current policy (AIRL).
    pub log_pi: Tensor<1>,
}

/// The discriminator's networks.
#[derive(Module, Debug)]
pub struct Discriminator {
    /// `g(s, a)`: GAIL's logit, AIRL's reward term.
    pub g: Mlp,
    /// `h(s)`: AIRL's shaping potential.
    pub h: Option<Mlp>,
}

impl Discriminator {
    /// Networks for `d_obs` flat observation and `d_act` flat action values.
    pub fn new(
        kind: RewardType,
        d_obs: usize,
        d_act: usize,
        hidden: &[usize],
        rng: &mut Rng,
        device: &Device,
    ) -> Self {
        let mlp = |d_input: usize, rng: &mut Rng| {
            MlpConfig {
                d_input,
                hidden: hidden.to_vec(),
                d_output: Some(1),
                activation: Activation::Relu,
                output_gain: 1.0,
                hidden_gain: 1.0,
            }
            .init_torch_default(rng, device)
        };
        let g = mlp(d_obs + d_act, rng);
        let h = (kind == RewardType::Airl).then(|| mlp(d_obs, rng));
        Self { g, h }
    }

    /// `g(s, a)` `[B]`.
    pub fn g_values(&self, obs_act: Tensor<2>) -> Tensor<1> {
        let b = obs_act.dims()[0];
        self.g.forward(obs_act).reshape([b])
    }

    /// AIRL's `f` (GAIL: `g`), `[B]`.
    pub fn f(&self, x: &DiscInput) -> Tensor<1> {
        let g = self.g_values(x.obs_act.clone());
        match &self.h {
            Some(h) => {
                let b = x.obs.dims()[0];
                let hs = h.forward(x.obs.clone()).reshape([b]);
                let hn = h.forward(x.next_obs.clone()).reshape([b]);
                g + hn * x.discount.clone() - hs
            }
            None => g,
        }
    }

    /// The logit of "expert": GAIL `g`, AIRL `f − log π`.
    pub fn logits(&self, x: &DiscInput) -> Tensor<1> {
        match &self.h {
            Some(_) => self.f(x) - x.log_pi.clone(),
            None => self.f(x),
        }
    }
}
