//! The `rl` command-line interface.

use clap::{Parser, Subcommand};
use rl_training::core::algorithm::RlError;
use rl_training::core::config::{ConfigError, RunConfig};
use rl_training::core::device::parse_device;
use rl_training::core::runner::{default_run_dir, run_training_until};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set by the first Ctrl-C (SIGINT) or SIGTERM: training stops after the current iteration
/// and saves a checkpoint. A second signal exits at once (checkpoint writes are atomic, so
/// that loses only the iteration in progress).
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Exit code of an interrupted run (128 + SIGINT, as shells report it).
const EXIT_INTERRUPTED: u8 = 130;

// Training allocates and frees many short-lived tensor buffers; mimalloc reuses them instead of
// returning memory to the OS on every free as glibc's default thresholds do (measured in the
// README's performance section).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "rl", version, about = "Deep reinforcement learning on burn")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Train from a YAML config.
    Train {
        /// The run config (see examples/configs).
        config: PathBuf,
        /// Override a config value: key=value, dotted keys allowed (algo_kwargs.n_steps=64).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Run seed (overrides the config).
        #[arg(long)]
        seed: Option<u64>,
        /// Device: flex, wgpu[:N] or cuda[:N] (overrides the config).
        #[arg(long)]
        device: Option<String>,
        /// Run directory (default: runs/<algo>_<env>_seed<seed>_<time>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// No progress bar.
        #[arg(long)]
        quiet: bool,
        #[command(flatten)]
        scale: ScaleOut,
    },
    /// Join a run as an env runner process: its config, envs and policy shape come from the
    /// learner's post on the broker (IMPALA, APPO; OpenAI-ES and ARS workers).
    Runner {
        /// The broker: nats://HOST:PORT (credentials from RL_NATS_TOKEN, or RL_NATS_USER and
        /// RL_NATS_PASSWORD).
        #[arg(long)]
        broker: String,
        /// The run id the learner printed.
        #[arg(long)]
        run: String,
        /// Device (default: the run's).
        #[arg(long)]
        device: Option<String>,
        /// Exit when this process is no longer the parent (set by --local-runners).
        #[arg(long, hide = true)]
        parent_pid: Option<u32>,
    },
    /// The broker's cost per batch: `n` batches of a runner's size sent and taken (stored,
    /// fetched and acked) one after another on a scratch run (`cargo xtask bench` runs it).
    #[command(hide = true)]
    BrokerOverhead {
        /// nats://HOST:PORT.
        #[arg(long)]
        broker: String,
        /// Steps per env in a batch.
        #[arg(long)]
        n_steps: usize,
        /// Envs per runner.
        #[arg(long)]
        n_envs: usize,
        /// Observation length.
        #[arg(long)]
        obs_dim: usize,
        /// Action length.
        #[arg(long)]
        act_dim: usize,
        /// Batches to time.
        #[arg(long, default_value_t = 1000)]
        n: usize,
    },
    /// Evaluate a checkpoint.
    Eval {
        /// Checkpoint directory.
        checkpoint: PathBuf,
        /// Number of episodes.
        #[arg(long, default_value_t = 10)]
        episodes: usize,
        /// Take the most likely action instead of sampling.
        #[arg(long)]
        deterministic: bool,
        /// Seed of the evaluation env (default: the run's evaluation seed).
        #[arg(long)]
        seed: Option<u64>,
        /// Device (default: the checkpoint's).
        #[arg(long)]
        device: Option<String>,
    },
    /// Continue training from a checkpoint.
    Resume {
        /// Checkpoint directory.
        checkpoint: PathBuf,
        /// New total budget of env steps (default: the saved one).
        #[arg(long)]
        total_timesteps: Option<u64>,
        /// Device (default: the checkpoint's).
        #[arg(long)]
        device: Option<String>,
        /// Run directory for the continued run.
        #[arg(long)]
        out: Option<PathBuf>,
        /// No progress bar.
        #[arg(long)]
        quiet: bool,
        #[command(flatten)]
        scale: ScaleOut,
    },
    /// Record episodes of a trained policy into a dataset (.parquet or .npz), or with
    /// --replay write an off-policy checkpoint's replay buffer.
    Record {
        /// Checkpoint directory.
        checkpoint: PathBuf,
        /// Write the checkpoint's replay buffer (SAC/DQN trained with
        /// algo_kwargs.store_buffer_in_checkpoints: true) in time order instead of recording
        /// new episodes.
        #[arg(long, conflicts_with_all = ["epsilon", "stochastic", "seed"])]
        replay: bool,
        /// Number of episodes.
        #[arg(long, default_value_t = 10)]
        episodes: usize,
        /// Probability of a uniformly random action per step (mixed-quality data).
        #[arg(long, default_value_t = 0.0)]
        epsilon: f64,
        /// Sample the policy's actions instead of taking the most likely.
        #[arg(long)]
        stochastic: bool,
        /// Seed of the env resets and random actions (default: the run's evaluation seed).
        #[arg(long)]
        seed: Option<u64>,
        /// Output file; the extension picks the format.
        #[arg(long)]
        out: PathBuf,
        /// Device (default: the checkpoint's).
        #[arg(long)]
        device: Option<String>,
    },
    /// Hyperparameter search over a config's search spaces (its `tune:` section says how):
    /// trials run as child processes, each an ordinary run directory.
    Tune {
        /// The run config with search spaces (`{grid_search: [...]}`, `{loguniform: [lo,
        /// hi]}` …) and a `tune:` section.
        #[arg(required_unless_present = "resume")]
        config: Option<PathBuf>,
        /// Experiment directory (default: runs/tune_<config name>_<time>).
        #[arg(long, conflicts_with = "resume")]
        out: Option<PathBuf>,
        /// Continue the experiment saved in this directory (finished trials are kept,
        /// interrupted ones resume from their checkpoints).
        #[arg(long, conflicts_with = "config")]
        resume: Option<PathBuf>,
        /// No live table.
        #[arg(long)]
        quiet: bool,
    },
    /// List the registered environments.
    Envs,
    /// Check an environment against the Env contract.
    CheckEnv {
        /// Environment id.
        id: String,
        /// Random steps to run.
        #[arg(long, default_value_t = 1000)]
        steps: usize,
    },
}

