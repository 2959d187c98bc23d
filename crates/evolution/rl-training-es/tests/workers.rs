//! Reproducibility and checkpoints: a seeded run gives the same parameters whatever the
//! number of worker threads and however they are scheduled (each task carries its noise
//! offset and env seed; results come back in task order), and resuming is bit-identical.

use rl_training_core::algorithm::Algorithm;
use rl_training_core::burn::tensor::Device;
use rl_training_core::config::RunConfig;
use rl_training_es::Es;

fn run(workers: usize, antithetic: bool) -> RunConfig {
    let y = format!(
        "algorithm: es\nenv_id: CartPole-v1\ntotal_timesteps: 100000\nseed: 3\nalgo_kwargs:\n  pop_size: 16\n  num_workers: {workers}\n  antithetic: {antithetic}\n  net_arch: [8]\n  noise_table_size: 100000\n"
    );
    RunConfig::from_yaml(&y, &[], "test").unwrap()
}

fn params_after(run: &RunConfig, iters: usize) -> (Vec<f32>, u64) {
    let mut es = Es::new(
        run,
        &rl_training_envs::testing::training_env,
        &Device::flex(),
    )
    .unwrap();
    for _ in 0..iters {
        es.train().unwrap();
    }
    (es.params().to_vec(), es.num_timesteps())
}

#[test]
fn antithetic_es_is_reproducible_with_any_worker_count() {
    let one = params_after(&run(1, true), 4);
    let again = params_after(&run(1, true), 4);
    let three = params_after(&run(3, true), 4);
    assert_eq!(one, again, "same seed, same workers");
    assert_eq!(one, three, "1 vs 3 workers");
    // The run moved, and the seed matters.
    let fresh = params_after(&run(1, true), 0);
    assert_ne!(one.0, fresh.0);
    let mut other = run(1, true);
    other.seed = 4;
    assert_ne!(params_after(&other, 4).0, one.0);
    // Without mirrored sampling too.
    assert_eq!(
        params_after(&run(1, false), 3),
        params_after(&run(2, false), 3)
    );
}

#[test]
fn es_resumes_bit_identically() {
    let r = run(2, true);
    let dev = Device::flex();
    let steps = rl_training_envs::testing::assert_resumes_bit_identically(
        (2, 2),
        || Es::new(&r, &rl_training_envs::testing::training_env, &dev).unwrap(),
        |dir| Es::load(dir, &rl_training_envs::testing::training_env, &dev).unwrap(),
        |a| {
            let mut m = rl_training_core::params::TensorMap::default();
            m.insert("theta", vec![a.params().len()], a.params().to_vec());
            m
        },
        "es",
    );
    assert!(steps > 0);
}

#[test]
fn bad_config_names_the_key() {
    use rl_training_core::config::AlgoConfig;
    for (extra, key) in [
        ("  pop_size: 7\n", "pop_size"),
        ("  noise_std: 0\n", "noise_std"),
        ("  num_workers: 0\n", "num_workers"),
        ("  reward_shaping: linear\n", "reward_shaping"),
        ("  popsize: 8\n", "popsize"),
    ] {
        let y = format!(
            "algorithm: es\nenv_id: CartPole-v1\ntotal_timesteps: 1000\nalgo_kwargs:\n{extra}"
        );
        let run = RunConfig::from_yaml(&y, &[], "test.yaml").unwrap();
        let e = rl_training_es::EsConfig::from_kwargs(&run.algo_kwargs).unwrap_err();
        assert!(e.to_string().contains(key), "{extra}: {e}");
    }
    // A table too small for one perturbation.
    let y = "algorithm: es\nenv_id: CartPole-v1\ntotal_timesteps: 1000\nalgo_kwargs: {noise_table_size: 10}\n";
    let run = RunConfig::from_yaml(y, &[], "test.yaml").unwrap();
    let e = Es::new(
        &run,
        &rl_training_envs::testing::training_env,
        &Device::flex(),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("noise_table_size"), "{e}");
}
