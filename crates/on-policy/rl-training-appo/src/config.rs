//! APPO hyperparameters: the seed table plus RLlib's options.

use rl_training_core::config::{AlgoConfig, ConfigError, check, from_kwargs_with_part, invalid};
use rl_training_core::schedule::Schedule;
use rl_training_on_policy::actor_learner::ActorLearnerKeys;
use serde::{Deserialize, Serialize};
use smart_default::SmartDefault;

/// APPO hyperparameters (`algo_kwargs` of a run config).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, SmartDefault)]
#[serde(deny_unknown_fields, default)]
pub struct AppoConfig {
    /// Adam step size (number or schedule).
    #[default(Schedule::Constant(3e-4))]
    #[serde(alias = "lr", alias = "lr_schedule")]
    pub learning_rate: Schedule,
    /// Steps per env in one runner batch.
    #[default(128)]
    #[serde(alias = "rollout_fragment_length")]
    pub n_steps: usize,
    /// Minibatch size (steps).
    #[default(256)]
    #[serde(alias = "minibatch_size")]
    pub batch_size: usize,
    /// Passes over a batch each time the learner trains on it.
    #[default(4)]
    #[serde(alias = "num_epochs")]
    pub n_epochs: usize,
    /// Surrogate clipping ε.
    #[default(0.2)]
    #[serde(alias = "clip_param")]
    pub clip_range: f64,
    /// Discount.
    #[default(0.99)]
    pub gamma: f64,
    /// Advantages by V-trace (else GAE from the runners' behaviour values).
    #[default(true)]
    pub vtrace: bool,
    /// With `vtrace: false`: GAE advantages (else λ = 1, discounted returns minus values).
    #[default(true)]
    pub use_gae: bool,
    /// GAE λ (with `vtrace: false` and `use_gae`).
    #[default(1.0)]
    #[serde(alias = "lambda_", alias = "lambda")]
    pub gae_lambda: f64,
    /// Entropy bonus (number or schedule).
    #[default(Schedule::Constant(0.01))]
    #[serde(alias = "entropy_coeff", alias = "entropy_coeff_schedule")]
    pub ent_coef: Schedule,
    /// Value loss coefficient.
    #[default(0.5)]
    #[serde(alias = "vf_loss_coeff")]
    pub vf_coef: f64,
    /// Env runner threads.
    #[default(16)]
    #[serde(alias = "num_actors", alias = "num_workers")]
    pub num_env_runners: usize,
    /// Add `kl_coeff · KL(target ‖ current)` to the loss.
    #[default(false)]
    pub use_kl_loss: bool,
    /// Initial KL coefficient (adapted towards `kl_target`).
    #[default(1.0)]
    pub kl_coeff: f64,
    /// KL the coefficient aims at (×1.5 above 2·target, ×0.5 below target/2).
    #[default(0.01)]
    pub kl_target: f64,
    /// Learner updates between target-network updates.
    #[default(1)]
    pub target_network_update_freq: u64,
    /// Target update `target ← τ·policy + (1 − τ)·target`.
    #[default(1.0)]
    pub tau: f64,
    /// Upper clip of the importance ratio target/behaviour in the surrogate.
    #[default(2.0)]
    pub target_worker_clipping: f64,
    /// Batches the circular buffer holds.
    #[default(4)]
    pub circular_buffer_num_batches: usize,
    /// Times each batch is trained on before it leaves the buffer.
    #[default(2)]
    pub circular_buffer_iterations_per_batch: usize,
    /// Global gradient-norm clip (None: off).
    #[default(Some(40.0))]
    #[serde(alias = "max_grad_norm")]
    pub grad_clip: Option<f64>,
    /// Adam ε.
    #[default(1e-7)]
    #[serde(alias = "adam_eps")]
    pub epsilon: f64,
    /// The runner, queue, V-trace and network keys shared with IMPALA ([`ActorLearnerKeys`], flat
    /// in YAML).
    #[serde(flatten, skip_deserializing)]
    pub shared: ActorLearnerKeys,
}

impl AlgoConfig for AppoConfig {
    /// The shared keys are read apart from the rest (both strictly).
    fn from_kwargs(kw: &serde_json::Map<String, serde_json::Value>) -> Result<Self, ConfigError> {
        from_kwargs_with_part(kw, |c: &mut Self, p| c.shared = p)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        self.shared.validate()?;
        check::at_least_one(&[
            ("n_steps", self.n_steps),
            ("batch_size", self.batch_size),
            ("n_epochs", self.n_epochs),
            ("num_env_runners", self.num_env_runners),
            (
                "circular_buffer_num_batches",
                self.circular_buffer_num_batches,
            ),
            (
                "circular_buffer_iterations_per_batch",
                self.circular_buffer_iterations_per_batch,
            ),
        ])?;
        check::unit_interval("gamma", self.gamma)?;
        check::unit_interval("gae_lambda", self.gae_lambda)?;
        check::positive("clip_range", self.clip_range)?;
        if !(self.tau > 0.0 && self.tau <= 1.0) {
            return invalid("tau", "must be in (0, 1]");
        }
        if self.target_network_update_freq == 0 {
            return invalid(
                "target_network_update_freq",
                "update intervals must be at least 1",
            );
        }
        check::positive("target_worker_clipping", self.target_worker_clipping)?;
        check::positive("learning_rate", self.learning_rate.initial())?;
        check::grad_clip("grad_clip", self.grad_clip)?;
        if self.kl_target <= 0.0 || self.kl_coeff < 0.0 {
            let m = "kl_target must be positive and kl_coeff non-negative";
            return invalid("kl_target", m);
        }
        Ok(())
    }
}
