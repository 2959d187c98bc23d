//! A fused LSTM for burn's `Lstm` modules (same parameters, same checkpoints, same results).
//!
//! burn's `Lstm::forward` runs every time step as eight gate products (four on the input, four
//! on the hidden state, each with its bias add), four activations and five elementwise ops:
//! about thirty autodiff nodes per step, each a few microseconds of bookkeeping for tensors of a
//! few thousand floats. [`lstm_forward`] runs the same LSTM as
//! - the input products of all time steps in one matrix product (`[T·n, d] · [d, 4H]`),
//! - the recurrence in one op ([`lstm_sequence`]): per step one `[n, H] · [H, 4H]` product for
//!   the four hidden-state gates and the gate math (`σ`, `tanh`, the cell and hidden updates)
//!   in one loop over the rows; its hand-written backward runs the steps in reverse (one
//!   `[n, 4H] · [4H, H]` product per step) and the hidden weights' gradient as one product over
//!   all steps. On backends other than flex, or other dtypes, burn's ops do the same per step.
//!
//! so a sequence is a handful of autodiff nodes instead of thirty per step. The gate blocks are
//! concatenated from the module's `GateController`s on every call (two small concatenations per
//! sequence), so the module, its initialization and its checkpoints stay burn's.

use burn::nn::activation::Activation;
use burn::nn::{Lstm, LstmState};
use burn::tensor::Tensor;
use burn::tensor::activation::{sigmoid, tanh};
// The fused op is flex's (the other backends run the composed steps).
#[cfg(feature = "flex")]
use crate::fast_ops::tanh_approx;
#[cfg(feature = "flex")]
use burn::backend::autodiff::checkpoint::base::Checkpointer;
#[cfg(feature = "flex")]
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
#[cfg(feature = "flex")]
use burn::backend::autodiff::grads::Gradients;
#[cfg(feature = "flex")]
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
#[cfg(feature = "flex")]
use burn::backend::ops::FloatTensorOps;
#[cfg(feature = "flex")]
use burn::backend::tensor::FloatTensor;
#[cfg(feature = "flex")]
use burn::backend::{Autodiff, AutodiffBackend, Backend, Dispatch, Flex, backend_extension};
#[cfg(feature = "flex")]
use burn::tensor::{DType, Device, Shape, TensorData};
#[cfg(feature = "flex")]
use std::borrow::Cow;

/// `σ(x) = (1 + tanh(x/2)) / 2` with the fast `tanh` (within 3e-7 of the exact value).
#[cfg(feature = "flex")]
#[inline(always)]
fn sigmoid_approx(x: f32) -> f32 {
    0.5 + 0.5 * tanh_approx(0.5 * x)
}

/// The fused LSTM recurrence.
#[cfg(feature = "flex")]
#[backend_extension(Flex, Autodiff)]
pub trait LstmSequenceBackend: Backend {
    /// The recurrence over `T` steps of `n` rows: the input-side pre-activations `xz`
    /// (`[T·n, 4H]`, time-major, biases included; gate blocks input, forget, cell, output), the
    /// hidden weights `w_hh` (`[H, 4H]`) and the initial `[h, c]` (`[n, 2H]`) give every step's
    /// `[h, c]` (`[T·n, 2H]`, time-major) and its activated gates `[σ(i), σ(f), tanh(g), σ(o)]`
    /// (`[T·n, 4H]`, which the backward reuses).
    fn lstm_sequence(
        xz: FloatTensor<Self>,
        w_hh: FloatTensor<Self>,
        hc0: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);
    /// The gradients of [`lstm_sequence`](Self::lstm_sequence)'s states for their output
    /// gradient `grad` (`[T·n, 2H]`): those of `xz`, `w_hh` and `hc0`.
    fn lstm_sequence_backward(
        w_hh: FloatTensor<Self>,
        hc0: FloatTensor<Self>,
        hs: FloatTensor<Self>,
        gates: FloatTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>);
}

