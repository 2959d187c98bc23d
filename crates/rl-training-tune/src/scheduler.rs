//! Trial schedulers: whether a trial goes on after each result. Their state is plain data,
//! saved with the experiment, so a resumed experiment decides as the interrupted one would
//! have (Ray Tune loses it on restore: ray#30838).
//!
//! Scores are "larger is better" ([`Mode::score`](crate::config::Mode::score) of the metric);
//! time is env steps.

use crate::config::SchedulerConfig;
use crate::space::{Domain, pointer};
use rl_training_core::Rng;
use rl_training_core::config::ConfigError;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// A scheduler's answer to one result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Keep training.
    Continue,
    /// Stop the trial (it keeps its checkpoint).
    Stop,
    /// PBT: go on from trial `donor`'s checkpoint with its hyperparameters, perturbed.
    Exploit {
        /// The better trial.
        donor: usize,
    },
}

/// The scheduler of an experiment, with its state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Scheduler {
    /// Never stops a trial.
    Fifo,
    /// Asynchronous successive halving.
    Asha(Asha),
    /// The median stopping rule.
    Median(MedianStopping),
    /// Population based training.
    Pbt(Pbt),
}

impl Scheduler {
    /// The scheduler a `tune.scheduler` table asks for; `horizon` is the trials' budget in env
    /// steps (ASHA's `max_t` when none is given).
    pub fn new(cfg: &SchedulerConfig, horizon: u64, seed: u64) -> Scheduler {
        match *cfg {
            SchedulerConfig::Fifo => Scheduler::Fifo,
            SchedulerConfig::Asha {
                grace_period,
                reduction_factor,
                max_t,
            } => Scheduler::Asha(Asha::new(
                grace_period,
                reduction_factor,
                max_t.unwrap_or(horizon),
            )),
            SchedulerConfig::Median {
                grace_period,
                min_samples_required,
            } => Scheduler::Median(MedianStopping {
                grace_period,
                min_samples_required,
                results: BTreeMap::new(),
            }),
            SchedulerConfig::Pbt {
                perturbation_interval,
                ref hyperparam_mutations,
                quantile_fraction,
                resample_probability,
                perturbation_factors,
            } => Scheduler::Pbt(Pbt {
                perturbation_interval,
                mutations: hyperparam_mutations
                    .iter()
                    .map(|(p, m)| {
                        (
                            p.clone(),
                            Mutation::parse(m, p).expect("checked with the config"),
                        )
                    })
                    .collect(),
                quantile_fraction,
                resample_probability,
                perturbation_factors,
                last_perturbation: BTreeMap::new(),
                latest: BTreeMap::new(),
                rng: Rng::for_stream(seed, "pbt"),
            }),
        }
    }

    /// Trial `trial` reports `score` at `t` env steps.
    pub fn on_result(&mut self, trial: usize, t: u64, score: f64) -> Decision {
        match self {
            Scheduler::Fifo => Decision::Continue,
            Scheduler::Asha(a) => a.on_result(trial, t, score),
            Scheduler::Median(m) => m.on_result(trial, t, score),
            Scheduler::Pbt(p) => p.on_result(trial, t, score),
        }
    }
}

/// One rung of ASHA: its milestone and the scores recorded there, by trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rung {
    /// Env steps.
    pub milestone: u64,
    /// Each trial's score when it first reached the milestone.
    pub recorded: BTreeMap<usize, f64>,
}

/// Asynchronous successive halving with one bracket (Tune's `ASHAScheduler`, `brackets=1`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Asha {
    /// η: the top 1/η of a rung goes on.
    pub reduction_factor: f64,
    /// Every trial stops here.
    pub max_t: u64,
    /// Rungs, highest milestone first.
    pub rungs: Vec<Rung>,
}

impl Asha {
    /// Rungs at `grace_period · η^k` below `max_t`.
    pub fn new(grace_period: u64, reduction_factor: f64, max_t: u64) -> Asha {
        let mut milestones = Vec::new();
        let mut m = grace_period as f64;
        while m < max_t as f64 {
            milestones.push(m.round() as u64);
            m *= reduction_factor;
        }
        let rungs = milestones
            .into_iter()
            .rev()
            .map(|milestone| Rung {
                milestone,
                recorded: BTreeMap::new(),
            })
            .collect();
        Asha {
            reduction_factor,
            max_t,
            rungs,
        }
    }

