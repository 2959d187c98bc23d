//! Multi-agent Recurrent PPO (the on-policy multi-agent shell around `RecurrentPpoLearner`):
//! each agent keeps its own LSTM state, and a resumed run continues bit for bit. The learning
//! test (rps_v2 against `beat_last`) is in `learning.rs`.

use rl_training_core::algorithm::Learner;
use rl_training_core::burn::tensor::Device;
use rl_training_core::multi_agent::MultiAgentAlgorithm;
use rl_training_envs::testing;
use rl_training_on_policy::multi_agent::MultiAgentOnPolicy;
use rl_training_recurrent_ppo::RecurrentPpoLearner;

type MaRppo = MultiAgentOnPolicy<RecurrentPpoLearner>;

fn run(overrides: &[&str]) -> rl_training_core::config::RunConfig {
    let mut o: Vec<String> = [
        "n_envs=2",
        "algo_kwargs.n_steps=20",
        "algo_kwargs.batch_size=20",
        "algo_kwargs.n_epochs=2",
        "algo_kwargs.lstm_hidden_size=8",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    o.extend(overrides.iter().map(|s| s.to_string()));
    testing::example_config(
        env!("CARGO_MANIFEST_DIR"),
        "recurrent_ppo_rps_beat_last.yaml",
        &o,
    )
}

fn build(run: &rl_training_core::config::RunConfig) -> MaRppo {
    MaRppo::new(
        run,
        &rl_training_envs::make_multi_agent_env,
        &rl_training_envs::multi_agent::frozen,
        &Device::flex(),
    )
    .unwrap()
}

#[test]
fn resume_is_bit_identical() {
    let run = run(&[]);
    let weights = |ma: &MaRppo| {
        ma.learned()
            .values()
            .map(|lp| lp.learner.weights().to_bytes())
            .collect::<Vec<_>>()
    };
    let load = |dir: &std::path::Path| {
        MaRppo::load(
            dir,
            &rl_training_envs::make_multi_agent_env,
            &rl_training_envs::multi_agent::frozen,
            &Device::flex(),
        )
        .unwrap()
    };
    // 20 steps per rollout, 15 rounds per episode: a rollout ends mid-episode, so the saved
    // LSTM states matter.
    testing::assert_multi_agent_resumes((2, 3), || build(&run), load, weights, "rps");
}

#[test]
fn recurrent_policies_train_evaluate_and_refuse_stateless_predict() {
    let mut ma = build(&run(&[]));
    let m = ma.train().unwrap();
    assert_eq!(m["policies/learned/rows"], 40.0);
    assert!(
        m.contains_key("policies/learned/losses/policy_loss"),
        "{m:?}"
    );
    // Sequences: each env's 20 rows are cut at the episode start after round 15.
    assert!(m["policies/learned/charts/sequences"] >= 4.0, "{m:?}");
    let mut env = rl_training_envs::make_multi_agent_env("rps_v2", &Default::default()).unwrap();
    let e = ma.evaluate(env.as_mut(), 3, true, 11).unwrap();
    assert!((e.per_policy["learned"] + e.per_policy["beat_last"]).abs() < 1e-9);
    let err = ma.predict("learned", &[3.0], true).unwrap_err().to_string();
    assert!(
        err.contains("recurrent") && err.contains("learned"),
        "{err}"
    );
}