/// The f32 values of a flex tensor in row-major order (borrowed when contiguous).
#[cfg(feature = "flex")]
fn values(t: &FloatTensor<Flex>) -> Cow<'_, [f32]> {
    if let Some(s) = t.as_slice::<f32>() {
        return Cow::Borrowed(s);
    }
    // Another layout or dtype (not reached from `lstm_sequence`, which takes this path for f32).
    let c = Flex::float_cast(t.to_contiguous(), burn::tensor::FloatDType::F32);
    Cow::Owned(c.as_slice::<f32>().map(<[f32]>::to_vec).unwrap_or_default())
}

#[cfg(feature = "flex")]
fn tensor(v: Vec<f32>, shape: [usize; 2]) -> FloatTensor<Flex> {
    FloatTensor::<Flex>::from_data(TensorData::new(v, Shape::new(shape)))
}

/// `a · b` for row-major `a` `[m, k]` with flex's matrix product (its gemm kernels).
#[cfg(feature = "flex")]
fn matmul(a: Vec<f32>, m: usize, k: usize, b: &FloatTensor<Flex>) -> Vec<f32> {
    let p = Flex::float_matmul(tensor(a, [m, k]), b.clone());
    values(&p).into_owned()
}

/// `(T, n, H)` of a sequence: `rows = T·n` rows of pre-activations, `hc0` `[n, 2H]`.
#[cfg(feature = "flex")]
fn sizes(rows: usize, hc0: &FloatTensor<Flex>) -> (usize, usize, usize) {
    let dims = hc0.layout().shape();
    let (n, h) = (dims[0], dims[1] / 2);
    (rows.checked_div(n).unwrap_or(0), n, h)
}

#[cfg(feature = "flex")]
impl LstmSequenceBackend for Flex {
    fn lstm_sequence(
        xz: FloatTensor<Self>,
        w_hh: FloatTensor<Self>,
        hc0: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let (t, n, h) = sizes(xz.layout().shape()[0], &hc0);
        let (xz, hc0) = (values(&xz), values(&hc0));
        let mut hs = vec![0f32; t * n * 2 * h];
        let mut acts = vec![0f32; t * n * 4 * h];
        // The previous step's h (`[n, H]`, the left side of the next hidden product) and c.
        let mut h_prev: Vec<f32> = hc0
            .chunks_exact(2 * h)
            .flat_map(|r| &r[..h])
            .copied()
            .collect();
        let mut c_prev: Vec<f32> = hc0
            .chunks_exact(2 * h)
            .flat_map(|r| &r[h..])
            .copied()
            .collect();
        for s in 0..t {
            let hz = matmul(std::mem::take(&mut h_prev), n, h, &w_hh);
            let step = s * n;
            for r in 0..n {
                let xz = &xz[(step + r) * 4 * h..][..4 * h];
                let hz = &hz[r * 4 * h..][..4 * h];
                let a = &mut acts[(step + r) * 4 * h..][..4 * h];
                let (ho, co) = hs[(step + r) * 2 * h..][..2 * h].split_at_mut(h);
                let cp = &c_prev[r * h..][..h];
                // Gate by gate over contiguous blocks of equal length, so the loops vectorize.
                for ((a, x), z) in a.iter_mut().zip(xz).zip(hz) {
                    *a = x + z;
                }
                let (a_if, a_go) = a.split_at_mut(2 * h);
                let (ag, ao) = a_go.split_at_mut(h);
                for v in a_if.iter_mut() {
                    *v = sigmoid_approx(*v);
                }
                for v in ao.iter_mut() {
                    *v = sigmoid_approx(*v);
                }
                for v in ag.iter_mut() {
                    *v = tanh_approx(*v);
                }
                let (ai, af) = a_if.split_at(h);
                for j in 0..h {
                    co[j] = af[j] * cp[j] + ai[j] * ag[j];
                }
                for j in 0..h {
                    ho[j] = ao[j] * tanh_approx(co[j]);
                }
            }
            let rows = &hs[step * 2 * h..(step + n) * 2 * h];
            h_prev = rows
                .chunks_exact(2 * h)
                .flat_map(|r| &r[..h])
                .copied()
                .collect();
            c_prev = rows
                .chunks_exact(2 * h)
                .flat_map(|r| &r[h..])
                .copied()
                .collect();
        }
        (tensor(hs, [t * n, 2 * h]), tensor(acts, [t * n, 4 * h]))
    }