    /// Tune's rule: at the highest rung the trial has newly reached, it stops when its score is
    /// below the `1 − 1/η` quantile of the scores recorded there before it; its score is then
    /// recorded. At `max_t` every trial stops.
    pub fn on_result(&mut self, trial: usize, t: u64, score: f64) -> Decision {
        let mut decision = Decision::Continue;
        for rung in &mut self.rungs {
            if t < rung.milestone {
                continue;
            }
            if rung.recorded.contains_key(&trial) {
                // Decided at this rung already; lower rungs were passed on the way.
                break;
            }
            let q = 1.0 - 1.0 / self.reduction_factor;
            let values: Vec<f64> = rung.recorded.values().copied().collect();
            if quantile(&values, q).is_some_and(|cutoff| score < cutoff) {
                decision = Decision::Stop;
            }
            rung.recorded.insert(trial, score);
            break;
        }
        if t >= self.max_t {
            decision = Decision::Stop;
        }
        decision
    }
}

/// The `q` quantile with linear interpolation (numpy's default); `None` when empty.
pub fn quantile(values: &[f64], q: f64) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let pos = q * (v.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    Some(v[lo] + (v[hi] - v[lo]) * (pos - lo as f64))
}

/// Tune's `MedianStoppingRule`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MedianStopping {
    /// Env steps before a trial can be stopped.
    pub grace_period: u64,
    /// Other trials (that got at least as far) needed for the rule to apply.
    pub min_samples_required: usize,
    /// Every trial's `(t, score)` results.
    pub results: BTreeMap<usize, Vec<(u64, f64)>>,
}

impl MedianStopping {
    /// Stops a trial past the grace period whose best score is below the median of the other
    /// trials' running means up to `t` (among trials that have reached `t`).
    pub fn on_result(&mut self, trial: usize, t: u64, score: f64) -> Decision {
        // A rerun from an earlier checkpoint replaces the results after it.
        let own = self.results.entry(trial).or_default();
        own.retain(|&(s, _)| s < t);
        own.push((t, score));
        if t < self.grace_period {
            return Decision::Continue;
        }
        let means: Vec<f64> = self
            .results
            .iter()
            .filter(|(id, r)| **id != trial && r.last().is_some_and(|&(last, _)| last >= t))
            .map(|(_, r)| {
                let upto: Vec<f64> = r
                    .iter()
                    .filter(|&&(s, _)| s <= t)
                    .map(|&(_, v)| v)
                    .collect();
                upto.iter().sum::<f64>() / upto.len().max(1) as f64
            })
            .collect();
        if means.len() < self.min_samples_required {
            return Decision::Continue;
        }
        let median = quantile(&means, 0.5).expect("not empty");
        let best = self.results[&trial]
            .iter()
            .map(|&(_, v)| v)
            .fold(f64::NEG_INFINITY, f64::max);
        if best < median {
            Decision::Stop
        } else {
            Decision::Continue
        }
    }
}

/// What PBT's explore step changes in one hyperparameter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Mutation {
    /// A neighbour in the list (or, with `resample_probability`, any value).
    List(Vec<Value>),
    /// The value times a perturbation factor (or, with `resample_probability`, a new draw).
    Space(Domain),
}

impl Mutation {
    /// A list, or a one-key search space table; errors name
    /// `tune.scheduler.hyperparam_mutations.<path>`.
    pub fn parse(v: &Value, path: &str) -> Result<Mutation, ConfigError> {
        let field = format!("tune.scheduler.hyperparam_mutations.{path}");
        match v {
            Value::Array(items) if !items.is_empty() => Ok(Mutation::List(items.clone())),
            Value::Object(m) if m.len() == 1 => {
                let (k, arg) = m.iter().next().expect("one key");
                match Domain::parse(k, arg, &field)? {
                    Domain::Grid(items) | Domain::Choice(items) => Ok(Mutation::List(items)),
                    d => Ok(Mutation::Space(d)),
                }
            }
            other => Err(ConfigError::new(
                field,
                format!(
                    "expected a non-empty list or a search space such as {{loguniform: [lo, hi]}}, got {other}"
                ),
            )),
        }
    }
}

