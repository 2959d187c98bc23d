//! APPO hyperparameters: the seed table plus RLlib's options.

use rl_core::config::{AlgoConfig, ConfigError, from_kwargs_with_part};
use rl_core::schedule::Schedule;
use rl_on_policy::PolicyKwargs;
use rl_on_policy::actor_learner::RunnerKeys;
use serde::{Deserialize, Serialize};

/// APPO hyperparameters (`algo_kwargs` of a run config).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AppoConfig {
    /// Adam step size (number or schedule).
    #[serde(alias = "lr", alias = "lr_schedule")]
    pub learning_rate: Schedule,
    /// Steps per env in one runner batch.
    #[serde(alias = "rollout_fragment_length")]
    pub n_steps: usize,
    /// Minibatch size (steps).
    #[serde(alias = "minibatch_size")]
    pub batch_size: usize,
    /// Passes over a batch each time the learner trains on it.
    #[serde(alias = "num_epochs")]
    pub n_epochs: usize,
    /// Surrogate clipping ε.
    #[serde(alias = "clip_param")]
    pub clip_range: f64,
    /// Discount.
    pub gamma: f64,
    /// Advantages by V-trace (else GAE from the runners' behaviour values).
    pub vtrace: bool,
    /// With `vtrace: false`: GAE advantages (else λ = 1, discounted returns minus values).
    pub use_gae: bool,
    /// GAE λ (with `vtrace: false` and `use_gae`).
    #[serde(alias = "lambda_", alias = "lambda")]
    pub gae_lambda: f64,
    /// V-trace ρ̄.
    #[serde(alias = "vtrace_clip_rho_threshold")]
    pub vtrace_clip_rho: f64,
    /// V-trace c̄.
    #[serde(alias = "vtrace_clip_c_threshold")]
    pub vtrace_clip_c: f64,
    /// Entropy bonus (number or schedule).
    #[serde(alias = "entropy_coeff", alias = "entropy_coeff_schedule")]
    pub ent_coef: Schedule,
    /// Value loss coefficient.
    #[serde(alias = "vf_loss_coeff")]
    pub vf_coef: f64,
    /// Env runner threads.
    #[serde(alias = "num_actors", alias = "num_workers")]
    pub num_env_runners: usize,
    /// Add `kl_coeff · KL(target ‖ current)` to the loss.
    pub use_kl_loss: bool,
    /// Initial KL coefficient (adapted towards `kl_target`).
    pub kl_coeff: f64,
    /// KL the coefficient aims at (×1.5 above 2·target, ×0.5 below target/2).
    pub kl_target: f64,
    /// Learner updates between target-network updates.
    pub target_network_update_freq: u64,
    /// Target update `target ← τ·policy + (1 − τ)·target`.
    pub tau: f64,
    /// Upper clip of the importance ratio target/behaviour in the surrogate.
    pub target_worker_clipping: f64,
    /// Batches the circular buffer holds.
    pub circular_buffer_num_batches: usize,
    /// Times each batch is trained on before it leaves the buffer.
    pub circular_buffer_iterations_per_batch: usize,
    /// Global gradient-norm clip (None: off).
    #[serde(alias = "max_grad_norm")]
    pub grad_clip: Option<f64>,
    /// Adam ε.
    #[serde(alias = "adam_eps")]
    pub epsilon: f64,
    /// Network architecture and initialization.
    pub policy_kwargs: PolicyKwargs,
    /// The runner and queue keys shared with IMPALA (flat in YAML: `num_envs_per_env_runner`,
    /// `learner_queue_size`, `learner_queue_timeout`, `broadcast_interval`, `max_policy_lag`,
    /// `lockstep`).
    #[serde(flatten, skip_deserializing)]
    pub runners: RunnerKeys,
}

impl Default for AppoConfig {
    fn default() -> Self {
        Self {
            learning_rate: Schedule::Constant(3e-4),
            n_steps: 128,
            batch_size: 256,
            n_epochs: 4,
            clip_range: 0.2,
            gamma: 0.99,
            vtrace: true,
            use_gae: true,
            gae_lambda: 1.0,
            vtrace_clip_rho: 1.0,
            vtrace_clip_c: 1.0,
            ent_coef: Schedule::Constant(0.01),
            vf_coef: 0.5,
            num_env_runners: 16,
            use_kl_loss: false,
            kl_coeff: 1.0,
            kl_target: 0.01,
            target_network_update_freq: 1,
            tau: 1.0,
            target_worker_clipping: 2.0,
            circular_buffer_num_batches: 4,
            circular_buffer_iterations_per_batch: 2,
            grad_clip: Some(40.0),
            epsilon: 1e-7,
            policy_kwargs: PolicyKwargs::default(),
            runners: RunnerKeys::default(),
        }
    }
}

impl AlgoConfig for AppoConfig {
    /// The shared runner keys are read apart from the rest (both strictly).
    fn from_kwargs(kw: &serde_json::Map<String, serde_json::Value>) -> Result<Self, ConfigError> {
        from_kwargs_with_part(kw, |c: &mut Self, r| c.runners = r)
    }

    fn validate(&self) -> Result<(), rl_core::config::ConfigError> {
        let err = |f: &str, m: &str| rl_core::config::invalid(f, m);
        self.runners.validate()?;
        for (f, v) in [
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
        ] {
            if v == 0 {
                return err(f, "must be at least 1");
            }
        }
        if !(0.0..=1.0).contains(&self.gamma) {
            return err("gamma", "must be in [0, 1]");
        }
        if !(0.0..=1.0).contains(&self.gae_lambda) {
            return err("gae_lambda", "must be in [0, 1]");
        }
        if self.clip_range <= 0.0 {
            return err("clip_range", "must be positive");
        }
        if !(self.tau > 0.0 && self.tau <= 1.0) {
            return err("tau", "must be in (0, 1]");
        }
        if self.target_network_update_freq == 0 {
            return err(
                "target_network_update_freq",
                "update intervals must be at least 1",
            );
        }
        if self.target_worker_clipping <= 0.0 {
            return err("target_worker_clipping", "must be positive");
        }
        if self.learning_rate.initial() <= 0.0 {
            return err("learning_rate", "must be positive");
        }
        if self.grad_clip.is_some_and(|g| g <= 0.0) {
            return err("grad_clip", "must be positive (or null for no clipping)");
        }
        if self.kl_target <= 0.0 || self.kl_coeff < 0.0 {
            return err(
                "kl_target",
                "kl_target must be positive and kl_coeff non-negative",
            );
        }
        Ok(())
    }
}
