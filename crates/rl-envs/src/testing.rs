//! Helpers for the algorithms' learning tests: example configs, the protocol's evaluation
//! (mean return of deterministic episodes on a separately seeded env) and "within N" runs.

use rl_core::algorithm::Algorithm;
use rl_core::config::RunConfig;

/// `examples/configs/<name>` of the workspace with `overrides` (`key=value`) applied.
pub fn example_config(manifest_dir: &str, name: &str, overrides: &[String]) -> RunConfig {
    let root = rl_core::testing::workspace_root(std::path::Path::new(manifest_dir));
    let p = root.join("examples/configs").join(name);
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    RunConfig::from_yaml(&text, overrides, &p.display().to_string())
        .unwrap_or_else(|e| panic!("{e}"))
}

/// A training env for `run` (what the CLI builds).
pub fn training_env(run: &RunConfig) -> Result<Box<dyn rl_core::Env>, rl_core::EnvError> {
    let gamma = run
        .algo_kwargs
        .get("gamma")
        .and_then(|v| v.as_f64())
        .unwrap_or(0.99);
    crate::make_training_env(&run.env_id, &run.env_kwargs, &run.normalize, gamma)
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
    let mut next = every;
    let mut evals = Vec::new();
    while alg.num_timesteps() < run.total_timesteps {
        alg.train().unwrap_or_else(|e| panic!("{e}"));
        if alg.num_timesteps() >= next {
            while next <= alg.num_timesteps() {
                next += every;
            }
            let r = eval_return(alg, run);
            evals.push((alg.num_timesteps(), r));
            if r >= threshold {
                return (Some(alg.num_timesteps()), evals);
            }
        }
    }
    (None, evals)
}
