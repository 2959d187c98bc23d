//! Built-in multi-agent environments (PettingZoo's Parallel API, [`MultiAgentEnv`]) and the
//! registry behind [`make_multi_agent_env`]:
//!
//! | id | what |
//! |---|---|
//! | `MultiAgentCartPole`, `MultiAgentPendulum` | RLlib's: `num_agents` independent copies of CartPole-v1 / Pendulum-v1 (agents `"0"`, `"1"`, …) |
//! | `simple_spread_v3` | MPE2's cooperative navigation ([`spread::SimpleSpread`]) |
//! | `rps_v2` | PettingZoo's rock-paper-scissors ([`rps::Rps`]) with the `always_same` and `beat_last` opponents |
//! | `TwoStepGame` | the QMIX paper's two-step matrix game, as RLlib's ([`two_step::TwoStepGame`]) |
//!
//! Any registered single-agent env becomes a multi-agent one with [`make_multi_agent`].

pub mod rps;
pub mod spread;
pub mod two_step;

use rl_training_core::algorithm::RlError;
use rl_training_core::config::ConfigError;
use rl_training_core::env::{EnvError, Kwargs, kwarg};
use rl_training_core::multi_agent::{
    FrozenSource, HeuristicPolicy, IndependentCopies, MultiAgentEnv,
};

type Factory = fn(&Kwargs) -> Result<Box<dyn MultiAgentEnv>, EnvError>;

fn copies_of(
    id: &'static str,
    single: &str,
    kw: &Kwargs,
) -> Result<Box<dyn MultiAgentEnv>, EnvError> {
    let mut kw = kw.clone();
    let n: usize = kwarg(id, &kw, "num_agents")?.unwrap_or(1);
    kw.remove("num_agents");
    let copies = (0..n)
        .map(|_| crate::make(single, &kw))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Box::new(IndependentCopies::new(id, copies)?))
}

const REGISTRY: &[(&str, Factory)] = &[
    ("MultiAgentCartPole", |kw| {
        copies_of("MultiAgentCartPole", "CartPole-v1", kw)
    }),
    ("MultiAgentPendulum", |kw| {
        copies_of("MultiAgentPendulum", "Pendulum-v1", kw)
    }),
    ("TwoStepGame", two_step::TwoStepGame::from_kwargs),
    ("rps_v2", rps::Rps::from_kwargs),
    ("simple_spread_v3", spread::SimpleSpread::from_kwargs),
];

/// The registered multi-agent env ids.
pub fn multi_agent_ids() -> Vec<&'static str> {
    REGISTRY.iter().map(|(id, _)| *id).collect()
}

/// Builds the multi-agent env `id` from its keyword arguments (an unknown id or keyword is an
/// error naming it).
pub fn make_multi_agent_env(id: &str, kwargs: &Kwargs) -> Result<Box<dyn MultiAgentEnv>, EnvError> {
    let (_, factory) = REGISTRY.iter().find(|(i, _)| *i == id).ok_or_else(|| {
        EnvError::Make(format!(
            "unknown multi-agent env id {id:?}; registered: {} (or any single-agent id through make_multi_agent)",
            multi_agent_ids().join(", ")
        ))
    })?;
    factory(kwargs)
}

/// RLlib's `make_multi_agent`: `num_agents` copies of the registered single-agent env `env_id`
/// (each with its time limit), agents `"0"` … `"n−1"`.
pub fn make_multi_agent(
    env_id: &str,
    num_agents: usize,
    kwargs: &Kwargs,
) -> Result<Box<dyn MultiAgentEnv>, EnvError> {
    let copies = (0..num_agents)
        .map(|_| crate::make(env_id, kwargs))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Box::new(IndependentCopies::new(
        &format!("MultiAgent[{env_id}]"),
        copies,
    )?))
}

/// A frozen policy of a multi-agent run ([`rl_training_core::multi_agent::FrozenMaker`]) from the
/// env's heuristics only: a checkpoint needs every algorithm, so the facade `rl` loads those
/// (`rl_training::frozen_policy`), and here it is an error.
pub fn frozen(
    env_id: &str,
    kwargs: &Kwargs,
    source: FrozenSource<'_>,
) -> Result<Box<dyn HeuristicPolicy>, RlError> {
    match source {
        FrozenSource::Heuristic(name) => Ok(heuristic(env_id, kwargs, name)?),
        FrozenSource::Checkpoint { dir, .. } => Err(RlError::Config(ConfigError::new(
            dir.display().to_string(),
            "a policy loaded from a checkpoint needs the `rl` crate's `rl_training::frozen_policy`",
        ))),
    }
}

/// The built-in policy `name` for an agent of env `env_id` (`rps_v2`: `always_same`,
/// `beat_last`); `kwargs` are the env's (the number of moves).
pub fn heuristic(
    env_id: &str,
    kwargs: &Kwargs,
    name: &str,
) -> Result<Box<dyn HeuristicPolicy>, EnvError> {
    let known: &[&str] = match env_id {
        "rps_v2" => &["always_same", "beat_last"],
        _ => &[],
    };
    let n: usize = if env_id == "rps_v2" {
        kwarg(env_id, kwargs, "num_actions")?.unwrap_or(3)
    } else {
        0
    };
    match (env_id, name) {
        ("rps_v2", "always_same") => Ok(Box::new(rps::AlwaysSame::new(n))),
        ("rps_v2", "beat_last") => Ok(Box::new(rps::BeatLast::new(n))),
        _ => Err(EnvError::Make(format!(
            "{env_id}: no heuristic policy {name:?}; available: {}",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        ))),
    }
}
