//! SAC hyperparameters: SB3's names and defaults, the seed's (RLlib's) options, RLlib names
//! accepted as aliases.

use rl_training_core::config::{AlgoConfig, ConfigError, from_kwargs_with_part};
use rl_training_core::nn::Activation;
use rl_training_core::schedule::Schedule;
use rl_training_off_policy::ReplayKeys;
use serde::{Deserialize, Serialize};
use smart_default::SmartDefault;

/// A number, or `"auto"` / `"auto_<init>"` (SB3's `ent_coef` and `target_entropy`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum AutoOr {
    /// A fixed value.
    Value(f64),
    /// `auto` or `auto_<v>`.
    Auto(String),
}

impl AutoOr {
    /// `Ok(None)` for a number, `Ok(Some(init))` for `auto[_init]` (init absent: `None`
    /// inside), an error naming `field` otherwise.
    pub fn parse(
        &self,
        field: &str,
    ) -> Result<Option<Option<f64>>, rl_training_core::config::ConfigError> {
        match self {
            AutoOr::Value(_) => Ok(None),
            AutoOr::Auto(s) if s == "auto" => Ok(Some(None)),
            AutoOr::Auto(s) => match s.strip_prefix("auto_").map(str::parse::<f64>) {
                Some(Ok(v)) => Ok(Some(Some(v))),
                _ => rl_training_core::config::invalid(
                    field,
                    format!("expected a number, \"auto\" or \"auto_<number>\", got {s:?}"),
                ),
            },
        }
    }
}

/// Network shape (SB3's `policy_kwargs`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, SmartDefault)]
#[serde(deny_unknown_fields, default)]
pub struct SacPolicyKwargs {
    /// Hidden layers of the actor and of each critic.
    #[default(vec![256, 256])]
    #[serde(alias = "fcnet_hiddens")]
    pub net_arch: Vec<usize>,
    /// Hidden activation.
    #[default(Activation::Relu)]
    #[serde(alias = "fcnet_activation")]
    pub activation_fn: Activation,
}

/// SAC hyperparameters (`algo_kwargs` of a run config).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, SmartDefault)]
#[serde(deny_unknown_fields, default)]
pub struct SacConfig {
    /// Step size of every optimizer unless `actor_lr`/`critic_lr`/`alpha_lr` are set.
    #[default(Schedule::Constant(3e-4))]
    #[serde(alias = "lr")]
    pub learning_rate: Schedule,
    /// Actor step size (a number or schedule).
    pub actor_lr: Option<Schedule>,
    /// Critic step size.
    pub critic_lr: Option<Schedule>,
    /// Entropy-coefficient step size.
    #[serde(alias = "entropy_learning_rate")]
    pub alpha_lr: Option<Schedule>,
    /// Transitions per gradient step.
    #[default(256)]
    #[serde(alias = "train_batch_size")]
    pub batch_size: usize,
    /// Polyak coefficient of the target critics.
    #[default(0.005)]
    pub tau: f64,
    /// Discount.
    #[default(0.99)]
    pub gamma: f64,
    /// Vector-env steps between updates.
    #[default(1)]
    pub train_freq: usize,
    /// Gradient steps between target updates.
    #[default(1)]
    #[serde(alias = "target_network_update_freq")]
    pub target_update_interval: u64,
    /// Entropy coefficient α: a number, or `auto`/`auto_<init>` to learn it.
    #[default(AutoOr::Auto("auto".into()))]
    pub ent_coef: AutoOr,
    /// Initial α when learned (RLlib's name; overrides `auto_<init>`).
    pub initial_alpha: Option<f64>,
    /// Target entropy: `auto` (−|A| continuous; 0.98·log|A| discrete) or a number.
    #[default(AutoOr::Auto("auto".into()))]
    pub target_entropy: AutoOr,
    /// Two critics, the minimum taken (false: one).
    #[default(true)]
    pub twin_q: bool,
    /// Clip env actions to the bounds (squashed actions are inside them already).
    #[default(false)]
    pub clip_actions: bool,
    /// Global-norm gradient clipping per network (null: none).
    #[serde(alias = "grad_clip")]
    pub max_grad_norm: Option<f64>,
    /// gSDE (not available for SAC yet: must be false).
    #[default(false)]
    pub use_sde: bool,
    /// Network shape.
    pub policy_kwargs: SacPolicyKwargs,
    /// The replay buffer and loop keys shared with DQN (flat in YAML: `buffer_size`,
    /// `learning_starts`, `gradient_steps`, `training_intensity`, `n_step`,
    /// `prioritized_replay*`, `store_buffer_in_checkpoints`).
    #[serde(flatten, skip_deserializing)]
    pub replay: ReplayKeys,
}

