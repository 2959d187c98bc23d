//! A stack of dense layers read from one flat parameter vector θ, as one autodiff operation.
//!
//! An on-policy update differentiates the same small networks thousands of times. Through
//! burn's modules each step forks every parameter tensor into a fresh autodiff leaf, records a
//! node per layer, gathers a gradient per parameter into a flat vector and maps the optimizer's
//! step back onto every tensor. Here the whole parameter vector is **one** leaf: a network is a
//! list of [`DenseSlot`]s (where each layer's weight and bias lie in θ), its forward pass is one
//! node, and its backward writes every layer's weight and bias gradient straight into a
//! θ-shaped gradient. The arithmetic is that of [`crate::fast_ops::linear`] layer by layer (the
//! same gemm calls, bias sums and `tanh`), so outputs and gradients equal the module path's to
//! the bit (tested). Off flex, [`mlp`] composes burn's own operations on slices of θ.

use crate::fast_ops::{
    FastLinearBackend, FastTanhBackend, View2, contiguous_f32, is_flex, matmul_flex, simd,
};
use crate::nn::DenseSlot;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::ops::FloatTensorOps;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Backend, Dispatch, Flex, backend_extension};
use burn::tensor::{DType, Tensor, TensorData};

/// The flat-parameter network operation.
#[backend_extension(Flex, Autodiff)]
pub trait FastMlpBackend: Backend {
    /// The layers `slots` applied in turn to `x` `[m, slots[0].d_in]`, every weight and bias
    /// read from `theta` `[n]`.
    fn fast_mlp(
        x: FloatTensor<Self>,
        theta: FloatTensor<Self>,
        slots: Vec<DenseSlot>,
    ) -> FloatTensor<Self>;
}

/// θ itself, or a contiguous copy of a strided view (never the case for a vector made from host
/// data), so that [`theta_slice`] can index it.
fn contiguous(theta: FloatTensor<Flex>) -> FloatTensor<Flex> {
    if contiguous_f32(&theta).is_some() {
        theta
    } else {
        theta.to_contiguous()
    }
}

/// θ's f32 elements (contiguous, see [`contiguous`]), the storage every slot indexes.
fn theta_slice(theta: &FloatTensor<Flex>) -> &[f32] {
    let (start, end) = contiguous_f32(theta).expect("θ is a contiguous f32 vector (checked)");
    &theta.storage::<f32>()[start..end]
}

/// One layer on flex: the gemm call and fused bias + activation of
/// [`FastLinearBackend::fast_linear`], the weight read in place from θ.
fn dense(x: FloatTensor<Flex>, th: &[f32], s: &DenseSlot) -> FloatTensor<Flex> {
    let w = View2::row_major(th, s.w, s.d_in, s.d_out).expect("slot inside θ (checked)");
    if let Some(xv) = View2::of(&x)
        && let Some(mut out) = crate::fast_ops::gemm_small(xv, w)
    {
        simd::bias_act(&mut out, &th[s.b..s.b + s.d_out], s.tanh);
        return FloatTensor::<Flex>::from_data(TensorData::new(out, [xv.rows, s.d_out]));
    }
    // Large products: the layer's tensors, through flex's own operations.
    let wt = TensorData::new(th[s.w..s.w + s.d_in * s.d_out].to_vec(), [s.d_in, s.d_out]);
    let bt = TensorData::new(th[s.b..s.b + s.d_out].to_vec(), [s.d_out]);
    Flex::fast_linear(
        x,
        FloatTensor::<Flex>::from_data(wt),
        FloatTensor::<Flex>::from_data(bt),
        s.tanh,
    )
}

impl FastMlpBackend for Flex {
    fn fast_mlp(
        x: FloatTensor<Self>,
        theta: FloatTensor<Self>,
        slots: Vec<DenseSlot>,
    ) -> FloatTensor<Self> {
        let theta = contiguous(theta);
        let th = theta_slice(&theta);
        slots.iter().fold(x, |a, s| dense(a, th, s))
    }
}

#[derive(Debug)]
struct FastMlpGrad;

/// What the backward pass needs: the input, θ, every layer's output, the layers.
type MlpState = (
    FloatTensor<Flex>,
    FloatTensor<Flex>,
    Vec<FloatTensor<Flex>>,
    Vec<DenseSlot>,
);

impl Backward<Flex, 2> for FastMlpGrad {
    type State = MlpState;

