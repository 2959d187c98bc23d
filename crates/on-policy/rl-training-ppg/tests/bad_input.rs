//! Bad input gets an error that names it.

use rl_training_core::burn::tensor::Device;
use rl_training_core::config::{AlgoConfig, RunConfig};
use rl_training_ppg::{Ppg, PpgConfig};

fn run(env: &str, extra: &str) -> RunConfig {
    let y = format!(
        "algorithm: ppg\nenv_id: {env}\ntotal_timesteps: 1000\nalgo_kwargs:\n  n_steps: 16\n{extra}"
    );
    RunConfig::from_yaml(&y, &[], "test.yaml").unwrap()
}

#[test]
fn defaults_are_the_seed_table() {
    let c = PpgConfig::default();
    assert_eq!(
        (
            c.learning_rate.initial(),
            c.n_steps,
            c.batch_size,
            c.n_policy_epochs,
            c.n_aux_epochs,
            c.n_policy_iters,
            c.beta_clone,
            c.clip_range.initial()
        ),
        (5e-4, 256, 64, 1, 6, 32, 1.0, 0.2)
    );
}

#[test]
fn errors_name_the_key_or_space() {
    for (extra, key) in [
        ("  n_policy_iters: 0\n", "n_policy_iters"),
        ("  n_policy_epochs: 0\n", "n_policy_epochs"),
        ("  beta_clone: -1\n", "beta_clone"),
        ("  policy_kwargs: {shared: true}\n", "policy_kwargs.shared"),
        ("  n_epochs: 3\n", "n_epochs"),
    ] {
        let e = PpgConfig::from_kwargs(&run("CartPole-v1", extra).algo_kwargs)
            .unwrap_err()
            .to_string();
        assert!(e.contains(key), "{extra}: {e}");
    }
    let e = Ppg::new(
        &run("Pendulum-v1", ""),
        &rl_training_envs::testing::training_env,
        &Device::flex(),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("Pendulum-v1") && e.contains("Discrete"), "{e}");
}
