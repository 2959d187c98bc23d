//! Learning tests (run in release mode). CI runs the seed-0 learning tests; the other seeds and
//! the curiosity control are `#[ignore]`d and run by `cargo xtask learn`.

use rl_training_core::burn::tensor::Device;
use rl_training_core::config::RunConfig;
use rl_training_envs::testing;
use rl_training_ppo::Ppo;

fn config(name: &str, overrides: &[String]) -> RunConfig {
    testing::example_config(env!("CARGO_MANIFEST_DIR"), name, overrides)
}

fn agent(run: &RunConfig) -> Ppo {
    Ppo::new(run, &testing::training_env, &Device::flex()).unwrap()
}

/// Trains to the budget and evaluates the final policy ("at N").
fn final_return(name: &str, seed: u64) -> (f64, u64) {
    let run = config(name, &[format!("seed={seed}")]);
    testing::return_at(&mut agent(&run), &run)
}

/// The first evaluation (every `every` steps) reaching `threshold` ("within N").
fn first_reaching(
    name: &str,
    seed: u64,
    every: u64,
    threshold: f64,
) -> (Option<u64>, Vec<(u64, f64)>) {
    let run = config(name, &[format!("seed={seed}")]);
    testing::first_reaching(&mut agent(&run), &run, every, threshold)
}

fn cartpole(seed: u64) {
    let (r, steps) = final_return("ppo_cartpole.yaml", seed);
    println!("PPO CartPole-v1 seed {seed}: mean deterministic eval return {r} at {steps} steps");
    assert!(r >= 475.0, "seed {seed}: {r} < 475 at {steps} steps");
}

