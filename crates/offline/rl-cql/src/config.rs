//! CQL hyperparameters: the seed table's CQL options (RLlib's `CQLConfig`: `bc_iters`,
//! `temperature`, `num_actions`, `lagrangian`, `lagrangian_thresh`, `min_q_weight`,
//! `deterministic_backup`) on SAC's (continuous) or DQN's (discrete) learning settings.

use rl_core::config::AlgoConfig;
use rl_core::schedule::Schedule;
use rl_sac::{AutoOr, SacPolicyKwargs};
use serde::{Deserialize, Serialize};

/// CQL hyperparameters (`algo_kwargs` of a run config).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CqlConfig {
    /// Adam step size of every network (and of α, α′).
    #[serde(alias = "lr")]
    pub learning_rate: Schedule,
    /// Actor step size (default: `learning_rate`).
    pub actor_lr: Option<Schedule>,
    /// Critic step size (default: `learning_rate`).
    pub critic_lr: Option<Schedule>,
    /// Dataset rows per gradient step.
    #[serde(alias = "train_batch_size", alias = "train_batch_size_per_learner")]
    pub batch_size: usize,
    /// Discount.
    pub gamma: f64,
    /// Polyak coefficient of the target critics.
    pub tau: f64,
    /// Gradient steps between target updates.
    pub target_update_interval: u64,
    /// Entropy coefficient α: a number, or `auto[_init]` to learn it (continuous).
    #[serde(alias = "initial_alpha")]
    pub ent_coef: AutoOr,
    /// Entropy target when α is learned (`auto`: −action dims).
    pub target_entropy: AutoOr,
    /// Two critics (continuous).
    pub twin_q: bool,
    /// Gradient steps whose actor loss is behaviour cloning of the data's actions.
    pub bc_iters: u64,
    /// Temperature of the log-sum-exp over sampled actions.
    pub temperature: f64,
    /// Actions sampled per state (random, policy at s, policy at s′) for the CQL term.
    pub num_actions: usize,
    /// Tune the CQL weight α′ so the conservative gap stays near `lagrangian_thresh`.
    pub lagrangian: bool,
    /// Target of the conservative gap with `lagrangian`.
    pub lagrangian_thresh: f64,
    /// Weight of the CQL term.
    pub min_q_weight: f64,
    /// Leave the entropy term out of the TD target.
    pub deterministic_backup: bool,
    /// Global-norm gradient clipping (null: none).
    #[serde(alias = "grad_clip")]
    pub max_grad_norm: Option<f64>,
    /// Gradient steps per training iteration.
    pub updates_per_iteration: usize,
    /// Network shape of the actor and each critic (or the Q-network).
    pub policy_kwargs: SacPolicyKwargs,
}

impl Default for CqlConfig {
    fn default() -> Self {
        Self {
            learning_rate: Schedule::Constant(3e-4),
            actor_lr: None,
            critic_lr: None,
            batch_size: 256,
            gamma: 0.99,
            tau: 0.005,
            target_update_interval: 1,
            ent_coef: AutoOr::Auto("auto".into()),
            target_entropy: AutoOr::Auto("auto".into()),
            twin_q: true,
            bc_iters: 20_000,
            temperature: 1.0,
            num_actions: 10,
            lagrangian: false,
            lagrangian_thresh: 5.0,
            min_q_weight: 5.0,
            deterministic_backup: true,
            max_grad_norm: None,
            updates_per_iteration: 1,
            policy_kwargs: SacPolicyKwargs::default(),
        }
    }
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
    fn validate(&self) -> Result<(), rl_core::config::ConfigError> {
        let err = |f: &str, m: &str| rl_core::config::invalid(f, m);
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
