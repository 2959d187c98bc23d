//! Walking a module's float parameters in a fixed order: flat views of gradients, in-place
//! updates that keep each parameter's autodiff state, and safetensors save/load by path.
//!
//! The order is the derive(Module) field order, the same on every run, so flat optimizer
//! state and checkpoints line up with parameters without burn's random `ParamId`s.

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::tensor::{Device, Tensor, TensorData};
use std::collections::BTreeMap;

/// Name and shape of one parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamInfo {
    /// Dotted path, e.g. `actor.layers.0.weight`.
    pub path: String,
    /// Shape.
    pub shape: Vec<usize>,
}

impl ParamInfo {
    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

#[derive(Default)]
struct PathTracker(Vec<String>);

impl PathTracker {
    fn enter(&mut self, n: &str) {
        self.0.push(n.to_string());
    }
    fn exit(&mut self) {
        self.0.pop();
    }
    fn path(&self) -> String {
        self.0.join(".")
    }
}

struct InfoVisitor {
    path: PathTracker,
    out: Vec<ParamInfo>,
}

impl ModuleVisitor for InfoVisitor {
    fn enter_module(&mut self, name: &str, _: &str) {
        self.path.enter(name)
    }
    fn exit_module(&mut self, _: &str, _: &str) {
        self.path.exit()
    }
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        self.out.push(ParamInfo {
            path: self.path.path(),
            shape: param.val().dims().to_vec(),
        });
    }
}

/// Paths and shapes of the module's float parameters, in walking order.
pub fn param_infos<M: Module>(module: &M) -> Vec<ParamInfo> {
    let mut v = InfoVisitor {
        path: PathTracker::default(),
        out: Vec::new(),
    };
    module.visit(&mut v);
    v.out
}

struct FlatGradVisitor<'a> {
    grads: &'a mut GradientsParams,
    parts: Vec<Tensor<1>>,
    device: Device,
}

impl ModuleVisitor for FlatGradVisitor<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let n: usize = param.val().dims().iter().product();
        let g = match self.grads.remove::<D>(param.id) {
            Some(g) => g.inner().reshape([n]),
            // A parameter that did not take part in the loss gets a zero gradient.
            None => Tensor::zeros([n], &self.device),
        };
        self.parts.push(g);
    }
}

/// All gradients of `module` concatenated into one flat vector (inner backend, no autodiff),
/// in walking order; parameters without a gradient contribute zeros.
pub fn flat_grads<M: Module>(
    module: &M,
    grads: burn::tensor::Gradients,
    device: &Device,
) -> Tensor<1> {
    let mut gp = GradientsParams::from_grads(grads, module);
    let mut v = FlatGradVisitor {
        grads: &mut gp,
        parts: Vec::new(),
        device: device.clone().inner(),
    };
    module.visit(&mut v);
    Tensor::cat(v.parts, 0)
}

struct FlatParamVisitor {
    parts: Vec<Tensor<1>>,
}

impl ModuleVisitor for FlatParamVisitor {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let n: usize = param.val().dims().iter().product();
        self.parts.push(param.val().inner().reshape([n]));
    }
}

/// All parameters concatenated into one flat vector (inner backend), in walking order.
pub fn flat_params<M: Module>(module: &M) -> Tensor<1> {
    let mut v = FlatParamVisitor { parts: Vec::new() };
    module.visit(&mut v);
    Tensor::cat(v.parts, 0)
}

struct SubFlatMapper {
    delta: Tensor<1>,
    offset: usize,
}

impl ModuleMapper for SubFlatMapper {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let (id, tensor, mapper) = param.consume();
        let dims = tensor.dims();
        let n: usize = dims.iter().product();
        let d = self.delta.clone().narrow(0, self.offset, n).reshape(dims);
        self.offset += n;
        Param::from_mapped_value(
            id,
            restore_like(&tensor, tensor.clone().inner() - d),
            mapper,
        )
    }
}

struct SetFlatMapper {
    values: Tensor<1>,
    offset: usize,
}

impl ModuleMapper for SetFlatMapper {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let (id, tensor, mapper) = param.consume();
        let dims = tensor.dims();
        let n: usize = dims.iter().product();
        let v = self.values.clone().narrow(0, self.offset, n).reshape(dims);
        self.offset += n;
        Param::from_mapped_value(id, restore_like(&tensor, v), mapper)
    }
}

/// `updated` (inner backend) with the autodiff state of `original` (autodiff on or off,
/// gradient required or not).
fn restore_like<const D: usize>(original: &Tensor<D>, updated: Tensor<D>) -> Tensor<D> {
    let updated = updated.to_device(&original.device().inner());
    if original.is_autodiff() {
        let t = Tensor::from_inner(updated);
        if original.is_require_grad() {
            t.require_grad()
        } else {
            t
        }
    } else {
        updated
    }
}

/// `module` with every parameter decreased by its slice of the flat `delta` (walking order).
pub fn sub_flat<M: Module>(module: M, delta: Tensor<1>) -> M {
    module.map(&mut SubFlatMapper { delta, offset: 0 })
}

/// `module` with its parameters replaced by the flat `values` (walking order).
pub fn set_flat<M: Module>(module: M, values: Tensor<1>) -> M {
    module.map(&mut SetFlatMapper { values, offset: 0 })
}

/// Number of float parameters.
pub fn num_params<M: Module>(module: &M) -> usize {
    param_infos(module).iter().map(ParamInfo::numel).sum()
}

