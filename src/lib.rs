//! rl: deep reinforcement learning in Rust, on burn.
//!
//! The facade of the workspace: re-exports the crates and builds algorithms by name from a
//! [`RunConfig`](rl_training_core::config::RunConfig). The `rl` binary is the command-line interface.
#![warn(missing_docs)]

pub use rl_training_a2c as a2c;
pub use rl_training_appo as appo;
pub use rl_training_ars as ars;
pub use rl_training_awr as awr;
pub use rl_training_bc as bc;
pub use rl_training_broker as broker;
pub use rl_training_core as core;
pub use rl_training_cql as cql;
pub use rl_training_curiosity as curiosity;
pub use rl_training_dqn as dqn;
pub use rl_training_dreamerv3 as dreamerv3;
pub use rl_training_envs as envs;
pub use rl_training_es as es;
pub use rl_training_evolution as evolution;
pub use rl_training_gail as gail;
pub use rl_training_impala as impala;
pub use rl_training_marwil as marwil;
pub use rl_training_model_based as model_based;
pub use rl_training_off_policy as off_policy;
pub use rl_training_offline as offline;
pub use rl_training_on_policy as on_policy;
pub use rl_training_ppg as ppg;
pub use rl_training_ppo as ppo;
pub use rl_training_recurrent_ppo as recurrent_ppo;
pub use rl_training_sac as sac;
pub use rl_training_trpo as trpo;
pub use rl_training_tune as tune;

use rl_training_core::algorithm::{Algorithm, RlError};
use rl_training_core::burn::tensor::Device;
use rl_training_core::checkpoint::read_checkpoint;
use rl_training_core::config::{ConfigError, RunConfig};
use rl_training_core::env::{Env, EnvError};
use std::path::Path;

mod frozen;
pub use frozen::frozen_policy;
pub mod scale_out;

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
    "dreamerv3",
];

/// A training env for `run` (registry env + episode statistics + normalization).
pub fn make_training_env(run: &RunConfig) -> Result<Box<dyn Env>, EnvError> {
    rl_training_envs::make_training_env(
        &run.env_id,
        &run.env_kwargs,
        &run.normalize,
        run.discount(),
    )
}

/// An evaluation env for `run` (true rewards; observation statistics come from training).
pub fn make_eval_env(run: &RunConfig) -> Result<Box<dyn Env>, EnvError> {
    rl_training_envs::make_eval_env(&run.env_id, &run.env_kwargs, &run.normalize)
}

/// Algorithms that train multi-agent runs (a `multi_agent:` table or a multi-agent env id).
pub const MULTI_AGENT_ALGORITHMS: &[&str] = &[
    "ppo",
    "a2c",
    "recurrent_ppo",
    "impala",
    "appo",
    "dqn",
    "sac",
];

/// Whether `run` is a multi-agent run: it has a `multi_agent:` table or names a registered
/// multi-agent env ([`rl_training_envs::multi_agent_ids`]).
pub fn is_multi_agent(run: &RunConfig) -> bool {
    run.multi_agent.is_some() || rl_training_envs::multi_agent_ids().contains(&run.env_id.as_str())
}

/// An evaluation env of a multi-agent run.
pub fn make_multi_agent_eval_env(
    run: &RunConfig,
) -> Result<Box<dyn rl_training_core::multi_agent::MultiAgentEnv>, EnvError> {
    rl_training_envs::make_multi_agent_env(&run.env_id, &run.env_kwargs)
}

fn multi_agent_only(run: &RunConfig) -> Result<(), RlError> {
    if is_multi_agent(run) {
        return Err(RlError::Config(ConfigError::new(
            "multi_agent",
            format!(
                "{} is a multi-agent run: build it with rl_training::build_multi_agent (rl train does)",
                run.env_id
            ),
        )));
    }
    Ok(())
}

