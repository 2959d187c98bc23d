//! GAIL / AIRL hyperparameters: the seed table's adversarial settings (`disc_learning_rate`
//! 3e-4, `n_disc_updates` 4, `expert_data_path` required, `reward_type` gail | airl,
//! `gradient_penalty_coef` 10) next to PPO's (`learning_rate` 3e-4, `n_steps` 2048,
//! `batch_size` 64 …, PPO's table and defaults), all in one flat `algo_kwargs` table.

use rl_training_core::config::{AlgoConfig, strict};
use rl_training_ppo::PpoConfig;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Which adversarial imitation method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RewardType {
    /// GAIL (Ho & Ermon 2016): a discriminator `D(s, a)`; the policy's reward is
    /// `−log(1 − D)`.
    Gail,
    /// AIRL (Fu et al. 2018): `f(s, a, s′) = g(s, a) + γ h(s′) − h(s)`, `D = σ(f − log π)`; the
    /// policy's reward is `f − entropy_weight · log π`.
    Airl,
}

/// The adversarial part of the table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdversarialConfig {
    /// Expert demonstrations (`.npz` as the seed's `data/expert_demos.npz`, or `.parquet`).
    pub expert_data_path: String,
    /// Adam step size of the discriminator.
    #[serde(default = "lr")]
    pub disc_learning_rate: f64,
    /// Discriminator steps per rollout.
    #[serde(default = "four")]
    pub n_disc_updates: usize,
    /// `gail` or `airl`.
    #[serde(default = "gail")]
    pub reward_type: RewardType,
    /// Weight of the gradient penalty `(‖∇ₓ logit‖ − 1)²` on expert/policy interpolates.
    #[serde(default = "ten")]
    pub gradient_penalty_coef: f64,
    /// Expert and policy rows per discriminator step (each).
    #[serde(default = "disc_batch")]
    pub disc_batch_size: usize,
    /// Hidden layers of the discriminator's networks.
    #[serde(default = "disc_arch")]
    pub disc_net_arch: Vec<usize>,
    /// The reward term sees the state only: `g(s)` instead of `g(s, a)` (AIRL's state-only
    /// reward, inverse_rl's `state_only`).
    #[serde(default)]
    pub state_only: bool,
    /// Normalizes the discriminator's observation inputs with running statistics of the
    /// expert and policy rows it trains on (imitation's `RunningNorm` input layer).
    #[serde(default)]
    pub disc_normalize_input: bool,
    /// AIRL: the policy's reward is `f − entropy_weight · log π(a|s)`; 1 is the paper's
    /// `log D − log(1 − D)` (entropy-regularized RL), 0 is `f` alone (the `imitation`
    /// library's), inverse_rl's Pendulum script uses 0.1.
    #[serde(default = "one")]
    pub entropy_weight: f64,
    /// Normalizes the policy's learned reward with running statistics of the rollouts'
    /// rewards, `(r − mean) / std` (imitation's `NormalizedRewardNet`).
    #[serde(default)]
    pub normalize_reward: bool,
}

fn lr() -> f64 {
    3e-4
}
fn one() -> f64 {
    1.0
}
fn four() -> usize {
    4
}
fn gail() -> RewardType {
    RewardType::Gail
}
fn ten() -> f64 {
    10.0
}
fn disc_batch() -> usize {
    256
}
fn disc_arch() -> Vec<usize> {
    vec![64, 64]
}

/// The adversarial keys, which go to [`AdversarialConfig`]; every other key is PPO's.
pub const ADVERSARIAL_KEYS: &[&str] = &[
    "expert_data_path",
    "disc_learning_rate",
    "n_disc_updates",
    "reward_type",
    "gradient_penalty_coef",
    "disc_batch_size",
    "disc_net_arch",
    "state_only",
    "entropy_weight",
    "disc_normalize_input",
    "normalize_reward",
];

/// GAIL / AIRL hyperparameters (`algo_kwargs`): the adversarial settings and PPO's.
#[derive(Debug, Clone, PartialEq)]
pub struct GailConfig {
    /// Discriminator and expert data.
    pub adversarial: AdversarialConfig,
    /// The policy optimizer's.
    pub ppo: PpoConfig,
}

impl<'de> Deserialize<'de> for GailConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let all = serde_json::Map::<String, serde_json::Value>::deserialize(d)?;
        let (adv, ppo): (serde_json::Map<_, _>, serde_json::Map<_, _>) = all
            .into_iter()
            .partition(|(k, _)| ADVERSARIAL_KEYS.contains(&k.as_str()));
        let adversarial =
            strict(serde_json::Value::Object(adv), "algo_kwargs").map_err(D::Error::custom)?;
        // PPO's shared keys are read apart from its own (`from_kwargs`, which validates too).
        let ppo = PpoConfig::from_kwargs(&ppo).map_err(D::Error::custom)?;
        Ok(Self { adversarial, ppo })
    }
}

impl Serialize for GailConfig {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = match serde_json::to_value(&self.ppo).map_err(serde::ser::Error::custom)? {
            serde_json::Value::Object(m) => m,
            _ => unreachable!("a struct serializes to a map"),
        };
        if let serde_json::Value::Object(a) =
            serde_json::to_value(&self.adversarial).map_err(serde::ser::Error::custom)?
        {
            m.extend(a);
        }
        m.serialize(s)
    }
}

impl rl_training_on_policy::OnPolicyConfig for GailConfig {
    fn rollout_settings(&self) -> rl_training_on_policy::RolloutSettings {
        self.ppo.rollout_settings()
    }
}

impl rl_training_on_policy::ActorCriticConfig for GailConfig {
    fn policy_kwargs(&self) -> &rl_training_on_policy::PolicyKwargs {
        &self.ppo.actor_critic.policy_kwargs
    }
}

impl AlgoConfig for GailConfig {
    /// PPO's checks, then the adversarial ones; messages name the field.
    fn validate(&self) -> Result<(), rl_training_core::config::ConfigError> {
        self.ppo.validate()?;
        let a = &self.adversarial;
        let err = |f: &str, m: &str| rl_training_core::config::invalid(f, m);
        if a.expert_data_path.is_empty() {
            return err("expert_data_path", "must name a .npz or .parquet file");
        }
        if !(a.disc_learning_rate > 0.0) {
            return err("disc_learning_rate", "must be positive");
        }
        if a.n_disc_updates == 0 {
            return err("n_disc_updates", "must be at least 1");
        }
        if a.disc_batch_size == 0 {
            return err("disc_batch_size", "must be at least 1");
        }
        if !(a.gradient_penalty_coef >= 0.0) {
            return err("gradient_penalty_coef", "must be >= 0");
        }
        if !(a.entropy_weight >= 0.0) {
            return err("entropy_weight", "must be >= 0");
        }
        if a.disc_net_arch.contains(&0) {
            return err("disc_net_arch", "layer sizes must be at least 1");
        }
        Ok(())
    }
}
