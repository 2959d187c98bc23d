//! A fused LSTM for burn's `Lstm` modules (same parameters, same checkpoints, same results).
//!
//! burn's `Lstm::forward` runs every time step as eight gate products (four on the input, four
//! on the hidden state, each with its bias add), four activations and five elementwise ops:
//! about thirty autodiff nodes per step, each a few microseconds of bookkeeping for tensors of a
//! few thousand floats. [`lstm_forward`] runs the same LSTM as
//! - the input products of all time steps in one matrix product (`[T·n, d] · [d, 4H]`),
//! - one `[n, H] · [H, 4H]` product per step for the four hidden-state gates,
//! - the gate math (`σ`, `tanh`, the cell and hidden updates) in one op with a hand-written
//!   backward ([`lstm_cell`]: on flex, one loop over the row; elsewhere burn's ops),
//!
//! so a step is four nodes. The gate blocks are concatenated from the module's `GateController`s
//! on every call (two small concatenations per sequence), so the module, its initialization and
//! its checkpoints stay burn's.

use crate::fast_ops::tanh_approx;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, AutodiffBackend, Backend, Dispatch, Flex, backend_extension};
use burn::nn::activation::Activation;
use burn::nn::{Lstm, LstmState};
use burn::tensor::activation::{sigmoid, tanh};
use burn::tensor::{DType, Device, Shape, Tensor, TensorData};
use std::borrow::Cow;

/// `σ(x) = (1 + tanh(x/2)) / 2` with the fast `tanh` (within 3e-7 of the exact value).
#[inline(always)]
fn sigmoid_approx(x: f32) -> f32 {
    0.5 + 0.5 * tanh_approx(0.5 * x)
}

/// The fused LSTM gate op.
#[backend_extension(Flex, Autodiff)]
pub trait LstmCellBackend: Backend {
    /// One step's gate math: input-side pre-activations `xz` and hidden-side ones `hz` (both
    /// `[n, 4H]`, gate blocks input, forget, cell, output) and the previous `[h, c]` (`[n, 2H]`)
    /// give the new `[h', c']` (`[n, 2H]`).
    fn lstm_cell(
        xz: FloatTensor<Self>,
        hz: FloatTensor<Self>,
        hc: FloatTensor<Self>,
    ) -> FloatTensor<Self>;
    /// The gradients of [`lstm_cell`](Self::lstm_cell) for the output gradient `grad`: the one of
    /// the pre-activations (`xz`'s and `hz`'s, equal) and the one of the previous `[h, c]` (zero
    /// for `h`, which only enters through `hz`).
    fn lstm_cell_backward(
        xz: FloatTensor<Self>,
        hz: FloatTensor<Self>,
        hc: FloatTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);
}

/// The f32 values of a flex tensor in row-major order (borrowed when contiguous).
fn values(t: &FloatTensor<Flex>) -> Cow<'_, [f32]> {
    if let Some(s) = t.as_slice::<f32>() {
        return Cow::Borrowed(s);
    }
    // Another layout or dtype (not reached from `lstm_cell`, which takes this path for f32).
    let c = <Flex as burn::backend::ops::FloatTensorOps<Flex>>::float_cast(
        t.to_contiguous(),
        burn::tensor::FloatDType::F32,
    );
    Cow::Owned(c.as_slice::<f32>().map(<[f32]>::to_vec).unwrap_or_default())
}

fn tensor(v: Vec<f32>, shape: [usize; 2]) -> FloatTensor<Flex> {
    FloatTensor::<Flex>::from_data(TensorData::new(v, Shape::new(shape)))
}

/// The activated gates of one unit: `(i, f, g, o)`.
#[inline(always)]
fn gates(xz: &[f32], hz: &[f32], h: usize, j: usize) -> (f32, f32, f32, f32) {
    (
        sigmoid_approx(xz[j] + hz[j]),
        sigmoid_approx(xz[h + j] + hz[h + j]),
        tanh_approx(xz[2 * h + j] + hz[2 * h + j]),
        sigmoid_approx(xz[3 * h + j] + hz[3 * h + j]),
    )
}