/// Population based training (Tune's `PopulationBasedTraining`, synchronous = false).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pbt {
    /// Env steps between a trial's decisions.
    pub perturbation_interval: u64,
    /// What explore changes, by dotted path.
    pub mutations: Vec<(String, Mutation)>,
    /// Size of the bottom and top quantiles.
    pub quantile_fraction: f64,
    /// Chance of a fresh draw instead of a perturbation.
    pub resample_probability: f64,
    /// Factors a perturbed number is multiplied by.
    pub perturbation_factors: (f64, f64),
    /// Each trial's last decision point.
    pub last_perturbation: BTreeMap<usize, u64>,
    /// Each trial's latest score.
    pub latest: BTreeMap<usize, f64>,
    /// Donors and explore draws.
    pub rng: Rng,
}

impl Pbt {
    /// At a trial's decision point (every `perturbation_interval` env steps): a trial in the
    /// bottom quantile exploits a random trial of the top quantile.
    pub fn on_result(&mut self, trial: usize, t: u64, score: f64) -> Decision {
        self.latest.insert(trial, score);
        let last = self.last_perturbation.get(&trial).copied().unwrap_or(0);
        if t < last + self.perturbation_interval {
            return Decision::Continue;
        }
        self.last_perturbation.insert(trial, t);
        let (lower, upper) = self.quantiles();
        if lower.contains(&trial) && !upper.is_empty() {
            let donor = upper[self.rng.below(upper.len() as u64) as usize];
            return Decision::Exploit { donor };
        }
        Decision::Continue
    }

    /// Trials by their latest score: the bottom and the top `ceil(n · quantile_fraction)`
    /// (at most half each; none with fewer than two trials).
    pub fn quantiles(&self) -> (Vec<usize>, Vec<usize>) {
        let mut ranked: Vec<(usize, f64)> = self.latest.iter().map(|(&i, &s)| (i, s)).collect();
        if ranked.len() <= 1 {
            return (Vec::new(), Vec::new());
        }
        ranked.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
        let n =
            ((ranked.len() as f64 * self.quantile_fraction).ceil() as usize).min(ranked.len() / 2);
        let ids: Vec<usize> = ranked.iter().map(|r| r.0).collect();
        (ids[..n].to_vec(), ids[ids.len() - n..].to_vec())
    }

