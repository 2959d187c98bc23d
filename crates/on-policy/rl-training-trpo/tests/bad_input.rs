//! Bad input gets an error that names it.

use rl_training_core::burn::tensor::Device;
use rl_training_core::config::{AlgoConfig, RunConfig};
use rl_training_trpo::{Trpo, TrpoConfig};

fn kwargs(extra: &str) -> RunConfig {
    let y = format!(
        "algorithm: trpo\nenv_id: CartPole-v1\ntotal_timesteps: 1000\nalgo_kwargs:\n  n_steps: 16\n{extra}"
    );
    RunConfig::from_yaml(&y, &[], "test.yaml").unwrap()
}

#[test]
fn defaults_are_the_seed_table() {
    let c = TrpoConfig::default();
    assert_eq!(
        (
            c.learning_rate.initial(),
            c.n_steps,
            c.batch_size,
            c.gamma,
            c.gae_lambda,
            c.target_kl,
            c.cg_max_steps,
            c.cg_damping,
            c.line_search_max_iter,
            c.line_search_shrinking_factor,
            c.n_critic_updates,
            c.sub_sampling_factor
        ),
        (1e-3, 2048, 128, 0.99, 0.95, 0.01, 10, 0.1, 10, 0.8, 10, 1)
    );
}

#[test]
fn config_errors_name_the_key() {
    for (extra, key) in [
        ("  target_kl: 0\n", "target_kl"),
        ("  cg_max_steps: 0\n", "cg_max_steps"),
        (
            "  line_search_shrinking_factor: 1.5\n",
            "line_search_shrinking_factor",
        ),
        ("  policy_kwargs: {shared: true}\n", "policy_kwargs.shared"),
        ("  cg_dampin: 0.1\n", "cg_dampin"),
    ] {
        let e = TrpoConfig::from_kwargs(&kwargs(extra).algo_kwargs)
            .unwrap_err()
            .to_string();
        assert!(e.contains(key), "{extra}: {e}");
    }
    let e = Trpo::new(
        &kwargs("  use_sde: true\n"),
        &rl_training_envs::testing::training_env,
        &Device::flex(),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("use_sde"), "{e}");
}
