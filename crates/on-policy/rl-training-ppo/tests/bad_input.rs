//! Bad input gets an error that names it: config keys, types and values, corrupt checkpoints,
//! NaN observations from an env, and a diverging loss.

use rl_training_core::algorithm::{Algorithm, RlError};
use rl_training_core::burn::tensor::Device;
use rl_training_core::config::AlgoConfig;
use rl_training_core::config::RunConfig;
use rl_training_core::env::{Env, EnvError, Kwargs};
use rl_training_envs::faults::{Fault, FaultInjection};
use rl_training_ppo::{Ppo, PpoConfig};

fn run(extra_kwargs: &str) -> RunConfig {
    let y = format!(
        "algorithm: ppo\nenv_id: CartPole-v1\ntotal_timesteps: 1000\nn_envs: 2\nalgo_kwargs:\n  n_steps: 16\n  batch_size: 32\n  n_epochs: 1\n{extra_kwargs}"
    );
    RunConfig::from_yaml(&y, &[], "test.yaml").unwrap()
}

fn make(run: &RunConfig) -> Result<Box<dyn Env>, EnvError> {
    rl_training_envs::make_training_env(&run.env_id, &run.env_kwargs, &run.normalize, 0.99)
}

#[test]
fn config_errors_name_the_key() {
    let e = PpoConfig::from_kwargs(&run("  n_stepz: 3\n").algo_kwargs).unwrap_err();
    assert!(
        e.field == "algo_kwargs.n_stepz"
            && e.message.contains("n_stepz")
            && e.message.contains("n_steps")
            && e.message.contains("batch_size"),
        "{e}"
    );
    let e = PpoConfig::from_kwargs(&run("  gamma: high\n").algo_kwargs).unwrap_err();
    assert_eq!(e.field, "algo_kwargs.gamma", "{e}");
    let e = PpoConfig::from_kwargs(&run("  gamma: 1.5\n").algo_kwargs).unwrap_err();
    assert!(
        e.field == "algo_kwargs.gamma" && e.message.contains("[0, 1]"),
        "{e}"
    );
    let e = PpoConfig::from_kwargs(&run("  learning_rate: fast\n").algo_kwargs).unwrap_err();
    assert!(
        e.field == "algo_kwargs.learning_rate" && e.message.contains("fast"),
        "{e}"
    );
    let e =
        PpoConfig::from_kwargs(&run("  policy_kwargs: {activation_fn: sigmoidish}\n").algo_kwargs)
            .unwrap_err();
    assert_eq!(e.field, "algo_kwargs.policy_kwargs.activation_fn", "{e}");
    // RLlib names are aliases.
    let e = PpoConfig::from_kwargs(&run("  num_epochs: 4\n").algo_kwargs).unwrap_err();
    assert!(e.message.contains("duplicate field `n_epochs`"), "{e}");
    let kw = RunConfig::from_yaml("algorithm: ppo\nenv_id: CartPole-v1\ntotal_timesteps: 1\nalgo_kwargs: {lr: 0.01, lambda_: 0.9, grad_clip: 1.0, num_epochs: 4, clip_param: 0.3}\n", &[], "t").unwrap().algo_kwargs;
    let c = PpoConfig::from_kwargs(&kw).unwrap();
    assert_eq!(
        (
            c.learning_rate.initial(),
            c.gae_lambda,
            c.max_grad_norm,
            c.n_epochs,
            c.clip_range.initial()
        ),
        (0.01, 0.9, Some(1.0), 4, 0.3)
    );
    let mut r = run("");
    r.algorithm = "ppo".into();
    r.n_envs = 0;
    let e = Ppo::new(&r, &make, &Device::flex())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("n_envs"), "{e}");
}

