//! Frozen policies of multi-agent runs loaded from checkpoints of other runs
//! (`multi_agent.policies.<id>.checkpoint`): they act exactly as the saved policy, travel
//! inside the run's own checkpoints, and bad sources are errors naming the policy.

use rl_training::core::burn::tensor::Device;
use rl_training::core::config::RunConfig;
use rl_training::core::env::Kwargs;
use std::path::{Path, PathBuf};

mod common;

use common::tiny;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rl-frozen-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A briefly trained single-agent run of `name`, saved in `dir`.
fn saved(name: &str, dir: &Path) {
    let run = RunConfig::from_yaml(&tiny(name, 256), &[], name).unwrap();
    let mut alg = rl_training::build(&run, &Device::flex()).unwrap();
    while alg.num_timesteps() < 256 {
        alg.train().unwrap();
    }
    alg.save(dir).unwrap();
}

/// PPO on two CartPoles: agent "0" learns (`p0`), agent "1" is policy `p1` = `p1_yaml`.
fn run_with(p1_yaml: &str) -> RunConfig {
    let y = format!(
        "algorithm: ppo\nenv_id: MultiAgentCartPole\nenv_kwargs: {{num_agents: 2}}\n\
         total_timesteps: 128\nn_envs: 2\nseed: 5\nmulti_agent:\n  policies: {{p0: {{}}, p1: {p1_yaml}}}\n  \
         policy_mapping: {{\"0\": p0, \"1\": p1}}\nalgo_kwargs: {{n_steps: 32, batch_size: 32, n_epochs: 1}}\n"
    );
    RunConfig::from_yaml(&y, &[], "frozen-test").unwrap()
}

fn yaml_path(p: &Path) -> String {
    serde_json::to_string(&p.display().to_string()).unwrap()
}

/// Mean return of CartPole-v1 episodes reset with `seeds`, acting by `act`.
fn cartpole_returns(
    seeds: impl Iterator<Item = u64>,
    mut act: impl FnMut(&[f32]) -> Vec<f32>,
) -> f64 {
    let mut env = rl_training::envs::make("CartPole-v1", &Kwargs::new()).unwrap();
    let (mut total, mut n) = (0.0, 0);
    for seed in seeds {
        let mut obs = vec![0.0; 4];
        env.reset(Some(seed), None, &mut obs).unwrap();
        loop {
            let a = act(&obs);
            let s = env.step(&a, &mut obs).unwrap();
            total += s.reward;
            if s.terminated || s.truncated {
                break;
            }
        }
        n += 1;
    }
    total / n as f64
}

