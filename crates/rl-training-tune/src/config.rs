//! The `tune:` section of a run YAML (Ray Tune's `TuneConfig`, `RunConfig.stop` and the
//! schedulers' arguments, with Tune's names and defaults).

use rl_training_core::config::{ConfigError, strict};
use serde::{Deserialize, Serialize};
use smart_default::SmartDefault;
use std::collections::BTreeMap;

/// Whether a larger metric is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, SmartDefault)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Larger is better.
    #[default]
    Max,
    /// Smaller is better.
    Min,
}

impl Mode {
    /// `a` better than `b`.
    pub fn better(self, a: f64, b: f64) -> bool {
        match self {
            Mode::Max => a > b,
            Mode::Min => a < b,
        }
    }

    /// The metric with larger = better (what the schedulers compare).
    pub fn score(self, v: f64) -> f64 {
        match self {
            Mode::Max => v,
            Mode::Min => -v,
        }
    }
}

/// How trial configs are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, SmartDefault)]
#[serde(rename_all = "lowercase")]
pub enum SearchAlg {
    /// Tune's basic variant generator: every grid point, `num_samples` times, other domains
    /// drawn at random (`random` is the same generator).
    #[default]
    Grid,
    /// As `grid`.
    Random,
    /// Tree-structured Parzen estimators: after `n_startup_trials` random trials, each new
    /// trial's parameters are proposed from the ended trials' results (no `grid_search`).
    Tpe,
}

/// When trials stop early.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, SmartDefault)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum SchedulerConfig {
    /// Every trial runs to its end.
    #[default]
    Fifo,
    /// Asynchronous successive halving (Tune's `ASHAScheduler`, one bracket): at rungs
    /// `grace_period · reduction_factor^k` env steps a trial goes on only if its metric is in the
    /// top `1 / reduction_factor` of the trials recorded at that rung so far.
    Asha {
        /// Env steps before the first rung.
        #[serde(default = "asha_grace")]
        grace_period: u64,
        /// Keep the top 1/η at each rung.
        #[serde(default = "asha_eta")]
        reduction_factor: f64,
        /// Trials stop at this many env steps (default: none, their own budget).
        #[serde(default)]
        max_t: Option<u64>,
    },
    /// Tune's `MedianStoppingRule`: after `grace_period` env steps a trial stops when its best
    /// result is worse than the median of the other trials' running means up to the same step.
    Median {
        /// Env steps before a trial can be stopped.
        #[serde(default = "median_grace")]
        grace_period: u64,
        /// Other trials needed before the rule applies.
        #[serde(default = "median_samples")]
        min_samples_required: usize,
    },
    /// Population based training (Tune's `PopulationBasedTraining`): every
    /// `perturbation_interval` env steps a trial in the bottom `quantile_fraction` takes the
    /// checkpoint of one in the top quantile and goes on with that trial's hyperparameters,
    /// perturbed.
    Pbt {
        /// Env steps between a trial's exploit/explore decisions (trials checkpoint at least
        /// this often).
        #[serde(default = "pbt_interval")]
        perturbation_interval: u64,
        /// What explore changes, by dotted path: a list (a neighbour is taken, or with
        /// `resample_probability` any value) or a search space (the value is multiplied by
        /// one of `perturbation_factors`, or with `resample_probability` drawn anew).
        hyperparam_mutations: BTreeMap<String, serde_json::Value>,
        /// Size of the bottom and top quantiles.
        #[serde(default = "quarter")]
        quantile_fraction: f64,
        /// Chance of a fresh draw instead of a perturbation.
        #[serde(default = "quarter")]
        resample_probability: f64,
        /// The factors a perturbed number is multiplied by.
        #[serde(default = "factors")]
        perturbation_factors: (f64, f64),
    },
}

fn pbt_interval() -> u64 {
    10_000
}
fn quarter() -> f64 {
    0.25
}
fn factors() -> (f64, f64) {
    (1.2, 0.8)
}

fn asha_grace() -> u64 {
    10_000
}
fn asha_eta() -> f64 {
    4.0
}
fn median_grace() -> u64 {
    10_000
}
fn median_samples() -> usize {
    3
}

/// The `tune:` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, SmartDefault)]
#[serde(deny_unknown_fields, default)]
pub struct TuneConfig {
    /// The metric trials are compared on (any logged metric; evaluations log
    /// `eval/mean_reward`).
    #[default("eval/mean_reward".to_string())]
    pub metric: String,
    /// `max` or `min`.
    pub mode: Mode,
    /// Repeats of every grid point.
    #[default(1)]
    pub num_samples: usize,
    /// Trials running at once (default: the machine's cores).
    pub max_concurrent_trials: Option<usize>,
    /// Compute threads of each trial (`RAYON_NUM_THREADS` of its process).
    #[default(1)]
    pub threads_per_trial: usize,
    /// `grid` or `random` (the same generator), or `tpe`.
    pub search_alg: SearchAlg,
    /// With `tpe`: trials drawn at random before TPE proposes.
    #[default(crate::search::STARTUP_TRIALS)]
    pub n_startup_trials: usize,
    /// Seed of the searcher's draws.
    pub seed: u64,
    /// `{type: fifo | asha | median, ...}`.
    pub scheduler: SchedulerConfig,
    /// A trial stops once a logged value reaches this (Tune's dict form: `timesteps` and
    /// `time_total_s` too).
    pub stop: BTreeMap<String, f64>,
    /// The experiment stops (its running trials checkpointed) after this many seconds.
    pub time_budget_s: Option<f64>,
    /// Restarts of a failed trial (from its last checkpoint) before it counts as errored.
    pub max_failures: usize,
}

