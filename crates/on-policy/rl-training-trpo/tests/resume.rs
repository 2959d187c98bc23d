//! Resume: N iterations, save, load, M more == N + M uninterrupted, bit for bit (weights and
//! every metric except wall-clock ones), discrete and continuous actions.

use rl_training_core::burn::tensor::Device;
use rl_training_core::config::RunConfig;
use rl_training_core::params::module_tensors;
use rl_training_trpo::Trpo;

fn make(run: &RunConfig) -> Result<Box<dyn rl_training_core::Env>, rl_training_core::EnvError> {
    rl_training_envs::make_training_env(&run.env_id, &run.env_kwargs, &run.normalize, 0.99)
}

fn check(env: &str, extra: &str, tag: &str) {
    let y = format!(
        "algorithm: trpo\nenv_id: {env}\ntotal_timesteps: 3000\nn_envs: 2\nseed: 4\n{extra}algo_kwargs:\n  n_steps: 64\n  batch_size: 32\n  n_critic_updates: 3\n  learning_rate: lin_1e-3\n  sub_sampling_factor: 2\n"
    );
    let run = RunConfig::from_yaml(&y, &[], "test").unwrap();
    let dev = Device::flex();
    let steps = rl_training_envs::testing::assert_resumes_bit_identically(
        (4, 4),
        || Trpo::new(&run, &make, &dev).unwrap(),
        |dir| Trpo::load(dir, &make, &dev).unwrap(),
        |a| module_tensors(a.policy()),
        &format!("trpo-{tag}"),
    );
    assert_eq!(steps, 4 * 64 * 2);
}

#[test]
fn resume_cartpole_bit_identical() {
    check("CartPole-v1", "", "cartpole");
}

#[test]
fn resume_pendulum_with_normalization_bit_identical() {
    check(
        "Pendulum-v1",
        "normalize: {obs: true, reward: true}\n",
        "pendulum",
    );
}
