//! Learning tests (release mode, seed 0, in CI): BC on 50 expert CartPole-v1 episodes, and
//! MARWIL against BC on a mixed dataset (25 expert + 25 ε = 0.5 episodes). The expert is the
//! project's own PPO (its CI config, 500 at 100k steps), trained and recorded here.

use rl_core::algorithm::Algorithm;
use rl_core::burn::tensor::Device;
use rl_envs::testing;
use std::path::PathBuf;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `(expert.parquet, mixed.parquet)`: 50 episodes of the PPO expert; 25 expert + 25 with
/// ε = 0.5.
fn datasets() -> (PathBuf, PathBuf) {
    let dir = rl_offline_testing::data_dir("RL_MARWIL_DATA_DIR", "rl-marwil-data");
    let m = env!("CARGO_MANIFEST_DIR");
    (
        rl_offline_testing::cartpole_expert_file(m, &dir.join("expert.parquet"), &[(50, 0.0, 100)]),
        rl_offline_testing::cartpole_expert_file(
            m,
            &dir.join("mixed.parquet"),
            &[(25, 0.0, 200), (25, 0.5, 300)],
        ),
    )
}

fn config(name: &str, data: &PathBuf) -> rl_core::config::RunConfig {
    testing::example_config(
        env!("CARGO_MANIFEST_DIR"),
        name,
        &[
            "seed=0".into(),
            format!("offline_data.input={}", data.display()),
        ],
    )
}

#[test]
fn bc_cartpole_expert_seed0_within_500k_rows() {
    let run = config("bc_cartpole.yaml", &datasets().0);
    let mut bc = bc(&run);
    let (hit, evals) = testing::first_reaching(&mut bc, &run, run.eval_freq, 450.0);
    println!(
        "BC CartPole-v1 50 expert episodes seed 0: first eval >= 450 at {hit:?} rows (budget {}); evaluations {evals:?}",
        run.total_timesteps
    );
    assert!(hit.is_some(), "{evals:?}");
}

fn bc(run: &rl_core::config::RunConfig) -> rl_bc::Bc {
    rl_bc::new(run, &testing::training_env, &Device::flex()).unwrap()
}

#[test]
fn marwil_beats_bc_on_mixed_cartpole_seed0_at_500k_rows() {
    let run = config("marwil_cartpole.yaml", &datasets().1);
    let mut marwil = rl_marwil::Marwil::new(&run, &testing::training_env, &Device::flex()).unwrap();
    let (m_ret, m_steps) = testing::return_at(&mut marwil, &run);
    let bc_run = config("bc_cartpole.yaml", &datasets().1);
    let mut bc = bc(&bc_run);
    let (b_ret, b_steps) = testing::return_at(&mut bc, &bc_run);
    println!(
        "mixed CartPole-v1 seed 0: MARWIL {m_ret} at {m_steps} rows, BC {b_ret} at {b_steps} rows"
    );
    assert!(m_ret >= 400.0, "MARWIL {m_ret}");
    assert!(m_ret >= b_ret, "MARWIL {m_ret} < BC {b_ret}");
    assert_eq!(bc.name(), "bc");
}
