//! DreamerV3's image networks (RLlib's `CNNAtari` and `ConvTransposeAtari`): an encoder of
//! four 4×4, stride-2 convolutions from 64×64 down to 4×4, and a decoder of a linear layer up
//! to 4×4 and four stride-2 transposed convolutions back to 64×64. Every hidden stage is
//! LayerNorm over the channels then SiLU; weights come from DreamerV3's initializer
//! (truncated normal of variance `1 / fan_avg`, fans counting the kernel's taps).
//!
//! Observations are `[height, width, channels]` images flattened row-major (Gymnasium's
//! layout), pixels in [0, 255]; the networks see them scaled to [−0.5, 0.5] (the paper
//! code's `x / 255 − 0.5`) and the decoder predicts that scaled image.

use crate::nets::{dreamer_init, linear_dreamer};
use rl_training_core::Rng;
use rl_training_core::Space;
use rl_training_core::burn;
use rl_training_core::burn::module::{Module, Param};
use rl_training_core::burn::nn::conv::{Conv2d, ConvTranspose2d};
use rl_training_core::burn::nn::{LayerNorm, LayerNormConfig, Linear, PaddingConfig2d};
use rl_training_core::burn::tensor::activation::silu;
use rl_training_core::burn::tensor::{Device, Tensor, TensorData};

/// Side of the images the networks take (RLlib's DreamerV3 CNN is for 64×64 frames).
pub const IMAGE_SIDE: usize = 64;
/// Side of the smallest feature map.
const MIN_SIDE: usize = 4;
/// Stride-2 stages between them.
const STAGES: usize = 4;

/// What the world model observes: a flat vector, or an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObsShape {
    /// `dim` numbers.
    Vector(usize),
    /// A `[height, width, channels]` image, pixels in [0, 255].
    Image {
        /// Rows.
        height: usize,
        /// Columns.
        width: usize,
        /// Colour channels (1 or 3).
        channels: usize,
    },
}

impl From<usize> for ObsShape {
    fn from(dim: usize) -> Self {
        ObsShape::Vector(dim)
    }
}

impl ObsShape {
    /// The observations of `space`: an image where it is one
    /// ([`Space::image_shape`]), else its flat vector.
    pub fn of_space(space: &Space) -> Self {
        match space.image_shape() {
            Some([height, width, channels]) => ObsShape::Image {
                height,
                width,
                channels,
            },
            None => ObsShape::Vector(space.flat_dim()),
        }
    }

    /// Numbers per observation.
    pub fn flat_dim(&self) -> usize {
        match *self {
            ObsShape::Vector(d) => d,
            ObsShape::Image {
                height,
                width,
                channels,
            } => height * width * channels,
        }
    }

    /// Whether it is an image.
    pub fn is_image(&self) -> bool {
        matches!(self, ObsShape::Image { .. })
    }

    /// Checks that the CNN can take it: 64×64 images of 1 or 3 channels.
    pub fn check(&self) -> Result<(), String> {
        match *self {
            ObsShape::Image {
                height,
                width,
                channels,
            } if height != IMAGE_SIDE || width != IMAGE_SIDE || !matches!(channels, 1 | 3) => {
                Err(format!(
                    "DreamerV3's CNN takes 64×64 images of 1 or 3 channels, not {height}×{width}×{channels}"
                ))
            }
            _ => Ok(()),
        }
    }
}

/// A `[a, b, k, k]` kernel from DreamerV3's initializer, fans `c_in·k·k` and `c_out·k·k`
/// (a convolution's `[c_out, c_in, k, k]`, a transposed one's `[c_in, c_out, k, k]`).
fn kernel(shape: [usize; 4], rng: &mut Rng, device: &Device) -> Param<Tensor<4>> {
    let [a, b, k, _] = shape;
    let w = dreamer_init(a * b * k * k, a * k * k, b * k * k, rng);
    Param::from_data(TensorData::new(w, shape), device)
}

/// LayerNorm over the channels of `[n, c, h, w]` at every pixel.
fn norm_channels(norm: &LayerNorm, x: Tensor<4>) -> Tensor<4> {
    norm.forward(x.permute([0, 2, 3, 1])).permute([0, 3, 1, 2])
}

fn layer_norm(c: usize, device: &Device) -> LayerNorm {
    LayerNormConfig::new(c).with_epsilon(1e-3).init(device)
}

