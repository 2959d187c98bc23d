//! Helpers for the algorithms' learning tests: example configs, the protocol's evaluation
//! (mean return of deterministic episodes on a separately seeded env) and "within N" runs.

use rl_training_core::algorithm::Algorithm;
use rl_training_core::config::RunConfig;
use rl_training_core::env::{
    EPISODE_LENGTH, EPISODE_RETURN, Env, EnvError, Info, Kwargs, Step, check_action,
};
use rl_training_core::{Rng, Space};

/// `examples/configs/<name>` of the workspace with `overrides` (`key=value`) applied.
pub fn example_config(manifest_dir: &str, name: &str, overrides: &[String]) -> RunConfig {
    let root = rl_training_core::testing::workspace_root(std::path::Path::new(manifest_dir));
    let p = root.join("examples/configs").join(name);
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    RunConfig::from_yaml(&text, overrides, &p.display().to_string())
        .unwrap_or_else(|e| panic!("{e}"))
}

/// A training env for `run` (what the CLI builds).
pub fn training_env(
    run: &RunConfig,
) -> Result<Box<dyn rl_training_core::Env>, rl_training_core::EnvError> {
    crate::make_training_env(&run.env_id, &run.env_kwargs, &run.normalize, run.discount())
}

/// Mean return of `run.n_eval_episodes` deterministic episodes on the evaluation env
/// (seeded with `run.eval_seed()`).
pub fn eval_return(alg: &mut dyn Algorithm, run: &RunConfig) -> f64 {
    let mut env = crate::make_eval_env(&run.env_id, &run.env_kwargs, &run.normalize)
        .unwrap_or_else(|e| panic!("{e}"));
    alg.evaluate(env.as_mut(), run.n_eval_episodes, true, run.eval_seed())
        .unwrap_or_else(|e| panic!("{e}"))
        .mean_return
}

/// Trains until `run.total_timesteps` ("at N") and evaluates; returns the return and the
/// steps actually taken.
pub fn return_at(alg: &mut dyn Algorithm, run: &RunConfig) -> (f64, u64) {
    while alg.num_timesteps() < run.total_timesteps {
        alg.train().unwrap_or_else(|e| panic!("{e}"));
    }
    (eval_return(alg, run), alg.num_timesteps())
}

/// Evaluates every `every` env steps until `run.total_timesteps` ("within N"); returns the
/// first step whose evaluation reached `threshold`, and every evaluation seen.
pub fn first_reaching(
    alg: &mut dyn Algorithm,
    run: &RunConfig,
    every: u64,
    threshold: f64,
) -> (Option<u64>, Vec<(u64, f64)>) {
    first_reaching_with(alg, run, every, threshold, |a| eval_return(a, run))
}

/// [`first_reaching`] with evaluations by `eval` (envs this crate cannot make, e.g. Gymnasium's
/// through rl-training-gymnasium).
pub fn first_reaching_with(
    alg: &mut dyn Algorithm,
    run: &RunConfig,
    every: u64,
    threshold: f64,
    mut eval: impl FnMut(&mut dyn Algorithm) -> f64,
) -> (Option<u64>, Vec<(u64, f64)>) {
    let mut next = every;
    let mut evals = Vec::new();
    while alg.num_timesteps() < run.total_timesteps {
        alg.train().unwrap_or_else(|e| panic!("{e}"));
        if alg.num_timesteps() >= next {
            while next <= alg.num_timesteps() {
                next += every;
            }
            let r = eval(alg);
            evals.push((alg.num_timesteps(), r));
            if r >= threshold {
                return (Some(alg.num_timesteps()), evals);
            }
        }
    }
    (None, evals)
}

/// A contextual bandit for action-space tests: one-step episodes whose observation encodes a
/// target action; the reward says how well the action matches it (1 is perfect; for Box
/// spaces 1 − mean squared distance).
pub struct Match {
    obs_space: Space,
    act_space: Space,
    target: Vec<f32>,
    rng: Rng,
}

