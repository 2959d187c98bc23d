//! An experiment: trials as child processes of the `rl` binary, each an ordinary run directory,
//! watched through their `progress.jsonl`, stopped by the scheduler by closing their standard
//! input (the child saves its checkpoint and exits 130), and the whole state in `experiment_state.json`,
//! rewritten atomically at every change so `rl tune --resume DIR` continues after a crash or
//! a `kill -9`.
//!
//! Layout of the experiment directory:
//! ```text
//! experiment_state.json   trials, scheduler and searcher state
//! trial_0000/run.yaml     the trial's config
//! trial_0000/run_0/       its run directory (`rl train --out`); run_1/ … after each resume
//! trial_0000/output.log   the child's stdout and stderr
//! results.csv  best_config.yaml  best_checkpoint/  trials.png   at the end
//! ```

use crate::config::{Mode, SchedulerConfig, SearchAlg, TuneConfig};
use crate::scheduler::{Decision, Scheduler};
use crate::space::{Dimension, Domain, SearchSpace, Variant, describe, set_path};
use rl_training_core::Rng;
use rl_training_core::algorithm::RlError;
use rl_training_core::checkpoint::write_file_atomic;
use rl_training_core::config::{ConfigError, RunConfig};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Exit code of a run stopped by SIGINT/SIGTERM after saving its checkpoint.
const EXIT_INTERRUPTED: i32 = 130;
/// The state file's format.
const STATE_VERSION: u32 = 1;
/// The state file.
pub const STATE_FILE: &str = "experiment_state.json";

/// What can go wrong in an experiment.
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    /// The config or its `tune:` section is invalid.
    #[error("config: {0}")]
    Config(#[from] ConfigError),
    /// A trial's config does not build (`trial_0003 (lr=0.1)`: the algorithm's error).
    #[error("{trial}: {source}")]
    Trial {
        /// The trial and its parameters.
        trial: String,
        /// Why it does not build.
        source: RlError,
    },
    /// A file of the experiment could not be read or written.
    #[error("{path}: {message}")]
    File {
        /// The file.
        path: String,
        /// What happened.
        message: String,
    },
    /// The experiment was interrupted; its state is saved.
    #[error("interrupted; continue with `rl tune --resume {0}`")]
    Interrupted(String),
}

fn file_err(path: &Path, e: impl std::fmt::Display) -> TuneError {
    TuneError::File {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// A trial's status (Tune's words).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    /// Not started yet.
    Pending,
    /// Its process runs (or ran when the experiment stopped: resumed from its checkpoint).
    Running,
    /// Ran to its budget or a `stop` condition.
    Terminated,
    /// Stopped early by the scheduler.
    Stopped,
    /// Failed more than `max_failures` times.
    Error,
}

/// One trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trial {
    /// Index in the experiment.
    pub id: usize,
    /// Its config and parameters.
    pub variant: Variant,
    /// Status.
    pub status: Status,
    /// `(env steps, metric)` results, in order.
    pub history: Vec<(u64, f64)>,
    /// Env steps reached.
    pub timesteps: u64,
    /// Failed runs so far.
    pub failures: usize,
    /// Run directories started (`run_0` …).
    pub segments: usize,
    /// Seconds its processes ran.
    pub wall_seconds: f64,
    /// Why it was asked to stop, if it was.
    pub stop_reason: Option<StopReason>,
    /// The checkpoint its next run starts from, when not its own (PBT's exploit).
    pub restore: Option<PathBuf>,
    /// Run directories before this one are superseded (by an exploit).
    pub resume_floor: usize,
    /// PBT's exploits, in order.
    pub perturbations: Vec<Perturbation>,
    /// Its parameters were proposed by TPE (else drawn or enumerated).
    pub proposed: bool,
}

/// One of PBT's exploits: `(env steps, donor trial, the explored hyperparameters)`.
pub type Perturbation = (u64, usize, Vec<(String, Value)>);

/// Why the experiment asked a trial to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StopReason {
    /// A `stop` condition was reached.
    Done,
    /// The scheduler stopped it.
    Scheduler,
    /// PBT: it goes on from this trial's checkpoint.
    Exploit(usize),
}

impl Trial {
    /// `trial_0003`.
    pub fn name(&self) -> String {
        format!("trial_{:04}", self.id)
    }

