//! IMPALA hyperparameters: the seed table plus RLlib's options (RLlib names as given, SB3-style
//! aliases where the seed uses them).

use rl_training_core::config::{AlgoConfig, ConfigError, check, from_kwargs_with_part, invalid};
use rl_training_core::schedule::Schedule;
use rl_training_on_policy::actor_learner::ActorLearnerKeys;
use serde::{Deserialize, Serialize};
use smart_default::SmartDefault;

/// The learner's optimizer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OptType {
    /// Adam (ε = `epsilon`).
    Adam,
    /// RMSprop (smoothing `decay`, ε = `epsilon`, `momentum` must be 0).
    Rmsprop,
}

/// IMPALA hyperparameters (`algo_kwargs` of a run config).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, SmartDefault)]
#[serde(deny_unknown_fields, default)]
pub struct ImpalaConfig {
    /// Step size: a number, `lin_<v>` or RLlib's `[[t, v], …]` (`lr_schedule`).
    #[default(Schedule::Constant(5e-4))]
    #[serde(alias = "lr", alias = "lr_schedule")]
    pub learning_rate: Schedule,
    /// Steps per env in one runner batch.
    #[default(20)]
    #[serde(alias = "rollout_fragment_length")]
    pub n_steps: usize,
    /// Discount.
    #[default(0.99)]
    pub gamma: f64,
    /// Entropy bonus: a number or a schedule (`entropy_coeff_schedule`).
    #[default(Schedule::Constant(0.01))]
    #[serde(alias = "entropy_coeff", alias = "entropy_coeff_schedule")]
    pub ent_coef: Schedule,
    /// Value loss coefficient.
    #[default(0.5)]
    #[serde(alias = "vf_loss_coeff")]
    pub vf_coef: f64,
    /// Env runner threads.
    #[default(32)]
    #[serde(alias = "num_actors", alias = "num_workers")]
    pub num_env_runners: usize,
    /// Replayed batches per new batch (`p`: ⌊p⌋ plus one more with probability p − ⌊p⌋).
    #[default(0.0)]
    pub replay_proportion: f64,
    /// Batches kept for replay.
    #[default(0)]
    pub replay_buffer_num_slots: usize,
    /// Global gradient-norm clip (None: off).
    #[default(Some(40.0))]
    #[serde(alias = "max_grad_norm")]
    pub grad_clip: Option<f64>,
    /// `adam` or `rmsprop`.
    #[default(OptType::Adam)]
    pub opt_type: OptType,
    /// RMSprop smoothing.
    #[default(0.99)]
    pub decay: f64,
    /// RMSprop momentum (only 0 is supported).
    #[default(0.0)]
    pub momentum: f64,
    /// Optimizer ε.
    #[default(1e-7)]
    pub epsilon: f64,
    /// The runner, queue, V-trace and network keys shared with APPO ([`ActorLearnerKeys`], flat
    /// in YAML).
    #[serde(flatten, skip_deserializing)]
    pub shared: ActorLearnerKeys,
}

impl AlgoConfig for ImpalaConfig {
    /// The shared keys are read apart from the rest (both strictly).
    fn from_kwargs(kw: &serde_json::Map<String, serde_json::Value>) -> Result<Self, ConfigError> {
        from_kwargs_with_part(kw, |c: &mut Self, p| c.shared = p)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        self.shared.validate()?;
        let counts = [
            ("n_steps", self.n_steps),
            ("num_env_runners", self.num_env_runners),
        ];
        check::at_least_one(&counts)?;
        check::unit_interval("gamma", self.gamma)?;
        if self.replay_proportion < 0.0 {
            return invalid("replay_proportion", "must be non-negative");
        }
        if self.replay_proportion > 0.0 && self.replay_buffer_num_slots == 0 {
            let m = "must be at least 1 when replay_proportion > 0";
            return invalid("replay_buffer_num_slots", m);
        }
        check::positive("learning_rate", self.learning_rate.initial())?;
        check::grad_clip("grad_clip", self.grad_clip)?;
        if self.momentum != 0.0 {
            return invalid("momentum", "only 0 is supported (RMSprop without momentum)");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: serde_json::Value) -> Result<ImpalaConfig, ConfigError> {
        ImpalaConfig::from_kwargs(v.as_object().expect("a table"))
    }

    #[test]
    fn shared_runner_keys_and_own_keys_in_one_flat_table() {
        let c = parse(
            json!({"num_workers": 4, "num_envs_per_worker": 3, "lockstep": true,
            "n_steps": 10}),
        )
        .unwrap();
        assert_eq!((c.num_env_runners, c.n_steps), (4, 10));
        assert_eq!(c.shared.num_envs_per_env_runner, 3);
        assert!(c.shared.lockstep);
        let saved = serde_json::to_value(&c).unwrap();
        assert_eq!(saved["num_envs_per_env_runner"], json!(3));
        assert_eq!(parse(saved).unwrap(), c);
        let e = parse(json!({"learner_queue_timeout": "soon"})).unwrap_err();
        assert_eq!(e.field, "algo_kwargs.learner_queue_timeout", "{e}");
        // The V-trace part, under RLlib's older names too; its checks name the key.
        let c = parse(json!({"vtrace_clip_rho_threshold": 2.0, "n_steps": 7})).unwrap();
        assert_eq!(
            (c.shared.vtrace_clip_rho, c.shared.vtrace_clip_c),
            (2.0, 1.0)
        );
        assert_eq!(c.n_steps, 7);
        let e = parse(json!({"vtrace_clip_c": -1.0})).unwrap_err();
        assert_eq!(e.field, "algo_kwargs.vtrace_clip_c", "{e}");
        let e = parse(json!({"vtrace_clip_rho": "big"})).unwrap_err();
        assert_eq!(e.field, "algo_kwargs.vtrace_clip_rho", "{e}");
    }
}
