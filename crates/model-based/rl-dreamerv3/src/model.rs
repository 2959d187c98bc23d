//! DreamerV3's world model for vector observations: an encoder of (symlog) observations, the
//! RSSM, and heads that read the model state `[h, z]`: a decoder back to the (symlog)
//! observation, a reward head of two-hot logits (zero-initialized: it starts predicting 0)
//! and a continue head.

use rl_core::Rng;
use rl_core::burn;
use rl_core::burn::module::Module;
use rl_core::burn::nn::Linear;
use rl_core::burn::tensor::activation::sigmoid;
use rl_core::burn::tensor::{Device, Tensor};
use rl_model_based::nets::{DenseStack, linear_dreamer, linear_zeros};
use rl_model_based::rssm::{Rssm, RssmState};
use rl_model_based::twohot::symlog_tensor;
use rl_model_based::{ModelDims, SequenceBatch, TwoHot};

/// An MLP head: a [`DenseStack`] then one linear output.
#[derive(Module, Debug)]
pub struct Head {
    /// Hidden blocks.
    pub trunk: DenseStack,
    /// Output layer.
    pub out: Linear,
}

impl Head {
    /// `d_in → dims.dense_layers × dense_units → d_out`; a zero output layer if `zero_out`.
    pub fn new(
        d_in: usize,
        d_out: usize,
        dims: &ModelDims,
        zero_out: bool,
        rng: &mut Rng,
        device: &Device,
    ) -> Self {
        let u = dims.dense_units;
        let trunk = DenseStack::new(d_in, u, dims.dense_layers, rng, device);
        let out = match zero_out {
            true => linear_zeros(u, d_out, device),
            false => linear_dreamer(u, d_out, true, rng, device),
        };
        Self { trunk, out }
    }

    /// `[n, d_in] → [n, d_out]`.
    pub fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        self.out.forward(self.trunk.forward(x))
    }
}

/// The world model's networks.
#[derive(Module, Debug)]
pub struct WorldModel {
    /// Observation → embedding.
    pub encoder: DenseStack,
    /// Sequence model, prior and posterior.
    pub rssm: Rssm,
    /// Model state → observation (symlog space when observations are symlogged).
    pub decoder: Head,
    /// Model state → reward two-hot logits.
    pub reward: Head,
    /// Model state → continue logit.
    pub cont: Head,
    #[module(skip)]
    symlog_obs: bool,
}

/// What observing a [`SequenceBatch`] gives, every tensor time-major (`t·B + b` rows).
pub struct Posterior {
    /// Model states `[T·B, feature_dim]`.
    pub features: Tensor<2>,
    /// Posterior probabilities `[T·B, C, K]`.
    pub posterior: Tensor<3>,
    /// Prior probabilities `[T·B, C, K]`.
    pub prior: Tensor<3>,
    /// Every step's states, `h` `[T·B, gru_units]` and `z` `[T·B, C, K]`.
    pub states: RssmState,
}

impl WorldModel {
    /// A world model of `dims` for `obs_dim`-wide observations and `act_dim`-wide actions.
    pub fn new(
        dims: &ModelDims,
        obs_dim: usize,
        act_dim: usize,
        symlog_obs: bool,
        rng: &mut Rng,
        device: &Device,
    ) -> Self {
        let u = dims.dense_units;
        let encoder = DenseStack::new(obs_dim, u, dims.dense_layers, rng, device);
        let rssm = Rssm::new(dims, u, act_dim, rng, device);
        let f = rssm.feature_dim();
        Self {
            encoder,
            decoder: Head::new(f, obs_dim, dims, false, rng, device),
            reward: Head::new(f, TwoHot::dreamer().len(), dims, true, rng, device),
            cont: Head::new(f, 1, dims, false, rng, device),
            rssm,
            symlog_obs,
        }
    }

    /// Observations as the encoder sees them and the decoder predicts them.
    pub fn obs_target(&self, obs: Tensor<2>) -> Tensor<2> {
        match self.symlog_obs {
            true => symlog_tensor(obs),
            false => obs,
        }
    }

