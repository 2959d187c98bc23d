//! Actor-critic policies (SB3's `ActorCriticPolicy`): separate or shared MLP trunks, an action
//! head for each action space, a value head, orthogonal init with SB3's gains.

use crate::flat::FlatParams;
use rl_training_core::burn;
use rl_training_core::burn::module::{Module, Param};
use rl_training_core::burn::nn::Linear;
use rl_training_core::burn::tensor::{Device, Tensor, TensorData};
use rl_training_core::distributions::DistKind;
use rl_training_core::nn::{
    Activation, DenseSlot, Mlp, MlpConfig, NatureCnn, flat_mlp, linear_act, linear_orthogonal,
};
use rl_training_core::{Rng, Space};
use serde::{Deserialize, Serialize};
use smart_default::SmartDefault;

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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, SmartDefault)]
#[serde(deny_unknown_fields, default)]
pub struct PolicyKwargs {
    /// Hidden layers.
    #[default(NetArch::Same(vec![64, 64]))]
    pub net_arch: NetArch,
    /// Hidden activation (`tanh`, `relu`, `silu`, `elu`).
    #[default(Activation::Tanh)]
    #[serde(alias = "activation")]
    pub activation_fn: Activation,
    /// Orthogonal initialization with SB3's gains (otherwise torch's default `Linear` init).
    #[default(true)]
    pub ortho_init: bool,
    /// Initial `log_std` of Gaussian policies.
    #[default(0.0)]
    pub log_std_init: f64,
    /// One trunk for policy and value (SB3's `share_features_extractor` with shared layers).
    #[default(false)]
    pub shared: bool,
    /// gSDE: one exploration weight per latent feature and action dimension (else one per
    /// latent feature).
    #[default(true)]
    pub full_std: bool,
    /// gSDE: `expln` instead of `exp` to keep the standard deviation from growing
    /// exponentially.
    #[default(false)]
    pub use_expln: bool,
    /// Orthogonal gain of the value head (SB3: 1). A small one starts every state's value
    /// near 0: with no reward yet, advantages stay near 0 instead of carrying the critic's
    /// noise (which, normalized, makes the policy drift).
    #[default(1.0)]
    #[serde(skip_serializing_if = "is_one")]
    pub value_gain: f64,
    /// `FlattenExtractor` (default) or `NatureCNN` for image observations (SB3's
    /// `CnnPolicy`; its `net_arch` is then usually `[]`, heads straight on the features).
    #[serde(skip_serializing_if = "is_default")]
    pub features_extractor_class: FeaturesExtractor,
    /// The extractor's settings (`features_dim`).
    #[serde(skip_serializing_if = "is_default")]
    pub features_extractor_kwargs: FeaturesExtractorKwargs,
}

fn is_one(v: &f64) -> bool {
    *v == 1.0
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

/// What turns an observation into the trunks' input (SB3's `features_extractor_class`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum FeaturesExtractor {
    /// The flattened observation (SB3's `MlpPolicy`).
    #[default]
    #[serde(rename = "FlattenExtractor", alias = "flatten")]
    Flatten,
    /// The Nature CNN over `[C, H, W]` (or `[H, W]`) pixels in `[0, 255]`, shared by the policy
    /// and value trunks (SB3's `CnnPolicy`, `share_features_extractor=True`).
    #[serde(rename = "NatureCNN", alias = "nature_cnn")]
    NatureCnn,
}

/// SB3's `features_extractor_kwargs`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, SmartDefault)]
#[serde(deny_unknown_fields, default)]
pub struct FeaturesExtractorKwargs {
    /// Output width of the CNN's linear layer.
    #[default(512)]
    pub features_dim: usize,
}

/// What the policy outputs for a batch of observations.
pub struct PolicyOutput {
    /// Logits or means `[B, param_dim]`.
    pub params: Tensor<2>,
    /// `log_std` for Gaussian policies: `[1, dim]`, or `[B, dim]` with gSDE.
    pub log_std: Option<Tensor<2>>,
    /// Value estimates `[B]`.
    pub values: Tensor<1>,
    /// gSDE: the latent features the exploration noise is a function of `[B, latent]`.
    pub latent_sde: Option<Tensor<2>>,
}