/// The image encoder: `m, 2m, 4m, 8m` channels, each stage a 4×4 convolution of stride 2
/// ('same' padding, no bias: the norm's shift replaces it) → LayerNorm → SiLU; flattened.
#[derive(Module, Debug)]
pub struct ConvEncoder {
    /// The four convolutions.
    pub convs: Vec<Conv2d>,
    /// A LayerNorm after each.
    pub norms: Vec<LayerNorm>,
}

impl ConvEncoder {
    /// For `channels`-channel 64×64 images, channel multiplier `m`.
    pub fn new(channels: usize, m: usize, rng: &mut Rng, device: &Device) -> Self {
        let (mut convs, mut norms) = (Vec::new(), Vec::new());
        let mut c_in = channels;
        for stage in 0..STAGES {
            let c_out = m << stage;
            convs.push(Conv2d {
                weight: kernel([c_out, c_in, 4, 4], rng, device),
                bias: None,
                stride: [2, 2],
                kernel_size: [4, 4],
                dilation: [1, 1],
                groups: 1,
                padding: PaddingConfig2d::Explicit(1, 1, 1, 1),
            });
            norms.push(layer_norm(c_out, device));
            c_in = c_out;
        }
        Self { convs, norms }
    }

    /// Width of the flat output, `4·4·8m`.
    pub fn output_dim(&self) -> usize {
        let last = self.convs.last().expect("four stages").weight.dims()[0];
        last * MIN_SIDE * MIN_SIDE
    }

    /// `[n, 64·64·C]` scaled images (row-major `[h, w, c]`) → `[n, 4·4·8m]`.
    pub fn forward(&self, x: Tensor<2>, channels: usize) -> Tensor<2> {
        let n = x.dims()[0];
        let mut x = x
            .reshape([n, IMAGE_SIDE, IMAGE_SIDE, channels])
            .permute([0, 3, 1, 2]);
        for (conv, norm) in self.convs.iter().zip(&self.norms) {
            x = silu(norm_channels(norm, conv.forward(x)));
        }
        x.reshape([n, self.output_dim()])
    }
}

/// The image decoder: a linear layer to a `8m × 4 × 4` map, then transposed convolutions
/// (4×4, stride 2, padding 1: each doubles the side) to `4m, 2m, m` channels, each followed
/// by LayerNorm → SiLU, and a last one to the image's channels.
#[derive(Module, Debug)]
pub struct ConvDecoder {
    /// Model state → the smallest feature map.
    pub linear: Linear,
    /// The four transposed convolutions.
    pub convs: Vec<ConvTranspose2d>,
    /// A LayerNorm after each but the last.
    pub norms: Vec<LayerNorm>,
}

impl ConvDecoder {
    /// From `d_in`-wide model states to `channels`-channel 64×64 images, multiplier `m`.
    pub fn new(d_in: usize, channels: usize, m: usize, rng: &mut Rng, device: &Device) -> Self {
        let top = m << (STAGES - 1);
        let linear = linear_dreamer(d_in, top * MIN_SIDE * MIN_SIDE, true, rng, device);
        let (mut convs, mut norms) = (Vec::new(), Vec::new());
        let mut c_in = top;
        for stage in 0..STAGES {
            let last = stage + 1 == STAGES;
            let c_out = if last { channels } else { c_in / 2 };
            convs.push(ConvTranspose2d {
                weight: kernel([c_in, c_out, 4, 4], rng, device),
                bias: last.then(|| {
                    Param::from_data(TensorData::new(vec![0.0f32; c_out], [c_out]), device)
                }),
                stride: [2, 2],
                kernel_size: [4, 4],
                dilation: [1, 1],
                groups: 1,
                padding: [1, 1],
                padding_out: [0, 0],
                channels: [c_in, c_out],
            });
            if !last {
                norms.push(layer_norm(c_out, device));
            }
            c_in = c_out;
        }
        Self {
            linear,
            convs,
            norms,
        }
    }

    /// `[n, d_in]` → `[n, 64·64·C]` scaled images, row-major `[h, w, c]`.
    pub fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        let n = x.dims()[0];
        let top = self.convs[0].channels[0];
        let mut x = self.linear.forward(x).reshape([n, top, MIN_SIDE, MIN_SIDE]);
        for (i, conv) in self.convs.iter().enumerate() {
            x = conv.forward(x);
            if let Some(norm) = self.norms.get(i) {
                x = silu(norm_channels(norm, x));
            }
        }
        let [_, c, h, w] = x.dims();
        x.permute([0, 2, 3, 1]).reshape([n, h * w * c])
    }
}

