//! Resume: N iterations, save, load, M more == N + M uninterrupted, bit for bit, with the
//! auxiliary buffer half full at the checkpoint and auxiliary phases on both sides of it.

use rl_training_core::burn::tensor::Device;
use rl_training_core::config::RunConfig;
use rl_training_core::params::module_tensors;
use rl_training_ppg::Ppg;

fn make(run: &RunConfig) -> Result<Box<dyn rl_training_core::Env>, rl_training_core::EnvError> {
    rl_training_envs::make_training_env(&run.env_id, &run.env_kwargs, &run.normalize, 0.99)
}

fn run() -> RunConfig {
    let y = "algorithm: ppg\nenv_id: CartPole-v1\ntotal_timesteps: 3000\nn_envs: 2\nseed: 6\nnormalize: {reward: true}\nalgo_kwargs:\n  n_steps: 32\n  batch_size: 16\n  n_policy_iters: 3\n  n_aux_epochs: 2\n  aux_batch_size: 32\n";
    RunConfig::from_yaml(y, &[], "test").unwrap()
}

/// Resumes after `n` iterations (aux phases after 3, 6, 9) and checks the restored buffer.
fn check(n: usize, buffered: usize, tag: &str) {
    let run = run();
    let dev = Device::flex();
    let steps = rl_training_envs::testing::assert_resumes_bit_identically(
        (n, 10 - n),
        || Ppg::new(&run, &make, &dev).unwrap(),
        |dir| {
            let p = Ppg::load(dir, &make, &dev).unwrap();
            assert_eq!(p.learner().aux_buffer().len(), buffered, "buffer restored");
            p
        },
        |a| {
            use rl_training_core::algorithm::Learner;
            let mut w = a.learner().weights();
            w.0.extend(module_tensors(a.policy()).0);
            w
        },
        tag,
    );
    assert_eq!(steps, (n * 32 * 2) as u64);
}

#[test]
fn resume_with_aux_buffer_bit_identical() {
    // The checkpoint after 4 iterations holds one rollout (64 states).
    check(4, 64, "ppg-partial");
}

#[test]
fn resume_right_after_an_aux_phase_bit_identical() {
    // After 3 iterations the phase has just emptied the buffer.
    check(3, 0, "ppg-empty");
}
