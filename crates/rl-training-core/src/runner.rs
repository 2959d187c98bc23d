//! The training loop around an [`Algorithm`]: logging, progress bar, periodic evaluation and
//! checkpoints, stop conditions, the learning-curve PNG and the end-of-run summary.

use crate::algorithm::{Algorithm, EvalResult, RlError, StopConditions};
use crate::config::RunConfig;
use crate::env::Env;
use crate::logger::{Logger, Metrics};
use crate::multi_agent::{MultiAgentAlgorithm, MultiAgentEnv};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// What `rl train` prints as its last line (JSON).
#[derive(Debug, Clone, Serialize)]
pub struct RunSummary {
    /// Env steps taken.
    pub total_timesteps: u64,
    /// Wall-clock seconds of training (evaluations and checkpoints included).
    pub train_seconds: f64,
    /// Mean return of the final evaluation.
    pub eval_mean_return: f64,
    /// Standard deviation of the final evaluation's returns.
    pub eval_std_return: f64,
    /// Best periodic evaluation (when periodic evaluation is on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub best_eval_mean_return: Option<f64>,
    /// Env steps at which the best evaluation happened.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub best_eval_timesteps: Option<u64>,
    /// The run directory.
    pub run_dir: String,
    /// The final checkpoint.
    pub checkpoint: String,
    /// The CPU kernel level flex ran at ([`crate::kernels::active`]).
    pub kernels: crate::kernels::KernelLevel,
    /// The threads flex's kernels ran on ([`crate::threads`]).
    pub threads: usize,
}

/// The run config as the YAML `rl train` saves in the run directory (`config.yaml`); it
/// parses back to the same config.
pub fn config_yaml(run: &RunConfig) -> Result<String, RlError> {
    serde_saphyr::to_string(run).map_err(|e| RlError::Other(format!("config.yaml: {e}")))
}

fn io_err(path: &Path, e: std::io::Error) -> RlError {
    RlError::Other(format!("{}: {e}", path.display()))
}

/// Runs `algo` until its budget (or another stop condition), writing logs, checkpoints and the
/// learning curve into `run_dir`, and evaluating on `eval_env`.
pub fn run_training(
    algo: &mut dyn Algorithm,
    run: &RunConfig,
    eval_env: &mut dyn Env,
    run_dir: &Path,
    show_progress: bool,
) -> Result<RunSummary, RlError> {
    run_training_until(algo, run, eval_env, run_dir, show_progress, None)
}

/// [`run_training`] that also stops when `interrupt` becomes true (checked between training
/// iterations, e.g. set by a Ctrl-C handler): it then saves `run_dir/checkpoint`, flushes the
/// logs, draws the learning curve and returns [`RlError::Interrupted`], so `rl resume` can
/// continue the run.
pub fn run_training_until(
    algo: &mut dyn Algorithm,
    run: &RunConfig,
    eval_env: &mut dyn Env,
    run_dir: &Path,
    show_progress: bool,
    interrupt: Option<&AtomicBool>,
) -> Result<RunSummary, RlError> {
    let mut t = SingleAgent {
        algo,
        env: eval_env,
    };
    run_trainee_until(&mut t, run, run_dir, show_progress, interrupt)
}

/// [`run_training_until`] for a multi-agent run, evaluated on `eval_env`: the evaluation
/// logs `eval/mean_reward` (the sum over agents) and each agent's and policy's mean return
/// (`eval/agents/<id>/mean_reward`, `eval/policies/<id>/mean_reward`).
pub fn run_multi_agent_until(
    algo: &mut dyn MultiAgentAlgorithm,
    run: &RunConfig,
    eval_env: &mut dyn MultiAgentEnv,
    run_dir: &Path,
    show_progress: bool,
    interrupt: Option<&AtomicBool>,
) -> Result<RunSummary, RlError> {
    let mut t = MultiAgent {
        algo,
        env: eval_env,
    };
    run_trainee_until(&mut t, run, run_dir, show_progress, interrupt)
}

/// What the training loop drives: an algorithm and the env it is evaluated on.
trait Trainee {
    fn num_timesteps(&self) -> u64;
    fn total_timesteps(&self) -> u64;
    fn train(&mut self) -> Result<Metrics, RlError>;
    fn save(&self, dir: &Path) -> Result<(), RlError>;
    /// The run's deterministic evaluation and the metrics to log for it.
    fn evaluate(&mut self, run: &RunConfig) -> Result<(EvalResult, Metrics), RlError>;
}

