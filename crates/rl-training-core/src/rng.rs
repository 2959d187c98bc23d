//! The random-number generator every algorithm owns.
//!
//! xoshiro256++ with its whole state in four `u64`s, so a checkpoint can save and restore it
//! exactly. It implements [`rand::RngCore`], so `rand` and `rand_distr` distributions draw from it.

use rand::RngCore;
use serde::{Deserialize, Serialize};

/// A small, fast, checkpointable RNG (xoshiro256++).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rng {
    s: [u64; 4],
}

fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[allow(clippy::should_implement_trait)] // `next` is the generator's raw output, not an iterator
impl Rng {
    /// A generator seeded from one `u64` (expanded with SplitMix64, as the xoshiro authors advise).
    pub fn seed_from(seed: u64) -> Self {
        let mut x = seed;
        let s = [
            splitmix64(&mut x),
            splitmix64(&mut x),
            splitmix64(&mut x),
            splitmix64(&mut x),
        ];
        Self { s }
    }

    /// A generator for a named purpose, derived from a run seed: the same (seed, stream) always
    /// gives the same sequence, and different streams are independent for practical purposes.
    pub fn for_stream(seed: u64, stream: &str) -> Self {
        // FNV-1a of the stream name, mixed into the seed.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in stream.bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01B3);
        }
        Self::seed_from(seed ^ h.rotate_left(17))
    }

    /// The next raw 64-bit output.
    #[inline]
    pub fn next(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in `[0, 1)` with 53 bits of precision.
    #[inline]
    pub fn uniform(&mut self) -> f64 {
        (self.next() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `[low, high)`.
    #[inline]
    pub fn uniform_range(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.uniform()
    }

    /// Uniform integer in `[0, n)` (`n > 0`), without modulo bias.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        // Lemire's multiply-shift with rejection.
        let mut m = (self.next() as u128) * (n as u128);
        if (m as u64) < n {
            let t = n.wrapping_neg() % n;
            while (m as u64) < t {
                m = (self.next() as u128) * (n as u128);
            }
        }
        (m >> 64) as u64
    }

    /// Standard normal draw (Box-Muller on two uniforms; no cached second value, so the state
    /// is just the four words).
    #[inline]
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform(); // (0, 1]
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    /// A fresh seed for a child generator or an environment.
    pub fn next_seed(&mut self) -> u64 {
        self.next()
    }

    /// Fisher-Yates shuffle.
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
    }

    /// A random permutation of `0..n`.
    pub fn permutation(&mut self, n: usize) -> Vec<usize> {
        let mut v: Vec<usize> = (0..n).collect();
        self.shuffle(&mut v);
        v
    }
}

impl RngCore for Rng {
    fn next_u32(&mut self) -> u32 {
        (self.next() >> 32) as u32
    }
    fn next_u64(&mut self) -> u64 {
        self.next()
    }
    fn fill_bytes(&mut self, dst: &mut [u8]) {
        for chunk in dst.chunks_mut(8) {
            let v = self.next().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_state_roundtrip() {
        let mut a = Rng::seed_from(7);
        let mut b = Rng::seed_from(7);
        for _ in 0..10 {
            assert_eq!(a.next(), b.next());
        }
        let saved = serde_json::to_string(&a).unwrap();
        let mut c: Rng = serde_json::from_str(&saved).unwrap();
        assert_eq!(a.next(), c.next());
        assert_ne!(
            Rng::for_stream(0, "env").next(),
            Rng::for_stream(0, "policy").next()
        );
    }

    #[test]
    fn below_and_uniform_are_in_range_and_roughly_uniform() {
        let mut r = Rng::seed_from(1);
        let mut counts = [0usize; 5];
        for _ in 0..50_000 {
            counts[r.below(5) as usize] += 1;
            let u = r.uniform();
            assert!((0.0..1.0).contains(&u));
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
        let n = 100_000;
        let (mut m, mut v) = (0.0, 0.0);
        for _ in 0..n {
            let x = r.normal();
            m += x;
            v += x * x;
        }
        m /= n as f64;
        v = v / n as f64 - m * m;
        assert!(m.abs() < 0.02 && (v - 1.0).abs() < 0.02, "mean {m} var {v}");
    }
}
