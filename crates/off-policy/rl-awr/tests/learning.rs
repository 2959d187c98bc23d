//! Learning tests (release mode, seed 0, in CI).

use rl_awr::Awr;
use rl_core::burn::tensor::Device;
use rl_envs::testing;

// As the CLI: tensor buffers are reused instead of page-faulted in.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn within(name: &str, every: u64, threshold: f64, label: &str) {
    let run = testing::example_config(env!("CARGO_MANIFEST_DIR"), name, &["seed=0".into()]);
    let mut awr = Awr::new(&run, &testing::training_env, &Device::flex()).unwrap();
    let (hit, evals) = testing::first_reaching(&mut awr, &run, every, threshold);
    println!(
        "{label} seed 0: first eval >= {threshold} at {hit:?} (budget {}); evaluations {evals:?}",
        run.total_timesteps
    );
    assert!(
        hit.is_some(),
        "never reached {threshold} within {}: {evals:?}",
        run.total_timesteps
    );
}

#[test]
fn awr_cartpole_seed0_within_100k() {
    within("awr_cartpole.yaml", 4_096, 475.0, "AWR CartPole-v1");
}

#[test]
fn awr_pendulum_seed0_within_200k() {
    within("awr_pendulum.yaml", 8_192, -300.0, "AWR Pendulum-v1");
}