impl LstmCellBackend for Flex {
    fn lstm_cell(
        xz: FloatTensor<Self>,
        hz: FloatTensor<Self>,
        hc: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        let dims = hc.layout().shape().clone();
        let (n, h) = (dims[0], dims[1] / 2);
        let (xz, hz, hc) = (values(&xz), values(&hz), values(&hc));
        let mut out = vec![0f32; n * 2 * h];
        for r in 0..n {
            let (xz, hz) = (&xz[r * 4 * h..][..4 * h], &hz[r * 4 * h..][..4 * h]);
            let c_prev = &hc[r * 2 * h + h..][..h];
            let (ho, co) = out[r * 2 * h..][..2 * h].split_at_mut(h);
            for j in 0..h {
                let (i, f, g, o) = gates(xz, hz, h, j);
                let c = f * c_prev[j] + i * g;
                co[j] = c;
                ho[j] = o * tanh_approx(c);
            }
        }
        tensor(out, [n, 2 * h])
    }

    fn lstm_cell_backward(
        xz: FloatTensor<Self>,
        hz: FloatTensor<Self>,
        hc: FloatTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let dims = hc.layout().shape().clone();
        let (n, h) = (dims[0], dims[1] / 2);
        let (xz, hz, hc, grad) = (values(&xz), values(&hz), values(&hc), values(&grad));
        let mut dz = vec![0f32; n * 4 * h];
        let mut dhc = vec![0f32; n * 2 * h];
        for r in 0..n {
            let (xz, hz) = (&xz[r * 4 * h..][..4 * h], &hz[r * 4 * h..][..4 * h]);
            let c_prev = &hc[r * 2 * h + h..][..h];
            let (gh, gc) = grad[r * 2 * h..][..2 * h].split_at(h);
            let dz = &mut dz[r * 4 * h..][..4 * h];
            let dc_prev = &mut dhc[r * 2 * h + h..][..h];
            for j in 0..h {
                let (i, f, g, o) = gates(xz, hz, h, j);
                let tc = tanh_approx(f * c_prev[j] + i * g);
                // The cell's gradient: through h' = o·tanh(c') and directly through c'.
                let dc = gc[j] + gh[j] * o * (1.0 - tc * tc);
                dz[j] = dc * g * i * (1.0 - i);
                dz[h + j] = dc * c_prev[j] * f * (1.0 - f);
                dz[2 * h + j] = dc * i * (1.0 - g * g);
                dz[3 * h + j] = gh[j] * tc * o * (1.0 - o);
                dc_prev[j] = dc * f;
            }
        }
        (tensor(dz, [n, 4 * h]), tensor(dhc, [n, 2 * h]))
    }
}

#[derive(Debug)]
struct LstmCellGrad;

impl<B: Backend + LstmCellBackend> Backward<B, 3> for LstmCellGrad {
    type State = (FloatTensor<B>, FloatTensor<B>, FloatTensor<B>);

    fn backward(
        self,
        ops: Ops<Self::State, 3>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        let grad = grads.consume::<B>(&ops.node);
        let (xz, hz, hc) = ops.state;
        let (dz, dhc) = B::lstm_cell_backward(xz, hz, hc, grad);
        let [p_xz, p_hz, p_hc] = ops.parents;
        if let Some(p) = p_xz {
            grads.register::<B>(p.id, dz.clone());
        }
        if let Some(p) = p_hz {
            grads.register::<B>(p.id, dz);
        }
        if let Some(p) = p_hc {
            grads.register::<B>(p.id, dhc);
        }
    }
}

impl<B: Backend + LstmCellBackend, C: CheckpointStrategy> LstmCellBackend for Autodiff<B, C> {
    fn lstm_cell(
        xz: FloatTensor<Self>,
        hz: FloatTensor<Self>,
        hc: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        match LstmCellGrad
            .prepare::<C>([xz.node(), hz.node(), hc.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let (xz, hz, hc) = (
                    xz.into_primitive(),
                    hz.into_primitive(),
                    hc.into_primitive(),
                );
                let out = B::lstm_cell(xz.clone(), hz.clone(), hc.clone());
                prep.finish((xz, hz, hc), out)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::lstm_cell(
                xz.into_primitive(),
                hz.into_primitive(),
                hc.into_primitive(),
            )),
        }
    }

