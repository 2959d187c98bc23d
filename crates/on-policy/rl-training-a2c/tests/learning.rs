//! Learning tests (run in release mode). CI runs the seed-0 tests; seeds 1 and 2 are
//! `#[ignore]`d and run by `cargo xtask learn`.

use rl_training_a2c::A2c;
use rl_training_core::burn::tensor::Device;
use rl_training_envs::testing;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn cartpole(seed: u64) {
    let run = testing::example_config(
        env!("CARGO_MANIFEST_DIR"),
        "a2c_cartpole.yaml",
        &[format!("seed={seed}")],
    );
    let mut a2c = A2c::new(&run, &testing::training_env, &Device::flex()).unwrap();
    let (r, steps) = testing::return_at(&mut a2c, &run);
    println!("A2C CartPole-v1 seed {seed}: mean deterministic eval return {r} at {steps} steps");
    assert!(r >= 475.0, "seed {seed}: {r} < 475 at {steps} steps");
}

#[test]
fn a2c_cartpole_seed0_at_500k() {
    cartpole(0);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn a2c_cartpole_seed1_at_500k() {
    cartpole(1);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn a2c_cartpole_seed2_at_500k() {
    cartpole(2);
}

/// rl-zoo's settings with gSDE; evaluations every 50,000 steps (1M / 20).
fn pendulum(seed: u64) {
    let run = testing::example_config(
        env!("CARGO_MANIFEST_DIR"),
        "a2c_pendulum.yaml",
        &[format!("seed={seed}")],
    );
    let mut a2c = A2c::new(&run, &testing::training_env, &Device::flex()).unwrap();
    let (hit, evals) = testing::first_reaching(&mut a2c, &run, 50_000, -400.0);
    println!(
        "A2C Pendulum-v1 seed {seed}: first eval >= -400 at {hit:?} (budget 1000000); evaluations {evals:?}"
    );
    assert!(
        hit.is_some_and(|s| s <= 1_000_000),
        "never reached -400 within 1M: {evals:?}"
    );
}

#[test]
fn a2c_pendulum_seed0_within_1m() {
    pendulum(0);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn a2c_pendulum_seed1_within_1m() {
    pendulum(1);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn a2c_pendulum_seed2_within_1m() {
    pendulum(2);
}
