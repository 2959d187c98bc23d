//! The ICM's three networks (RLlib's `IntrinsicCuriosityModel`): a feature net φ, an
//! inverse net (φ(s), φ(s′) → action) and a forward net (φ(s), action → φ(s′)); torch's
//! default initialization, as RLlib's torch module.

use crate::config::IcmConfig;
use rl_training_core::Rng;
use rl_training_core::burn;
use rl_training_core::burn::module::Module;
use rl_training_core::burn::tensor::{Device, Tensor};
use rl_training_core::nn::{Mlp, MlpConfig};

/// The ICM's networks.
#[derive(Module, Debug)]
pub struct IcmModel {
    /// Observation (network input) → φ.
    pub feature_net: Mlp,
    /// [φ(s), φ(s′)] → action logits (discrete parts) or values (Box).
    pub inverse_net: Mlp,
    /// [φ(s), encoded action] → φ̂(s′).
    pub forward_net: Mlp,
}

/// What one forward pass gives.
pub struct IcmOutput {
    /// φ(s) `[B, F]`.
    pub phi: Tensor<2>,
    /// φ(s′) `[B, F]`.
    pub next_phi: Tensor<2>,
    /// φ̂(s′) `[B, F]`.
    pub predicted_next_phi: Tensor<2>,
}

impl IcmModel {
    /// Builds the networks for `obs_dim` inputs and `act_dim` encoded action values (one-hot
    /// discrete parts), drawing weights from `rng`.
    pub fn new(
        cfg: &IcmConfig,
        obs_dim: usize,
        act_dim: usize,
        rng: &mut Rng,
        device: &Device,
    ) -> Self {
        let f = cfg.feature_dim;
        let mlp = |d_input, hidden: &[usize], d_output, activation| MlpConfig {
            d_input,
            hidden: hidden.to_vec(),
            d_output: Some(d_output),
            activation,
            output_gain: 1.0,
            hidden_gain: 1.0,
        };
        let feature = mlp(
            obs_dim,
            &cfg.feature_net_hiddens,
            f,
            cfg.feature_net_activation,
        );
        let inverse = mlp(
            2 * f,
            &cfg.inverse_net_hiddens,
            act_dim,
            cfg.inverse_net_activation,
        );
        let forward = mlp(
            f + act_dim,
            &cfg.forward_net_hiddens,
            f,
            cfg.forward_net_activation,
        );
        Self {
            feature_net: feature.init_torch_default(rng, device),
            inverse_net: inverse.init_torch_default(rng, device),
            forward_net: forward.init_torch_default(rng, device),
        }
    }

    /// φ of both observations (one pass over the stacked rows, as RLlib) and the forward
    /// net's prediction of φ(s′) from φ(s) and the encoded actions.
    pub fn forward(&self, obs: Tensor<2>, next_obs: Tensor<2>, actions: Tensor<2>) -> IcmOutput {
        let b = obs.dims()[0];
        let phis = self
            .feature_net
            .forward(Tensor::cat(vec![obs, next_obs], 0));
        let f = phis.dims()[1];
        let phi = phis.clone().slice([0..b, 0..f]);
        let next_phi = phis.slice([b..2 * b, 0..f]);
        let predicted_next_phi = self
            .forward_net
            .forward(Tensor::cat(vec![phi.clone(), actions], 1));
        IcmOutput {
            phi,
            next_phi,
            predicted_next_phi,
        }
    }

    /// The inverse net's prediction of the action from φ(s) and φ(s′).
    pub fn inverse(&self, phi: Tensor<2>, next_phi: Tensor<2>) -> Tensor<2> {
        self.inverse_net
            .forward(Tensor::cat(vec![phi, next_phi], 1))
    }
}
