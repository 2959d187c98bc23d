//! rl: deep reinforcement learning on burn.
pub use rl_core as core;