impl SacConfig {
    /// Learned α: its initial value; fixed α: `None`.
    pub fn learned_alpha_init(&self) -> Option<f64> {
        self.ent_coef
            .parse("ent_coef")
            .ok()
            .flatten()
            .map(|init| self.initial_alpha.or(init).unwrap_or(1.0))
    }

    /// The entropy target for `act_dim` continuous dimensions or `n_actions` discrete ones.
    pub fn target_entropy_for(&self, continuous_dim: Option<usize>, n_actions: usize) -> f64 {
        match &self.target_entropy {
            AutoOr::Value(v) => *v,
            AutoOr::Auto(_) => match continuous_dim {
                Some(d) => -(d as f64),
                None => 0.98 * (n_actions as f64).ln(),
            },
        }
    }
}

impl AlgoConfig for SacConfig {
    /// The shared replay keys are read apart from the rest (both strictly).
    fn from_kwargs(kw: &serde_json::Map<String, serde_json::Value>) -> Result<Self, ConfigError> {
        from_kwargs_with_part(kw, |c: &mut Self, r| c.replay = r)
    }

    /// Range checks with messages naming the field.
    fn validate(&self) -> Result<(), rl_training_core::config::ConfigError> {
        let err = |f: &str, m: &str| rl_training_core::config::invalid(f, m);
        self.replay.validate(self.train_freq, self.batch_size)?;
        for (f, s) in [
            ("learning_rate", Some(&self.learning_rate)),
            ("actor_lr", self.actor_lr.as_ref()),
            ("critic_lr", self.critic_lr.as_ref()),
            ("alpha_lr", self.alpha_lr.as_ref()),
        ] {
            if s.is_some_and(|s| s.initial() <= 0.0) {
                return err(f, "must be positive");
            }
        }
        if !(0.0..=1.0).contains(&self.gamma) {
            return err("gamma", "must be in [0, 1]");
        }
        if !(self.tau > 0.0 && self.tau <= 1.0) {
            return err("tau", "must be in (0, 1]");
        }
        if self.target_update_interval == 0 {
            return err("target_update_interval", "must be at least 1");
        }
        match self.ent_coef.parse("ent_coef")? {
            None => {
                if let AutoOr::Value(v) = self.ent_coef
                    && !(v >= 0.0)
                {
                    return err("ent_coef", "must be ≥ 0");
                }
            }
            Some(init) => {
                if init.or(self.initial_alpha).is_some_and(|a| !(a > 0.0)) {
                    return err("initial_alpha", "must be positive");
                }
            }
        }
        self.target_entropy.parse("target_entropy")?;
        if self.max_grad_norm.is_some_and(|g| g <= 0.0) {
            return err(
                "max_grad_norm",
                "must be positive (or null for no clipping)",
            );
        }
        if self.policy_kwargs.net_arch.contains(&0) {
            return err("policy_kwargs.net_arch", "layer widths must be at least 1");
        }
        if self.use_sde {
            return err(
                "use_sde",
                "gSDE is not implemented for SAC; set it to false",
            );
        }
        Ok(())
    }
}