#[test]
fn checkpoint_policies_act_as_saved_and_travel_inside_the_runs_checkpoint() {
    let d = tmp("acts");
    let dev = Device::flex();
    // A DQN checkpoint acts for agent "1" of a PPO run.
    let dqn_dir = d.join("dqn");
    saved("dqn", &dqn_dir);
    let mut dqn = rl_training::load(&dqn_dir, &dev).unwrap();
    let eval_seed = 100;
    let episodes = 3;
    // Episode e of the evaluation resets copy i with eval_seed + e + i.
    let expected = cartpole_returns((0..episodes).map(|e| eval_seed + e + 1), |o| {
        dqn.predict(o, true).unwrap()
    });

    let run = run_with(&format!("{{checkpoint: {}}}", yaml_path(&dqn_dir)));
    let mut ma = rl_training::build_multi_agent(&run, &dev).unwrap();
    assert_eq!(
        ma.policy_map().to_train,
        ["p0"],
        "a checkpoint policy is frozen"
    );
    let m = ma.train().unwrap();
    assert!(m.contains_key("policies/p0/losses/policy_loss"));
    assert!(
        !m.keys().any(|k| k.starts_with("policies/p1/losses")),
        "p1 does not learn"
    );
    let mut eval_env = rl_training::make_multi_agent_eval_env(&run).unwrap();
    let before = ma
        .evaluate(eval_env.as_mut(), episodes as usize, true, eval_seed)
        .unwrap();
    assert!(
        (before.per_agent["1"] - expected).abs() < 1e-9,
        "agent 1 plays the DQN checkpoint: {} vs {expected}",
        before.per_agent["1"]
    );

    // The run's checkpoint holds the frozen one: it loads and acts the same without it.
    let ma_dir = d.join("ma");
    ma.save(&ma_dir).unwrap();
    assert!(ma_dir.join("frozen/p1/checkpoint.json").exists());
    std::fs::remove_dir_all(&dqn_dir).unwrap();
    let mut back = rl_training::load_multi_agent(&ma_dir, &dev).unwrap();
    let after = back
        .evaluate(eval_env.as_mut(), episodes as usize, true, eval_seed)
        .unwrap();
    assert_eq!(after, before);
    back.train().unwrap();

    // Policy p0 of that multi-agent checkpoint acts frozen in another run.
    let mut p0 = rl_training::load_multi_agent(&ma_dir, &dev).unwrap();
    let expected_p0 = cartpole_returns((0..episodes).map(|e| eval_seed + e + 1), |o| {
        p0.predict("p0", o, true).unwrap()
    });
    let run2 = run_with(&format!(
        "{{checkpoint: {}, checkpoint_policy: p0}}",
        yaml_path(&ma_dir)
    ));
    let mut ma2 = rl_training::build_multi_agent(&run2, &dev).unwrap();
    let e2 = ma2
        .evaluate(eval_env.as_mut(), episodes as usize, true, eval_seed)
        .unwrap();
    assert!(
        (e2.per_agent["1"] - expected_p0).abs() < 1e-9,
        "{e2:?} vs {expected_p0}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// A Recurrent PPO checkpoint acting frozen for two agents of a 3-agent MultiAgentCartPole:
/// each agent carries its own LSTM state (zero at its episode start), so each plays exactly
/// as the checkpoint alone plays its copy's episodes; the states travel in the run's
/// checkpoints (resume is bit-identical).
#[test]
fn a_recurrent_checkpoint_keeps_each_agents_state() {
    let d = tmp("recurrent");
    let dev = Device::flex();
    let rec_dir = d.join("recurrent_ppo");
    // Trained enough to balance for a while, so that its actions depend on its state.
    let y = "algorithm: recurrent_ppo\nenv_id: CartPole-v1\ntotal_timesteps: 8192\nn_envs: 2\nseed: 3\n\
             algo_kwargs: {n_steps: 128, batch_size: 128, n_epochs: 4, lstm_hidden_size: 16}\n";
    let run = RunConfig::from_yaml(y, &[], "recurrent").unwrap();
    let mut alg = rl_training::build(&run, &dev).unwrap();
    while alg.num_timesteps() < 8192 {
        alg.train().unwrap();
    }
    alg.save(&rec_dir).unwrap();
    let mut rec = rl_training::load(&rec_dir, &dev).unwrap();
    let (eval_seed, episodes) = (100, 3);
    // `predict` carries the state within an episode; reset it at every episode start.
    let mut per_copy = Vec::new();
    for copy in [1, 2] {
        let mut env = rl_training::envs::make("CartPole-v1", &Kwargs::new()).unwrap();
        let (mut total, mut obs) = (0.0, vec![0.0; 4]);
        for e in 0..episodes {
            rec.reset_predict_state();
            env.reset(Some(eval_seed + e + copy), None, &mut obs)
                .unwrap();
            loop {
                let s = env
                    .step(&rec.predict(&obs, true).unwrap(), &mut obs)
                    .unwrap();
                total += s.reward;
                if s.terminated || s.truncated {
                    break;
                }
            }
        }
        per_copy.push(total / episodes as f64);
    }
    let y = format!(
        "algorithm: ppo\nenv_id: MultiAgentCartPole\nenv_kwargs: {{num_agents: 3}}\n\
         total_timesteps: 192\nn_envs: 2\nseed: 5\nmulti_agent:\n  \
         policies: {{p0: {{}}, p1: {{checkpoint: {}}}}}\n  \
         policy_mapping: {{\"0\": p0, \"1\": p1, \"2\": p1}}\n\
         algo_kwargs: {{n_steps: 32, batch_size: 32, n_epochs: 1}}\n",
        yaml_path(&rec_dir)
    );
    let run = RunConfig::from_yaml(&y, &[], "frozen-recurrent").unwrap();
    let mut ma = rl_training::build_multi_agent(&run, &dev).unwrap();
    let mut eval_env = rl_training::make_multi_agent_eval_env(&run).unwrap();
    let e = ma
        .evaluate(eval_env.as_mut(), episodes as usize, true, eval_seed)
        .unwrap();
    for (agent, expected) in ["1", "2"].into_iter().zip(&per_copy) {
        assert!(
            (e.per_agent[agent] - expected).abs() < 1e-9,
            "agent {agent} plays the recurrent checkpoint: {} vs {expected} ({per_copy:?})",
            e.per_agent[agent]
        );
    }
    // Resume in the middle of the frozen agents' episodes: the same as going on.
    let metrics = |ma: &mut Box<dyn rl_training::core::multi_agent::MultiAgentAlgorithm>| {
        rl_training::envs::testing::comparable_metrics(&ma.train().unwrap())
    };
    let mut a = rl_training::build_multi_agent(&run, &dev).unwrap();
    let straight: Vec<_> = (0..3).map(|_| metrics(&mut a)).collect();
    let mut b = rl_training::build_multi_agent(&run, &dev).unwrap();
    let mut resumed = vec![metrics(&mut b)];
    let dir = d.join("ma");
    b.save(&dir).unwrap();
    drop(b);
    let mut c = rl_training::load_multi_agent(&dir, &dev).unwrap();
    resumed.extend((0..2).map(|_| metrics(&mut c)));
    assert_eq!(straight, resumed, "metrics differ after resume");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn bad_checkpoint_policies_are_errors_naming_the_policy() {
    let d = tmp("bad");
    let dev = Device::flex();
    let err = |run: &RunConfig| match rl_training::build_multi_agent(run, &dev) {
        Ok(_) => panic!("built"),
        Err(e) => e.to_string(),
    };
    // Another env's spaces.
    let sac_dir = d.join("sac");
    saved("sac", &sac_dir);
    let e = err(&run_with(&format!(
        "{{checkpoint: {}}}",
        yaml_path(&sac_dir)
    )));
    assert!(
        e.contains("multi_agent.policies.p1.checkpoint") && e.contains("observation space"),
        "{e}"
    );
    // No checkpoint there.
    let missing = d.join("nothing");
    let e = err(&run_with(&format!(
        "{{checkpoint: {}}}",
        yaml_path(&missing)
    )));
    assert!(
        e.contains("multi_agent.policies.p1.checkpoint") && e.contains("nothing"),
        "{e}"
    );
    // checkpoint_policy without a checkpoint.
    let e = err(&run_with("{checkpoint_policy: p0}"));
    assert!(
        e.contains("multi_agent.policies.p1.checkpoint_policy"),
        "{e}"
    );
    // A multi-agent checkpoint without that policy.
    let ma_dir = d.join("ma");
    let ma = rl_training::build_multi_agent(&run_with("{}"), &dev).unwrap();
    ma.save(&ma_dir).unwrap();
    let e = err(&run_with(&format!(
        "{{checkpoint: {}, checkpoint_policy: p7}}",
        yaml_path(&ma_dir)
    )));
    assert!(
        e.contains("multi_agent.policies.p1.checkpoint") && e.contains("\"p7\""),
        "{e}"
    );
    // A frozen policy cannot be trained or take algo_kwargs.
    let mut run = run_with(&format!("{{checkpoint: {}}}", yaml_path(&ma_dir)));
    run.multi_agent.as_mut().unwrap().policies_to_train = Some(vec!["p0".into(), "p1".into()]);
    assert!(err(&run).contains("p1"));
    let _ = std::fs::remove_dir_all(&d);
}
