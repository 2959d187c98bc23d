//! CQL hyperparameters: the seed table's CQL options (RLlib's `CQLConfig`: `bc_iters`,
//! `temperature`, `num_actions`, `lagrangian`, `lagrangian_thresh`, `min_q_weight`,
//! `deterministic_backup`) on SAC's (continuous) or DQN's (discrete) learning settings.

use rl_training_core::config::AlgoConfig;
use rl_training_core::schedule::Schedule;
use rl_training_sac::{AutoOr, SacPolicyKwargs};
use serde::{Deserialize, Serialize};
use smart_default::SmartDefault;

/// CQL hyperparameters (`algo_kwargs` of a run config).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, SmartDefault)]
#[serde(deny_unknown_fields, default)]
pub struct CqlConfig {
    /// Adam step size of every network (and of α, α′).
    #[default(Schedule::Constant(3e-4))]
    #[serde(alias = "lr")]
    pub learning_rate: Schedule,
    /// Actor step size (default: `learning_rate`).
    pub actor_lr: Option<Schedule>,
    /// Critic step size (default: `learning_rate`).
    pub critic_lr: Option<Schedule>,
    /// Dataset rows per gradient step.
    #[default(256)]
    #[serde(alias = "train_batch_size", alias = "train_batch_size_per_learner")]
    pub batch_size: usize,
    /// Discount.
    #[default(0.99)]
    pub gamma: f64,
    /// Polyak coefficient of the target critics.
    #[default(0.005)]
    pub tau: f64,
    /// Gradient steps between target updates.
    #[default(1)]
    pub target_update_interval: u64,
    /// Entropy coefficient α: a number, or `auto[_init]` to learn it (continuous).
    #[default(AutoOr::Auto("auto".into()))]
    #[serde(alias = "initial_alpha")]
    pub ent_coef: AutoOr,
    /// Entropy target when α is learned (`auto`: −action dims).
    #[default(AutoOr::Auto("auto".into()))]
    pub target_entropy: AutoOr,
    /// Two critics (continuous).
    #[default(true)]
    pub twin_q: bool,
    /// Gradient steps whose actor loss is behaviour cloning of the data's actions.
    #[default(20_000)]
    pub bc_iters: u64,
    /// Temperature of the log-sum-exp over sampled actions.
    #[default(1.0)]
    pub temperature: f64,
    /// Actions sampled per state (random, policy at s, policy at s′) for the CQL term.
    #[default(10)]
    pub num_actions: usize,
    /// Tune the CQL weight α′ so the conservative gap stays near `lagrangian_thresh`.
    #[default(false)]
    pub lagrangian: bool,
    /// Target of the conservative gap with `lagrangian`.
    #[default(5.0)]
    pub lagrangian_thresh: f64,
    /// Weight of the CQL term.
    #[default(5.0)]
    pub min_q_weight: f64,
    /// Leave the entropy term out of the TD target.
    #[default(true)]
    pub deterministic_backup: bool,
    /// Global-norm gradient clipping (null: none).
    #[serde(alias = "grad_clip")]
    pub max_grad_norm: Option<f64>,
    /// Gradient steps per training iteration.
    #[default(1)]
    pub updates_per_iteration: usize,
    /// Network shape of the actor and each critic (or the Q-network).
    pub policy_kwargs: SacPolicyKwargs,
}

impl CqlConfig {
    /// `Some(initial α)` when α is learned.
    pub fn learned_alpha_init(&self) -> Option<f64> {
        self.ent_coef
            .parse("ent_coef")
            .ok()
            .flatten()
            .map(|init| init.unwrap_or(1.0))
    }

    /// The step size of `s` (or `learning_rate`) now.
    pub fn lr(&self, s: &Option<Schedule>, step: u64, total: u64) -> f64 {
        s.as_ref().unwrap_or(&self.learning_rate).value(step, total)
    }
}

impl AlgoConfig for CqlConfig {
    /// Range checks with messages naming the field.
    fn validate(&self) -> Result<(), rl_training_core::config::ConfigError> {
        let err = |f: &str, m: &str| rl_training_core::config::invalid(f, m);
        for (f, v) in [
            ("batch_size", self.batch_size),
            ("num_actions", self.num_actions),
            ("updates_per_iteration", self.updates_per_iteration),
        ] {
            if v == 0 {
                return err(f, "must be at least 1");
            }
        }
        if self.target_update_interval == 0 {
            return err("target_update_interval", "must be at least 1");
        }
        if self.learning_rate.initial() <= 0.0 {
            return err("learning_rate", "must be positive");
        }
        if !(0.0..=1.0).contains(&self.gamma) {
            return err("gamma", "must be in [0, 1]");
        }
        if !(0.0..=1.0).contains(&self.tau) {
            return err("tau", "must be in [0, 1]");
        }
        if !(self.temperature > 0.0) {
            return err("temperature", "must be positive");
        }
        if !(self.min_q_weight >= 0.0) {
            return err("min_q_weight", "must be >= 0");
        }
        if !self.lagrangian_thresh.is_finite() {
            return err("lagrangian_thresh", "must be a finite number");
        }
        self.ent_coef.parse("ent_coef")?;
        if let AutoOr::Value(v) = self.ent_coef
            && !(v >= 0.0)
        {
            return err("ent_coef", "must be >= 0 or auto");
        }
        if self.max_grad_norm.is_some_and(|g| !(g > 0.0)) {
            return err(
                "max_grad_norm",
                "must be positive (or null for no clipping)",
            );
        }
        Ok(())
    }
}