/// Builds a multi-agent run of `run.algorithm` ([`MULTI_AGENT_ALGORITHMS`]): one learner per
/// learned policy of its `multi_agent:` table.
pub fn build_multi_agent(
    run: &RunConfig,
    device: &Device,
) -> Result<Box<dyn rl_training_core::multi_agent::MultiAgentAlgorithm>, RlError> {
    use rl_training_off_policy::multi_agent::MultiAgentOffPolicy;
    use rl_training_on_policy::multi_agent::MultiAgentOnPolicy;
    run.apply_process_settings()?;
    let frozen = |id: &str,
                  kw: &rl_training_core::env::Kwargs,
                  src: rl_training_core::multi_agent::FrozenSource<'_>| {
        frozen_policy(id, kw, src, device)
    };
    let (env, heuristic) = (&rl_training_envs::make_multi_agent_env, &frozen);
    match run.algorithm.to_ascii_lowercase().as_str() {
        "ppo" => Ok(Box::new(
            MultiAgentOnPolicy::<rl_training_ppo::PpoLearner>::new(run, env, heuristic, device)?,
        )),
        "a2c" => Ok(Box::new(
            MultiAgentOnPolicy::<rl_training_a2c::A2cLearner>::new(run, env, heuristic, device)?,
        )),
        "recurrent_ppo" => Ok(Box::new(MultiAgentOnPolicy::<
            rl_training_recurrent_ppo::RecurrentPpoLearner,
        >::new(run, env, heuristic, device)?)),
        "impala" => Ok(Box::new(rl_training_impala::MultiAgentImpala::new(
            run, env, heuristic, device,
        )?)),
        "appo" => Ok(Box::new(rl_training_appo::MultiAgentAppo::new(
            run, env, heuristic, device,
        )?)),
        "dqn" => Ok(Box::new(
            MultiAgentOffPolicy::<rl_training_dqn::DqnLearner>::new(run, env, heuristic, device)?,
        )),
        "sac" => Ok(Box::new(
            MultiAgentOffPolicy::<rl_training_sac::SacLearner>::new(run, env, heuristic, device)?,
        )),
        other => Err(RlError::Config(ConfigError::new(
            "algorithm",
            format!(
                "{other:?} does not train multi-agent runs yet; multi-agent algorithms: {}",
                MULTI_AGENT_ALGORITHMS.join(", ")
            ),
        ))),
    }
}

/// Loads a multi-agent checkpoint ([`build_multi_agent`]'s runs).
pub fn load_multi_agent(
    dir: &Path,
    device: &Device,
) -> Result<Box<dyn rl_training_core::multi_agent::MultiAgentAlgorithm>, RlError> {
    let ck = read_checkpoint(dir)?;
    rl_training_core::checkpoint::read_run_config(&ck)?.apply_process_settings()?;
    Ok(load_multi_agent_as_saved(dir, &ck.algorithm, device)?)
}

/// Loads multi-agent checkpoint `dir` of `algorithm`, leaving the kernel level as it is.
fn load_multi_agent_as_saved(
    dir: &Path,
    algorithm: &str,
    device: &Device,
) -> Result<Box<dyn rl_training_core::multi_agent::MultiAgentAlgorithm + Send>, RlError> {
    use rl_training_off_policy::multi_agent::MultiAgentOffPolicy;
    use rl_training_on_policy::multi_agent::MultiAgentOnPolicy;
    let frozen = |id: &str,
                  kw: &rl_training_core::env::Kwargs,
                  src: rl_training_core::multi_agent::FrozenSource<'_>| {
        frozen_policy(id, kw, src, device)
    };
    let (env, heuristic) = (&rl_training_envs::make_multi_agent_env, &frozen);
    match algorithm {
        "ppo" => Ok(Box::new(
            MultiAgentOnPolicy::<rl_training_ppo::PpoLearner>::load(dir, env, heuristic, device)?,
        )),
        "a2c" => Ok(Box::new(
            MultiAgentOnPolicy::<rl_training_a2c::A2cLearner>::load(dir, env, heuristic, device)?,
        )),
        "recurrent_ppo" => Ok(Box::new(MultiAgentOnPolicy::<
            rl_training_recurrent_ppo::RecurrentPpoLearner,
        >::load(dir, env, heuristic, device)?)),
        "impala" => Ok(Box::new(rl_training_impala::MultiAgentImpala::load(
            dir, env, heuristic, device,
        )?)),
        "appo" => Ok(Box::new(rl_training_appo::MultiAgentAppo::load(
            dir, env, heuristic, device,
        )?)),
        "dqn" => Ok(Box::new(
            MultiAgentOffPolicy::<rl_training_dqn::DqnLearner>::load(dir, env, heuristic, device)?,
        )),
        "sac" => Ok(Box::new(
            MultiAgentOffPolicy::<rl_training_sac::SacLearner>::load(dir, env, heuristic, device)?,
        )),
        other => Err(RlError::Config(ConfigError::new(
            dir.display().to_string(),
            format!("not a multi-agent checkpoint of a known algorithm ({other:?})"),
        ))),
    }
}

