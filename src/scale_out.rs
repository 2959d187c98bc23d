//! Runs whose env runners (IMPALA, APPO asynchronous; PPO, A2C, TRPO synchronous; DQN, SAC
//! filling the learner's replay, Ape-X style; all with `num_env_runners`) or workers
//! (OpenAI-ES, ARS) are processes, over a NATS JetStream broker ([`rl_training_broker`]): the learner
//! side (`rl train CONFIG --broker URL`), the runner side (`rl runner --broker URL --run ID`)
//! and a supervisor of local runner processes (`--local-runners N`).

use rl_training_broker::{Auth, Broker, BrokerConfig};
use rl_training_broker::{BrokerLink, RunInfo, ServeSummary};
use rl_training_core::algorithm::{Algorithm, RlError};
use rl_training_core::burn::tensor::Device;
use rl_training_core::config::{ConfigError, RunConfig};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// Algorithms whose runners can be processes over a broker.
pub const BROKER_ALGORITHMS: &[&str] = &[
    "impala", "appo", "ppo", "a2c", "trpo", "dqn", "sac", "es", "ars",
];

/// How long a runner waits for the learner to post its run (seconds; `RL_RUNNER_JOIN_WAIT_S`
/// overrides it).
const JOIN_WAIT_S: u64 = 60;

/// Connects to the server at `url` for run `run_id`, with credentials from the environment
/// (`RL_NATS_TOKEN`, or `RL_NATS_USER` and `RL_NATS_PASSWORD`; never logged).
pub fn connect(url: &str, run_id: &str) -> Result<Broker, RlError> {
    Broker::connect(&BrokerConfig {
        url: url.to_string(),
        run_id: run_id.to_string(),
        auth: Auth::from_env(),
    })
    .map_err(RlError::from)
}

/// A run id for `run` when none is given: algorithm, env and seed, and the time (letters,
/// digits, `-` and `_` only, as subjects need).
pub fn default_run_id(run: &RunConfig) -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let raw = format!("{}-{}-s{}-{secs}", run.algorithm, run.env_id, run.seed);
    raw.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '-'
            }
        })
        .take(64)
        .collect()
}

fn unsupported(algorithm: &str) -> RlError {
    RlError::Config(ConfigError::new(
        "--broker",
        format!(
            "{algorithm:?} does not run its runners over a broker yet; available: {}",
            BROKER_ALGORITHMS.join(", ")
        ),
    ))
}

/// Builds the learner of `run` with its runners in other processes (see
/// [`BROKER_ALGORITHMS`]).
pub fn build_with_broker(
    run: &RunConfig,
    device: &Device,
    link: &BrokerLink,
) -> Result<Box<dyn Algorithm>, RlError> {
    run.apply_process_settings()?;
    let env = &crate::make_training_env;
    match run.algorithm.to_ascii_lowercase().as_str() {
        "impala" => Ok(Box::new(rl_training_impala::Impala::with_broker(
            run, env, device, link,
        )?)),
        "appo" => Ok(Box::new(rl_training_appo::Appo::with_broker(
            run, env, device, link,
        )?)),
        "ppo" => Ok(Box::new(rl_training_ppo::Ppo::with_broker(
            run, env, device, link,
        )?)),
        "a2c" => Ok(Box::new(rl_training_a2c::A2c::with_broker(
            run, env, device, link,
        )?)),
        "trpo" => Ok(Box::new(rl_training_trpo::Trpo::with_broker(
            run, env, device, link,
        )?)),
        "dqn" => Ok(Box::new(rl_training_dqn::Dqn::with_broker(
            run, env, device, link,
        )?)),
        "sac" => Ok(Box::new(rl_training_sac::Sac::with_broker(
            run, env, device, link,
        )?)),
        "es" => Ok(Box::new(rl_training_es::Es::with_broker(
            run, env, device, link,
        )?)),
        "ars" => Ok(Box::new(rl_training_ars::Ars::with_broker(
            run, env, device, link,
        )?)),
        other => Err(unsupported(other)),
    }
}

