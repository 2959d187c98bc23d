//! rl-training-core: the shared machinery of the `rl` workspace.
//!
//! Spaces and Gymnasium-style environments with wrappers and vector envs; rollout and replay
//! buffers (uniform, prioritized, n-step); action distributions; networks with SB3's initialization; flat optimizers with
//! global-norm clipping; schedules; the `Learner`/`Algorithm` traits; checkpoints; logging.
#![warn(missing_docs)]

pub mod actor_learner;
pub mod agent;
pub mod algorithm;
pub mod batch;
pub mod buffers;
pub mod checker;
pub mod checkpoint;
pub mod config;
pub mod device;
pub mod distributions;
pub mod env;
#[cfg(feature = "flex")]
pub mod fast_mlp;
#[cfg(feature = "flex")]
pub mod fast_ops;
pub mod kernels;
pub mod logger;
pub mod losses;
pub mod multi_agent;
pub mod nn;
pub mod optim;
pub mod params;
pub mod plot;
pub mod recurrent;
pub mod replay;
pub mod rng;
pub mod runner;
pub mod schedule;
pub mod sequences;
pub mod spaces;
pub mod testing;
pub mod threads;
pub mod vec_env;
pub mod vtrace;
pub mod wrappers;

pub use algorithm::{
    Algorithm, Callback, Control, EvalResult, Event, Learner, LearnerState, Progress, RlError,
    RunStatus, StopConditions,
};
pub use env::{Env, EnvError, Info, Step};
pub use rng::Rng;
pub use spaces::Space;
pub use vec_env::VecEnv;

/// Re-export of burn, so downstream crates use the same version.
pub use burn;