    /// Runs the RSSM over the batch from fresh states (as RLlib, a sampled window starts
    /// with `is_first` set), drawing posterior samples with `rng`.
    pub fn observe(&self, batch: &SequenceBatch, rng: &mut Rng, device: &Device) -> Posterior {
        let (b, t_len) = (batch.batch_size, batch.length);
        let n = b * t_len;
        let obs = tensor2(&batch.obs, n, batch.obs_dim, device);
        // One product for the embeddings of all T·B observations.
        let embed = self.encoder.forward(self.obs_target(obs));
        let first = tensor2(&batch.is_first, n, 1, device);
        let actions = tensor2(&batch.actions, n, batch.act_dim, device);
        let mut state = self.rssm.initial(b, device);
        let mut prev_action = Tensor::<2>::zeros([b, batch.act_dim], device);
        let (mut hs, mut zs, mut posts, mut priors) = (vec![], vec![], vec![], vec![]);
        for t in 0..t_len {
            let o = self.rssm.observe(
                state,
                prev_action,
                embed.clone().narrow(0, t * b, b),
                first.clone().narrow(0, t * b, b),
                rng,
            );
            hs.push(o.state.h.clone());
            zs.push(o.state.z.clone());
            posts.push(o.posterior);
            priors.push(o.prior);
            state = o.state;
            prev_action = actions.clone().narrow(0, t * b, b);
        }
        let states = RssmState {
            h: Tensor::cat(hs, 0),
            z: Tensor::cat(zs, 0),
        };
        Posterior {
            features: states.features(),
            posterior: Tensor::cat(posts, 0),
            prior: Tensor::cat(priors, 0),
            states,
        }
    }
}

/// A host slice as a `[rows, cols]` tensor.
pub(crate) fn tensor2(v: &[f32], rows: usize, cols: usize, device: &Device) -> Tensor<2> {
    rl_core::batch::tensor2(v.to_vec(), rows, cols, device)
}

/// The actor: model state → a policy. Discrete actions: logits, the policy mixing 1% of the
/// uniform into its softmax, as every DreamerV3 categorical. Box actions (scaled to
/// [−1, 1]): a normal with mean `tanh(μ̃)` and standard deviation `0.9·σ(s̃ + 2) + 0.1`, so in
/// [0.1, 1] (RLlib's).
#[derive(Module, Debug)]
pub struct Actor {
    /// Model state → logits, or means and standard-deviation inputs.
    pub net: Head,
    #[module(skip)]
    continuous: bool,
}

impl Actor {
    /// An actor on `feature_dim`-wide model states for `action_dim` discrete actions, or
    /// `action_dim` Box dimensions when `continuous`.
    pub fn new(
        feature_dim: usize,
        action_dim: usize,
        continuous: bool,
        dims: &ModelDims,
        rng: &mut Rng,
        device: &Device,
    ) -> Self {
        let outputs = if continuous {
            2 * action_dim
        } else {
            action_dim
        };
        Self {
            net: Head::new(feature_dim, outputs, dims, false, rng, device),
            continuous,
        }
    }

    /// Box actions (a normal policy) rather than discrete ones.
    pub fn is_continuous(&self) -> bool {
        self.continuous
    }

    /// Discrete action probabilities `[n, n_actions]`.
    pub fn probs(&self, features: Tensor<2>) -> Tensor<2> {
        rl_model_based::unimix(
            self.net.forward(features),
            rl_model_based::categorical::UNIMIX,
        )
    }

    /// Box policy: means and standard deviations, `[n, action_dim]` each.
    pub fn normal(&self, features: Tensor<2>) -> (Tensor<2>, Tensor<2>) {
        let out = self.net.forward(features);
        let a = out.dims()[1] / 2;
        let mean = out.clone().narrow(1, 0, a).tanh();
        let std = sigmoid(out.narrow(1, a, a).add_scalar(2.0))
            .mul_scalar(0.9)
            .add_scalar(0.1);
        (mean, std)
    }
}

/// The critic: model state → two-hot value logits (zero-initialized output: values start at
/// 0).
#[derive(Module, Debug)]
pub struct Critic {
    /// Model state → 255 logits.
    pub net: Head,
}

impl Critic {
    /// A critic on `feature_dim`-wide model states.
    pub fn new(feature_dim: usize, dims: &ModelDims, rng: &mut Rng, device: &Device) -> Self {
        Self {
            net: Head::new(
                feature_dim,
                TwoHot::dreamer().len(),
                dims,
                true,
                rng,
                device,
            ),
        }
    }

    /// Value logits `[n, 255]`.
    pub fn logits(&self, features: Tensor<2>) -> Tensor<2> {
        self.net.forward(features)
    }
}
