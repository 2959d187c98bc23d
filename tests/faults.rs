//! Faults with nothing lost, driving the real `rl` binary: kill -9 while checkpoints are being
//! written, a disk that fills up during a checkpoint write, envs that panic or return NaN
//! inside a threaded vector env (on- and off-policy), and Ctrl-C (SIGINT) during training.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn rl() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rl"))
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rl-faults-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn run_ok(args: &[&str]) -> serde_json::Value {
    let out = rl().args(args).output().unwrap();
    assert!(out.status.success(), "rl {args:?}: {}", text(&out));
    let s = String::from_utf8_lossy(&out.stdout).to_string();
    serde_json::from_str(s.lines().last().expect("output")).unwrap_or_else(|e| panic!("{e}: {s}"))
}

/// Sends `signal` (e.g. `-INT`) to `pid` with the system's `kill`.
fn signal(pid: u32, sig: &str) {
    let st = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success(), "kill {sig} {pid}");
}

/// The newest complete checkpoint directory of a run: the highest `checkpoints/step_N`
/// (temporary `.tmp-PID` and `.old` directories of interrupted writes are not checkpoints).
fn latest_checkpoint(run: &Path) -> Option<PathBuf> {
    let mut steps: Vec<(u64, PathBuf)> = std::fs::read_dir(run.join("checkpoints"))
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            let n = name.strip_prefix("step_")?.parse::<u64>().ok()?;
            Some((n, e.path()))
        })
        .collect();
    steps.sort();
    steps.pop().map(|s| s.1)
}

/// Leftovers of checkpoint writes a kill interrupted.
fn interrupted_writes(run: &Path) -> usize {
    std::fs::read_dir(run.join("checkpoints"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| {
                    let n = e.file_name().to_string_lossy().to_string();
                    n.contains(".tmp-") || n.ends_with(".old")
                })
                .count()
        })
        .unwrap_or(0)
}

/// A small LCG: the kill delays are reproducible without a dev-dependency.
struct Lcg(u64);
impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

