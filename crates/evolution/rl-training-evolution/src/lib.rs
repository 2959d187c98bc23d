//! rl-training-evolution: what the evolution strategies (OpenAI-ES, ARS) share. Policies are flat
//! parameter vectors evaluated on the host ([`FlatPolicy`]); perturbations are slices of a
//! [`NoiseTable`] shared by all workers and named by their offset, so a worker reports an
//! offset and a return, never a vector; [`centered_rank`] shapes fitness; [`ObsStats`]
//! normalizes observations with statistics merged from every episode; [`WorkerPool`]
//! evaluates a population on `num_workers` threads, each with its own env, and returns the
//! results in task order, so a seeded run does not depend on thread scheduling.
#![warn(missing_docs)]

pub mod core;
pub mod noise;
pub mod policy;
pub mod pool;
pub mod remote;
pub mod shaping;

pub use crate::core::{
    CoreSettings, Evaluated, EvolutionAgent, EvolutionCore, PairReturns, PolicyDefault,
    PolicyDefaults, PolicyKeys, Population, Strategy, flat_policy, read_theta, set_theta,
    theta_file, theta_tensors, weighted_noise,
};
pub use noise::NoiseTable;
pub use policy::{FlatPolicy, HiddenActivation, ObsStats, PolicyArch};
pub use pool::{Episode, WorkerPool};
pub use shaping::{FitnessShaping, centered_rank};