    fn run_dir(&self, dir: &Path, segment: usize) -> PathBuf {
        dir.join(self.name()).join(format!("run_{segment}"))
    }

    /// Its config file, `trial_0003/run.yaml`.
    fn config_path(&self, dir: &Path) -> PathBuf {
        dir.join(self.name()).join("run.yaml")
    }

    /// Writes its config file.
    fn write_config(&self, dir: &Path) -> Result<(), TuneError> {
        let cfg = self.config_path(dir);
        fs::create_dir_all(dir.join(self.name())).map_err(|e| file_err(dir, e))?;
        let yaml = serde_saphyr::to_string(&self.variant.config).map_err(|e| file_err(&cfg, e))?;
        write_file_atomic(&cfg, yaml.as_bytes()).map_err(|e| file_err(&cfg, e))
    }

    /// Takes one line of its `progress.jsonl`: the env steps, and the metric when the line has
    /// it (recorded).
    fn ingest(
        &mut self,
        line: &serde_json::Map<String, Value>,
        metric: &str,
    ) -> (u64, Option<f64>) {
        let t = line
            .get("global_step")
            .and_then(Value::as_u64)
            .unwrap_or(self.timesteps);
        self.timesteps = t;
        let v = line.get(metric).and_then(Value::as_f64);
        if let Some(v) = v {
            self.record(t, v);
        }
        (t, v)
    }

    /// Where its next run starts: the newest checkpoint of its current runs, else the
    /// checkpoint it was given, else nothing (from scratch).
    fn latest_checkpoint(&self, dir: &Path) -> Option<PathBuf> {
        (self.resume_floor..self.segments)
            .rev()
            .find_map(|s| latest_checkpoint(&self.run_dir(dir, s)))
            .or_else(|| self.restore.clone())
    }

    /// The last and the best metric.
    pub fn last_and_best(&self, mode: Mode) -> (Option<f64>, Option<f64>) {
        let last = self.history.last().map(|p| p.1);
        let best = self
            .history
            .iter()
            .map(|p| p.1)
            .reduce(|a, b| if mode.better(b, a) { b } else { a });
        (last, best)
    }

    /// A result at `t`: a rerun from an earlier checkpoint replaces what came after it.
    fn record(&mut self, t: u64, v: f64) {
        self.history.retain(|&(s, _)| s < t);
        self.history.push((t, v));
    }
}

/// Everything an experiment needs to go on after a restart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExperimentState {
    /// Format version.
    pub version: u32,
    /// The `tune:` section.
    pub tune: TuneConfig,
    /// The search space's dimensions (results.csv's parameter columns).
    pub dims: Vec<Dimension>,
    /// The trials.
    pub trials: Vec<Trial>,
    /// The scheduler and its state.
    pub scheduler: Scheduler,
    /// The searcher's generator after drawing the trials.
    pub rng: Rng,
    /// Seconds the experiment has run, over every resume.
    pub elapsed_s: f64,
}