#[test]
fn kill_9_during_checkpoint_writes_keeps_the_latest_checkpoint_loadable() {
    let d = tmp("kill");
    // A checkpoint after every 64-step iteration: most of the run's time is spent saving.
    let cfg = write(
        &d,
        "ppo.yaml",
        "algorithm: ppo\nenv_id: CartPole-v1\ntotal_timesteps: 100000000\nn_envs: 4\nseed: 2\neval_freq: 0\ncheckpoint_freq: 64\nalgo_kwargs:\n  n_steps: 16\n  batch_size: 64\n  n_epochs: 1\n",
    );
    let run = d.join("run");
    let (run_s, cfg_s) = (run.to_str().unwrap(), cfg.to_str().unwrap());
    let mut lcg = Lcg(7);
    let mut last_step = 0u64;
    let kills = 30;
    for k in 0..kills {
        let mut cmd = rl();
        match latest_checkpoint(&run) {
            None => cmd.args(["train", cfg_s, "--quiet", "--out", run_s]),
            Some(ck) => cmd.args(["resume", ck.to_str().unwrap(), "--quiet", "--out", run_s]),
        };
        let mut child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(150 + lcg.below(450)));
        if let Ok(Some(st)) = child.try_wait() {
            let out = child.wait_with_output().unwrap();
            panic!("kill {k}: rl exited by itself ({st}): {}", text(&out));
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let ck = latest_checkpoint(&run)
            .unwrap_or_else(|| panic!("kill {k}: no checkpoint in {}", run.display()));
        let step: u64 = ck.file_name().unwrap().to_string_lossy()[5..]
            .parse()
            .unwrap();
        assert!(step >= last_step, "kill {k}: latest checkpoint went back");
        last_step = step;
        // The latest checkpoint loads and evaluates, every time.
        let j = run_ok(&["eval", ck.to_str().unwrap(), "--episodes", "1"]);
        assert!(j["mean_return"].as_f64().unwrap() > 0.0, "kill {k}: {j}");
    }
    let torn = interrupted_writes(&run);
    println!("{kills} kills; last checkpoint at step {last_step}; {torn} writes interrupted");
    // Resuming the latest checkpoint continues the run to a new budget.
    let ck = latest_checkpoint(&run).unwrap();
    let target = last_step + 1024;
    let j = run_ok(&[
        "resume",
        ck.to_str().unwrap(),
        "--total-timesteps",
        &target.to_string(),
        "--quiet",
        "--out",
        run_s,
    ]);
    assert!(j["total_timesteps"].as_u64().unwrap() >= target, "{j}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_full_disk_during_a_checkpoint_write_is_an_error_naming_the_path_and_keeps_the_old_one() {
    let d = tmp("disk");
    // DQN keeps its replay buffer in the checkpoint, so the checkpoint grows with the run while
    // the logs stay small: a file-size limit (RLIMIT_FSIZE) between the two fills "the disk"
    // during the second checkpoint's write.
    let cfg = write(
        &d,
        "dqn.yaml",
        "algorithm: dqn\nenv_id: CartPole-v1\ntotal_timesteps: 500\nn_envs: 1\nseed: 0\neval_freq: 0\nn_eval_episodes: 2\nalgo_kwargs:\n  learning_starts: 100\n  train_freq: 128\n  buffer_size: 100000\n  store_buffer_in_checkpoints: true\n",
    );
    let run = d.join("run");
    let j = run_ok(&[
        "train",
        cfg.to_str().unwrap(),
        "--quiet",
        "--out",
        run.to_str().unwrap(),
    ]);
    let ck = PathBuf::from(j["checkpoint"].as_str().unwrap());
    let sizes = |dir: &Path| -> u64 {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .max()
            .unwrap()
    };
    let before_largest = sizes(&ck);
    let before: Vec<(String, Vec<u8>)> = std::fs::read_dir(&ck)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().to_string(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    // Resume into the same run directory for 20x the steps under a limit of 4x the largest
    // file: the buffer file of the new checkpoint does not fit. `trap '' XFSZ` makes the write
    // fail with EFBIG instead of the signal killing the process.
    let limit_kb = (4 * before_largest).div_ceil(1024).max(64);
    let script = format!(
        "trap '' XFSZ; ulimit -f {limit_kb}; exec \"$0\" resume \"$1\" --total-timesteps 10000 --quiet --out \"$2\""
    );
    let out = Command::new("bash")
        .args([
            "-c",
            &script,
            env!("CARGO_BIN_EXE_rl"),
            ck.to_str().unwrap(),
            run.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        err.contains(&format!("cannot save checkpoint {}", ck.display()))
            && err.contains("too large"),
        "the error names the checkpoint path and the failure: {err}"
    );
    // The previous checkpoint is intact: same files, same bytes, and it loads.
    for (name, bytes) in &before {
        assert_eq!(
            &std::fs::read(ck.join(name)).unwrap(),
            bytes,
            "{name} changed"
        );
    }
    run_ok(&["eval", ck.to_str().unwrap(), "--episodes", "1"]);
    std::fs::remove_dir_all(&d).unwrap();
}

/// Trains `yaml` and returns the failed run's output (the run must fail with exit code 1).
fn failing_run(name: &str, yaml: &str) -> String {
    let d = tmp(name);
    let cfg = write(&d, "cfg.yaml", yaml);
    let out = rl()
        .args([
            "train",
            cfg.to_str().unwrap(),
            "--quiet",
            "--out",
            d.join("run").to_str().unwrap(),
        ])
        .output()
        .unwrap();
    // Exit code 1 from `main`, not an abort (which would be a signal, or code 101 for a
    // panic that reached the top).
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    std::fs::remove_dir_all(&d).unwrap();
    String::from_utf8_lossy(&out.stderr).to_string()
}

#[test]
fn envs_that_panic_or_return_nan_in_a_threaded_vec_env_end_the_run_with_a_named_error() {
    // (case, algorithm, inner env, fault, step, env index, envs, threads, algo_kwargs, message)
    let cases = [
        (
            "ppo-panic",
            "ppo",
            "CartPole-v1",
            "panic",
            50,
            3,
            4,
            2,
            "{n_steps: 32, batch_size: 64}",
            "panicked: FaultInjection-v0: injected panic at step 50",
        ),
        (
            "ppo-nan",
            "ppo",
            "CartPole-v1",
            "nan_observation",
            20,
            1,
            4,
            2,
            "{n_steps: 32, batch_size: 64}",
            "observation element 0 is NaN",
        ),
        (
            "sac-nan",
            "sac",
            "Pendulum-v1",
            "nan_reward",
            30,
            1,
            2,
            2,
            "{learning_starts: 10, batch_size: 16}",
            "reward is NaN",
        ),
        (
            "dqn-panic",
            "dqn",
            "CartPole-v1",
            "panic",
            40,
            2,
            4,
            4,
            "{learning_starts: 10}",
            "injected panic at step 40",
        ),
    ];
    for (name, algo, inner, fault, step, index, n_envs, threads, kwargs, what) in cases {
        // `instance: k` arms the k-th env made, which is training env k.
        let e = failing_run(
            name,
            &format!(
                "algorithm: {algo}\nenv_id: FaultInjection-v0\nenv_kwargs: {{env: {inner}, fault: {fault}, at_step: {step}, instance: {index}}}\ntotal_timesteps: 4096\nn_envs: {n_envs}\nvec_env_threads: {threads}\nseed: 0\neval_freq: 0\nalgo_kwargs: {kwargs}\n"
            ),
        );
        let at = format!("env {index} (FaultInjection-v0) of the vector env, at step {step}");
        assert!(e.contains(&at) && e.contains(what), "{name}: {e}");
    }
}

#[test]
fn ctrl_c_saves_a_checkpoint_that_resumes() {
    let d = tmp("sigint");
    let cfg = write(
        &d,
        "ppo.yaml",
        "algorithm: ppo\nenv_id: CartPole-v1\ntotal_timesteps: 100000000\nn_envs: 4\nseed: 1\neval_freq: 0\nalgo_kwargs:\n  n_steps: 64\n  batch_size: 128\n  n_epochs: 2\n",
    );
    let run = d.join("run");
    let child = rl()
        .args([
            "train",
            cfg.to_str().unwrap(),
            "--quiet",
            "--out",
            run.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until training is under way (the run directory's config is written first).
    let t0 = Instant::now();
    while !run.join("config.yaml").exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "training never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(1500));
    signal(child.id(), "-INT");
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out));
    let ck = run.join("checkpoint");
    assert!(
        err.contains("interrupted at") && err.contains(&format!("rl resume {}", ck.display())),
        "{err}"
    );
    assert!(run.join("learning_curve.png").exists());
    let saved: u64 = err
        .split("interrupted at ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no step count in {err}"));
    assert!(saved > 0, "{err}");
    let target = saved + 512;
    let j = run_ok(&[
        "resume",
        ck.to_str().unwrap(),
        "--total-timesteps",
        &target.to_string(),
        "--quiet",
        "--out",
        d.join("run2").to_str().unwrap(),
    ]);
    assert!(j["total_timesteps"].as_u64().unwrap() >= target, "{j}");
    std::fs::remove_dir_all(&d).unwrap();
}