impl TuneConfig {
    /// Parses the `tune:` table strictly (errors name `tune.<key>`) and range-checks it.
    pub fn from_value(v: serde_json::Value) -> Result<Self, ConfigError> {
        let c: TuneConfig = strict(v, "tune")?;
        let err = |f: &str, m: &str| Err(ConfigError::new(format!("tune.{f}"), m));
        if c.num_samples == 0 {
            return err("num_samples", "must be at least 1");
        }
        if c.max_concurrent_trials == Some(0) {
            return err("max_concurrent_trials", "must be at least 1");
        }
        if c.threads_per_trial == 0 {
            return err("threads_per_trial", "must be at least 1");
        }
        if c.metric.is_empty() {
            return err("metric", "must name a logged metric");
        }
        match c.scheduler {
            SchedulerConfig::Asha {
                grace_period,
                reduction_factor,
                max_t,
            } => {
                if grace_period == 0 {
                    return err("scheduler.grace_period", "must be at least 1");
                }
                if !(reduction_factor > 1.0) {
                    return err("scheduler.reduction_factor", "must be above 1");
                }
                if max_t.is_some_and(|m| m < grace_period) {
                    return err("scheduler.max_t", "must be at least grace_period");
                }
            }
            SchedulerConfig::Median {
                min_samples_required: 0,
                ..
            } => {
                return err("scheduler.min_samples_required", "must be at least 1");
            }
            SchedulerConfig::Pbt {
                perturbation_interval,
                ref hyperparam_mutations,
                quantile_fraction,
                resample_probability,
                ..
            } => {
                if perturbation_interval == 0 {
                    return err("scheduler.perturbation_interval", "must be at least 1");
                }
                if !(quantile_fraction > 0.0 && quantile_fraction <= 0.5) {
                    return err("scheduler.quantile_fraction", "must be in (0, 0.5]");
                }
                if !(0.0..=1.0).contains(&resample_probability) {
                    return err("scheduler.resample_probability", "must be in [0, 1]");
                }
                if hyperparam_mutations.is_empty() {
                    return err("scheduler.hyperparam_mutations", "names no hyperparameter");
                }
                for (path, m) in hyperparam_mutations {
                    crate::scheduler::Mutation::parse(m, path)?;
                }
            }
            _ => {}
        }
        if let Some(t) = c.time_budget_s.filter(|t| !(*t > 0.0)) {
            return err("time_budget_s", &format!("must be positive, got {t}"));
        }
        Ok(c)
    }

    /// Trials at once: `max_concurrent_trials`, else the cores divided by the threads each.
    pub fn concurrency(&self) -> usize {
        self.max_concurrent_trials.unwrap_or_else(|| {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            (cores / self.threads_per_trial).max(1)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_are_tunes() {
        let c = TuneConfig::from_value(json!({})).unwrap();
        assert_eq!(c.metric, "eval/mean_reward");
        assert_eq!((c.mode, c.num_samples, c.max_failures), (Mode::Max, 1, 0));
        assert_eq!(c.scheduler, SchedulerConfig::Fifo);
        let a = TuneConfig::from_value(json!({"scheduler": {"type": "asha"}})).unwrap();
        assert_eq!(
            a.scheduler,
            SchedulerConfig::Asha {
                grace_period: 10_000,
                reduction_factor: 4.0,
                max_t: None
            }
        );
    }

    #[test]
    fn bad_keys_and_values_name_their_path() {
        for (v, field) in [
            (json!({"metrc": "x"}), "tune.metrc"),
            (json!({"mode": "biggest"}), "tune.mode"),
            (json!({"num_samples": 0}), "tune.num_samples"),
            (
                json!({"scheduler": {"type": "hyperband"}}),
                "tune.scheduler",
            ),
            (
                json!({"scheduler": {"type": "asha", "reduction_factor": 1}}),
                "tune.scheduler.reduction_factor",
            ),
            (
                json!({"scheduler": {"type": "asha", "grace": 1}}),
                "tune.scheduler",
            ),
            (json!({"search_alg": "bayes"}), "tune.search_alg"),
            (json!({"time_budget_s": -1}), "tune.time_budget_s"),
        ] {
            let e = TuneConfig::from_value(v.clone()).unwrap_err();
            assert!(e.field.starts_with(field), "{v}: {e}");
        }
    }
}