    fn lstm_cell_backward(
        xz: FloatTensor<Self>,
        hz: FloatTensor<Self>,
        hc: FloatTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        // Only called inside a backward pass, on the inner backend; here it is a constant.
        let (dz, dhc) = B::lstm_cell_backward(
            xz.into_primitive(),
            hz.into_primitive(),
            hc.into_primitive(),
            grad.into_primitive(),
        );
        (Self::from_inner(dz), Self::from_inner(dhc))
    }
}

/// The gate math with burn's ops (any backend, any dtype; its own autodiff backward).
fn lstm_cell_composed(xz: Tensor<2>, hz: Tensor<2>, hc: Tensor<2>) -> Tensor<2> {
    let h = hc.dims()[1] / 2;
    let z = xz + hz;
    let gate = |k: usize| z.clone().narrow(1, k * h, h);
    let (i, f, g, o) = (
        sigmoid(gate(0)),
        sigmoid(gate(1)),
        tanh(gate(2)),
        sigmoid(gate(3)),
    );
    let c = f * hc.narrow(1, h, h) + i * g;
    let h_new = o * tanh(c.clone());
    Tensor::cat(vec![h_new, c], 1)
}

fn on_flex_f32(t: &Tensor<2>) -> bool {
    t.dtype() == DType::F32 && t.device().inner() == Device::flex()
}

/// One LSTM step's gate math, `[h', c']` (`[n, 2H]`) from the input- and hidden-side
/// pre-activations `xz`, `hz` (`[n, 4H]`, gate blocks input, forget, cell, output, biases
/// included) and the previous `[h, c]`: `c' = σ(f)·c + σ(i)·tanh(g)`, `h' = σ(o)·tanh(c')`.
/// On flex one fused op with its own backward; elsewhere burn's ops.
pub fn lstm_cell(xz: Tensor<2>, hz: Tensor<2>, hc: Tensor<2>) -> Tensor<2> {
    if on_flex_f32(&hc) && on_flex_f32(&xz) && on_flex_f32(&hz) {
        Tensor::from_dispatch(<Dispatch as LstmCellBackend>::lstm_cell(
            xz.into_dispatch(),
            hz.into_dispatch(),
            hc.into_dispatch(),
        ))
    } else {
        lstm_cell_composed(xz, hz, hc)
    }
}

/// Whether [`lstm_forward`] runs `lstm` fused: burn's default LSTM (batch-first, forward in
/// time, σ gates and tanh cell/hidden activations, a separate forget gate, no cell clipping).
pub fn fusable(lstm: &Lstm) -> bool {
    lstm.batch_first
        && !lstm.reverse
        && lstm.clip.is_none()
        && !lstm.input_forget
        && lstm.forget_gate.is_some()
        && matches!(lstm.gate_activation, Activation::Sigmoid(_))
        && matches!(lstm.cell_activation, Activation::Tanh(_))
        && matches!(lstm.hidden_activation, Activation::Tanh(_))
}

/// The LSTM's gate weights as fused blocks: `([d, 4H] input weights, [H, 4H] hidden weights,
/// [4H] summed biases)`, gate order input, forget, cell, output.
fn fused_weights(lstm: &Lstm) -> Option<(Tensor<2>, Tensor<2>, Option<Tensor<1>>)> {
    let gates = [
        &lstm.input_gate,
        lstm.forget_gate.as_ref()?,
        &lstm.cell_gate,
        &lstm.output_gate,
    ];
    let w_ih = Tensor::cat(
        gates
            .iter()
            .map(|g| g.input_transform.weight.val())
            .collect(),
        1,
    );
    let w_hh = Tensor::cat(
        gates
            .iter()
            .map(|g| g.hidden_transform.weight.val())
            .collect(),
        1,
    );
    let bias = |l: &burn::nn::Linear| l.bias.as_ref().map(|b| b.val());
    let biases: Option<Vec<Tensor<1>>> = gates
        .iter()
        .map(
            |g| match (bias(&g.input_transform), bias(&g.hidden_transform)) {
                (Some(a), Some(b)) => Some(a + b),
                (a, b) => a.or(b),
            },
        )
        .collect();
    Some((w_ih, w_hh, biases.map(|b| Tensor::cat(b, 0))))
}

