//! Network building blocks: MLPs with SB3's orthogonal initialization, drawn from an RNG the
//! caller owns (never the backend's process-wide RNG).

use crate::rng::Rng;
use burn::module::{Module, Param};
use burn::nn::conv::Conv2d;
use burn::nn::{Linear, PaddingConfig2d};
use burn::tensor::{Device, Tensor, TensorData, activation};
use serde::{Deserialize, Serialize};

/// `tanh`, fast on flex (see [`crate::fast_ops`]), burn's builtin on other backends.
pub fn tanh<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    #[cfg(feature = "flex")]
    {
        crate::fast_ops::tanh(x)
    }
    #[cfg(not(feature = "flex"))]
    {
        activation::tanh(x)
    }
}

/// `tanh(layer(x))` when `tanh`, `layer(x)` otherwise: one fused operation on flex (see
/// [`crate::fast_ops::linear`]), burn's `Linear` elsewhere.
pub fn linear_act(layer: &Linear, x: Tensor<2>, tanh: bool) -> Tensor<2> {
    #[cfg(feature = "flex")]
    let x = match crate::fast_ops::linear(layer, x, tanh) {
        Ok(y) => return y,
        Err(x) => x,
    };
    let z = layer.forward(x);
    if tanh { self::tanh(z) } else { z }
}

/// Where one dense layer `act(x·W + b)` keeps its parameters in θ: `W` `[d_in, d_out]`
/// row-major from `w`, `b` `[d_out]` from `b` (burn's `Linear` layout).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DenseSlot {
    /// Offset of the weight.
    pub w: usize,
    /// Offset of the bias.
    pub b: usize,
    /// Input width.
    pub d_in: usize,
    /// Output width.
    pub d_out: usize,
    /// `tanh` after the layer (else the identity).
    pub tanh: bool,
}

impl DenseSlot {
    /// Whether the layer's parameters lie inside a θ of `theta_len` elements.
    pub fn fits(&self, theta_len: usize) -> bool {
        let w_end = self
            .d_in
            .checked_mul(self.d_out)
            .and_then(|n| n.checked_add(self.w));
        let b_end = self.b.checked_add(self.d_out);
        matches!((w_end, b_end), (Some(w), Some(b)) if w <= theta_len && b <= theta_len)
    }
}

/// Whether tensors on `device` take the fused dense operations (`linear_act`, `flat_mlp`):
/// flex. Elsewhere those compose burn's builtin operations.
pub fn fused_available(device: &Device) -> bool {
    #[cfg(feature = "flex")]
    {
        crate::fast_ops::is_flex(device)
    }
    #[cfg(not(feature = "flex"))]
    {
        let _ = device;
        false
    }
}

/// The layers `slots` applied in turn to `x` `[m, d_in]`, their weights and biases read from
/// the flat parameter vector `theta`: one fused operation on flex (`fast_mlp`), burn's
/// operations on slices of `theta` elsewhere. Gradients reach `theta` (and `x`) as usual. `Err`
/// names what does not fit: a layer's input width against what it gets, or a slot that reaches
/// past `theta`.
pub fn flat_mlp(x: Tensor<2>, theta: &Tensor<1>, slots: &[DenseSlot]) -> Result<Tensor<2>, String> {
    let n = theta.dims()[0];
    let mut d = x.dims()[1];
    for (i, s) in slots.iter().enumerate() {
        if s.d_in != d {
            return Err(format!("layer {i}: reads {} features, gets {d}", s.d_in));
        }
        if !s.fits(n) {
            return Err(format!("layer {i}: {s:?} reaches past θ ({n} parameters)"));
        }
        d = s.d_out;
    }
    #[cfg(feature = "flex")]
    let x = match crate::fast_mlp::mlp(x, theta, slots) {
        Ok(y) => return Ok(y),
        Err(x) => x,
    };
    Ok(flat_mlp_composed(x, theta, slots))
}

/// [`flat_mlp`] from burn's operations on slices of `theta` (any backend; slots checked).
pub(crate) fn flat_mlp_composed(x: Tensor<2>, theta: &Tensor<1>, slots: &[DenseSlot]) -> Tensor<2> {
    slots.iter().fold(x, |a, s| {
        let w = theta
            .clone()
            .narrow(0, s.w, s.d_in * s.d_out)
            .reshape([s.d_in, s.d_out]);
        let b = theta.clone().narrow(0, s.b, s.d_out).reshape([1, s.d_out]);
        let z = a.matmul(w) + b;
        if s.tanh { tanh(z) } else { z }
    })
}

