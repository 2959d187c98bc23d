//! The shared noise table (Salimans et al. 2017): one block of standard-normal draws that
//! every worker reads; a perturbation is the slice at an offset.

use rl_training_core::Rng;
use std::sync::Arc;

/// Standard-normal noise shared by reference.
#[derive(Debug, Clone)]
pub struct NoiseTable {
    noise: Arc<Vec<f32>>,
}

impl NoiseTable {
    /// `len` draws from a generator seeded with `seed`.
    pub fn new(len: usize, seed: u64) -> Self {
        let mut rng = Rng::for_stream(seed, "noise-table");
        Self {
            noise: Arc::new((0..len).map(|_| rng.normal() as f32).collect()),
        }
    }

    /// Number of draws.
    pub fn len(&self) -> usize {
        self.noise.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.noise.is_empty()
    }

    /// The `dim` draws at `offset`.
    pub fn slice(&self, offset: usize, dim: usize) -> &[f32] {
        &self.noise[offset..offset + dim]
    }

    /// A random offset with room for `dim` draws.
    pub fn sample_offset(&self, rng: &mut Rng, dim: usize) -> usize {
        rng.below((self.len() - dim + 1) as u64) as usize
    }
}
