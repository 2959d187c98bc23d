//! Resume (N iterations, save, load, M more == N + M uninterrupted, bit for bit) for MARWIL
//! and BC, discrete and continuous; bad configs and data rejected with errors naming them.

use rl_training_core::burn::tensor::Device;
use rl_training_core::config::RunConfig;
use rl_training_core::params::module_tensors;
use rl_training_envs::testing::{assert_resumes_bit_identically, training_env};
use std::path::PathBuf;

fn data(env: &str, rewards: bool, ext: &str) -> PathBuf {
    let name = format!("marwil-{env}-{rewards}.{ext}");
    rl_training_offline_testing::untrained_data(
        env,
        &rl_training_offline_testing::tmp_file(&name),
        rewards,
    )
}

fn run(algo: &str, env: &str, input: &std::path::Path, kwargs: &str) -> RunConfig {
    // A key given twice is a YAML error, so `kwargs` may replace the default policy_kwargs.
    let policy = if kwargs.contains("policy_kwargs") {
        ""
    } else {
        ", policy_kwargs: {net_arch: [16]}"
    };
    let y = format!(
        "algorithm: {algo}\nenv_id: {env}\ntotal_timesteps: 100000\nseed: 3\noffline_data: {{input: {}, shuffle_buffer_size: 100}}\nalgo_kwargs: {{batch_size: 32, learning_rate: lin_1e-3{policy}{kwargs}}}\n",
        input.display()
    );
    RunConfig::from_yaml(&y, &[], "test").unwrap()
}

#[test]
fn marwil_and_bc_resume_bit_identically() {
    let dev = Device::flex();
    for env in ["CartPole-v1", "Pendulum-v1"] {
        let p = data(env, true, "parquet");
        let r = run(
            "marwil",
            env,
            &p,
            ", moving_average_sqd_adv_norm_update_rate: 0.1, bc_logstd_coef: 0.1",
        );
        let steps = assert_resumes_bit_identically(
            (5, 4),
            || rl_training_marwil::Marwil::new(&r, &training_env, &dev).unwrap(),
            |d| rl_training_marwil::Marwil::load(d, &training_env, &dev).unwrap(),
            |a| module_tensors(a.learner().model()),
            &format!("marwil-{env}"),
        );
        assert_eq!(steps, 5 * 32);
        let r = run("bc", env, &p, "");
        assert_resumes_bit_identically(
            (5, 4),
            || rl_training_bc::new(&r, &training_env, &dev).unwrap(),
            |d| rl_training_bc::load(d, &training_env, &dev).unwrap(),
            |a| module_tensors(a.learner().marwil().model()),
            &format!("bc-{env}"),
        );
    }
}

fn err(r: &RunConfig) -> String {
    let e = if r.algorithm == "bc" {
        rl_training_bc::new(r, &training_env, &Device::flex()).err()
    } else {
        rl_training_marwil::Marwil::new(r, &training_env, &Device::flex()).err()
    };
    e.expect("rejected").to_string()
}

#[test]
fn bad_configs_and_data_are_named() {
    let p = data("CartPole-v1", true, "npz");
    for (kw, want) in [
        (", beta: -1", "beta"),
        (", vf_coeff: -1", "vf_coef"),
        (", n_stepz: 3", "n_stepz"),
        (", policy_kwargs: {shared: true}", "shared"),
    ] {
        let e = err(&run("marwil", "CartPole-v1", &p, kw));
        assert!(e.contains(want), "{kw:?}: {e}");
    }
    // BC's table has no beta.
    let e = err(&run("bc", "CartPole-v1", &p, ", beta: 1.0"));
    assert!(e.contains("beta"), "{e}");
    // Data for another env.
    let e = err(&run("marwil", "Pendulum-v1", &p, ""));
    assert!(
        e.contains(".npz") && e.contains("obs") && e.contains("[4]") && e.contains("[3]"),
        "{e}"
    );
    // MARWIL needs rewards; BC does not.
    let q = data("CartPole-v1", false, "npz");
    let e = err(&run("marwil", "CartPole-v1", &q, ""));
    assert!(e.contains("rewards"), "{e}");
    rl_training_bc::new(
        &run("bc", "CartPole-v1", &q, ""),
        &training_env,
        &Device::flex(),
    )
    .unwrap();
    // No offline_data at all.
    let r = RunConfig::from_yaml(
        "algorithm: bc\nenv_id: CartPole-v1\ntotal_timesteps: 10\n",
        &[],
        "t",
    )
    .unwrap();
    assert!(err(&r).contains("offline_data"));
    // A missing file.
    let e = err(&run(
        "bc",
        "CartPole-v1",
        &PathBuf::from("/nonexistent/x.parquet"),
        "",
    ));
    assert!(e.contains("/nonexistent/x.parquet"), "{e}");
}
