//! DreamerV3's building blocks: dense layers without bias followed by LayerNorm and SiLU,
//! truncated-normal initialization scaled by the average fan, zero-initialized output
//! layers (rewards and values start at 0), and the GRU cell whose three gates come from one
//! matrix product per step.

use rl_training_core::Rng;
use rl_training_core::burn;
use rl_training_core::burn::module::{Module, Param};
use rl_training_core::burn::nn::{LayerNorm, LayerNormConfig, Linear};
use rl_training_core::burn::tensor::activation::{sigmoid, silu, tanh};
use rl_training_core::burn::tensor::{Device, Tensor, TensorData};

/// A linear layer `[d_in → d_out]` with DreamerV3's initializer: a normal truncated at two
/// standard deviations, of variance `1 / fan_avg` (`fan_avg` = (d_in + d_out) / 2), and a
/// zero bias if `bias`.
pub fn linear_dreamer(
    d_in: usize,
    d_out: usize,
    bias: bool,
    rng: &mut Rng,
    device: &Device,
) -> Linear {
    let w = dreamer_init(d_in * d_out, d_in, d_out, rng);
    Linear {
        weight: Param::from_data(TensorData::new(w, [d_in, d_out]), device),
        bias: bias.then(|| Param::from_data(TensorData::new(vec![0.0f32; d_out], [d_out]), device)),
    }
}

/// `count` weights from DreamerV3's initializer for a layer of fans `fan_in` and `fan_out`:
/// a normal truncated at two standard deviations, of variance `2 / (fan_in + fan_out)`.
pub fn dreamer_init(count: usize, fan_in: usize, fan_out: usize, rng: &mut Rng) -> Vec<f32> {
    // 0.8796… is the standard deviation of a unit normal truncated at ±2.
    let std = (2.0 / (fan_in + fan_out) as f64).sqrt() / 0.879_625_661_034_239_8;
    (0..count)
        .map(|_| {
            loop {
                let z = rng.normal();
                if z.abs() <= 2.0 {
                    break (z * std) as f32;
                }
            }
        })
        .collect()
}

/// A linear layer with zero weights and bias (DreamerV3's reward and critic outputs).
pub fn linear_zeros(d_in: usize, d_out: usize, device: &Device) -> Linear {
    Linear {
        weight: Param::from_data(
            TensorData::new(vec![0.0f32; d_in * d_out], [d_in, d_out]),
            device,
        ),
        bias: Some(Param::from_data(
            TensorData::new(vec![0.0f32; d_out], [d_out]),
            device,
        )),
    }
}

/// `layers` × (Linear without bias → LayerNorm → SiLU), each `units` wide.
#[derive(Module, Debug)]
pub struct DenseStack {
    /// The linear layers (no bias: the norm's shift replaces it).
    pub linears: Vec<Linear>,
    /// One LayerNorm after each.
    pub norms: Vec<LayerNorm>,
}

impl DenseStack {
    /// `layers` blocks of `units` from `d_in` inputs.
    pub fn new(d_in: usize, units: usize, layers: usize, rng: &mut Rng, device: &Device) -> Self {
        let mut linears = Vec::with_capacity(layers);
        let mut norms = Vec::with_capacity(layers);
        let mut d = d_in;
        for _ in 0..layers {
            linears.push(linear_dreamer(d, units, false, rng, device));
            norms.push(LayerNormConfig::new(units).with_epsilon(1e-3).init(device));
            d = units;
        }
        Self { linears, norms }
    }

    /// `[n, d_in] → [n, units]` (the input itself with no layers).
    pub fn forward(&self, mut x: Tensor<2>) -> Tensor<2> {
        for (l, n) in self.linears.iter().zip(&self.norms) {
            x = silu(n.forward(l.forward(x)));
        }
        x
    }
}

/// DreamerV3's GRU cell: `[x, h]·W` gives all three gates in one product, LayerNorm over
/// them, then `r = σ(r̃)`, `c = tanh(r ⊙ c̃)`, `u = σ(ũ − 1)` and
/// `h′ = u ⊙ c + (1 − u) ⊙ h` (the −1 makes a fresh cell keep most of its state).
#[derive(Module, Debug)]
pub struct NormGru {
    /// `[d_in + hidden → 3·hidden]`, no bias; gate blocks in the order reset, candidate,
    /// update.
    pub linear: Linear,
    /// LayerNorm over the `3·hidden` gate inputs.
    pub norm: LayerNorm,
}

impl NormGru {
    /// A cell with `hidden` units on `d_in` inputs.
    pub fn new(d_in: usize, hidden: usize, rng: &mut Rng, device: &Device) -> Self {
        Self {
            linear: linear_dreamer(d_in + hidden, 3 * hidden, false, rng, device),
            norm: LayerNormConfig::new(3 * hidden)
                .with_epsilon(1e-3)
                .init(device),
        }
    }

    /// The state size.
    pub fn hidden(&self) -> usize {
        self.linear.weight.dims()[1] / 3
    }

    /// One step: input `[n, d_in]`, state `[n, hidden]` → new state `[n, hidden]`.
    pub fn forward(&self, x: Tensor<2>, h: Tensor<2>) -> Tensor<2> {
        let gates = self
            .norm
            .forward(self.linear.forward(Tensor::cat(vec![x, h.clone()], 1)));
        let [reset, cand, update]: [Tensor<2>; 3] = gates
            .chunk(3, 1)
            .try_into()
            .unwrap_or_else(|_| unreachable!("3·hidden splits into three"));
        let cand = tanh(sigmoid(reset) * cand);
        let update = sigmoid(update.sub_scalar(1.0));
        update.clone() * cand + (update.neg().add_scalar(1.0)) * h
    }
}

