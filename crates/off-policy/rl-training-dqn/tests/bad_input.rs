//! Bad configs and spaces give errors that name the field or space; nothing panics.

use rl_training_core::burn::tensor::Device;
use rl_training_core::config::RunConfig;
use rl_training_dqn::Dqn;
use rl_training_envs::testing::training_env;

fn err(env: &str, kwargs: &str) -> String {
    let y = format!("algorithm: dqn\nenv_id: {env}\ntotal_timesteps: 100\nalgo_kwargs:\n{kwargs}");
    let run = RunConfig::from_yaml(&y, &[], "test").unwrap();
    match Dqn::new(&run, &training_env, &Device::flex()) {
        Ok(_) => panic!("accepted {kwargs:?} on {env}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn rejects_bad_configs_naming_the_field() {
    for (kw, want) in [
        ("  learning_rte: 0.1\n", "learning_rte"),
        ("  n_step: 0\n", "n_step"),
        ("  n_step: [3, 1]\n", "n_step"),
        ("  num_atoms: 0\n", "num_atoms"),
        ("  num_atoms: 5\n  v_min: 1\n  v_max: 1\n", "v_min"),
        ("  train_freq: 0\n", "train_freq"),
        ("  gradient_steps: -2\n", "gradient_steps"),
        ("  training_intensity: -1\n", "training_intensity"),
        (
            "  prioritized_replay: true\n  prioritized_replay_beta: 2\n",
            "prioritized_replay_beta",
        ),
        ("  td_error_loss_fn: l1\n", "td_error_loss_fn"),
        ("  exploration_final_eps: 1.5\n", "exploration_final_eps"),
        ("  tau: 0\n", "tau"),
    ] {
        let e = err("CartPole-v1", kw);
        assert!(e.contains(want), "{kw:?}: {e}");
    }
}

#[test]
fn rejects_continuous_actions() {
    let e = err("Pendulum-v1", "  gamma: 0.9\n");
    assert!(e.contains("Discrete") && e.contains("Pendulum-v1"), "{e}");
}

#[test]
fn accepts_rllib_aliases() {
    let y = "algorithm: dqn\nenv_id: CartPole-v1\ntotal_timesteps: 100\nalgo_kwargs:\n  lr: 0.001\n  target_network_update_freq: 500\n  num_steps_sampled_before_learning_starts: 10\n  grad_clip: 40\n  adam_epsilon: 0.0001\n  train_batch_size: 8\n  policy_kwargs: {fcnet_hiddens: [32]}\n";
    let run = RunConfig::from_yaml(y, &[], "test").unwrap();
    let d = Dqn::new(&run, &training_env, &Device::flex()).unwrap();
    let c = d.config();
    assert_eq!(
        (
            c.target_update_interval,
            c.replay.learning_starts,
            c.batch_size
        ),
        (500, 10, 8)
    );
    assert_eq!(c.max_grad_norm, Some(40.0));
    assert_eq!(c.policy_kwargs.net_arch, vec![32]);
}
