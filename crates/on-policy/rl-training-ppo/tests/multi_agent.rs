//! Multi-agent PPO (the on-policy family's multi-agent shell around `PpoLearner`): metrics,
//! frozen policies, a heuristic opponent, bit-identical resume, and bad `multi_agent:` tables
//! refused by name. The multi-agent learning tests are in `learning.rs`.

use rl_training_core::algorithm::Learner;
use rl_training_core::burn::module::Module;
use rl_training_core::burn::tensor::Device;
use rl_training_core::config::RunConfig;
use rl_training_core::env::Kwargs;
use rl_training_core::multi_agent::MultiAgentAlgorithm;
use rl_training_envs::testing;
use rl_training_on_policy::multi_agent::MultiAgentOnPolicy;
use rl_training_ppo::PpoLearner;

type MaPpo = MultiAgentOnPolicy<PpoLearner>;

fn config(name: &str, overrides: &[String]) -> RunConfig {
    testing::example_config(env!("CARGO_MANIFEST_DIR"), name, overrides)
}

fn build(run: &RunConfig) -> Result<MaPpo, rl_training_core::RlError> {
    MaPpo::new(
        run,
        &rl_training_envs::make_multi_agent_env,
        &rl_training_envs::multi_agent::frozen,
        &Device::flex(),
    )
}

#[test]
fn metrics_carry_agent_and_policy_prefixes_and_frozen_policies_stay_frozen() {
    let mut run = config(
        "ppo_multi_agent_cartpole.yaml",
        &["total_timesteps=512".into()],
    );
    run.multi_agent.as_mut().unwrap().policies_to_train = Some(vec!["p0".into()]);
    let mut ma = build(&run).unwrap();
    let weights = |ma: &MaPpo, id: &str| ma.learned()[id].learner.weights().to_bytes();
    let (p0, p1) = (weights(&ma, "p0"), weights(&ma, "p1"));
    assert_ne!(p0, p1, "each policy draws its own initial weights");
    let m = ma.train().unwrap();
    for k in [
        "policies/p0/losses/policy_loss",
        "policies/p0/rows",
        "policies/p1/rows",
        "charts/SPS",
    ] {
        assert!(
            m.contains_key(k),
            "{k} missing from {:?}",
            m.keys().collect::<Vec<_>>()
        );
    }
    assert!(
        !m.contains_key("policies/p1/losses/policy_loss"),
        "p1 is not trained"
    );
    // A row per action: an agent whose CartPole fell waits for the other's to end.
    let rows = m["policies/p0/rows"] + m["policies/p1/rows"];
    assert_eq!(rows, m["charts/agent_steps"], "one row per agent step");
    assert!(m["policies/p0/rows"] <= 8.0 * 32.0 && m["policies/p0/rows"] > 8.0 * 9.0);
    assert_eq!(ma.num_timesteps(), 8 * 32);
    assert_ne!(weights(&ma, "p0"), p0, "p0 learns");
    assert_eq!(weights(&ma, "p1"), p1, "p1 is frozen");
}

