//! Resume: N iterations, save, load, M more == N + M uninterrupted, bit for bit (weights and
//! every metric except wall-clock ones). The envs' LSTM states mid-episode are part of the
//! checkpoint: without them the resumed run would diverge.

use rl_training_core::burn::tensor::Device;
use rl_training_core::config::RunConfig;
use rl_training_core::params::module_tensors;
use rl_training_recurrent_ppo::RecurrentPpo;

fn make(run: &RunConfig) -> Result<Box<dyn rl_training_core::Env>, rl_training_core::EnvError> {
    rl_training_envs::make_training_env(&run.env_id, &run.env_kwargs, &run.normalize, 0.99)
}

fn check(env: &str, extra: &str, kwargs: &str, tag: &str) {
    let y = format!(
        "algorithm: recurrent_ppo\nenv_id: {env}\ntotal_timesteps: 3000\nn_envs: 2\nseed: 4\n{extra}algo_kwargs:\n  n_steps: 48\n  batch_size: 32\n  n_epochs: 2\n  lstm_hidden_size: 16\n  sequence_length: 8\n  learning_rate: lin_1e-3\n{kwargs}"
    );
    let run = RunConfig::from_yaml(&y, &[], "test").unwrap();
    let dev = Device::flex();
    let steps = rl_training_envs::testing::assert_resumes_bit_identically(
        (3, 3),
        || RecurrentPpo::new(&run, &make, &dev).unwrap(),
        |dir| RecurrentPpo::load(dir, &make, &dev).unwrap(),
        |a| module_tensors(a.policy()),
        &format!("recurrent-ppo-{tag}"),
    );
    assert_eq!(steps, 3 * 48 * 2);
}

#[test]
fn resume_cartpole_novel_bit_identical() {
    check("CartPoleNoVel-v1", "", "", "cartpole");
}

#[test]
fn resume_pendulum_novel_gsde_two_layers_bit_identical() {
    check(
        "PendulumNoVel-v1",
        "normalize: {obs: true, reward: true}\n",
        "  use_sde: true\n  sde_sample_freq: 4\n  n_lstm_layers: 2\n",
        "pendulum",
    );
}

#[test]
fn checkpoint_holds_the_envs_lstm_states() {
    let y = "algorithm: recurrent_ppo\nenv_id: CartPoleNoVel-v1\ntotal_timesteps: 3000\nn_envs: 2\nalgo_kwargs: {n_steps: 16, lstm_hidden_size: 8}\n";
    let run = RunConfig::from_yaml(y, &[], "test").unwrap();
    let dev = Device::flex();
    let mut a = RecurrentPpo::new(&run, &make, &dev).unwrap();
    rl_training_core::algorithm::Algorithm::train(&mut a).unwrap();
    let dir = std::env::temp_dir().join(format!("rl-recurrent-states-{}", std::process::id()));
    rl_training_core::algorithm::Algorithm::save(&a, &dir).unwrap();
    let ck = rl_training_core::checkpoint::read_checkpoint(&dir).unwrap();
    let state: serde_json::Value = serde_json::from_slice(ck.file("state.json").unwrap()).unwrap();
    let states = state["collector"]["states"].as_array().unwrap();
    // 2 envs × (actor + critic) × (cell + hidden) × 8 units, not all zero.
    assert_eq!(states.len(), 2 * 2 * 2 * 8);
    assert!(states.iter().any(|v| v.as_f64().unwrap() != 0.0));
    // A checkpoint whose states do not fit the run is refused, naming the cause.
    let mut bad = state.clone();
    bad["collector"]["states"] = serde_json::json!([0.0, 1.0]);
    let files: Vec<(&str, Vec<u8>)> = ["config.yaml", "model.safetensors", "optimizer.safetensors"]
        .into_iter()
        .map(|f| (f, ck.file(f).unwrap().to_vec()))
        .chain([("state.json", serde_json::to_vec(&bad).unwrap())])
        .collect();
    rl_training_core::checkpoint::write_checkpoint(&dir, "recurrent_ppo", &files).unwrap();
    let msg = RecurrentPpo::load(&dir, &make, &dev)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(msg.contains("recurrent-state"), "{msg}");
    let _ = std::fs::remove_dir_all(&dir);
}