struct SingleAgent<'a> {
    algo: &'a mut dyn Algorithm,
    env: &'a mut dyn Env,
}

impl Trainee for SingleAgent<'_> {
    fn num_timesteps(&self) -> u64 {
        self.algo.num_timesteps()
    }
    fn total_timesteps(&self) -> u64 {
        self.algo.total_timesteps()
    }
    fn train(&mut self) -> Result<Metrics, RlError> {
        self.algo.train()
    }
    fn save(&self, dir: &Path) -> Result<(), RlError> {
        self.algo.save(dir)
    }
    fn evaluate(&mut self, run: &RunConfig) -> Result<(EvalResult, Metrics), RlError> {
        let r = self
            .algo
            .evaluate(self.env, run.n_eval_episodes, true, run.eval_seed())?;
        let m = eval_metrics(&r);
        Ok((r, m))
    }
}

struct MultiAgent<'a> {
    algo: &'a mut dyn MultiAgentAlgorithm,
    env: &'a mut dyn MultiAgentEnv,
}

impl Trainee for MultiAgent<'_> {
    fn num_timesteps(&self) -> u64 {
        self.algo.num_timesteps()
    }
    fn total_timesteps(&self) -> u64 {
        self.algo.total_timesteps()
    }
    fn train(&mut self) -> Result<Metrics, RlError> {
        self.algo.train()
    }
    fn save(&self, dir: &Path) -> Result<(), RlError> {
        self.algo.save(dir)
    }
    fn evaluate(&mut self, run: &RunConfig) -> Result<(EvalResult, Metrics), RlError> {
        let e = self
            .algo
            .evaluate(self.env, run.n_eval_episodes, true, run.eval_seed())?;
        let r = EvalResult::from_episodes(&e.episodes);
        let mut m = eval_metrics(&r);
        for (a, v) in &e.per_agent {
            m.insert(format!("eval/agents/{a}/mean_reward"), *v);
        }
        for (p, v) in &e.per_policy {
            m.insert(format!("eval/policies/{p}/mean_reward"), *v);
        }
        Ok((r, m))
    }
}

fn eval_metrics(r: &EvalResult) -> Metrics {
    let mut m = Metrics::new();
    m.insert("eval/mean_reward".into(), r.mean_return);
    m.insert("eval/std_reward".into(), r.std_return);
    m.insert("eval/mean_ep_length".into(), r.mean_length);
    // RLlib's name, which users of its offline algorithms look for.
    m.insert("evaluation/episode_return".into(), r.mean_return);
    m
}

