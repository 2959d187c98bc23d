//! Learning tests (run in release mode). CI runs the seed-0 CartPole test; the others are
//! `#[ignore]`d and run by `cargo xtask learn`.

use rl_core::algorithm::Algorithm;
use rl_core::burn::tensor::Device;
use rl_core::config::RunConfig;
use rl_ppo::Ppo;
use std::path::PathBuf;

fn config(name: &str, overrides: &[String]) -> RunConfig {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../examples/configs")
        .join(name);
    RunConfig::from_yaml(
        &std::fs::read_to_string(&p).unwrap(),
        overrides,
        &p.display().to_string(),
    )
    .unwrap()
}

fn agent(run: &RunConfig) -> Ppo {
    let make = |run: &RunConfig| {
        rl_envs::make_training_env(&run.env_id, &run.env_kwargs, &run.normalize, 0.99)
    };
    Ppo::new(run, &make, &Device::flex()).unwrap()
}

fn evaluate(ppo: &mut Ppo, run: &RunConfig) -> f64 {
    let mut env = rl_envs::make_eval_env(&run.env_id, &run.env_kwargs, &run.normalize).unwrap();
    ppo.evaluate(env.as_mut(), 10, true, run.eval_seed())
        .unwrap()
        .mean_return
}

/// Trains to the budget and evaluates the final policy ("at N").
fn final_return(name: &str, seed: u64) -> (f64, u64) {
    let run = config(name, &[format!("seed={seed}")]);
    let mut ppo = agent(&run);
    while ppo.num_timesteps() < run.total_timesteps {
        ppo.train().unwrap();
    }
    (evaluate(&mut ppo, &run), ppo.num_timesteps())
}

/// Evaluates every `every` steps and returns the first step whose evaluation reaches
/// `threshold` ("within N"), with the evaluations seen.
fn first_reaching(
    name: &str,
    seed: u64,
    every: u64,
    threshold: f64,
) -> (Option<u64>, Vec<(u64, f64)>) {
    let run = config(name, &[format!("seed={seed}")]);
    let mut ppo = agent(&run);
    let mut next = every;
    let mut evals = Vec::new();
    while ppo.num_timesteps() < run.total_timesteps {
        ppo.train().unwrap();
        if ppo.num_timesteps() >= next {
            next += every;
            let r = evaluate(&mut ppo, &run);
            evals.push((ppo.num_timesteps(), r));
            if r >= threshold {
                return (Some(ppo.num_timesteps()), evals);
            }
        }
    }
    (None, evals)
}

fn cartpole(seed: u64) {
    let (r, steps) = final_return("ppo_cartpole.yaml", seed);
    println!("PPO CartPole-v1 seed {seed}: mean deterministic eval return {r} at {steps} steps");
    assert!(r >= 475.0, "seed {seed}: {r} < 475 at {steps} steps");
}

#[test]
fn ppo_cartpole_seed0_at_100k() {
    cartpole(0);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ppo_cartpole_seed1_at_100k() {
    cartpole(1);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ppo_cartpole_seed2_at_100k() {
    cartpole(2);
}

#[test]
#[ignore = "long: run by cargo xtask learn"]
fn ppo_pendulum_seed0_within_200k() {
    let (hit, evals) = first_reaching("ppo_pendulum.yaml", 0, 10_000, -250.0);
    println!("PPO Pendulum-v1 seed 0 evaluations: {evals:?}");
    assert!(
        hit.is_some_and(|s| s <= 200_000),
        "never reached -250 within 200k: {evals:?}"
    );
}
