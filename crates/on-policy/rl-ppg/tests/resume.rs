//! Resume: N iterations, save, load, M more == N + M uninterrupted, bit for bit, with the
//! auxiliary buffer half full at the checkpoint and auxiliary phases on both sides of it.

use rl_core::burn::tensor::Device;
use rl_core::config::RunConfig;
use rl_core::params::module_tensors;
use rl_ppg::Ppg;

fn make(run: &RunConfig) -> Result<Box<dyn rl_core::Env>, rl_core::EnvError> {
    rl_envs::make_training_env(&run.env_id, &run.env_kwargs, &run.normalize, 0.99)
}

#[test]
fn resume_with_aux_buffer_bit_identical() {
    let y = "algorithm: ppg\nenv_id: CartPole-v1\ntotal_timesteps: 3000\nn_envs: 2\nseed: 6\nnormalize: {reward: true}\nalgo_kwargs:\n  n_steps: 32\n  batch_size: 16\n  n_policy_iters: 3\n  n_aux_epochs: 2\n  aux_batch_size: 32\n";
    let run = RunConfig::from_yaml(y, &[], "test").unwrap();
    let dev = Device::flex();
    // Aux phases after iterations 3, 6 and 9; the checkpoint after 4 holds one rollout.
    let steps = rl_envs::testing::assert_resumes_bit_identically(
        (4, 6),
        || Ppg::new(&run, &make, &dev).unwrap(),
        |dir| {
            let p = Ppg::load(dir, &make, &dev).unwrap();
            assert_eq!(p.learner().aux_buffer().len(), 64, "buffer restored");
            p
        },
        |a| {
            use rl_core::algorithm::Learner;
            let mut w = a.learner().weights();
            w.0.extend(module_tensors(a.policy()).0);
            w
        },
        "ppg",
    );
    assert_eq!(steps, 4 * 32 * 2);
}