/// Loads checkpoint `dir` as a learner whose runners are in other processes.
pub fn load_with_broker(
    dir: &Path,
    device: &Device,
    link: &BrokerLink,
) -> Result<Box<dyn Algorithm>, RlError> {
    let run = crate::checkpoint_config(dir)?;
    run.apply_process_settings()?;
    let env = &crate::make_training_env;
    match run.algorithm.to_ascii_lowercase().as_str() {
        "impala" => Ok(Box::new(rl_training_impala::Impala::load_with_broker(
            dir, env, device, link,
        )?)),
        "appo" => Ok(Box::new(rl_training_appo::Appo::load_with_broker(
            dir, env, device, link,
        )?)),
        "ppo" => Ok(Box::new(rl_training_ppo::Ppo::load_with_broker(
            dir, env, device, link,
        )?)),
        "a2c" => Ok(Box::new(rl_training_a2c::A2c::load_with_broker(
            dir, env, device, link,
        )?)),
        "trpo" => Ok(Box::new(rl_training_trpo::Trpo::load_with_broker(
            dir, env, device, link,
        )?)),
        "dqn" => Ok(Box::new(rl_training_dqn::Dqn::load_with_broker(
            dir, env, device, link,
        )?)),
        "sac" => Ok(Box::new(rl_training_sac::Sac::load_with_broker(
            dir, env, device, link,
        )?)),
        "es" => Ok(Box::new(rl_training_es::Es::load_with_broker(
            dir, env, device, link,
        )?)),
        "ars" => Ok(Box::new(rl_training_ars::Ars::load_with_broker(
            dir, env, device, link,
        )?)),
        other => Err(unsupported(other)),
    }
}

/// A runner process: joins the run `broker` belongs to (its config and algorithm come from
/// the learner's post; another version of rl is refused) and serves batches until the run is
/// over or `stop` is set. `device` overrides the run's device.
pub fn serve_runner(
    broker: &Broker,
    device: Option<&str>,
    stop: &AtomicBool,
) -> Result<ServeSummary, RlError> {
    let board = broker.board()?;
    let wait = std::env::var("RL_RUNNER_JOIN_WAIT_S")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(JOIN_WAIT_S);
    let info = board.info(Duration::from_secs(wait))?;
    let run = joined_run(&info)?;
    run.apply_process_settings()?;
    let dev = rl_training_core::device::parse_device(device.unwrap_or(&run.device))
        .map_err(|e| RlError::Config(ConfigError::new("device", e)))?;
    let env = &crate::make_training_env;
    use rl_training_evolution::remote::serve_worker as worker;
    use rl_training_off_policy::runners::serve_apex_runner as apex;
    use rl_training_on_policy::remote::{serve_runner as serve, serve_sync_runner as sync};
    match info.algorithm.as_str() {
        "impala" => serve::<rl_training_impala::ImpalaLearner>(broker, &run, env, &dev, stop),
        "appo" => serve::<rl_training_appo::AppoLearner>(broker, &run, env, &dev, stop),
        "ppo" => sync::<rl_training_ppo::PpoLearner>(broker, &run, env, &dev, stop),
        "a2c" => sync::<rl_training_a2c::A2cLearner>(broker, &run, env, &dev, stop),
        "trpo" => sync::<rl_training_trpo::TrpoLearner>(broker, &run, env, &dev, stop),
        "dqn" => apex::<rl_training_dqn::DqnLearner>(broker, &run, env, &dev, stop),
        "sac" => apex::<rl_training_sac::SacLearner>(broker, &run, env, &dev, stop),
        "es" => worker::<rl_training_es::EsLearner>(broker, &run, env, stop),
        "ars" => worker::<rl_training_ars::ArsLearner>(broker, &run, env, stop),
        other => Err(unsupported(other)),
    }
}

/// Microseconds per batch of the broker's round: a runner batch of `n_steps × n_envs` rows
/// (observations of `obs_dim`, actions of `act_dim`) encoded, stored (the server's ack
/// awaited), fetched, decoded and acked, `n` times one after another on `broker`'s run
/// (which should be a scratch one). Returns the encoded size and the mean µs.
pub fn broker_overhead(
    broker: &Broker,
    n_steps: usize,
    n_envs: usize,
    obs_dim: usize,
    act_dim: usize,
    n: usize,
) -> Result<(usize, f64), RlError> {
    use rl_training_broker::{BatchMeta, Wire};
    use rl_training_on_policy::actor_learner::RunnerBatch;
    let batch = RunnerBatch {
        buffer: rl_training_core::buffers::RolloutBuffer::new(n_steps, n_envs, obs_dim, act_dim),
        last_obs: vec![0.0; n_envs * obs_dim],
        last_dones: vec![0.0; n_envs],
        chains: Vec::new(),
        episodes: Vec::new(),
        seconds: 0.0,
    };
    let queue = broker.batch_queue(16, Duration::from_secs(30))?;
    let bytes = batch.encode().len();
    let t = std::time::Instant::now();
    for seq in 0..n as u64 {
        let meta = BatchMeta {
            runner: 0,
            seq,
            version: 0,
        };
        queue.send(meta, batch.encode().into(), Duration::from_secs(10))?;
        let d = queue
            .recv(Duration::from_secs(10))?
            .ok_or_else(|| RlError::Other("a sent batch did not come back within 10 s".into()))?;
        RunnerBatch::decode(&d.payload).map_err(RlError::Other)?;
        queue.ack(&d)?;
    }
    Ok((bytes, t.elapsed().as_secs_f64() * 1e6 / n.max(1) as f64))
}

