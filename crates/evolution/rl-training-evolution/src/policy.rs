//! Policies as flat parameter vectors, evaluated on the host: a linear map (ARS) or a tanh MLP
//! (OpenAI-ES), from normalized observations to Discrete actions (argmax) or Box actions
//! (clipped to the bounds).

use rl_training_core::wrappers::RunningMeanStd;
use rl_training_core::{Rng, Space};
use serde::{Deserialize, Serialize};

/// Policy architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicyArch {
    /// `a = W x` (ARS's linear policy; `bias` adds `+ b`).
    Linear,
    /// Hidden tanh layers of `net_arch`, then a linear output.
    Mlp,
}

/// Hidden-layer activation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HiddenActivation {
    /// `tanh` (OpenAI-ES).
    Tanh,
    /// `max(0, x)` (sb3-contrib's ARS MLP).
    Relu,
}

/// How outputs become actions.
#[derive(Debug, Clone, PartialEq)]
enum ActionMap {
    /// The argmax of the outputs, shifted by `start`.
    Discrete { start: i64 },
    /// The outputs clipped to the bounds, or squashed by `tanh` and rescaled onto them.
    Box {
        low: Vec<f32>,
        high: Vec<f32>,
        squash: bool,
    },
}

/// A policy whose parameters are one flat vector: layer by layer, the weights `[out × in]`
/// then the biases.
#[derive(Debug, Clone, PartialEq)]
pub struct FlatPolicy {
    /// Flattened observation length.
    pub obs_dim: usize,
    /// Network outputs (Discrete: `n`; Box: its dimension).
    pub out_dim: usize,
    layers: Vec<(usize, usize)>,
    bias: bool,
    activation: HiddenActivation,
    action: ActionMap,
    obs_space: Space,
}

impl FlatPolicy {
    /// A policy for the spaces (Box observations; Discrete or Box actions); `squash`: Box
    /// actions are `tanh` outputs rescaled onto the bounds instead of clipped outputs.
    pub fn new(
        obs_space: &Space,
        act_space: &Space,
        arch: PolicyArch,
        hidden: &[usize],
        activation: HiddenActivation,
        bias: bool,
        squash: bool,
    ) -> Result<Self, String> {
        let (out_dim, action) = match act_space {
            Space::Discrete { n, start } => (*n, ActionMap::Discrete { start: *start }),
            Space::Box { low, high, .. } => (
                low.len(),
                ActionMap::Box {
                    low: low.clone(),
                    high: high.clone(),
                    squash,
                },
            ),
            other => {
                return Err(format!(
                    "evolution strategies take Discrete or Box actions, not {}",
                    other.describe()
                ));
            }
        };
        let obs_dim = obs_space.flat_dim();
        let sizes: Vec<usize> = match arch {
            PolicyArch::Linear => vec![obs_dim, out_dim],
            PolicyArch::Mlp => std::iter::once(obs_dim)
                .chain(hidden.iter().copied())
                .chain(std::iter::once(out_dim))
                .collect(),
        };
        Ok(Self {
            obs_dim,
            out_dim,
            layers: sizes.windows(2).map(|w| (w[0], w[1])).collect(),
            bias,
            activation,
            action,
            obs_space: obs_space.clone(),
        })
    }

    /// Number of parameters.
    pub fn num_params(&self) -> usize {
        self.layers
            .iter()
            .map(|&(i, o)| o * i + if self.bias { o } else { 0 })
            .sum()
    }

    /// Initial parameters: zeros for a linear policy (ARS), otherwise torch's default
    /// `Linear` init, `U(−1/√fan_in, 1/√fan_in)` for weights and biases (sb3-contrib).
    pub fn init(&self, rng: &mut Rng) -> Vec<f32> {
        if self.layers.len() == 1 {
            return vec![0.0; self.num_params()];
        }
        let mut p = Vec::with_capacity(self.num_params());
        for &(i, o) in &self.layers {
            let k = 1.0 / (i as f64).sqrt();
            let n = o * i + if self.bias { o } else { 0 };
            p.extend((0..n).map(|_| rng.uniform_range(-k, k) as f32));
        }
        p
    }

    /// Network outputs for a flattened, normalized observation.
    pub fn forward(&self, params: &[f32], x: &[f32]) -> Vec<f32> {
        let mut h = x.to_vec();
        let mut off = 0;
        let last = self.layers.len() - 1;
        for (l, &(i, o)) in self.layers.iter().enumerate() {
            let w = &params[off..off + o * i];
            off += o * i;
            let mut y: Vec<f32> = (0..o)
                .map(|r| {
                    w[r * i..(r + 1) * i]
                        .iter()
                        .zip(&h)
                        .map(|(a, b)| a * b)
                        .sum()
                })
                .collect();
            if self.bias {
                y.iter_mut()
                    .zip(&params[off..off + o])
                    .for_each(|(v, b)| *v += b);
                off += o;
            }
            if l < last {
                match self.activation {
                    HiddenActivation::Tanh => y.iter_mut().for_each(|v| *v = v.tanh()),
                    HiddenActivation::Relu => y.iter_mut().for_each(|v| *v = v.max(0.0)),
                }
            }
            h = y;
        }
        h
    }

    /// The action (raw encoding) for a raw observation, normalized with `stats`.
    pub fn act(&self, params: &[f32], obs: &[f32], stats: &ObsStats) -> Vec<f32> {
        let x = stats.normalize(&self.flatten(obs));
        let out = self.forward(params, &x);
        match &self.action {
            ActionMap::Discrete { start } => {
                let best = out
                    .iter()
                    .enumerate()
                    .fold(
                        (0, f32::NEG_INFINITY),
                        |b, (i, &v)| if v > b.1 { (i, v) } else { b },
                    )
                    .0;
                vec![(best as i64 + start) as f32]
            }
            ActionMap::Box { low, high, squash } => out
                .iter()
                .enumerate()
                .map(|(i, &v)| {
                    if *squash {
                        low[i] + (v.tanh() + 1.0) * 0.5 * (high[i] - low[i])
                    } else {
                        v.clamp(low[i], high[i])
                    }
                })
                .collect(),
        }
    }

