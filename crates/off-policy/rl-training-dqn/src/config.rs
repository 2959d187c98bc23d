//! DQN hyperparameters: SB3's names and defaults, the seed's (RLlib's) Rainbow options, RLlib
//! names accepted as aliases.

use rl_training_core::config::{AlgoConfig, ConfigError, from_kwargs_with_part};
use rl_training_core::nn::Activation;
use rl_training_core::schedule::Schedule;
use rl_training_off_policy::{ReplayKeys, TargetUpdate};
use serde::{Deserialize, Serialize};
use smart_default::SmartDefault;

/// TD loss on the (non-distributional) Q-values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum TdLoss {
    /// Huber with δ = 1 (SB3's `smooth_l1_loss`, RLlib's `huber`).
    #[default]
    Huber,
    /// ½·δ² (RLlib's `mse`).
    Mse,
}

/// Network shape (SB3's `policy_kwargs`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, SmartDefault)]
#[serde(deny_unknown_fields, default)]
pub struct QPolicyKwargs {
    /// Hidden layers of the shared trunk.
    #[default(vec![64, 64])]
    #[serde(alias = "fcnet_hiddens")]
    pub net_arch: Vec<usize>,
    /// Activation of hidden layers.
    #[default(Activation::Relu)]
    #[serde(alias = "fcnet_activation")]
    pub activation_fn: Activation,
    /// Scale of the output layers' initial weights and biases (torch's default init times
    /// this; 1 is SB3's). 0 starts every action's value equal (exactly 0 without C51), so
    /// an untried action carries no accidental optimism from its random initial value: with
    /// no reward yet the greedy policy has no preference, and only ε explores.
    #[default(1.0)]
    #[serde(skip_serializing_if = "is_one")]
    pub q_head_gain: f64,
}

fn is_one(v: &f64) -> bool {
    *v == 1.0
}

/// DQN hyperparameters (`algo_kwargs` of a run config).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, SmartDefault)]
#[serde(deny_unknown_fields, default)]
pub struct DqnConfig {
    /// Adam step size: a number, `lin_<v>` or `[[t, v], …]`.
    #[default(Schedule::Constant(1e-4))]
    #[serde(alias = "lr", alias = "lr_schedule")]
    pub learning_rate: Schedule,
    /// Transitions per gradient step.
    #[default(32)]
    #[serde(alias = "train_batch_size")]
    pub batch_size: usize,
    /// Target update coefficient (1: hard copy).
    #[default(1.0)]
    pub tau: f64,
    /// Discount.
    #[default(0.99)]
    pub gamma: f64,
    /// Vector-env steps between updates.
    #[default(4)]
    pub train_freq: usize,
    /// Env steps between target-network updates.
    #[default(10_000)]
    #[serde(alias = "target_network_update_freq")]
    pub target_update_interval: u64,
    /// Fraction of training over which ε falls from initial to final.
    #[default(0.1)]
    pub exploration_fraction: f64,
    /// ε at the start.
    #[default(1.0)]
    pub exploration_initial_eps: f64,
    /// ε after `exploration_fraction`.
    #[default(0.05)]
    pub exploration_final_eps: f64,
    /// RLlib's ε schedule `[[t, v], …]` (or a number); overrides the three above.
    pub epsilon: Option<Schedule>,
    /// Global-norm gradient clipping (null: none).
    #[default(Some(10.0))]
    #[serde(alias = "grad_clip")]
    pub max_grad_norm: Option<f64>,
    /// Adam ε.
    #[default(1e-8)]
    #[serde(alias = "adam_epsilon")]
    pub adam_eps: f64,
    /// Double Q-learning: the online net picks the next action, the target net values it.
    #[default(false)]
    pub double_q: bool,
    /// Dueling heads: value and advantage branches.
    #[default(false)]
    pub dueling: bool,
    /// Hidden layers of each head branch (after the trunk).
    pub hiddens: Vec<usize>,
    /// Atoms of the return distribution (1: plain Q-values; > 1: C51).
    #[default(1)]
    pub num_atoms: usize,
    /// Lowest atom.
    #[default(-10.0)]
    pub v_min: f64,
    /// Highest atom.
    #[default(10.0)]
    pub v_max: f64,
    /// Factorised-Gaussian noisy layers in the heads.
    #[default(false)]
    pub noisy: bool,
    /// Initial noise scale σ₀ of noisy layers.
    #[default(0.5)]
    pub sigma0: f64,
    /// TD loss (non-distributional).
    #[default(TdLoss::Huber)]
    pub td_error_loss_fn: TdLoss,
    /// Network shape.
    pub policy_kwargs: QPolicyKwargs,
    /// The replay buffer and loop keys shared with SAC (flat in YAML: `buffer_size`,
    /// `learning_starts`, `gradient_steps`, `training_intensity`, `n_step`,
    /// `prioritized_replay*`, `store_buffer_in_checkpoints`).
    #[serde(flatten, skip_deserializing)]
    pub replay: ReplayKeys,
}

