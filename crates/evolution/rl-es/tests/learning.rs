//! Learning test (release, CI): CartPole-v1 within 1M steps.

use rl_core::burn::tensor::Device;
use rl_envs::testing;
use rl_es::Es;

#[test]
fn es_cartpole_seed0_within_1m() {
    let run = testing::example_config(env!("CARGO_MANIFEST_DIR"), "es_cartpole.yaml", &[]);
    let mut alg = Es::new(&run, &testing::training_env, &Device::flex()).unwrap();
    // Evaluations every 50,000 steps (an iteration takes at most 32,000).
    let (hit, evals) = testing::first_reaching(&mut alg, &run, 50_000, 475.0);
    println!(
        "OpenAI-ES CartPole-v1 seed 0: first eval >= 475 at {hit:?} (budget 1000000); evaluations {evals:?}"
    );
    assert!(
        hit.is_some_and(|s| s <= 1_000_000),
        "never reached 475 within 1M: {evals:?}"
    );
}
