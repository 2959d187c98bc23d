//! The `rl` binary end to end: train (run directory contents, summary line), eval, resume,
//! envs, check-env, and errors for bad configs.

use std::path::{Path, PathBuf};
use std::process::Command;

fn rl() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rl"))
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rl-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write_config(dir: &Path) -> PathBuf {
    let p = dir.join("tiny.yaml");
    std::fs::write(&p, "algorithm: ppo\nenv_id: CartPole-v1\ntotal_timesteps: 2048\nn_envs: 4\nseed: 1\neval_freq: 1024\nn_eval_episodes: 3\nalgo_kwargs:\n  n_steps: 64\n  batch_size: 128\n  n_epochs: 2\n").unwrap();
    p
}

/// Runs `rl ARGS`, asserting success, and returns the last stdout line as JSON.
fn run_ok(args: &[&str]) -> serde_json::Value {
    let out = rl().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "rl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    last_json(&out.stdout)
}

fn last_json(out: &[u8]) -> serde_json::Value {
    let s = String::from_utf8_lossy(out);
    serde_json::from_str(s.lines().last().expect("output")).unwrap_or_else(|e| panic!("{e}: {s}"))
}

#[test]
fn train_eval_resume() {
    let d = tmp("train");
    let cfg = write_config(&d);
    let run_dir = d.join("run");
    let j = run_ok(&[
        "train",
        cfg.to_str().unwrap(),
        "--quiet",
        "--set",
        "algo_kwargs.learning_rate=lin_1e-3",
        "--out",
        run_dir.to_str().unwrap(),
    ]);
    for k in [
        "total_timesteps",
        "train_seconds",
        "eval_mean_return",
        "eval_std_return",
        "best_eval_mean_return",
        "run_dir",
    ] {
        assert!(j.get(k).is_some(), "summary lacks {k}: {j}");
    }
    assert_eq!(j["total_timesteps"], 2048);
    for f in [
        "config.yaml",
        "progress.csv",
        "progress.jsonl",
        "learning_curve.png",
        "checkpoint/checkpoint.json",
        "checkpoint/model.safetensors",
    ] {
        assert!(run_dir.join(f).exists(), "missing {f}");
    }
    let tb: Vec<_> = std::fs::read_dir(run_dir.join("tb")).unwrap().collect();
    assert_eq!(tb.len(), 1, "one TensorBoard event file");
    let csv = std::fs::read_to_string(run_dir.join("progress.csv")).unwrap();
    for m in [
        "losses/policy_loss",
        "losses/value_loss",
        "losses/entropy",
        "losses/approx_kl",
        "losses/clipfrac",
        "charts/SPS",
        "charts/episodic_return",
        "eval/mean_reward",
    ] {
        assert!(csv.contains(m), "progress.csv lacks {m}");
    }
    let png = std::fs::read(run_dir.join("learning_curve.png")).unwrap();
    assert_eq!(&png[1..4], b"PNG");

    let ck = run_dir.join("checkpoint");
    let j = run_ok(&[
        "eval",
        ck.to_str().unwrap(),
        "--episodes",
        "4",
        "--deterministic",
    ]);
    assert_eq!(j["returns"].as_array().unwrap().len(), 4);

    let run2 = d.join("run2");
    let j = run_ok(&[
        "resume",
        ck.to_str().unwrap(),
        "--total-timesteps",
        "3072",
        "--quiet",
        "--out",
        run2.to_str().unwrap(),
    ]);
    assert_eq!(j["total_timesteps"], 3072);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn bad_config_names_the_key() {
    let d = tmp("bad");
    let cfg = write_config(&d);
    let out = rl()
        .args([
            "train",
            cfg.to_str().unwrap(),
            "--quiet",
            "--set",
            "algo_kwargs.n_stepz=3",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("n_stepz") && err.contains("n_steps"), "{err}");
    let out = rl()
        .args([
            "train",
            cfg.to_str().unwrap(),
            "--quiet",
            "--device",
            "cuda:0",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    if !cfg!(feature = "cuda") {
        assert!(err.contains("cuda"), "{err}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// The kernel level: a pinned one is reported in the summary (and saved), a bad
/// `RL_KERNELS` is an error naming the variable.
#[test]
fn the_kernel_level_is_pinned_reported_and_checked() {
    let d = tmp("kernels");
    let cfg = write_config(&d);
    let run_dir = d.join("run");
    let j = run_ok(&[
        "train",
        cfg.to_str().unwrap(),
        "--quiet",
        "--set",
        "kernels=avx2",
        "--set",
        "total_timesteps=256",
        "--out",
        run_dir.to_str().unwrap(),
    ]);
    assert_eq!(j["kernels"], "avx2", "{j}");
    let saved = std::fs::read_to_string(run_dir.join("config.yaml")).unwrap();
    assert!(saved.contains("kernels: avx2"), "{saved}");
    let out = rl()
        .args(["train", cfg.to_str().unwrap(), "--quiet"])
        .env("RL_KERNELS", "avx1024")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("RL_KERNELS") && err.contains("avx1024"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// The thread count: `num_threads` and `RL_NUM_THREADS` size flex's pool, the summary reports
/// it, and a count that is not one is an error naming where it came from.
#[test]
fn the_thread_count_is_pinned_reported_and_checked() {
    let d = tmp("threads");
    let cfg = write_config(&d);
    let run = |set: &str, var: Option<&str>| {
        let mut c = rl();
        c.args([
            "train",
            cfg.to_str().unwrap(),
            "--quiet",
            "--set",
            "total_timesteps=256",
        ])
        .args(["--set", set, "--out", d.join("run").to_str().unwrap()]);
        if let Some(v) = var {
            c.env("RL_NUM_THREADS", v);
        }
        c.output().unwrap()
    };
    let json = |out: std::process::Output| {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        last_json(&out.stdout)
    };
    assert_eq!(json(run("num_threads=1", None))["threads"], 1);
    assert_eq!(json(run("seed=0", Some("3")))["threads"], 3);
    // The config key wins over the variable.
    assert_eq!(json(run("num_threads=1", Some("3")))["threads"], 1);
    let err = run("seed=0", Some("two"));
    assert!(!err.status.success());
    let e = String::from_utf8_lossy(&err.stderr);
    assert!(e.contains("RL_NUM_THREADS") && e.contains("two"), "{e}");
    let err = run("num_threads=-1", None);
    assert!(!err.status.success());
    let e = String::from_utf8_lossy(&err.stderr);
    assert!(e.contains("num_threads"), "{e}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn envs_and_check_env() {
    let out = rl().arg("envs").output().unwrap();
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    for id in [
        "CartPole-v1",
        "Pendulum-v1",
        "MountainCar-v0",
        "MountainCarContinuous-v0",
        "Acrobot-v1",
        "FrozenLake-v1",
        "CliffWalking-v1",
        "Taxi-v3",
        "CartPoleNoVel-v1",
        "PendulumNoVel-v1",
        "MountainCarContinuousNoVel-v0",
    ] {
        assert!(s.contains(id), "rl envs lacks {id}");
    }
    let out = rl().args(["check-env", "Taxi-v3"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = rl().args(["check-env", "Nope-v0"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("Nope-v0"));
}

#[test]
fn off_policy_train_eval_resume() {
    let d = tmp("offpolicy");
    for (name, body) in [
        (
            "dqn",
            "algorithm: dqn\nenv_id: CartPole-v1\ntotal_timesteps: 600\nseed: 2\nalgo_kwargs:\n  learning_starts: 200\n  train_freq: 50\n  gradient_steps: 5\n  batch_size: 16\n  store_buffer_in_checkpoints: true\n  policy_kwargs: {net_arch: [16]}\n",
        ),
        (
            "sac",
            "algorithm: sac\nenv_id: Pendulum-v1\ntotal_timesteps: 300\nseed: 2\nalgo_kwargs:\n  learning_starts: 100\n  batch_size: 16\n  policy_kwargs: {net_arch: [16]}\n",
        ),
    ] {
        let cfg = d.join(format!("{name}.yaml"));
        std::fs::write(&cfg, body).unwrap();
        let run = d.join(name);
        let j = run_ok(&[
            "train",
            cfg.to_str().unwrap(),
            "--quiet",
            "--out",
            run.to_str().unwrap(),
        ]);
        assert!(j["eval_mean_return"].is_number(), "{name}: {j}");
        let ck = run.join("checkpoint");
        assert!(ck.join("state.json").exists());
        assert_eq!(ck.join("replay.safetensors").exists(), name == "dqn");
        let j = run_ok(&["eval", ck.to_str().unwrap(), "--episodes", "2"]);
        assert!(j.to_string().contains("mean"), "{name}: {j}");
        let run2 = d.join(format!("{name}-resumed"));
        let j = run_ok(&[
            "resume",
            ck.to_str().unwrap(),
            "--total-timesteps",
            "800",
            "--quiet",
            "--out",
            run2.to_str().unwrap(),
        ]);
        assert!(j["total_timesteps"].as_u64().unwrap() >= 800, "{name}: {j}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn record_then_train_bc_and_marwil_from_the_file() {
    let d = tmp("record");
    let cfg = write_config(&d);
    let run_dir = d.join("run");
    run_ok(&[
        "train",
        cfg.to_str().unwrap(),
        "--quiet",
        "--out",
        run_dir.to_str().unwrap(),
    ]);
    let ck = run_dir.join("checkpoint");
    for (file, eps) in [("data.parquet", "0.0"), ("data.npz", "0.5")] {
        let out = d.join(file);
        let j = run_ok(&[
            "record",
            ck.to_str().unwrap(),
            "--episodes",
            "3",
            "--epsilon",
            eps,
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(j["episodes"], 3);
        assert!(j["rows"].as_u64().unwrap() >= 3, "{j}");
        assert!(out.exists());
        for algo in ["bc", "marwil"] {
            let y = d.join(format!("{algo}.yaml"));
            std::fs::write(&y, format!("algorithm: {algo}\nenv_id: CartPole-v1\ntotal_timesteps: 64\neval_freq: 32\nn_eval_episodes: 2\noffline_data: {{input: {}}}\nalgo_kwargs: {{batch_size: 16}}\n", out.display())).unwrap();
            let r = d.join(format!("run-{algo}-{file}"));
            let j = run_ok(&[
                "train",
                y.to_str().unwrap(),
                "--quiet",
                "--out",
                r.to_str().unwrap(),
            ]);
            assert_eq!(j["total_timesteps"], 64, "{algo} {file}: {j}");
            let csv = std::fs::read_to_string(r.join("progress.csv")).unwrap();
            for m in [
                "losses/policy_loss",
                "evaluation/episode_return",
                "charts/SPS",
            ] {
                assert!(csv.contains(m), "{algo}: progress.csv lacks {m}");
            }
        }
    }
    // A file that does not fit the env is an error naming the file and column.
    let y = d.join("bad.yaml");
    std::fs::write(&y, format!("algorithm: bc\nenv_id: Pendulum-v1\ntotal_timesteps: 64\noffline_data: {{input: {}}}\n", d.join("data.parquet").display())).unwrap();
    let out = rl()
        .args(["train", y.to_str().unwrap(), "--quiet"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("data.parquet") && err.contains("obs"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}

/// The commands of a config's comment (`#   rl …` lines), with `rl` as the binary.
fn commented_commands(config: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(config)
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("#   rl "))
        .map(|l| l.split_whitespace().map(String::from).collect())
        .collect()
}

/// Runs `args` in `dir` with `extra` appended (a smaller budget for CI), asserting success.
fn run_in(dir: &Path, args: &[String], extra: &[&str]) -> serde_json::Value {
    let out = rl()
        .current_dir(dir)
        .args(args)
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "rl {args:?} {extra:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    last_json(&out.stdout)
}

#[test]
fn the_offline_configs_comments_work_as_written_in_a_fresh_directory() {
    // A fresh directory with the examples, as a clone has them: no data/ and no runs/.
    let d = tmp("newcomer");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::create_dir_all(d.join("examples/configs")).unwrap();
    for c in [
        "ppo_cartpole",
        "bc_cartpole",
        "marwil_cartpole",
        "cql_cartpole",
    ] {
        let f = format!("examples/configs/{c}.yaml");
        std::fs::copy(root.join(&f), d.join(&f)).unwrap();
    }
    // BC's comment: train PPO, record 50 expert episodes into data/ (which does not exist
    // yet), train BC. Budgets are cut for CI with `--set`; the commands are the comment's.
    let bc = commented_commands(&d.join("examples/configs/bc_cartpole.yaml"));
    assert_eq!(bc.len(), 3, "{bc:?}");
    assert_eq!(bc[0][0], "train");
    run_in(&d, &bc[0], &["--quiet"]);
    let j = run_in(&d, &bc[1], &[]);
    assert_eq!(j["episodes"], 50, "{j}");
    assert!(d.join("data/cartpole_expert.parquet").exists());
    let j = run_in(
        &d,
        &bc[2],
        &[
            "--quiet",
            "--set",
            "total_timesteps=20000",
            "--set",
            "eval_freq=10000",
        ],
    );
    assert!(
        j["eval_mean_return"].as_f64().unwrap() > 100.0,
        "BC on expert data: {j}"
    );
    // MARWIL's comment: expert and noisy recordings, read as a list by the config.
    let marwil = commented_commands(&d.join("examples/configs/marwil_cartpole.yaml"));
    assert_eq!(marwil.len(), 4, "{marwil:?}");
    for c in &marwil[1..3] {
        run_in(&d, c, &[]);
    }
    assert!(d.join("data/cartpole_noisy.parquet").exists());
    let j = run_in(
        &d,
        &marwil[3],
        &[
            "--quiet",
            "--set",
            "total_timesteps=20000",
            "--set",
            "eval_freq=10000",
        ],
    );
    assert!(j["total_timesteps"].as_u64().unwrap() >= 20000, "{j}");
    // The same list through discrete CQL, and a directory and a glob through BC.
    run_in(
        &d,
        &["train".into(), "examples/configs/cql_cartpole.yaml".into()],
        &[
            "--quiet",
            "--set",
            "total_timesteps=2000",
            "--set",
            "eval_freq=0",
        ],
    );
    for input in ["data", "data/cartpole_*.parquet"] {
        run_in(
            &d,
            &["train".into(), "examples/configs/bc_cartpole.yaml".into()],
            &[
                "--quiet",
                "--set",
                "total_timesteps=2000",
                "--set",
                "eval_freq=0",
                "--set",
                &format!("offline_data.input={input}"),
            ],
        );
    }
    // An entry that names nothing is an error naming it.
    let out = rl()
        .current_dir(&d)
        .args([
            "train",
            "examples/configs/bc_cartpole.yaml",
            "--quiet",
            "--set",
            "offline_data.input=data/nothing_*.parquet",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("data/nothing_*.parquet") && err.contains("matches no"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn record_replay_writes_an_off_policy_buffer_for_cql() {
    let d = tmp("replay");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let sac = root.join("examples/configs/sac_pendulum.yaml");
    let run = d.join("sac");
    // Without the buffer in the checkpoint, --replay says which option to set.
    run_ok(&[
        "train",
        sac.to_str().unwrap(),
        "--quiet",
        "--set",
        "total_timesteps=300",
        "--set",
        "eval_freq=0",
        "--set",
        "n_eval_episodes=1",
        "--out",
        d.join("nobuf").to_str().unwrap(),
    ]);
    let out = rl()
        .args([
            "record",
            d.join("nobuf/checkpoint").to_str().unwrap(),
            "--replay",
            "--out",
            d.join("x.parquet").to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("store_buffer_in_checkpoints"));
    // As cql_pendulum.yaml's comment says (a smaller budget).
    run_ok(&[
        "train",
        sac.to_str().unwrap(),
        "--quiet",
        "--set",
        "total_timesteps=1000",
        "--set",
        "algo_kwargs.store_buffer_in_checkpoints=true",
        "--set",
        "eval_freq=0",
        "--set",
        "n_eval_episodes=1",
        "--out",
        run.to_str().unwrap(),
    ]);
    let data = d.join("data/pendulum_sac.parquet");
    let j = run_ok(&[
        "record",
        run.join("checkpoint").to_str().unwrap(),
        "--replay",
        "--out",
        data.to_str().unwrap(),
    ]);
    assert_eq!(j["rows"], 1000, "{j}");
    assert_eq!(j["episodes"], 5, "Pendulum's 200-step episodes: {j}");
    let cql = root.join("examples/configs/cql_pendulum.yaml");
    let j = run_ok(&[
        "train",
        cql.to_str().unwrap(),
        "--quiet",
        "--set",
        &format!("offline_data.input={}", data.display()),
        "--set",
        "total_timesteps=2560",
        "--set",
        "eval_freq=0",
        "--set",
        "n_eval_episodes=1",
        "--set",
        "algo_kwargs.bc_iters=2",
        "--out",
        d.join("cql").to_str().unwrap(),
    ]);
    assert_eq!(j["total_timesteps"], 2560, "{j}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn multi_agent_train_eval_resume() {
    let d = tmp("multi-agent");
    let cfg = d.join("ma.yaml");
    std::fs::write(
        &cfg,
        "algorithm: ppo\nenv_id: MultiAgentCartPole\nenv_kwargs: {num_agents: 2}\ntotal_timesteps: 1024\nn_envs: 4\nseed: 3\neval_freq: 512\nn_eval_episodes: 2\nmulti_agent:\n  policies: {p0: {}, p1: {algo_kwargs: {learning_rate: 1e-3}}}\n  policy_mapping: {\"0\": p0, \"1\": p1}\nalgo_kwargs:\n  n_steps: 64\n  batch_size: 64\n  n_epochs: 2\n",
    )
    .unwrap();
    let run_dir = d.join("run");
    let j = run_ok(&[
        "train",
        cfg.to_str().unwrap(),
        "--quiet",
        "--out",
        run_dir.to_str().unwrap(),
    ]);
    assert_eq!(j["total_timesteps"], 1024);
    let ck = run_dir.join("checkpoint");
    for f in [
        "config.yaml",
        "state.json",
        "policies/p0/model.safetensors",
        "policies/p1/optimizer.safetensors",
    ] {
        assert!(ck.join(f).exists(), "{f} missing");
    }
    let progress = std::fs::read_to_string(run_dir.join("progress.csv")).unwrap();
    for k in [
        "policies/p0/losses/policy_loss",
        "agents/1/episodic_return",
        "eval/policies/p1/mean_reward",
    ] {
        assert!(progress.contains(k), "{k} not logged");
    }
    assert!(run_dir.join("learning_curve.png").exists());
    let e = run_ok(&[
        "eval",
        ck.to_str().unwrap(),
        "--episodes",
        "2",
        "--deterministic",
    ]);
    let per = e["per_agent"].as_object().unwrap();
    assert_eq!(per.len(), 2);
    let sum: f64 = per.values().map(|v| v.as_f64().unwrap()).sum();
    assert!(
        (sum - e["mean_return"].as_f64().unwrap()).abs() < 1e-9,
        "{e}"
    );
    let r = run_ok(&[
        "resume",
        ck.to_str().unwrap(),
        "--total-timesteps",
        "2048",
        "--quiet",
        "--out",
        d.join("resumed").to_str().unwrap(),
    ]);
    assert_eq!(r["total_timesteps"], 2048);
    // A single-agent algorithm that cannot train it says so by name.
    let out = rl()
        .args([
            "train",
            cfg.to_str().unwrap(),
            "--quiet",
            "--set",
            "algorithm=trpo",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("trpo") && err.contains("multi-agent"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}
