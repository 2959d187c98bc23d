//! What the Atari tests share (`atari.rs`, and the smoke run in `learning.rs`):
//! `examples/configs/ppo_breakout.yaml`'s envs, and a checkpoint round trip.
#![allow(dead_code)]

use rl_training_core::Algorithm;
use rl_training_core::burn::tensor::Device;
use rl_training_core::config::RunConfig;
use rl_training_core::env::{Env, EnvError};
use rl_training_core::wrappers::{NormalizeReward, RecordEpisodeStatistics};
use rl_training_gymnasium::PREFIX;
use rl_training_ppo::Ppo;

/// What rl-training-envs builds for the run's training envs (episode statistics of the game score,
/// then the config's reward scaling).
pub fn training_env(run: &RunConfig) -> Result<Box<dyn Env>, EnvError> {
    let id = run.env_id.strip_prefix(PREFIX).expect("a gymnasium: id");
    let env = RecordEpisodeStatistics::new(rl_training_gymnasium::make(id, &run.env_kwargs)?);
    assert!(run.normalize.reward && !run.normalize.obs);
    Ok(Box::new(NormalizeReward::new(env, run.discount())))
}

/// The evaluation env: game scores, unscaled.
pub fn eval_env(run: &RunConfig) -> Box<dyn Env> {
    let id = run.env_id.strip_prefix(PREFIX).expect("a gymnasium: id");
    Box::new(RecordEpisodeStatistics::new(
        rl_training_gymnasium::make(id, &run.env_kwargs).unwrap(),
    ))
}

pub fn config(overrides: &[&str]) -> RunConfig {
    let root =
        rl_training_core::testing::workspace_root(std::path::Path::new(env!("CARGO_MANIFEST_DIR")));
    let p = root.join("examples/configs/ppo_breakout.yaml");
    let text = std::fs::read_to_string(&p).unwrap();
    let o: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    RunConfig::from_yaml(&text, &o, &p.display().to_string()).unwrap()
}

pub fn temp_dir(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("rl-atari-{name}-{}", std::process::id()))
}

/// A stacked-frame observation of the eval env after a few steps.
pub fn some_observation(run: &RunConfig) -> Vec<f32> {
    let mut env = eval_env(run);
    let mut obs = vec![0.0; env.observation_space().raw_dim()];
    env.reset(Some(5), None, &mut obs).unwrap();
    for a in [1.0, 2.0, 3.0, 1.0] {
        env.step(&[a], &mut obs).unwrap();
    }
    obs
}

/// Saves `algo` to `dir`, loads it back and checks the copy acts the same; returns the copy.
pub fn round_trip(algo: &mut Ppo, run: &RunConfig, dir: &std::path::Path, obs: &[f32]) -> Ppo {
    algo.save(dir).unwrap();
    let mut loaded = Ppo::load(dir, &training_env, &Device::flex()).unwrap();
    assert_eq!(loaded.num_timesteps(), algo.num_timesteps());
    for deterministic in [true, false] {
        assert_eq!(
            algo.predict(obs, deterministic).unwrap(),
            loaded.predict(obs, deterministic).unwrap(),
            "{} after loading",
            run.env_id
        );
    }
    loaded
}
