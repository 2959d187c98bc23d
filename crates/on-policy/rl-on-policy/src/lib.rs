//! rl-on-policy: what PPO, A2C, TRPO and PPG share — actor-critic policies and rollout
//! collection with GAE.
#![warn(missing_docs)]

pub mod policy;
pub mod rollout;

pub use policy::{ActorCritic, NetArch, PolicyKwargs, PolicyOutput};
pub use rollout::{CollectorState, RolloutCollector, RolloutInfo};
