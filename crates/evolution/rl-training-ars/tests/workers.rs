//! ARS: reproducible with any worker count, bit-identical resume (parameters and observation
//! statistics), bad input named.

use rl_training_ars::Ars;
use rl_training_core::algorithm::Algorithm;
use rl_training_core::burn::tensor::Device;
use rl_training_core::config::RunConfig;

fn run(env: &str, workers: usize) -> RunConfig {
    run_with(env, workers, 1)
}

fn run_with(env: &str, workers: usize, n_eval_episodes: usize) -> RunConfig {
    let y = format!(
        "algorithm: ars\nenv_id: {env}\ntotal_timesteps: 100000\nseed: 5\nalgo_kwargs:\n  n_directions: 6\n  n_top_directions: 3\n  num_workers: {workers}\n  noise_table_size: 100000\n  n_eval_episodes: {n_eval_episodes}\n"
    );
    RunConfig::from_yaml(&y, &[], "test").unwrap()
}

fn params_after(run: &RunConfig, iters: usize) -> Vec<f32> {
    let mut a = Ars::new(
        run,
        &rl_training_envs::testing::training_env,
        &Device::flex(),
    )
    .unwrap();
    for _ in 0..iters {
        a.train().unwrap();
    }
    a.params().to_vec()
}

#[test]
fn reproducible_with_any_worker_count() {
    for env in ["CartPole-v1", "Pendulum-v1"] {
        let one = params_after(&run(env, 1), 3);
        assert_eq!(one, params_after(&run(env, 4), 3), "{env}");
        assert!(
            one.iter().any(|&p| p != 0.0),
            "{env}: the linear policy moved"
        );
    }
}

#[test]
fn several_episodes_per_direction() {
    // Pendulum's episodes are 200 steps: 6 directions × 2 signs × 3 episodes per iteration.
    let r = run_with("Pendulum-v1", 2, 3);
    let mut a = Ars::new(
        &r,
        &rl_training_envs::testing::training_env,
        &Device::flex(),
    )
    .unwrap();
    let m = a.train().unwrap();
    assert_eq!(m["perf/episodes"], 36.0);
    assert_eq!(a.num_timesteps(), 36 * 200);
    // Any worker count, the same update; and a different one from one episode per direction.
    let three = params_after(&r, 2);
    assert_eq!(three, params_after(&run_with("Pendulum-v1", 4, 3), 2));
    assert_ne!(three, params_after(&run_with("Pendulum-v1", 2, 1), 2));
    let bad = "algorithm: ars\nenv_id: CartPole-v1\ntotal_timesteps: 1000\nalgo_kwargs: {n_eval_episodes: 0}\n";
    let bad = RunConfig::from_yaml(bad, &[], "test.yaml").unwrap();
    let e = Ars::new(
        &bad,
        &rl_training_envs::testing::training_env,
        &Device::flex(),
    )
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(e.contains("n_eval_episodes"), "{e}");
}

#[test]
fn ars_resumes_bit_identically() {
    let r = run("Pendulum-v1", 2);
    let dev = Device::flex();
    rl_training_envs::testing::assert_resumes_bit_identically(
        (3, 3),
        || Ars::new(&r, &rl_training_envs::testing::training_env, &dev).unwrap(),
        |dir| Ars::load(dir, &rl_training_envs::testing::training_env, &dev).unwrap(),
        |a| {
            let mut m = rl_training_core::params::TensorMap::default();
            m.insert("theta", vec![a.params().len()], a.params().to_vec());
            m
        },
        "ars",
    );
}

#[test]
fn bad_input_is_named() {
    use rl_training_core::config::AlgoConfig;
    let y = "algorithm: ars\nenv_id: CartPole-v1\ntotal_timesteps: 1000\nalgo_kwargs: {n_directions: 4, n_top_directions: 5}\n";
    let run = RunConfig::from_yaml(y, &[], "test.yaml").unwrap();
    let e = rl_training_ars::ArsConfig::from_kwargs(&run.algo_kwargs).unwrap_err();
    assert_eq!(e.field, "algo_kwargs.n_top_directions", "{e}");
    // Shared normalization needs a vector env; the workers step one env each.
    let shared = RunConfig::from_yaml(
        "algorithm: ars\nenv_id: Pendulum-v1\ntotal_timesteps: 1000\nnormalize: {obs: true, shared: true}\n",
        &[],
        "test.yaml",
    )
    .unwrap();
    let e = Ars::new(
        &shared,
        &rl_training_envs::testing::training_env,
        &Device::flex(),
    )
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(e.contains("normalize.shared"), "{e}");
    // MultiDiscrete actions are not supported: the error names the space.
    let md = |_: &RunConfig| -> Result<Box<dyn rl_training_core::Env>, rl_training_core::EnvError> {
        Ok(Box::new(rl_training_envs::testing::Match::new(
            rl_training_core::Space::MultiDiscrete { nvec: vec![2, 3] },
        )))
    };
    let e = Ars::new(&run_ok(), &md, &Device::flex())
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("MultiDiscrete"), "{e}");
    // predict checks the observation length.
    let mut a = Ars::new(
        &run_ok(),
        &rl_training_envs::testing::training_env,
        &Device::flex(),
    )
    .unwrap();
    let e = a.predict(&[0.0; 3], true).unwrap_err().to_string();
    assert!(e.contains("multiple of 4"), "{e}");
}

fn run_ok() -> RunConfig {
    RunConfig::from_yaml(
        "algorithm: ars\nenv_id: CartPole-v1\ntotal_timesteps: 1000\n",
        &[],
        "test.yaml",
    )
    .unwrap()
}
