//! Learning tests (release mode): continuous CQL on the first 50k transitions of the project's
//! SAC on Pendulum-v1 (committed in `testdata/datasets/`), discrete CQL on a mixed CartPole-v1
//! dataset of the project's PPO (25 expert + 25 ε = 0.5 episodes, made here). Every seed uses
//! the same data. CI runs seed 0; seeds 1 and 2 are `#[ignore]`d and run by `cargo xtask learn`.

use rl_training_core::burn::tensor::Device;
use rl_training_envs::testing;
use std::path::PathBuf;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn dir() -> PathBuf {
    rl_training_offline_testing::data_dir("RL_CQL_DATA_DIR", "rl-cql-data")
}

/// The first 50k transitions of SAC (`sac_pendulum.yaml` run for 50k steps), committed
/// (`testdata/datasets/`): making it is 50k SAC updates, longer than CQL's own run.
fn pendulum_sac_50k() -> PathBuf {
    let manifest = env!("CARGO_MANIFEST_DIR");
    rl_training_offline_testing::committed(manifest, "pendulum_sac_50k.parquet", |p| {
        let sac = rl_training_offline_testing::pendulum_sac(manifest, 50_000);
        let batch = sac.replay().chronological();
        assert_eq!(batch.len(), 50_000);
        // SAC stores squashed actions in [−1, 1]; the dataset holds the env's [−2, 2].
        let data = rl_training_offline::from_replay(&batch, 1, |a| vec![2.0 * a[0]]);
        let env = rl_training_envs::make("Pendulum-v1", &Default::default()).unwrap();
        let spec = rl_training_offline::DatasetSpec::from_spaces(
            env.observation_space(),
            env.action_space(),
        );
        rl_training_offline::write_dataset(p, &data, &spec).unwrap();
    })
}

/// 25 expert and 25 ε = 0.5 episodes of the project's PPO (`ppo_cartpole.yaml`, 100k steps).
fn cartpole_mixed() -> PathBuf {
    rl_training_offline_testing::cartpole_expert_file(
        env!("CARGO_MANIFEST_DIR"),
        &dir().join("cartpole_mixed.parquet"),
        &[(25, 0.0, 200), (25, 0.5, 300)],
    )
}

fn within(name: &str, seed: u64, data: PathBuf, threshold: f64, label: &str) {
    let ov = vec![
        format!("seed={seed}"),
        format!("offline_data.input={}", data.display()),
    ];
    let run = testing::example_config(env!("CARGO_MANIFEST_DIR"), name, &ov);
    let mut cql = rl_training_cql::Cql::new(&run, &testing::training_env, &Device::flex()).unwrap();
    let t0 = std::time::Instant::now();
    let (hit, evals) = testing::first_reaching(&mut cql, &run, run.eval_freq, threshold);
    println!(
        "{label} seed {seed}: first eval >= {threshold} at {hit:?} rows (budget {}, {:.0} s, {} gradient steps); evaluations {evals:?}",
        run.total_timesteps,
        t0.elapsed().as_secs_f64(),
        cql.learner().grad_steps()
    );
    assert!(hit.is_some(), "never reached {threshold}: {evals:?}");
}

fn pendulum(seed: u64) {
    within(
        "cql_pendulum.yaml",
        seed,
        pendulum_sac_50k(),
        -400.0,
        "CQL Pendulum-v1 (SAC 50k)",
    );
}

fn discrete_cartpole(seed: u64) {
    within(
        "cql_cartpole.yaml",
        seed,
        cartpole_mixed(),
        400.0,
        "discrete CQL CartPole-v1 (mixed)",
    );
}

#[test]
fn cql_pendulum_sac_50k_seed0_within_3840k_rows() {
    pendulum(0);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn cql_pendulum_sac_50k_seed1_within_3840k_rows() {
    pendulum(1);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn cql_pendulum_sac_50k_seed2_within_3840k_rows() {
    pendulum(2);
}

#[test]
fn discrete_cql_cartpole_mixed_seed0_within_1280k_rows() {
    discrete_cartpole(0);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn discrete_cql_cartpole_mixed_seed1_within_1280k_rows() {
    discrete_cartpole(1);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn discrete_cql_cartpole_mixed_seed2_within_1280k_rows() {
    discrete_cartpole(2);
}
