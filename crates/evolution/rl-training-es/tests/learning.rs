//! Learning test (release): CartPole-v1 within 1M steps. CI runs seed 0; seeds 1 and 2 are
//! `#[ignore]`d and run by `cargo xtask learn`.

use rl_training_core::burn::tensor::Device;
use rl_training_envs::testing;
use rl_training_es::Es;

fn cartpole(seed: u64) {
    let run = testing::example_config(
        env!("CARGO_MANIFEST_DIR"),
        "es_cartpole.yaml",
        &[format!("seed={seed}")],
    );
    let mut alg = Es::new(&run, &testing::training_env, &Device::flex()).unwrap();
    // Evaluations every 50,000 steps (an iteration takes at most 32,000).
    let (hit, evals) = testing::first_reaching(&mut alg, &run, 50_000, 475.0);
    println!(
        "OpenAI-ES CartPole-v1 seed {seed}: first eval >= 475 at {hit:?} (budget 1000000); evaluations {evals:?}"
    );
    assert!(
        hit.is_some_and(|s| s <= 1_000_000),
        "never reached 475 within 1M: {evals:?}"
    );
}

#[test]
fn es_cartpole_seed0_within_1m() {
    cartpole(0);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn es_cartpole_seed1_within_1m() {
    cartpole(1);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn es_cartpole_seed2_within_1m() {
    cartpole(2);
}
