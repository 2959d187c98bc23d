//! Resume with `store_buffer_in_checkpoints`: N iterations, save, load, M more == N + M
//! uninterrupted, bit for bit (weights, target, every metric except wall-clock ones), for
//! plain DQN and for full Rainbow (PER priorities, n-step, noisy nets, C51).
//! Without the stored buffer, loading warns.

use rl_training_core::algorithm::Algorithm;
use rl_training_core::burn::tensor::Device;
use rl_training_core::config::RunConfig;
use rl_training_core::logger::Metrics;
use rl_training_core::params::module_tensors;
use rl_training_dqn::Dqn;
use rl_training_envs::testing::training_env;

fn cfg(extra: &str) -> RunConfig {
    let y = format!(
        "algorithm: dqn\nenv_id: CartPole-v1\ntotal_timesteps: 3000\nn_envs: 2\nseed: 3\nalgo_kwargs:\n  learning_starts: 100\n  train_freq: 32\n  gradient_steps: 8\n  batch_size: 16\n  buffer_size: 400\n  target_update_interval: 50\n  learning_rate: lin_1e-3\n  policy_kwargs: {{net_arch: [16]}}\n{extra}"
    );
    RunConfig::from_yaml(&y, &[], "test").unwrap()
}

const RAINBOW: &str = "  double_q: true\n  dueling: true\n  hiddens: [8]\n  n_step: [1, 3]\n  prioritized_replay: true\n  num_atoms: 11\n  v_min: 0\n  v_max: 50\n  noisy: true\n  epsilon: [[0, 0.5], [1000, 0.0]]\n";

fn strip(m: &Metrics) -> Vec<(String, u64)> {
    m.iter()
        .filter(|(k, _)| !k.starts_with("time/") && *k != "charts/SPS")
        .map(|(k, v)| (k.clone(), v.to_bits()))
        .collect()
}

fn check(extra: &str, tag: &str) {
    // The buffer wraps (400 / 2 rows) before the checkpoint.
    check_with(extra, tag, (9, 6));
}

fn check_with(extra: &str, tag: &str, (n, m): (usize, usize)) {
    let run = cfg(&format!("  store_buffer_in_checkpoints: true\n{extra}"));
    let dev = Device::flex();
    let mut a = Dqn::new(&run, &training_env, &dev).unwrap();
    let metrics_a: Vec<_> = (0..n + m).map(|_| strip(&a.train().unwrap())).collect();
    let mut b = Dqn::new(&run, &training_env, &dev).unwrap();
    let mut metrics_b: Vec<_> = (0..n).map(|_| strip(&b.train().unwrap())).collect();
    let dir = std::env::temp_dir().join(format!("rl-dqn-resume-{}-{tag}", std::process::id()));
    b.save(&dir).unwrap();
    drop(b);
    let mut c = Dqn::load(&dir, &training_env, &dev).unwrap();
    assert!(c.warnings().is_empty(), "{:?}", c.warnings());
    assert_eq!(c.replay().len(), 400);
    // Runners' chunks go to one linked column.
    assert_eq!(c.replay().is_linked(), extra.contains("num_env_runners"));
    metrics_b.extend((0..m).map(|_| strip(&c.train().unwrap())));
    assert_eq!(metrics_a, metrics_b, "{tag}: metrics differ after resume");
    assert_eq!(
        module_tensors(a.learner().online()),
        module_tensors(c.learner().online())
    );
    assert_eq!(
        module_tensors(a.learner().target()),
        module_tensors(c.learner().target())
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn resume_with_stored_buffer_is_bit_identical() {
    check("", "plain");
}

#[test]
fn resume_rainbow_with_stored_buffer_is_bit_identical() {
    check(RAINBOW, "rainbow");
}

#[test]
fn resume_with_two_lockstep_env_runners_bit_identical() {
    // Each runner steps one of the 2 envs; an iteration stores one runner's chunk of 32
    // steps in the linked replay (n-step ranges and priorities included), which wraps
    // (400 transitions) before the checkpoint.
    let runners = "  num_env_runners: 2\n  n_step: [1, 3]\n  prioritized_replay: true\n";
    check_with(runners, "runners", (15, 6));
}

#[test]
fn disagreeing_buffer_flag_warns() {
    let dev = Device::flex();
    let mut a = Dqn::new(&cfg(""), &training_env, &dev).unwrap();
    for _ in 0..4 {
        a.train().unwrap();
    }
    let dir = std::env::temp_dir().join(format!("rl-dqn-flag-{}", std::process::id()));
    a.save(&dir).unwrap();
    assert!(!dir.join("replay.safetensors").exists());
    // Turn the flag on in the saved config: the checkpoint has no buffer to restore.
    let cfg_file = dir.join("config.yaml");
    let text = std::fs::read_to_string(&cfg_file).unwrap();
    let ck = rl_training_core::checkpoint::read_checkpoint(&dir).unwrap();
    let files: Vec<(&str, Vec<u8>)> = [
        "model.safetensors",
        "target.safetensors",
        "optimizer.safetensors",
        "state.json",
    ]
    .into_iter()
    .map(|f| (f, ck.file(f).unwrap().to_vec()))
    .chain([(
        "config.yaml",
        text.replace(
            "store_buffer_in_checkpoints: false",
            "store_buffer_in_checkpoints: true",
        )
        .into_bytes(),
    )])
    .collect();
    rl_training_core::checkpoint::write_checkpoint(&dir, "dqn", &files).unwrap();
    let c = Dqn::load(&dir, &training_env, &dev).unwrap();
    assert_eq!(c.warnings().len(), 1);
    assert!(
        c.warnings()[0].contains("empty buffer"),
        "{:?}",
        c.warnings()
    );
    assert!(c.replay().is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}
