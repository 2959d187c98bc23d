//! SAC's networks: a squashed-Gaussian or categorical actor and one or two critics, with
//! torch's default init (as SB3's SAC).

use rl_training_core::Rng;
use rl_training_core::burn;
use rl_training_core::burn::module::Module;
use rl_training_core::burn::nn::Linear;
use rl_training_core::burn::tensor::Device;
use rl_training_core::burn::tensor::Tensor;
use rl_training_core::burn::tensor::activation::log_softmax;
use rl_training_core::nn::{Activation, Mlp, MlpConfig, linear_torch_default, tanh};

/// SB3's bounds on the Gaussian's log standard deviation.
pub const LOG_STD_MIN: f64 = -20.0;
/// Upper bound.
pub const LOG_STD_MAX: f64 = 2.0;

/// The actor: a trunk, then the Gaussian mean and log-std heads (continuous) or the logits
/// (discrete, `log_std` absent).
#[derive(Module, Debug)]
pub struct Actor {
    /// Hidden layers.
    pub trunk: Mlp,
    /// Mean (continuous) or logits (discrete).
    pub mu: Linear,
    /// Log standard deviation (continuous only).
    pub log_std: Option<Linear>,
}

impl Actor {
    /// An actor for `d_obs` inputs: `Some(d)` continuous dims, or `n` discrete actions.
    pub fn new(
        d_obs: usize,
        continuous: Option<usize>,
        n_actions: usize,
        arch: &[usize],
        activation: Activation,
        rng: &mut Rng,
        device: &Device,
    ) -> Self {
        let trunk = MlpConfig {
            d_input: d_obs,
            hidden: arch.to_vec(),
            d_output: None,
            activation,
            output_gain: 1.0,
            hidden_gain: 1.0,
        }
        .init_torch_default(rng, device);
        let d = arch.last().copied().unwrap_or(d_obs);
        let out = continuous.unwrap_or(n_actions);
        let mu = linear_torch_default(d, out, rng, device);
        let log_std = continuous.map(|a| linear_torch_default(d, a, rng, device));
        Self { trunk, mu, log_std }
    }

    /// Gaussian mean and clamped log-std `[B, A]` (continuous actors).
    pub fn gaussian(&self, obs: Tensor<2>) -> (Tensor<2>, Tensor<2>) {
        let h = self.trunk.forward(obs);
        let ls = self
            .log_std
            .as_ref()
            .expect("continuous actor")
            .forward(h.clone())
            .clamp(LOG_STD_MIN, LOG_STD_MAX);
        (self.mu.forward(h), ls)
    }

    /// A reparameterized squashed sample `a = tanh(μ + σ·ε)` and its log-probability
    /// `Σ log N(u) − Σ log(1 − a² + 1e-6)` (SB3's correction). With `u = μ + σ·ε`,
    /// `log N(u) = −ε²/2 − log σ − log √(2π)`, so no division is needed.
    pub fn sample(&self, obs: Tensor<2>, eps: Tensor<2>) -> (Tensor<2>, Tensor<1>) {
        let (mu, log_std) = self.gaussian(obs);
        let b = mu.dims()[0];
        let u = mu + log_std.clone().exp() * eps.clone();
        let a = tanh(u);
        let log_n = (eps.square().mul_scalar(-0.5) - log_std)
            .sub_scalar(0.5 * (2.0 * std::f64::consts::PI).ln());
        let corr = (a.clone().square().neg().add_scalar(1.0 + 1e-6)).log();
        let logp = (log_n - corr).sum_dim(1).reshape([b]);
        (a, logp)
    }

    /// Log-probability of given squashed actions `a ∈ (−1, 1)` `[B, A]` (behaviour cloning of
    /// data actions, as CQL's first phase): `u = atanh(a)` with `a` kept 1e-6 inside the
    /// bounds, then the same density and correction as [`sample`](Self::sample).
    pub fn log_prob_of(&self, obs: Tensor<2>, actions: Tensor<2>) -> Tensor<1> {
        let (mu, log_std) = self.gaussian(obs);
        let b = mu.dims()[0];
        let a = actions.clamp(-1.0 + 1e-6, 1.0 - 1e-6);
        // atanh(a) = ½ ln((1 + a) / (1 − a)).
        let u = ((a.clone().add_scalar(1.0)) / (a.clone().neg().add_scalar(1.0)))
            .log()
            .mul_scalar(0.5);
        let z = (u - mu) / log_std.clone().exp();
        let log_n = (z.square().mul_scalar(-0.5) - log_std)
            .sub_scalar(0.5 * (2.0 * std::f64::consts::PI).ln());
        let corr = (a.square().neg().add_scalar(1.0 + 1e-6)).log();
        (log_n - corr).sum_dim(1).reshape([b])
    }

    /// The deterministic action `tanh(μ)`.
    pub fn mean_action(&self, obs: Tensor<2>) -> Tensor<2> {
        tanh(self.gaussian(obs).0)
    }

    /// Log-probabilities of every action `[B, n]` (discrete actors).
    pub fn log_probs(&self, obs: Tensor<2>) -> Tensor<2> {
        log_softmax(self.mu.forward(self.trunk.forward(obs)), 1)
    }
}

/// One or two Q-networks: `Q(s, a) → [B, 1]` (continuous, input `[obs, action]`) or
/// `Q(s) → [B, n]` (discrete).
#[derive(Module, Debug)]
pub struct Critics {
    /// The Q-networks.
    pub qs: Vec<Mlp>,
}

impl Critics {
    /// `count` critics with input `d_in` and `d_out` outputs.
    pub fn new(
        count: usize,
        d_in: usize,
        d_out: usize,
        arch: &[usize],
        activation: Activation,
        rng: &mut Rng,
        device: &Device,
    ) -> Self {
        let cfg = MlpConfig {
            d_input: d_in,
            hidden: arch.to_vec(),
            d_output: Some(d_out),
            activation,
            output_gain: 1.0,
            hidden_gain: 1.0,
        };
        Self {
            qs: (0..count)
                .map(|_| cfg.init_torch_default(rng, device))
                .collect(),
        }
    }

    /// Each critic's output for `input` (`[obs, action]` or `obs`).
    pub fn forward(&self, input: Tensor<2>) -> Vec<Tensor<2>> {
        self.qs.iter().map(|q| q.forward(input.clone())).collect()
    }

    /// The elementwise minimum over critics.
    pub fn min(&self, input: Tensor<2>) -> Tensor<2> {
        self.forward(input)
            .into_iter()
            .reduce(|a, b| a.min_pair(b))
            .expect("at least one critic")
    }
}
