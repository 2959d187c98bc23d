//! Resume with `store_buffer_in_checkpoints`: N iterations, save, load, M more == N + M
//! uninterrupted, bit for bit, for continuous and discrete SAC (the update runs parts of
//! itself on two threads; the result must not depend on scheduling).

use rl_training_core::algorithm::Algorithm;
use rl_training_core::burn::tensor::Device;
use rl_training_core::config::RunConfig;
use rl_training_core::logger::Metrics;
use rl_training_core::params::module_tensors;
use rl_training_envs::testing::training_env;
use rl_training_sac::Sac;

fn cfg(env: &str, extra: &str) -> RunConfig {
    let y = format!(
        "algorithm: sac\nenv_id: {env}\ntotal_timesteps: 3000\nn_envs: 2\nseed: 5\nalgo_kwargs:\n  learning_starts: 40\n  train_freq: 8\n  gradient_steps: 4\n  batch_size: 16\n  buffer_size: 200\n  store_buffer_in_checkpoints: true\n  actor_lr: lin_1e-3\n  policy_kwargs: {{net_arch: [16]}}\n{extra}"
    );
    RunConfig::from_yaml(&y, &[], "test").unwrap()
}

fn strip(m: &Metrics) -> Vec<(String, u64)> {
    m.iter()
        .filter(|(k, _)| !k.starts_with("time/") && *k != "charts/SPS")
        .map(|(k, v)| (k.clone(), v.to_bits()))
        .collect()
}

fn check(env: &str, extra: &str, tag: &str) {
    let run = cfg(env, extra);
    let dev = Device::flex();
    let (n, m) = (16, 6); // the buffer wraps before the checkpoint
    let mut a = Sac::new(&run, &training_env, &dev).unwrap();
    let metrics_a: Vec<_> = (0..n + m).map(|_| strip(&a.train().unwrap())).collect();
    let mut b = Sac::new(&run, &training_env, &dev).unwrap();
    let mut metrics_b: Vec<_> = (0..n).map(|_| strip(&b.train().unwrap())).collect();
    let dir = std::env::temp_dir().join(format!("rl-sac-resume-{}-{tag}", std::process::id()));
    b.save(&dir).unwrap();
    drop(b);
    let mut c = Sac::load(&dir, &training_env, &dev).unwrap();
    assert!(c.warnings().is_empty(), "{:?}", c.warnings());
    assert_eq!(c.replay().len(), 200);
    metrics_b.extend((0..m).map(|_| strip(&c.train().unwrap())));
    assert_eq!(metrics_a, metrics_b, "{tag}: metrics differ after resume");
    let l = (a.learner(), c.learner());
    assert_eq!(module_tensors(l.0.actor()), module_tensors(l.1.actor()));
    assert_eq!(module_tensors(l.0.critic()), module_tensors(l.1.critic()));
    assert_eq!(
        module_tensors(l.0.critic_target()),
        module_tensors(l.1.critic_target())
    );
    assert_eq!(l.0.alpha().to_bits(), l.1.alpha().to_bits());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn resume_continuous_bit_identical() {
    check(
        "Pendulum-v1",
        "  n_step: 2\n  prioritized_replay: true\n",
        "pendulum",
    );
}

#[test]
fn resume_discrete_bit_identical() {
    check(
        "CartPole-v1",
        "  target_entropy: 0.3\n  ent_coef: auto_0.5\n",
        "cartpole",
    );
}

#[test]
fn rejects_bad_configs_naming_the_field() {
    for (kw, want) in [
        ("  ent_coef: autox\n", "ent_coef"),
        ("  target_entropy: foo\n", "target_entropy"),
        ("  tau: 2\n", "tau"),
        ("  use_sde: true\n", "use_sde"),
        ("  actor_lrr: 0.1\n", "actor_lrr"),
    ] {
        let y =
            format!("algorithm: sac\nenv_id: Pendulum-v1\ntotal_timesteps: 10\nalgo_kwargs:\n{kw}");
        let run = RunConfig::from_yaml(&y, &[], "test").unwrap();
        let e = Sac::new(&run, &training_env, &Device::flex())
            .err()
            .expect("rejected")
            .to_string();
        assert!(e.contains(want), "{kw:?}: {e}");
    }
}
