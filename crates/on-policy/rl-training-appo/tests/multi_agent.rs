//! Multi-agent APPO (the multi-agent shell as the runner of an `AppoLearner` per policy):
//! per-policy metrics and bit-identical resume (target networks, KL coefficients).
//! The learning test is in `learning.rs`; the chain bookkeeping is checked in rl-training-impala's
//! multi-agent tests (the same shell and batches).

use rl_training_appo::MultiAgentAppo;
use rl_training_core::algorithm::Learner;
use rl_training_core::burn::tensor::Device;
use rl_training_core::config::RunConfig;
use rl_training_core::multi_agent::MultiAgentAlgorithm;
use rl_training_envs::testing;

fn config(overrides: &[String]) -> RunConfig {
    testing::example_config(
        env!("CARGO_MANIFEST_DIR"),
        "appo_multi_agent_cartpole.yaml",
        overrides,
    )
}

fn build(run: &RunConfig) -> MultiAgentAppo {
    MultiAgentAppo::new(
        run,
        &rl_training_envs::make_multi_agent_env,
        &rl_training_envs::multi_agent::frozen,
        &Device::flex(),
    )
    .unwrap()
}

/// Shorter rollouts and minibatches so that a few iterations are quick.
fn small() -> Vec<String> {
    vec![
        "algo_kwargs.n_steps=32".into(),
        "algo_kwargs.batch_size=64".into(),
    ]
}

#[test]
fn each_policy_learns_with_its_own_metrics() {
    let mut ma = build(&config(&small()));
    let m = ma.train().unwrap();
    for id in ["p0", "p1"] {
        for k in [
            "losses/policy_loss",
            "losses/clipfrac",
            "charts/kl_coeff",
            "rows",
        ] {
            let key = format!("policies/{id}/{k}");
            assert!(m.contains_key(&key), "{key} missing: {:?}", m.keys());
        }
    }
    assert_eq!(ma.num_timesteps(), 8 * 32);
}

#[test]
fn multi_agent_appo_resumes_bit_identically() {
    // The circular buffers start empty after a load (as in single-agent runs): one slot used
    // once per batch is empty between iterations, so the resume is exact.
    let mut o = small();
    o.extend([
        "algo_kwargs.circular_buffer_num_batches=1".into(),
        "algo_kwargs.circular_buffer_iterations_per_batch=1".into(),
        "algo_kwargs.target_network_update_freq=2".into(),
        "algo_kwargs.tau=0.5".into(),
        "algo_kwargs.use_kl_loss=true".into(),
    ]);
    let run = config(&o);
    testing::assert_multi_agent_resumes(
        (2, 2),
        || build(&run),
        |d| {
            MultiAgentAppo::load(
                d,
                &rl_training_envs::make_multi_agent_env,
                &rl_training_envs::multi_agent::frozen,
                &Device::flex(),
            )
            .unwrap()
        },
        |ma| {
            ma.learned()
                .values()
                .map(|lp| lp.learner.0.weights().to_bytes())
                .collect()
        },
        "multi-agent APPO",
    );
}
