//! APPO on the actor-learner shell: lockstep runs are reproducible and resume bit-identically
//! (target network and KL coefficient in the checkpoint); asynchronous runs train with a
//! measured lag; every option combination runs; bad input is named.

use rl_training_appo::Appo;
use rl_training_core::algorithm::Algorithm;
use rl_training_core::burn::tensor::Device;
use rl_training_core::config::RunConfig;

fn run(extra: &str) -> RunConfig {
    let y = format!(
        "algorithm: appo\nenv_id: CartPole-v1\ntotal_timesteps: 100000\nseed: 2\nalgo_kwargs:\n  num_env_runners: 2\n  num_envs_per_env_runner: 2\n  n_steps: 16\n  batch_size: 16\n  n_epochs: 2\n{extra}"
    );
    RunConfig::from_yaml(&y, &[], "test").unwrap()
}

#[test]
fn lockstep_resumes_bit_identically() {
    // A one-slot circular buffer used once per batch is empty between iterations, so the
    // checkpoint holds everything; the KL penalty and a soft target update are exercised.
    let r = run(
        "  lockstep: true\n  circular_buffer_num_batches: 1\n  circular_buffer_iterations_per_batch: 1\n  use_kl_loss: true\n  tau: 0.5\n  target_network_update_freq: 2\n",
    );
    let dev = Device::flex();
    rl_training_envs::testing::assert_resumes_bit_identically(
        (3, 3),
        || Appo::new(&r, &rl_training_envs::testing::training_env, &dev).unwrap(),
        |dir| Appo::load(dir, &rl_training_envs::testing::training_env, &dev).unwrap(),
        |a| rl_training_core::params::module_tensors(a.policy()),
        "appo",
    );
}

#[test]
fn options_run_and_async_reports_lag() {
    let dev = Device::flex();
    for extra in [
        "  lockstep: true\n  vtrace: false\n  gae_lambda: 0.9\n",
        "  lockstep: true\n  vtrace: false\n  use_gae: false\n",
        "  lockstep: true\n  use_kl_loss: true\n",
        "  learner_queue_size: 2\n",
    ] {
        let mut a = Appo::new(&run(extra), &rl_training_envs::testing::training_env, &dev).unwrap();
        let mut lag = 0.0;
        for _ in 0..6 {
            let m = a.train().unwrap();
            assert!(m["losses/approx_kl"].is_finite());
            lag += m["perf/policy_lag"];
            assert!(m["perf/circular_buffer_len"] <= 4.0);
        }
        if extra.contains("lockstep") {
            assert_eq!(lag, 0.0, "{extra}");
        }
    }
}

#[test]
fn bad_config_names_the_key() {
    use rl_training_core::config::AlgoConfig;
    for (extra, key) in [
        ("  tau: 0\n", "tau"),
        (
            "  circular_buffer_num_batches: 0\n",
            "circular_buffer_num_batches",
        ),
        ("  clip_range: -1\n", "clip_range"),
        ("  use_kl: true\n", "use_kl"),
    ] {
        let e = rl_training_appo::AppoConfig::from_kwargs(&run(extra).algo_kwargs)
            .unwrap_err()
            .to_string();
        assert!(e.contains(key), "{extra}: {e}");
    }
}