impl ExperimentState {
    /// The state of a new experiment from a config tree with a `tune:` section; every trial's
    /// config is checked by `validate` (a key that does not exist, a bad value: the error
    /// names the trial and the key).
    pub fn new(
        mut config: Value,
        validate: &dyn Fn(&RunConfig) -> Result<(), RlError>,
    ) -> Result<Self, TuneError> {
        let tune_v = match config.as_object_mut().and_then(|m| m.remove("tune")) {
            Some(v) => v,
            None => Value::Object(Default::default()),
        };
        let tune = TuneConfig::from_value(tune_v)?;
        let space = SearchSpace::parse(&config)?;
        let grid = space
            .dims
            .iter()
            .find(|d| matches!(d.domain, Domain::Grid(_)));
        if let (SearchAlg::Tpe, Some(d)) = (tune.search_alg, grid) {
            return Err(TuneError::Config(ConfigError::new(
                d.path.clone(),
                "grid_search does not combine with tune.search_alg tpe (use choice)",
            )));
        }
        let mut rng = Rng::seed_from(tune.seed);
        let variants = space.variants(tune.num_samples, &mut rng);
        let mut horizon = 0;
        let mut trials = Vec::with_capacity(variants.len());
        for (id, variant) in variants.into_iter().enumerate() {
            let mut trial = Trial {
                id,
                variant,
                status: Status::Pending,
                history: Vec::new(),
                timesteps: 0,
                failures: 0,
                segments: 0,
                wall_seconds: 0.0,
                stop_reason: None,
                restore: None,
                resume_floor: 0,
                perturbations: Vec::new(),
                proposed: false,
            };
            let run = run_config(&trial.variant.config).map_err(|e| TuneError::Trial {
                trial: label(&trial),
                source: RlError::Config(e),
            })?;
            validate(&run).map_err(|source| TuneError::Trial {
                trial: label(&trial),
                source,
            })?;
            horizon = horizon.max(run.total_timesteps);
            trial.variant.config = serde_json::to_value(&run).expect("serializable");
            if let SchedulerConfig::Pbt {
                perturbation_interval,
                ..
            } = tune.scheduler
            {
                // An exploit takes a donor's checkpoint: donors save at least this often.
                let freq = &mut trial.variant.config["checkpoint_freq"];
                let every = freq
                    .as_u64()
                    .filter(|&f| f > 0)
                    .map_or(perturbation_interval, |f| f.min(perturbation_interval));
                *freq = Value::from(every);
            }
            trials.push(trial);
        }
        let scheduler = Scheduler::new(&tune.scheduler, horizon, tune.seed);
        // Explored values must give valid configs: one draw of each, checked like the trials.
        if let (Scheduler::Pbt(pbt), Some(first)) = (&scheduler, trials.first()) {
            let mut pbt = pbt.clone();
            let mut config = first.variant.config.clone();
            for (path, v) in pbt.explore(&first.variant.config) {
                set_path(&mut config, &path, v);
            }
            let run = run_config(&config).map_err(|e| TuneError::Trial {
                trial: format!("tune.scheduler.hyperparam_mutations ({})", label(first)),
                source: RlError::Config(e),
            })?;
            validate(&run).map_err(|source| TuneError::Trial {
                trial: format!("tune.scheduler.hyperparam_mutations ({})", label(first)),
                source,
            })?;
        }
        Ok(ExperimentState {
            version: STATE_VERSION,
            scheduler,
            tune,
            dims: space.dims,
            trials,
            rng,
            elapsed_s: 0.0,
        })
    }

    /// Reads `DIR/experiment_state.json`.
    pub fn load(dir: &Path) -> Result<Self, TuneError> {
        let path = dir.join(STATE_FILE);
        let text = fs::read_to_string(&path).map_err(|e| file_err(&path, e))?;
        let s: ExperimentState = serde_json::from_str(&text).map_err(|e| file_err(&path, e))?;
        if s.version != STATE_VERSION {
            return Err(file_err(
                &path,
                format!(
                    "state version {} (this rl reads {STATE_VERSION})",
                    s.version
                ),
            ));
        }
        Ok(s)
    }

    fn save(&self, dir: &Path) -> Result<(), TuneError> {
        let path = dir.join(STATE_FILE);
        let text = serde_json::to_string_pretty(self).expect("serializable");
        write_file_atomic(&path, text.as_bytes()).map_err(|e| file_err(&path, e))
    }

    /// The best trial by its last result (Tune's default scope), among trials with results.
    pub fn best(&self) -> Option<&Trial> {
        let mode = self.tune.mode;
        self.trials
            .iter()
            .filter_map(|t| t.history.last().map(|p| (t, p.1)))
            .reduce(|a, b| if mode.better(b.1, a.1) { b } else { a })
            .map(|(t, _)| t)
    }
}

/// `trial_0003 (lr=0.001 seed=1)`.
fn label(t: &Trial) -> String {
    format!("{} ({})", t.name(), describe(&t.variant.params))
}

/// A trial's config tree as a run config (strict: unknown keys name their path).
fn run_config(v: &Value) -> Result<RunConfig, ConfigError> {
    rl_training_core::config::strict(v.clone(), "")
}

/// How an experiment runs.
pub struct Options<'a> {
    /// The `rl` binary that runs the trials.
    pub rl_exe: PathBuf,
    /// Print the live table to stderr.
    pub show_table: bool,
    /// Set by Ctrl-C: running trials are checkpointed and the state saved.
    pub interrupt: Option<&'a AtomicBool>,
    /// How often the trials' logs are read.
    pub poll: Duration,
}

/// A trial's process.
struct Running {
    child: Child,
    jsonl: PathBuf,
    offset: u64,
    partial: String,
    started: Instant,
}

