//! The actor-learner machinery with the real algorithm: lockstep runs are reproducible and
//! resume bit-identically; asynchronous runners report the policy lag, drop batches older than
//! `max_policy_lag`, and a runner whose env panics is restarted while training goes on.

use rl_training_core::algorithm::Algorithm;
use rl_training_core::burn::tensor::Device;
use rl_training_core::config::RunConfig;
use rl_training_core::env::{Env, EnvError};
use rl_training_envs::faults::{Fault, FaultInjection};
use rl_training_impala::Impala;

fn run(extra: &str) -> RunConfig {
    let y = format!(
        "algorithm: impala\nenv_id: CartPole-v1\ntotal_timesteps: 100000\nseed: 2\nalgo_kwargs:\n  num_env_runners: 2\n  num_envs_per_env_runner: 2\n  n_steps: 8\n{extra}"
    );
    RunConfig::from_yaml(&y, &[], "test").unwrap()
}

fn weights(a: &Impala) -> rl_training_core::params::TensorMap {
    rl_training_core::params::module_tensors(a.policy())
}

#[test]
fn lockstep_is_reproducible_and_resumes_bit_identically() {
    let r = run("  lockstep: true\n  replay_proportion: 0.5\n  replay_buffer_num_slots: 4\n");
    let dev = Device::flex();
    let make = || Impala::new(&r, &rl_training_envs::testing::training_env, &dev).unwrap();
    let (mut a, mut b) = (make(), make());
    for _ in 0..3 {
        let (ma, mb) = (a.train().unwrap(), b.train().unwrap());
        assert_eq!(
            rl_training_envs::testing::comparable_metrics(&ma),
            rl_training_envs::testing::comparable_metrics(&mb)
        );
    }
    assert_eq!(weights(&a), weights(&b));
    // Replay needs its buffer in the checkpoint to resume exactly; without replay it does.
    let r = run("  lockstep: true\n");
    rl_training_envs::testing::assert_resumes_bit_identically(
        (3, 3),
        || Impala::new(&r, &rl_training_envs::testing::training_env, &dev).unwrap(),
        |dir| Impala::load(dir, &rl_training_envs::testing::training_env, &dev).unwrap(),
        weights,
        "impala",
    );
}

#[test]
fn async_runners_report_lag_and_drop_old_batches() {
    let dev = Device::flex();
    let r = run("  learner_queue_size: 4\n");
    let mut a = Impala::new(&r, &rl_training_envs::testing::training_env, &dev).unwrap();
    let mut lags = 0.0;
    for _ in 0..10 {
        let m = a.train().unwrap();
        lags += m["perf/policy_lag"];
        assert!(m["perf/learner_queue_len"] <= 4.0);
    }
    assert!(
        lags > 0.0,
        "two runners and a queue: some batches act with older weights"
    );
    let r = run("  learner_queue_size: 4\n  max_policy_lag: 0\n");
    let mut a = Impala::new(&r, &rl_training_envs::testing::training_env, &dev).unwrap();
    let mut last = Default::default();
    for _ in 0..10 {
        last = a.train().unwrap();
        assert_eq!(
            last["perf/policy_lag"], 0.0,
            "only current batches are used"
        );
    }
    assert!(last["perf/dropped_batches"] > 0.0, "{last:?}");
}

#[test]
fn a_runner_that_panics_is_restarted_and_training_continues() {
    // Every env panics on its 20th step (a restart resets the envs, it does not make new ones):
    // the vector env turns each panic into an error and the runner restarts. An env whose
    // neighbour failed first in the same vector step reaches its 20th step one restart later,
    // so the 2 runners of 2 envs restart 2 to 4 times, then never again.
    let make = |run: &RunConfig| -> Result<Box<dyn Env>, EnvError> {
        let inner = rl_training_envs::testing::training_env(run)?;
        Ok(Box::new(FaultInjection::new(
            inner,
            Some(Fault::Panic),
            20,
            true,
        )))
    };
    let mut a = Impala::new(&run(""), &make, &Device::flex()).unwrap();
    // The panic comes early; its report may lag while the panic hook prints (backtraces are
    // slow), so train until it shows, then on: the learner never stops.
    let mut restarts = 0.0;
    for _ in 0..2000 {
        restarts = a.train().unwrap()["perf/runner_restarts"];
        if restarts >= 2.0 {
            break;
        }
    }
    for _ in 0..50 {
        restarts = a.train().unwrap()["perf/runner_restarts"];
    }
    assert!((2.0..=4.0).contains(&restarts), "{restarts} restarts");
    let before = a.num_timesteps();
    for _ in 0..20 {
        assert_eq!(a.train().unwrap()["perf/runner_restarts"], restarts);
    }
    assert_eq!(a.num_timesteps(), before + 20 * 2 * 2 * 8);
}

#[test]
fn bad_config_names_the_key() {
    use rl_training_core::config::AlgoConfig;
    for (extra, key) in [
        ("  momentum: 0.9\n", "momentum"),
        ("  replay_proportion: 1.0\n", "replay_buffer_num_slots"),
        ("  learner_queue_size: 0\n", "learner_queue_size"),
        ("  opt_type: sgd\n", "opt_type"),
        ("  vtrace_clip: 1\n", "vtrace_clip"),
    ] {
        let e = rl_training_impala::ImpalaConfig::from_kwargs(&run(extra).algo_kwargs)
            .unwrap_err()
            .to_string();
        assert!(e.contains(key), "{extra}: {e}");
    }
    // The runners keep their own envs: no vector-wide statistics to share.
    let mut shared = run("");
    shared.normalize.obs = true;
    shared.normalize.shared = true;
    let e = Impala::new(
        &shared,
        &rl_training_envs::testing::training_env,
        &Device::flex(),
    )
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(e.contains("normalize.shared"), "{e}");
}