    fn backward(
        self,
        ops: Ops<Self::State, 2>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        let [node_x, node_theta] = ops.parents;
        let (x, theta, outs, slots) = ops.state;
        let th = theta_slice(&theta);
        let mut g_theta = node_theta.as_ref().map(|_| vec![0f32; th.len()]);
        let mut g = grads.consume::<Flex>(&ops.node);
        for (l, s) in slots.iter().enumerate().rev() {
            // The same steps as `FastLinearGrad`: the activation's gradient, the bias sum, the
            // two products.
            if s.tanh {
                g = Flex::fast_tanh_backward(outs[l].clone(), g);
            }
            let input = if l == 0 { &x } else { &outs[l - 1] };
            if let Some(gt) = g_theta.as_mut() {
                let db = Flex::float_sum_dim(g.clone(), 0);
                gt[s.b..s.b + s.d_out].copy_from_slice(flat_f32(&db));
                let dw = Flex::fast_linear_grad_weight(input.clone(), g.clone());
                gt[s.w..s.w + s.d_in * s.d_out].copy_from_slice(flat_f32(&dw));
            }
            if l == 0 && node_x.is_none() {
                break;
            }
            let w = View2::row_major(th, s.w, s.d_in, s.d_out).expect("slot inside θ");
            g = grad_input(g, w, th, s);
        }
        if let (Some(node), Some(gt)) = (node_theta, g_theta) {
            let n = gt.len();
            grads.register::<Flex>(
                node.id,
                FloatTensor::<Flex>::from_data(TensorData::new(gt, [n])),
            );
        }
        if let Some(node) = node_x {
            grads.register::<Flex>(node.id, g);
        }
    }
}

/// `g · Wᵀ` as `FastLinearBackend::fast_linear_grad_input` makes it.
fn grad_input(g: FloatTensor<Flex>, w: View2, th: &[f32], s: &DenseSlot) -> FloatTensor<Flex> {
    if let Some(gv) = View2::of(&g)
        && let Some(out) = crate::fast_ops::gemm_small(gv, w.t())
    {
        return FloatTensor::<Flex>::from_data(TensorData::new(out, [gv.rows, s.d_in]));
    }
    let wt = TensorData::new(th[s.w..s.w + s.d_in * s.d_out].to_vec(), [s.d_in, s.d_out]);
    matmul_flex(g, false, FloatTensor::<Flex>::from_data(wt), true)
}

/// The f32 elements of a freshly computed (contiguous) flex tensor.
fn flat_f32(t: &FloatTensor<Flex>) -> &[f32] {
    let (start, end) = contiguous_f32(t).expect("a fresh f32 result is contiguous");
    &t.storage::<f32>()[start..end]
}

impl<C: CheckpointStrategy> FastMlpBackend for Autodiff<Flex, C> {
    fn fast_mlp(
        x: FloatTensor<Self>,
        theta: FloatTensor<Self>,
        slots: Vec<DenseSlot>,
    ) -> FloatTensor<Self> {
        match FastMlpGrad
            .prepare::<C>([x.node(), theta.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let (xp, tp) = (x.into_primitive(), contiguous(theta.into_primitive()));
                let th = theta_slice(&tp);
                let mut outs = Vec::with_capacity(slots.len());
                let mut a = xp.clone();
                for s in &slots {
                    a = dense(a, th, s);
                    outs.push(a.clone());
                }
                prep.finish((xp, tp, outs, slots), a)
            }
            OpsKind::UnTracked(prep) => prep.finish(Flex::fast_mlp(
                x.into_primitive(),
                theta.into_primitive(),
                slots,
            )),
        }
    }
}

