//! DreamerV3's world model: an encoder of (symlog) vector observations or a CNN on images,
//! the RSSM, and heads that read the model state `[h, z]`: a decoder back to the (symlog)
//! observation or the (scaled) image, a reward head of two-hot logits (zero-initialized: it
//! starts predicting 0) and a continue head.

use rl_training_core::Rng;
use rl_training_core::burn;
use rl_training_core::burn::module::Module;
use rl_training_core::burn::nn::Linear;
use rl_training_core::burn::tensor::activation::sigmoid;
use rl_training_core::burn::tensor::{Device, Tensor};
use rl_training_model_based::conv::scale_pixels;
use rl_training_model_based::nets::{DenseStack, linear_dreamer, linear_zeros};
use rl_training_model_based::rssm::{Rssm, RssmState};
use rl_training_model_based::twohot::symlog_tensor;
use rl_training_model_based::{
    ConvDecoder, ConvEncoder, ModelDims, ObsShape, SequenceBatch, TwoHot,
};

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
    /// Observation (or, for images, the CNN's flat output) → embedding; no layers after a
    /// CNN.
    pub encoder: DenseStack,
    /// Image observations: the CNN before `encoder`.
    pub conv_encoder: Option<ConvEncoder>,
    /// Sequence model, prior and posterior.
    pub rssm: Rssm,
    /// Vector observations: model state → observation (symlog space when observations are
    /// symlogged).
    pub decoder: Option<Head>,
    /// Image observations: model state → the scaled image.
    pub conv_decoder: Option<ConvDecoder>,
    /// Model state → reward two-hot logits.
    pub reward: Head,
    /// Model state → continue logit.
    pub cont: Head,
    #[module(skip)]
    symlog_obs: bool,
    #[module(skip)]
    obs: ObsShape,
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
    /// A world model of `dims` for `obs` observations (a vector, or a 64×64 image: see
    /// [`ObsShape::check`]) and `act_dim`-wide actions.
    pub fn new(
        dims: &ModelDims,
        obs: ObsShape,
        act_dim: usize,
        symlog_obs: bool,
        rng: &mut Rng,
        device: &Device,
    ) -> Self {
        let u = dims.dense_units;
        let (encoder, conv_encoder, embed_dim) = match obs {
            ObsShape::Vector(d) => (
                DenseStack::new(d, u, dims.dense_layers, rng, device),
                None,
                u,
            ),
            ObsShape::Image { channels, .. } => {
                let cnn = ConvEncoder::new(channels, dims.cnn_multiplier, rng, device);
                let d = cnn.output_dim();
                (DenseStack::new(d, u, 0, rng, device), Some(cnn), d)
            }
        };
        let rssm = Rssm::new(dims, embed_dim, act_dim, rng, device);
        let f = rssm.feature_dim();
        let (decoder, conv_decoder) = match obs {
            ObsShape::Vector(d) => (Some(Head::new(f, d, dims, false, rng, device)), None),
            ObsShape::Image { channels, .. } => {
                let m = dims.cnn_multiplier;
                (None, Some(ConvDecoder::new(f, channels, m, rng, device)))
            }
        };
        Self {
            encoder,
            conv_encoder,
            decoder,
            conv_decoder,
            reward: Head::new(f, TwoHot::dreamer().len(), dims, true, rng, device),
            cont: Head::new(f, 1, dims, false, rng, device),
            rssm,
            symlog_obs: symlog_obs && !obs.is_image(),
            obs,
        }
    }

    /// Flat observations `[n, obs_dim]` as the encoder sees them and the decoder predicts
    /// them: images scaled to [−0.5, 0.5], vectors symlogged if `symlog_obs`.
    pub fn obs_target(&self, obs: Tensor<2>) -> Tensor<2> {
        match (self.obs, self.symlog_obs) {
            (ObsShape::Image { .. }, _) => scale_pixels(obs),
            (_, true) => symlog_tensor(obs),
            (_, false) => obs,
        }
    }

    /// Embeddings `[n, embed_dim]` of observations as [`obs_target`](Self::obs_target) gives them.
    pub fn embed(&self, target: Tensor<2>) -> Tensor<2> {
        match (&self.conv_encoder, self.obs) {
            (Some(cnn), ObsShape::Image { channels, .. }) => {
                self.encoder.forward(cnn.forward(target, channels))
            }
            _ => self.encoder.forward(target),
        }
    }

    /// The decoder's prediction of the observation target from model states `[n, f]`.
    pub fn decode(&self, features: Tensor<2>) -> Tensor<2> {
        match (&self.decoder, &self.conv_decoder) {
            (Some(head), _) => head.forward(features),
            (None, Some(cnn)) => cnn.forward(features),
            (None, None) => unreachable!("a world model has one decoder"),
        }
    }

    /// Runs the RSSM over the batch from fresh states (as RLlib, a sampled window starts
    /// with `is_first` set), drawing posterior samples with `rng`.
    pub fn observe(&self, batch: &SequenceBatch, rng: &mut Rng, device: &Device) -> Posterior {
        let (b, t_len) = (batch.batch_size, batch.length);
        let n = b * t_len;
        let obs = tensor2(&batch.obs, n, batch.obs_dim, device);
        // One pass for the embeddings of all T·B observations.
        let embed = self.embed(self.obs_target(obs));
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
    rl_training_core::batch::tensor2(v.to_vec(), rows, cols, device)
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
        rl_training_model_based::unimix(
            self.net.forward(features),
            rl_training_model_based::categorical::UNIMIX,
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
