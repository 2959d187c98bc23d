//! A fast `tanh` for the flex backend, with a backward pass that reuses the forward output.
//!
//! flex's builtin `tanh` is a scalar libm loop (~10 ns per element) and its autodiff backward
//! recomputes it; small RL networks spend most of an update there. This op evaluates Eigen's
//! rational approximation (within 5e-7 of the exact value, a few float32 ulp; tested) in a
//! loop compiled for the CPU's widest vector unit, in place where the input owns its buffer, and
//! its gradient `g · (1 - y²)` uses the saved output `y`.
//! On other backends [`tanh`] falls back to burn's builtin.

use burn::backend::TensorMetadata;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind, unary};
use burn::backend::ops::FloatTensorOps;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Backend, Dispatch, Flex, backend_extension};
use burn::nn::Linear;
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

/// The elementwise loops, compiled for the widest vector unit the CPU has (pulp picks AVX-512
/// or AVX2 at run time). Only exactly rounded operations are used (no fused multiply-add), so
/// every version gives the same bits as the baseline x86-64 build.
pub(crate) mod simd {
    use super::tanh_approx;

    /// `x ← tanh(x)`.
    pub(super) fn tanh_in_place(x: &mut [f32]) {
        pulp::Arch::new().dispatch(
            #[inline(always)]
            || x.iter_mut().for_each(|e| *e = tanh_approx(*e)),
        )
    }

    /// `out[i, j] ← act(out[i, j] + b[j])` over the rows of `out`, `act` tanh or the identity.
    pub(crate) fn bias_act(out: &mut [f32], b: &[f32], tanh: bool) {
        if b.is_empty() {
            return;
        }
        pulp::Arch::new().dispatch(
            #[inline(always)]
            || {
                for row in out.chunks_exact_mut(b.len()) {
                    if tanh {
                        for (o, &bi) in row.iter_mut().zip(b) {
                            *o = tanh_approx(*o + bi);
                        }
                    } else {
                        for (o, &bi) in row.iter_mut().zip(b) {
                            *o += bi;
                        }
                    }
                }
            },
        )
    }

    /// `g ← g · (1 - y²)`.
    pub(super) fn tanh_grad_in_place(g: &mut [f32], y: &[f32]) {
        pulp::Arch::new().dispatch(
            #[inline(always)]
            || {
                for (gi, &yi) in g.iter_mut().zip(y) {
                    *gi *= 1.0 - yi * yi;
                }
            },
        )
    }
}

/// The contiguous f32 range `start..end` of `t`'s storage, when it has one.
pub(crate) fn contiguous_f32(t: &FloatTensor<Flex>) -> Option<(usize, usize)> {
    if t.dtype() != DType::F32 {
        return None;
    }
    t.layout().contiguous_offsets()
}

/// `f` applied in place to `t`'s elements when `t` owns a contiguous f32 buffer (the usual case:
/// the output of the op before); `None` otherwise.
fn map_in_place(
    mut t: FloatTensor<Flex>,
    f: impl FnOnce(&mut [f32]),
) -> Result<FloatTensor<Flex>, FloatTensor<Flex>> {
    let Some((start, end)) = contiguous_f32(&t) else {
        return Err(t);
    };
    match t.try_storage_mut::<f32>() {
        Some(s) => {
            f(&mut s[start..end]);
            Ok(t)
        }
        None => Err(t),
    }
}

/// `f` applied to the f32 elements of `t`: in place where `t` owns a contiguous buffer, on a
/// fresh contiguous copy otherwise (shared or strided); `Err(t)` for other dtypes.
fn map_f32(
    t: FloatTensor<Flex>,
    f: impl Fn(&mut [f32]),
) -> Result<FloatTensor<Flex>, FloatTensor<Flex>> {
    let t = match map_in_place(t, &f) {
        Ok(t) => return Ok(t),
        Err(t) => t,
    };
    if t.dtype() != DType::F32 {
        return Err(t);
    }
    let shape = t.layout().shape().clone();
    let mut v = match t.as_slice::<f32>() {
        Some(s) => s.to_vec(),
        None => t
            .to_contiguous()
            .as_slice::<f32>()
            .expect("contiguous f32")
            .to_vec(),
    };
    f(&mut v);
    Ok(FloatTensor::<Flex>::from_data(TensorData::new(v, shape)))
}