impl Match {
    /// A bandit whose actions live in `act_space`.
    pub fn new(act_space: Space) -> Self {
        let n = act_space.raw_dim();
        Self {
            obs_space: Space::boxed(vec![-1.0; n], vec![2.0; n]),
            act_space,
            target: vec![0.0; n],
            rng: Rng::seed_from(0),
        }
    }
    fn draw(&mut self, obs: &mut [f32]) {
        self.target.clear();
        let mut t = Vec::new();
        match &self.act_space {
            Space::Box { .. } => {
                t.extend((0..obs.len()).map(|_| self.rng.uniform_range(-0.8, 0.8) as f32))
            }
            s => s.sample(&mut self.rng, &mut t),
        }
        self.target = t;
        obs.copy_from_slice(&self.target);
    }
}

impl Env for Match {
    fn id(&self) -> &str {
        "Match"
    }
    fn observation_space(&self) -> &Space {
        &self.obs_space
    }
    fn action_space(&self) -> &Space {
        &self.act_space
    }
    fn reset(
        &mut self,
        seed: Option<u64>,
        _options: Option<&Kwargs>,
        obs: &mut [f32],
    ) -> Result<Info, EnvError> {
        if let Some(s) = seed {
            self.rng = Rng::seed_from(s);
        }
        self.draw(obs);
        Ok(Info::new())
    }
    fn step(&mut self, action: &[f32], obs: &mut [f32]) -> Result<Step, EnvError> {
        check_action("Match", &self.act_space, action)?;
        let n = action.len() as f64;
        let reward = match self.act_space {
            Space::Box { .. } => {
                1.0 - action
                    .iter()
                    .zip(&self.target)
                    .map(|(a, t)| ((a - t) as f64).powi(2))
                    .sum::<f64>()
                    / n
            }
            _ => {
                action
                    .iter()
                    .zip(&self.target)
                    .filter(|(a, t)| a == t)
                    .count() as f64
                    / n
            }
        };
        self.draw(obs);
        let info = [
            (EPISODE_RETURN.to_string(), reward),
            (EPISODE_LENGTH.to_string(), 1.0),
        ]
        .into_iter()
        .collect();
        Ok(Step {
            reward,
            terminated: true,
            truncated: false,
            info,
        })
    }
}