    /// The explored hyperparameters for a trial that takes over `donor_config`: each mutated
    /// path's new value.
    pub fn explore(&mut self, donor_config: &Value) -> Vec<(String, Value)> {
        let mut out = Vec::with_capacity(self.mutations.len());
        for (path, m) in &self.mutations {
            let cur = pointer(donor_config, path);
            let resample = self.rng.uniform() < self.resample_probability;
            let v = match m {
                Mutation::List(values) => {
                    match values.iter().position(|v| Some(v) == cur) {
                        Some(i) if !resample => {
                            // A neighbour, staying inside the list.
                            let j = if self.rng.below(2) == 0 {
                                i.saturating_sub(1)
                            } else {
                                i + 1
                            };
                            values[j.min(values.len() - 1)].clone()
                        }
                        _ => values[self.rng.below(values.len() as u64) as usize].clone(),
                    }
                }
                Mutation::Space(d) => match cur.and_then(Value::as_f64) {
                    Some(x) if !resample => {
                        let (a, b) = self.perturbation_factors;
                        let f = if self.rng.below(2) == 0 { a } else { b };
                        if cur.is_some_and(|c| c.is_i64() || c.is_u64()) {
                            Value::from((x * f).round() as i64)
                        } else {
                            serde_json::Number::from_f64(x * f).map_or(Value::Null, Value::Number)
                        }
                    }
                    _ => d.sample(&mut self.rng),
                },
            };
            out.push((path.clone(), v));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_as_numpy() {
        assert_eq!(quantile(&[], 0.5), None);
        assert_eq!(quantile(&[3.0], 0.75), Some(3.0));
        // np.percentile([1, 2, 3, 4], 75) = 3.25; np.median([5, 1, 3]) = 3.
        assert_eq!(quantile(&[4.0, 1.0, 3.0, 2.0], 0.75), Some(3.25));
        assert_eq!(quantile(&[5.0, 1.0, 3.0], 0.5), Some(3.0));
    }

    #[test]
    fn asha_rungs_and_promotions() {
        // grace 10, η 2, max_t 100: rungs at 80, 40, 20, 10.
        let mut a = Asha::new(10, 2.0, 100);
        let m: Vec<u64> = a.rungs.iter().map(|r| r.milestone).collect();
        assert_eq!(m, vec![80, 40, 20, 10]);
        // The first trial at a rung has nothing to beat.
        assert_eq!(a.on_result(0, 10, 5.0), Decision::Continue);
        // Trial 1 is below the median (η = 2) of {5}: stopped.
        assert_eq!(a.on_result(1, 10, 4.0), Decision::Stop);
        // Trial 2 beats the 0.5 quantile of {5, 4} = 4.5.
        assert_eq!(a.on_result(2, 10, 4.6), Decision::Continue);
        // A result between rungs decides nothing new.
        assert_eq!(a.on_result(2, 15, -100.0), Decision::Continue);
        // Trial 0 reaches 20 first and goes on; trial 2 below it at 20 stops.
        assert_eq!(a.on_result(0, 20, 6.0), Decision::Continue);
        assert_eq!(a.on_result(2, 21, 5.0), Decision::Stop);
        assert_eq!(a.rungs[2].recorded.len(), 2);
        // A late report that jumps two rungs is judged at the highest one reached (40).
        assert_eq!(a.on_result(3, 45, 1.0), Decision::Continue);
        assert!(a.rungs[1].recorded.contains_key(&3) && !a.rungs[2].recorded.contains_key(&3));
        // Everyone stops at max_t.
        assert_eq!(a.on_result(0, 100, 99.0), Decision::Stop);
    }

    #[test]
    fn median_stopping_on_hand_made_histories() {
        let mut m = MedianStopping {
            grace_period: 20,
            min_samples_required: 2,
            results: BTreeMap::new(),
        };
        // Three good trials to 40 steps: running means up to 20 are 1.5, 2.5 and 3.5.
        for (id, base) in [(0, 1.0), (1, 2.0), (2, 3.0)] {
            for (t, dv) in [(10, 0.0), (20, 1.0), (30, 2.0), (40, 3.0)] {
                assert_eq!(
                    m.on_result(id, t, base + dv),
                    Decision::Continue,
                    "{id} {t}"
                );
            }
        }
        // Before the grace period nothing stops, however bad.
        assert_eq!(m.on_result(3, 10, -50.0), Decision::Continue);
        // At 20 trial 3's best (2.4) is below the median 2.5 of the others' running means.
        assert_eq!(m.on_result(3, 20, 2.4), Decision::Stop);
        // A trial whose best beats the median goes on.
        assert_eq!(m.on_result(4, 20, 2.6), Decision::Continue);
        // Past every other trial (t = 50): no one to compare with, so it goes on.
        assert_eq!(m.on_result(4, 50, 0.0), Decision::Continue);
    }

    #[test]
    fn scheduler_state_round_trips() {
        let mut s = Scheduler::new(
            &SchedulerConfig::Asha {
                grace_period: 10,
                reduction_factor: 3.0,
                max_t: None,
            },
            1000,
            0,
        );
        s.on_result(0, 10, 1.0);
        let back: Scheduler = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s);
        let Scheduler::Asha(a) = &back else {
            panic!("asha")
        };
        assert_eq!(a.max_t, 1000);
        assert_eq!(a.rungs.last().unwrap().recorded[&0], 1.0);
    }

    fn pbt(mutations: serde_json::Value, resample: f64) -> Pbt {
        let cfg = SchedulerConfig::Pbt {
            perturbation_interval: 10,
            hyperparam_mutations: serde_json::from_value(mutations).unwrap(),
            quantile_fraction: 0.25,
            resample_probability: resample,
            perturbation_factors: (1.2, 0.8),
        };
        let Scheduler::Pbt(p) = Scheduler::new(&cfg, 100, 0) else {
            panic!("pbt")
        };
        p
    }

    #[test]
    fn pbt_exploits_from_the_top_quantile_at_decision_points() {
        let mut p = pbt(
            serde_json::json!({"algo_kwargs.learning_rate": {"loguniform": [1e-5, 1e-1]}}),
            0.0,
        );
        // Eight trials at t = 10 with scores 0..8: quantiles of ceil(8 / 4) = 2.
        for i in 0..8 {
            let d = p.on_result(i, 10, i as f64);
            // Until all have reported, the ranking is partial; record who was asked.
            let _ = d;
        }
        assert_eq!(p.quantiles(), (vec![0, 1], vec![6, 7]));
        // Between decision points nothing happens, however bad.
        assert_eq!(p.on_result(0, 15, -100.0), Decision::Continue);
        // At t = 20 the worst trial exploits one of the two best.
        match p.on_result(0, 20, -100.0) {
            Decision::Exploit { donor } => assert!(donor == 6 || donor == 7),
            d => panic!("{d:?}"),
        }
        // A middle trial goes on; so does a top one.
        assert_eq!(p.on_result(4, 20, 4.0), Decision::Continue);
        assert_eq!(p.on_result(7, 20, 7.0), Decision::Continue);
        // One trial alone never exploits.
        let mut alone = pbt(serde_json::json!({"x": [1, 2]}), 0.0);
        assert_eq!(alone.on_result(0, 50, 1.0), Decision::Continue);
    }

    #[test]
    fn pbt_explore_perturbs_numbers_and_shifts_lists() {
        use serde_json::json;
        let mut p = pbt(
            json!({"algo_kwargs.learning_rate": {"loguniform": [1e-5, 1e-1]},
                   "algo_kwargs.n_epochs": [5, 10, 20],
                   "algo_kwargs.batch_size": {"randint": [16, 512]}}),
            0.0,
        );
        let donor =
            json!({"algo_kwargs": {"learning_rate": 1e-3, "n_epochs": 10, "batch_size": 100}});
        for _ in 0..50 {
            let new: BTreeMap<String, Value> = p.explore(&donor).into_iter().collect();
            let lr = new["algo_kwargs.learning_rate"].as_f64().unwrap();
            assert!(
                (lr - 1.2e-3).abs() < 1e-15 || (lr - 8e-4).abs() < 1e-15,
                "{lr}"
            );
            let e = &new["algo_kwargs.n_epochs"];
            assert!(*e == json!(5) || *e == json!(20), "{e}");
            let b = &new["algo_kwargs.batch_size"];
            assert!(*b == json!(120) || *b == json!(80), "{b}");
        }
        // With resample_probability 1 every value is a fresh draw from its space.
        let mut r = pbt(
            json!({"algo_kwargs.learning_rate": {"uniform": [0.5, 0.6]}}),
            1.0,
        );
        for _ in 0..20 {
            let v = r.explore(&donor)[0].1.as_f64().unwrap();
            assert!((0.5..0.6).contains(&v), "{v}");
        }
        // A value the donor does not have yet (a default) is drawn too.
        let v = r.explore(&json!({}))[0].1.as_f64().unwrap();
        assert!((0.5..0.6).contains(&v));
    }

    #[test]
    fn pbt_mutations_are_checked() {
        for (m, words) in [
            (serde_json::json!([]), "non-empty list"),
            (serde_json::json!({"uniform": [2, 1]}), "lo 2 > hi 1"),
            (serde_json::json!(3), "non-empty list"),
        ] {
            let e = Mutation::parse(&m, "algo_kwargs.lr").unwrap_err();
            assert_eq!(
                e.field,
                "tune.scheduler.hyperparam_mutations.algo_kwargs.lr"
            );
            assert!(e.message.contains(words), "{e}");
        }
    }
}