impl DqnConfig {
    /// The target-network updates.
    pub fn target_update(&self) -> TargetUpdate {
        TargetUpdate {
            interval: self.target_update_interval,
            tau: self.tau,
        }
    }

    /// ε after `t` of `total` env steps.
    pub fn epsilon_at(&self, t: u64, total: u64) -> f64 {
        match &self.epsilon {
            Some(s) => s.value(t, total),
            None => rl_training_off_policy::linear_epsilon(
                self.exploration_initial_eps,
                self.exploration_final_eps,
                self.exploration_fraction,
                t,
                total,
            ),
        }
    }
}

impl AlgoConfig for DqnConfig {
    /// The shared replay keys are read apart from the rest (both strictly).
    fn from_kwargs(kw: &serde_json::Map<String, serde_json::Value>) -> Result<Self, ConfigError> {
        from_kwargs_with_part(kw, |c: &mut Self, r| c.replay = r)
    }

    /// Range checks with messages naming the field.
    fn validate(&self) -> Result<(), rl_training_core::config::ConfigError> {
        let err = |f: &str, m: &str| rl_training_core::config::invalid(f, m);
        self.replay.validate(self.train_freq, self.batch_size)?;
        if self.learning_rate.initial() <= 0.0 {
            return err("learning_rate", "must be positive");
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
        for (f, v) in [
            ("exploration_initial_eps", self.exploration_initial_eps),
            ("exploration_final_eps", self.exploration_final_eps),
            ("exploration_fraction", self.exploration_fraction),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return err(f, "must be in [0, 1]");
            }
        }
        if self.max_grad_norm.is_some_and(|g| g <= 0.0) {
            return err(
                "max_grad_norm",
                "must be positive (or null for no clipping)",
            );
        }
        if self.num_atoms == 0 {
            return err("num_atoms", "must be at least 1");
        }
        if self.num_atoms > 1 && !(self.v_min < self.v_max) {
            return err("v_min", "must be below v_max");
        }
        if self.noisy && !(self.sigma0 > 0.0) {
            return err("sigma0", "must be positive");
        }
        let g = self.policy_kwargs.q_head_gain;
        if !(g.is_finite() && g >= 0.0) {
            return err("policy_kwargs.q_head_gain", "must be a finite number >= 0");
        }
        if self.hiddens.contains(&0) || self.policy_kwargs.net_arch.contains(&0) {
            return err("hiddens", "layer widths must be at least 1");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: serde_json::Value) -> Result<DqnConfig, ConfigError> {
        DqnConfig::from_kwargs(v.as_object().expect("a table"))
    }

    #[test]
    fn shared_replay_keys_and_own_keys_in_one_flat_table() {
        let c = parse(
            json!({"lr": 0.01, "replay_buffer_capacity": 500, "n_step": 3,
            "prioritized_replay": true, "batch_size": 8}),
        )
        .unwrap();
        assert_eq!((c.replay.buffer_size, c.batch_size), (500, 8));
        assert_eq!(c.replay.n_step, rl_training_core::replay::NStep::Fixed(3));
        assert!(c.replay.prioritized_replay);
        assert_eq!(c.learning_rate, Schedule::Constant(0.01));
        // Saved flat, and read back the same.
        let saved = serde_json::to_value(&c).unwrap();
        assert_eq!(saved["buffer_size"], json!(500));
        assert_eq!(parse(saved).unwrap(), c);
        assert_eq!(parse(json!({})).unwrap(), DqnConfig::default());
    }

    #[test]
    fn errors_in_either_part_name_the_key() {
        let e = parse(json!({"buffer_size": "many"})).unwrap_err();
        assert_eq!(e.field, "algo_kwargs.buffer_size", "{e}");
        let e = parse(json!({"gamma": "x"})).unwrap_err();
        assert_eq!(e.field, "algo_kwargs.gamma", "{e}");
        let e = parse(json!({"bogus": 1})).unwrap_err();
        assert!(e.to_string().contains("unknown field `bogus`"), "{e}");
        let e = parse(json!({"buffer_size": 0})).unwrap_err();
        assert_eq!(e.field, "algo_kwargs.buffer_size", "{e}");
    }
}