    fn lstm_sequence_backward(
        w_hh: FloatTensor<Self>,
        hc0: FloatTensor<Self>,
        hs: FloatTensor<Self>,
        gates: FloatTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        let (t, n, h) = sizes(hs.layout().shape()[0], &hc0);
        let w_t = Flex::float_transpose(w_hh);
        let (hc0, hs, acts, grad) = (values(&hc0), values(&hs), values(&gates), values(&grad));
        // The state of step `s - 1`'s row `r` (the initial state for `s = 0`).
        let prev = |s: usize, r: usize| -> &[f32] {
            if s == 0 {
                &hc0[r * 2 * h..][..2 * h]
            } else {
                &hs[((s - 1) * n + r) * 2 * h..][..2 * h]
            }
        };
        let mut dz = vec![0f32; t * n * 4 * h];
        // The gradients reaching step s's h and c from step s + 1.
        let mut dh_next = vec![0f32; n * h];
        let mut dc_next = vec![0f32; n * h];
        for s in (0..t).rev() {
            let step = s * n;
            for r in 0..n {
                let a = &acts[(step + r) * 4 * h..][..4 * h];
                let c = &hs[(step + r) * 2 * h + h..][..h];
                let (gh, gc) = grad[(step + r) * 2 * h..][..2 * h].split_at(h);
                let c_prev = &prev(s, r)[h..];
                let d = &mut dz[(step + r) * 4 * h..][..4 * h];
                let (dh_in, dc_in) = (&dh_next[r * h..][..h], &mut dc_next[r * h..][..h]);
                // Each gate's block as its own slice of length H, so the loop vectorizes.
                let (ai, a) = a.split_at(h);
                let (af, a) = a.split_at(h);
                let (ag, ao) = a.split_at(h);
                let (di, d) = d.split_at_mut(h);
                let (df, d) = d.split_at_mut(h);
                let (dg, d_o) = d.split_at_mut(h);
                for j in 0..h {
                    let (i, f, g, o) = (ai[j], af[j], ag[j], ao[j]);
                    let tc = tanh_approx(c[j]);
                    let dh = gh[j] + dh_in[j];
                    // The cell's gradient: through h = o·tanh(c), directly, and from step s + 1.
                    let dc = gc[j] + dc_in[j] + dh * o * (1.0 - tc * tc);
                    di[j] = dc * g * i * (1.0 - i);
                    df[j] = dc * c_prev[j] * f * (1.0 - f);
                    dg[j] = dc * i * (1.0 - g * g);
                    d_o[j] = dh * tc * o * (1.0 - o);
                    dc_in[j] = dc * f;
                }
            }
            let d = dz[step * 4 * h..(step + n) * 4 * h].to_vec();
            dh_next = matmul(d, n, 4 * h, &w_t);
        }
        // The hidden weights' gradient over all steps: [h of step s - 1]ᵀ · dz.
        let h_prev: Vec<f32> = (0..t)
            .flat_map(|s| (0..n).map(move |r| (s, r)))
            .flat_map(|(s, r)| &prev(s, r)[..h])
            .copied()
            .collect();
        let h_prev_t = Flex::float_transpose(tensor(h_prev, [t * n, h]));
        let dz = tensor(dz, [t * n, 4 * h]);
        let dw = Flex::float_matmul(h_prev_t, dz.clone());
        let dhc0: Vec<f32> = dh_next
            .chunks_exact(h)
            .zip(dc_next.chunks_exact(h))
            .flat_map(|(a, b)| a.iter().chain(b))
            .copied()
            .collect();
        (dz, dw, tensor(dhc0, [n, 2 * h]))
    }
}

#[cfg(feature = "flex")]
#[derive(Debug)]
struct LstmSequenceGrad;

