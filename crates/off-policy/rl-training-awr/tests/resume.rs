//! Resume with the stored replay: N iterations, save, load, M more == N + M uninterrupted,
//! bit for bit, for discrete and continuous actions.

use rl_training_awr::Awr;
use rl_training_core::algorithm::Algorithm;
use rl_training_core::burn::tensor::Device;
use rl_training_core::config::RunConfig;
use rl_training_core::logger::Metrics;
use rl_training_core::params::module_tensors;
use rl_training_envs::testing::training_env;

fn strip(m: &Metrics) -> Vec<(String, u64)> {
    m.iter()
        .filter(|(k, _)| !k.starts_with("time/") && *k != "charts/SPS")
        .map(|(k, v)| (k.clone(), v.to_bits()))
        .collect()
}

fn check(env: &str) {
    let y = format!(
        "algorithm: awr\nenv_id: {env}\ntotal_timesteps: 5000\nn_envs: 2\nseed: 4\nalgo_kwargs:\n  n_steps: 64\n  buffer_size: 300\n  batch_size: 32\n  value_steps: 5\n  policy_steps: 7\n  learning_rate: lin_1e-3\n  store_buffer_in_checkpoints: true\n  policy_kwargs: {{net_arch: [16]}}\n"
    );
    let run = RunConfig::from_yaml(&y, &[], "test").unwrap();
    let dev = Device::flex();
    let (n, m) = (4, 3);
    let mut a = Awr::new(&run, &training_env, &dev).unwrap();
    let ma: Vec<_> = (0..n + m).map(|_| strip(&a.train().unwrap())).collect();
    let mut b = Awr::new(&run, &training_env, &dev).unwrap();
    let mut mb: Vec<_> = (0..n).map(|_| strip(&b.train().unwrap())).collect();
    let dir = std::env::temp_dir().join(format!("rl-awr-resume-{}-{env}", std::process::id()));
    b.save(&dir).unwrap();
    drop(b);
    let mut c = Awr::load(&dir, &training_env, &dev).unwrap();
    assert_eq!(c.replay().len(), 300, "the wrapped replay came back");
    mb.extend((0..m).map(|_| strip(&c.train().unwrap())));
    assert_eq!(ma, mb, "{env}: metrics differ after resume");
    assert_eq!(
        module_tensors(a.learner().policy()),
        module_tensors(c.learner().policy())
    );
    assert_eq!(
        module_tensors(a.learner().value()),
        module_tensors(c.learner().value())
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn resume_cartpole_bit_identical() {
    check("CartPole-v1");
}

#[test]
fn resume_pendulum_bit_identical() {
    check("Pendulum-v1");
}

#[test]
fn rejects_bad_configs_naming_the_field() {
    for (kw, want) in [
        ("  beta: 0\n", "beta"),
        ("  max_weight: -1\n", "max_weight"),
        ("  n_stepz: 3\n", "n_stepz"),
        ("  policy_kwargs: {shared: true}\n", "shared"),
    ] {
        let y =
            format!("algorithm: awr\nenv_id: CartPole-v1\ntotal_timesteps: 10\nalgo_kwargs:\n{kw}");
        let run = RunConfig::from_yaml(&y, &[], "test").unwrap();
        let e = Awr::new(&run, &training_env, &Device::flex())
            .err()
            .expect("rejected")
            .to_string();
        assert!(e.contains(want), "{kw:?}: {e}");
    }
}