/// Builds the algorithm named by `run.algorithm`.
///
/// Pins flex's kernel level first (`kernels`, else `RL_KERNELS`; see [`rl_training_core::kernels`]).
/// A multi-agent run is refused with a pointer to [`build_multi_agent`]. The algorithm is
/// `Send`: it can train on another thread (the Python module trains with the interpreter's lock
/// released).
pub fn build(run: &RunConfig, device: &Device) -> Result<Box<dyn Algorithm + Send>, RlError> {
    multi_agent_only(run)?;
    run.apply_process_settings()?;
    match run.algorithm.to_ascii_lowercase().as_str() {
        "ppo" => Ok(Box::new(rl_training_ppo::Ppo::new(
            run,
            &make_training_env,
            device,
        )?)),
        "a2c" => Ok(Box::new(rl_training_a2c::A2c::new(
            run,
            &make_training_env,
            device,
        )?)),
        "trpo" => Ok(Box::new(rl_training_trpo::Trpo::new(
            run,
            &make_training_env,
            device,
        )?)),
        "ppg" => Ok(Box::new(rl_training_ppg::Ppg::new(
            run,
            &make_training_env,
            device,
        )?)),
        "recurrent_ppo" => Ok(Box::new(rl_training_recurrent_ppo::RecurrentPpo::new(
            run,
            &make_training_env,
            device,
        )?)),
        "impala" => Ok(Box::new(rl_training_impala::Impala::new(
            run,
            &make_training_env,
            device,
        )?)),
        "appo" => Ok(Box::new(rl_training_appo::Appo::new(
            run,
            &make_training_env,
            device,
        )?)),
        "dqn" => Ok(Box::new(rl_training_dqn::Dqn::new(
            run,
            &make_training_env,
            device,
        )?)),
        "sac" => Ok(Box::new(rl_training_sac::Sac::new(
            run,
            &make_training_env,
            device,
        )?)),
        "awr" => Ok(Box::new(rl_training_awr::Awr::new(
            run,
            &make_training_env,
            device,
        )?)),
        "es" => Ok(Box::new(rl_training_es::Es::new(
            run,
            &make_training_env,
            device,
        )?)),
        "ars" => Ok(Box::new(rl_training_ars::Ars::new(
            run,
            &make_training_env,
            device,
        )?)),
        "bc" => Ok(Box::new(rl_training_bc::new(
            run,
            &make_training_env,
            device,
        )?)),
        "marwil" => Ok(Box::new(rl_training_marwil::Marwil::new(
            run,
            &make_training_env,
            device,
        )?)),
        "cql" => Ok(Box::new(rl_training_cql::Cql::new(
            run,
            &make_training_env,
            device,
        )?)),
        "gail" => Ok(Box::new(rl_training_gail::Gail::new(
            run,
            &make_training_env,
            device,
        )?)),
        "dreamerv3" => Ok(Box::new(rl_training_dreamerv3::DreamerV3::new(
            run,
            &make_training_env,
            device,
        )?)),
        other => Err(RlError::Config(ConfigError::new(
            "algorithm",
            format!("unknown {other:?}; available: {}", ALGORITHMS.join(", ")),
        ))),
    }
}

