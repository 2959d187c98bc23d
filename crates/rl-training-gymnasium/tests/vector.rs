//! A vector of Gymnasium envs steps in one Python call per vector step ([`Env::stage`]), with
//! exactly the results of the same envs stepped one call at a time.

use pyo3::prelude::*;
use rl_training_core::env::{Env, EnvError, Kwargs, StepBatch};
use rl_training_core::vec_env::VecEnv;
use rl_training_core::wrappers::{RecordEpisodeStatistics, RescaleAction, Wrapper};
use rl_training_core::{Rng, Space};
use rl_training_gymnasium::make;

/// A wrapper that does not stage (its env's steps go one Python call each).
struct Alone(Box<dyn Env>);

impl Wrapper for Alone {
    type Inner = Box<dyn Env>;
    fn inner(&self) -> &Box<dyn Env> {
        &self.0
    }
    fn inner_mut(&mut self) -> &mut Box<dyn Env> {
        &mut self.0
    }
    fn stage(_: &mut Self, _: &[f32], _: &mut StepBatch) -> Result<(), EnvError> {
        Ok(())
    }
}

/// Counts the bridge's `step_many` calls (one per staged vector step) made from this thread
/// (tests run on threads of one process under `cargo test`).
fn step_many_calls() -> u64 {
    Python::attach(|py| {
        let scope = pyo3::types::PyDict::new(py);
        py.run(
            cr#"
import sys, threading
m = sys.modules["rl_gymnasium_bridge"]
if not hasattr(m, "_step_many_calls"):
    m._step_many_calls = {}
    _inner = m.step_many
    def _counted(*a, _m=m, _inner=_inner):
        import threading
        t = threading.get_ident()
        _m._step_many_calls[t] = _m._step_many_calls.get(t, 0) + 1
        return _inner(*a)
    m.step_many = _counted
calls = m._step_many_calls.get(threading.get_ident(), 0)
"#,
            None,
            Some(&scope),
        )
        .unwrap();
        scope.get_item("calls").unwrap().unwrap().extract().unwrap()
    })
}

/// Steps both vectors with the same random actions (uniform in `[lo, hi)` for Box spaces),
/// asserting identical observations, rewards, flags and final observations at every step.
fn same_trajectories(staged: &mut VecEnv, alone: &mut VecEnv, steps: usize, lo: f32, hi: f32) {
    let mut rng = Rng::seed_from(7);
    assert_eq!(
        staged.reset(Some(3)).unwrap(),
        alone.reset(Some(3)).unwrap()
    );
    let n = staged.num_envs();
    let mut episodes = 0;
    for t in 0..steps {
        let actions: Vec<f32> = match staged.action_space() {
            Space::Discrete { n: k, .. } => (0..n).map(|_| rng.below(*k as u64) as f32).collect(),
            _ => (0..n * staged.act_dim())
                .map(|_| lo + (hi - lo) * rng.uniform() as f32)
                .collect(),
        };
        staged.step(&actions).unwrap();
        alone.step(&actions).unwrap();
        assert_eq!(staged.obs(), alone.obs(), "step {t}");
        assert_eq!(staged.rewards(), alone.rewards(), "step {t}");
        assert_eq!(staged.terminated(), alone.terminated(), "step {t}");
        assert_eq!(staged.truncated(), alone.truncated(), "step {t}");
        for i in 0..n {
            if staged.terminated()[i] || staged.truncated()[i] {
                episodes += 1;
                assert_eq!(staged.final_obs(i), alone.final_obs(i), "step {t} env {i}");
            }
        }
    }
    assert!(episodes > 0, "no episode ended in {steps} steps");
    let (a, b) = (staged.drain_episodes(), alone.drain_episodes());
    assert_eq!(a, b);
}

#[test]
fn a_vector_of_gymnasium_envs_steps_in_one_python_call_and_matches_stepping_alone() {
    let none = Kwargs::new();
    let cartpole = || {
        Box::new(RecordEpisodeStatistics::new(
            make("CartPole-v1", &none).unwrap(),
        ))
    };
    let mut staged = VecEnv::new((0..4).map(|_| cartpole() as Box<dyn Env>).collect()).unwrap();
    let mut alone = VecEnv::new(
        (0..4)
            .map(|_| Box::new(Alone(cartpole())) as Box<dyn Env>)
            .collect(),
    )
    .unwrap();
    let before = step_many_calls();
    same_trajectories(&mut staged, &mut alone, 300, 0.0, 0.0);
    assert_eq!(
        step_many_calls() - before,
        300,
        "one Python call per vector step of the staged vector, none for the other"
    );

    // Box actions through RescaleAction, which stages the rescaled action: [-1, 1] reaches
    // Gymnasium as [-2, 2] in both vectors.
    let pendulum =
        || Box::new(RescaleAction::new(make("Pendulum-v1", &none).unwrap(), -1.0, 1.0).unwrap());
    let mut staged =
        VecEnv::with_threads((0..3).map(|_| pendulum() as Box<dyn Env>).collect(), 2).unwrap();
    let mut alone = VecEnv::new(
        (0..3)
            .map(|_| Box::new(Alone(pendulum())) as Box<dyn Env>)
            .collect(),
    )
    .unwrap();
    let before = step_many_calls();
    same_trajectories(&mut staged, &mut alone, 250, -1.0, 1.0);
    assert_eq!(step_many_calls() - before, 250);
}

#[test]
fn an_exception_in_a_staged_step_is_an_error_naming_the_env_and_its_index() {
    // CartPole-v1 whose step raises once its episode passes step 3.
    make("CartPole-v1", &Kwargs::new()).unwrap();
    Python::attach(|py| {
        py.run(
            cr#"
import gymnasium as gym
from gymnasium.envs.classic_control import CartPoleEnv

class Fragile(CartPoleEnv):
    def reset(self, *, seed=None, options=None):
        self.t = 0
        return super().reset(seed=seed, options=options)
    def step(self, action):
        self.t += 1
        if self.t > 3:
            raise RuntimeError("fragile at step 4")
        return super().step(action)

if "RlTest/Fragile-v0" not in gym.registry:
    gym.register("RlTest/Fragile-v0", entry_point=Fragile)
"#,
            None,
            None,
        )
        .unwrap();
    });
    let none = Kwargs::new();
    let envs: Vec<Box<dyn Env>> = vec![
        make("CartPole-v1", &none).unwrap(),
        make("RlTest/Fragile-v0", &none).unwrap(),
    ];
    let mut v = VecEnv::new(envs).unwrap();
    v.reset(Some(0)).unwrap();
    for _ in 0..3 {
        v.step(&[0.0, 1.0]).unwrap();
    }
    let e = v.step(&[0.0, 1.0]).unwrap_err().to_string();
    for part in [
        "gymnasium:RlTest/Fragile-v0",
        "1",
        "RuntimeError",
        "fragile at step 4",
    ] {
        assert!(e.contains(part), "{e:?} lacks {part:?}");
    }
    // The vector needs a reset, after which it steps again.
    assert!(v.step(&[0.0, 1.0]).is_err());
    v.reset(Some(1)).unwrap();
    v.step(&[0.0, 1.0]).unwrap();
}