#[test]
fn ppo_cartpole_seed0_at_100k() {
    cartpole(0);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ppo_cartpole_seed1_at_100k() {
    cartpole(1);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ppo_cartpole_seed2_at_100k() {
    cartpole(2);
}

/// rl-zoo's settings with gSDE; evaluations every 8,192 steps (2 rollouts of 4 × 1,024).
fn pendulum(seed: u64) {
    let (hit, evals) = first_reaching("ppo_pendulum.yaml", seed, 8192, -250.0);
    println!("PPO Pendulum-v1 seed {seed} evaluations: {evals:?}");
    assert!(
        hit.is_some_and(|s| s <= 200_000),
        "never reached -250 within 200k: {evals:?}"
    );
}

#[test]
fn ppo_pendulum_seed0_within_200k() {
    pendulum(0);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ppo_pendulum_seed1_within_200k() {
    pendulum(1);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ppo_pendulum_seed2_within_200k() {
    pendulum(2);
}

/// A curiosity config's pair (`yaml`, evaluations every `every` steps up to its budget):
/// with its plugin PPO reaches the goal greedily (return ≥ 0.9); without it, never.
fn curiosity_pair(yaml: &str, seed: u64, every: u64, curiosity: bool) {
    let mut run = config(yaml, &[format!("seed={seed}")]);
    if !curiosity {
        run.curiosity = None;
    }
    let threshold = if curiosity { 0.9 } else { 1e-9 };
    let (hit, evals) = testing::first_reaching(&mut agent(&run), &run, every, threshold);
    println!("PPO (curiosity {curiosity}) {yaml} seed {seed} evaluations: {evals:?}");
    match curiosity {
        true => assert!(hit.is_some(), "never reached 0.9: {evals:?}"),
        false => {
            assert!(
                hit.is_none(),
                "reached the goal without curiosity: {evals:?}"
            );
            assert_eq!(evals.len() as u64, run.total_timesteps / every, "{evals:?}");
        }
    }
}

/// FrozenLake 8×8 with holes, 14-step limit, one-hot observations: PPO + ICM within 300k,
/// evaluations every 10k (or, `false`, the control without curiosity).
fn frozen_lake_8x8(seed: u64, curiosity: bool) {
    curiosity_pair("ppo_icm_frozenlake8x8.yaml", seed, 10_000, curiosity);
}

/// RLlib's curiosity example: FrozenLake 12×12, all frozen, 22-step limit, within 2M,
/// evaluations every 100k (`yaml`: the ICM or the RND config).
fn frozen_lake_12x12(yaml: &str, seed: u64, curiosity: bool) {
    curiosity_pair(yaml, seed, 100_000, curiosity);
}

#[test]
fn ppo_icm_frozenlake8x8_seed0_within_300k() {
    frozen_lake_8x8(0, true);
}

// The control of the test above (plain PPO never finds the goal): `cargo xtask learn`'s.
#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ppo_frozenlake8x8_without_curiosity_seed0_stays_at_0() {
    frozen_lake_8x8(0, false);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ppo_icm_frozenlake8x8_seed1_within_300k() {
    frozen_lake_8x8(1, true);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ppo_icm_frozenlake8x8_seed2_within_300k() {
    frozen_lake_8x8(2, true);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ppo_frozenlake8x8_without_curiosity_seed1_stays_at_0() {
    frozen_lake_8x8(1, false);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ppo_frozenlake8x8_without_curiosity_seed2_stays_at_0() {
    frozen_lake_8x8(2, false);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ppo_icm_frozenlake12x12_seed0_within_2m() {
    frozen_lake_12x12("ppo_icm_frozenlake12x12.yaml", 0, true);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ppo_rnd_frozenlake12x12_seed0_within_2m() {
    frozen_lake_12x12("ppo_rnd_frozenlake12x12.yaml", 0, true);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ppo_frozenlake12x12_without_curiosity_seed0_stays_at_0() {
    // The ICM and RND configs share PPO's settings: without the plugin they are one run.
    frozen_lake_12x12("ppo_icm_frozenlake12x12.yaml", 0, false);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ppo_icm_frozenlake12x12_seed1_within_2m() {
    frozen_lake_12x12("ppo_icm_frozenlake12x12.yaml", 1, true);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ppo_rnd_frozenlake12x12_seed1_within_2m() {
    frozen_lake_12x12("ppo_rnd_frozenlake12x12.yaml", 1, true);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ppo_frozenlake12x12_without_curiosity_seed1_stays_at_0() {
    // The ICM and RND configs share PPO's settings: without the plugin they are one run.
    frozen_lake_12x12("ppo_icm_frozenlake12x12.yaml", 1, false);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ppo_icm_frozenlake12x12_seed2_within_2m() {
    frozen_lake_12x12("ppo_icm_frozenlake12x12.yaml", 2, true);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ppo_rnd_frozenlake12x12_seed2_within_2m() {
    frozen_lake_12x12("ppo_rnd_frozenlake12x12.yaml", 2, true);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ppo_frozenlake12x12_without_curiosity_seed2_stays_at_0() {
    // The ICM and RND configs share PPO's settings: without the plugin they are one run.
    frozen_lake_12x12("ppo_icm_frozenlake12x12.yaml", 2, false);
}

/// Multi-agent PPO (`MultiAgentOnPolicy<PpoLearner>`) until an evaluation satisfies `reached`.
fn multi_agent_until(
    run: &RunConfig,
    reached: impl Fn(&rl_training_core::multi_agent::MultiAgentEval) -> bool,
) -> (Option<u64>, Vec<(u64, Vec<f64>)>) {
    let mut ma =
        rl_training_on_policy::multi_agent::MultiAgentOnPolicy::<rl_training_ppo::PpoLearner>::new(
            run,
            &rl_training_envs::make_multi_agent_env,
            &rl_training_envs::multi_agent::frozen,
            &Device::flex(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    testing::multi_agent_first_reaching(&mut ma, run, reached)
}

/// RLlib's bar: 450 per agent within 400k env steps, 2 agents with their own policies.
fn multi_agent_cartpole(seed: u64) {
    let run = config("ppo_multi_agent_cartpole.yaml", &[format!("seed={seed}")]);
    let (hit, evals) = multi_agent_until(&run, |e| e.per_agent.values().all(|&r| r >= 450.0));
    println!("PPO MultiAgentCartPole (2 agents, independent) seed {seed} evaluations: {evals:?}");
    assert!(
        hit.is_some(),
        "seed {seed}: no evaluation with ≥ 450 per agent within 400k"
    );
}

#[test]
fn ppo_multi_agent_cartpole_seed0_within_400k() {
    multi_agent_cartpole(0);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ppo_multi_agent_cartpole_seed1_within_400k() {
    multi_agent_cartpole(1);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ppo_multi_agent_cartpole_seed2_within_400k() {
    multi_agent_cartpole(2);
}

/// The two-step game, independent policies (`file`: with or without the centralized critic):
/// the team's return ≥ 7 (the safe branch) within 20k env steps; prints whether the optimum 8
/// was reached.
fn two_step_game_with(file: &str, what: &str, seed: u64) {
    let run = config(file, &[format!("seed={seed}")]);
    let (hit, evals) = multi_agent_until(&run, |e| e.mean_return >= 7.0);
    let optimal = evals.iter().any(|(_, r)| r[0] >= 8.0);
    println!(
        "PPO TwoStepGame{what} seed {seed}: optimum 8 reached: {optimal}; evaluations (team, agents): {evals:?}"
    );
    assert!(hit.is_some(), "seed {seed}: team return < 7 within 20k");
}

fn two_step_game(seed: u64) {
    two_step_game_with("ppo_two_step_game.yaml", "", seed);
}

fn two_step_game_mappo(seed: u64) {
    two_step_game_with("ppo_two_step_game_mappo.yaml", " (MAPPO)", seed);
}

#[test]
fn ppo_two_step_game_mappo_seed0_within_20k() {
    two_step_game_mappo(0);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ppo_two_step_game_mappo_seed1_within_20k() {
    two_step_game_mappo(1);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ppo_two_step_game_mappo_seed2_within_20k() {
    two_step_game_mappo(2);
}

#[test]
fn ppo_two_step_game_seed0_within_20k() {
    two_step_game(0);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ppo_two_step_game_seed1_within_20k() {
    two_step_game(1);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ppo_two_step_game_seed2_within_20k() {
    two_step_game(2);
}

fn per_agent(e: &rl_training_core::multi_agent::MultiAgentEval) -> f64 {
    e.mean_return / e.per_agent.len() as f64
}

/// MPE2's simple_spread, one policy shared by the 3 agents (`file`: with or without the
/// centralized critic): the mean per-agent return ≥ −20 within 2M agent steps (667k env
/// steps); random −27.0, no-op −25.5, a greedy heuristic −15.5.
fn simple_spread_with(file: &str, what: &str, seed: u64) {
    let run = config(file, &[format!("seed={seed}")]);
    let (hit, evals) = multi_agent_until(&run, |e| per_agent(e) >= -20.0);
    println!("PPO simple_spread_v3 ({what}) seed {seed} evaluations (team, agents): {evals:?}");
    assert!(
        hit.is_some(),
        "seed {seed}: mean per-agent return < -20 within 2M agent steps"
    );
}

fn simple_spread(seed: u64) {
    simple_spread_with("ppo_simple_spread.yaml", "shared policy", seed);
}

fn simple_spread_mappo(seed: u64) {
    simple_spread_with("ppo_simple_spread_mappo.yaml", "MAPPO", seed);
}

#[test]
fn ppo_simple_spread_mappo_seed0_within_2m_agent_steps() {
    simple_spread_mappo(0);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ppo_simple_spread_mappo_seed1_within_2m_agent_steps() {
    simple_spread_mappo(1);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ppo_simple_spread_mappo_seed2_within_2m_agent_steps() {
    simple_spread_mappo(2);
}

/// The whole 2M agent steps, with and without the centralized critic: the best evaluation of
/// each against the greedy heuristic's −15.5 (reported; the bar is −20).
fn simple_spread_full(file: &str, what: &str) {
    let run = config(file, &[]);
    let (_, evals) = multi_agent_until(&run, |_| false);
    let best = evals
        .iter()
        .map(|(_, r)| r[0] / 3.0)
        .fold(f64::NEG_INFINITY, f64::max);
    println!(
        "PPO simple_spread_v3 ({what}) seed 0, 2M agent steps: best per-agent return {best:.2}, \
         beats the greedy heuristic (-15.5): {}; evaluations (team, agents): {evals:?}",
        best > -15.5
    );
    assert!(best >= -20.0, "best per-agent return {best} < -20");
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ppo_simple_spread_mappo_seed0_full_2m_agent_steps_vs_heuristic() {
    simple_spread_full("ppo_simple_spread_mappo.yaml", "MAPPO");
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ppo_simple_spread_seed0_full_2m_agent_steps_vs_heuristic() {
    simple_spread_full("ppo_simple_spread.yaml", "shared policy");
}

#[test]
fn ppo_simple_spread_seed0_within_2m_agent_steps() {
    simple_spread(0);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ppo_simple_spread_seed1_within_2m_agent_steps() {
    simple_spread(1);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ppo_simple_spread_seed2_within_2m_agent_steps() {
    simple_spread(2);
}