/// Errors reading saved tensors.
#[derive(Debug, thiserror::Error)]
pub enum TensorFileError {
    /// Not a readable safetensors file.
    #[error("{file}: not a valid safetensors file: {reason}")]
    Format {
        /// The file.
        file: String,
        /// Why.
        reason: String,
    },
    /// A tensor is missing or has the wrong shape or dtype.
    #[error("{file}: tensor {name:?}: {reason}")]
    Tensor {
        /// The file.
        file: String,
        /// Tensor name.
        name: String,
        /// What is wrong.
        reason: String,
    },
}

/// Named f32 tensors, serialized as safetensors.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TensorMap(pub BTreeMap<String, (Vec<usize>, Vec<f32>)>);

impl TensorMap {
    /// Adds a tensor.
    pub fn insert(&mut self, name: impl Into<String>, shape: Vec<usize>, data: Vec<f32>) {
        self.0.insert(name.into(), (shape, data));
    }

    /// Adds every tensor of `other`, its name prefixed with `prefix`.
    pub fn extend_prefixed(&mut self, prefix: &str, other: TensorMap) {
        for (k, v) in other.0 {
            self.0.insert(format!("{prefix}{k}"), v);
        }
    }

    /// Removes the tensors whose names start with `prefix` and returns them without it.
    pub fn split_off_prefix(&mut self, prefix: &str) -> TensorMap {
        let keys: Vec<String> = self
            .0
            .keys()
            .filter(|k| k.starts_with(prefix))
            .cloned()
            .collect();
        TensorMap(
            keys.into_iter()
                .map(|k| {
                    let v = self.0.remove(&k).expect("listed");
                    (k[prefix.len()..].to_string(), v)
                })
                .collect(),
        )
    }

    /// Serializes to safetensors bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let bytes: Vec<Vec<u8>> = self
            .0
            .values()
            .map(|(_, d)| d.iter().flat_map(|v| v.to_le_bytes()).collect())
            .collect();
        let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = self
            .0
            .iter()
            .zip(&bytes)
            .map(|((k, (shape, _)), b)| {
                (
                    k.clone(),
                    safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), b)
                        .expect("shape matches data"),
                )
            })
            .collect();
        safetensors::serialize(views, None).expect("in-memory serialization")
    }

    /// Parses safetensors bytes; `file` names the source in errors.
    pub fn from_bytes(bytes: &[u8], file: &str) -> Result<Self, TensorFileError> {
        let st =
            safetensors::SafeTensors::deserialize(bytes).map_err(|e| TensorFileError::Format {
                file: file.into(),
                reason: e.to_string(),
            })?;
        let mut map = BTreeMap::new();
        for (name, view) in st.tensors() {
            if view.dtype() != safetensors::Dtype::F32 {
                return Err(TensorFileError::Tensor {
                    file: file.into(),
                    name,
                    reason: format!("dtype {:?}, expected F32", view.dtype()),
                });
            }
            let data: Vec<f32> = view
                .data()
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            map.insert(name, (view.shape().to_vec(), data));
        }
        Ok(Self(map))
    }

    /// Removes and returns tensor `name`, checking its shape.
    pub fn take(
        &mut self,
        name: &str,
        shape: &[usize],
        file: &str,
    ) -> Result<Vec<f32>, TensorFileError> {
        let (s, d) = self.0.remove(name).ok_or_else(|| TensorFileError::Tensor {
            file: file.into(),
            name: name.into(),
            reason: "missing".into(),
        })?;
        if s != shape {
            return Err(TensorFileError::Tensor {
                file: file.into(),
                name: name.into(),
                reason: format!("shape {s:?}, expected {shape:?}"),
            });
        }
        Ok(d)
    }
}

/// A flat f32 vector read back to the host.
pub fn to_vec1(t: Tensor<1>) -> Vec<f32> {
    t.into_data().try_into_vec::<f32>().expect("f32 data")
}

/// The module's parameters as named tensors (path → shape, data).
pub fn module_tensors<M: Module>(module: &M) -> TensorMap {
    let infos = param_infos(module);
    let flat = to_vec1(flat_params(module));
    let mut map = TensorMap::default();
    let mut o = 0;
    for p in infos {
        let n = p.numel();
        map.insert(p.path, p.shape, flat[o..o + n].to_vec());
        o += n;
    }
    map
}

/// Loads parameters by path from `map` into `module`; every parameter must be present with its
/// shape, and no extra tensor may remain.
pub fn load_module_tensors<M: Module>(
    module: M,
    map: &TensorMap,
    file: &str,
    device: &Device,
) -> Result<M, TensorFileError> {
    let mut map = map.clone();
    let mut flat = Vec::new();
    for p in param_infos(&module) {
        flat.extend(map.take(&p.path, &p.shape, file)?);
    }
    if let Some(extra) = map.0.keys().next() {
        return Err(TensorFileError::Tensor {
            file: file.into(),
            name: extra.clone(),
            reason: "not a parameter of this model".into(),
        });
    }
    let n = flat.len();
    let values = Tensor::<1>::from_data(TensorData::new(flat, [n]), &device.clone().inner());
    Ok(set_flat(module, values))
}

/// [`load_module_tensors`] in place: `module`'s weights become those of `map` (named
/// `"weights"` in errors).
pub fn set_module_tensors<M: Module>(
    module: &mut M,
    map: &TensorMap,
    device: &Device,
) -> Result<(), TensorFileError> {
    *module = load_module_tensors(module.clone(), map, "weights", device)?;
    Ok(())
}

/// `target ← τ·online + (1 − τ)·target` over all parameters (τ = 1: a hard copy).
pub fn polyak<M: Module>(target: M, online: &M, tau: f64) -> M {
    let src = flat_params(online);
    if tau >= 1.0 {
        return set_flat(target, src);
    }
    let dst = flat_params(&target);
    let dev = dst.device();
    set_flat(
        target,
        src.to_device(&dev).mul_scalar(tau) + dst.mul_scalar(1.0 - tau),
    )
}