/// Loads a checkpoint directory, whatever algorithm wrote it.
///
/// The run keeps the kernel level it was saved with (or `RL_KERNELS` when that was `auto`).
pub fn load(dir: &Path, device: &Device) -> Result<Box<dyn Algorithm + Send>, RlError> {
    let ck = read_checkpoint(dir)?;
    let run = rl_training_core::checkpoint::read_run_config(&ck)?;
    multi_agent_only(&run)?;
    run.apply_process_settings()?;
    load_as_saved(dir, &ck.algorithm, device)
}

/// Loads single-agent checkpoint `dir` of `algorithm`, leaving the kernel level as it is.
fn load_as_saved(
    dir: &Path,
    algorithm: &str,
    device: &Device,
) -> Result<Box<dyn Algorithm + Send>, RlError> {
    match algorithm {
        "ppo" => Ok(Box::new(rl_training_ppo::Ppo::load(
            dir,
            &make_training_env,
            device,
        )?)),
        "a2c" => Ok(Box::new(rl_training_a2c::A2c::load(
            dir,
            &make_training_env,
            device,
        )?)),
        "trpo" => Ok(Box::new(rl_training_trpo::Trpo::load(
            dir,
            &make_training_env,
            device,
        )?)),
        "ppg" => Ok(Box::new(rl_training_ppg::Ppg::load(
            dir,
            &make_training_env,
            device,
        )?)),
        "recurrent_ppo" => Ok(Box::new(rl_training_recurrent_ppo::RecurrentPpo::load(
            dir,
            &make_training_env,
            device,
        )?)),
        "impala" => Ok(Box::new(rl_training_impala::Impala::load(
            dir,
            &make_training_env,
            device,
        )?)),
        "appo" => Ok(Box::new(rl_training_appo::Appo::load(
            dir,
            &make_training_env,
            device,
        )?)),
        "dqn" => Ok(Box::new(rl_training_dqn::Dqn::load(
            dir,
            &make_training_env,
            device,
        )?)),
        "sac" => Ok(Box::new(rl_training_sac::Sac::load(
            dir,
            &make_training_env,
            device,
        )?)),
        "awr" => Ok(Box::new(rl_training_awr::Awr::load(
            dir,
            &make_training_env,
            device,
        )?)),
        "es" => Ok(Box::new(rl_training_es::Es::load(
            dir,
            &make_training_env,
            device,
        )?)),
        "ars" => Ok(Box::new(rl_training_ars::Ars::load(
            dir,
            &make_training_env,
            device,
        )?)),
        "bc" => Ok(Box::new(rl_training_bc::load(
            dir,
            &make_training_env,
            device,
        )?)),
        "marwil" => Ok(Box::new(rl_training_marwil::Marwil::load(
            dir,
            &make_training_env,
            device,
        )?)),
        "cql" => Ok(Box::new(rl_training_cql::Cql::load(
            dir,
            &make_training_env,
            device,
        )?)),
        "gail" => Ok(Box::new(rl_training_gail::Gail::load(
            dir,
            &make_training_env,
            device,
        )?)),
        "dreamerv3" => Ok(Box::new(rl_training_dreamerv3::DreamerV3::load(
            dir,
            &make_training_env,
            device,
        )?)),
        other => Err(RlError::Config(ConfigError::new(
            dir.display().to_string(),
            format!("checkpoint of unknown algorithm {other:?}"),
        ))),
    }
}

/// The run configuration stored in a checkpoint.
pub fn checkpoint_config(dir: &Path) -> Result<RunConfig, RlError> {
    rl_training_core::checkpoint::read_run_config(&read_checkpoint(dir)?)
}

/// The replay buffer of an off-policy checkpoint (SAC or DQN, saved with
/// `store_buffer_in_checkpoints: true`) as a dataset in time order, actions in the env's units
/// (SAC's squashed actions rescaled to the Box bounds): what `rl record --replay` writes, e.g.
/// CQL's "first 50k transitions of a SAC run".
pub fn replay_dataset(
    dir: &Path,
    device: &Device,
) -> Result<
    (
        rl_training_offline::Transitions,
        rl_training_offline::DatasetSpec,
    ),
    RlError,