/// Runs (or resumes) the experiment in `dir` until every trial has ended, the time budget is
/// spent or `interrupt` is set. Returns the final state; `results.csv`, `best_config.yaml`,
/// `best_checkpoint/` and `trials.png` are written at the end.
pub fn run(
    dir: &Path,
    mut state: ExperimentState,
    opts: &Options,
) -> Result<ExperimentState, TuneError> {
    fs::create_dir_all(dir).map_err(|e| file_err(dir, e))?;
    for t in &state.trials {
        if !t.config_path(dir).exists() {
            t.write_config(dir)?;
        }
    }
    state.save(dir)?;
    let concurrency = state.tune.concurrency();
    let started = Instant::now();
    let elapsed0 = state.elapsed_s;
    let mut running: BTreeMap<usize, Running> = BTreeMap::new();
    let mut last_table = Instant::now() - Duration::from_secs(3600);
    let mut over_budget = false;
    let mut interrupted = false;
    loop {
        state.elapsed_s = elapsed0 + started.elapsed().as_secs_f64();
        let mut changed = false;
        // Time budget or Ctrl-C: every running trial checkpoints and stops; no new ones.
        if !over_budget
            && state
                .tune
                .time_budget_s
                .is_some_and(|b| state.elapsed_s >= b)
        {
            over_budget = true;
        }
        if !interrupted && opts.interrupt.is_some_and(|f| f.load(Ordering::SeqCst)) {
            interrupted = true;
        }
        if over_budget || interrupted {
            for r in running.values_mut() {
                terminate(r);
            }
        }
        // Read new results, ask the scheduler and the stop conditions.
        for (&id, r) in running.iter_mut() {
            let trial = &mut state.trials[id];
            for line in read_new_lines(r) {
                let Ok(Value::Object(m)) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                let (t, metric) = trial.ingest(&m, &state.tune.metric);
                changed = true;
                let time_total = trial.wall_seconds + r.started.elapsed().as_secs_f64();
                let reached = state.tune.stop.iter().any(|(k, &bound)| {
                    let v = match k.as_str() {
                        "timesteps" | "timesteps_total" => Some(t as f64),
                        "time_total_s" => Some(time_total),
                        other => m.get(other).and_then(Value::as_f64),
                    };
                    v.is_some_and(|v| v >= bound)
                });
                if reached && trial.stop_reason.is_none() {
                    trial.stop_reason = Some(StopReason::Done);
                }
                if let Some(v) = metric {
                    let d = state.scheduler.on_result(id, t, state.tune.mode.score(v));
                    if trial.stop_reason.is_none() {
                        trial.stop_reason = match d {
                            Decision::Continue => None,
                            Decision::Stop => Some(StopReason::Scheduler),
                            Decision::Exploit { donor } => Some(StopReason::Exploit(donor)),
                        };
                    }
                }
            }
            if trial.stop_reason.is_some() {
                terminate(r);
            }
        }
        // Reap finished processes.
        let ids: Vec<usize> = running.keys().copied().collect();
        for id in ids {
            let r = running.get_mut(&id).expect("running");
            let status = r.child.try_wait().map_err(|e| file_err(&r.jsonl, e))?;
            let Some(status) = status else { continue };
            let mut r = running.remove(&id).expect("running");
            // Its last lines: results only, the scheduler has nothing left to decide.
            for line in read_new_lines(&mut r) {
                if let Ok(Value::Object(m)) = serde_json::from_str::<Value>(&line) {
                    state.trials[id].ingest(&m, &state.tune.metric);
                }
            }
            let trial = &mut state.trials[id];
            trial.wall_seconds += r.started.elapsed().as_secs_f64();
            let code = status.code();
            let stopping = over_budget || interrupted;
            trial.status = match (code, trial.stop_reason) {
                (Some(0), _) => Status::Terminated,
                (Some(EXIT_INTERRUPTED), Some(StopReason::Done)) => Status::Terminated,
                (Some(EXIT_INTERRUPTED), Some(StopReason::Scheduler)) => Status::Stopped,
                // PBT's exploit (below), or stopped for the budget or Ctrl-C: it goes on from
                // a checkpoint.
                (Some(EXIT_INTERRUPTED), Some(StopReason::Exploit(_))) => Status::Running,
                (Some(EXIT_INTERRUPTED), None) if stopping => Status::Running,
                _ => {
                    trial.failures += 1;
                    if trial.failures > state.tune.max_failures {
                        Status::Error
                    } else {
                        Status::Pending
                    }
                }
            };
            if let (Status::Running, Some(StopReason::Exploit(donor)), false) =
                (trial.status, trial.stop_reason, stopping)
            {
                exploit(dir, &mut state, id, donor)?;
            }
            changed = true;
        }
        // Start trials while there is room: interrupted ones first, then pending ones.
        if !over_budget && !interrupted {
            while running.len() < concurrency {
                let next = state
                    .trials
                    .iter()
                    .filter(|t| !running.contains_key(&t.id))
                    .find(|t| t.status == Status::Running)
                    .or_else(|| state.trials.iter().find(|t| t.status == Status::Pending))
                    .map(|t| t.id);
                let Some(id) = next else { break };
                if state.tune.search_alg == SearchAlg::Tpe && state.trials[id].segments == 0 {
                    propose(dir, &mut state, id)?;
                }
                let r = launch(dir, &mut state.trials[id], opts, &state.tune)?;
                running.insert(id, r);
                changed = true;
            }
        }
        if changed {
            state.save(dir)?;
        }
        if opts.show_table
            && (changed && last_table.elapsed() > Duration::from_secs(5)
                || last_table.elapsed() > Duration::from_secs(30))
        {
            eprint!("{}", table(&state));
            last_table = Instant::now();
        }
        if running.is_empty() {
            break;
        }
        std::thread::sleep(opts.poll);
    }
    state.elapsed_s = elapsed0 + started.elapsed().as_secs_f64();
    state.save(dir)?;
    if opts.show_table {
        eprint!("{}", table(&state));
    }
    if interrupted {
        return Err(TuneError::Interrupted(dir.display().to_string()));
    }
    write_results(dir, &state)?;
    Ok(state)
}