fn run_trainee_until(
    algo: &mut dyn Trainee,
    run: &RunConfig,
    run_dir: &Path,
    show_progress: bool,
    interrupt: Option<&AtomicBool>,
) -> Result<RunSummary, RlError> {
    std::fs::create_dir_all(run_dir).map_err(|e| io_err(run_dir, e))?;
    let cfg_path = run_dir.join("config.yaml");
    crate::checkpoint::write_file_atomic(&cfg_path, config_yaml(run)?.as_bytes())?;
    let mut log = Logger::create(run_dir).map_err(|e| io_err(run_dir, e))?;
    let total = algo.total_timesteps();
    let bar = if show_progress {
        ProgressBar::new(total)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} steps  {per_sec}  ETA {eta}  {msg}")
            .expect("valid template"),
    );
    bar.set_position(algo.num_timesteps());
    let started = Instant::now();
    let mut recent: VecDeque<f64> = VecDeque::with_capacity(100);
    let mut best: Option<(f64, u64)> = None;
    let next_multiple =
        |freq: u64, ts: u64| ts.checked_div(freq).map_or(u64::MAX, |k| (k + 1) * freq);
    let mut next_eval = next_multiple(run.eval_freq, algo.num_timesteps());
    let mut next_ckpt = next_multiple(run.checkpoint_freq, algo.num_timesteps());
    let evaluate = |algo: &mut dyn Trainee, log: &mut Logger| -> Result<EvalResult, RlError> {
        let (r, m) = algo.evaluate(run)?;
        log.log(algo.num_timesteps(), &m)
            .map_err(|e| RlError::Other(e.to_string()))?;
        // Evaluations reach the files at once: `rl tune` reads them while the run goes on.
        log.flush().map_err(|e| RlError::Other(e.to_string()))?;
        Ok(r)
    };
    let mut last_eval: Option<EvalResult> = None;
    let interrupted = || interrupt.is_some_and(|f| f.load(Ordering::SeqCst));
    loop {
        if interrupted() {
            bar.finish_and_clear();
            let ckpt = run_dir.join("checkpoint");
            algo.save(&ckpt)?;
            log.flush().map_err(|e| io_err(run_dir, e))?;
            draw_curve(&log, run, run_dir)?;
            return Err(RlError::Interrupted {
                timesteps: algo.num_timesteps(),
                checkpoint: ckpt.display().to_string(),
            });
        }
        // total_timesteps is re-read every iteration: `resume` may have raised it.
        let stop = StopConditions {
            total_timesteps: algo.total_timesteps(),
            return_threshold: run.return_threshold,
            wall_time: run.max_wall_seconds.map(std::time::Duration::from_secs_f64),
        };
        if stop.reached(
            algo.num_timesteps(),
            started,
            last_eval.as_ref().map(|r| r.mean_return),
        ) {
            break;
        }
        let m = algo.train()?;
        let ts = algo.num_timesteps();
        if let Some(&r) = m.get("charts/episodic_return") {
            if recent.len() == 100 {
                recent.pop_front();
            }
            recent.push_back(r);
        }
        log.log(ts, &m).map_err(|e| RlError::Other(e.to_string()))?;
        bar.set_position(ts);
        if !recent.is_empty() {
            bar.set_message(format!(
                "return {:.1}",
                recent.iter().sum::<f64>() / recent.len() as f64
            ));
        }
        if ts >= next_eval {
            while next_eval <= ts {
                next_eval += run.eval_freq;
            }
            let r = evaluate(algo, &mut log)?;
            if best.is_none_or(|(b, _)| r.mean_return > b) {
                best = Some((r.mean_return, ts));
            }
            bar.println(format!(
                "step {ts}: eval mean return {:.2} ± {:.2}",
                r.mean_return, r.std_return
            ));
            last_eval = Some(r);
        }
        if ts >= next_ckpt {
            while next_ckpt <= ts {
                next_ckpt += run.checkpoint_freq;
            }
            let p = run_dir.join("checkpoints").join(format!("step_{ts:010}"));
            algo.save(&p)?;
        }
    }
    bar.finish_and_clear();
    let final_eval = evaluate(algo, &mut log)?;
    if run.eval_freq > 0 && best.is_none_or(|(b, _)| final_eval.mean_return > b) {
        best = Some((final_eval.mean_return, algo.num_timesteps()));
    }
    let ckpt = run_dir.join("checkpoint");
    algo.save(&ckpt)?;
    log.flush().map_err(|e| io_err(run_dir, e))?;
    draw_curve(&log, run, run_dir)?;
    Ok(RunSummary {
        total_timesteps: algo.num_timesteps(),
        train_seconds: started.elapsed().as_secs_f64(),
        eval_mean_return: final_eval.mean_return,
        eval_std_return: final_eval.std_return,
        best_eval_mean_return: if run.eval_freq > 0 {
            best.map(|b| b.0)
        } else {
            None
        },
        best_eval_timesteps: if run.eval_freq > 0 {
            best.map(|b| b.1)
        } else {
            None
        },
        run_dir: run_dir.display().to_string(),
        checkpoint: ckpt.display().to_string(),
        kernels: crate::kernels::active(),
        threads: rayon::current_num_threads(),
    })
}

fn draw_curve(log: &Logger, run: &RunConfig, run_dir: &Path) -> Result<(), RlError> {
    let png = run_dir.join("learning_curve.png");
    crate::plot::learning_curve(log.history(), &png, &crate::plot::title_of(run))
        .map_err(|e| RlError::Other(format!("{}: {e}", png.display())))
}

/// A fresh run directory under `root`: `<algo>_<env>_seed<seed>_<unix time>`.
pub fn default_run_dir(root: &Path, run: &RunConfig) -> PathBuf {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    root.join(format!(
        "{}_{}_seed{}_{t}",
        run.algorithm, run.env_id, run.seed
    ))
}