impl FastTanhBackend for Flex {
    fn fast_tanh(x: FloatTensor<Self>) -> FloatTensor<Self> {
        map_f32(x, simd::tanh_in_place).unwrap_or_else(<Flex as FloatTensorOps<Flex>>::float_tanh)
    }

    fn fast_tanh_backward(y: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        let yc = if y.layout().shape() == grad.layout().shape() && y.dtype() == DType::F32 {
            Some(if contiguous_f32(&y).is_some() {
                y.clone()
            } else {
                y.to_contiguous()
            })
        } else {
            None
        };
        // The incoming gradient is usually owned by this node alone: scaled in place.
        let grad = match &yc {
            Some(yc) => {
                let ys = yc.as_slice::<f32>().expect("contiguous f32");
                match map_f32(grad, |g| simd::tanh_grad_in_place(g, ys)) {
                    Ok(g) => return g,
                    Err(grad) => grad,
                }
            }
            None => grad,
        };
        let one_minus =
            Flex::float_add_scalar(Flex::float_neg(Flex::float_mul(y.clone(), y)), 1f32.into());
        Flex::float_mul(grad, one_minus)
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

/// A dense layer `act(x·w + b)` as one operation with a hand-written backward pass.
///
/// burn's `Linear` followed by an activation records four to six autodiff nodes (reshapes,
/// the product, the broadcast bias add, the activation), and flex allocates every product's
/// output twice (a zeroed buffer, then an aligned copy of it). Small RL networks spend more time
/// there than in arithmetic. This op makes the same gemm call flex makes (same kernels, same
/// bits), adds the bias and applies the activation in one pass, and its backward makes the two
/// products and the bias sum burn's autodiff makes: results equal burn's to the bit (tested).
#[backend_extension(Flex, Autodiff)]
pub trait FastLinearBackend: Backend {
    /// `act(x·w + b)` for `x` `[m, k]`, `w` `[k, n]`, `b` `[n]`; `act` is the fast `tanh`
    /// when `tanh`, the identity otherwise.
    fn fast_linear(
        x: FloatTensor<Self>,
        w: FloatTensor<Self>,
        b: FloatTensor<Self>,
        tanh: bool,
    ) -> FloatTensor<Self>;
    /// `gz · wᵀ`: the gradient of the input from that of the pre-activation `gz`.
    fn fast_linear_grad_input(gz: FloatTensor<Self>, w: FloatTensor<Self>) -> FloatTensor<Self>;
    /// `xᵀ · gz`: the gradient of the weight.
    fn fast_linear_grad_weight(x: FloatTensor<Self>, gz: FloatTensor<Self>) -> FloatTensor<Self>;
}

/// flex runs products of at least this many multiply-adds on its thread pool; below it, one
/// single-threaded gemm call, which this module makes itself.
pub(crate) const FLEX_PARALLEL_THRESHOLD: usize = 192 * 192 * 192;

/// A 2-D f32 view: storage, offset of the first element, row and column strides.
#[derive(Clone, Copy)]
pub(crate) struct View2<'a> {
    data: &'a [f32],
    offset: usize,
    pub(crate) rows: usize,
    cols: usize,
    rs: isize,
    cs: isize,
}

impl<'a> View2<'a> {
    /// The row-major `rows × cols` block of `data` starting at `offset`, when it fits.
    pub(crate) fn row_major(
        data: &'a [f32],
        offset: usize,
        rows: usize,
        cols: usize,
    ) -> Option<Self> {
        let end = rows.checked_mul(cols)?.checked_add(offset)?;
        (end <= data.len()).then_some(Self {
            data,
            offset,
            rows,
            cols,
            rs: cols as isize,
            cs: 1,
        })
    }