#[cfg(feature = "flex")]
impl<B: Backend + LstmSequenceBackend> Backward<B, 3> for LstmSequenceGrad {
    /// `(w_hh, hc0, hs, gates)`.
    type State = (
        FloatTensor<B>,
        FloatTensor<B>,
        FloatTensor<B>,
        FloatTensor<B>,
    );

    fn backward(
        self,
        ops: Ops<Self::State, 3>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        let grad = grads.consume::<B>(&ops.node);
        let (w_hh, hc0, hs, gates) = ops.state;
        let (dxz, dw, dhc0) = B::lstm_sequence_backward(w_hh, hc0, hs, gates, grad);
        let [p_xz, p_w, p_hc0] = ops.parents;
        for (p, g) in [(p_xz, dxz), (p_w, dw), (p_hc0, dhc0)] {
            if let Some(p) = p {
                grads.register::<B>(p.id, g);
            }
        }
    }
}

#[cfg(feature = "flex")]
impl<B: Backend + LstmSequenceBackend, C: CheckpointStrategy> LstmSequenceBackend
    for Autodiff<B, C>
{
    fn lstm_sequence(
        xz: FloatTensor<Self>,
        w_hh: FloatTensor<Self>,
        hc0: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        match LstmSequenceGrad
            .prepare::<C>([xz.node(), w_hh.node(), hc0.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let (w_hh, hc0) = (w_hh.into_primitive(), hc0.into_primitive());
                let (hs, gates) = B::lstm_sequence(xz.into_primitive(), w_hh.clone(), hc0.clone());
                let state = (w_hh, hc0, hs.clone(), gates.clone());
                (prep.finish(state, hs), Self::from_inner(gates))
            }
            OpsKind::UnTracked(prep) => {
                let (hs, gates) = B::lstm_sequence(
                    xz.into_primitive(),
                    w_hh.into_primitive(),
                    hc0.into_primitive(),
                );
                (prep.finish(hs), Self::from_inner(gates))
            }
        }
    }

    fn lstm_sequence_backward(
        w_hh: FloatTensor<Self>,
        hc0: FloatTensor<Self>,
        hs: FloatTensor<Self>,
        gates: FloatTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        // Only called inside a backward pass, on the inner backend; here it is a constant.
        let (a, b, c) = B::lstm_sequence_backward(
            w_hh.into_primitive(),
            hc0.into_primitive(),
            hs.into_primitive(),
            gates.into_primitive(),
            grad.into_primitive(),
        );
        (
            Self::from_inner(a),
            Self::from_inner(b),
            Self::from_inner(c),
        )
    }
}