/// Starts a trial's next run: from scratch, or from the checkpoint of its last run.
fn launch(
    dir: &Path,
    trial: &mut Trial,
    opts: &Options,
    tune: &TuneConfig,
) -> Result<Running, TuneError> {
    let out = trial.run_dir(dir, trial.segments);
    let checkpoint = trial.latest_checkpoint(dir);
    let mut cmd = Command::new(&opts.rl_exe);
    match &checkpoint {
        Some(ck) => {
            cmd.arg("resume").arg(ck);
        }
        None => {
            // A restart from scratch: its results replace the lost run's.
            trial.history.clear();
            cmd.arg("train").arg(trial.config_path(dir));
        }
    }
    cmd.arg("--out").arg(&out).arg("--quiet");
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        cmd.env("RAYON_NUM_THREADS", tune.threads_per_trial.to_string());
    }
    let log_path = dir.join(trial.name()).join("output.log");
    let log = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(|e| file_err(&log_path, e))?;
    let log2 = log.try_clone().map_err(|e| file_err(&log_path, e))?;
    cmd.env("RL_STOP_ON_STDIN_EOF", "1");
    cmd.stdin(Stdio::piped()).stdout(log).stderr(log2);
    let child = cmd.spawn().map_err(|e| file_err(&opts.rl_exe, e))?;
    trial.segments += 1;
    trial.status = Status::Running;
    trial.stop_reason = None;
    Ok(Running {
        child,
        jsonl: out.join("progress.jsonl"),
        offset: 0,
        partial: String::new(),
        started: Instant::now(),
    })
}

/// TPE's proposal for a trial about to start, once `n_startup_trials` trials have ended with
/// results: its parameters and `run.yaml` are replaced (the drawn ones, checked with the
/// experiment, stay for the startup trials).
fn propose(dir: &Path, state: &mut ExperimentState, id: usize) -> Result<(), TuneError> {
    let mode = state.tune.mode;
    let observed: Vec<(Vec<(String, Value)>, f64)> = state
        .trials
        .iter()
        .filter(|t| matches!(t.status, Status::Terminated | Status::Stopped))
        .filter_map(|t| Some((t.variant.params.clone(), mode.score(t.history.last()?.1))))
        .collect();
    if observed.len() < state.tune.n_startup_trials || state.trials[id].proposed {
        return Ok(());
    }
    let params = crate::search::propose(&state.dims, &observed, &mut state.rng);
    let trial = &mut state.trials[id];
    for (p, v) in &params {
        set_path(&mut trial.variant.config, p, v.clone());
    }
    trial.variant.params = params;
    trial.proposed = true;
    trial.write_config(dir)
}