    pub(crate) fn of(t: &'a FloatTensor<Flex>) -> Option<Self> {
        let shape = t.layout().shape();
        if t.dtype() != DType::F32 || shape.num_dims() != 2 {
            return None;
        }
        let strides = t.layout().strides();
        let (rs, cs) = (strides[0] as isize, strides[1] as isize);
        let (data, offset) = (t.storage::<f32>(), t.layout().start_offset());
        // The last element must lie inside the storage (the gemm call reads through pointers).
        let last = |n: usize, s: isize| (n.max(1) - 1).checked_mul(usize::try_from(s).ok()?);
        let end = offset
            .checked_add(last(shape[0], rs)?)?
            .checked_add(last(shape[1], cs)?)?;
        (shape[0] == 0 || shape[1] == 0 || end < data.len()).then_some(Self {
            data,
            offset,
            rows: shape[0],
            cols: shape[1],
            rs,
            cs,
        })
    }

    pub(crate) fn t(self) -> Self {
        Self {
            rows: self.cols,
            cols: self.rows,
            rs: self.cs,
            cs: self.rs,
            ..self
        }
    }
}

/// `lhs · rhs` into a new row-major buffer by the single-threaded gemm call flex's matmul makes
/// for products below its parallel threshold; `None` at or above it (or on mismatched shapes).
pub(crate) fn gemm_small(lhs: View2, rhs: View2) -> Option<Vec<f32>> {
    let mut out = vec![0f32; lhs.rows * rhs.cols];
    gemm_small_into(lhs, rhs, &mut out).then_some(out)
}

/// [`gemm_small`] writing the row-major product into `out` (`lhs.rows × rhs.cols` elements,
/// overwritten); false (nothing written) at or above the threshold or on mismatched shapes.
pub(crate) fn gemm_small_into(lhs: View2, rhs: View2, out: &mut [f32]) -> bool {
    let (m, k, n) = (lhs.rows, lhs.cols, rhs.cols);
    if rhs.rows != k
        || out.len() != m * n
        || m.saturating_mul(n).saturating_mul(k) >= FLEX_PARALLEL_THRESHOLD
    {
        return false;
    }
    if m == 0 || n == 0 || k == 0 {
        out.fill(0.0);
        return true;
    }
    // SAFETY: `View2::of` / `View2::slice` checked that every element `offset + i·rs + j·cs`
    // (non-negative strides) lies inside the view's live storage; `out` holds `m × n`
    // elements, row-major (checked above); gemm reads the two inputs and writes `out` only
    // (`read_dst` false: its old contents are not read).
    #[allow(unsafe_code)]
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            out.as_mut_ptr(),
            1,
            n as isize,
            false,
            lhs.data.as_ptr().add(lhs.offset),
            lhs.cs,
            lhs.rs,
            rhs.data.as_ptr().add(rhs.offset),
            rhs.cs,
            rhs.rs,
            0.0,
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
    true
}

/// `a · b` with either side transposed (a view, as burn's `transpose`): the direct call when
/// small, flex's matmul otherwise.
pub(crate) fn matmul_flex(
    a: FloatTensor<Flex>,
    ta: bool,
    b: FloatTensor<Flex>,
    tb: bool,
) -> FloatTensor<Flex> {
    if let (Some(av), Some(bv)) = (View2::of(&a), View2::of(&b)) {
        let av = if ta { av.t() } else { av };
        let bv = if tb { bv.t() } else { bv };
        if let Some(out) = gemm_small(av, bv) {
            return FloatTensor::<Flex>::from_data(TensorData::new(out, [av.rows, bv.cols]));
        }
    }
    let a = if ta { Flex::float_transpose(a) } else { a };
    let b = if tb { Flex::float_transpose(b) } else { b };
    Flex::float_matmul(a, b)
}

impl FastLinearBackend for Flex {
    fn fast_linear(
        x: FloatTensor<Self>,
        w: FloatTensor<Self>,
        b: FloatTensor<Self>,
        tanh: bool,
    ) -> FloatTensor<Self> {
        let n = w.layout().shape()[w.layout().shape().num_dims() - 1];
        if let (Some(xv), Some(wv), Some((start, end))) =
            (View2::of(&x), View2::of(&w), contiguous_f32(&b))
            && end - start == n
            && let Some(mut out) = gemm_small(xv, wv)
        {
            simd::bias_act(&mut out, &b.storage::<f32>()[start..end], tanh);
            return FloatTensor::<Self>::from_data(TensorData::new(out, [xv.rows, n]));
        }
        // Large or unusual inputs: flex's own operations, as burn's `Linear` makes them.
        let z = Flex::float_add(
            Flex::float_matmul(x, w),
            Flex::float_reshape(b, Shape::new([1, n])),
        );
        if tanh { Flex::fast_tanh(z) } else { z }
    }