/// Runners in other processes, over a NATS JetStream broker (IMPALA, APPO, OpenAI-ES, ARS).
#[derive(clap::Args, Debug, Clone)]
struct ScaleOut {
    /// Take the runners' batches from this broker (nats://HOST:PORT) instead of runner
    /// threads; runners join with `rl runner --broker URL --run ID`. Credentials come from
    /// RL_NATS_TOKEN, or RL_NATS_USER and RL_NATS_PASSWORD.
    #[arg(long)]
    broker: Option<String>,
    /// The run id runners join (default: algorithm, env, seed and time).
    #[arg(long = "run-id", requires = "broker")]
    run_id: Option<String>,
    /// Start this many runner processes here and restart any that dies.
    #[arg(long, requires = "broker")]
    local_runners: Option<usize>,
}

/// The learner's end of a broker run: the link the algorithm takes its batches through and
/// the local runner processes (dropped after the algorithm, which posts the run's end).
struct BrokerSide {
    link: rl_training::broker::BrokerLink,
    local: Option<rl_training::scale_out::LocalRunners>,
}

/// Connects `scale.broker` for `run` and starts the local runners.
fn broker_side(
    scale: &ScaleOut,
    run: &RunConfig,
    device: Option<&str>,
) -> Result<Option<BrokerSide>, RlError> {
    let Some(url) = &scale.broker else {
        return Ok(None);
    };
    let run_id = scale
        .run_id
        .clone()
        .unwrap_or_else(|| rl_training::scale_out::default_run_id(run));
    let broker = rl_training::scale_out::connect(url, &run_id)?;
    eprintln!("run {run_id} on {url}: runners join with `rl runner --broker {url} --run {run_id}`");
    let (local, restarts) = match scale.local_runners.filter(|&n| n > 0) {
        None => (None, Default::default()),
        Some(n) => {
            let exe = std::env::current_exe()
                .map_err(|e| RlError::Other(format!("the rl binary's path: {e}")))?;
            let l = rl_training::scale_out::LocalRunners::start(&exe, n, url, &run_id, device)?;
            let r = l.restarts.clone();
            (Some(l), r)
        }
    };
    Ok(Some(BrokerSide {
        link: rl_training::broker::BrokerLink { broker, restarts },
        local,
    }))
}