/// The run's config from its info, checked against this binary's version.
pub fn joined_run(info: &RunInfo) -> Result<RunConfig, RlError> {
    info.check_version(&rl_training_broker::protocol_version())?;
    RunConfig::from_yaml(&info.config_yaml, &[], "the run's config (from the broker)")
        .map_err(RlError::Config)
}

/// Runner processes started and kept alive by the learner's process: one that exits (or is
/// killed) while the run goes on is started again and counted in `restarts`. Dropping the
/// supervisor stops them.
pub struct LocalRunners {
    children: Arc<Mutex<Vec<Child>>>,
    stopping: Arc<AtomicBool>,
    monitor: Option<std::thread::JoinHandle<()>>,
    /// Runner processes restarted so far (the learner's `perf/runner_restarts`).
    pub restarts: Arc<AtomicU64>,
}

impl std::fmt::Debug for LocalRunners {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalRunners")
            .field("restarts", &self.restarts.load(Ordering::SeqCst))
            .finish()
    }
}

impl LocalRunners {
    /// Starts `n` processes of `exe runner --broker URL --run ID` (each exits with this
    /// process: `--parent-pid`), with `device` passed on when given.
    pub fn start(
        exe: &Path,
        n: usize,
        url: &str,
        run_id: &str,
        device: Option<&str>,
    ) -> Result<Self, RlError> {
        let mut args: Vec<String> = vec![
            "runner".into(),
            "--broker".into(),
            url.into(),
            "--run".into(),
            run_id.into(),
            "--parent-pid".into(),
            std::process::id().to_string(),
        ];
        if let Some(d) = device {
            args.extend(["--device".into(), d.into()]);
        }
        let exe: PathBuf = exe.to_path_buf();
        let spawn = move || {
            Command::new(&exe)
                .args(&args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .map_err(|e| RlError::Other(format!("starting a runner {}: {e}", exe.display())))
        };
        let children = (0..n).map(|_| spawn()).collect::<Result<Vec<_>, _>>()?;
        let children = Arc::new(Mutex::new(children));
        let stopping = Arc::new(AtomicBool::new(false));
        let restarts = Arc::new(AtomicU64::new(0));
        let monitor = {
            let (children, stopping, restarts) =
                (children.clone(), stopping.clone(), restarts.clone());
            std::thread::spawn(move || {
                while !stopping.load(Ordering::SeqCst) {
                    {
                        let mut cs = children.lock().unwrap_or_else(PoisonError::into_inner);
                        for c in cs.iter_mut() {
                            let exited = matches!(c.try_wait(), Ok(Some(_)));
                            if exited && !stopping.load(Ordering::SeqCst) {
                                match spawn() {
                                    Ok(new) => {
                                        eprintln!(
                                            "runner process {} exited; started {} in its place",
                                            c.id(),
                                            new.id()
                                        );
                                        *c = new;
                                        restarts.fetch_add(1, Ordering::SeqCst);
                                    }
                                    Err(e) => eprintln!("{e}"),
                                }
                            }
                        }
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
            })
        };
        Ok(Self {
            children,
            stopping,
            monitor: Some(monitor),
            restarts,
        })
    }

    /// The process ids of the runners now running.
    pub fn pids(&self) -> Vec<u32> {
        self.children
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(Child::id)
            .collect()
    }
}

impl Drop for LocalRunners {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        if let Some(m) = self.monitor.take() {
            let _ = m.join();
        }
        let mut cs = self.children.lock().unwrap_or_else(PoisonError::into_inner);
        // The learner has posted that the run is over: give the runners a moment to see it
        // and leave on their own, then stop the rest.
        let deadline = std::time::Instant::now() + Duration::from_secs(3);
        while std::time::Instant::now() < deadline
            && cs.iter_mut().any(|c| matches!(c.try_wait(), Ok(None)))
        {
            std::thread::sleep(Duration::from_millis(50));
        }
        for c in cs.iter_mut() {
            if matches!(c.try_wait(), Ok(None)) {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
    }
}