#[test]
fn bad_multi_agent_tables_are_refused_by_name() {
    let base = config("ppo_multi_agent_cartpole.yaml", &[]);
    let err = |f: &dyn Fn(&mut RunConfig)| {
        let mut run = base.clone();
        f(&mut run);
        build(&run).err().expect("refused").to_string()
    };
    let e = err(&|r| {
        r.multi_agent.as_mut().unwrap().policy_mapping =
            serde_json::from_str(r#"{"0": "p0"}"#).unwrap();
    });
    assert!(e.contains("agent \"1\" has no policy"), "{e}");
    let e = err(&|r| {
        r.multi_agent.as_mut().unwrap().policy_mapping =
            serde_json::from_str(r#"{"0": "p0", "1": "p7"}"#).unwrap();
    });
    assert!(e.contains("unknown policy id \"p7\""), "{e}");
    let e = err(&|r| {
        r.multi_agent
            .as_mut()
            .unwrap()
            .policies
            .get_mut("p1")
            .unwrap()
            .algo_kwargs = serde_json::from_str(r#"{"learning_rat": 0.1}"#).unwrap();
    });
    assert!(
        e.contains("multi_agent.policies.p1.algo_kwargs") && e.contains("learning_rat"),
        "{e}"
    );
    let e = err(&|r| {
        r.multi_agent
            .as_mut()
            .unwrap()
            .policies
            .get_mut("p1")
            .unwrap()
            .heuristic = Some("beat_last".into());
    });
    assert!(
        e.contains("multi_agent.policies.p1.heuristic") && e.contains("beat_last"),
        "{e}"
    );
}

/// rps_v2 against the frozen `beat_last` opponent: the learned side's metrics and the
/// heuristic's play are wired up (learning this one needs memory; not a learning test).
#[test]
fn a_learned_policy_plays_a_heuristic_opponent() {
    let mut run = config(
        "ppo_multi_agent_cartpole.yaml",
        &["total_timesteps=960".into()],
    );
    run.env_id = "rps_v2".into();
    run.env_kwargs = Kwargs::new();
    run.multi_agent = Some(
        serde_json::from_str(
            r#"{"policies": {"learned": {}, "opponent": {"heuristic": "beat_last"}},
                "policy_mapping": {"player_0": "learned", "player_1": "opponent"}}"#,
        )
        .unwrap(),
    );
    let mut ma = build(&run).unwrap();
    let m = ma.train().unwrap();
    assert_eq!(m["policies/learned/rows"], 8.0 * 32.0);
    assert!(!m.contains_key("policies/opponent/rows"));
    // 15 rounds per episode: 8 envs × 32 steps end 17 episodes (8 × ⌊32 / 15⌋ = 16, and more).
    assert!(m["charts/episodes"] >= 16.0);
    // Zero-sum game: the two policies' returns cancel.
    let s = m["policies/learned/episodic_return"] + m["policies/opponent/episodic_return"];
    assert!(s.abs() < 1e-9, "{m:?}");
    let mut env = rl_training_envs::make_multi_agent_env("rps_v2", &Kwargs::new()).unwrap();
    let e = ma.evaluate(env.as_mut(), 4, true, 7).unwrap();
    assert_eq!(e.per_agent.len(), 2);
    assert!((e.per_policy["learned"] + e.per_policy["opponent"]).abs() < 1e-9);
}

/// `n` iterations, save, load, `m` more equal `n + m` uninterrupted iterations bit for bit:
/// every metric but wall-clock ones, every policy's weights.
fn assert_resumes(run: &RunConfig, (n, m): (usize, usize), tag: &str) {
    let weights = |ma: &MaPpo| {
        ma.learned()
            .values()
            .map(|lp| lp.learner.weights().to_bytes())
            .collect::<Vec<_>>()
    };
    let load = |dir: &std::path::Path| {
        MaPpo::load(
            dir,
            &rl_training_envs::make_multi_agent_env,
            &rl_training_envs::multi_agent::frozen,
            &Device::flex(),
        )
        .unwrap()
    };
    testing::assert_multi_agent_resumes((n, m), || build(run).unwrap(), load, weights, tag);
}

#[test]
fn resume_is_bit_identical() {
    let small = [
        "n_envs=2".to_string(),
        "algo_kwargs.batch_size=32".into(),
        "algo_kwargs.n_epochs=2".into(),
    ];
    assert_resumes(
        &config("ppo_multi_agent_cartpole.yaml", &small),
        (3, 3),
        "cartpole",
    );
    // A heuristic opponent with episode memory (always_same keeps its move).
    let mut run = config("ppo_multi_agent_cartpole.yaml", &small);
    run.env_id = "rps_v2".into();
    run.env_kwargs = Kwargs::new();
    run.multi_agent = Some(
        serde_json::from_str(
            r#"{"policies": {"learned": {}, "opponent": {"heuristic": "always_same"}},
                "policy_mapping": {"player_0": "learned", "player_1": "opponent"}}"#,
        )
        .unwrap(),
    );
    assert_resumes(&run, (2, 3), "rps");
}

#[test]
fn resume_with_a_centralized_critic_is_bit_identical() {
    let run = config(
        "ppo_simple_spread_mappo.yaml",
        &[
            "n_envs=2".into(),
            "algo_kwargs.n_steps=30".into(),
            "algo_kwargs.batch_size=60".into(),
            "algo_kwargs.n_epochs=2".into(),
        ],
    );
    assert_resumes(&run, (2, 2), "mappo");
}

/// MAPPO: the critic reads the agent's own observation and then every agent's; the actor
/// reads only its own, so what the others see moves the value and not the action.
#[test]
fn a_centralized_critic_sees_every_agent_and_the_actor_only_its_own() {
    use rl_training_core::burn::tensor::{Tensor, TensorData};
    let run = config(
        "ppo_two_step_game_mappo.yaml",
        &["n_envs=2".into(), "algo_kwargs.n_steps=4".into()],
    );
    let mut ma = build(&run).unwrap();
    // Two-step game observations are Discrete(6), one-hot: 6 own + 2 × 6 for the critic.
    let p = ma.learned()["p0"].learner.policy();
    assert_eq!(p.actor_inputs, Some(6));
    assert_eq!(p.pi.layers[0].weight.dims()[0], 6);
    assert_eq!(p.vf.as_ref().unwrap().layers[0].weight.dims()[0], 18);
    let input = |own: usize, other: usize| {
        let mut x = vec![0.0f32; 18];
        x[own] = 1.0;
        x[6 + own] = 1.0;
        x[12 + other] = 1.0;
        Tensor::<2>::from_data(TensorData::new(x, [1, 18]), &Device::flex())
    };
    let valid = p.valid();
    let (a, b) = (valid.forward(input(0, 0)), valid.forward(input(0, 3)));
    let host = |t: Tensor<2>| rl_training_core::batch::host(t);
    assert_eq!(
        host(a.params),
        host(b.params),
        "the actor ignores the others"
    );
    let (va, vb) = (
        rl_training_core::batch::host(a.values),
        rl_training_core::batch::host(b.values),
    );
    assert_ne!(va, vb, "the critic sees the other agent");
    // Training stores the critic's input: the update runs on 18-wide rows.
    let m = ma.train().unwrap();
    assert!(m.contains_key("policies/p0/losses/value_loss"), "{m:?}");
}
