//! Bad input gets an error that names it: config keys and values, corrupt checkpoints, a
//! diverging loss.

use rl_training_a2c::{A2c, A2cConfig};
use rl_training_core::algorithm::{Algorithm, RlError};
use rl_training_core::burn::tensor::Device;
use rl_training_core::config::{AlgoConfig, RunConfig};
use rl_training_core::env::{Env, EnvError};
use rl_training_core::optim::OptimizerKind;

fn run(extra_kwargs: &str) -> RunConfig {
    let y = format!(
        "algorithm: a2c\nenv_id: CartPole-v1\ntotal_timesteps: 1000\nn_envs: 2\nalgo_kwargs:\n  n_steps: 5\n{extra_kwargs}"
    );
    RunConfig::from_yaml(&y, &[], "test.yaml").unwrap()
}

fn make(run: &RunConfig) -> Result<Box<dyn Env>, EnvError> {
    rl_training_envs::make_training_env(&run.env_id, &run.env_kwargs, &run.normalize, 0.99)
}

#[test]
fn defaults_are_the_seed_table_and_sb3() {
    let c = A2cConfig::default();
    assert_eq!(
        (
            c.learning_rate.initial(),
            c.n_steps,
            c.gamma,
            c.gae_lambda,
            c.ent_coef,
            c.vf_coef,
            c.max_grad_norm,
            c.normalize_advantage,
        ),
        (7e-4, 5, 0.99, 1.0, 0.01, 0.5, Some(0.5), false)
    );
    assert_eq!(
        c.optimizer(),
        OptimizerKind::RmsProp {
            alpha: 0.99,
            eps: 1e-5
        }
    );
}

#[test]
fn config_errors_name_the_key() {
    let e = A2cConfig::from_kwargs(&run("  n_stepz: 3\n").algo_kwargs)
        .unwrap_err()
        .to_string();
    assert!(e.contains("n_stepz") && e.contains("n_steps"), "{e}");
    let e = A2cConfig::from_kwargs(&run("  gae_lambda: 2\n").algo_kwargs)
        .unwrap_err()
        .to_string();
    assert!(e.contains("gae_lambda") && e.contains("[0, 1]"), "{e}");
    let e = A2cConfig::from_kwargs(&run("  rms_prop_eps: 0\n").algo_kwargs)
        .unwrap_err()
        .to_string();
    assert!(e.contains("rms_prop_eps"), "{e}");
    let e = A2cConfig::from_kwargs(&run("  sde_sample_freq: 0\n").algo_kwargs)
        .unwrap_err()
        .to_string();
    assert!(e.contains("sde_sample_freq"), "{e}");
    // gSDE needs continuous actions.
    let e = A2c::new(&run("  use_sde: true\n"), &make, &Device::flex())
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("algo_kwargs.use_sde") && e.contains("Box"),
        "{e}"
    );
    // RLlib names are aliases.
    let kw = RunConfig::from_yaml(
        "algorithm: a2c\nenv_id: CartPole-v1\ntotal_timesteps: 1\nalgo_kwargs: {lr: 0.01, lambda_: 0.9, grad_clip: 1.0, entropy_coeff: 0.02, vf_loss_coeff: 0.25, rollout_fragment_length: 7}\n",
        &[],
        "t",
    )
    .unwrap()
    .algo_kwargs;
    let c = A2cConfig::from_kwargs(&kw).unwrap();
    assert_eq!(
        (
            c.learning_rate.initial(),
            c.gae_lambda,
            c.max_grad_norm,
            c.ent_coef,
            c.vf_coef,
            c.n_steps
        ),
        (0.01, 0.9, Some(1.0), 0.02, 0.25, 7)
    );
}

#[test]
fn corrupt_checkpoint_names_the_file() {
    let mut p = A2c::new(&run(""), &make, &Device::flex()).unwrap();
    p.train().unwrap();
    let dir = std::env::temp_dir().join(format!("rl-a2c-bad-ckpt-{}", std::process::id()));
    p.save(&dir).unwrap();
    let opt = dir.join("optimizer.safetensors");
    let bytes = std::fs::read(&opt).unwrap();
    std::fs::write(&opt, &bytes[..bytes.len() / 2]).unwrap();
    let e = A2c::load(&dir, &make, &Device::flex())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("optimizer.safetensors"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn diverging_loss_stops_with_step_and_metric() {
    let mut p = A2c::new(
        &run("  learning_rate: 1.0e30\n  max_grad_norm: null\n"),
        &make,
        &Device::flex(),
    )
    .unwrap();
    let err = (0..50).find_map(|_| p.train().err());
    match err {
        Some(RlError::NonFinite { step, metric, .. }) => {
            assert!(step > 0 && metric.starts_with("losses/"), "{step} {metric}");
        }
        other => panic!("expected a NonFinite error, got {other:?}"),
    }
}