/// PBT's exploit and explore: trial `id` goes on from `donor`'s newest checkpoint, with the
/// donor's config and explored hyperparameters written into the copy's `config.yaml` (the
/// learner is rebuilt from it, so the new values reach it: ray#62173). A donor without a
/// checkpoint yet leaves the trial as it was.
fn exploit(
    dir: &Path,
    state: &mut ExperimentState,
    id: usize,
    donor: usize,
) -> Result<(), TuneError> {
    let Some(from) = state.trials[donor].latest_checkpoint(dir) else {
        return Ok(());
    };
    let Scheduler::Pbt(pbt) = &mut state.scheduler else {
        return Ok(());
    };
    let params = pbt.explore(&state.trials[donor].variant.config);
    let mut config = state.trials[donor].variant.config.clone();
    for (p, v) in &params {
        set_path(&mut config, p, v.clone());
    }
    let trial = &mut state.trials[id];
    let run = run_config(&config).map_err(|e| TuneError::Trial {
        trial: label(trial),
        source: RlError::Config(e),
    })?;
    let to = dir
        .join(trial.name())
        .join(format!("exploit_{}", trial.perturbations.len()));
    rl_training_core::checkpoint::copy_with_config(&from, &to, &run)
        .map_err(|e| file_err(&to, e))?;
    for (path, v) in trial.variant.params.iter_mut() {
        if let Some(x) = crate::space::pointer(&config, path) {
            *v = x.clone();
        }
    }
    for (p, v) in &params {
        if !trial.variant.params.iter().any(|(q, _)| q == p) {
            trial.variant.params.push((p.clone(), v.clone()));
        }
    }
    trial.variant.config = config;
    trial.perturbations.push((trial.timesteps, donor, params));
    trial.restore = Some(to);
    trial.resume_floor = trial.segments;
    Ok(())
}

/// The newest checkpoint of a run directory: its final `checkpoint/`, else the latest
/// periodic one.
fn latest_checkpoint(run_dir: &Path) -> Option<PathBuf> {
    let last = run_dir.join("checkpoint");
    if last.join("state.json").exists() {
        return Some(last);
    }
    let mut periodic: Vec<PathBuf> = fs::read_dir(run_dir.join("checkpoints"))
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("state.json").exists())
        .collect();
    periodic.sort();
    periodic.pop()
}

/// Asks a trial's process to save its checkpoint and stop (once): closing its standard input
/// does it (`RL_STOP_ON_STDIN_EOF`). The same happens when `rl tune` dies, even by `kill -9`,
/// since its end of the pipe closes then too, so a resumed experiment loses nothing.
fn terminate(r: &mut Running) {
    drop(r.child.stdin.take());
}

/// Complete lines appended to the trial's `progress.jsonl` since the last call.
fn read_new_lines(r: &mut Running) -> Vec<String> {
    let Ok(mut f) = fs::File::open(&r.jsonl) else {
        return Vec::new();
    };
    let len = f.metadata().map_or(0, |m| m.len());
    if len < r.offset {
        // Recreated (a new run in the same directory): read from the start.
        r.offset = 0;
        r.partial.clear();
    }
    let mut buf = String::new();
    if f.seek(SeekFrom::Start(r.offset)).is_err() || f.read_to_string(&mut buf).is_err() {
        return Vec::new();
    }
    r.offset += buf.len() as u64;
    r.partial.push_str(&buf);
    let mut lines: Vec<String> = r.partial.split('\n').map(str::to_string).collect();
    r.partial = lines.pop().unwrap_or_default();
    lines.into_iter().filter(|l| !l.trim().is_empty()).collect()
}