/// Pixels in [0, 255] as the networks see them, `x / 255 − 0.5`.
pub fn scale_pixels(x: Tensor<2>) -> Tensor<2> {
    x.div_scalar(255.0).sub_scalar(0.5)
}

#[cfg(all(test, feature = "flex"))]
mod tests {
    use super::*;
    use rl_training_core::batch::{host, tensor2};
    use rl_training_core::params::{flat_grads, num_params, to_vec1};

    #[derive(Module, Debug)]
    struct AutoEncoder {
        enc: ConvEncoder,
        dec: ConvDecoder,
    }

    #[test]
    fn encoder_and_decoder_shapes_and_every_weight_gets_a_gradient() {
        let dev = Device::flex().autodiff();
        let mut rng = Rng::seed_from(2);
        let (n, c, m) = (3, 3, 2);
        let enc = ConvEncoder::new(c, m, &mut rng, &dev);
        assert_eq!(enc.output_dim(), 4 * 4 * 8 * m);
        let dec = ConvDecoder::new(enc.output_dim(), c, m, &mut rng, &dev);
        let ae = AutoEncoder { enc, dec };
        let d = IMAGE_SIDE * IMAGE_SIDE * c;
        let pixels: Vec<f32> = (0..n * d).map(|_| rng.below(256) as f32).collect();
        let x = scale_pixels(tensor2(pixels, n, d, &dev));
        let e = ae.enc.forward(x.clone(), c);
        assert_eq!(e.dims(), [n, 4 * 4 * 8 * m]);
        let y = ae.dec.forward(e);
        assert_eq!(y.dims(), [n, d]);
        let g = to_vec1(flat_grads(
            &ae,
            (y - x).powi_scalar(2).sum().backward(),
            &dev,
        ));
        let p = num_params(&ae);
        assert_eq!(g.len(), p);
        assert!(g.iter().all(|v| v.is_finite()));
        // Every weight, norm scale and shift gets one; only a few exact zeros by chance.
        let zero = g.iter().filter(|v| **v == 0.0).count();
        assert!(zero * 100 < p, "{zero} of {p} gradients are 0");
    }

    #[test]
    fn a_stage_halves_the_side_and_the_decoder_doubles_it() {
        let dev = Device::flex();
        let mut rng = Rng::seed_from(0);
        let enc = ConvEncoder::new(1, 1, &mut rng, &dev);
        let x = tensor2(vec![0.1; 64 * 64], 1, 64 * 64, &dev).reshape([1, 1, 64, 64]);
        let sides: Vec<usize> = enc
            .convs
            .iter()
            .scan(x, |x, c| {
                *x = c.forward(x.clone());
                Some(x.dims()[2])
            })
            .collect();
        assert_eq!(sides, vec![32, 16, 8, 4]);
        // The decoder's last layer is linear: a constant image is reachable.
        let dec = ConvDecoder::new(5, 1, 1, &mut rng, &dev);
        let y = host(dec.forward(tensor2(vec![0.0; 5], 1, 5, &dev)));
        assert_eq!(y.len(), 64 * 64);
        assert!(y.iter().all(|v| v.is_finite()));
    }

    #[test]
    fn image_shapes_are_checked() {
        let img = |h, w, c| ObsShape::Image {
            height: h,
            width: w,
            channels: c,
        };
        assert!(img(64, 64, 3).check().is_ok() && img(64, 64, 1).check().is_ok());
        assert!(img(84, 84, 3).check().unwrap_err().contains("84×84×3"));
        assert!(img(64, 64, 4).check().is_err());
        assert_eq!(img(64, 64, 3).flat_dim(), 12288);
        assert_eq!(ObsShape::from(4), ObsShape::Vector(4));
        let space = Space::Box {
            low: vec![0.0; 64 * 64 * 3],
            high: vec![255.0; 64 * 64 * 3],
            shape: vec![64, 64, 3],
        };
        assert_eq!(ObsShape::of_space(&space), img(64, 64, 3));
        assert_eq!(
            ObsShape::of_space(&Space::uniform_box(-1.0, 1.0, &[3])),
            ObsShape::Vector(3)
        );
    }
}
