//! rl: deep reinforcement learning in Rust, on burn.
//!
//! The facade of the workspace: re-exports the crates and builds algorithms by name from a
//! [`RunConfig`](rl_core::config::RunConfig). The `rl` binary is the command-line interface.
#![warn(missing_docs)]

pub use rl_a2c as a2c;
pub use rl_appo as appo;
pub use rl_ars as ars;
pub use rl_awr as awr;
pub use rl_bc as bc;
pub use rl_core as core;
pub use rl_cql as cql;
pub use rl_dqn as dqn;
pub use rl_envs as envs;
pub use rl_es as es;
pub use rl_evolution as evolution;
pub use rl_gail as gail;
pub use rl_impala as impala;
pub use rl_marwil as marwil;
pub use rl_off_policy as off_policy;
pub use rl_offline as offline;
pub use rl_on_policy as on_policy;
pub use rl_ppg as ppg;
pub use rl_ppo as ppo;
pub use rl_recurrent_ppo as recurrent_ppo;
pub use rl_sac as sac;
pub use rl_trpo as trpo;

use rl_core::algorithm::{Algorithm, RlError};
use rl_core::burn::tensor::Device;
use rl_core::checkpoint::read_checkpoint;
use rl_core::config::RunConfig;
use rl_core::env::{Env, EnvError};
use std::path::Path;

/// Algorithms this build provides.
pub const ALGORITHMS: &[&str] = &[
    "ppo",
    "a2c",
    "trpo",
    "ppg",
    "recurrent_ppo",
    "impala",
    "appo",
    "dqn",
    "sac",
    "awr",
    "es",
    "ars",
    "bc",
    "marwil",
    "cql",
    "gail",
];

fn gamma_of(run: &RunConfig) -> f64 {
    run.algo_kwargs
        .get("gamma")
        .and_then(|v| v.as_f64())
        .unwrap_or(0.99)
}

/// A training env for `run` (registry env + episode statistics + normalization).
pub fn make_training_env(run: &RunConfig) -> Result<Box<dyn Env>, EnvError> {
    rl_envs::make_training_env(&run.env_id, &run.env_kwargs, &run.normalize, gamma_of(run))
}

/// An evaluation env for `run` (true rewards; observation statistics come from training).
pub fn make_eval_env(run: &RunConfig) -> Result<Box<dyn Env>, EnvError> {
    rl_envs::make_eval_env(&run.env_id, &run.env_kwargs, &run.normalize)
}

/// Builds the algorithm named by `run.algorithm`.
pub fn build(run: &RunConfig, device: &Device) -> Result<Box<dyn Algorithm>, RlError> {
    match run.algorithm.to_ascii_lowercase().as_str() {
        "ppo" => Ok(Box::new(rl_ppo::Ppo::new(run, &make_training_env, device)?)),
        "a2c" => Ok(Box::new(rl_a2c::A2c::new(run, &make_training_env, device)?)),
        "trpo" => Ok(Box::new(rl_trpo::Trpo::new(
            run,
            &make_training_env,
            device,
        )?)),
        "ppg" => Ok(Box::new(rl_ppg::Ppg::new(run, &make_training_env, device)?)),
        "recurrent_ppo" => Ok(Box::new(rl_recurrent_ppo::RecurrentPpo::new(
            run,
            &make_training_env,
            device,
        )?)),
        "impala" => Ok(Box::new(rl_impala::Impala::new(
            run,
            &make_training_env,
            device,
        )?)),
        "appo" => Ok(Box::new(rl_appo::Appo::new(
            run,
            &make_training_env,
            device,
        )?)),
        "dqn" => Ok(Box::new(rl_dqn::Dqn::new(run, &make_training_env, device)?)),
        "sac" => Ok(Box::new(rl_sac::Sac::new(run, &make_training_env, device)?)),
        "awr" => Ok(Box::new(rl_awr::Awr::new(run, &make_training_env, device)?)),
        "es" => Ok(Box::new(rl_es::Es::new(run, &make_training_env, device)?)),
        "ars" => Ok(Box::new(rl_ars::Ars::new(run, &make_training_env, device)?)),
        "bc" => Ok(Box::new(rl_bc::new(run, &make_training_env, device)?)),
        "marwil" => Ok(Box::new(rl_marwil::Marwil::new(
            run,
            &make_training_env,
            device,
        )?)),
        "cql" => Ok(Box::new(rl_cql::Cql::new(run, &make_training_env, device)?)),
        "gail" => Ok(Box::new(rl_gail::Gail::new(
            run,
            &make_training_env,
            device,
        )?)),
        other => Err(RlError::Config(format!(
            "algorithm: unknown {other:?}; available: {}",
            ALGORITHMS.join(", ")
        ))),
    }
}

/// Loads a checkpoint directory, whatever algorithm wrote it.
pub fn load(dir: &Path, device: &Device) -> Result<Box<dyn Algorithm>, RlError> {
    let ck = read_checkpoint(dir)?;
    match ck.algorithm.as_str() {
        "ppo" => Ok(Box::new(rl_ppo::Ppo::load(
            dir,
            &make_training_env,
            device,
        )?)),
        "a2c" => Ok(Box::new(rl_a2c::A2c::load(
            dir,
            &make_training_env,
            device,
        )?)),
        "trpo" => Ok(Box::new(rl_trpo::Trpo::load(
            dir,
            &make_training_env,
            device,
        )?)),
        "ppg" => Ok(Box::new(rl_ppg::Ppg::load(
            dir,
            &make_training_env,
            device,
        )?)),
        "recurrent_ppo" => Ok(Box::new(rl_recurrent_ppo::RecurrentPpo::load(
            dir,
            &make_training_env,
            device,
        )?)),
        "impala" => Ok(Box::new(rl_impala::Impala::load(
            dir,
            &make_training_env,
            device,
        )?)),
        "appo" => Ok(Box::new(rl_appo::Appo::load(
            dir,
            &make_training_env,
            device,
        )?)),
        "dqn" => Ok(Box::new(rl_dqn::Dqn::load(
            dir,
            &make_training_env,
            device,
        )?)),
        "sac" => Ok(Box::new(rl_sac::Sac::load(
            dir,
            &make_training_env,
            device,
        )?)),
        "awr" => Ok(Box::new(rl_awr::Awr::load(
            dir,
            &make_training_env,
            device,
        )?)),
        "es" => Ok(Box::new(rl_es::Es::load(dir, &make_training_env, device)?)),
        "ars" => Ok(Box::new(rl_ars::Ars::load(
            dir,
            &make_training_env,
            device,
        )?)),
        "bc" => Ok(Box::new(rl_bc::load(dir, &make_training_env, device)?)),
        "marwil" => Ok(Box::new(rl_marwil::Marwil::load(
            dir,
            &make_training_env,
            device,
        )?)),
        "cql" => Ok(Box::new(rl_cql::Cql::load(
            dir,
            &make_training_env,
            device,
        )?)),
        "gail" => Ok(Box::new(rl_gail::Gail::load(
            dir,
            &make_training_env,
            device,
        )?)),
        other => Err(RlError::Config(format!(
            "{}: checkpoint of unknown algorithm {other:?}",
            dir.display()
        ))),
    }
}

/// The run configuration stored in a checkpoint.
pub fn checkpoint_config(dir: &Path) -> Result<RunConfig, RlError> {
    rl_core::checkpoint::read_run_config(&read_checkpoint(dir)?)
}