/// One LSTM step's gate math with burn's ops (any backend, any dtype; its own autodiff
/// backward): `[h', c']` (`[n, 2H]`) from the step's pre-activations `z` (`[n, 4H]`, input and
/// hidden products and biases) and the previous `[h, c]`: `c' = σ(f)·c + σ(i)·tanh(g)`,
/// `h' = σ(o)·tanh(c')`.
fn lstm_cell_composed(z: Tensor<2>, hc: Tensor<2>) -> Tensor<2> {
    let h = hc.dims()[1] / 2;
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

/// [`lstm_sequence`] with burn's ops, one step at a time.
fn lstm_sequence_composed(xz: Tensor<2>, w_hh: Tensor<2>, hc0: Tensor<2>) -> Tensor<2> {
    let [n, h2] = hc0.dims();
    let (t, h) = (xz.dims()[0].checked_div(n).unwrap_or(0), h2 / 2);
    let mut hc = hc0;
    let mut steps = Vec::with_capacity(t);
    for s in 0..t {
        let z = xz.clone().narrow(0, s * n, n) + hc.clone().narrow(1, 0, h).matmul(w_hh.clone());
        hc = lstm_cell_composed(z, hc);
        steps.push(hc.clone());
    }
    if steps.is_empty() {
        return Tensor::zeros([0, h2], &xz.device());
    }
    Tensor::cat(steps, 0)
}

#[cfg(feature = "flex")]
fn on_flex_f32(t: &Tensor<2>) -> bool {
    t.dtype() == DType::F32 && t.device().inner() == Device::flex()
}

/// The LSTM recurrence over `T` steps of `n` rows: every step's `[h, c]` (`[T·n, 2H]`,
/// time-major) from the input-side pre-activations `xz` (`[T·n, 4H]`, time-major, biases
/// included; gate blocks input, forget, cell, output), the hidden weights `w_hh` (`[H, 4H]`)
/// and the initial `[h, c]` (`[n, 2H]`). On flex one op with its own backward; elsewhere
/// burn's ops, step by step.
pub fn lstm_sequence(xz: Tensor<2>, w_hh: Tensor<2>, hc0: Tensor<2>) -> Tensor<2> {
    #[cfg(feature = "flex")]
    if on_flex_f32(&xz) && on_flex_f32(&w_hh) && on_flex_f32(&hc0) {
        let (hs, _gates) = <Dispatch as LstmSequenceBackend>::lstm_sequence(
            xz.into_dispatch(),
            w_hh.into_dispatch(),
            hc0.into_dispatch(),
        );
        return Tensor::from_dispatch(hs);
    }
    lstm_sequence_composed(xz, w_hh, hc0)
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
    let [n, t, d] = x.dims();
    let weights = if fusable(lstm) && t > 0 {
        fused_weights(lstm)
    } else {
        None
    };
    let Some((w_ih, w_hh, bias)) = weights else {
        return lstm.forward(x, Some(state));
    };
    let h = lstm.d_hidden;
    // Time-major, so that each step's rows are one contiguous block.
    let mut xz = x.swap_dims(0, 1).reshape([t * n, d]).matmul(w_ih);
    if let Some(b) = bias {
        xz = xz + b.unsqueeze_dim(0);
    }
    let hc0 = Tensor::cat(vec![state.hidden, state.cell], 1);
    let hs = lstm_sequence(xz, w_hh, hc0);
    let out = hs
        .clone()
        .reshape([t, n, 2 * h])
        .narrow(2, 0, h)
        .swap_dims(0, 1);
    let last = hs.narrow(0, (t - 1) * n, n);
    let final_state = LstmState::new(last.clone().narrow(1, h, h), last.narrow(1, 0, h));
    (out, final_state)
}

// The fused op against the composed steps: flex only.
#[cfg(all(test, feature = "flex"))]
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
    fn the_composed_recurrence_matches_the_fused_one() {
        let dev = Device::flex().autodiff();
        let (t, n, h) = (6, 3, 4);
        let mk = |rows: usize, cols: usize, seed: u32, scale: f32| {
            Tensor::<2>::from_data(TensorData::new(det(rows * cols, seed), [rows, cols]), &dev)
                .mul_scalar(scale)
                .require_grad()
        };
        // Pre-activations up to ±2.5 and weights up to ±0.8: saturated and linear gates both.
        let (xz, w_hh, hc0) = (
            mk(t * n, 4 * h, 1, 2.5),
            mk(h, 4 * h, 2, 0.8),
            mk(n, 2 * h, 3, 1.5),
        );
        let w =
            Tensor::<2>::from_data(TensorData::new(det(t * n * 2 * h, 4), [t * n, 2 * h]), &dev);
        let a = lstm_sequence(xz.clone(), w_hh.clone(), hc0.clone());
        let b = lstm_sequence_composed(xz.clone(), w_hh.clone(), hc0.clone());
        assert_eq!(a.dims(), [t * n, 2 * h]);
        assert_close(&flat2(a.clone()), &flat2(b.clone()), 1e-5, "states");
        let ga = (a * w.clone()).sum().backward();
        let gb = (b * w).sum().backward();
        for (k, p) in [&xz, &w_hh, &hc0].into_iter().enumerate() {
            let (x, y) = (flat2(p.grad(&ga).unwrap()), flat2(p.grad(&gb).unwrap()));
            assert_close(&x, &y, 1e-5, &format!("gradient {k}"));
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
