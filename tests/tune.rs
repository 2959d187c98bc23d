//! `rl tune` end to end, with real trial processes: a grid finds the better learning rate, ASHA
//! stops poor trials early and still finds a solving one, bad search spaces are errors naming
//! their path, and an experiment killed with `kill -9` resumes without rerunning finished
//! trials.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn rl() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rl"))
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rl-tune-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// rl-baselines3-zoo's PPO CartPole-v1 settings with `extra` (search spaces, `tune:`) added.
fn zoo_ppo(total: u64, extra: &str) -> String {
    format!(
        "algorithm: ppo\nenv_id: CartPole-v1\ntotal_timesteps: {total}\nn_envs: 8\neval_freq: 10000\n\
         n_eval_episodes: 10\nalgo_kwargs:\n  n_steps: 32\n  batch_size: 256\n  n_epochs: 20\n  \
         gamma: 0.98\n  gae_lambda: 0.8\n  clip_range: lin_0.2\n  ent_coef: 0.0\n  \
         policy_kwargs: {{net_arch: [64, 64], activation_fn: tanh}}\n{extra}"
    )
}

/// Runs `rl tune CONFIG --out DIR --quiet`; returns the summary line.
fn tune(dir: &Path, yaml: &str) -> Value {
    let cfg = dir.join("search.yaml");
    std::fs::write(&cfg, yaml).unwrap();
    let out = rl()
        .args(["tune", cfg.to_str().unwrap(), "--quiet", "--out"])
        .arg(dir.join("exp"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "rl tune: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(s.lines().last().expect("summary")).unwrap()
}

/// results.csv as rows of `column → value`.
fn results(exp: &Path) -> Vec<std::collections::BTreeMap<String, String>> {
    let text = std::fs::read_to_string(exp.join("results.csv")).unwrap();
    let mut lines = text.lines();
    let header: Vec<String> = lines.next().unwrap().split(',').map(String::from).collect();
    lines
        .map(|l| {
            header
                .iter()
                .cloned()
                .zip(l.split(',').map(String::from))
                .collect()
        })
        .collect()
}

fn state(exp: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(exp.join("experiment_state.json")).unwrap())
        .unwrap()
}

#[test]
fn a_grid_over_the_learning_rate_finds_the_larger_one_best() {
    let d = tmp("grid");
    let yaml = zoo_ppo(
        20_000,
        "seed: {grid_search: [0, 1]}\ntune: {metric: eval/mean_reward, mode: max, max_concurrent_trials: 2}\n",
    )
    .replace("algo_kwargs:\n", "algo_kwargs:\n  learning_rate: {grid_search: [1.0e-6, 1.0e-3]}\n");
    let j = tune(&d, &yaml);
    assert_eq!(j["trials"], 4);
    let exp = d.join("exp");
    let rows = results(&exp);
    assert_eq!(rows.len(), 4);
    for r in &rows {
        assert_eq!(r["status"], "TERMINATED", "{r:?}");
        assert!(r["timesteps"].parse::<u64>().unwrap() >= 20_000, "{r:?}");
    }
    // Both 1e-3 trials beat both 1e-6 trials; the best is one of them.
    let last =
        |r: &std::collections::BTreeMap<String, String>| r["last_metric"].parse::<f64>().unwrap();
    let (good, bad): (Vec<_>, Vec<_>) = rows
        .iter()
        .partition(|r| r["algo_kwargs.learning_rate"] == "0.001");
    assert_eq!((good.len(), bad.len()), (2, 2));
    let worst_good = good.iter().map(|r| last(r)).fold(f64::INFINITY, f64::min);
    let best_bad = bad
        .iter()
        .map(|r| last(r))
        .fold(f64::NEG_INFINITY, f64::max);
    assert!(worst_good > best_bad, "{rows:?}");
    assert!(
        j["best_params"]
            .as_str()
            .unwrap()
            .contains("learning_rate=0.001"),
        "{j}"
    );
    let best: Value = serde_saphyr_from(&exp.join("best_config.yaml"));
    assert_eq!(
        best["algo_kwargs"]["learning_rate"],
        serde_json::json!(1e-3)
    );
    assert!(best.get("tune").is_none());
    // The best checkpoint loads and evaluates.
    let out = rl()
        .args(["eval"])
        .arg(exp.join("best_checkpoint"))
        .args(["--episodes", "2"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(exp.join("trials.png").exists());
}

fn serde_saphyr_from(p: &Path) -> Value {
    rl_yaml(&std::fs::read_to_string(p).unwrap())
}

/// Parses YAML through the `rl` crate's own reader (the run config), as JSON.
fn rl_yaml(text: &str) -> Value {
    let run =
        rl_training::core::config::RunConfig::from_yaml(text, &[], "best_config.yaml").unwrap();
    serde_json::to_value(run).unwrap()
}

#[test]
fn asha_stops_poor_trials_early_and_still_solves() {
    let d = tmp("asha");
    // 8 trials: the zoo learning rate and a useless one, 4 seeds each; the good ones first.
    let yaml = zoo_ppo(
        100_000,
        "seed: {grid_search: [0, 1, 2, 3]}\ntune:\n  max_concurrent_trials: 2\n  \
         scheduler: {type: asha, grace_period: 20000, reduction_factor: 2}\n",
    )
    .replace(
        "algo_kwargs:\n",
        "algo_kwargs:\n  learning_rate: {grid_search: [lin_1e-3, 1.0e-6]}\n",
    );
    let j = tune(&d, &yaml);
    assert_eq!(j["trials"], 8);
    let rows = results(&d.join("exp"));
    let total: u64 = rows
        .iter()
        .map(|r| r["timesteps"].parse::<u64>().unwrap())
        .sum();
    let fifo = 8 * 100_000;
    // Every 1e-6 trial is cut at its first rung (20k of 100k; it stops at the end of the
    // iteration in progress when asked), so ASHA takes at most 65% of FIFO's env steps
    // (4 × 100k + 4 × ~21k ≈ 485k, against 800k).
    assert!(
        total * 100 <= fifo * 65,
        "ASHA took {total} env steps of FIFO's {fifo}: {rows:?}"
    );
    let stopped = rows.iter().filter(|r| r["status"] == "STOPPED").count();
    assert!(stopped >= 4, "{rows:?}");
    let best = j["best_last_metric"].as_f64().unwrap();
    assert!(best >= 475.0, "best trial {best}: {rows:?}");
}

#[test]
fn bad_search_spaces_are_errors_naming_their_path() {
    let d = tmp("bad");
    for (extra, words) in [
        (
            "algo_kwargs:\n  learning_rat: {grid_search: [1.0e-3]}\n",
            "learning_rat",
        ),
        (
            "algo_kwargs:\n  learning_rate: {grid_search: []}\n",
            "algo_kwargs.learning_rate",
        ),
        (
            "algo_kwargs:\n  learning_rate: {uniform: [1.0, 0.1]}\n",
            "lo 1 > hi 0.1",
        ),
        ("tune: {scheduler: {type: hyperband}}\n", "tune.scheduler"),
    ] {
        let cfg = d.join("bad.yaml");
        std::fs::write(
            &cfg,
            format!("algorithm: ppo\nenv_id: CartPole-v1\ntotal_timesteps: 1000\n{extra}"),
        )
        .unwrap();
        let out = rl()
            .args(["tune", cfg.to_str().unwrap(), "--quiet", "--out"])
            .arg(d.join("exp"))
            .output()
            .unwrap();
        assert!(!out.status.success());
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(
            e.contains(words) && e.contains("bad.yaml")
                || e.contains(words) && e.contains("trial_0000"),
            "{extra}: {e}"
        );
        assert!(
            !d.join("exp").join("experiment_state.json").exists(),
            "{extra}"
        );
    }
}

#[test]
fn a_killed_experiment_resumes_without_rerunning_finished_trials() {
    let d = tmp("kill");
    let cfg = d.join("search.yaml");
    // Four short trials, one at a time, each saving a checkpoint every 2048 steps.
    let yaml = zoo_ppo(
        30_000,
        "checkpoint_freq: 2048\nseed: {grid_search: [0, 1, 2, 3]}\ntune: {max_concurrent_trials: 1}\n",
    );
    std::fs::write(&cfg, yaml).unwrap();
    let exp = d.join("exp");
    let mut child = rl()
        .args(["tune", cfg.to_str().unwrap(), "--quiet", "--out"])
        .arg(&exp)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until one trial has finished and the next is past its first checkpoint.
    let t0 = Instant::now();
    loop {
        assert!(t0.elapsed() < Duration::from_secs(300), "no progress");
        std::thread::sleep(Duration::from_millis(100));
        let Ok(text) = std::fs::read_to_string(exp.join("experiment_state.json")) else {
            continue;
        };
        let Ok(s) = serde_json::from_str::<Value>(&text) else {
            continue;
        };
        let trials = s["trials"].as_array().unwrap();
        let done = trials
            .iter()
            .filter(|t| t["status"] == "TERMINATED")
            .count();
        let running = trials.iter().find(|t| t["status"] == "RUNNING");
        if done >= 1 && running.is_some_and(|t| t["timesteps"].as_u64().unwrap() >= 4096) {
            break;
        }
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let before = state(&exp);
    let finished: Vec<usize> = before["trials"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["status"] == "TERMINATED")
        .map(|t| t["id"].as_u64().unwrap() as usize)
        .collect();
    // The orphaned trial sees its pipe close, checkpoints and exits; then resume.
    std::thread::sleep(Duration::from_secs(3));
    let out = rl()
        .args(["tune", "--quiet", "--resume"])
        .arg(&exp)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after = state(&exp);
    let rows = results(&exp);
    // Every trial once, all finished at their budget.
    let mut ids: Vec<&str> = rows.iter().map(|r| r["trial_id"].as_str()).collect();
    ids.dedup();
    assert_eq!(
        ids,
        ["trial_0000", "trial_0001", "trial_0002", "trial_0003"]
    );
    for r in &rows {
        assert_eq!(r["status"], "TERMINATED", "{r:?}");
        assert!(r["timesteps"].parse::<u64>().unwrap() >= 30_000, "{r:?}");
    }
    for t in after["trials"].as_array().unwrap() {
        let id = t["id"].as_u64().unwrap() as usize;
        let name = format!("trial_{id:04}");
        if finished.contains(&id) {
            // Not rerun: one run directory only.
            assert_eq!(t["segments"], 1, "{name}");
            assert!(!exp.join(&name).join("run_1").exists(), "{name}");
        }
    }
    // The interrupted trial went on from a checkpoint (a second run directory) instead of
    // starting over.
    let resumed = after["trials"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["segments"].as_u64().unwrap() == 2)
        .count();
    assert_eq!(resumed, 1, "{after}");
}

#[test]
fn the_example_search_is_valid() {
    // examples/configs/tune_ppo_cartpole.yaml: 4 draws × 2 seeds, each trial config builds.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text =
        std::fs::read_to_string(root.join("examples/configs/tune_ppo_cartpole.yaml")).unwrap();
    let tree: Value = serde_saphyr::from_str(&text).unwrap();
    let validate = |run: &rl_training::core::config::RunConfig| {
        rl_training::build(run, &rl_training::core::burn::tensor::Device::flex()).map(|_| ())
    };
    let s = rl_training::tune::ExperimentState::new(tree, &validate).unwrap();
    assert_eq!(s.trials.len(), 8);
    for t in &s.trials {
        let lr = t.variant.config["algo_kwargs"]["learning_rate"]
            .as_f64()
            .unwrap();
        assert!((1e-5..3e-3).contains(&lr), "{lr}");
        let epochs = &t.variant.config["algo_kwargs"]["n_epochs"];
        assert!(*epochs == serde_json::json!(10) || *epochs == serde_json::json!(20));
    }
}

#[test]
fn pbt_restores_a_better_trials_checkpoint_with_perturbed_hyperparameters() {
    let d = tmp("pbt");
    // Four trials, two with a useful learning rate and two with a useless one; every 10k env
    // steps the worst takes the best one's checkpoint with its learning rate times 1.2 or 0.8.
    let yaml = zoo_ppo(
        40_000,
        "seed: {grid_search: [0, 1]}\ntune:\n  max_concurrent_trials: 4\n  scheduler:\n    \
         type: pbt\n    perturbation_interval: 10000\n    resample_probability: 0.0\n    \
         hyperparam_mutations: {algo_kwargs.learning_rate: {loguniform: [1.0e-5, 1.0e-2]}}\n",
    )
    .replace(
        "algo_kwargs:\n",
        "algo_kwargs:\n  learning_rate: {grid_search: [1.0e-3, 1.0e-6]}\n",
    );
    tune(&d, &yaml);
    let exp = d.join("exp");
    let s = state(&exp);
    let trials = s["trials"].as_array().unwrap();
    let exploited: Vec<&Value> = trials
        .iter()
        .filter(|t| !t["perturbations"].as_array().unwrap().is_empty())
        .collect();
    assert!(!exploited.is_empty(), "no exploit: {s}");
    for t in exploited {
        let name = format!("trial_{:04}", t["id"].as_u64().unwrap());
        let (_, donor, params) = serde_json::from_value::<(u64, usize, Vec<(String, Value)>)>(
            t["perturbations"]
                .as_array()
                .unwrap()
                .last()
                .unwrap()
                .clone(),
        )
        .unwrap();
        assert_ne!(donor as u64, t["id"].as_u64().unwrap());
        let lr = params[0].1.as_f64().unwrap();
        assert_eq!(params[0].0, "algo_kwargs.learning_rate");
        // The trial's config and the checkpoint it went on from carry the new value...
        assert_eq!(
            t["variant"]["config"]["algo_kwargs"]["learning_rate"].as_f64(),
            Some(lr)
        );
        // ...and the restored learner trained with it: every update of the run after the
        // last exploit logs it.
        let seg = t["segments"].as_u64().unwrap() - 1;
        let log =
            std::fs::read_to_string(exp.join(&name).join(format!("run_{seg}/progress.jsonl")))
                .unwrap();
        let logged: Vec<f64> = log
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok()?["charts/learning_rate"].as_f64())
            .collect();
        assert!(!logged.is_empty(), "{name}");
        for v in logged {
            assert!(
                (v - lr).abs() <= 1e-9 * lr,
                "{name}: logged {v}, perturbed {lr}"
            );
        }
    }
}

#[test]
fn tpe_proposes_the_trials_after_the_startup_ones() {
    let d = tmp("tpe");
    let yaml = zoo_ppo(
        10_000,
        "tune: {search_alg: tpe, n_startup_trials: 3, num_samples: 5, max_concurrent_trials: 1}\n",
    )
    .replace(
        "algo_kwargs:\n",
        "algo_kwargs:\n  learning_rate: {loguniform: [1.0e-6, 1.0e-2]}\n",
    );
    let j = tune(&d, &yaml);
    assert_eq!(j["trials"], 5);
    let exp = d.join("exp");
    let s = state(&exp);
    for t in s["trials"].as_array().unwrap() {
        let id = t["id"].as_u64().unwrap();
        // One trial at a time: the first three are random draws, the rest TPE's proposals.
        assert_eq!(t["proposed"], id >= 3, "{t}");
        let lr = t["variant"]["config"]["algo_kwargs"]["learning_rate"]
            .as_f64()
            .unwrap();
        assert!((1e-6..=1e-2).contains(&lr), "{lr}");
        // The run used the proposed value: its config.yaml says so.
        let used =
            std::fs::read_to_string(exp.join(format!("trial_{id:04}/run_0/config.yaml"))).unwrap();
        let used = rl_yaml(&used);
        assert_eq!(used["algo_kwargs"]["learning_rate"].as_f64(), Some(lr));
    }
    assert_eq!(results(&exp).len(), 5);
}

/// A small PPO CartPole (or FaultInjection) config for the tests of the experiment's rules.
fn small(env: &str, total: u64, extra: &str) -> String {
    format!(
        "algorithm: ppo\nenv_id: {env}\ntotal_timesteps: {total}\nn_envs: 2\neval_freq: 1024\n\
         n_eval_episodes: 2\nalgo_kwargs: {{n_steps: 64, batch_size: 64, n_epochs: 1}}\n{extra}"
    )
}

#[test]
fn stop_conditions_end_trials_and_failed_trials_are_retried_then_errored() {
    let d = tmp("rules");
    // A trial whose env panics at its 300th step fails, is retried once (max_failures: 1),
    // fails again and is errored; the other trial's env never reaches its fault; both stop
    // at 2048 env steps of 20000 by the `stop` condition.
    let yaml = small(
        "FaultInjection-v0",
        20_000,
        "env_kwargs: {fault: panic, instance: 0, at_step: {grid_search: [300, 100000000]}}\n\
         tune: {max_failures: 1, max_concurrent_trials: 1, stop: {timesteps: 2048}}\n",
    );
    tune(&d, &yaml);
    let rows = results(&d.join("exp"));
    assert_eq!(
        (rows[0]["status"].as_str(), rows[0]["failures"].as_str()),
        ("ERROR", "2"),
        "{rows:?}"
    );
    assert_eq!(rows[1]["status"], "TERMINATED", "{rows:?}");
    let t: u64 = rows[1]["timesteps"].parse().unwrap();
    assert!((2048..20_000).contains(&t), "{rows:?}");
    // The failed runs' errors are in the trial's log.
    let log = std::fs::read_to_string(d.join("exp/trial_0000/output.log")).unwrap();
    assert!(log.matches("error").count() >= 2, "{log}");
}

#[test]
fn the_time_budget_stops_the_experiment_with_its_trials_checkpointed() {
    let d = tmp("budget");
    let yaml = small(
        "CartPole-v1",
        10_000_000,
        "seed: {grid_search: [0, 1, 2]}\ntune: {time_budget_s: 3, max_concurrent_trials: 2}\n",
    );
    let t0 = Instant::now();
    tune(&d, &yaml);
    assert!(t0.elapsed() < Duration::from_secs(60), "{:?}", t0.elapsed());
    let exp = d.join("exp");
    let rows = results(&exp);
    // The two running trials stopped with a checkpoint, to go on with --resume; the third
    // never started.
    assert_eq!(rows[0]["status"], "RUNNING", "{rows:?}");
    assert_eq!(rows[1]["status"], "RUNNING", "{rows:?}");
    assert_eq!(rows[2]["status"], "PENDING", "{rows:?}");
    for id in 0..2 {
        assert!(
            exp.join(format!("trial_{id:04}/run_0/checkpoint/state.json"))
                .exists()
        );
    }
}
