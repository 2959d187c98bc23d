//! Actor-critic policies (SB3's `ActorCriticPolicy`): separate or shared MLP trunks, an action
//! head for each action space, a value head, orthogonal init with SB3's gains.

use rl_core::burn;
use rl_core::burn::module::{Module, Param};
use rl_core::burn::nn::Linear;
use rl_core::burn::tensor::{Device, Tensor, TensorData};
use rl_core::distributions::DistKind;
use rl_core::nn::{Activation, Mlp, MlpConfig, linear_orthogonal};
use rl_core::{Rng, Space};
use serde::{Deserialize, Serialize};

/// Network architecture: one list for a shared trunk, or separate `pi` / `vf` lists (SB3's
/// `net_arch`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum NetArch {
    /// The same hidden sizes for separate policy and value networks (SB3 ≥ 1.8 semantics).
    Same(Vec<usize>),
    /// Different sizes for the policy and value networks.
    Split {
        /// Policy hidden sizes.
        pi: Vec<usize>,
        /// Value hidden sizes.
        vf: Vec<usize>,
    },
}

/// `policy_kwargs` of the on-policy algorithms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PolicyKwargs {
    /// Hidden layers.
    pub net_arch: NetArch,
    /// Hidden activation (`tanh`, `relu`, `silu`, `elu`).
    #[serde(alias = "activation")]
    pub activation_fn: Activation,
    /// Orthogonal initialization with SB3's gains (otherwise gain 1 everywhere).
    pub ortho_init: bool,
    /// Initial `log_std` of Gaussian policies.
    pub log_std_init: f64,
    /// One trunk for policy and value (SB3's `share_features_extractor` with shared layers).
    pub shared: bool,
}

impl Default for PolicyKwargs {
    fn default() -> Self {
        Self {
            net_arch: NetArch::Same(vec![64, 64]),
            activation_fn: Activation::Tanh,
            ortho_init: true,
            log_std_init: 0.0,
            shared: false,
        }
    }
}

/// What the policy outputs for a batch of observations.
pub struct PolicyOutput {
    /// Logits or means `[B, param_dim]`.
    pub params: Tensor<2>,
    /// `log_std` `[1, dim]` for Gaussian policies.
    pub log_std: Option<Tensor<2>>,
    /// Value estimates `[B]`.
    pub values: Tensor<1>,
}

/// An actor-critic network.
#[derive(Module, Debug)]
pub struct ActorCritic {
    /// Policy trunk (or the shared trunk).
    pub pi: Mlp,
    /// Value trunk (absent when shared).
    pub vf: Option<Mlp>,
    /// Action head.
    pub action_net: Linear,
    /// Value head.
    pub value_net: Linear,
    /// State-independent `log_std` for Gaussian policies.
    pub log_std: Option<Param<Tensor<1>>>,
    /// The distribution family.
    #[module(skip)]
    pub dist: DistKind,
}

impl ActorCritic {
    /// Builds the policy for `obs_space` (flattened) and `action_space`, weights from `rng`.
    pub fn new(
        obs_space: &Space,
        action_space: &Space,
        kw: &PolicyKwargs,
        rng: &mut Rng,
        device: &Device,
    ) -> Result<Self, String> {
        let dist = DistKind::for_space(action_space)?;
        let d_in = obs_space.flat_dim();
        let (pi_h, vf_h) = match &kw.net_arch {
            NetArch::Same(h) => (h.clone(), h.clone()),
            NetArch::Split { pi, vf } => (pi.clone(), vf.clone()),
        };
        let gain = |g: f64| if kw.ortho_init { g } else { 1.0 };
        let trunk = |hidden: Vec<usize>, rng: &mut Rng| {
            MlpConfig {
                d_input: d_in,
                hidden,
                d_output: None,
                activation: kw.activation_fn,
                output_gain: 1.0,
                hidden_gain: gain(kw.activation_fn.hidden_gain()),
            }
            .init(rng, device)
        };
        let pi = trunk(pi_h.clone(), rng);
        let vf = if kw.shared {
            None
        } else {
            Some(trunk(vf_h.clone(), rng))
        };
        let pi_out = pi_h.last().copied().unwrap_or(d_in);
        let vf_out = if kw.shared {
            pi_out
        } else {
            vf_h.last().copied().unwrap_or(d_in)
        };
        let action_net = linear_orthogonal(pi_out, dist.param_dim(), gain(0.01), rng, device);
        let value_net = linear_orthogonal(vf_out, 1, gain(1.0), rng, device);
        let log_std = match &dist {
            DistKind::DiagGaussian { dim } | DistKind::SquashedDiagGaussian { dim } => {
                Some(Param::from_data(
                    TensorData::new(vec![kw.log_std_init as f32; *dim], [*dim]),
                    device,
                ))
            }
            _ => None,
        };
        Ok(Self {
            pi,
            vf,
            action_net,
            value_net,
            log_std,
            dist,
        })
    }