#[test]
fn corrupt_checkpoint_names_the_file() {
    let r = run("");
    let mut p = Ppo::new(&r, &make, &Device::flex()).unwrap();
    p.train().unwrap();
    let dir = std::env::temp_dir().join(format!("rl-bad-ckpt-{}", std::process::id()));
    p.save(&dir).unwrap();
    let model = dir.join("model.safetensors");
    let bytes = std::fs::read(&model).unwrap();
    std::fs::write(&model, &bytes[..bytes.len() / 2]).unwrap();
    let e = Ppo::load(&dir, &make, &Device::flex())
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("model.safetensors") && e.contains("truncated"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    let e = Ppo::load(&dir, &make, &Device::flex())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("checkpoint.json"), "{e}");
}

#[test]
fn nan_observation_is_an_error_naming_the_env() {
    let r = run("");
    // Every env returns a NaN observation on its 5th step.
    let make_nan = |_: &RunConfig| -> Result<Box<dyn Env>, EnvError> {
        let inner = rl_training_envs::make("CartPole-v1", &Kwargs::new())?;
        Ok(Box::new(FaultInjection::new(
            inner,
            Some(Fault::NanObservation),
            5,
            true,
        )))
    };
    let mut p = Ppo::new(&r, &make_nan, &Device::flex()).unwrap();
    let e = p.train().unwrap_err().to_string();
    assert!(
        e.contains("env 0 (FaultInjection-v0)")
            && e.contains("at step 5")
            && e.contains("observation element 0 is NaN"),
        "{e}"
    );
}

#[test]
fn diverging_loss_stops_with_step_and_metric() {
    let r = run("  learning_rate: 1.0e30\n  max_grad_norm: null\n  normalize_advantage: false\n");
    let mut p = Ppo::new(&r, &make, &Device::flex()).unwrap();
    let mut err = None;
    for _ in 0..20 {
        match p.train() {
            Ok(_) => {}
            Err(e) => {
                err = Some(e);
                break;
            }
        }
    }
    match err {
        Some(RlError::NonFinite { step, metric, .. }) => {
            assert!(step > 0 && metric.starts_with("losses/"), "{step} {metric}");
        }
        other => panic!("expected a NonFinite error, got {other:?}"),
    }
}

#[test]
fn invalid_action_is_rejected_by_the_vector_env() {
    let envs: Vec<Box<dyn Env>> =
        vec![rl_training_envs::make("CartPole-v1", &Default::default()).unwrap()];
    let mut v = rl_training_core::VecEnv::new(envs).unwrap();
    v.reset(Some(0)).unwrap();
    let e = v.step(&[2.0]).unwrap_err().to_string();
    assert!(
        e.contains("CartPole-v1") && e.contains("invalid action"),
        "{e}"
    );
    let e = v.step(&[0.0, 1.0]).unwrap_err().to_string();
    assert!(e.contains("expected 1 values"), "{e}");
}

#[test]
fn shared_actor_critic_keys_and_own_keys_in_one_flat_table() {
    // `use_sde`, `sde_sample_freq` and `policy_kwargs` are `ActorCriticKeys`, read apart from
    // PPO's own keys; both parts strictly.
    let c = PpoConfig::from_kwargs(
        &run("  use_sde: true\n  sde_sample_freq: 4\n  policy_kwargs: {net_arch: [8]}\n")
            .algo_kwargs,
    )
    .unwrap();
    assert!(c.actor_critic.use_sde);
    assert_eq!((c.actor_critic.sde_sample_freq, c.n_steps), (4, 16));
    // The saved config is one flat table with canonical names and reads back the same.
    let saved = serde_json::to_value(&c).unwrap();
    assert_eq!(saved["use_sde"], serde_json::json!(true));
    assert!(saved.get("actor_critic").is_none());
    let back = PpoConfig::from_kwargs(saved.as_object().unwrap()).unwrap();
    assert_eq!(back, c);
    let e = PpoConfig::from_kwargs(&run("  use_sde: often\n").algo_kwargs).unwrap_err();
    assert_eq!(e.field, "algo_kwargs.use_sde", "{e}");
    let e = PpoConfig::from_kwargs(&run("  sde_sample_freq: 0\n").algo_kwargs).unwrap_err();
    assert_eq!(e.field, "algo_kwargs.sde_sample_freq", "{e}");
}
