//! PPO learns with every action space it supports: Discrete (CartPole, see learning.rs),
//! MultiDiscrete, MultiBinary and Box, on the contextual bandits of `rl_envs::testing`.

use rl_core::Space;
use rl_core::burn::tensor::Device;
use rl_envs::testing::bandit_returns;
use rl_ppo::Ppo;

fn learn(space: Space) -> (f64, f64) {
    bandit_returns(
        "algorithm: ppo\nenv_id: Match\ntotal_timesteps: 6144\nn_envs: 4\nseed: 0\nalgo_kwargs: {n_steps: 64, batch_size: 64, n_epochs: 4, learning_rate: 3.0e-3, gamma: 0.0, ent_coef: 0.0}\n",
        space,
        |run, make| Box::new(Ppo::new(run, make, &Device::flex()).unwrap()),
    )
}

#[test]
fn multidiscrete_learns() {
    let (first, det) = learn(Space::MultiDiscrete { nvec: vec![3, 4] });
    println!("MultiDiscrete: first iteration {first:.3}, final deterministic {det:.3}");
    assert!(first < 0.5 && det > 0.9, "{first} -> {det}");
}

#[test]
fn multibinary_learns() {
    let (first, det) = learn(Space::MultiBinary { n: 4 });
    println!("MultiBinary: first iteration {first:.3}, final deterministic {det:.3}");
    assert!(first < 0.65 && det > 0.9, "{first} -> {det}");
}

#[test]
fn box_learns() {
    let (first, det) = learn(Space::boxed(vec![-1.0, -1.0], vec![1.0, 1.0]));
    println!("Box: first iteration {first:.3}, final deterministic {det:.3}");
    assert!(first < 0.5 && det > 0.95, "{first} -> {det}");
}