    /// Raw → flat observation.
    pub fn flatten(&self, obs: &[f32]) -> Vec<f32> {
        let mut flat = Vec::with_capacity(self.obs_dim);
        self.obs_space.flatten(obs, &mut flat);
        flat
    }
}

/// Observation statistics (ARS V2, OpenAI-ES): observations are normalized by the mean and
/// standard deviation of every observation seen in earlier iterations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObsStats {
    /// Whether observations are normalized at all.
    pub enabled: bool,
    /// The running moments.
    pub rms: RunningMeanStd,
}

impl ObsStats {
    /// Statistics for `dim` elements (identity until updated).
    pub fn new(dim: usize, enabled: bool) -> Self {
        Self {
            enabled,
            rms: RunningMeanStd::new(dim),
        }
    }

    /// `(x − mean) / √(var + 1e-8)` clipped to ±10 (as SB3's `VecNormalize`), or `x` when
    /// disabled.
    pub fn normalize(&self, x: &[f32]) -> Vec<f32> {
        if !self.enabled {
            return x.to_vec();
        }
        x.iter()
            .enumerate()
            .map(|(i, &v)| {
                let z = (v as f64 - self.rms.mean[i]) / (self.rms.var[i] + 1e-8).sqrt();
                z.clamp(-10.0, 10.0) as f32
            })
            .collect()
    }

    /// Merges the observations of an episode (`sum`, `sum_sq` per element, `count`).
    pub fn merge(&mut self, sum: &[f64], sum_sq: &[f64], count: f64) {
        if !self.enabled || count <= 0.0 {
            return;
        }
        let mean: Vec<f64> = sum.iter().map(|s| s / count).collect();
        let var: Vec<f64> = sum_sq
            .iter()
            .zip(&mean)
            .map(|(q, m)| (q / count - m * m).max(0.0))
            .collect();
        self.rms.update_from_moments(&mean, &var, count);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_and_mlp_shapes_and_actions() {
        let obs = Space::boxed(vec![-1.0; 3], vec![1.0; 3]);
        let tanh = HiddenActivation::Tanh;
        let lin = FlatPolicy::new(
            &obs,
            &Space::discrete(2),
            PolicyArch::Linear,
            &[],
            tanh,
            false,
            false,
        )
        .unwrap();
        assert_eq!(lin.num_params(), 6);
        // Row 1 picks x[2]: action 1 when x[2] > x[0].
        let p = [1.0, 0.0, 0.0, 0.0, 0.0, 1.0];
        let s = ObsStats::new(3, false);
        assert_eq!(lin.act(&p, &[0.1, 0.0, 0.5], &s), vec![1.0]);
        assert_eq!(lin.act(&p, &[0.9, 0.0, 0.5], &s), vec![0.0]);
        let act = Space::boxed(vec![-2.0], vec![2.0]);
        let mlp = FlatPolicy::new(&obs, &act, PolicyArch::Mlp, &[4], tanh, true, false).unwrap();
        assert_eq!(mlp.num_params(), 4 * 3 + 4 + 4 + 1);
        let mut params = vec![0.0f32; mlp.num_params()];
        // Output bias 5 is clipped to the bound 2.
        let n = params.len();
        params[n - 1] = 5.0;
        assert_eq!(mlp.act(&params, &[0.0; 3], &s), vec![2.0]);
        // Squashed: tanh(5) rescaled onto [-2, 2].
        let sq = FlatPolicy::new(
            &obs,
            &act,
            PolicyArch::Mlp,
            &[4],
            HiddenActivation::Relu,
            true,
            true,
        )
        .unwrap();
        assert!((sq.act(&params, &[0.0; 3], &s)[0] - 2.0 * 5f32.tanh()).abs() < 1e-6);
        let init = mlp.init(&mut Rng::seed_from(0));
        assert_eq!(init.len(), mlp.num_params());
        assert_eq!(lin.init(&mut Rng::seed_from(0)), vec![0.0; 6]);
    }

    #[test]
    fn merged_statistics_equal_the_whole_sample() {
        let xs = [
            [1.0, 10.0],
            [3.0, 14.0],
            [2.0, 9.0],
            [6.0, 11.0],
            [0.0, 8.0],
        ];
        let mut s = ObsStats::new(2, true);
        // Two episodes of 2 and 3 observations.
        for chunk in [&xs[..2], &xs[2..]] {
            let (mut sum, mut sq) = (vec![0.0; 2], vec![0.0; 2]);
            for x in chunk {
                for i in 0..2 {
                    sum[i] += x[i];
                    sq[i] += x[i] * x[i];
                }
            }
            s.merge(&sum, &sq, chunk.len() as f64);
        }
        let mean0 = 12.0 / 5.0;
        let var0 = xs.iter().map(|x| (x[0] - mean0).powi(2)).sum::<f64>() / 5.0;
        // The initial pseudo-count 1e-4 (mean 0, var 1) shifts the result slightly.
        assert!((s.rms.mean[0] - mean0).abs() < 1e-3, "{:?}", s.rms);
        assert!((s.rms.var[0] - var0).abs() < 1e-3, "{:?}", s.rms);
        let z = s.normalize(&[mean0 as f32, 10.4]);
        assert!(z[0].abs() < 1e-3 && z[1].abs() < 1e-3, "{z:?}");
    }
}
