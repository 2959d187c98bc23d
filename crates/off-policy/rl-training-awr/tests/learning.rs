//! Learning tests (release mode). CI runs the seed-0 tests; seeds 1 and 2 are `#[ignore]`d and
//! run by `cargo xtask learn`.

use rl_training_awr::Awr;
use rl_training_core::burn::tensor::Device;
use rl_training_envs::testing;

// As the CLI: tensor buffers are reused instead of page-faulted in.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn within(name: &str, seed: u64, every: u64, threshold: f64, label: &str) {
    let run = testing::example_config(env!("CARGO_MANIFEST_DIR"), name, &[format!("seed={seed}")]);
    let mut awr = Awr::new(&run, &testing::training_env, &Device::flex()).unwrap();
    let (hit, evals) = testing::first_reaching(&mut awr, &run, every, threshold);
    println!(
        "{label} seed {seed}: first eval >= {threshold} at {hit:?} (budget {}); evaluations {evals:?}",
        run.total_timesteps
    );
    assert!(
        hit.is_some(),
        "never reached {threshold} within {}: {evals:?}",
        run.total_timesteps
    );
}

fn cartpole(seed: u64) {
    within("awr_cartpole.yaml", seed, 4_096, 475.0, "AWR CartPole-v1");
}

fn pendulum(seed: u64) {
    within("awr_pendulum.yaml", seed, 8_192, -300.0, "AWR Pendulum-v1");
}

#[test]
fn awr_cartpole_seed0_within_100k() {
    cartpole(0);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn awr_cartpole_seed1_within_100k() {
    cartpole(1);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn awr_cartpole_seed2_within_100k() {
    cartpole(2);
}

#[test]
fn awr_pendulum_seed0_within_200k() {
    pendulum(0);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn awr_pendulum_seed1_within_200k() {
    pendulum(1);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn awr_pendulum_seed2_within_200k() {
    pendulum(2);
}
