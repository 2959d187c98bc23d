//! rl-training-on-policy: what PPO, A2C, TRPO and PPG share — actor-critic policies, rollout
//! collection with GAE, and the agent shell around a learner.
#![warn(missing_docs)]

pub mod actor_learner;
pub mod agent;
pub mod flat;
pub mod loss;
pub mod multi_agent;
pub mod policy;
pub mod recurrent;
pub mod remote;
pub mod rollout;
pub mod sync_runners;

pub use agent::{
    ActorCriticConfig, ActorCriticKeys, ActorCriticKeysConfig, BuildContext, CoreState,
    OnPolicyAgent, OnPolicyConfig, OnPolicyCore, OnPolicyLearner, PolicyFor, Rollout,
    RolloutSettings, actor_critic_grads, load_policy_and_optimizer, save_policy_and_optimizer,
};
pub use policy::{
    ActorCritic, FeaturesExtractor, FeaturesExtractorKwargs, NetArch, PolicyKwargs, PolicyOutput,
    Sde, SdeNoise,
};
pub use rl_training_core::agent::EnvMaker;
pub use rollout::{CollectorState, RolloutCollector, RolloutInfo};
