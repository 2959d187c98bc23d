//! PPO learns with every action space it supports: Discrete (CartPole, see learning.rs),
//! MultiDiscrete, MultiBinary and Box, on small contextual bandits built here.

use rl_core::algorithm::Algorithm;
use rl_core::burn::tensor::Device;
use rl_core::config::RunConfig;
use rl_core::env::{
    EPISODE_LENGTH, EPISODE_RETURN, Env, EnvError, Info, Kwargs, Step, check_action,
};
use rl_core::{Rng, Space};
use rl_ppo::Ppo;

/// One-step episodes: the observation encodes a target; the reward says how well the action
/// matches it (1 is perfect).
struct Match {
    obs_space: Space,
    act_space: Space,
    target: Vec<f32>,
    rng: Rng,
}

impl Match {
    fn new(act_space: Space) -> Self {
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

fn learn(space: Space) -> (f64, f64) {
    let run = RunConfig::from_yaml(
        "algorithm: ppo\nenv_id: Match\ntotal_timesteps: 6144\nn_envs: 4\nseed: 0\nalgo_kwargs: {n_steps: 64, batch_size: 64, n_epochs: 4, learning_rate: 3.0e-3, gamma: 0.0, ent_coef: 0.0}\n",
        &[],
        "test",
    )
    .unwrap();
    let make = |_: &RunConfig| -> Result<Box<dyn Env>, EnvError> {
        Ok(Box::new(Match::new(space.clone())))
    };
    let mut ppo = Ppo::new(&run, &make, &Device::flex()).unwrap();
    let mut returns = Vec::new();
    while ppo.num_timesteps() < run.total_timesteps {
        returns.push(ppo.train().unwrap()["charts/episodic_return"]);
    }
    let mut env = Match::new(space.clone());
    let det = ppo.evaluate(&mut env, 200, true, 99).unwrap().mean_return;
    (returns[0], det)
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