/// The live table: trial, status, env steps, last and best metric, parameters.
pub fn table(state: &ExperimentState) -> String {
    let mode = state.tune.mode;
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for t in &state.trials {
        *counts
            .entry(format!("{:?}", t.status).to_uppercase())
            .or_default() += 1;
    }
    let mut s = format!(
        "== {} trials ({}), {:.0} s, metric {} ({:?})\n{:<12} {:<10} {:>10} {:>12} {:>12}  params\n",
        state.trials.len(),
        counts
            .iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect::<Vec<_>>()
            .join(", "),
        state.elapsed_s,
        state.tune.metric,
        mode,
        "trial",
        "status",
        "timesteps",
        "last",
        "best",
    );
    let num = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
    for t in &state.trials {
        let (last, best) = t.last_and_best(mode);
        s.push_str(&format!(
            "{:<12} {:<10} {:>10} {:>12} {:>12}  {}\n",
            t.name(),
            format!("{:?}", t.status).to_uppercase(),
            t.timesteps,
            num(last),
            num(best),
            describe(&t.variant.params)
        ));
    }
    s
}

/// CSV field quoting (RFC 4180).
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// `results.csv`, `best_config.yaml`, `best_checkpoint/` and `trials.png`.
fn write_results(dir: &Path, state: &ExperimentState) -> Result<(), TuneError> {
    let mode = state.tune.mode;
    let mut csv = String::from("trial_id,status");
    for d in &state.dims {
        csv.push(',');
        csv.push_str(&csv_field(&d.path));
    }
    csv.push_str(",last_metric,best_metric,timesteps,wall_seconds,failures,run_dir\n");
    for t in &state.trials {
        let (last, best) = t.last_and_best(mode);
        let mut row = vec![t.name(), format!("{:?}", t.status).to_uppercase()];
        row.extend(t.variant.params.iter().map(|(_, v)| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }));
        let num = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
        row.push(num(last));
        row.push(num(best));
        row.push(t.timesteps.to_string());
        row.push(format!("{:.2}", t.wall_seconds));
        row.push(t.failures.to_string());
        let last_run = t.segments.checked_sub(1).map(|s| t.run_dir(dir, s));
        row.push(last_run.map_or(String::new(), |p| p.display().to_string()));
        csv.push_str(
            &row.iter()
                .map(|f| csv_field(f))
                .collect::<Vec<_>>()
                .join(","),
        );
        csv.push('\n');
    }
    let path = dir.join("results.csv");
    write_file_atomic(&path, csv.as_bytes()).map_err(|e| file_err(&path, e))?;
    if let Some(best) = state.best() {
        let path = dir.join("best_config.yaml");
        let yaml = serde_saphyr::to_string(&best.variant.config).map_err(|e| file_err(&path, e))?;
        write_file_atomic(&path, yaml.as_bytes()).map_err(|e| file_err(&path, e))?;
        if let Some(ck) = best.latest_checkpoint(dir) {
            copy_dir_atomic(&ck, &dir.join("best_checkpoint"))?;
        }
    }
    let curves: Vec<(String, Vec<(f64, f64)>)> = state
        .trials
        .iter()
        .filter(|t| !t.history.is_empty())
        .map(|t| {
            (
                label(t),
                t.history.iter().map(|&(s, v)| (s as f64, v)).collect(),
            )
        })
        .collect();
    let png = dir.join("trials.png");
    let title = format!("{} trials: {}", state.trials.len(), state.tune.metric);
    rl_training_core::plot::curves(&curves, &png, &title, &state.tune.metric)
        .map_err(|e| file_err(&png, e))?;
    Ok(())
}

