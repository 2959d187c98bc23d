//! Gymnasium spaces.
//!
//! Every value of a space travels as a flat `f32` slice in its *raw* encoding: a `Box` as its
//! elements (row-major), a `Discrete` as one number (the index), `MultiDiscrete` and
//! `MultiBinary` as one number per component, `Tuple` and `Dict` as their parts concatenated
//! (Dict in key order). Networks take the *flat* encoding ([`Space::flatten`]), which one-hot
//! encodes the discrete parts, as Gymnasium's `flatten` and SB3's `preprocess_obs` do.

use crate::rng::Rng;
use serde::{Deserialize, Serialize};

/// A Gymnasium space.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum Space {
    /// `{start, …, start + n - 1}`.
    Discrete {
        /// Number of values.
        n: usize,
        /// Smallest value.
        start: i64,
    },
    /// A box in R^shape with per-element bounds (may be ±inf), dtype f32.
    Box {
        /// Lower bounds, one per element.
        low: Vec<f32>,
        /// Upper bounds, one per element.
        high: Vec<f32>,
        /// Shape (row-major).
        shape: Vec<usize>,
    },
    /// Several independent discrete components, component i in `0..nvec[i]`.
    MultiDiscrete {
        /// Number of values of each component.
        nvec: Vec<usize>,
    },
    /// `n` binary flags.
    MultiBinary {
        /// Number of flags.
        n: usize,
    },
    /// An ordered tuple of spaces.
    Tuple {
        /// The parts.
        spaces: Vec<Space>,
    },
    /// Named spaces, kept sorted by key (as Gymnasium does).
    Dict {
        /// `(key, space)` pairs sorted by key.
        spaces: Vec<(String, Space)>,
    },
}

impl Space {
    /// `Discrete(n)` starting at 0.
    pub fn discrete(n: usize) -> Self {
        Space::Discrete { n, start: 0 }
    }

    /// A 1-D box with the given bounds.
    pub fn boxed(low: Vec<f32>, high: Vec<f32>) -> Self {
        let shape = vec![low.len()];
        Space::Box { low, high, shape }
    }

    /// A box of the given shape with the same bounds everywhere.
    pub fn uniform_box(low: f32, high: f32, shape: &[usize]) -> Self {
        let n = shape.iter().product();
        Space::Box {
            low: vec![low; n],
            high: vec![high; n],
            shape: shape.to_vec(),
        }
    }

    /// A Dict space; keys are sorted.
    pub fn dict(mut spaces: Vec<(String, Space)>) -> Self {
        spaces.sort_by(|a, b| a.0.cmp(&b.0));
        Space::Dict { spaces }
    }

    /// Length of the raw encoding.
    pub fn raw_dim(&self) -> usize {
        match self {
            Space::Discrete { .. } => 1,
            Space::Box { low, .. } => low.len(),
            Space::MultiDiscrete { nvec } => nvec.len(),
            Space::MultiBinary { n } => *n,
            Space::Tuple { spaces } => spaces.iter().map(Space::raw_dim).sum(),
            Space::Dict { spaces } => spaces.iter().map(|(_, s)| s.raw_dim()).sum(),
        }
    }

    /// Length of the flat (network input) encoding: discrete parts one-hot.
    pub fn flat_dim(&self) -> usize {
        match self {
            Space::Discrete { n, .. } => *n,
            Space::Box { low, .. } => low.len(),
            Space::MultiDiscrete { nvec } => nvec.iter().sum(),
            Space::MultiBinary { n } => *n,
            Space::Tuple { spaces } => spaces.iter().map(Space::flat_dim).sum(),
            Space::Dict { spaces } => spaces.iter().map(|(_, s)| s.flat_dim()).sum(),
        }
    }

