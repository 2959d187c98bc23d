//! Network building blocks: MLPs with SB3's orthogonal initialization, drawn from an RNG the
//! caller owns (never the backend's process-wide RNG).

use crate::rng::Rng;
use burn::module::{Module, Param};
use burn::nn::Linear;
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
            x = self.activation.forward(l.forward(x));
        }
        match &self.output {
            Some(o) => o.forward(x),
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

#[cfg(test)]
mod tests {
    use super::*;

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