/// Trains a fresh agent (`build`, given the run and a maker of [`Match`] bandits over
/// `space`) on the run in `yaml` and returns the mean episodic return of its first iteration
/// and the deterministic mean return over 200 bandit episodes after the budget.
pub fn bandit_returns(
    yaml: &str,
    space: Space,
    build: impl Fn(&RunConfig, rl_training_core::agent::EnvMaker<'_>) -> Box<dyn Algorithm>,
) -> (f64, f64) {
    let run = RunConfig::from_yaml(yaml, &[], "test").unwrap_or_else(|e| panic!("{e}"));
    let make = |_: &RunConfig| -> Result<Box<dyn Env>, EnvError> {
        Ok(Box::new(Match::new(space.clone())))
    };
    let mut alg = build(&run, &make);
    let mut returns = Vec::new();
    while alg.num_timesteps() < run.total_timesteps {
        let m = alg.train().unwrap_or_else(|e| panic!("{e}"));
        if let Some(r) = m.get("charts/episodic_return") {
            returns.push(*r);
        }
    }
    let mut env = Match::new(space);
    let det = alg
        .evaluate(&mut env, 200, true, 99)
        .unwrap_or_else(|e| panic!("{e}"))
        .mean_return;
    (returns[0], det)
}

/// Metrics with the wall-clock ones (`time/…`, `charts/SPS`) left out, as exact bits: what a
/// resumed run must reproduce.
pub fn comparable_metrics(m: &rl_training_core::logger::Metrics) -> Vec<(String, u64)> {
    m.iter()
        // Wall-clock rates (`charts/SPS`, `perf/…_per_s`) and times differ between runs.
        .filter(|(k, _)| !k.starts_with("time/") && *k != "charts/SPS" && !k.ends_with("_per_s"))
        .map(|(k, v)| (k.clone(), v.to_bits()))
        .collect()
}

/// Resume check: `n` iterations, save, `load`, `m` more must equal `n + m` uninterrupted
/// iterations bit for bit (metrics but wall-clock ones, and `weights`). Returns the resumed
/// agent's step count after the load.
pub fn assert_resumes_bit_identically<A: Algorithm>(
    (n, m): (usize, usize),
    new: impl Fn() -> A,
    load: impl Fn(&std::path::Path) -> A,
    weights: impl Fn(&A) -> rl_training_core::params::TensorMap,
    tag: &str,
) -> u64 {
    let steps = |a: &A| a.num_timesteps();
    let save = |a: &A, d: &std::path::Path| a.save(d);
    resumed(
        (n, m),
        new,
        load,
        |a| a.train(),
        save,
        (weights, steps),
        tag,
    )
    .1
}

/// The resume check itself, for any kind of algorithm (`train` and `save` say how); returns
/// the resumed algorithm and its env steps right after the load.
fn resumed<A, W: PartialEq + std::fmt::Debug>(
    (n, m): (usize, usize),
    new: impl Fn() -> A,
    load: impl Fn(&std::path::Path) -> A,
    train: impl Fn(&mut A) -> Result<rl_training_core::logger::Metrics, rl_training_core::RlError>,
    save: impl Fn(&A, &std::path::Path) -> Result<(), rl_training_core::RlError>,
    (weights, steps): (impl Fn(&A) -> W, impl Fn(&A) -> u64),
    tag: &str,
) -> (A, u64) {
    let mut a = new();
    let metrics_a: Vec<_> = (0..n + m)
        .map(|_| comparable_metrics(&train(&mut a).unwrap_or_else(|e| panic!("{e}"))))
        .collect();
    let mut b = new();
    let mut metrics_b: Vec<_> = (0..n)
        .map(|_| comparable_metrics(&train(&mut b).unwrap_or_else(|e| panic!("{e}"))))
        .collect();
    let dir = std::env::temp_dir().join(format!("rl-resume-{}-{tag}", std::process::id()));
    save(&b, &dir).unwrap_or_else(|e| panic!("{e}"));
    drop(b);
    let mut c = load(&dir);
    let steps = steps(&c);
    metrics_b.extend(
        (0..m).map(|_| comparable_metrics(&train(&mut c).unwrap_or_else(|e| panic!("{e}")))),
    );
    assert_eq!(metrics_a, metrics_b, "{tag}: metrics differ after resume");
    assert_eq!(
        weights(&a),
        weights(&c),
        "{tag}: weights differ after resume"
    );
    let _ = std::fs::remove_dir_all(&dir);
    (c, steps)
}

/// The action-space tests every on-policy algorithm runs: it must learn the [`Match`] bandit
/// with MultiDiscrete, MultiBinary and Box actions (first iteration near chance, deterministic
/// return above 0.9 / 0.9 / 0.95 after the budget in `$yaml`). `$build` makes the agent from the
/// run and the env maker.
#[macro_export]
macro_rules! action_space_tests {
    ($yaml:expr, $build:expr) => {
        fn learn(space: rl_training_core::Space) -> (f64, f64) {
            $crate::testing::bandit_returns($yaml, space, $build)
        }

        #[test]
        fn multidiscrete_learns() {
            let (first, det) = learn(rl_training_core::Space::MultiDiscrete { nvec: vec![3, 4] });
            println!("MultiDiscrete: first iteration {first:.3}, final deterministic {det:.3}");
            assert!(first < 0.5 && det > 0.9, "{first} -> {det}");
        }

        #[test]
        fn multibinary_learns() {
            let (first, det) = learn(rl_training_core::Space::MultiBinary { n: 4 });
            println!("MultiBinary: first iteration {first:.3}, final deterministic {det:.3}");
            assert!(first < 0.65 && det > 0.9, "{first} -> {det}");
        }

        #[test]
        fn box_learns() {
            let (first, det) = learn(rl_training_core::Space::boxed(
                vec![-1.0, -1.0],
                vec![1.0, 1.0],
            ));
            println!("Box: first iteration {first:.3}, final deterministic {det:.3}");
            assert!(first < 0.5 && det > 0.95, "{first} -> {det}");
        }
    };
}

/// A multi-agent run trained with an evaluation (deterministic, `run.n_eval_episodes` on a
/// separately seeded env) every `run.eval_freq` env steps, until `reached` holds for one or
/// the budget ends: the step it did, and each evaluation's team return and per-agent returns.
#[allow(clippy::type_complexity)]
pub fn multi_agent_first_reaching(
    algo: &mut dyn rl_training_core::multi_agent::MultiAgentAlgorithm,
    run: &RunConfig,
    reached: impl Fn(&rl_training_core::multi_agent::MultiAgentEval) -> bool,
) -> (Option<u64>, Vec<(u64, Vec<f64>)>) {
    let mut env =
        crate::make_multi_agent_env(&run.env_id, &run.env_kwargs).unwrap_or_else(|e| panic!("{e}"));
    let mut evals = Vec::new();
    let mut next = run.eval_freq;
    while algo.num_timesteps() < run.total_timesteps {
        algo.train().unwrap_or_else(|e| panic!("{e}"));
        if algo.num_timesteps() >= next {
            while next <= algo.num_timesteps() {
                next += run.eval_freq;
            }
            let e = algo
                .evaluate(env.as_mut(), run.n_eval_episodes, true, run.eval_seed())
                .unwrap_or_else(|e| panic!("{e}"));
            let mut row = vec![e.mean_return];
            row.extend(e.per_agent.values());
            evals.push((algo.num_timesteps(), row));
            if reached(&e) {
                return (Some(algo.num_timesteps()), evals);
            }
        }
    }
    (None, evals)
}

/// [`multi_agent_first_reaching`] until every agent's evaluation return is ≥ `bar`: prints
/// `what` with the step it did and every evaluation, and fails when the budget ended first.
pub fn assert_every_agent_reaches(
    algo: &mut dyn rl_training_core::multi_agent::MultiAgentAlgorithm,
    run: &RunConfig,
    bar: f64,
    what: &str,
) {
    let (hit, evals) =
        multi_agent_first_reaching(algo, run, |e| e.per_agent.values().all(|&r| r >= bar));
    println!(
        "{what}: first eval >= {bar} per agent at {hit:?} (budget {}); evaluations (team, agents): {evals:?}",
        run.total_timesteps
    );
    assert!(
        hit.is_some(),
        "{what}: no evaluation with >= {bar} per agent within {}",
        run.total_timesteps
    );
}

/// [`assert_resumes_bit_identically`] for multi-agent runs: `n` iterations, save, `load`, `m`
/// more equal `n + m` uninterrupted ones (metrics but wall-clock ones, and `weights`).
pub fn assert_multi_agent_resumes<A: rl_training_core::multi_agent::MultiAgentAlgorithm>(
    (n, m): (usize, usize),
    new: impl Fn() -> A,
    load: impl Fn(&std::path::Path) -> A,
    weights: impl Fn(&A) -> Vec<Vec<u8>>,
    tag: &str,
) {
    let steps = |a: &A| a.num_timesteps();
    let save = |a: &A, d: &std::path::Path| a.save(d);
    resumed(
        (n, m),
        new,
        load,
        |a| a.train(),
        save,
        (weights, steps),
        tag,
    );
}