/// Hidden-layer activation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Activation {
    /// `tanh` (SB3's default for on-policy algorithms).
    #[default]
    Tanh,
    /// `max(0, x)`.
    Relu,
    /// `x * sigmoid(x)`.
    Silu,
    /// Exponential linear unit (alpha 1).
    Elu,
}

impl Activation {
    /// Applies the activation.
    pub fn forward<const D: usize>(self, x: Tensor<D>) -> Tensor<D> {
        match self {
            Activation::Tanh => tanh(x),
            Activation::Relu => activation::relu(x),
            Activation::Silu => activation::silu(x),
            Activation::Elu => activation::elu(x, 1.0),
        }
    }
    /// Forward-mode derivative: the tangent of the output for the tangent `dpre` of the input
    /// `pre` (`out` = the activation of `pre`, reused where the derivative needs it).
    pub fn jvp<const D: usize>(self, pre: Tensor<D>, out: Tensor<D>, dpre: Tensor<D>) -> Tensor<D> {
        match self {
            Activation::Tanh => dpre * (out.clone() * out).neg().add_scalar(1.0),
            Activation::Relu => dpre * pre.greater_elem(0.0).float(),
            Activation::Silu => {
                // σ(x) (1 + x (1 − σ(x)))
                let s = activation::sigmoid(pre.clone());
                dpre * (s.clone() * (pre * s.neg().add_scalar(1.0)).add_scalar(1.0))
            }
            Activation::Elu => {
                // 1 for x > 0, else elu(x) + 1
                let pos = pre.greater_elem(0.0).float();
                dpre * (pos.clone() + pos.neg().add_scalar(1.0) * out.add_scalar(1.0))
            }
        }
    }
    /// The orthogonal-init gain SB3 uses for hidden layers (`sqrt(2)`).
    pub fn hidden_gain(self) -> f64 {
        std::f64::consts::SQRT_2
    }
}

/// An orthogonal matrix of shape `[rows, cols]` scaled by `gain` (torch's `orthogonal_`:
/// QR of a standard normal matrix, signs fixed by the diagonal of R).
pub fn orthogonal(rows: usize, cols: usize, gain: f64, rng: &mut Rng) -> Vec<f32> {
    let (r, c) = if rows < cols {
        (cols, rows)
    } else {
        (rows, cols)
    };
    // r >= c: Gram-Schmidt (modified) on the c columns of an r×c normal matrix.
    let mut a: Vec<Vec<f64>> = (0..c)
        .map(|_| (0..r).map(|_| rng.normal()).collect())
        .collect();
    for j in 0..c {
        for k in 0..j {
            let dot: f64 = (0..r).map(|i| a[j][i] * a[k][i]).sum();
            for i in 0..r {
                a[j][i] -= dot * a[k][i];
            }
        }
        let norm = (0..r)
            .map(|i| a[j][i] * a[j][i])
            .sum::<f64>()
            .sqrt()
            .max(1e-12);
        for i in 0..r {
            a[j][i] /= norm;
        }
    }
    let mut out = vec![0.0f32; rows * cols];
    for i in 0..rows {
        for j in 0..cols {
            // Column-orthonormal q (r×c); transpose when rows < cols.
            let v = if rows >= cols { a[j][i] } else { a[i][j] };
            out[i * cols + j] = (gain * v) as f32;
        }
    }
    out
}

/// A linear layer `[d_in → d_out]` with orthogonal weights (`gain`) and zero bias.
pub fn linear_orthogonal(
    d_in: usize,
    d_out: usize,
    gain: f64,
    rng: &mut Rng,
    device: &Device,
) -> Linear {
    let w = orthogonal(d_in, d_out, gain, rng);
    Linear {
        weight: Param::from_data(TensorData::new(w, [d_in, d_out]), device),
        bias: Some(Param::from_data(
            TensorData::new(vec![0.0f32; d_out], [d_out]),
            device,
        )),
    }
}

