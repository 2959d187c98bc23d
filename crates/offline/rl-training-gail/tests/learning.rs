//! Learning tests (release mode): GAIL on CartPole-v1 from 10 expert episodes of the project's
//! PPO and AIRL on Pendulum-v1 from 20 episodes of the project's SAC (committed in
//! `testdata/datasets/`; the same expert data for every seed); CI runs seed 0, `cargo xtask
//! learn` the other seeds (`#[ignore]`d).

use rl_training_core::burn::tensor::Device;
use rl_training_envs::testing;
use std::path::PathBuf;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn dir() -> PathBuf {
    rl_training_offline_testing::data_dir("RL_GAIL_DATA_DIR", "rl-gail-data")
}

/// 10 episodes of the project's PPO (`ppo_cartpole.yaml`, 500 at 100k steps), as NPZ.
fn cartpole_expert() -> PathBuf {
    rl_training_offline_testing::cartpole_expert_file(
        env!("CARGO_MANIFEST_DIR"),
        &dir().join("cartpole_expert_10.npz"),
        &[(10, 0.0, 100)],
    )
}

/// 20 episodes of the project's SAC (`sac_pendulum.yaml`, −140 at 20k steps), as NPZ,
/// committed (`testdata/datasets/`): making it is 20k SAC updates.
fn pendulum_expert() -> PathBuf {
    let manifest = env!("CARGO_MANIFEST_DIR");
    rl_training_offline_testing::committed(manifest, "pendulum_sac_expert_20.npz", |p| {
        let mut sac = rl_training_offline_testing::pendulum_sac(manifest, 20_000);
        let mut env = rl_training_envs::make("Pendulum-v1", &Default::default()).unwrap();
        rl_training_offline::record_parts(&mut sac, env.as_mut(), p, &[(20, 0.0, 100)]).unwrap();
    })
}

fn within(name: &str, seed: u64, expert: PathBuf, threshold: f64, label: &str) {
    let ov = vec![
        format!("seed={seed}"),
        format!("algo_kwargs.expert_data_path={}", expert.display()),
    ];
    let run = testing::example_config(env!("CARGO_MANIFEST_DIR"), name, &ov);
    let mut gail =
        rl_training_gail::Gail::new(&run, &testing::training_env, &Device::flex()).unwrap();
    let (hit, evals) = testing::first_reaching(&mut gail, &run, run.eval_freq, threshold);
    println!(
        "{label} seed {seed}: first eval >= {threshold} at {hit:?} (budget {}); evaluations {evals:?}",
        run.total_timesteps
    );
    assert!(hit.is_some(), "never reached {threshold}: {evals:?}");
}

fn gail_cartpole(seed: u64) {
    within(
        "gail_cartpole.yaml",
        seed,
        cartpole_expert(),
        450.0,
        "GAIL CartPole-v1",
    );
}

#[test]
fn gail_cartpole_10_expert_episodes_seed0_within_300k() {
    gail_cartpole(0);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn gail_cartpole_10_expert_episodes_seed1_within_300k() {
    gail_cartpole(1);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn gail_cartpole_10_expert_episodes_seed2_within_300k() {
    gail_cartpole(2);
}

fn airl_pendulum(seed: u64) {
    within(
        "airl_pendulum.yaml",
        seed,
        pendulum_expert(),
        -400.0,
        "AIRL Pendulum-v1",
    );
}

#[test]
fn airl_pendulum_20_expert_episodes_seed0_within_1m() {
    airl_pendulum(0);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn airl_pendulum_20_expert_episodes_seed1_within_1m() {
    airl_pendulum(1);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn airl_pendulum_20_expert_episodes_seed2_within_1m() {
    airl_pendulum(2);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn airl_pendulum_20_expert_episodes_seed3_within_1m() {
    airl_pendulum(3);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn airl_pendulum_20_expert_episodes_seed4_within_1m() {
    airl_pendulum(4);
}
