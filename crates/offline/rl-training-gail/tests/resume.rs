//! Resume (N iterations, save, load, M more == N + M uninterrupted, bit for bit) for GAIL
//! (discrete) and AIRL (continuous, gSDE; state-only with running input and reward
//! normalization); bad configs and expert data rejected with errors naming them.

use rl_training_core::burn::tensor::Device;
use rl_training_core::config::RunConfig;
use rl_training_core::params::{module_tensors, num_params};
use rl_training_envs::testing::{assert_resumes_bit_identically, training_env};
use std::path::{Path, PathBuf};

/// "Expert" episodes of an untrained PPO on `env`, as NPZ.
fn expert(env: &str, tag: &str) -> PathBuf {
    let name = format!("gail-{tag}-{env}.npz");
    rl_training_offline_testing::untrained_data(
        env,
        &rl_training_offline_testing::tmp_file(&name),
        true,
    )
}

fn run(env: &str, expert: &Path, kwargs: &str) -> RunConfig {
    let y = format!(
        "algorithm: gail\nenv_id: {env}\ntotal_timesteps: 100000\nn_envs: 2\nseed: 2\nalgo_kwargs: {{expert_data_path: {}, n_steps: 16, batch_size: 8, n_epochs: 2, disc_batch_size: 8, disc_net_arch: [8], policy_kwargs: {{net_arch: [8]}}{kwargs}}}\n",
        expert.display()
    );
    RunConfig::from_yaml(&y, &[], "test").unwrap()
}

#[test]
fn gail_and_airl_resume_bit_identically() {
    let dev = Device::flex();
    for (env, kw) in [
        ("CartPole-v1", ""),
        (
            "Pendulum-v1",
            ", reward_type: airl, use_sde: true, sde_sample_freq: 4",
        ),
        (
            "Pendulum-v1",
            ", reward_type: airl, state_only: true, disc_normalize_input: true, normalize_reward: true, entropy_weight: 0.5",
        ),
    ] {
        let p = expert(env, "resume");
        let r = run(env, &p, kw);
        assert_resumes_bit_identically(
            (3, 3),
            || rl_training_gail::Gail::new(&r, &training_env, &dev).unwrap(),
            |d| rl_training_gail::Gail::load(d, &training_env, &dev).unwrap(),
            |a| {
                let mut m = module_tensors(a.policy());
                m.extend_prefixed("disc", module_tensors(a.learner().discriminator()));
                m
            },
            &format!("gail-{env}"),
        );
    }
}

#[test]
fn bad_configs_and_expert_data_are_named() {
    let p = expert("CartPole-v1", "bad");
    let err = |r: &RunConfig| {
        rl_training_gail::Gail::new(r, &training_env, &Device::flex())
            .err()
            .expect("rejected")
            .to_string()
    };
    for (kw, want) in [
        (", reward_type: wgan", "reward_type"),
        (", n_disc_updates: 0", "n_disc_updates"),
        (", gradient_penalty_coef: -1", "gradient_penalty_coef"),
        (", entropy_weight: -0.5", "entropy_weight"),
        (", n_stepz: 3", "n_stepz"),
        (", clip_range: -1", "clip_range"),
    ] {
        let e = err(&run("CartPole-v1", &p, kw));
        assert!(e.contains(want), "{kw:?}: {e}");
    }
    // Expert data for another env, and a missing file.
    let e = err(&run("Pendulum-v1", &p, ""));
    assert!(
        e.contains(".npz") && e.contains("obs") && e.contains("[4]") && e.contains("[3]"),
        "{e}"
    );
    let e = err(&run(
        "CartPole-v1",
        &PathBuf::from("/nonexistent/demos.npz"),
        "",
    ));
    assert!(e.contains("/nonexistent/demos.npz"), "{e}");
    let y =
        "algorithm: gail\nenv_id: CartPole-v1\ntotal_timesteps: 10\nalgo_kwargs: {n_steps: 8}\n";
    let e = err(&RunConfig::from_yaml(y, &[], "t").unwrap());
    assert!(e.contains("expert_data_path"), "{e}");
}

#[test]
fn state_only_reward_takes_no_action_input() {
    let p = expert("Pendulum-v1", "state-only");
    let g_params = |kw: &str| {
        let r = run("Pendulum-v1", &p, kw);
        let a = rl_training_gail::Gail::new(&r, &training_env, &Device::flex()).unwrap();
        num_params(&a.learner().discriminator().g)
    };
    // One hidden layer of 8: (inputs + 1) · 8 + 9 parameters; 3 observation values, 1 action.
    assert_eq!(g_params(", reward_type: airl"), 5 * 8 + 9);
    assert_eq!(g_params(", reward_type: airl, state_only: true"), 4 * 8 + 9);
}
