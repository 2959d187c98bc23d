//! DreamerV3's hyperparameters with RLlib's names and defaults (`DreamerV3Config`).

use rl_training_core::config::{AlgoConfig, ConfigError, check, invalid};
use rl_training_model_based::ModelSize;
use serde::{Deserialize, Serialize};
use smart_default::SmartDefault;

/// Whether observations pass through symlog before the encoder (and are predicted in
/// symlog space): RLlib's `symlog_obs`, `"auto"` (vector observations yes, images no) or a
/// boolean.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SymlogObs {
    /// `true` or `false`.
    Set(bool),
    /// `"auto"`.
    Auto(AutoKeyword),
}

/// The keyword `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AutoKeyword {
    /// `"auto"`.
    Auto,
}

impl SymlogObs {
    /// The setting for observations that are (or are not) images.
    pub fn resolve(self, image_obs: bool) -> bool {
        match self {
            SymlogObs::Set(b) => b,
            SymlogObs::Auto(_) => !image_obs,
        }
    }
}

/// How the actor's gradient reaches Box actions (discrete actions always use REINFORCE).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContinuousActorGradient {
    /// Backpropagation of the λ-returns through the world model's imagined dynamics
    /// (reparameterized actions): the DreamerV3 paper's (2023) choice and RLlib's.
    Dynamics,
    /// REINFORCE with the scaled advantages, as for discrete actions (the newer DreamerV3
    /// code's choice).
    Reinforce,
}

/// RLlib's `replay_buffer_config` (only the capacity matters here, as in RLlib).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, SmartDefault)]
#[serde(deny_unknown_fields, default)]
pub struct ReplayBufferConfig {
    /// RLlib's buffer class name; only `EpisodeReplayBuffer` exists here.
    #[default("EpisodeReplayBuffer".to_string())]
    #[serde(rename = "type")]
    pub kind: String,
    /// Env steps kept.
    #[default(1_000_000)]
    pub capacity: usize,
}

/// `algo_kwargs` of DreamerV3 (RLlib's `DreamerV3Config.training` names; the
/// capital-letter ones are spelled as RLlib spells them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, SmartDefault)]
#[serde(deny_unknown_fields, default)]
pub struct DreamerV3Config {
    /// The size switch (`nano`, `micro`, `mini`, `XXS`, `XS`, `S`, `M`, `L`, `XL`).
    #[default(ModelSize::XS)]
    pub model_size: ModelSize,
    /// Replayed steps per env step (`B·T` steps per update, so one update every
    /// `B·T / training_ratio` env steps).
    #[default(1024.0)]
    pub training_ratio: f64,
    /// Sequences per replayed batch `B`.
    #[default(16)]
    #[serde(rename = "batch_size_B")]
    pub batch_size_b: usize,
    /// Steps per sequence `T`.
    #[default(64)]
    #[serde(rename = "batch_length_T")]
    pub batch_length_t: usize,
    /// Imagination horizon `H`.
    #[default(15)]
    #[serde(rename = "horizon_H")]
    pub horizon_h: usize,
    /// Discount (DreamerV3: 0.997).
    #[default(0.997)]
    pub gamma: f64,
    /// λ of the λ-returns.
    #[default(0.95)]
    pub gae_lambda: f64,
    /// Entropy bonus of the actor (`η`).
    #[default(3e-4)]
    pub entropy_scale: f64,
    /// EMA decay of the return percentiles.
    #[default(0.99)]
    pub return_normalization_decay: f64,
    /// Train the critic (needed to train the actor).
    #[default(true)]
    pub train_critic: bool,
    /// Train the actor.
    #[default(true)]
    pub train_actor: bool,
    /// The actor's gradient for Box actions: `dynamics` (backpropagation through the
    /// imagined trajectory, RLlib's) or `reinforce`. Not an RLlib key: RLlib always
    /// backpropagates for Box actions.
    #[default(ContinuousActorGradient::Dynamics)]
    pub continuous_actor_gradient: ContinuousActorGradient,
    /// World model Adam learning rate.
    #[default(1e-4)]
    pub world_model_lr: f64,
    /// Actor Adam learning rate.
    #[default(3e-5)]
    pub actor_lr: f64,
    /// Critic Adam learning rate.
    #[default(3e-5)]
    pub critic_lr: f64,
    /// Global-norm clip of the world model's gradient.
    #[default(1000.0)]
    pub world_model_grad_clip_by_global_norm: f64,
    /// Global-norm clip of the critic's gradient.
    #[default(100.0)]
    pub critic_grad_clip_by_global_norm: f64,
    /// Global-norm clip of the actor's gradient.
    #[default(100.0)]
    pub actor_grad_clip_by_global_norm: f64,
    /// symlog on vector observations (`"auto"`, `true`, `false`).
    #[default(SymlogObs::Auto(AutoKeyword::Auto))]
    pub symlog_obs: SymlogObs,
    /// The replay buffer (`capacity`).
    pub replay_buffer_config: ReplayBufferConfig,
    /// Save the replay buffer with each checkpoint (bit-identical resume; large).
    #[default(false)]
    pub store_buffer_in_checkpoints: bool,
}