#[cfg(all(test, feature = "flex"))]
mod tests {
    use super::*;
    use rl_training_core::batch::{host, tensor2};
    use rl_training_core::params::{module_tensors, set_module_tensors};

    /// The cell against the formulas in f64 on the host, weights read back from the module.
    #[test]
    fn gru_step_matches_a_float64_reference_in_value_and_gradient() {
        let dev = Device::flex().autodiff();
        let mut rng = Rng::seed_from(3);
        let (d_in, hid, n) = (3usize, 4usize, 2usize);
        let mut cell = NormGru::new(d_in, hid, &mut rng, &dev);
        // A non-trivial norm scale and shift, so they are part of the check.
        let mut w = module_tensors(&cell);
        for (name, (_, data)) in w.0.iter_mut() {
            if name.starts_with("norm") {
                for (i, x) in data.iter_mut().enumerate() {
                    *x = 0.5 + 0.1 * i as f32 - if name.ends_with("beta") { 0.6 } else { 0.0 };
                }
            }
        }
        set_module_tensors(&mut cell, &w, &dev).unwrap();
        let xs: Vec<f32> = (0..n * d_in).map(|i| (i as f32 * 0.37).sin()).collect();
        let hs: Vec<f32> = (0..n * hid)
            .map(|i| (i as f32 * 0.53).cos() * 0.8)
            .collect();
        let x = tensor2(xs.clone(), n, d_in, &dev);
        let h = tensor2(hs.clone(), n, hid, &dev).require_grad();
        let out = cell.forward(x, h.clone());
        let got = host(out.clone());
        let g = out.sum().backward();
        let gh = host(h.grad(&g).unwrap());

        let get = |suffix: &str| -> Vec<f64> {
            let (_, d) =
                w.0.iter()
                    .find(|(k, _)| k.ends_with(suffix))
                    .unwrap()
                    .1
                    .clone();
            d.into_iter().map(f64::from).collect()
        };
        let (wm, gamma, beta) = (get("linear.weight"), get("norm.gamma"), get("norm.beta"));
        let reference = |hs: &[f64]| -> Vec<f64> {
            let mut out = Vec::new();
            for r in 0..n {
                let inp: Vec<f64> = xs[r * d_in..(r + 1) * d_in]
                    .iter()
                    .map(|v| *v as f64)
                    .chain(hs[r * hid..(r + 1) * hid].iter().copied())
                    .collect();
                let z: Vec<f64> = (0..3 * hid)
                    .map(|j| (0..d_in + hid).map(|i| inp[i] * wm[i * 3 * hid + j]).sum())
                    .collect();
                let mean = z.iter().sum::<f64>() / z.len() as f64;
                let var = z.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / z.len() as f64;
                let zn: Vec<f64> = (0..z.len())
                    .map(|j| (z[j] - mean) / (var + 1e-3).sqrt() * gamma[j] + beta[j])
                    .collect();
                let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
                for k in 0..hid {
                    let reset = sig(zn[k]);
                    let cand = (reset * zn[hid + k]).tanh();
                    let update = sig(zn[2 * hid + k] - 1.0);
                    out.push(update * cand + (1.0 - update) * hs[r * hid + k]);
                }
            }
            out
        };
        let h64: Vec<f64> = hs.iter().map(|v| *v as f64).collect();
        let want = reference(&h64);
        for (a, b) in got.iter().zip(&want) {
            assert!((*a as f64 - b).abs() < 1e-5, "{a} vs {b}");
        }
        // d Σ h′ / d h by central differences of the f64 reference.
        for i in 0..n * hid {
            let (mut up, mut down) = (h64.clone(), h64.clone());
            up[i] += 1e-6;
            down[i] -= 1e-6;
            let fd =
                (reference(&up).iter().sum::<f64>() - reference(&down).iter().sum::<f64>()) / 2e-6;
            assert!(
                (gh[i] as f64 - fd).abs() < 1e-4,
                "∂/∂h[{i}]: {} vs {fd}",
                gh[i]
            );
        }
    }

    #[test]
    fn dense_stack_normalizes_then_silu_and_zero_heads_output_zero() {
        let dev = Device::flex();
        let mut rng = Rng::seed_from(1);
        let s = DenseStack::new(5, 8, 2, &mut rng, &dev);
        let y = host(s.forward(tensor2((0..15).map(|i| i as f32).collect(), 3, 5, &dev)));
        assert_eq!(y.len(), 24);
        // SiLU's minimum is about −0.278.
        assert!(y.iter().all(|v| *v > -0.2785 && v.is_finite()), "{y:?}");
        let z = linear_zeros(8, 255, &dev).forward(tensor2(y, 3, 8, &dev));
        assert!(host(z).iter().all(|v| *v == 0.0));
        // The initializer's spread: variance ≈ 1 / fan_avg, nothing beyond two std.
        let l = linear_dreamer(200, 200, false, &mut rng, &dev);
        let w = host(l.weight.val());
        let var = w.iter().map(|v| (*v as f64).powi(2)).sum::<f64>() / w.len() as f64;
        assert!((var * 200.0 - 1.0).abs() < 0.05, "{var}");
        let std = (1.0f64 / 200.0).sqrt() / 0.879_625_661_034_239_8;
        assert!(w.iter().all(|v| (*v as f64).abs() <= 2.0 * std + 1e-6));
    }
}
