//! Resume: N iterations, save, load, M more == N + M uninterrupted, bit for bit (weights and
//! every metric except wall-clock ones), also with normalization wrappers and continuous
//! actions, and while other tests run in the same process.

use rl_training_core::algorithm::Algorithm;
use rl_training_core::burn::tensor::Device;
use rl_training_core::config::RunConfig;
use rl_training_core::params::module_tensors;
use rl_training_ppo::Ppo;

fn cfg(env: &str, extra: &str) -> RunConfig {
    let y = format!(
        "algorithm: ppo\nenv_id: {env}\ntotal_timesteps: 3000\nn_envs: 3\nseed: 7\n{extra}algo_kwargs:\n  n_steps: 64\n  batch_size: 48\n  n_epochs: 3\n  learning_rate: lin_1e-3\n  clip_range_vf: 0.3\n  target_kl: 0.5\n"
    );
    RunConfig::from_yaml(&y, &[], "test").unwrap()
}

fn make(run: &RunConfig) -> Result<Box<dyn rl_training_core::Env>, rl_training_core::EnvError> {
    rl_training_envs::make_training_env(&run.env_id, &run.env_kwargs, &run.normalize, 0.99)
}

fn check(env: &str, extra: &str, tag: &str) {
    check_run(cfg(env, extra), tag);
}

fn check_run(run: RunConfig, tag: &str) {
    let dev = Device::flex();
    let steps = rl_training_envs::testing::assert_resumes_bit_identically(
        (4, 5),
        || Ppo::new(&run, &make, &dev).unwrap(),
        |dir| Ppo::load(dir, &make, &dev).unwrap(),
        |a| module_tensors(a.policy()),
        &format!("ppo-{tag}"),
    );
    assert_eq!(steps, 4 * 64 * 3);
}

#[test]
fn resume_pendulum_gsde_bit_identical() {
    // gSDE draws its exploration matrices from the checkpointed action generator at the start
    // of each rollout and every 4 steps.
    let mut run = cfg("Pendulum-v1", "");
    run.algo_kwargs
        .insert("use_sde".into(), serde_json::Value::Bool(true));
    run.algo_kwargs
        .insert("sde_sample_freq".into(), serde_json::Value::from(4));
    check_run(run, "pendulum-gsde");
}

#[test]
fn resume_with_three_lockstep_env_runners_bit_identical() {
    // `num_env_runners: 3`: each runner steps one of the three envs with its own generators
    // (gSDE matrices included), which the checkpoint keeps.
    let mut run = cfg("Pendulum-v1", "normalize: {obs: true}\n");
    for (k, v) in [("num_env_runners", 3), ("sde_sample_freq", 4)] {
        run.algo_kwargs.insert(k.into(), serde_json::Value::from(v));
    }
    run.algo_kwargs
        .insert("use_sde".into(), serde_json::Value::Bool(true));
    check_run(run, "pendulum-runners");
}

#[test]
fn env_runners_that_cannot_share_the_envs_evenly_are_refused() {
    let mut run = cfg("CartPole-v1", "");
    run.algo_kwargs
        .insert("num_env_runners".into(), serde_json::Value::from(2));
    let e = Ppo::new(&run, &make, &Device::flex()).err().unwrap();
    let msg = e.to_string();
    assert!(
        msg.contains("num_env_runners") && msg.contains("n_envs = 3"),
        "{msg}"
    );
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

#[test]
fn resume_frozenlake_discrete_obs_bit_identical() {
    check("FrozenLake-v1", "", "frozenlake");
}

#[test]
fn learner_weights_roundtrip() {
    use rl_training_core::algorithm::Learner;
    let run = cfg("CartPole-v1", "");
    let mut a = Ppo::new(&run, &make, &Device::flex()).unwrap();
    a.train().unwrap();
    let b = Ppo::new(&cfg("CartPole-v1", "").clone(), &make, &Device::flex()).unwrap();
    assert_ne!(
        a.learner().weights(),
        b.learner().weights(),
        "training changed the weights"
    );
    let mut learner = rl_training_ppo::PpoLearner::new(
        a.config().clone(),
        b.policy().clone(),
        Device::flex().autodiff(),
        rl_training_core::Rng::seed_from(0),
    );
    learner.set_weights(&a.learner().weights()).unwrap();
    assert_eq!(learner.weights(), a.learner().weights());
    let mut wrong = a.learner().weights();
    wrong.0.remove("value_net.bias");
    let e = learner.set_weights(&wrong).unwrap_err().to_string();
    assert!(e.contains("value_net.bias"), "{e}");
}
