//! The Q-network: an MLP trunk, then one head (or dueling value/advantage heads) whose
//! layers may be factorised-Gaussian noisy layers (Fortunato et al. 2018), producing Q-values
//! or, with `num_atoms > 1`, categorical return distributions (C51, Bellemare et al. 2017).

use rl_training_core::Rng;
use rl_training_core::batch::tensor1;
use rl_training_core::burn;
use rl_training_core::burn::module::{Module, Param};
use rl_training_core::burn::tensor::activation::log_softmax;
use rl_training_core::burn::tensor::{Device, Tensor, TensorData};
use rl_training_core::nn::Activation;

/// A linear layer `y = x·W + b`, optionally noisy: `W = μ_W + σ_W ⊙ (ε_in ⊗ ε_out)`,
/// `b = μ_b + σ_b ⊙ ε_out`, with `ε = f(z)`, `f(z) = sgn(z)·√|z|` (factorised noise).
#[derive(Module, Debug)]
pub struct NoisyLinear {
    /// μ_W, `[in, out]`.
    pub weight: Param<Tensor<2>>,
    /// μ_b, `[out]`.
    pub bias: Param<Tensor<1>>,
    /// σ_W (noisy layers only).
    pub sigma_weight: Option<Param<Tensor<2>>>,
    /// σ_b (noisy layers only).
    pub sigma_bias: Option<Param<Tensor<1>>>,
}

/// One noisy layer's factorised noise, `f(ε_in)` and `f(ε_out)`.
#[derive(Debug, Clone)]
pub struct LayerNoise {
    /// `[in]`.
    pub eps_in: Tensor<1>,
    /// `[out]`.
    pub eps_out: Tensor<1>,
}

impl NoisyLinear {
    /// A layer with torch's default `Linear` init (μ ~ U(±1/√in), as SB3's Q-networks and
    /// the noisy-net paper); noisy with `σ = σ₀/√in` when `sigma0` is given.
    pub fn new(
        d_in: usize,
        d_out: usize,
        sigma0: Option<f64>,
        rng: &mut Rng,
        device: &Device,
    ) -> Self {
        let bound = 1.0 / (d_in as f64).sqrt();
        let mut u = |n: usize| -> Vec<f32> {
            (0..n)
                .map(|_| rng.uniform_range(-bound, bound) as f32)
                .collect()
        };
        let w = u(d_in * d_out);
        let b = u(d_out);
        let t2 = |v: Vec<f32>| Tensor::<2>::from_data(TensorData::new(v, [d_in, d_out]), device);
        let t1 = |v: Vec<f32>| Tensor::<1>::from_data(TensorData::new(v, [d_out]), device);
        let (sw, sb) = match sigma0 {
            Some(s0) => {
                let s = (s0 / (d_in as f64).sqrt()) as f32;
                (
                    Some(Param::from_tensor(t2(vec![s; d_in * d_out]))),
                    Some(Param::from_tensor(t1(vec![s; d_out]))),
                )
            }
            None => (None, None),
        };
        Self {
            weight: Param::from_tensor(t2(w)),
            bias: Param::from_tensor(t1(b)),
            sigma_weight: sw,
            sigma_bias: sb,
        }
    }

    /// Multiplies the mean weights and biases by `gain` (the noise scales stay).
    pub fn scale_means(&mut self, gain: f64) {
        // Detached: a parameter must be a leaf of the autodiff graph.
        self.weight = Param::from_tensor(self.weight.val().mul_scalar(gain).detach());
        self.bias = Param::from_tensor(self.bias.val().mul_scalar(gain).detach());
    }

    /// Whether the layer has noise parameters.
    pub fn is_noisy(&self) -> bool {
        self.sigma_weight.is_some()
    }

    /// `[in, out]`.
    pub fn dims(&self) -> [usize; 2] {
        self.weight.val().dims()
    }

    /// `x·W + b`; noise is used only when given (and the layer is noisy).
    pub fn forward(&self, x: Tensor<2>, noise: Option<&LayerNoise>) -> Tensor<2> {
        let mean = x.clone().matmul(self.weight.val()) + self.bias.val().unsqueeze_dim(0);
        match (noise, &self.sigma_weight, &self.sigma_bias) {
            (Some(n), Some(sw), Some(sb)) => {
                // (x ⊙ ε_in)·σ_W ⊙ ε_out: the outer product is never built.
                let xin = x * n.eps_in.clone().unsqueeze_dim(0);
                let out = n.eps_out.clone().unsqueeze_dim(0);
                mean + xin.matmul(sw.val()) * out.clone()
                    + (sb.val() * n.eps_out.clone()).unsqueeze_dim(0)
            }
            _ => mean,
        }
    }
}

/// Factorised noise for every noisy layer of a network, host side (so it can be put on any
/// device and checked in tests).
#[derive(Debug, Clone, PartialEq)]
pub struct NetNoise(pub Vec<(Vec<f32>, Vec<f32>)>);

impl NetNoise {
    /// The noise as tensors on `device`.
    pub fn to_device(&self, device: &Device) -> Vec<LayerNoise> {
        self.0
            .iter()
            .map(|(i, o)| LayerNoise {
                eps_in: tensor1(i.clone(), device),
                eps_out: tensor1(o.clone(), device),
            })
            .collect()
    }
}