fn main() -> ExitCode {
    if let Err(e) = ctrlc::set_handler(|| {
        if INTERRUPTED.swap(true, Ordering::SeqCst) {
            std::process::exit(EXIT_INTERRUPTED as i32);
        }
        eprintln!("\ninterrupt: saving a checkpoint after this iteration (again to quit now)");
    }) {
        eprintln!(
            "warning: no Ctrl-C handler ({e}); an interrupted run keeps only its periodic checkpoints"
        );
    }
    // `rl tune` runs trials with a pipe as standard input: its end closing (the experiment
    // stopping the trial, or dying) stops training after the iteration, with a checkpoint.
    if std::env::var_os("RL_STOP_ON_STDIN_EOF").is_some() {
        std::thread::spawn(|| {
            use std::io::Read;
            let mut buf = [0u8; 64];
            while let Ok(n) = std::io::stdin().read(&mut buf) {
                if n == 0 {
                    break;
                }
            }
            INTERRUPTED.store(true, Ordering::SeqCst);
        });
    }
    match real_main() {
        Ok(code) => code,
        Err(e @ RlError::Interrupted { .. }) => {
            eprintln!("{e}");
            ExitCode::from(EXIT_INTERRUPTED)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The device named in a config or on the command line.
fn device_named(name: &str) -> Result<rl_training::core::burn::tensor::Device, RlError> {
    parse_device(name).map_err(|e| RlError::Config(ConfigError::new("device", e)))
}

/// Trains `algo` for `run` into `out` (or a fresh run directory) and prints the summary line.
fn train_and_report(
    algo: &mut dyn rl_training::core::Algorithm,
    run: &RunConfig,
    out: Option<PathBuf>,
    quiet: bool,
) -> Result<(), RlError> {
    let mut eval_env = rl_training::make_eval_env(run)?;
    let dir = out.unwrap_or_else(|| default_run_dir(std::path::Path::new("runs"), run));
    let summary = run_training_until(
        algo,
        run,
        eval_env.as_mut(),
        &dir,
        !quiet,
        Some(&INTERRUPTED),
    )?;
    println!("{}", serde_json::to_string(&summary).expect("serializable"));
    Ok(())
}

/// [`train_and_report`] for a multi-agent run.
fn train_multi_agent_and_report(
    algo: &mut dyn rl_training::core::multi_agent::MultiAgentAlgorithm,
    run: &RunConfig,
    out: Option<PathBuf>,
    quiet: bool,
) -> Result<(), RlError> {
    let mut eval_env = rl_training::make_multi_agent_eval_env(run)?;
    let dir = out.unwrap_or_else(|| default_run_dir(std::path::Path::new("runs"), run));
    let summary = rl_training::core::runner::run_multi_agent_until(
        algo,
        run,
        eval_env.as_mut(),
        &dir,
        !quiet,
        Some(&INTERRUPTED),
    )?;
    println!("{}", serde_json::to_string(&summary).expect("serializable"));
    Ok(())
}

fn real_main() -> Result<ExitCode, RlError> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Train {
            config,
            set,
            seed,
            device,
            out,
            quiet,
            scale,
        } => {
            let text = std::fs::read_to_string(&config).map_err(|e| {
                RlError::Config(ConfigError::new(
                    config.display().to_string(),
                    e.to_string(),
                ))
            })?;
            let mut run = RunConfig::from_yaml(&text, &set, &config.display().to_string())
                .map_err(RlError::Config)?;
            if let Some(s) = seed {
                run.seed = s;
            }
            if let Some(d) = device {
                run.device = d;
            }
            let dev = device_named(&run.device)?;
            if let Some(side) = broker_side(&scale, &run, None)? {
                let mut algo = rl_training::scale_out::build_with_broker(&run, &dev, &side.link)?;
                train_and_report(algo.as_mut(), &run, out, quiet)?;
                // The algorithm posts the run's end as it goes; then the runners are stopped.
                drop(algo);
                drop(side.local);
            } else if rl_training::is_multi_agent(&run) {
                let mut algo = rl_training::build_multi_agent(&run, &dev)?;
                train_multi_agent_and_report(algo.as_mut(), &run, out, quiet)?;
            } else {
                let mut algo = rl_training::build(&run, &dev)?;
                train_and_report(algo.as_mut(), &run, out, quiet)?;
            }
        }
        Cmd::Eval {
            checkpoint,
            episodes,
            deterministic,
            seed,
            device,
        } => {
            let run = rl_training::checkpoint_config(&checkpoint)?;
            let dev = device_named(device.as_deref().unwrap_or(&run.device))?;
            if rl_training::is_multi_agent(&run) {
                let mut algo = rl_training::load_multi_agent(&checkpoint, &dev)?;
                let mut env = rl_training::make_multi_agent_eval_env(&run)?;
                let r = algo.evaluate(
                    env.as_mut(),
                    episodes,
                    deterministic,
                    seed.unwrap_or(run.eval_seed()),
                )?;
                println!(
                    "{}",
                    serde_json::json!({"episodes": episodes, "deterministic": deterministic, "mean_return": r.mean_return, "per_agent": r.per_agent, "per_policy": r.per_policy, "returns": r.episodes.iter().map(|e| e.0).collect::<Vec<_>>()})
                );
                return Ok(ExitCode::SUCCESS);
            }
            let mut algo = rl_training::load(&checkpoint, &dev)?;
            let mut env = rl_training::make_eval_env(&run)?;
            let r = algo.evaluate(
                env.as_mut(),
                episodes,
                deterministic,
                seed.unwrap_or(run.eval_seed()),
            )?;
            println!(
                "{}",
                serde_json::json!({"episodes": episodes, "deterministic": deterministic, "mean_return": r.mean_return, "std_return": r.std_return, "mean_length": r.mean_length, "returns": r.returns})
            );
        }
        Cmd::Resume {
            checkpoint,
            total_timesteps,
            device,
            out,
            quiet,
            scale,
        } => {
            let mut run = rl_training::checkpoint_config(&checkpoint)?;
            if let Some(d) = device {
                run.device = d;
            }
            let dev = device_named(&run.device)?;
            if scale.broker.is_some() && scale.run_id.is_none() {
                // The batches a dead learner left in the queue are the same run's.
                return Err(RlError::Config(ConfigError::new(
                    "--run-id",
                    "resuming over a broker needs the run id the checkpoint's run used",
                )));
            }
            if let Some(side) = broker_side(&scale, &run, None)? {
                let mut algo =
                    rl_training::scale_out::load_with_broker(&checkpoint, &dev, &side.link)?;
                if let Some(t) = total_timesteps {
                    algo.set_total_timesteps(t);
                    run.total_timesteps = t;
                }
                train_and_report(algo.as_mut(), &run, out, quiet)?;
                drop(algo);
                drop(side.local);
                return Ok(ExitCode::SUCCESS);
            }
            if rl_training::is_multi_agent(&run) {
                let mut algo = rl_training::load_multi_agent(&checkpoint, &dev)?;
                if let Some(t) = total_timesteps {
                    algo.set_total_timesteps(t);
                    run.total_timesteps = t;
                }
                train_multi_agent_and_report(algo.as_mut(), &run, out, quiet)?;
                return Ok(ExitCode::SUCCESS);
            }
            let mut algo = rl_training::load(&checkpoint, &dev)?;
            if let Some(t) = total_timesteps {
                algo.set_total_timesteps(t);
                run.total_timesteps = t;
            }
            train_and_report(algo.as_mut(), &run, out, quiet)?;
        }
        Cmd::Runner {
            broker,
            run,
            device,
            parent_pid,
        } => {
            #[cfg(not(unix))]
            let _ = parent_pid;
            #[cfg(unix)]
            if let Some(parent) = parent_pid {
                // A runner started by a learner leaves with it (even one killed with -9).
                std::thread::spawn(move || {
                    loop {
                        if std::os::unix::process::parent_id() != parent {
                            INTERRUPTED.store(true, Ordering::SeqCst);
                            break;
                        }
                        std::thread::sleep(std::time::Duration::from_millis(250));
                    }
                });
            }
            let b = rl_training::scale_out::connect(&broker, &run)?;
            let s = rl_training::scale_out::serve_runner(&b, device.as_deref(), &INTERRUPTED)?;
            println!(
                "{}",
                serde_json::json!({"runner": s.runner, "batches": s.batches, "restarts": s.restarts})
            );
        }
        Cmd::BrokerOverhead {
            broker,
            n_steps,
            n_envs,
            obs_dim,
            act_dim,
            n,
        } => {
            let run = format!("overhead-{}", std::process::id());
            let b = rl_training::scale_out::connect(&broker, &run)?;
            let (bytes, us) =
                rl_training::scale_out::broker_overhead(&b, n_steps, n_envs, obs_dim, act_dim, n)?;
            println!(
                "{}",
                serde_json::json!({"batch_bytes": bytes, "batches": n, "us_per_batch": us})
            );
        }
        Cmd::Record {
            checkpoint,
            replay: true,
            out,
            device,
            ..
        } => {
            let run = rl_training::checkpoint_config(&checkpoint)?;
            let dev = device_named(device.as_deref().unwrap_or(&run.device))?;
            let (rows, spec) = rl_training::replay_dataset(&checkpoint, &dev)?;
            rl_training::offline::write_dataset(&out, &rows, &spec)?;
            println!(
                "{}",
                serde_json::json!({"out": out.display().to_string(), "episodes": rows.num_episodes(), "rows": rows.len()})
            );
        }
        Cmd::Record {
            checkpoint,
            replay: false,
            episodes,
            epsilon,
            stochastic,
            seed,
            out,
            device,
        } => {
            let run = rl_training::checkpoint_config(&checkpoint)?;
            if run.normalize.obs {
                return Err(RlError::Config(ConfigError::new(
                    checkpoint.display().to_string(),
                    "trained with normalize.obs; recording stores raw observations, which this \
                     policy does not take",
                )));
            }
            let dev = device_named(device.as_deref().unwrap_or(&run.device))?;
            let mut algo = rl_training::load(&checkpoint, &dev)?;
            let mut env = rl_training::make_eval_env(&run)?;
            let opts = rl_training::offline::RecordOptions {
                episodes,
                epsilon,
                seed: seed.unwrap_or(run.eval_seed()),
                deterministic: !stochastic,
                first_eps_id: 0,
            };
            let data = rl_training::offline::record(algo.as_mut(), env.as_mut(), &opts)?;
            let spec = rl_training::offline::DatasetSpec::from_spaces(
                env.observation_space(),
                env.action_space(),
            );
            rl_training::offline::write_dataset(&out, &data, &spec)?;
            let ends = data.episode_ends();
            let mut returns = Vec::with_capacity(ends.len());
            let mut start = 0;
            for e in ends {
                returns.push(
                    data.rewards[start..e]
                        .iter()
                        .map(|&r| r as f64)
                        .sum::<f64>(),
                );
                start = e;
            }
            let mean = returns.iter().sum::<f64>() / returns.len().max(1) as f64;
            println!(
                "{}",
                serde_json::json!({"out": out.display().to_string(), "episodes": returns.len(), "rows": data.len(), "mean_return": mean})
            );
        }
        Cmd::Tune {
            config,
            out,
            resume,
            quiet,
        } => {
            let dir = match (&resume, out, &config) {
                (Some(d), _, _) => d.clone(),
                (None, Some(o), _) => o,
                (None, None, cfg) => {
                    let stem = cfg
                        .as_deref()
                        .and_then(|c| c.file_stem())
                        .map_or("experiment".into(), |s| s.to_string_lossy().into_owned());
                    let secs = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_secs());
                    PathBuf::from("runs").join(format!("tune_{stem}_{secs}"))
                }
            };
            // A trial config is checked by building its algorithm (keys, values, env id).
            let validate = |run: &RunConfig| -> Result<(), RlError> {
                rl_training::build(run, &device_named(&run.device)?).map(|_| ())
            };
            let rl_exe = std::env::current_exe()
                .map_err(|e| RlError::Other(format!("the rl executable: {e}")))?;
            let opts = rl_training::tune::Options {
                rl_exe,
                show_table: !quiet,
                interrupt: Some(&INTERRUPTED),
                poll: std::time::Duration::from_millis(200),
            };
            let state = match rl_training::tune::tune(config.as_deref(), &dir, &validate, &opts) {
                Err(rl_training::tune::TuneError::Interrupted(d)) => {
                    eprintln!("interrupted; continue with `rl tune --resume {d}`");
                    return Ok(ExitCode::from(EXIT_INTERRUPTED));
                }
                other => other?,
            };
            let best = state.best();
            let (last, top) = best.map_or((None, None), |t| t.last_and_best(state.tune.mode));
            println!(
                "{}",
                serde_json::json!({
                    "dir": dir.display().to_string(),
                    "trials": state.trials.len(),
                    "best_trial": best.map(|t| t.name()),
                    "best_params": best.map(|t| rl_training::tune::space::describe(&t.variant.params)),
                    "best_last_metric": last,
                    "best_best_metric": top,
                    "results": dir.join("results.csv").display().to_string(),
                })
            );
        }
        Cmd::Envs => {
            use std::io::Write;
            let reg = rl_training::envs::registry();
            let mut out = std::io::stdout().lock();
            for id in reg.ids() {
                let env = reg.make(id, &Default::default())?;
                let limit = reg
                    .max_episode_steps(id)
                    .map_or("none".to_string(), |m| m.to_string());
                let line = format!(
                    "{id:32} obs {:28} act {:24} time limit {limit}",
                    env.observation_space().describe(),
                    env.action_space().describe()
                );
                // A closed pipe (`rl envs | head`) ends the listing quietly.
                if writeln!(out, "{line}").is_err() {
                    return Ok(ExitCode::SUCCESS);
                }
            }
            for id in rl_training::envs::multi_agent_ids() {
                let env = rl_training::envs::make_multi_agent_env(id, &Default::default())?;
                let agents = env.possible_agents();
                let first = &agents[0];
                let line = format!(
                    "{id:32} multi-agent: {} agents ({}), obs {} act {}",
                    agents.len(),
                    agents.join(", "),
                    env.observation_space(first)?.describe(),
                    env.action_space(first)?.describe()
                );
                if writeln!(out, "{line}").is_err() {
                    break;
                }
            }
        }
        Cmd::CheckEnv { id, steps } => {
            let mut env = rl_training::envs::make(&id, &Default::default())?;
            let report = rl_training::core::checker::check_env(env.as_mut(), steps);
            for w in &report.warnings {
                println!("warning: {w}");
            }
            for e in &report.errors {
                println!("error: {e}");
            }
            if report.ok() {
                println!("{id}: ok ({} warnings)", report.warnings.len());
            } else {
                println!("{id}: {} errors", report.errors.len());
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