    /// `[height, width, channels]` when this is an image as stable-baselines3's
    /// `is_image_space` sees one: a Box of rank 3, channels last (Gymnasium's layout) with 1,
    /// 3 or 4 of them, every bound `[0, 255]` (the pixels of a uint8 image).
    pub fn image_shape(&self) -> Option<[usize; 3]> {
        match self {
            Space::Box { low, high, shape }
                if shape.len() == 3
                    && matches!(shape[2], 1 | 3 | 4)
                    && low.iter().all(|&l| l == 0.0)
                    && high.iter().all(|&h| h == 255.0) =>
            {
                Some([shape[0], shape[1], shape[2]])
            }
            _ => None,
        }
    }

    /// Short human-readable form, as Gymnasium prints it.
    pub fn describe(&self) -> String {
        match self {
            Space::Discrete { n, start } if *start == 0 => format!("Discrete({n})"),
            Space::Discrete { n, start } => format!("Discrete({n}, start={start})"),
            Space::Box { shape, .. } => format!("Box(shape={shape:?}, float32)"),
            Space::MultiDiscrete { nvec } => format!("MultiDiscrete({nvec:?})"),
            Space::MultiBinary { n } => format!("MultiBinary({n})"),
            Space::Tuple { spaces } => {
                let p: Vec<String> = spaces.iter().map(Space::describe).collect();
                format!("Tuple({})", p.join(", "))
            }
            Space::Dict { spaces } => {
                let p: Vec<String> = spaces
                    .iter()
                    .map(|(k, s)| format!("{k}: {}", s.describe()))
                    .collect();
                format!("Dict({})", p.join(", "))
            }
        }
    }

    /// Does `raw` (raw encoding) belong to the space?
    pub fn contains(&self, raw: &[f32]) -> bool {
        self.check(raw).is_ok()
    }

    /// Like [`contains`](Self::contains) but says what is wrong.
    pub fn check(&self, raw: &[f32]) -> Result<(), String> {
        if raw.len() != self.raw_dim() {
            return Err(format!(
                "expected {} values for {}, got {}",
                self.raw_dim(),
                self.describe(),
                raw.len()
            ));
        }
        match self {
            Space::Discrete { n, start } => {
                let v = raw[0];
                if v.fract() != 0.0 || !(v as i64 >= *start && (v as i64) < start + *n as i64) {
                    return Err(format!(
                        "{v} is not an integer in [{start}, {})",
                        start + *n as i64
                    ));
                }
            }
            Space::Box { low, high, .. } => {
                for (i, &v) in raw.iter().enumerate() {
                    if v.is_nan() || v < low[i] || v > high[i] {
                        return Err(format!(
                            "element {i} = {v} is outside [{}, {}]",
                            low[i], high[i]
                        ));
                    }
                }
            }
            Space::MultiDiscrete { nvec } => {
                for (i, (&v, &n)) in raw.iter().zip(nvec).enumerate() {
                    if v.fract() != 0.0 || v < 0.0 || v as usize >= n {
                        return Err(format!("component {i} = {v} is not an integer in [0, {n})"));
                    }
                }
            }
            Space::MultiBinary { .. } => {
                for (i, &v) in raw.iter().enumerate() {
                    if v != 0.0 && v != 1.0 {
                        return Err(format!("flag {i} = {v} is not 0 or 1"));
                    }
                }
            }
            Space::Tuple { spaces } => {
                let mut o = 0;
                for (i, s) in spaces.iter().enumerate() {
                    let d = s.raw_dim();
                    s.check(&raw[o..o + d])
                        .map_err(|e| format!("part {i}: {e}"))?;
                    o += d;
                }
            }
            Space::Dict { spaces } => {
                let mut o = 0;
                for (k, s) in spaces {
                    let d = s.raw_dim();
                    s.check(&raw[o..o + d])
                        .map_err(|e| format!("key {k:?}: {e}"))?;
                    o += d;
                }
            }
        }
        Ok(())
    }

