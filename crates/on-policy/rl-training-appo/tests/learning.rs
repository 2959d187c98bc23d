//! Learning test (release, lockstep): CartPole-v1 within 1M steps. CI runs seed 0; seeds 1 and
//! 2 are `#[ignore]`d and run by `cargo xtask learn`.

use rl_training_appo::Appo;
use rl_training_core::burn::tensor::Device;
use rl_training_envs::testing;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn cartpole(seed: u64) {
    let run = testing::example_config(
        env!("CARGO_MANIFEST_DIR"),
        "appo_cartpole.yaml",
        &[format!("seed={seed}")],
    );
    let mut alg = Appo::new(&run, &testing::training_env, &Device::flex()).unwrap();
    // Evaluations every 50,000 steps (an iteration is 2 × 8 × 128 = 2,048 steps).
    let (hit, evals) = testing::first_reaching(&mut alg, &run, 50_000, 450.0);
    println!(
        "APPO CartPole-v1 seed {seed}: first eval >= 450 at {hit:?} (budget 1000000); evaluations {evals:?}"
    );
    assert!(
        hit.is_some_and(|s| s <= 1_000_000),
        "never reached 450 within 1M: {evals:?}"
    );
}

#[test]
fn appo_cartpole_seed0_within_1m() {
    cartpole(0);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn appo_cartpole_seed1_within_1m() {
    cartpole(1);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn appo_cartpole_seed2_within_1m() {
    cartpole(2);
}

/// The bar: 400 per agent within 2M env steps on MultiAgentCartPole, 2 agents with
/// their own policies (evaluations every 50k).
fn multi_agent_cartpole(seed: u64) {
    let run = testing::example_config(
        env!("CARGO_MANIFEST_DIR"),
        "appo_multi_agent_cartpole.yaml",
        &[format!("seed={seed}")],
    );
    let mut ma = rl_training_appo::MultiAgentAppo::new(
        &run,
        &rl_training_envs::make_multi_agent_env,
        &rl_training_envs::multi_agent::frozen,
        &Device::flex(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let what = format!("APPO MultiAgentCartPole (2 agents, independent) seed {seed}");
    testing::assert_every_agent_reaches(&mut ma, &run, 400.0, &what);
}

#[test]
fn appo_multi_agent_cartpole_seed0_within_2m() {
    multi_agent_cartpole(0);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn appo_multi_agent_cartpole_seed1_within_2m() {
    multi_agent_cartpole(1);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn appo_multi_agent_cartpole_seed2_within_2m() {
    multi_agent_cartpole(2);
}