    fn fast_linear_grad_input(gz: FloatTensor<Self>, w: FloatTensor<Self>) -> FloatTensor<Self> {
        matmul_flex(gz, false, w, true)
    }

    fn fast_linear_grad_weight(x: FloatTensor<Self>, gz: FloatTensor<Self>) -> FloatTensor<Self> {
        matmul_flex(x, true, gz, false)
    }
}

#[derive(Debug)]
struct FastLinearGrad;

impl<B: Backend + FastLinearBackend + FastTanhBackend> Backward<B, 3> for FastLinearGrad {
    /// The input, the weight, the output when the activation is tanh.
    type State = (FloatTensor<B>, FloatTensor<B>, Option<FloatTensor<B>>);

    fn backward(
        self,
        ops: Ops<Self::State, 3>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        let [node_x, node_w, node_b] = ops.parents;
        let grad = grads.consume::<B>(&ops.node);
        let (x, w, y) = ops.state;
        let gz = match y {
            Some(y) => B::fast_tanh_backward(y, grad),
            None => grad,
        };
        if let Some(node) = node_b {
            let n = gz.shape()[1];
            let db = B::float_reshape(B::float_sum_dim(gz.clone(), 0), Shape::new([n]));
            grads.register::<B>(node.id, db);
        }
        if let Some(node) = node_w {
            grads.register::<B>(node.id, B::fast_linear_grad_weight(x, gz.clone()));
        }
        if let Some(node) = node_x {
            grads.register::<B>(node.id, B::fast_linear_grad_input(gz, w));
        }
    }
}

impl<B, C> FastLinearBackend for Autodiff<B, C>
where
    B: Backend + FastLinearBackend + FastTanhBackend,
    C: CheckpointStrategy,
{
    fn fast_linear(
        x: FloatTensor<Self>,
        w: FloatTensor<Self>,
        b: FloatTensor<Self>,
        tanh: bool,
    ) -> FloatTensor<Self> {
        match FastLinearGrad
            .prepare::<C>([x.node(), w.node(), b.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let (xp, wp) = (x.primitive().clone(), w.primitive().clone());
                let y = B::fast_linear(
                    x.into_primitive(),
                    w.into_primitive(),
                    b.into_primitive(),
                    tanh,
                );
                prep.finish((xp, wp, tanh.then(|| y.clone())), y)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::fast_linear(
                x.into_primitive(),
                w.into_primitive(),
                b.into_primitive(),
                tanh,
            )),
        }
    }

    // Differentiable compositions (second-order use only).
    fn fast_linear_grad_input(gz: FloatTensor<Self>, w: FloatTensor<Self>) -> FloatTensor<Self> {
        Self::float_matmul(gz, Self::float_transpose(w))
    }

    fn fast_linear_grad_weight(x: FloatTensor<Self>, gz: FloatTensor<Self>) -> FloatTensor<Self> {
        Self::float_matmul(Self::float_transpose(x), gz)
    }
}

/// `act(linear(x))` for a dense layer, `act` the fast `tanh` when `tanh` and the identity
/// otherwise, as one fused operation (see [`FastLinearBackend`]) when `x` lives on flex and the
/// layer has a bias; `Err(x)` otherwise (callers use burn's `Linear`: `nn::linear_act`).
pub fn linear(layer: &Linear, x: Tensor<2>, tanh: bool) -> Result<Tensor<2>, Tensor<2>> {
    match &layer.bias {
        Some(bias) if is_flex(&x.device()) => Ok(Tensor::from_dispatch(
            <Dispatch as FastLinearBackend>::fast_linear(
                x.into_dispatch(),
                layer.weight.val().into_dispatch(),
                bias.val().into_dispatch(),
                tanh,
            ),
        )),
        _ => Err(x),
    }
}

pub(crate) fn is_flex(device: &Device) -> bool {
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

    #[test]
    fn shared_and_strided_inputs_are_left_alone_and_mapped_right() {
        let dev = Device::flex();
        let data: Vec<f32> = (0..24).map(|i| (i as f32 - 12.0) * 0.3).collect();
        let x = Tensor::<2>::from_data(TensorData::new(data.clone(), [4, 6]), &dev);
        // A clone shares x's buffer: the op must not write into it.
        let y = tanh(x.clone());
        assert_eq!(x.clone().into_data().try_into_vec::<f32>().unwrap(), data);
        let want: Vec<f32> = data.iter().map(|&v| tanh_approx(v)).collect();
        assert_eq!(y.into_data().try_into_vec::<f32>().unwrap(), want);
        // A transposed view is not contiguous.
        let yt = tanh(x.clone().transpose());
        let xt = x.transpose().into_data().try_into_vec::<f32>().unwrap();
        let want_t: Vec<f32> = xt.iter().map(|&v| tanh_approx(v)).collect();
        assert_eq!(yt.into_data().try_into_vec::<f32>().unwrap(), want_t);
        // An owned buffer is mapped in place: same values.
        let owned = Tensor::<2>::from_data(TensorData::new(data, [4, 6]), &dev);
        assert_eq!(tanh(owned).into_data().try_into_vec::<f32>().unwrap(), want);
    }

    /// The fused layer against burn's `Linear` (+ the fast `tanh`): outputs and the gradients
    /// of the input, weight and bias equal to the bit, below and above flex's parallel
    /// threshold, with and without the activation, on a strided input.
    #[test]
    fn fused_linear_matches_burn_to_the_bit() {
        use burn::module::Param;
        let dev = Device::flex().autodiff();
        let mut rng = crate::rng::Rng::seed_from(7);
        let mut vals =
            |n: usize| -> Vec<f32> { (0..n).map(|_| rng.normal() as f32).collect::<Vec<f32>>() };
        for &(m, k, n, tanh, transposed) in &[
            (256, 4, 64, true, false),
            (256, 64, 1, false, false),
            (33, 7, 5, true, true),
            (1024, 64, 128, true, false),
        ] {
            let layer = Linear {
                weight: Param::from_tensor(Tensor::<2>::from_data(
                    TensorData::new(vals(k * n), [k, n]),
                    &dev,
                )),
                bias: Some(Param::from_tensor(Tensor::<1>::from_data(
                    TensorData::new(vals(n), [n]),
                    &dev,
                ))),
            };
            let xs = vals(m * k);
            let make_x = || {
                let x = if transposed {
                    Tensor::<2>::from_data(TensorData::new(xs.clone(), [k, m]), &dev).transpose()
                } else {
                    Tensor::<2>::from_data(TensorData::new(xs.clone(), [m, k]), &dev)
                };
                x.require_grad()
            };
            let (x1, x2) = (make_x(), make_x());
            let y1 = linear(&layer, x1.clone(), tanh).expect("flex, with a bias");
            let z2 = layer.forward(x2.clone());
            let y2 = if tanh { super::tanh(z2) } else { z2 };
            let bits = |t: Tensor<2>| t.into_data().try_into_vec::<f32>().unwrap();
            assert_eq!(bits(y1.clone()), bits(y2.clone()), "forward {m}x{k}x{n}");
            let w_out = Tensor::<2>::from_data(TensorData::new(vals(m * n), [m, n]), &dev);
            let g1 = (y1 * w_out.clone()).sum().backward();
            let g2 = (y2 * w_out).sum().backward();
            assert_eq!(
                bits(x1.grad(&g1).unwrap()),
                bits(x2.grad(&g2).unwrap()),
                "input gradient {m}x{k}x{n}"
            );
            let wg = |g: &_| layer.weight.grad(g).unwrap().into_data();
            assert_eq!(wg(&g1), wg(&g2), "weight gradient {m}x{k}x{n}");
            let bg = |g: &_| layer.bias.as_ref().unwrap().grad(g).unwrap().into_data();
            assert_eq!(bg(&g1), bg(&g2), "bias gradient {m}x{k}x{n}");
        }
    }
}
