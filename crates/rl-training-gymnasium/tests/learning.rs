//! Learning through the bridge (deterministic evaluation, 10 episodes, on a separately seeded
//! Gymnasium env): PPO on Gymnasium's CartPole-v1 with rl-zoo's settings ≥ 475 at 100k, the
//! native run's bar (CI); SAC on MuJoCo's InvertedPendulum-v5 ≥ 900 within 30k and PPO on
//! Box2D's LunarLander-v3 ≥ 200 within 1M (rl-zoo reaches about 250 at 1M) (`#[ignore]`:
//! `cargo xtask learn`; need `pip install "gymnasium[mujoco,box2d]"`). Also the Atari smoke run:
//! PPO with the Nature CNN on Breakout for 50k steps with checkpoints (`#[ignore]`; needs
//! `pip install ale-py opencv-python-headless`).

mod atari_common;

use rl_training_core::Algorithm;
use rl_training_core::burn::tensor::Device;
use rl_training_core::config::RunConfig;
use rl_training_core::env::{Env, EnvError};
use rl_training_core::wrappers::RecordEpisodeStatistics;
use rl_training_gymnasium::PREFIX;

/// What rl-training-envs builds for a `gymnasium:` id with the `gymnasium` feature (the CLI's path).
fn gym_env(run: &RunConfig) -> Result<Box<dyn Env>, EnvError> {
    let id = run.env_id.strip_prefix(PREFIX).expect("a gymnasium: id");
    Ok(Box::new(RecordEpisodeStatistics::new(
        rl_training_gymnasium::make(id, &run.env_kwargs)?,
    )))
}

fn config(name: &str, seed: u64) -> RunConfig {
    let root =
        rl_training_core::testing::workspace_root(std::path::Path::new(env!("CARGO_MANIFEST_DIR")));
    let p = root.join("examples/configs").join(name);
    let text = std::fs::read_to_string(&p).unwrap();
    RunConfig::from_yaml(&text, &[format!("seed={seed}")], &p.display().to_string()).unwrap()
}

/// Mean deterministic return of the run's evaluation episodes.
fn eval(alg: &mut dyn Algorithm, run: &RunConfig) -> f64 {
    let mut env = gym_env(run).unwrap();
    alg.evaluate(env.as_mut(), run.n_eval_episodes, true, run.eval_seed())
        .unwrap()
        .mean_return
}

#[test]
fn ppo_gymnasium_cartpole_seed0_at_100k() {
    let run = config("ppo_gymnasium_cartpole.yaml", 0);
    let mut ppo = rl_training_ppo::Ppo::new(&run, &gym_env, &Device::flex()).unwrap();
    while ppo.num_timesteps() < run.total_timesteps {
        ppo.train().unwrap();
    }
    let r = eval(&mut ppo, &run);
    println!(
        "PPO gymnasium:CartPole-v1 seed 0: mean deterministic eval return {r} at {} steps",
        ppo.num_timesteps()
    );
    assert!(r >= 475.0, "{r} < 475 at {}", ppo.num_timesteps());
}

/// Trains `run` on Gymnasium envs, evaluating every `every` env steps ("within N"): the first
/// evaluation reaching `bar`, and all of them.
fn within(
    alg: &mut dyn Algorithm,
    run: &RunConfig,
    every: u64,
    bar: f64,
) -> (Option<u64>, Vec<(u64, f64)>) {
    rl_training_envs::testing::first_reaching_with(alg, run, every, bar, |a| eval(a, run))
}

fn report(
    what: &str,
    seed: u64,
    bar: f64,
    run: &RunConfig,
    (hit, evals): (Option<u64>, Vec<(u64, f64)>),
) {
    println!(
        "{what} seed {seed}: first eval >= {bar} at {hit:?} (budget {}); evaluations {evals:?}",
        run.total_timesteps
    );
    assert!(
        hit.is_some(),
        "never reached {bar} within {}: {evals:?}",
        run.total_timesteps
    );
}

fn sac_inverted_pendulum(seed: u64) {
    let run = config("sac_inverted_pendulum.yaml", seed);
    let mut sac = rl_training_sac::Sac::new(&run, &gym_env, &Device::flex()).unwrap();
    let out = within(&mut sac, &run, 1_500, 900.0);
    report("SAC gymnasium:InvertedPendulum-v5", seed, 900.0, &run, out);
}

fn ppo_lunarlander(seed: u64) {
    let run = config("ppo_lunarlander.yaml", seed);
    let mut ppo = rl_training_ppo::Ppo::new(&run, &gym_env, &Device::flex()).unwrap();
    let out = within(&mut ppo, &run, 50_000, 200.0);
    report("PPO gymnasium:LunarLander-v3", seed, 200.0, &run, out);
}

#[test]
#[ignore = "long: run by cargo xtask learn (needs gymnasium[box2d])"]
fn ppo_lunarlander_seed0_within_1m() {
    ppo_lunarlander(0);
}

#[test]
#[ignore = "long: run by cargo xtask learn (needs gymnasium[mujoco])"]
fn sac_inverted_pendulum_seed0_within_30k() {
    sac_inverted_pendulum(0);
}

#[test]
#[ignore = "long: run by cargo xtask learn (needs ale-py and opencv-python-headless)"]
fn ppo_breakout_seed0_50k_smoke_with_checkpoints() {
    let run = atari_common::config(&["total_timesteps=50000"]);
    let dev = Device::flex();
    let mut ppo = rl_training_ppo::Ppo::new(&run, &atari_common::training_env, &dev).unwrap();
    let obs = atari_common::some_observation(&run);
    let dir = atari_common::temp_dir("smoke");
    let mut returns = Vec::new();
    let mut checkpoints = 0;
    while ppo.num_timesteps() < run.total_timesteps {
        let m = ppo.train().unwrap();
        if let Some(r) = m.get("charts/episodic_return") {
            returns.push((ppo.num_timesteps(), *r));
        }
        // A checkpoint every 10 iterations (10,240 steps), loaded back and trained on.
        if ppo.num_timesteps() % 10_240 == 0 {
            ppo = atari_common::round_trip(&mut ppo, &run, &dir, &obs);
            checkpoints += 1;
        }
    }
    let mut env = atari_common::eval_env(&run);
    let r = ppo
        .evaluate(env.as_mut(), run.n_eval_episodes, true, run.eval_seed())
        .unwrap();
    println!(
        "PPO CnnPolicy gymnasium:ALE/Breakout-v5 seed 0: {} steps, {checkpoints} checkpoints; \
         deterministic eval {:.1} ± {:.1} (10 episodes); training episode returns {returns:?}",
        ppo.num_timesteps(),
        r.mean_return,
        r.std_return
    );
    assert_eq!(ppo.num_timesteps(), 50_176);
    assert_eq!(checkpoints, 4);
    assert!(r.mean_return.is_finite() && !returns.is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}