/// Copies a checkpoint directory to `to` through a temporary directory and a rename.
fn copy_dir_atomic(from: &Path, to: &Path) -> Result<(), TuneError> {
    fn copy(from: &Path, to: &Path) -> std::io::Result<()> {
        fs::create_dir_all(to)?;
        for e in fs::read_dir(from)? {
            let e = e?;
            let target = to.join(e.file_name());
            if e.file_type()?.is_dir() {
                copy(&e.path(), &target)?;
            } else {
                fs::copy(e.path(), &target)?;
            }
        }
        Ok(())
    }
    let tmp = to.with_extension(format!("tmp-{}", std::process::id()));
    let _ = fs::remove_dir_all(&tmp);
    copy(from, &tmp).map_err(|e| file_err(from, e))?;
    if to.exists() {
        fs::remove_dir_all(to).map_err(|e| file_err(to, e))?;
    }
    fs::rename(&tmp, to).map_err(|e| file_err(to, e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ok(_: &RunConfig) -> Result<(), RlError> {
        Ok(())
    }

    #[test]
    fn a_new_experiment_checks_every_trial_config() {
        let cfg = json!({
            "algorithm": "ppo", "env_id": "CartPole-v1", "total_timesteps": 1000,
            "algo_kwargs": {"learning_rate": {"grid_search": [1e-3, 1e-4]}},
            "tune": {"num_samples": 2, "scheduler": {"type": "asha", "grace_period": 100}}
        });
        let s = ExperimentState::new(cfg.clone(), &ok).unwrap();
        assert_eq!(s.trials.len(), 4);
        assert!(s.trials.iter().all(|t| t.status == Status::Pending));
        // The trial configs are complete run configs without the tune section.
        assert!(s.trials[0].variant.config.get("tune").is_none());
        assert_eq!(
            s.trials[1].variant.config["algo_kwargs"]["learning_rate"],
            json!(1e-4)
        );
        let Scheduler::Asha(a) = &s.scheduler else {
            panic!("asha")
        };
        assert_eq!(a.max_t, 1000);
        // A key RunConfig does not have names its trial and path.
        let mut bad = cfg.clone();
        bad["n_env"] = json!({"grid_search": [1, 2]});
        let e = ExperimentState::new(bad, &ok).unwrap_err().to_string();
        assert!(e.contains("trial_0000") && e.contains("n_env"), "{e}");
        // The algorithm's own check (given by the caller) names the trial.
        let refuse = |r: &RunConfig| -> Result<(), RlError> {
            match r.algo_kwargs.get("learning_rate").and_then(Value::as_f64) {
                Some(v) if v < 5e-4 => Err(RlError::Config(ConfigError::new(
                    "algo_kwargs.learning_rate",
                    "too small",
                ))),
                _ => Ok(()),
            }
        };
        let e = ExperimentState::new(cfg, &refuse).unwrap_err().to_string();
        assert!(
            e.contains("trial_0001") && e.contains("algo_kwargs.learning_rate"),
            "{e}"
        );
    }

    #[test]
    fn tpe_refuses_grids() {
        let cfg = json!({
            "algorithm": "ppo", "env_id": "CartPole-v1", "total_timesteps": 1000,
            "seed": {"grid_search": [0, 1]},
            "tune": {"search_alg": "tpe"}
        });
        let e = ExperimentState::new(cfg, &ok).unwrap_err().to_string();
        assert!(e.contains("seed") && e.contains("grid_search"), "{e}");
    }

    #[test]
    fn results_of_a_rerun_replace_the_lost_ones() {
        let s = ExperimentState::new(
            json!({"algorithm": "ppo", "env_id": "CartPole-v1", "total_timesteps": 10}),
            &ok,
        )
        .unwrap();
        let mut t = s.trials[0].clone();
        for (step, v) in [(10, 1.0), (20, 3.0), (30, 2.0)] {
            t.record(step, v);
        }
        assert_eq!(t.last_and_best(Mode::Max), (Some(2.0), Some(3.0)));
        assert_eq!(t.last_and_best(Mode::Min), (Some(2.0), Some(1.0)));
        // Resumed from the checkpoint at 15: the results after it are replaced.
        t.record(20, 5.0);
        assert_eq!(t.history, vec![(10, 1.0), (20, 5.0)]);
    }

    #[test]
    fn state_round_trips_and_refuses_other_versions() {
        let dir = std::env::temp_dir().join(format!("rl-tune-state-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let s = ExperimentState::new(
            json!({"algorithm": "ppo", "env_id": "CartPole-v1", "total_timesteps": 10,
                   "seed": {"choice": [1, 2, 3]}, "tune": {"num_samples": 3}}),
            &ok,
        )
        .unwrap();
        s.save(&dir).unwrap();
        assert_eq!(ExperimentState::load(&dir).unwrap(), s);
        let mut other = s.clone();
        other.version = 99;
        other.save(&dir).unwrap();
        let e = ExperimentState::load(&dir).unwrap_err().to_string();
        assert!(e.contains(STATE_FILE) && e.contains("version 99"), "{e}");
        fs::write(dir.join(STATE_FILE), "{").unwrap();
        assert!(
            ExperimentState::load(&dir)
                .unwrap_err()
                .to_string()
                .contains(STATE_FILE)
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn csv_fields_are_quoted_when_needed() {
        assert_eq!(csv_field("a"), "a");
        assert_eq!(csv_field("[64,64]"), "\"[64,64]\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