impl AlgoConfig for DreamerV3Config {
    /// Range checks with messages naming the field.
    fn validate(&self) -> Result<(), ConfigError> {
        check::at_least_one(&[
            ("batch_size_B", self.batch_size_b),
            ("batch_length_T", self.batch_length_t),
            ("horizon_H", self.horizon_h),
            (
                "replay_buffer_config.capacity",
                self.replay_buffer_config.capacity,
            ),
        ])?;
        for (field, v) in [
            ("training_ratio", self.training_ratio),
            ("world_model_lr", self.world_model_lr),
            ("actor_lr", self.actor_lr),
            ("critic_lr", self.critic_lr),
        ] {
            check::positive(field, v)?;
        }
        let clips = [
            ("world_model", self.world_model_grad_clip_by_global_norm),
            ("critic", self.critic_grad_clip_by_global_norm),
            ("actor", self.actor_grad_clip_by_global_norm),
        ];
        for (net, v) in clips {
            check::positive(&format!("{net}_grad_clip_by_global_norm"), v)?;
        }
        for (field, v) in [
            ("gamma", self.gamma),
            ("gae_lambda", self.gae_lambda),
            (
                "return_normalization_decay",
                self.return_normalization_decay,
            ),
        ] {
            check::unit_interval(field, v)?;
        }
        if !(self.entropy_scale >= 0.0) {
            return invalid("entropy_scale", "must be non-negative");
        }
        if self.train_actor && !self.train_critic {
            return invalid(
                "train_actor",
                "needs train_critic: the actor learns from the critic's values",
            );
        }
        if self.replay_buffer_config.kind != "EpisodeReplayBuffer" {
            return invalid(
                "replay_buffer_config.type",
                "only EpisodeReplayBuffer is available",
            );
        }
        if self.replay_buffer_config.capacity < self.batch_length_t {
            return invalid(
                "replay_buffer_config.capacity",
                "must hold at least batch_length_T steps",
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kw(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn rllib_names_and_defaults() {
        let c = DreamerV3Config::from_kwargs(&kw(serde_json::json!({
            "model_size": "nano", "batch_size_B": 4, "batch_length_T": 16, "horizon_H": 5,
            "symlog_obs": true, "replay_buffer_config": {"capacity": 1000}
        })))
        .unwrap();
        assert_eq!(c.model_size, ModelSize::Nano);
        assert_eq!((c.batch_size_b, c.batch_length_t, c.horizon_h), (4, 16, 5));
        assert!(c.symlog_obs.resolve(true));
        let d = DreamerV3Config::default();
        assert_eq!(d.model_size, ModelSize::XS);
        assert_eq!(
            (d.gamma, d.gae_lambda, d.training_ratio),
            (0.997, 0.95, 1024.0)
        );
        assert_eq!(
            (d.world_model_lr, d.actor_lr, d.critic_lr),
            (1e-4, 3e-5, 3e-5)
        );
        assert!(d.symlog_obs.resolve(false) && !d.symlog_obs.resolve(true));
        // Serialized with RLlib's spelling, and read back.
        let v = serde_json::to_value(&d).unwrap();
        assert_eq!(v["batch_size_B"], 16);
        assert_eq!(v["symlog_obs"], "auto");
        assert_eq!(DreamerV3Config::from_kwargs(&kw(v)).unwrap(), d);
    }

    #[test]
    fn bad_values_name_their_field() {
        for (bad, field) in [
            (
                serde_json::json!({"batch_size_b": 4}),
                "algo_kwargs.batch_size_b",
            ),
            (
                serde_json::json!({"model_size": "XXL"}),
                "algo_kwargs.model_size",
            ),
            (serde_json::json!({"horizon_H": 0}), "algo_kwargs.horizon_H"),
            (serde_json::json!({"gamma": 1.5}), "algo_kwargs.gamma"),
            (
                serde_json::json!({"critic_grad_clip_by_global_norm": 0.0}),
                "algo_kwargs.critic_grad_clip_by_global_norm",
            ),
            (
                serde_json::json!({"symlog_obs": "sometimes"}),
                "algo_kwargs.symlog_obs",
            ),
            (
                serde_json::json!({"train_critic": false}),
                "algo_kwargs.train_actor",
            ),
            (
                serde_json::json!({"replay_buffer_config": {"capacity": 10}}),
                "algo_kwargs.replay_buffer_config.capacity",
            ),
            (
                serde_json::json!({"replay_buffer_config": {"size": 10}}),
                "algo_kwargs.replay_buffer_config.size",
            ),
        ] {
            let e = DreamerV3Config::from_kwargs(&kw(bad.clone())).unwrap_err();
            assert_eq!(e.field, field, "{bad}: {e}");
        }
    }
}
