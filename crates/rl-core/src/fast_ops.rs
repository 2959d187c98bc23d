//! A fast `tanh` for the flex backend, with a backward pass that reuses the forward output.
//!
//! flex's builtin `tanh` is a scalar libm loop (~10 ns per element) and its autodiff backward
//! recomputes it; small RL networks spend most of an update there. This op evaluates Eigen's
//! rational approximation (within 5e-7 of the exact value, a few float32 ulp; tested) in a
//! loop the compiler vectorizes, and its gradient `g · (1 - y²)` uses the saved output `y`.
//! On other backends [`tanh`] falls back to burn's builtin.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind, unary};
use burn::backend::ops::FloatTensorOps;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Backend, Dispatch, Flex, backend_extension};
use burn::tensor::{DType, Device, Shape, Tensor, TensorData};

/// Eigen's `ptanh_float` rational approximation, clamped to ±7.905 where it rounds to ±1.
#[inline(always)]
pub fn tanh_approx(x: f32) -> f32 {
    let x = x.clamp(-7.905_311, 7.905_311);
    let x2 = x * x;
    let mut p = x2 * -2.760_768_5e-16 + 2.000_188e-13;
    p = p * x2 + -8.604_672e-11;
    p = p * x2 + 5.122_297e-8;
    p = p * x2 + 1.485_722_4e-5;
    p = p * x2 + 6.372_619_3e-4;
    p = p * x2 + 4.893_524_6e-3;
    p *= x;
    let mut q = x2 * 1.198_258_4e-6 + 1.185_347_1e-4;
    q = q * x2 + 2.268_434_6e-3;
    q = q * x2 + 4.893_525e-3;
    // Below ~4e-4 the approximation loses relative accuracy; tanh(x) = x there to f32 precision.
    if x.abs() < 4e-4 { x } else { p / q }
}

/// The fast-tanh operations.
#[backend_extension(Flex, Autodiff)]
pub trait FastTanhBackend: Backend {
    /// `tanh(x)`.
    fn fast_tanh(x: FloatTensor<Self>) -> FloatTensor<Self>;
    /// `grad · (1 - y²)` for `y = tanh(x)`.
    fn fast_tanh_backward(y: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self>;
}

fn f32_values(t: &FloatTensor<Flex>) -> Option<(Vec<f32>, Shape)> {
    if t.dtype() != DType::F32 {
        return None;
    }
    let shape = t.layout().shape().clone();
    match t.as_slice::<f32>() {
        Some(s) => Some((s.to_vec(), shape)),
        None => Some((t.to_contiguous().as_slice::<f32>()?.to_vec(), shape)),
    }
}

impl FastTanhBackend for Flex {
    fn fast_tanh(x: FloatTensor<Self>) -> FloatTensor<Self> {
        match f32_values(&x) {
            Some((mut v, shape)) => {
                v.iter_mut().for_each(|e| *e = tanh_approx(*e));
                FloatTensor::<Self>::from_data(TensorData::new(v, shape))
            }
            None => <Flex as FloatTensorOps<Flex>>::float_tanh(x),
        }
    }

    fn fast_tanh_backward(y: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        match (f32_values(&y), f32_values(&grad)) {
            (Some((yv, shape)), Some((mut gv, gshape))) if shape == gshape => {
                gv.iter_mut().zip(&yv).for_each(|(g, &y)| *g *= 1.0 - y * y);
                FloatTensor::<Self>::from_data(TensorData::new(gv, shape))
            }
            _ => {
                let one_minus = Flex::float_add_scalar(
                    Flex::float_neg(Flex::float_mul(y.clone(), y)),
                    1f32.into(),
                );
                Flex::float_mul(grad, one_minus)
            }
        }
    }
}

#[derive(Debug)]
struct FastTanhGrad;

impl<B: Backend + FastTanhBackend> Backward<B, 1> for FastTanhGrad {
    type State = FloatTensor<B>;

    fn backward(
        self,
        ops: Ops<Self::State, 1>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        let y = ops.state;
        unary::<B, _>(ops.parents, ops.node, grads, |grad| {
            B::fast_tanh_backward(y, grad)
        });
    }
}

impl<B: Backend + FastTanhBackend, C: CheckpointStrategy> FastTanhBackend for Autodiff<B, C> {
    fn fast_tanh(x: FloatTensor<Self>) -> FloatTensor<Self> {
        match FastTanhGrad
            .prepare::<C>([x.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let y = B::fast_tanh(x.into_primitive());
                prep.finish(y.clone(), y)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::fast_tanh(x.into_primitive())),
        }
    }

    fn fast_tanh_backward(y: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        // Differentiable composition (second-order use only).
        let one_minus =
            Self::float_add_scalar(Self::float_neg(Self::float_mul(y.clone(), y)), 1f32.into());
        Self::float_mul(grad, one_minus)
    }
}

fn is_flex(device: &Device) -> bool {
    device.clone().inner() == Device::flex()
}

/// `tanh` with the fast flex path (and its saved-output backward) where the tensor lives on
/// flex, burn's builtin elsewhere.
pub fn tanh<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    if is_flex(&x.device()) {
        Tensor::from_dispatch(<Dispatch as FastTanhBackend>::fast_tanh(x.into_dispatch()))
    } else {
        burn::tensor::activation::tanh(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approximation_is_accurate() {
        let mut worst = 0.0f64;
        let mut x = -12.0f32;
        while x < 12.0 {
            let err = (tanh_approx(x) as f64 - (x as f64).tanh()).abs();
            worst = worst.max(err);
            x += 1.37e-4;
        }
        assert!(worst < 5e-7, "max abs error {worst}");
        assert_eq!(tanh_approx(0.0), 0.0);
        assert_eq!(tanh_approx(1e-30), 1e-30);
    }

    #[test]
    fn forward_and_gradient_match_builtin() {
        let dev = Device::flex().autodiff();
        let data: Vec<f32> = (0..97).map(|i| (i as f32 - 48.0) * 0.11).collect();
        let x1 =
            Tensor::<2>::from_data(TensorData::new(data.clone(), [97, 1]), &dev).require_grad();
        let x2 = Tensor::<2>::from_data(TensorData::new(data, [97, 1]), &dev).require_grad();
        let w = Tensor::<2>::from_data(
            TensorData::new(
                (0..97).map(|i| (i % 7) as f32 - 3.0).collect::<Vec<f32>>(),
                [97, 1],
            ),
            &dev,
        );
        let y1 = tanh(x1.clone());
        let y2 = burn::tensor::activation::tanh(x2.clone());
        let (a, b) = (
            y1.clone().into_data().try_into_vec::<f32>().unwrap(),
            y2.clone().into_data().try_into_vec::<f32>().unwrap(),
        );
        for (p, q) in a.iter().zip(&b) {
            assert!((p - q).abs() < 3e-7, "{p} vs {q}");
        }
        let g1 = (y1 * w.clone()).sum().backward();
        let g2 = (y2 * w).sum().backward();
        let (ga, gb) = (
            x1.grad(&g1)
                .unwrap()
                .into_data()
                .try_into_vec::<f32>()
                .unwrap(),
            x2.grad(&g2)
                .unwrap()
                .into_data()
                .try_into_vec::<f32>()
                .unwrap(),
        );
        for (p, q) in ga.iter().zip(&gb) {
            assert!((p - q).abs() < 2e-6, "{p} vs {q}");
        }
    }
}
