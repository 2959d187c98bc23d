//! Resume: N iterations, save, load, M more == N + M uninterrupted, bit for bit (weights and
//! every metric except wall-clock ones), with RMSprop and Adam, discrete and continuous
//! actions, normalization wrappers.

use rl_training_a2c::A2c;
use rl_training_core::burn::tensor::Device;
use rl_training_core::config::RunConfig;
use rl_training_core::params::module_tensors;

fn cfg(env: &str, extra: &str, kwargs: &str) -> RunConfig {
    let y = format!(
        "algorithm: a2c\nenv_id: {env}\ntotal_timesteps: 3000\nn_envs: 4\nseed: 3\n{extra}algo_kwargs:\n  n_steps: 8\n  learning_rate: lin_1e-3\n  normalize_advantage: true\n{kwargs}"
    );
    RunConfig::from_yaml(&y, &[], "test").unwrap()
}

fn make(run: &RunConfig) -> Result<Box<dyn rl_training_core::Env>, rl_training_core::EnvError> {
    rl_training_envs::make_training_env(&run.env_id, &run.env_kwargs, &run.normalize, 0.99)
}

fn check(run: RunConfig, tag: &str) {
    let dev = Device::flex();
    let steps = rl_training_envs::testing::assert_resumes_bit_identically(
        (30, 20),
        || A2c::new(&run, &make, &dev).unwrap(),
        |dir| A2c::load(dir, &make, &dev).unwrap(),
        |a| module_tensors(a.policy()),
        &format!("a2c-{tag}"),
    );
    assert_eq!(steps, 30 * 8 * 4);
}

#[test]
fn resume_cartpole_rmsprop_bit_identical() {
    check(cfg("CartPole-v1", "", ""), "cartpole");
}

#[test]
fn resume_pendulum_adam_with_normalization_bit_identical() {
    check(
        cfg(
            "Pendulum-v1",
            "normalize: {obs: true, reward: true}\n",
            "  use_rms_prop: false\n",
        ),
        "pendulum",
    );
}