    /// Forward pass on flattened observations `[B, obs_flat_dim]`.
    pub fn forward(&self, obs: Tensor<2>) -> PolicyOutput {
        let latent_pi = self.pi.forward(obs.clone());
        let latent_vf = match &self.vf {
            Some(vf) => vf.forward(obs),
            None => latent_pi.clone(),
        };
        let params = self.action_net.forward(latent_pi);
        let values = self.value_net.forward(latent_vf).squeeze_dim::<1>(1);
        let log_std = self.log_std.as_ref().map(|p| p.val().unsqueeze_dim::<2>(0));
        PolicyOutput {
            params,
            log_std,
            values,
        }
    }

    /// Raw actions for a batch of flattened observations, drawn with `rng` (the
    /// distribution's mode when `deterministic`); Box actions are not clipped.
    pub fn sample_actions(&self, obs: Tensor<2>, rng: &mut Rng, deterministic: bool) -> Vec<f32> {
        let latent = self.pi.forward(obs);
        let params = crate::rollout::host(self.action_net.forward(latent));
        let log_std = self
            .log_std
            .as_ref()
            .map(|p| crate::rollout::host(p.val()))
            .unwrap_or_default();
        let mut actions = Vec::new();
        self.dist
            .sample(&params, &log_std, rng, deterministic, &mut actions);
        actions
    }

    /// The action-distribution outputs `[B, param_dim]` (logits or means) and their
    /// forward-mode derivative `J·v` for the parameter tangent held in `tangent` (a module of
    /// the same shape whose parameters are the tangent's entries, e.g. from
    /// [`set_flat`](rl_core::params::set_flat)). Natural-gradient methods build Fisher-vector
    /// products from it, since burn differentiates only once. The state-independent
    /// `log_std`'s tangent is `tangent.log_std` itself.
    pub fn actor_jvp(&self, tangent: &ActorCritic, obs: Tensor<2>) -> (Tensor<2>, Tensor<2>) {
        let linear = |l: &Linear, t: &Linear, x: Tensor<2>, dx: Option<Tensor<2>>| {
            let y = l.forward(x.clone());
            // d(xW + b) = dx·W + x·dW + db
            let mut dy = x.matmul(t.weight.val());
            if let Some(dx) = dx {
                dy = dy + dx.matmul(l.weight.val());
            }
            if let Some(db) = &t.bias {
                dy = dy + db.val().unsqueeze_dim(0);
            }
            (y, dy)
        };
        let act = self.pi.activation;
        let (mut h, mut dh) = (obs, None);
        for (l, t) in self.pi.layers.iter().zip(&tangent.pi.layers) {
            let (pre, dpre) = linear(l, t, h, dh);
            let out = act.forward(pre.clone());
            dh = Some(act.jvp(pre, out.clone(), dpre));
            h = out;
        }
        linear(&self.action_net, &tangent.action_net, h, dh)
    }

    /// Values `[B]` only.
    pub fn values(&self, obs: Tensor<2>) -> Tensor<1> {
        let latent = match &self.vf {
            Some(vf) => vf.forward(obs),
            None => self.pi.forward(obs),
        };
        self.value_net.forward(latent).squeeze_dim::<1>(1)
    }

    /// `(log_prob, entropy)` of `actions` `[B, act_dim]`, without the value branch.
    pub fn log_prob_entropy(
        &self,
        obs: Tensor<2>,
        actions: Tensor<2>,
    ) -> (Tensor<1>, Option<Tensor<1>>) {
        let latent = self.pi.forward(obs);
        let params = self.action_net.forward(latent);
        let log_std = self.log_std.as_ref().map(|p| p.val().unsqueeze_dim::<2>(0));
        let lp = self.dist.log_prob(params.clone(), log_std.clone(), actions);
        (lp, self.dist.entropy(params, log_std))
    }

    /// `(values, log_prob, entropy)` of `actions` `[B, act_dim]` (SB3's `evaluate_actions`).
    pub fn evaluate_actions(
        &self,
        obs: Tensor<2>,
        actions: Tensor<2>,
    ) -> (Tensor<1>, Tensor<1>, Option<Tensor<1>>) {
        let out = self.forward(obs);
        let lp = self
            .dist
            .log_prob(out.params.clone(), out.log_std.clone(), actions);
        let ent = self.dist.entropy(out.params, out.log_std);
        (out.values, lp, ent)
    }
}
