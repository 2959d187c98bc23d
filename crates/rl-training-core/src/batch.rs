//! Moving batches between host arrays and tensors, shared by every algorithm family.

use crate::logger::Metrics;
use crate::spaces::Space;
use crate::vec_env::EpisodeStats;
use burn::tensor::{Device, Tensor, TensorData};

/// Flattens a batch of raw observations `[n × raw_dim]` into network inputs `[n × flat_dim]`.
pub fn flatten_batch(space: &Space, raw: &[f32], out: &mut Vec<f32>) {
    out.clear();
    if space.flat_is_raw() {
        out.extend_from_slice(raw);
        return;
    }
    let d = space.raw_dim();
    for row in raw.chunks(d) {
        space.flatten(row, out);
    }
}

/// A host array as a `[rows, cols]` tensor on `device`.
pub fn tensor2(data: Vec<f32>, rows: usize, cols: usize, device: &Device) -> Tensor<2> {
    Tensor::from_data(TensorData::new(data, [rows, cols]), device)
}

/// A host array as a `[n]` tensor on `device`.
pub fn tensor1(data: Vec<f32>, device: &Device) -> Tensor<1> {
    let n = data.len();
    Tensor::from_data(TensorData::new(data, [n]), device)
}

/// A tensor read back to the host.
pub fn host<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().try_into_vec::<f32>().expect("f32 tensor")
}

/// Adds CleanRL's episode charts (`charts/episodic_return`, `charts/episodic_length`,
/// `charts/episodes`) for the episodes that finished, if any.
pub fn episode_metrics(episodes: &[EpisodeStats], m: &mut Metrics) {
    if episodes.is_empty() {
        return;
    }
    let n = episodes.len() as f64;
    m.insert(
        "charts/episodic_return".into(),
        episodes.iter().map(|e| e.ret).sum::<f64>() / n,
    );
    m.insert(
        "charts/episodic_length".into(),
        episodes.iter().map(|e| e.len as f64).sum::<f64>() / n,
    );
    m.insert("charts/episodes".into(), n);
}
