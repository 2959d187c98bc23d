//! Multi-agent DQN (the off-policy family's multi-agent shell around `DqnLearner`): learning
//! on RLlib's MultiAgentCartPole with a Q-network and replay per agent, bit-identical resume
//! (with and without the stored replays), and refusals of what the shell does not take.

use rl_training_core::algorithm::Learner;
use rl_training_core::burn::tensor::Device;
use rl_training_core::config::RunConfig;
use rl_training_core::multi_agent::MultiAgentAlgorithm;
use rl_training_dqn::DqnLearner;
use rl_training_envs::testing;
use rl_training_off_policy::multi_agent::MultiAgentOffPolicy;

type MaDqn = MultiAgentOffPolicy<DqnLearner>;

fn config(overrides: &[String]) -> RunConfig {
    testing::example_config(
        env!("CARGO_MANIFEST_DIR"),
        "dqn_multi_agent_cartpole.yaml",
        overrides,
    )
}

fn build(run: &RunConfig) -> Result<MaDqn, rl_training_core::RlError> {
    MaDqn::new(
        run,
        &rl_training_envs::make_multi_agent_env,
        &rl_training_envs::multi_agent::frozen,
        &Device::flex(),
    )
}

fn resumes(extra: &[&str], tag: &str) {
    let mut o: Vec<String> = [
        "total_timesteps=4000",
        "algo_kwargs.learning_starts=300",
        "algo_kwargs.train_freq=64",
        "algo_kwargs.gradient_steps=8",
        "algo_kwargs.policy_kwargs.net_arch=[32]",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    o.extend(extra.iter().map(|s| s.to_string()));
    let run = config(&o);
    let weights = |ma: &MaDqn| {
        ma.learned()
            .values()
            .map(|lp| lp.learner.weights().to_bytes())
            .collect()
    };
    let load = |dir: &std::path::Path| {
        MaDqn::load(
            dir,
            &rl_training_envs::make_multi_agent_env,
            &rl_training_envs::multi_agent::frozen,
            &Device::flex(),
        )
        .unwrap()
    };
    testing::assert_multi_agent_resumes((6, 6), || build(&run).unwrap(), load, weights, tag);
}

#[test]
fn resume_with_the_stored_replays_is_bit_identical() {
    resumes(
        &["algo_kwargs.store_buffer_in_checkpoints=true", "n_envs=2"],
        "dqn-stored",
    );
}

#[test]
fn rainbow_resume_with_n_step_ranges_is_bit_identical() {
    // One policy for both agents: its replay interleaves them, n-step sums follow the links.
    resumes(
        &[
            "algo_kwargs.store_buffer_in_checkpoints=true",
            "algo_kwargs.prioritized_replay=true",
            "algo_kwargs.n_step=[1, 3]",
            "multi_agent.policy_mapping=shared",
            "multi_agent.policies={shared: {}}",
        ],
        "dqn-n-step",
    );
}

/// With one policy for both agents its replay holds their transitions interleaved; each
/// transition's successor (where n-step returns go on) is the same agent's next transition,
/// the one starting from its next observation. Only episode ends and each agent's newest
/// transition have none.
#[test]
fn each_transition_links_to_the_same_agents_next_one_in_a_shared_replay() {
    let run = config(&[
        "total_timesteps=600".into(),
        "algo_kwargs.learning_starts=1000".into(),
        "multi_agent.policy_mapping=shared".into(),
        "multi_agent.policies={shared: {}}".into(),
    ]);
    let mut ma = build(&run).unwrap();
    while ma.num_timesteps() < 600 {
        ma.train().unwrap();
    }
    let replay = &ma.learned()["shared"].replay;
    let one = |i: usize| {
        replay.gather(
            vec![i],
            vec![1.0],
            1.0,
            &mut rl_training_core::Rng::seed_from(0),
        )
    };
    let (mut interleaved, mut open_ends) = (0, 0);
    for i in 0..replay.len() {
        let t = one(i);
        let done = t.terminated[0] + t.truncated[0] > 0.0;
        match replay.successor(i) {
            Some(s) => {
                assert!(!done, "transition {i} ended its episode but links to {s}");
                assert_eq!(one(s).obs, t.next_obs, "transition {i} links to {s}");
                interleaved += (s != i + 1) as usize;
            }
            None if !done => open_ends += 1,
            None => {}
        }
    }
    assert!(
        interleaved > 0,
        "the agents' transitions were not interleaved"
    );
    assert!(
        open_ends <= 2,
        "{open_ends} transitions without successor (2 agents)"
    );
}

#[test]
fn prioritized_double_dueling_resume_is_bit_identical() {
    resumes(
        &[
            "algo_kwargs.store_buffer_in_checkpoints=true",
            "algo_kwargs.prioritized_replay=true",
            "algo_kwargs.double_q=true",
            "algo_kwargs.dueling=true",
        ],
        "dqn-rainbowish",
    );
}

#[test]
fn metrics_are_per_policy_and_each_replay_holds_its_agents_transitions() {
    let run = config(&[
        "total_timesteps=2048".into(),
        "algo_kwargs.learning_starts=100".into(),
    ]);
    let mut ma = build(&run).unwrap();
    let m = ma.train().unwrap();
    assert!(
        m.contains_key("policies/p0/losses/td_loss"),
        "{:?}",
        m.keys().collect::<Vec<_>>()
    );
    assert!(m.contains_key("policies/p1/charts/epsilon"));
    assert_eq!(m["policies/p0/charts/gradient_steps"], 128.0);
    // One transition per action of each agent, each in its own policy's replay.
    let stored: f64 = ma.learned().values().map(|lp| lp.replay.len() as f64).sum();
    assert_eq!(stored, m["charts/agent_steps"]);
    assert!(!ma.learned()["p0"].replay.is_empty() && !ma.learned()["p1"].replay.is_empty());
}

#[test]
fn mixed_train_freq_and_a_centralized_critic_are_refused_by_name() {
    let mut run = config(&[]);
    run.multi_agent.as_mut().unwrap().centralized_critic = true;
    let e = build(&run).err().unwrap().to_string();
    assert!(
        e.contains("multi_agent.centralized_critic") && e.contains("on-policy"),
        "{e}"
    );
    let mut run = config(&[]);
    run.multi_agent
        .as_mut()
        .unwrap()
        .policies
        .get_mut("p1")
        .unwrap()
        .algo_kwargs = serde_json::from_str(r#"{"train_freq": 4}"#).unwrap();
    let e = build(&run).err().unwrap().to_string();
    assert!(
        e.contains("multi_agent.policies.p1.algo_kwargs.train_freq"),
        "{e}"
    );
}
