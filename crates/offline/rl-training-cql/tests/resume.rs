//! Resume (N iterations, save, load, M more == N + M uninterrupted, bit for bit), continuous
//! (across the switch from behaviour cloning, Lagrangian weight on) and discrete; bad configs
//! and data rejected with errors naming them.

use rl_training_core::burn::tensor::Device;
use rl_training_core::config::RunConfig;
use rl_training_core::params::module_tensors;
use rl_training_envs::testing::{assert_resumes_bit_identically, training_env};
use std::path::PathBuf;

fn data(env: &str, rewards: bool, tag: &str) -> PathBuf {
    let name = format!("cql-{tag}-{env}-{rewards}.parquet");
    rl_training_offline_testing::untrained_data(
        env,
        &rl_training_offline_testing::tmp_file(&name),
        rewards,
    )
}

fn run(env: &str, input: &std::path::Path, kwargs: &str) -> RunConfig {
    // A key given twice is a YAML error, so `kwargs` may replace the default num_actions.
    let num_actions = if kwargs.contains("num_actions") {
        ""
    } else {
        "num_actions: 3, "
    };
    let y = format!(
        "algorithm: cql\nenv_id: {env}\ntotal_timesteps: 100000\nseed: 5\noffline_data: {{input: {}, shuffle_buffer_size: 150}}\nalgo_kwargs: {{batch_size: 16, {num_actions}bc_iters: 4, learning_rate: lin_1e-3, policy_kwargs: {{net_arch: [16]}}{kwargs}}}\n",
        input.display()
    );
    RunConfig::from_yaml(&y, &[], "test").unwrap()
}

#[test]
fn cql_resumes_bit_identically() {
    let dev = Device::flex();
    for (env, kw) in [
        (
            "Pendulum-v1",
            ", lagrangian: true, deterministic_backup: false",
        ),
        ("CartPole-v1", ""),
    ] {
        let p = data(env, true, "resume");
        let r = run(env, &p, kw);
        let steps = assert_resumes_bit_identically(
            (3, 4),
            || rl_training_cql::Cql::new(&r, &training_env, &dev).unwrap(),
            |d| rl_training_cql::Cql::load(d, &training_env, &dev).unwrap(),
            |a| {
                let mut m = module_tensors(a.learner().critic());
                if let Some(actor) = a.learner().actor() {
                    m.extend_prefixed("actor", module_tensors(actor));
                }
                m
            },
            &format!("cql-{env}"),
        );
        assert_eq!(steps, 3 * 16);
    }
}

#[test]
fn bad_configs_and_data_are_named() {
    let p = data("Pendulum-v1", true, "bad");
    let err = |r: &RunConfig| {
        rl_training_cql::Cql::new(r, &training_env, &Device::flex())
            .err()
            .expect("rejected")
            .to_string()
    };
    for (kw, want) in [
        (", temperature: 0", "temperature"),
        (", num_actions: 0", "num_actions"),
        (", min_q_weight: -1", "min_q_weight"),
        (", ent_coef: autox", "ent_coef"),
        (", bc_iterz: 3", "bc_iterz"),
    ] {
        let e = err(&run("Pendulum-v1", &p, kw));
        assert!(e.contains(want), "{kw:?}: {e}");
    }
    let e = err(&run("CartPole-v1", &p, ""));
    assert!(
        e.contains("obs") && e.contains("[3]") && e.contains("[4]"),
        "{e}"
    );
    let q = data("Pendulum-v1", false, "bad");
    let e = err(&run("Pendulum-v1", &q, ""));
    assert!(e.contains("rewards"), "{e}");
}
