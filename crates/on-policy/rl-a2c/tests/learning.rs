//! Learning tests (run in release mode). CI runs the seed-0 CartPole test; seed 1 is
//! `#[ignore]`d and run by `cargo xtask learn`.

use rl_a2c::A2c;
use rl_core::burn::tensor::Device;
use rl_envs::testing;

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
