//! Learning tests (release mode, seed 0, in CI): BC on 50 expert CartPole-v1 episodes, and
//! MARWIL against BC on a mixed dataset (25 expert + 25 ε = 0.5 episodes). The expert is the
//! project's own PPO (its CI config, 500 at 100k steps), trained and recorded here.

use rl_core::algorithm::Algorithm;
use rl_core::burn::tensor::Device;
use rl_envs::testing;
use std::path::PathBuf;
use std::sync::OnceLock;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `(expert.parquet, mixed.parquet)`, made once per test process.
fn datasets() -> &'static (PathBuf, PathBuf) {
    static D: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    D.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("rl-marwil-data-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let run = testing::example_config(
            env!("CARGO_MANIFEST_DIR"),
            "ppo_cartpole.yaml",
            &["seed=0".into()],
        );
        let mut ppo = rl_ppo::Ppo::new(&run, &testing::training_env, &Device::flex()).unwrap();
        let (ret, _) = testing::return_at(&mut ppo, &run);
        println!("expert PPO: {ret}");
        assert!(ret >= 475.0, "the expert is not one: {ret}");
        let mut env = rl_envs::make("CartPole-v1", &Default::default()).unwrap();
        let (e, m) = (dir.join("expert.parquet"), dir.join("mixed.parquet"));
        let expert =
            rl_offline::record_parts(&mut ppo, env.as_mut(), &e, &[(50, 0.0, 100)]).unwrap();
        let mixed = rl_offline::record_parts(
            &mut ppo,
            env.as_mut(),
            &m,
            &[(25, 0.0, 200), (25, 0.5, 300)],
        )
        .unwrap();
        println!(
            "expert: {} rows in {} episodes; mixed: {} rows in {} episodes",
            expert.len(),
            expert.num_episodes(),
            mixed.len(),
            mixed.num_episodes()
        );
        (e, m)
    })
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