/// `lstm.forward(x, Some(state))` for a batch-first `x` `[n, T, d]`: the outputs `[n, T, H]` and
/// the final state, fused as the module documentation says when [`fusable`], burn's own
/// forward otherwise. Same parameters and the same function (to float rounding).
pub fn lstm_forward(lstm: &Lstm, x: Tensor<3>, state: LstmState<2>) -> (Tensor<3>, LstmState<2>) {
    let weights = if fusable(lstm) {
        fused_weights(lstm)
    } else {
        None
    };
    let Some((w_ih, w_hh, bias)) = weights else {
        return lstm.forward(x, Some(state));
    };
    let [n, t, d] = x.dims();
    let h = lstm.d_hidden;
    // Time-major, so that each step's rows are one contiguous block.
    let mut xz = x.swap_dims(0, 1).reshape([t * n, d]).matmul(w_ih);
    if let Some(b) = bias {
        xz = xz + b.unsqueeze_dim(0);
    }
    let mut hc = Tensor::cat(vec![state.hidden, state.cell], 1);
    let mut outs = Vec::with_capacity(t);
    for s in 0..t {
        let hz = hc.clone().narrow(1, 0, h).matmul(w_hh.clone());
        hc = lstm_cell(xz.clone().narrow(0, s * n, n), hz, hc);
        outs.push(hc.clone());
    }
    let out = Tensor::stack::<3>(outs, 1).narrow(2, 0, h);
    let final_state = LstmState::new(hc.clone().narrow(1, h, h), hc.narrow(1, 0, h));
    (out, final_state)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::set_flat;
    use burn::module::Module;
    use burn::nn::LstmConfig;

    fn det(n: usize, seed: u32) -> Vec<f32> {
        // A deterministic spread of values in (-1, 1) (no RNG needed for a reference test).
        (0..n)
            .map(|i| (((i as u32).wrapping_mul(2_654_435_761) ^ seed) % 2001) as f32 / 1000.0 - 1.0)
            .collect()
    }

    fn lstm(d: usize, h: usize, clip: Option<f64>, dev: &Device) -> Lstm {
        let mut cfg = LstmConfig::new(d, h, true);
        if let Some(c) = clip {
            cfg = cfg.with_clip(Some(c));
        }
        let m = cfg.init(dev);
        let n = crate::params::num_params(&m);
        set_flat(
            m,
            Tensor::from_data(TensorData::new(det(n, 7), [n]), &dev.clone().inner()),
        )
    }

    fn flat(t: Tensor<3>) -> Vec<f32> {
        t.into_data()
            .convert::<f32>()
            .try_into_vec::<f32>()
            .unwrap()
    }

    fn flat2(t: Tensor<2>) -> Vec<f32> {
        t.into_data()
            .convert::<f32>()
            .try_into_vec::<f32>()
            .unwrap()
    }

    /// Outputs, final state and the gradients of a weighted sum of them with respect to every
    /// parameter, the input and the initial state.
    fn run(m: &Lstm, fused: bool, dev: &Device) -> (Vec<f32>, Vec<Vec<f32>>) {
        let (n, t, d, h) = (4, 7, 3, 5);
        let x = Tensor::<3>::from_data(TensorData::new(det(n * t * d, 1), [n, t, d]), dev)
            .require_grad();
        let c0 = Tensor::<2>::from_data(TensorData::new(det(n * h, 2), [n, h]), dev).require_grad();
        let h0 = Tensor::<2>::from_data(TensorData::new(det(n * h, 3), [n, h]), dev).require_grad();
        let state = LstmState::new(c0.clone(), h0.clone());
        let (out, fin) = if fused {
            lstm_forward(m, x.clone(), state)
        } else {
            m.forward(x.clone(), Some(state))
        };
        let w = Tensor::<3>::from_data(TensorData::new(det(n * t * h, 4), [n, t, h]), dev);
        let wc = Tensor::<2>::from_data(TensorData::new(det(n * h, 5), [n, h]), dev);
        let loss = (out.clone() * w).sum()
            + (fin.cell.clone() * wc.clone()).sum()
            + (fin.hidden.clone() * wc.mul_scalar(-0.5)).sum();
        let grads = loss.backward();
        let mut values = flat(out);
        values.extend(flat2(fin.cell));
        values.extend(flat2(fin.hidden));
        let g = vec![
            flat(x.grad(&grads).unwrap()),
            flat2(c0.grad(&grads).unwrap()),
            flat2(h0.grad(&grads).unwrap()),
            crate::params::to_vec1(crate::params::flat_grads(m, grads, dev)),
        ];
        (values, g)
    }

    fn assert_close(a: &[f32], b: &[f32], tol: f32, what: &str) {
        assert_eq!(a.len(), b.len(), "{what}");
        for (i, (p, q)) in a.iter().zip(b).enumerate() {
            assert!((p - q).abs() <= tol, "{what}[{i}]: {p} vs {q}");
        }
    }

    #[test]
    fn fused_lstm_matches_burns_in_outputs_and_gradients() {
        let dev = Device::flex().autodiff();
        let m = lstm(3, 5, None, &dev);
        assert!(fusable(&m));
        let (v1, g1) = run(&m, true, &dev);
        let (v2, g2) = run(&m, false, &dev);
        assert_close(&v1, &v2, 1e-5, "outputs");
        assert_eq!(g1.len(), g2.len());
        for (k, (a, b)) in g1.iter().zip(&g2).enumerate() {
            assert!(!a.is_empty(), "gradient {k} missing");
            assert_close(a, b, 1e-5, &format!("gradient {k}"));
        }
        // Without autodiff (collection, evaluation): the same outputs.
        let inner = m.valid();
        let d = Device::flex();
        let x = Tensor::<3>::from_data(TensorData::new(det(2 * 3 * 3, 9), [2, 3, 3]), &d);
        let s = || LstmState::new(Tensor::zeros([2, 5], &d), Tensor::zeros([2, 5], &d));
        let (a, _) = lstm_forward(&inner, x.clone(), s());
        let (b, _) = inner.forward(x, Some(s()));
        assert_close(&flat(a), &flat(b), 1e-5, "inference outputs");
    }

    #[test]
    fn the_composed_cell_matches_the_fused_one() {
        let dev = Device::flex().autodiff();
        let (n, h) = (3, 4);
        let mk = |len: usize, seed: u32| {
            Tensor::<2>::from_data(TensorData::new(det(n * len, seed), [n, len]), &dev)
                .mul_scalar(2.5)
                .require_grad()
        };
        let (xz, hz, hc) = (mk(4 * h, 1), mk(4 * h, 2), mk(2 * h, 3));
        let w = Tensor::<2>::from_data(TensorData::new(det(n * 2 * h, 4), [n, 2 * h]), &dev);
        let a = lstm_cell(xz.clone(), hz.clone(), hc.clone());
        let b = lstm_cell_composed(xz.clone(), hz.clone(), hc.clone());
        assert_close(&flat2(a.clone()), &flat2(b.clone()), 1e-6, "cell outputs");
        let ga = (a * w.clone()).sum().backward();
        let gb = (b * w).sum().backward();
        for (k, p) in [&xz, &hz, &hc].into_iter().enumerate() {
            let (x, y) = (flat2(p.grad(&ga).unwrap()), flat2(p.grad(&gb).unwrap()));
            assert_close(&x, &y, 1e-6, &format!("cell gradient {k}"));
        }
    }

    #[test]
    fn an_lstm_with_cell_clipping_runs_burns_forward() {
        let dev = Device::flex();
        let m = lstm(3, 5, Some(0.5), &dev);
        assert!(!fusable(&m));
        let x = Tensor::<3>::from_data(TensorData::new(det(2 * 4 * 3, 9), [2, 4, 3]), &dev);
        let s = || LstmState::new(Tensor::zeros([2, 5], &dev), Tensor::zeros([2, 5], &dev));
        let (a, _) = lstm_forward(&m, x.clone(), s());
        let (b, _) = m.forward(x, Some(s()));
        assert_eq!(flat(a), flat(b));
    }
}
