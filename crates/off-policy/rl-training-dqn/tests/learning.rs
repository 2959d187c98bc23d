//! Learning tests (release mode). CI runs the seed-0 tests but Rainbow's single-agent run (its
//! parts learn in CI on MultiAgentCartPole); the others are `#[ignore]`d and run by
//! `cargo xtask learn`.

use rl_training_core::burn::tensor::Device;
use rl_training_dqn::Dqn;
use rl_training_envs::testing;

// As the CLI: tensor buffers are reused instead of page-faulted in.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn at(name: &str, seed: u64, threshold: f64, label: &str) {
    let run = testing::example_config(env!("CARGO_MANIFEST_DIR"), name, &[format!("seed={seed}")]);
    let mut dqn = Dqn::new(&run, &testing::training_env, &Device::flex()).unwrap();
    let (r, steps) = testing::return_at(&mut dqn, &run);
    println!("{label} seed {seed}: mean deterministic eval return {r} at {steps} steps");
    assert!(
        r >= threshold,
        "seed {seed}: {r} < {threshold} at {steps} steps"
    );
}

/// Evaluations every `every` env steps (rounded up to whole `train_freq` iterations, so
/// gaps stay ≤ budget/20).
fn within(name: &str, seed: u64, every: u64, threshold: f64, label: &str) {
    let run = testing::example_config(env!("CARGO_MANIFEST_DIR"), name, &[format!("seed={seed}")]);
    let mut dqn = Dqn::new(&run, &testing::training_env, &Device::flex()).unwrap();
    let (hit, evals) = testing::first_reaching(&mut dqn, &run, every, threshold);
    println!(
        "{label} seed {seed}: first eval >= {threshold} at {hit:?} (budget {}); evaluations {evals:?}",
        run.total_timesteps
    );
    assert!(
        hit.is_some(),
        "seed {seed}: never reached {threshold} within {}: {evals:?}",
        run.total_timesteps
    );
}

fn cartpole(seed: u64) {
    within("dqn_cartpole.yaml", seed, 2_000, 475.0, "DQN CartPole-v1");
}

fn rainbow_cartpole(seed: u64) {
    at(
        "dqn_rainbow_cartpole.yaml",
        seed,
        450.0,
        "Rainbow DQN CartPole-v1",
    );
}

#[test]
fn dqn_cartpole_seed0_within_50k() {
    cartpole(0);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn dqn_cartpole_seed1_within_50k() {
    cartpole(1);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn dqn_cartpole_seed2_within_50k() {
    cartpole(2);
}

// CI checks that the Rainbow parts learn together through
// `dqn_rainbow_multi_agent_cartpole_seed0_within_200k` (the same settings, 2 agents sharing the
// policy, by 25k env steps); the single-agent run at 100k is recorded by `cargo xtask learn`.
#[test]
#[ignore = "long: run by cargo xtask learn"]
fn rainbow_cartpole_seed0_at_100k() {
    rainbow_cartpole(0);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn rainbow_cartpole_seed1_at_100k() {
    rainbow_cartpole(1);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn rainbow_cartpole_seed2_at_100k() {
    rainbow_cartpole(2);
}

/// Independent DQN on RLlib's MultiAgentCartPole (2 agents, a Q-network and replay each): 400
/// per agent within 200k env steps (RLlib's bar: 150 per agent within 500k).
fn multi_agent_cartpole(seed: u64) {
    multi_agent_cartpole_with("dqn_multi_agent_cartpole.yaml", "independent", seed);
}

/// Rainbow (3-step returns among its parts) with one policy shared by the 2 agents: the same
/// bar, 400 per agent within 200k.
fn rainbow_multi_agent_cartpole(seed: u64) {
    multi_agent_cartpole_with(
        "dqn_rainbow_multi_agent_cartpole.yaml",
        "Rainbow, shared",
        seed,
    );
}

fn multi_agent_cartpole_with(file: &str, what: &str, seed: u64) {
    let run = testing::example_config(env!("CARGO_MANIFEST_DIR"), file, &[format!("seed={seed}")]);
    let mut ma = rl_training_off_policy::multi_agent::MultiAgentOffPolicy::<
        rl_training_dqn::DqnLearner,
    >::new(
        &run,
        &rl_training_envs::make_multi_agent_env,
        &rl_training_envs::multi_agent::frozen,
        &Device::flex(),
    )
    .unwrap();
    let (hit, evals) = testing::multi_agent_first_reaching(&mut ma, &run, |e| {
        e.per_agent.values().all(|&r| r >= 400.0)
    });
    println!(
        "DQN MultiAgentCartPole (2 agents, {what}) seed {seed} evaluations (team, agents): {evals:?}"
    );
    assert!(
        hit.is_some(),
        "seed {seed}: no evaluation with ≥ 400 per agent within 200k"
    );
}

#[test]
fn dqn_multi_agent_cartpole_seed0_within_200k() {
    multi_agent_cartpole(0);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn dqn_multi_agent_cartpole_seed1_within_200k() {
    multi_agent_cartpole(1);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn dqn_multi_agent_cartpole_seed2_within_200k() {
    multi_agent_cartpole(2);
}

#[test]
fn dqn_rainbow_multi_agent_cartpole_seed0_within_200k() {
    rainbow_multi_agent_cartpole(0);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn dqn_rainbow_multi_agent_cartpole_seed1_within_200k() {
    rainbow_multi_agent_cartpole(1);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn dqn_rainbow_multi_agent_cartpole_seed2_within_200k() {
    rainbow_multi_agent_cartpole(2);
}

/// RLlib's curiosity example with DQN: FrozenLake 12×12, all frozen, 22-step limit,
/// evaluations every 100k up to 2M. With ICM (its bonus recomputed on every replayed batch)
/// DQN reaches the goal greedily (≥ 0.9); without it, never (every evaluation 0).
fn icm_frozen_lake_12x12(seed: u64, curiosity: bool) {
    let yaml = "dqn_icm_frozenlake12x12.yaml";
    let mut run =
        testing::example_config(env!("CARGO_MANIFEST_DIR"), yaml, &[format!("seed={seed}")]);
    if !curiosity {
        run.curiosity = None;
    }
    let mut dqn = Dqn::new(&run, &testing::training_env, &Device::flex()).unwrap();
    let threshold = if curiosity { 0.9 } else { 1e-9 };
    let (hit, evals) = testing::first_reaching(&mut dqn, &run, 100_000, threshold);
    println!("DQN (curiosity {curiosity}) {yaml} seed {seed} evaluations: {evals:?}");
    if curiosity {
        assert!(hit.is_some(), "never reached 0.9: {evals:?}");
    } else {
        assert!(
            hit.is_none(),
            "reached the goal without curiosity: {evals:?}"
        );
        assert_eq!(
            evals.len() as u64,
            run.total_timesteps / 100_000,
            "{evals:?}"
        );
    }
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn dqn_icm_frozenlake12x12_seed0_within_2m() {
    icm_frozen_lake_12x12(0, true);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn dqn_frozenlake12x12_without_curiosity_seed0_stays_at_0() {
    icm_frozen_lake_12x12(0, false);
}
