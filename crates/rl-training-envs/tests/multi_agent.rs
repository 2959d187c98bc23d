//! Replays the multi-agent recordings of `testdata/reference/multi_agent` (PettingZoo 1.27.0's
//! `rps_v2`, MPE2 1.1.1's `simple_spread_v3`, RLlib 2.60.0's `TwoStepGame`; override the folder
//! with `RL_MULTI_AGENT_REFERENCE_DIR`): the recorded initial world is injected after reset,
//! then every observation, reward, termination, truncation, live-agent list and global state
//! must match bit for bit.

use rl_training_core::env::Kwargs;
use rl_training_core::multi_agent::{AgentMap, MultiAgentEnv, MultiStep};
use serde_json::Value;
use std::path::PathBuf;

fn ref_dir() -> PathBuf {
    rl_training_core::testing::reference_path(
        "RL_MULTI_AGENT_REFERENCE_DIR",
        "testdata/reference/multi_agent",
        env!("CARGO_MANIFEST_DIR"),
    )
}

fn load(key: &str) -> Value {
    let path = ref_dir().join(format!("{key}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

fn f32_map(v: &Value) -> AgentMap<Vec<f32>> {
    v.as_object()
        .unwrap()
        .iter()
        .map(|(k, x)| (k.clone(), floats(x).into_iter().map(|f| f as f32).collect()))
        .collect()
}

fn bits(m: &AgentMap<Vec<f32>>) -> AgentMap<Vec<u32>> {
    m.iter()
        .map(|(k, v)| (k.clone(), v.iter().map(|x| x.to_bits()).collect()))
        .collect()
}

fn make(d: &Value) -> Box<dyn MultiAgentEnv> {
    let kw: Kwargs = serde_json::from_value(d["make_kwargs"].clone()).unwrap();
    rl_training_envs::make_multi_agent_env(d["env_id"].as_str().unwrap(), &kw).unwrap()
}

fn check_step(ctx: &str, s: &MultiStep, want: &Value, env: &dyn MultiAgentEnv) {
    assert_eq!(
        bits(&s.obs),
        bits(&f32_map(&want["observations"])),
        "{ctx}: observations"
    );
    for (agent, r) in want["rewards"].as_object().unwrap() {
        assert_eq!(
            s.rewards[agent].to_bits(),
            r.as_f64().unwrap().to_bits(),
            "{ctx}: reward of {agent}"
        );
    }
    assert_eq!(
        s.rewards.len(),
        want["rewards"].as_object().unwrap().len(),
        "{ctx}: rewarded agents"
    );
    for (field, got) in [
        ("terminations", &s.terminations),
        ("truncations", &s.truncations),
    ] {
        let w: AgentMap<bool> = serde_json::from_value(want[field].clone()).unwrap();
        assert_eq!(got, &w, "{ctx}: {field}");
    }
    let agents: Vec<String> = serde_json::from_value(want["agents"].clone()).unwrap();
    assert_eq!(env.agents(), agents.as_slice(), "{ctx}: live agents");
    if let Some(state) = want.get("state") {
        let w: Vec<u32> = floats(state)
            .iter()
            .map(|&x| (x as f32).to_bits())
            .collect();
        let got: Vec<u32> = env.state().unwrap().iter().map(|x| x.to_bits()).collect();
        assert_eq!(got, w, "{ctx}: state");
    }
}

/// Replays a Parallel-API recording; returns the number of steps checked.
fn replay(key: &str, initial: impl Fn(&Value) -> Option<Vec<f64>>) -> usize {
    let d = load(key);
    let mut env = make(&d);
    let possible: Vec<String> = serde_json::from_value(d["possible_agents"].clone()).unwrap();
    assert_eq!(
        env.possible_agents(),
        possible.as_slice(),
        "{key}: possible_agents"
    );
    let mut steps = 0;
    for ep in d["episodes"].as_array().unwrap() {
        let seed = ep["seed"].as_u64().unwrap();
        let (mut obs, _) = env.reset(Some(seed), None).unwrap();
        if let Some(s) = initial(&ep["initial_state"]) {
            env.set_raw_state(&s).unwrap();
            // The observations of the recorded world (state() is every agent's in turn), as
            // reset would have returned them.
            let state = env.state().unwrap();
            let dim = state.len() / possible.len();
            for (i, a) in possible.iter().enumerate() {
                obs.insert(a.clone(), state[i * dim..(i + 1) * dim].to_vec());
            }
        }
        assert_eq!(
            bits(&obs),
            bits(&f32_map(&ep["reset_observations"])),
            "{key} seed {seed}: reset"
        );
        for (t, want) in ep["steps"].as_array().unwrap().iter().enumerate() {
            let actions = f32_map(&want["actions"]);
            let s = env.step(&actions).unwrap();
            check_step(
                &format!("{key} seed {seed} step {t}"),
                &s,
                want,
                env.as_ref(),
            );
            steps += 1;
        }
        assert!(
            env.episode_over(),
            "{key} seed {seed}: the episode ends where the recording does"
        );
    }
    steps
}

fn spread_initial(s: &Value) -> Option<Vec<f64>> {
    let flat = |k: &str| -> Vec<f64> { s[k].as_array().unwrap().iter().flat_map(floats).collect() };
    Some(
        [
            flat("agents_pos"),
            flat("agents_vel"),
            flat("landmarks_pos"),
        ]
        .concat(),
    )
}

#[test]
fn simple_spread_replays_mpe2() {
    for key in [
        "simple_spread_v3",
        "simple_spread_v3_continuous",
        "simple_spread_v3_N2_local0.25",
    ] {
        let n = replay(key, spread_initial);
        assert!(n >= 50, "{key}: {n} steps");
    }
}

#[test]
fn rps_replays_pettingzoo() {
    assert_eq!(replay("rps_v2", |_| None), 30);
    assert_eq!(replay("rps_v2_5actions", |_| None), 80);
}

#[test]
fn two_step_game_replays_rllib() {
    for key in ["TwoStepGame", "TwoStepGame_one_hot"] {
        let d = load(key);
        let mut env = make(&d);
        let mut payoffs = Vec::new();
        for (e, ep) in d["episodes"].as_array().unwrap().iter().enumerate() {
            let (obs, _) = env.reset(Some(0), None).unwrap();
            assert_eq!(
                bits(&obs),
                bits(&f32_map(&ep["reset_observations"])),
                "{key} episode {e}"
            );
            let mut total = 0.0;
            for (t, want) in ep["steps"].as_array().unwrap().iter().enumerate() {
                let ctx = format!("{key} episode {e} step {t}");
                let s = env.step(&f32_map(&want["actions"])).unwrap();
                assert_eq!(bits(&s.obs), bits(&f32_map(&want["observations"])), "{ctx}");
                for (agent, r) in want["rewards"].as_object().unwrap() {
                    assert_eq!(s.rewards[agent], r.as_f64().unwrap(), "{ctx}: {agent}");
                }
                let over = want["terminated_all"].as_bool().unwrap();
                assert_eq!(env.episode_over(), over, "{ctx}");
                assert!(s.terminations.values().all(|&x| x == over), "{ctx}");
                let state: Vec<f32> = floats(&want["state"]).iter().map(|&x| x as f32).collect();
                assert_eq!(env.state().unwrap(), state, "{ctx}");
                total += s.rewards.values().sum::<f64>();
            }
            assert!(env.episode_over());
            payoffs.push(total);
        }
        payoffs.sort_by(f64::total_cmp);
        payoffs.dedup();
        assert_eq!(payoffs, [0.0, 1.0, 7.0, 8.0], "{key}: the game's payoffs");
    }
}

#[test]
fn bad_kwargs_and_ids_are_named() {
    let e = rl_training_envs::make_multi_agent_env("simple_spread_v4", &Kwargs::new())
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("simple_spread_v4") && e.contains("simple_spread_v3"),
        "{e}"
    );
    let kw: Kwargs = serde_json::from_str(r#"{"local_ratio": 1.5}"#).unwrap();
    let e = rl_training_envs::make_multi_agent_env("simple_spread_v3", &kw)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("local_ratio"), "{e}");
    let kw: Kwargs = serde_json::from_str(r#"{"num_actions": 4}"#).unwrap();
    let e = rl_training_envs::make_multi_agent_env("rps_v2", &kw)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("num_actions"), "{e}");
    let kw: Kwargs = serde_json::from_str(r#"{"curriculum": true}"#).unwrap();
    let e = rl_training_envs::make_multi_agent_env("simple_spread_v3", &kw)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("curriculum"), "{e}");
    let e = rl_training_envs::multi_agent::heuristic("rps_v2", &Kwargs::new(), "beat_first")
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("beat_first") && e.contains("beat_last"), "{e}");
}

#[test]
fn multi_agent_cartpole_is_independent_cartpoles() {
    let kw: Kwargs = serde_json::from_str(r#"{"num_agents": 2}"#).unwrap();
    let mut ma = rl_training_envs::make_multi_agent_env("MultiAgentCartPole", &kw).unwrap();
    assert_eq!(ma.possible_agents(), ["0", "1"]);
    let mut single = rl_training_envs::make("CartPole-v1", &Kwargs::new()).unwrap();
    let mut o = vec![0.0f32; 4];
    single.reset(Some(7), None, &mut o).unwrap();
    let (obs, _) = ma.reset(Some(7), None).unwrap();
    assert_eq!(obs["0"], o, "agent 0 plays the env seeded 7");
    assert_ne!(obs["1"], o, "agent 1 gets seed 8");
    // Agent 0 pushes right until it falls; agent 1 alternates and outlives it.
    let mut t = 0;
    while !ma.episode_over() {
        let acts: AgentMap<Vec<f32>> = ma
            .agents()
            .iter()
            .map(|a| (a.clone(), vec![if a == "0" { 1.0 } else { (t % 2) as f32 }]))
            .collect();
        let s = ma.step(&acts).unwrap();
        if let Some(obs0) = s.obs.get("0") {
            let st = single.step(&[1.0], &mut o).unwrap();
            assert_eq!(obs0, &o);
            assert_eq!(s.terminations["0"], st.terminated);
        }
        t += 1;
    }
    assert!(t > 9 && t <= 500);
    let snap = ma.snapshot().unwrap();
    ma.restore(&snap).unwrap();
    let e = rl_training_envs::make_multi_agent_env(
        "MultiAgentPendulum",
        &serde_json::from_str(r#"{"num_agents": 0}"#).unwrap(),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("num_agents"), "{e}");
}
