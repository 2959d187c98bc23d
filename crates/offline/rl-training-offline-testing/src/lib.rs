//! Test fixtures shared by the offline family's tests (BC/MARWIL, CQL, GAIL): datasets recorded
//! by the project's own PPO and SAC, so nothing is downloaded. The cheap ones (PPO's, seconds)
//! are made on first use in a folder (`$var` or a per-process temporary one); the ones that need
//! a long SAC run are committed under `testdata/datasets/` ([`committed`]) and remade there with
//! `RL_REMAKE_DATASETS=1`.
#![warn(missing_docs)]

use rl_training_core::burn::tensor::Device;
use rl_training_core::config::RunConfig;
use rl_training_envs::testing;
use rl_training_offline::{DatasetSpec, RecordOptions, record, record_parts, write_dataset};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Serializes making fixture files: tests of one process run on several threads.
static MAKING: Mutex<()> = Mutex::new(());

/// The data folder: `$var` when set, else `<tmp>/<prefix>-<pid>`.
pub fn data_dir(var: &str, prefix: &str) -> PathBuf {
    let d = std::env::var(var)
        .map(PathBuf::from)
        .unwrap_or_else(|_| std::env::temp_dir().join(format!("{prefix}-{}", std::process::id())));
    std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
    d
}

/// The project's CartPole-v1 expert: PPO with `ppo_cartpole.yaml` (seed 0, 100k steps),
/// checked to score at least 475.
pub fn cartpole_ppo_expert(manifest_dir: &str) -> rl_training_ppo::Ppo {
    let run = testing::example_config(manifest_dir, "ppo_cartpole.yaml", &["seed=0".into()]);
    let mut ppo = rl_training_ppo::Ppo::new(&run, &testing::training_env, &Device::flex())
        .unwrap_or_else(|e| panic!("{e}"));
    let (ret, _) = testing::return_at(&mut ppo, &run);
    assert!(ret >= 475.0, "the expert is not one: {ret}");
    ppo
}

/// SAC with `sac_pendulum.yaml` (seed 0) trained for `steps`.
pub fn pendulum_sac(manifest_dir: &str, steps: u64) -> rl_training_sac::Sac {
    let run = testing::example_config(
        manifest_dir,
        "sac_pendulum.yaml",
        &["seed=0".into(), format!("total_timesteps={steps}")],
    );
    let mut sac = rl_training_sac::Sac::new(&run, &testing::training_env, &Device::flex())
        .unwrap_or_else(|e| panic!("{e}"));
    let (ret, _) = testing::return_at(&mut sac, &run);
    println!("SAC behaviour policy after {steps} steps: {ret}");
    sac
}

/// `path` if it exists, else the CartPole PPO expert's `parts` (`(episodes, ε, seed)`)
/// recorded there.
pub fn cartpole_expert_file(
    manifest_dir: &str,
    path: &Path,
    parts: &[(usize, f64, u64)],
) -> PathBuf {
    let _guard = MAKING.lock().unwrap_or_else(|e| e.into_inner());
    if !path.exists() {
        let mut ppo = cartpole_ppo_expert(manifest_dir);
        let mut env = rl_training_envs::make("CartPole-v1", &Default::default()).unwrap();
        let d = record_parts(&mut ppo, env.as_mut(), path, parts).unwrap_or_else(|e| panic!("{e}"));
        println!(
            "{}: {} rows in {} episodes",
            path.display(),
            d.len(),
            d.num_episodes()
        );
    }
    path.to_path_buf()
}

/// A small dataset of an untrained PPO with ε = 0.3 on `env` (2 episodes), written to `path`
/// (format by extension), with or without its rewards: for resume and bad-input tests.
pub fn untrained_data(env: &str, path: &Path, rewards: bool) -> PathBuf {
    let _guard = MAKING.lock().unwrap_or_else(|e| e.into_inner());
    let run = RunConfig::from_yaml(
        &format!("algorithm: ppo\nenv_id: {env}\ntotal_timesteps: 1\n"),
        &[],
        "fixture",
    )
    .unwrap();
    let mut ppo = rl_training_ppo::Ppo::new(&run, &testing::training_env, &Device::flex()).unwrap();
    let mut e = rl_training_envs::make(env, &Default::default()).unwrap();
    let opts = RecordOptions {
        episodes: 2,
        epsilon: 0.3,
        ..Default::default()
    };
    let d = record(&mut ppo, e.as_mut(), &opts).unwrap();
    let mut spec = DatasetSpec::from_spaces(e.observation_space(), e.action_space());
    spec.has_rewards = rewards;
    write_dataset(path, &d, &spec).unwrap();
    path.to_path_buf()
}

/// The committed dataset `testdata/datasets/<name>` of the workspace. `make` writes it when it
/// is missing or when `RL_REMAKE_DATASETS=1` (it then replaces the committed file: commit the new
/// one with the kernel level and commit it was made at, `testdata/datasets/README.md`). `make`
/// writes a temporary file that is renamed into place, so a killed run leaves no half file.
pub fn committed(manifest_dir: &str, name: &str, make: impl FnOnce(&Path)) -> PathBuf {
    let _guard = MAKING.lock().unwrap_or_else(|e| e.into_inner());
    let dir = datasets_dir(manifest_dir);
    let path = dir.join(name);
    let remake = std::env::var("RL_REMAKE_DATASETS").is_ok_and(|v| v == "1");
    if remake || !path.exists() {
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        // The writers pick the format by extension: keep it on the temporary name.
        let tmp = dir.join(format!("tmp-{}-{name}", std::process::id()));
        make(&tmp);
        std::fs::rename(&tmp, &path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        println!("made {}", path.display());
    }
    path
}

/// The workspace's `testdata/datasets/` folder, found from a crate's manifest directory.
pub fn datasets_dir(manifest_dir: &str) -> PathBuf {
    rl_training_core::testing::workspace_root(Path::new(manifest_dir)).join("testdata/datasets")
}

/// Runs `make` to create `path` unless it exists, one fixture at a time.
pub fn make_once(path: &Path, make: impl FnOnce(&Path)) -> PathBuf {
    let _guard = MAKING.lock().unwrap_or_else(|e| e.into_inner());
    if !path.exists() {
        make(path);
    }
    path.to_path_buf()
}

/// A temporary file name unique to this process and `name`.
pub fn tmp_file(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("rl-offline-fixture-{}-{name}", std::process::id()))
}