/// Generalized state-dependent exploration (Raffin et al. 2022, SB3's
/// `StateDependentNoiseDistribution`): the action noise is `latent(s)ᵀ M` for an exploration
/// matrix `M ~ N(0, σ²)` drawn every `sde_sample_freq` steps, so the policy's variance is
/// `latent(s)² · σ²` (+ 1e-6) per action dimension. The latent features are the policy
/// trunk's output, held constant (SB3's `learn_features=False`) in the variance.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sde {
    /// σ per (latent feature, action dimension), else per latent feature.
    pub full_std: bool,
    /// `expln` instead of `exp`.
    pub use_expln: bool,
    /// Action dimension.
    pub act_dim: usize,
}

/// An actor-critic network.
#[derive(Module, Debug)]
pub struct ActorCritic {
    /// The image feature extractor both trunks read (`CnnPolicy`); None: flattened
    /// observations go straight to the trunks.
    pub cnn: Option<NatureCnn>,
    /// `[C, H, W]` of the images the CNN reads.
    #[module(skip)]
    pub image: Option<[usize; 3]>,
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
    /// gSDE's `log σ` of the exploration matrix `[latent, act_dim]` (or `[latent, 1]`).
    pub sde_log_std: Option<Param<Tensor<2>>>,
    /// gSDE settings (None: plain Gaussian or not continuous).
    #[module(skip)]
    pub sde: Option<Sde>,
    /// The distribution family.
    #[module(skip)]
    pub dist: DistKind,
    /// A centralized critic (MAPPO): the actor reads only the first `actor_inputs` features of
    /// an observation, the critic all of them (the agent's own observation, then what the
    /// others see). None: both read the whole observation.
    #[module(skip)]
    pub actor_inputs: Option<usize>,
    /// During an update: every parameter read from one flat vector (see [`crate::flat`]);
    /// None otherwise.
    #[module(skip)]
    pub flat: Option<FlatParams>,
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
        Self::with_sde(obs_space, action_space, kw, false, rng, device)
    }

    /// A policy with a centralized critic (MAPPO): the actor reads `obs_space` (flattened), the
    /// critic that and `critic_extra` more features after it. Needs separate trunks and no
    /// gSDE.
    pub fn centralized(
        obs_space: &Space,
        critic_extra: usize,
        action_space: &Space,
        kw: &PolicyKwargs,
        rng: &mut Rng,
        device: &Device,
    ) -> Result<Self, String> {
        if kw.shared {
            return Err(
                "policy_kwargs.shared: a centralized critic needs separate policy and value trunks"
                    .into(),
            );
        }
        if kw.features_extractor_class != FeaturesExtractor::Flatten {
            return Err(
                "policy_kwargs.features_extractor_class: a centralized critic reads flat observations"
                    .into(),
            );
        }
        let d_pi = obs_space.flat_dim();
        let mut me = Self::build(
            d_pi,
            d_pi + critic_extra,
            action_space,
            kw,
            false,
            rng,
            device,
        )?;
        me.actor_inputs = Some(d_pi);
        Ok(me)
    }

    /// [`new`](Self::new), with gSDE exploration when `use_sde` (Box action spaces only).
    pub fn with_sde(
        obs_space: &Space,
        action_space: &Space,
        kw: &PolicyKwargs,
        use_sde: bool,
        rng: &mut Rng,
        device: &Device,
    ) -> Result<Self, String> {
        if kw.features_extractor_class == FeaturesExtractor::Flatten {
            let d_in = obs_space.flat_dim();
            return Self::build(d_in, d_in, action_space, kw, use_sde, rng, device);
        }
        let [c, h, w] = image_shape(obs_space)?;
        let d = kw.features_extractor_kwargs.features_dim;
        let cnn = NatureCnn::new(c, h, w, d, rng, device)?;
        let mut me = Self::build(d, d, action_space, kw, use_sde, rng, device)?;
        me.cnn = Some(cnn);
        me.image = Some([c, h, w]);
        Ok(me)
    }

    /// The networks for `d_pi` actor and `d_vf` critic inputs.
    fn build(
        d_pi: usize,
        d_vf: usize,
        action_space: &Space,
        kw: &PolicyKwargs,
        use_sde: bool,
        rng: &mut Rng,
        device: &Device,
    ) -> Result<Self, String> {
        let dist = DistKind::for_space(action_space)?;
        if use_sde && !matches!(dist, DistKind::DiagGaussian { .. }) {
            return Err(format!(
                "use_sde: gSDE needs a Box action space, not {}",
                action_space.describe()
            ));
        }
        let (pi_h, vf_h) = match &kw.net_arch {
            NetArch::Same(h) => (h.clone(), h.clone()),
            NetArch::Split { pi, vf } => (pi.clone(), vf.clone()),
        };
        // SB3: orthogonal init with its gains, or torch's default init (`ortho_init: false`).
        let trunk = |d_in: usize, hidden: Vec<usize>, rng: &mut Rng| {
            let cfg = MlpConfig {
                d_input: d_in,
                hidden,
                d_output: None,
                activation: kw.activation_fn,
                output_gain: 1.0,
                hidden_gain: kw.activation_fn.hidden_gain(),
            };
            if kw.ortho_init {
                cfg.init(rng, device)
            } else {
                cfg.init_torch_default(rng, device)
            }
        };
        let head = |d_in: usize, d_out: usize, gain: f64, rng: &mut Rng| {
            if kw.ortho_init {
                linear_orthogonal(d_in, d_out, gain, rng, device)
            } else {
                rl_training_core::nn::linear_torch_default(d_in, d_out, rng, device)
            }
        };
        let pi = trunk(d_pi, pi_h.clone(), rng);
        let vf = if kw.shared {
            None
        } else {
            Some(trunk(d_vf, vf_h.clone(), rng))
        };
        let pi_out = pi_h.last().copied().unwrap_or(d_pi);
        let vf_out = if kw.shared {
            pi_out
        } else {
            vf_h.last().copied().unwrap_or(d_vf)
        };
        let action_net = head(pi_out, dist.param_dim(), 0.01, rng);
        let value_net = head(vf_out, 1, kw.value_gain, rng);
        let (sde, sde_log_std) = match &dist {
            DistKind::DiagGaussian { dim } if use_sde => {
                let cols = if kw.full_std { *dim } else { 1 };
                (
                    Some(Sde {
                        full_std: kw.full_std,
                        use_expln: kw.use_expln,
                        act_dim: *dim,
                    }),
                    Some(Param::from_data(
                        TensorData::new(
                            vec![kw.log_std_init as f32; pi_out * cols],
                            [pi_out, cols],
                        ),
                        device,
                    )),
                )
            }
            _ => (None, None),
        };
        let log_std = match &dist {
            DistKind::DiagGaussian { .. } if use_sde => None,
            DistKind::DiagGaussian { dim } | DistKind::SquashedDiagGaussian { dim } => {
                Some(Param::from_data(
                    TensorData::new(vec![kw.log_std_init as f32; *dim], [*dim]),
                    device,
                ))
            }
            _ => None,
        };
        Ok(Self {
            cnn: None,
            image: None,
            pi,
            vf,
            action_net,
            value_net,
            log_std,
            sde_log_std,
            sde,
            dist,
            actor_inputs: None,
            flat: None,
        })
    }

    /// What the actor reads of `obs`: all of it, or with a centralized critic its first
    /// `actor_inputs` features (an observation of just that width passes as it is).
    pub fn actor_view(&self, obs: Tensor<2>) -> Tensor<2> {
        match self.actor_inputs {
            Some(k) if obs.dims()[1] != k => {
                let b = obs.dims()[0];
                obs.slice([0..b, 0..k])
            }
            _ => obs,
        }
    }

    /// What the trunks read: the CNN's features of the images (`CnnPolicy`), else the
    /// flattened observations themselves.
    pub fn features(&self, obs: Tensor<2>) -> Tensor<2> {
        match (&self.cnn, self.image) {
            (Some(cnn), Some([c, h, w])) => {
                let b = obs.dims()[0];
                cnn.forward(obs.reshape([b, c, h, w]))
            }
            _ => obs,
        }
    }

    /// The action head: distribution parameters `[B, n]` from the policy trunk's output (one
    /// fused operation on flex, see `rl_training_core::nn::linear_act`).
    pub fn action_head(&self, latent_pi: Tensor<2>) -> Tensor<2> {
        match &self.flat {
            Some(f) => on_theta(latent_pi, f, head(&f.layout.actor)),
            None => linear_act(&self.action_net, latent_pi, false),
        }
    }

    /// The value head: `[B, 1]` from the value trunk's output.
    pub fn value_head(&self, latent_vf: Tensor<2>) -> Tensor<2> {
        match &self.flat {
            Some(f) => on_theta(latent_vf, f, head(&f.layout.critic)),
            None => linear_act(&self.value_net, latent_vf, false),
        }
    }

    /// The policy trunk's output for flattened observations (the action head's input).
    pub fn actor_latent(&self, obs: Tensor<2>) -> Tensor<2> {
        match &self.flat {
            Some(f) => on_theta(self.actor_view(obs), f, trunk(&f.layout.actor)),
            None => self.pi.forward(self.actor_view(self.features(obs))),
        }
    }

    /// The distribution parameters `[B, n]` and `log_std` for flattened observations (the
    /// trunk and the head: one fused operation on the flat path).
    pub fn actor_params(&self, obs: Tensor<2>) -> (Tensor<2>, Option<Tensor<2>>) {
        match &self.flat {
            Some(f) => {
                let params = on_theta(self.actor_view(obs), f, &f.layout.actor);
                (params, self.flat_log_std(f))
            }
            None => {
                let latent = self.actor_latent(obs);
                let log_std = self.dist_log_std(&latent);
                (self.action_head(latent), log_std)
            }
        }
    }

    /// `log_std` `[1, dim]` read from θ.
    fn flat_log_std(&self, f: &FlatParams) -> Option<Tensor<2>> {
        let (off, dim) = f.layout.log_std?;
        Some(f.theta.clone().narrow(0, off, dim).unsqueeze_dim::<2>(0))
    }

    /// Whether the actor's and the critic's losses reach disjoint parameters (separate trunks
    /// and no shared feature extractor): then each can get its own backward pass.
    pub fn separate_trunks(&self) -> bool {
        self.vf.is_some() && self.cnn.is_none()
    }

    /// Forward pass on flattened observations `[B, obs_flat_dim]`.
    pub fn forward(&self, obs: Tensor<2>) -> PolicyOutput {
        if let Some(f) = &self.flat {
            let (params, log_std) = self.actor_params(obs.clone());
            return PolicyOutput {
                params,
                log_std,
                values: on_theta(obs, f, &f.layout.critic).squeeze_dim::<1>(1),
                latent_sde: None,
            };
        }
        let x = self.features(obs);
        let latent_pi = self.pi.forward(self.actor_view(x.clone()));
        let latent_vf = match &self.vf {
            Some(vf) => vf.forward(x),
            None => latent_pi.clone(),
        };
        let params = self.action_head(latent_pi.clone());
        let values = self.value_head(latent_vf).squeeze_dim::<1>(1);
        let log_std = self.dist_log_std(&latent_pi);
        PolicyOutput {
            params,
            log_std,
            values,
            latent_sde: self.sde.map(|_| latent_pi.detach()),
        }
    }

    /// gSDE's σ of the exploration matrix `[latent, act_dim]` (`exp` or `expln` of
    /// `sde_log_std`, broadcast over actions unless `full_std`).
    pub fn sde_std(&self) -> Option<Tensor<2>> {
        let (sde, ls) = (self.sde?, self.sde_log_std.as_ref()?);
        let l = ls.val();
        let std = if sde.use_expln {
            // exp(x) for x ≤ 0, ln(1 + x) + 1 above: continuous, grows slowly.
            let below = l.clone().clamp_max(0.0).exp();
            let above = l.clone().clamp_min(0.0).log1p().add_scalar(1.0);
            let pos = l.greater_elem(0.0).float();
            below * pos.clone().neg().add_scalar(1.0) + above * pos
        } else {
            l.exp()
        };
        let [latent, cols] = std.dims();
        Some(if cols == sde.act_dim {
            std
        } else {
            std.expand([latent, sde.act_dim])
        })
    }

    /// The Gaussian's `log_std`: the state-independent parameter `[1, dim]`, or with gSDE
    /// `½ ln(latent² · σ² + 1e-6)` per sample `[B, dim]` (latent held constant).
    pub fn dist_log_std(&self, latent_pi: &Tensor<2>) -> Option<Tensor<2>> {
        match self.sde_std() {
            Some(std) => {
                let l = latent_pi.clone().detach();
                let var = (l.clone() * l).matmul(std.clone() * std).add_scalar(1e-6);
                Some(var.log().mul_scalar(0.5))
            }
            None => match &self.flat {
                Some(f) => self.flat_log_std(f),
                None => self.log_std.as_ref().map(|p| p.val().unsqueeze_dim::<2>(0)),
            },
        }
    }

    /// Raw actions for a batch of flattened observations, drawn with `rng` (the
    /// distribution's mode when `deterministic`); Box actions are not clipped.
    /// With gSDE a fresh exploration matrix is drawn for each row.
    pub fn sample_actions(&self, obs: Tensor<2>, rng: &mut Rng, deterministic: bool) -> Vec<f32> {
        // The actor only: predict needs no values.
        let latent = self.actor_latent(obs);
        let params = crate::rollout::host(self.action_head(latent.clone()));
        let mut actions = Vec::new();
        if let Some(noise) = self.sde_noise(params.len(), rng) {
            return noise
                .act(&params, &crate::rollout::host(latent), deterministic)
                .0;
        }
        let log_std = self
            .log_std
            .as_ref()
            .map(|p| crate::rollout::host(p.val()))
            .unwrap_or_default();
        self.dist
            .sample(&params, &log_std, rng, deterministic, &mut actions);
        actions
    }

    /// What `Algorithm::predict` returns for `n` flattened observations: actions drawn on the
    /// inference device `infer` without autodiff (the mode when `deterministic`), Box actions
    /// clipped to `act_space`'s bounds.
    pub fn predict_clipped(
        &self,
        flat_obs: Vec<f32>,
        n: usize,
        infer: &Device,
        rng: &mut Rng,
        deterministic: bool,
        act_space: &Space,
    ) -> Vec<f32> {
        let d = flat_obs.len() / n.max(1);
        let obs = rl_training_core::batch::tensor2(flat_obs, n, d, infer);
        let mut a = self.valid().sample_actions(obs, rng, deterministic);
        act_space.clip_to_bounds(&mut a);
        a
    }

    /// gSDE exploration matrices for `rows / act_dim` envs, drawn from `rng` (None without
    /// gSDE).
    pub fn sde_noise(&self, rows_times_dim: usize, rng: &mut Rng) -> Option<SdeNoise> {
        let sde = self.sde?;
        let std = crate::rollout::host(self.sde_std()?);
        Some(SdeNoise::sample(
            std,
            sde.act_dim,
            rows_times_dim / sde.act_dim.max(1),
            rng,
        ))
    }

    /// The action-distribution outputs `[B, param_dim]` (logits or means) and their
    /// forward-mode derivative `J·v` for the parameter tangent held in `tangent` (a module of
    /// the same shape whose parameters are the tangent's entries, e.g. from
    /// [`set_flat`](rl_training_core::params::set_flat)). Natural-gradient methods build Fisher-vector
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
        assert!(
            self.cnn.is_none(),
            "actor_jvp: the CNN policy has no forward-mode derivative (refused at construction)"
        );
        let act = self.pi.activation;
        let (mut h, mut dh) = (self.actor_view(obs), None);
        for (l, t) in self.pi.layers.iter().zip(&tangent.pi.layers) {
            let (pre, dpre) = linear(l, t, h, dh);
            let out = act.forward(pre.clone());
            dh = Some(act.jvp(pre, out.clone(), dpre));
            h = out;
        }
        linear(&self.action_net, &tangent.action_net, h, dh)
    }

    /// gSDE: the forward-mode derivative of the per-sample `log_std` `[B, dim]` for the
    /// parameter tangent in `tangent` (its `sde_log_std`), with the latent features `latent`
    /// held constant as in [`dist_log_std`](Self::dist_log_std). None without gSDE.
    pub fn sde_log_std_jvp(&self, tangent: &ActorCritic, latent: Tensor<2>) -> Option<Tensor<2>> {
        let (sde, l, dl) = (
            self.sde?,
            self.sde_log_std.as_ref()?.val(),
            tangent.sde_log_std.as_ref()?.val(),
        );
        let std = self.sde_std()?;
        // dσ/dL: σ for exp; for expln exp(L) below 0 and 1/(1 + L) above.
        let dstd_dl = if sde.use_expln {
            let pos = l.clone().greater_elem(0.0).float();
            l.clone().clamp_max(0.0).exp() * pos.clone().neg().add_scalar(1.0)
                + l.clamp_min(0.0).add_scalar(1.0).recip() * pos
        } else {
            l.exp()
        };
        let [k, d] = std.dims();
        let dstd = (dstd_dl * dl).expand([k, d]);
        let z2 = latent.clone() * latent;
        let var = z2
            .clone()
            .matmul(std.clone() * std.clone())
            .add_scalar(1e-6);
        // d ln σ_b = d var_b / (2 var_b), d var = z² · (2 σ dσ)
        let dvar = z2.matmul(std.mul_scalar(2.0) * dstd);
        Some(dvar / var.mul_scalar(2.0))
    }

    /// Values `[B]` only.
    pub fn values(&self, obs: Tensor<2>) -> Tensor<1> {
        if let Some(f) = &self.flat {
            return on_theta(obs, f, &f.layout.critic).squeeze_dim::<1>(1);
        }
        let x = self.features(obs);
        let latent = match &self.vf {
            Some(vf) => vf.forward(x),
            None => self.pi.forward(self.actor_view(x)),
        };
        self.value_head(latent).squeeze_dim::<1>(1)
    }

    /// `(log_prob, entropy)` of `actions` `[B, act_dim]`, without the value branch.
    pub fn log_prob_entropy(
        &self,
        obs: Tensor<2>,
        actions: Tensor<2>,
    ) -> (Tensor<1>, Option<Tensor<1>>) {
        let (params, log_std) = self.actor_params(obs);
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

/// `slots` of θ applied to `x`. The slots come from the policy's own layout and the inputs
/// from its own spaces, so they always fit.
fn on_theta(x: Tensor<2>, f: &FlatParams, slots: &[DenseSlot]) -> Tensor<2> {
    flat_mlp(x, &f.theta, slots).expect("the flat layout fits the policy's inputs")
}

/// A network's trunk: all its layers but the head.
fn trunk(slots: &[DenseSlot]) -> &[DenseSlot] {
    &slots[..slots.len() - 1]
}

/// A network's head: its last layer.
fn head(slots: &[DenseSlot]) -> &[DenseSlot] {
    &slots[slots.len() - 1..]
}

/// `[C, H, W]` of an image observation space (`[H, W]` is one channel), for the CNN.
fn image_shape(space: &Space) -> Result<[usize; 3], String> {
    match space {
        Space::Box { shape, .. } if shape.len() == 3 => Ok([shape[0], shape[1], shape[2]]),
        Space::Box { shape, .. } if shape.len() == 2 => Ok([1, shape[0], shape[1]]),
        _ => Err(format!(
            "policy_kwargs.features_extractor_class: NatureCNN needs image observations \
             (a Box of shape [C, H, W] or [H, W]), not {}",
            space.describe()
        )),
    }
}

/// gSDE exploration matrices, one per env: `[n × latent × act_dim]` draws from `N(0, σ²)`.
#[derive(Debug, Clone, PartialEq)]
pub struct SdeNoise {
    std: Vec<f32>,
    act_dim: usize,
    matrices: Vec<f32>,
}

impl SdeNoise {
    /// Draws `n` matrices with standard deviations `std` (`[latent × act_dim]`, host).
    pub fn sample(std: Vec<f32>, act_dim: usize, n: usize, rng: &mut Rng) -> Self {
        let matrices = (0..n)
            .flat_map(|_| {
                std.iter()
                    .map(|&s| s * rng.normal() as f32)
                    .collect::<Vec<_>>()
            })
            .collect();
        Self {
            std,
            act_dim,
            matrices,
        }
    }

    /// Actions `mean + latentᵀ M_row` (the mean when `deterministic`) for each row, and their
    /// log-probabilities under `N(mean, latent² · σ² + 1e-6)`.
    pub fn act(&self, mean: &[f32], latent: &[f32], deterministic: bool) -> (Vec<f32>, Vec<f32>) {
        let d = self.act_dim.max(1);
        let rows = mean.len() / d;
        let k = latent.len() / rows.max(1);
        let per = k * d;
        let (mut actions, mut logps) = (Vec::with_capacity(mean.len()), Vec::with_capacity(rows));
        for r in 0..rows {
            let z = &latent[r * k..(r + 1) * k];
            let m = &self.matrices[r * per..(r + 1) * per];
            let mut lp = 0.0f32;
            for j in 0..d {
                let var: f32 = (0..k)
                    .map(|i| z[i] * z[i] * self.std[i * d + j].powi(2))
                    .sum::<f32>()
                    + 1e-6;
                let noise: f32 = (0..k).map(|i| z[i] * m[i * d + j]).sum();
                let a = if deterministic {
                    mean[r * d + j]
                } else {
                    mean[r * d + j] + noise
                };
                let diff = a - mean[r * d + j];
                lp += -diff * diff / (2.0 * var) - 0.5 * var.ln() - 0.918_938_5;
                actions.push(a);
            }
            logps.push(lp);
        }
        (actions, logps)
    }
}