    /// Draws a value uniformly (bounded boxes), or as Gymnasium does for unbounded sides
    /// (normal for both unbounded, exponential for one).
    pub fn sample(&self, rng: &mut Rng, out: &mut Vec<f32>) {
        match self {
            Space::Discrete { n, start } => out.push((*start + rng.below(*n as u64) as i64) as f32),
            Space::Box { low, high, .. } => {
                for (&l, &h) in low.iter().zip(high) {
                    let v = match (l.is_finite(), h.is_finite()) {
                        (true, true) => rng.uniform_range(l as f64, h as f64),
                        (false, false) => rng.normal(),
                        (true, false) => l as f64 - (1.0 - rng.uniform()).ln(),
                        (false, true) => h as f64 + (1.0 - rng.uniform()).ln(),
                    };
                    out.push((v as f32).clamp(l, h));
                }
            }
            Space::MultiDiscrete { nvec } => {
                for &n in nvec {
                    out.push(rng.below(n as u64) as f32);
                }
            }
            Space::MultiBinary { n } => {
                for _ in 0..*n {
                    out.push(rng.below(2) as f32);
                }
            }
            Space::Tuple { spaces } => spaces.iter().for_each(|s| s.sample(rng, out)),
            Space::Dict { spaces } => spaces.iter().for_each(|(_, s)| s.sample(rng, out)),
        }
    }

    /// Raw → flat encoding (one-hot for discrete parts), appended to `out`.
    pub fn flatten(&self, raw: &[f32], out: &mut Vec<f32>) {
        match self {
            Space::Discrete { n, start } => {
                let i = (raw[0] as i64 - start) as usize;
                let base = out.len();
                out.resize(base + n, 0.0);
                if i < *n {
                    out[base + i] = 1.0;
                }
            }
            Space::Box { .. } | Space::MultiBinary { .. } => out.extend_from_slice(raw),
            Space::MultiDiscrete { nvec } => {
                for (&v, &n) in raw.iter().zip(nvec) {
                    let base = out.len();
                    out.resize(base + n, 0.0);
                    if (v as usize) < n {
                        out[base + v as usize] = 1.0;
                    }
                }
            }
            Space::Tuple { spaces } => {
                let mut o = 0;
                for s in spaces {
                    let d = s.raw_dim();
                    s.flatten(&raw[o..o + d], out);
                    o += d;
                }
            }
            Space::Dict { spaces } => {
                let mut o = 0;
                for (_, s) in spaces {
                    let d = s.raw_dim();
                    s.flatten(&raw[o..o + d], out);
                    o += d;
                }
            }
        }
    }

    /// Flat → raw encoding (argmax of each one-hot block), appended to `out`.
    pub fn unflatten(&self, flat: &[f32], out: &mut Vec<f32>) {
        fn argmax(x: &[f32]) -> usize {
            let mut b = 0;
            for i in 1..x.len() {
                if x[i] > x[b] {
                    b = i;
                }
            }
            b
        }
        match self {
            Space::Discrete { start, .. } => out.push((argmax(flat) as i64 + start) as f32),
            Space::Box { .. } | Space::MultiBinary { .. } => out.extend_from_slice(flat),
            Space::MultiDiscrete { nvec } => {
                let mut o = 0;
                for &n in nvec {
                    out.push(argmax(&flat[o..o + n]) as f32);
                    o += n;
                }
            }
            Space::Tuple { spaces } => {
                let mut o = 0;
                for s in spaces {
                    let d = s.flat_dim();
                    s.unflatten(&flat[o..o + d], out);
                    o += d;
                }
            }
            Space::Dict { spaces } => {
                let mut o = 0;
                for (_, s) in spaces {
                    let d = s.flat_dim();
                    s.unflatten(&flat[o..o + d], out);
                    o += d;
                }
            }
        }
    }