/// The Q-network (see the module docs).
#[derive(Module, Debug)]
pub struct QNetwork {
    /// Hidden layers shared by the heads.
    pub trunk: Vec<NoisyLinear>,
    /// Advantage (or plain Q) head: `hiddens` then `n_actions × atoms` outputs.
    pub adv: Vec<NoisyLinear>,
    /// Value head of dueling networks: `hiddens` then `atoms` outputs (empty otherwise).
    pub value: Vec<NoisyLinear>,
    #[module(skip)]
    n_actions: usize,
    #[module(skip)]
    atoms: usize,
    #[module(skip)]
    activation: Activation,
}

/// Shape of a [`QNetwork`].
#[derive(Debug, Clone, PartialEq)]
pub struct QNetworkConfig {
    /// Input width.
    pub d_input: usize,
    /// Number of discrete actions.
    pub n_actions: usize,
    /// Trunk hidden widths.
    pub net_arch: Vec<usize>,
    /// Head hidden widths.
    pub hiddens: Vec<usize>,
    /// Hidden activation.
    pub activation: Activation,
    /// Dueling heads.
    pub dueling: bool,
    /// Atoms (1: Q-values).
    pub atoms: usize,
    /// σ₀ of noisy head layers, when noisy.
    pub noisy_sigma0: Option<f64>,
    /// Scale of the output layers' initial weights and biases (0: every value starts equal).
    pub head_gain: f64,
}

impl QNetworkConfig {
    /// Builds the network with weights drawn from `rng`.
    pub fn init(&self, rng: &mut Rng, device: &Device) -> QNetwork {
        let mut d = self.d_input;
        let mut trunk = Vec::new();
        for &h in &self.net_arch {
            trunk.push(NoisyLinear::new(d, h, None, rng, device));
            d = h;
        }
        let head = |out: usize, rng: &mut Rng| {
            let mut layers = Vec::new();
            let mut k = d;
            for &h in self.hiddens.iter().chain(std::iter::once(&out)) {
                layers.push(NoisyLinear::new(k, h, self.noisy_sigma0, rng, device));
                k = h;
            }
            if let Some(last) = layers.last_mut()
                && self.head_gain != 1.0
            {
                last.scale_means(self.head_gain);
            }
            layers
        };
        let adv = head(self.n_actions * self.atoms, rng);
        let value = if self.dueling {
            head(self.atoms, rng)
        } else {
            Vec::new()
        };
        QNetwork {
            trunk,
            adv,
            value,
            n_actions: self.n_actions,
            atoms: self.atoms,
            activation: self.activation,
        }
    }
}

impl QNetwork {
    /// Number of actions.
    pub fn n_actions(&self) -> usize {
        self.n_actions
    }

    /// Atoms per action.
    pub fn atoms(&self) -> usize {
        self.atoms
    }

    /// Whether any layer is noisy.
    pub fn is_noisy(&self) -> bool {
        self.adv
            .iter()
            .chain(&self.value)
            .any(NoisyLinear::is_noisy)
    }

    /// Fresh factorised noise for every noisy layer (`None` when the net has none).
    pub fn sample_noise(&self, rng: &mut Rng) -> Option<NetNoise> {
        if !self.is_noisy() {
            return None;
        }
        let f = |z: f64| (z.signum() * z.abs().sqrt()) as f32;
        let layers = self
            .adv
            .iter()
            .chain(&self.value)
            .filter(|l| l.is_noisy())
            .map(|l| {
                let [i, o] = l.dims();
                let ei = (0..i).map(|_| f(rng.normal())).collect();
                let eo = (0..o).map(|_| f(rng.normal())).collect();
                (ei, eo)
            })
            .collect();
        Some(NetNoise(layers))
    }

    fn branch(
        &self,
        layers: &[NoisyLinear],
        mut h: Tensor<2>,
        noise: Option<&[LayerNoise]>,
        k: &mut usize,
    ) -> Tensor<2> {
        let last = layers.len() - 1;
        for (i, l) in layers.iter().enumerate() {
            let n = match noise {
                Some(ns) if l.is_noisy() => {
                    *k += 1;
                    Some(&ns[*k - 1])
                }
                _ => None,
            };
            h = l.forward(h, n);
            if i < last {
                h = self.activation.forward(h);
            }
        }
        h
    }

    /// Raw head outputs `[B, n_actions, atoms]` (dueling-combined). With one atom these are
    /// the Q-values; with more, logits of the return distribution. `noise` = `None` uses the
    /// mean weights (deterministic mode).
    pub fn forward(&self, x: Tensor<2>, noise: Option<&[LayerNoise]>) -> Tensor<3> {
        let b = x.dims()[0];
        let mut h = x;
        for l in &self.trunk {
            h = self.activation.forward(l.forward(h, None));
        }
        let mut k = 0;
        let adv = self.branch(&self.adv, h.clone(), noise, &mut k).reshape([
            b,
            self.n_actions,
            self.atoms,
        ]);
        if self.value.is_empty() {
            return adv;
        }
        let v = self
            .branch(&self.value, h, noise, &mut k)
            .reshape([b, 1, self.atoms]);
        v + adv.clone() - adv.mean_dim(1)
    }

    /// Q-values `[B, n_actions]` (the distribution's mean with atoms `support`).
    pub fn q_values(
        &self,
        x: Tensor<2>,
        noise: Option<&[LayerNoise]>,
        support: Option<&Tensor<1>>,
    ) -> Tensor<2> {
        let out = self.forward(x, noise);
        let [b, n, a] = out.dims();
        match support {
            Some(z) if a > 1 => {
                let p = log_softmax(out, 2).exp();
                (p * z.clone().reshape([1, 1, a]))
                    .sum_dim(2)
                    .reshape([b, n])
            }
            _ => out.reshape([b, n]),
        }
    }
}