/// A linear layer with torch's default `nn.Linear` init (weights and bias uniform in
/// `±1/√d_in`), what SB3's off-policy networks use.
pub fn linear_torch_default(d_in: usize, d_out: usize, rng: &mut Rng, device: &Device) -> Linear {
    let bound = 1.0 / (d_in as f64).sqrt();
    let mut u = |n: usize| -> Vec<f32> {
        (0..n)
            .map(|_| rng.uniform_range(-bound, bound) as f32)
            .collect()
    };
    let (w, b) = (u(d_in * d_out), u(d_out));
    Linear {
        weight: Param::from_data(TensorData::new(w, [d_in, d_out]), device),
        bias: Some(Param::from_data(TensorData::new(b, [d_out]), device)),
    }
}

/// Configuration of an [`Mlp`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MlpConfig {
    /// Input size.
    pub d_input: usize,
    /// Hidden layer sizes.
    pub hidden: Vec<usize>,
    /// Output size, or `None` for a trunk that ends with the last hidden activation.
    pub d_output: Option<usize>,
    /// Hidden activation.
    pub activation: Activation,
    /// Orthogonal gain of the output layer (SB3: 0.01 policy, 1 value).
    pub output_gain: f64,
    /// Orthogonal gain of the hidden layers (SB3: `sqrt(2)`).
    pub hidden_gain: f64,
}

impl MlpConfig {
    /// Builds the MLP, drawing its weights from `rng`.
    pub fn init(&self, rng: &mut Rng, device: &Device) -> Mlp {
        let mut layers = Vec::new();
        let mut d = self.d_input;
        for &h in &self.hidden {
            layers.push(linear_orthogonal(d, h, self.hidden_gain, rng, device));
            d = h;
        }
        let output = self
            .d_output
            .map(|o| linear_orthogonal(d, o, self.output_gain, rng, device));
        Mlp {
            layers,
            output,
            activation: self.activation,
        }
    }
}

impl MlpConfig {
    /// Builds the MLP with torch's default init ([`linear_torch_default`]; the gains are
    /// ignored), as SB3's DQN/SAC/TD3 networks.
    pub fn init_torch_default(&self, rng: &mut Rng, device: &Device) -> Mlp {
        let mut layers = Vec::new();
        let mut d = self.d_input;
        for &h in &self.hidden {
            layers.push(linear_torch_default(d, h, rng, device));
            d = h;
        }
        let output = self
            .d_output
            .map(|o| linear_torch_default(d, o, rng, device));
        Mlp {
            layers,
            output,
            activation: self.activation,
        }
    }
}

/// A multi-layer perceptron.
#[derive(Module, Debug)]
pub struct Mlp {
    /// Hidden layers.
    pub layers: Vec<Linear>,
    /// Output layer, if any.
    pub output: Option<Linear>,
    /// Hidden activation.
    #[module(skip)]
    pub activation: Activation,
}

impl Mlp {
    /// Forward pass on `[batch, d_input]`.
    pub fn forward(&self, mut x: Tensor<2>) -> Tensor<2> {
        for l in &self.layers {
            x = match self.activation {
                Activation::Tanh => linear_act(l, x, true),
                a => a.forward(linear_act(l, x, false)),
            };
        }
        match &self.output {
            Some(o) => linear_act(o, x, false),
            None => x,
        }
    }
    /// Size of the output.
    pub fn d_output(&self) -> usize {
        match (&self.output, self.layers.last()) {
            (Some(o), _) => o.weight.dims()[1],
            (None, Some(l)) => l.weight.dims()[1],
            (None, None) => 0,
        }
    }
}

/// A conv layer `[c_in → c_out, k×k, stride]` with orthogonal weights (`gain`, over the
/// flattened `[c_out, c_in·k·k]` matrix as torch) and zero bias.
pub fn conv2d_orthogonal(
    c_in: usize,
    c_out: usize,
    k: usize,
    stride: usize,
    gain: f64,
    rng: &mut Rng,
    device: &Device,
) -> Conv2d {
    let fan = c_in * k * k;
    // orthogonal(rows = fan, cols = c_out) gives W^T; transpose into [c_out, fan].
    let wt = orthogonal(fan, c_out, gain, rng);
    let mut w = vec![0.0f32; c_out * fan];
    for i in 0..fan {
        for o in 0..c_out {
            w[o * fan + i] = wt[i * c_out + o];
        }
    }
    Conv2d {
        weight: Param::from_data(TensorData::new(w, [c_out, c_in, k, k]), device),
        bias: Some(Param::from_data(
            TensorData::new(vec![0.0f32; c_out], [c_out]),
            device,
        )),
        stride: [stride, stride],
        kernel_size: [k, k],
        dilation: [1, 1],
        groups: 1,
        padding: PaddingConfig2d::Valid,
    }
}

