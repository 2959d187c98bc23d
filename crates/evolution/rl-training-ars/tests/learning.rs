//! Learning tests (release; ARS on the host takes about a second per million steps here):
//! CartPole-v1 within 100k, Pendulum-v1 within 2M. CI runs both on seed 0; seeds 1 and 2 are
//! `#[ignore]`d and run by `cargo xtask learn`.

use rl_training_ars::Ars;
use rl_training_core::burn::tensor::Device;
use rl_training_core::config::RunConfig;
use rl_training_envs::testing;

fn agent(name: &str, sets: &[String]) -> (Ars, RunConfig) {
    let run = testing::example_config(env!("CARGO_MANIFEST_DIR"), name, sets);
    (
        Ars::new(&run, &testing::training_env, &Device::flex()).unwrap(),
        run,
    )
}

fn cartpole(seed: u64) {
    let (mut alg, run) = agent("ars_cartpole.yaml", &[format!("seed={seed}")]);
    // Evaluations every 5,000 steps (an iteration takes at most 4,000).
    let (hit, evals) = testing::first_reaching(&mut alg, &run, 5_000, 475.0);
    println!(
        "ARS CartPole-v1 seed {seed}: first eval >= 475 at {hit:?} (budget 100000); evaluations {evals:?}"
    );
    assert!(
        hit.is_some_and(|s| s <= 100_000),
        "never reached 475 within 100k: {evals:?}"
    );
}

#[test]
fn ars_cartpole_seed0_within_100k() {
    cartpole(0);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ars_cartpole_seed1_within_100k() {
    cartpole(1);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ars_cartpole_seed2_within_100k() {
    cartpole(2);
}

fn pendulum(seed: u64) {
    let (mut alg, run) = agent("ars_pendulum.yaml", &[format!("seed={seed}")]);
    // Evaluations every 100,000 steps (≤ 2M / 20; an iteration takes 3,200).
    let (hit, evals) = testing::first_reaching(&mut alg, &run, 100_000, -300.0);
    println!(
        "ARS Pendulum-v1 seed {seed}: first eval >= -300 at {hit:?} (budget 2000000); evaluations {evals:?}"
    );
    assert!(
        hit.is_some_and(|s| s <= 2_000_000),
        "never reached -300 within 2M: {evals:?}"
    );
}

#[test]
fn ars_pendulum_seed0_within_2m() {
    pendulum(0);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ars_pendulum_seed1_within_2m() {
    pendulum(1);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ars_pendulum_seed2_within_2m() {
    pendulum(2);
}
