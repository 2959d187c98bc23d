//! A checkpoint of a run on Gymnasium envs (their snapshots are the pickled envs) resumes bit
//! for bit.

use rl_training_core::Algorithm;
use rl_training_core::burn::tensor::Device;
use rl_training_core::config::RunConfig;
use rl_training_core::env::{Env, EnvError};
use rl_training_core::wrappers::RecordEpisodeStatistics;
use rl_training_gymnasium::PREFIX;
use rl_training_ppo::Ppo;

/// What rl-training-envs builds for a `gymnasium:` id with the `gymnasium` feature (the CLI's path).
fn gym_env(run: &RunConfig) -> Result<Box<dyn Env>, EnvError> {
    let id = run.env_id.strip_prefix(PREFIX).expect("a gymnasium: id");
    Ok(Box::new(RecordEpisodeStatistics::new(
        rl_training_gymnasium::make(id, &run.env_kwargs)?,
    )))
}

fn config(overrides: &[String]) -> RunConfig {
    let root =
        rl_training_core::testing::workspace_root(std::path::Path::new(env!("CARGO_MANIFEST_DIR")));
    let p = root.join("examples/configs/ppo_gymnasium_cartpole.yaml");
    let text = std::fs::read_to_string(&p).unwrap();
    RunConfig::from_yaml(&text, overrides, &p.display().to_string()).unwrap()
}

#[test]
fn a_run_on_gymnasium_envs_resumes_bit_for_bit() {
    let run = config(&["total_timesteps=2048".into()]);
    let dev = Device::flex();
    let strip = |m: rl_training_core::logger::Metrics| -> Vec<(String, u64)> {
        m.into_iter()
            .filter(|(k, _)| !k.starts_with("time/") && k != "charts/SPS")
            .map(|(k, v)| (k, v.to_bits()))
            .collect()
    };
    let mut a = Ppo::new(&run, &gym_env, &dev).unwrap();
    let straight: Vec<_> = (0..4).map(|_| strip(a.train().unwrap())).collect();
    let mut b = Ppo::new(&run, &gym_env, &dev).unwrap();
    let mut resumed: Vec<_> = (0..2).map(|_| strip(b.train().unwrap())).collect();
    let dir = std::env::temp_dir().join(format!("rl-gymnasium-resume-{}", std::process::id()));
    b.save(&dir).unwrap();
    drop(b);
    let mut c = Ppo::load(&dir, &gym_env, &dev).unwrap();
    resumed.extend((0..2).map(|_| strip(c.train().unwrap())));
    assert_eq!(straight, resumed);
    let obs = [0.01f32, -0.02, 0.03, 0.04];
    assert_eq!(
        a.predict(&obs, true).unwrap(),
        c.predict(&obs, true).unwrap()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