    /// Whether flattening is the identity (no discrete part to one-hot encode).
    pub fn flat_is_raw(&self) -> bool {
        match self {
            Space::Box { .. } | Space::MultiBinary { .. } => true,
            Space::Discrete { .. } | Space::MultiDiscrete { .. } => false,
            Space::Tuple { spaces } => spaces.iter().all(Space::flat_is_raw),
            Space::Dict { spaces } => spaces.iter().all(|(_, s)| s.flat_is_raw()),
        }
    }

    /// Clips a batch of raw Box actions to the bounds (other spaces: unchanged), as SB3 does
    /// before stepping the env.
    pub fn clip_to_bounds(&self, actions: &mut [f32]) {
        if let Some((lo, hi)) = self.bounds() {
            for (i, a) in actions.iter_mut().enumerate() {
                *a = a.clamp(lo[i % lo.len()], hi[i % hi.len()]);
            }
        }
    }

    /// Box bounds (`low`, `high`), if this is a Box.
    pub fn bounds(&self) -> Option<(&[f32], &[f32])> {
        match self {
            Space::Box { low, high, .. } => Some((low, high)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_are_rank_3_boxes_of_pixels_channels_last() {
        let img = |shape: &[usize], hi: f32| Space::uniform_box(0.0, hi, shape);
        assert_eq!(img(&[64, 64, 3], 255.0).image_shape(), Some([64, 64, 3]));
        assert_eq!(img(&[84, 84, 1], 255.0).image_shape(), Some([84, 84, 1]));
        assert_eq!(img(&[64, 64, 3], 1.0).image_shape(), None);
        assert_eq!(img(&[3, 64, 64], 255.0).image_shape(), None);
        assert_eq!(img(&[64, 64], 255.0).image_shape(), None);
        assert_eq!(Space::discrete(4).image_shape(), None);
    }

    #[test]
    fn contains_sample_flatten_roundtrip() {
        let space = Space::Tuple {
            spaces: vec![
                Space::discrete(3),
                Space::boxed(vec![-1.0, 0.0], vec![1.0, 2.0]),
                Space::MultiDiscrete { nvec: vec![2, 4] },
                Space::MultiBinary { n: 3 },
                Space::dict(vec![
                    ("b".into(), Space::Discrete { n: 2, start: 5 }),
                    ("a".into(), Space::uniform_box(0.0, 1.0, &[1])),
                ]),
            ],
        };
        assert_eq!(space.raw_dim(), 1 + 2 + 2 + 3 + 2);
        assert_eq!(space.flat_dim(), 3 + 2 + 6 + 3 + 3);
        let mut rng = Rng::seed_from(3);
        for _ in 0..200 {
            let mut raw = Vec::new();
            space.sample(&mut rng, &mut raw);
            assert!(space.contains(&raw), "{raw:?}");
            let mut flat = Vec::new();
            space.flatten(&raw, &mut flat);
            assert_eq!(flat.len(), space.flat_dim());
            let mut back = Vec::new();
            space.unflatten(&flat, &mut back);
            assert_eq!(back, raw);
        }
        let d = Space::discrete(2);
        assert!(!d.contains(&[2.0]));
        assert!(!d.contains(&[0.5]));
        assert!(
            d.check(&[0.0, 1.0])
                .unwrap_err()
                .contains("expected 1 values")
        );
        let b = Space::boxed(vec![-1.0], vec![1.0]);
        assert!(b.check(&[1.5]).unwrap_err().contains("outside"));
        assert!(!b.contains(&[f32::NAN]));
    }

    #[test]
    fn unbounded_box_samples_finite() {
        let s = Space::boxed(
            vec![f32::NEG_INFINITY, 0.0, f32::NEG_INFINITY],
            vec![f32::INFINITY, f32::INFINITY, 1.0],
        );
        let mut rng = Rng::seed_from(0);
        for _ in 0..100 {
            let mut v = Vec::new();
            s.sample(&mut rng, &mut v);
            assert!(v.iter().all(|x| x.is_finite()) && s.contains(&v));
        }
    }
}