> {
    let ck = read_checkpoint(dir)?;
    let run = rl_training_core::checkpoint::read_run_config(&ck)?;
    let env = make_eval_env(&run)?;
    let (obs_space, act_space) = (env.observation_space().clone(), env.action_space().clone());
    let replay = match ck.algorithm.as_str() {
        "sac" => rl_training_sac::Sac::load(dir, &make_training_env, device)?
            .replay()
            .chronological(),
        "dqn" => rl_training_dqn::Dqn::load(dir, &make_training_env, device)?
            .replay()
            .chronological(),
        other => {
            return Err(RlError::Config(ConfigError::new(
                dir.display().to_string(),
                format!(
                    "a {other} checkpoint; --replay reads the replay buffer of a sac or dqn checkpoint"
                ),
            )));
        }
    };
    if replay.is_empty() {
        return Err(RlError::Config(ConfigError::new(
            dir.display().to_string(),
            "the checkpoint holds no replay buffer; train with \
             algo_kwargs.store_buffer_in_checkpoints: true",
        )));
    }
    let act_dim = act_space.raw_dim();
    let rows = match &act_space {
        rl_training_core::Space::Box { low, high, .. } => {
            let (low, high) = (low.clone(), high.clone());
            rl_training_offline::from_replay_envs(&replay, run.n_envs, act_dim, move |a| {
                a.iter()
                    .enumerate()
                    .map(|(i, &s)| low[i] + (s + 1.0) * 0.5 * (high[i] - low[i]))
                    .collect()
            })
        }
        _ => rl_training_offline::from_replay_envs(&replay, run.n_envs, act_dim, |a| a.to_vec()),
    };
    Ok((
        rows,
        rl_training_offline::DatasetSpec::from_spaces(&obs_space, &act_space),
    ))
}

/// Checks a run config the way `rl train` does before it builds anything: the algorithm's
/// `algo_kwargs` parsed strictly (aliases, schedules, unknown keys) and range-checked, and the
/// training env made from `env_id` / `env_kwargs`. No networks are allocated, so this is
/// cheap (the config fuzz target runs it).
pub fn check_config(run: &RunConfig) -> Result<(), RlError> {
    use rl_training_core::config::AlgoConfig;
    let kw = &run.algo_kwargs;
    let parsed = match run.algorithm.to_ascii_lowercase().as_str() {
        "ppo" => rl_training_ppo::PpoConfig::from_kwargs(kw).map(drop),
        "a2c" => rl_training_a2c::A2cConfig::from_kwargs(kw).map(drop),
        "trpo" => rl_training_trpo::TrpoConfig::from_kwargs(kw).map(drop),
        "ppg" => rl_training_ppg::PpgConfig::from_kwargs(kw).map(drop),
        "recurrent_ppo" => rl_training_recurrent_ppo::RecurrentPpoConfig::from_kwargs(kw).map(drop),
        "impala" => rl_training_impala::ImpalaConfig::from_kwargs(kw).map(drop),
        "appo" => rl_training_appo::AppoConfig::from_kwargs(kw).map(drop),
        "dqn" => rl_training_dqn::DqnConfig::from_kwargs(kw).map(drop),
        "sac" => rl_training_sac::SacConfig::from_kwargs(kw).map(drop),
        "awr" => rl_training_awr::AwrConfig::from_kwargs(kw).map(drop),
        "es" => rl_training_es::EsConfig::from_kwargs(kw).map(drop),
        "ars" => rl_training_ars::ArsConfig::from_kwargs(kw).map(drop),
        "bc" => rl_training_bc::BcConfig::from_kwargs(kw).map(drop),
        "marwil" => rl_training_marwil::MarwilConfig::from_kwargs(kw).map(drop),
        "cql" => rl_training_cql::CqlConfig::from_kwargs(kw).map(drop),
        "gail" => rl_training_gail::GailConfig::from_kwargs(kw).map(drop),
        "dreamerv3" => rl_training_dreamerv3::DreamerV3Config::from_kwargs(kw).map(drop),
        other => Err(ConfigError::new(
            "algorithm",
            format!("unknown {other:?}; available: {}", ALGORITHMS.join(", ")),
        )),
    };
    parsed?;
    make_training_env(run)?;
    Ok(())
}