/// The DQN "Nature" CNN (Mnih et al. 2015; SB3's `NatureCNN`): three ReLU conv layers
/// (32 8×8/4, 64 4×4/2, 64 3×3/1), flatten, a linear layer to `features_dim` with ReLU. Pixel
/// inputs in `[0, 255]` are scaled to `[0, 1]`.
#[derive(Module, Debug)]
pub struct NatureCnn {
    /// Conv layers.
    pub convs: Vec<Conv2d>,
    /// Final linear layer.
    pub linear: Linear,
}

impl NatureCnn {
    /// For `[channels, height, width]` images, orthogonal init (gain `sqrt(2)`) from `rng`.
    pub fn new(
        channels: usize,
        height: usize,
        width: usize,
        features_dim: usize,
        rng: &mut Rng,
        device: &Device,
    ) -> Result<Self, String> {
        let g = std::f64::consts::SQRT_2;
        let specs = [(channels, 32, 8, 4), (32, 64, 4, 2), (64, 64, 3, 1)];
        let (mut h, mut w) = (height, width);
        let mut convs = Vec::new();
        for (ci, co, k, st) in specs {
            if h < k || w < k {
                return Err(format!(
                    "NatureCNN: a {height}×{width} image is too small (needs at least 36×36)"
                ));
            }
            h = (h - k) / st + 1;
            w = (w - k) / st + 1;
            convs.push(conv2d_orthogonal(ci, co, k, st, g, rng, device));
        }
        let linear = linear_orthogonal(64 * h * w, features_dim, g, rng, device);
        Ok(Self { convs, linear })
    }

    /// `[B, C, H, W]` pixels → `[B, features_dim]`.
    pub fn forward(&self, x: Tensor<4>) -> Tensor<2> {
        let mut x = x.div_scalar(255.0);
        for c in &self.convs {
            x = activation::relu(c.forward(x));
        }
        let [b, c, h, w] = x.dims();
        activation::relu(self.linear.forward(x.reshape([b, c * h * w])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "flex")]
    #[test]
    fn nature_cnn_shapes_and_gradients() {
        let device = Device::flex().autodiff();
        let mut rng = Rng::seed_from(0);
        let cnn = NatureCnn::new(4, 84, 84, 512, &mut rng, &device).unwrap();
        // 84 -> 20 -> 9 -> 7: the linear layer sees 64·7·7 = 3136 features, as in the paper.
        assert_eq!(cnn.linear.weight.dims(), [3136, 512]);
        let pixels: Vec<f32> = (0..2 * 4 * 84 * 84)
            .map(|_| rng.below(256) as f32)
            .collect();
        let x = Tensor::<4>::from_data(TensorData::new(pixels, [2, 4, 84, 84]), &device);
        let y = cnn.forward(x);
        assert_eq!(y.dims(), [2, 512]);
        let grads = y.sum().backward();
        let g = crate::params::to_vec1(crate::params::flat_grads(&cnn, grads, &device));
        assert_eq!(g.len(), crate::params::num_params(&cnn));
        let mut o = 0;
        for p in crate::params::param_infos(&cnn) {
            let n = p.numel();
            assert!(
                g[o..o + n].iter().any(|&v| v != 0.0),
                "no gradient reaches {}",
                p.path
            );
            o += n;
        }
        assert!(NatureCnn::new(1, 30, 30, 8, &mut rng, &device).is_err());
    }

    #[test]
    fn orthogonal_rows_or_columns_are_orthonormal() {
        let mut rng = Rng::seed_from(0);
        for (r, c) in [(8, 3), (3, 8), (5, 5)] {
            let w = orthogonal(r, c, 2.0, &mut rng);
            // The smaller dimension's vectors are orthonormal (times gain).
            let (n, m) = if r >= c { (c, r) } else { (r, c) };
            for a in 0..n {
                for b in 0..n {
                    let dot: f64 = (0..m)
                        .map(|k| {
                            let (x, y) = if r >= c {
                                (w[k * c + a], w[k * c + b])
                            } else {
                                (w[a * c + k], w[b * c + k])
                            };
                            x as f64 * y as f64
                        })
                        .sum();
                    let want = if a == b { 4.0 } else { 0.0 };
                    assert!((dot - want).abs() < 1e-5, "{r}x{c} ({a},{b}) {dot}");
                }
            }
        }
    }
}