/// The layers `slots` applied in turn to `x`, as one fused operation, when `x` lives on flex
/// and both are f32; `Err(x)` otherwise (callers compose burn's operations:
/// `nn::flat_mlp`, which also checks the slots).
pub fn mlp(x: Tensor<2>, theta: &Tensor<1>, slots: &[DenseSlot]) -> Result<Tensor<2>, Tensor<2>> {
    if is_flex(&x.device()) && theta.dtype() == DType::F32 && x.dtype() == DType::F32 {
        Ok(Tensor::from_dispatch(
            <Dispatch as FastMlpBackend>::fast_mlp(
                x.into_dispatch(),
                theta.clone().into_dispatch(),
                slots.to_vec(),
            ),
        ))
    } else {
        Err(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::{Activation, MlpConfig, flat_mlp, linear_act};
    use crate::params::{flat_grads, flat_params, to_vec1};
    use burn::module::Module;
    use burn::nn::Linear;
    use burn::tensor::Device;

    /// A trunk and a head, as the actor-critic's actor.
    #[derive(Module, Debug)]
    struct Net {
        trunk: crate::nn::Mlp,
        head: Linear,
    }

    fn slots(net: &Net) -> Vec<DenseSlot> {
        let mut out = Vec::new();
        let mut off = 0;
        let layers = net.trunk.layers.iter().map(|l| (l, true));
        for (l, tanh) in layers.chain([(&net.head, false)]) {
            let [d_in, d_out] = l.weight.dims();
            out.push(DenseSlot {
                w: off,
                b: off + d_in * d_out,
                d_in,
                d_out,
                tanh,
            });
            off += d_in * d_out + d_out;
        }
        out
    }

    /// The fused stack and the composition other backends use against the layer-by-layer
    /// module path: the output, θ's gradient (as the module's flat gradient) and the input's
    /// gradient equal to the bit, below and above flex's parallel threshold.
    #[test]
    fn flat_stack_matches_the_module_path_to_the_bit() {
        let dev = Device::flex().autodiff();
        for &(m, d_in, hidden, d_out) in &[(256, 4, 64, 2), (33, 7, 5, 1), (1024, 64, 256, 3)] {
            let mut rng = crate::rng::Rng::seed_from(3);
            let trunk = MlpConfig {
                d_input: d_in,
                hidden: vec![hidden, hidden],
                d_output: None,
                activation: Activation::Tanh,
                output_gain: 1.0,
                hidden_gain: 2f64.sqrt(),
            }
            .init(&mut rng, &dev);
            let head = crate::nn::linear_orthogonal(hidden, d_out, 0.5, &mut rng, &dev);
            let net = Net { trunk, head };
            let xs: Vec<f32> = (0..m * d_in).map(|_| rng.normal() as f32).collect();
            let x = || {
                Tensor::<2>::from_data(TensorData::new(xs.clone(), [m, d_in]), &dev).require_grad()
            };
            let w_out: Vec<f32> = (0..m * d_out).map(|_| rng.normal() as f32).collect();
            let w_out = Tensor::<2>::from_data(TensorData::new(w_out, [m, d_out]), &dev);
            let bits = |t: Tensor<2>| t.into_data().try_into_vec::<f32>().unwrap();

            let x1 = x();
            let y1 = linear_act(&net.head, net.trunk.forward(x1.clone()), false);
            let g1 = (y1.clone() * w_out.clone()).sum().backward();
            let x1g = bits(x1.grad(&g1).unwrap());
            let flat1 = to_vec1(flat_grads(&net, g1, &dev));

            let theta = Tensor::<1>::from_inner(flat_params(&net)).require_grad();
            let x2 = x();
            let y2 = flat_mlp(x2.clone(), &theta, &slots(&net)).unwrap();
            assert_eq!(
                bits(y1.clone()),
                bits(y2.clone()),
                "forward {m}x{d_in}x{hidden}"
            );
            let g2 = (y2 * w_out.clone()).sum().backward();
            assert_eq!(
                x1g,
                bits(x2.grad(&g2).unwrap()),
                "input gradient {m}x{d_in}"
            );
            assert_eq!(
                flat1,
                to_vec1(theta.grad(&g2).unwrap()),
                "θ gradient {m}x{d_in}"
            );

            // The composition other backends use: burn's operations on slices of θ.
            let theta3 = Tensor::<1>::from_inner(flat_params(&net)).require_grad();
            let x3 = x();
            let y3 = crate::nn::flat_mlp_composed(x3.clone(), &theta3, &slots(&net));
            assert_eq!(bits(y1), bits(y3.clone()), "composed forward {m}x{d_in}");
            let g3 = (y3 * w_out.clone()).sum().backward();
            assert_eq!(x1g, bits(x3.grad(&g3).unwrap()), "composed input gradient");
            assert_eq!(
                flat1,
                to_vec1(theta3.grad(&g3).unwrap()),
                "composed θ gradient"
            );
        }
    }

    #[test]
    fn slots_that_do_not_fit_are_refused() {
        let dev = Device::flex();
        let theta = Tensor::<1>::zeros([10], &dev);
        let x = Tensor::<2>::zeros([2, 3], &dev);
        let s = DenseSlot {
            w: 0,
            b: 6,
            d_in: 3,
            d_out: 2,
            tanh: false,
        };
        assert!(flat_mlp(x.clone(), &theta, &[s]).is_ok());
        let err = flat_mlp(x.clone(), &theta, &[DenseSlot { d_in: 4, ..s }]).unwrap_err();
        assert!(err.contains("reads 4 features, gets 3"), "{err}");
        let err = flat_mlp(x, &theta, &[DenseSlot { b: 9, ..s }]).unwrap_err();
        assert!(err.contains("reaches past θ"), "{err}");
    }
}
