//! The bridge against a real Gymnasium in the embedded interpreter (`pip install gymnasium`
//! in the Python that PyO3 builds against).

use pyo3::prelude::*;
use rl_training_core::checker::check_env;
use rl_training_core::env::{Env, EnvError, Kwargs};
use rl_training_core::{Rng, Space};
use rl_training_gymnasium::make;

/// Registers the test's own Gymnasium env classes (once per process): `RlTest/Counter-v0`
/// (Box observation [t], Discrete(3) actions, reward = action − 1, ends after 5 steps),
/// `RlTest/DictObs-v0` (a Dict observation) and `RlTest/Raises-v0` (step raises).
fn register_test_envs() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // gymnasium imported by `make` first (one import at a time), not by the code below
        // while another test's `make` imports it.
        make("CartPole-v1", &no_kwargs()).unwrap();
        Python::attach(|py| {
            py.run(
                cr#"
import gymnasium as gym
import numpy as np

class Counter(gym.Env):
    observation_space = gym.spaces.Box(0.0, 10.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(3)
    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], np.float32), {"start": 1}
    def step(self, action):
        self.t += 1
        obs = np.array([self.t], np.float32)
        return obs, float(action) - 1.0, self.t >= 5, False, {"t": self.t, "name": "x"}

class DictObs(gym.Env):
    observation_space = gym.spaces.Dict({"a": gym.spaces.Discrete(2)})
    action_space = gym.spaces.Discrete(2)

class Raises(Counter):
    def step(self, action):
        raise RuntimeError("boom at step")

gym.register("RlTest/Counter-v0", entry_point=Counter)
gym.register("RlTest/DictObs-v0", entry_point=DictObs)
gym.register("RlTest/Raises-v0", entry_point=Raises)
"#,
                None,
                None,
            )
            .unwrap();
        });
    });
}

fn no_kwargs() -> Kwargs {
    Kwargs::new()
}

/// The error `make` gives.
fn make_error(id: &str, kwargs: &Kwargs) -> String {
    match make(id, kwargs) {
        Ok(_) => panic!("{id} was made"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn cartpole_through_the_bridge_follows_rl_envs_own_cartpole() {
    let mut gym = make("CartPole-v1", &no_kwargs()).unwrap();
    let mut own = rl_training_envs::make("CartPole-v1", &no_kwargs()).unwrap();
    assert_eq!(gym.id(), "gymnasium:CartPole-v1");
    assert_eq!(gym.observation_space(), own.observation_space());
    assert_eq!(gym.action_space(), own.action_space());
    let (mut a, mut b) = (vec![0.0; 4], vec![0.0; 4]);
    gym.reset(Some(0), None, &mut a).unwrap();
    own.reset(Some(0), None, &mut b).unwrap();
    // The generators differ (numpy's PCG64, rl's own): start both from Gymnasium's state.
    let start = gym.state().expect("classic control exposes its state");
    assert_eq!(start.len(), 4);
    own.set_state(&start).unwrap();
    let mut rng = Rng::seed_from(7);
    let mut steps = 0;
    loop {
        let action = [rng.below(2) as f32];
        let sg = gym.step(&action, &mut a).unwrap();
        let so = own.step(&action, &mut b).unwrap();
        steps += 1;
        assert_eq!(a, b, "observations differ at step {steps}");
        assert_eq!(
            (sg.reward, sg.terminated, sg.truncated),
            (so.reward, so.terminated, so.truncated)
        );
        if sg.terminated || sg.truncated {
            break;
        }
    }
    assert!(steps > 5, "{steps}");
}

#[test]
fn classic_envs_pass_the_checker_and_their_spaces_are_translated() {
    for id in [
        "CartPole-v1",
        "Pendulum-v1",
        "MountainCarContinuous-v0",
        "FrozenLake-v1",
    ] {
        let mut env = make(id, &no_kwargs()).unwrap();
        let r = check_env(env.as_mut(), 300);
        assert!(r.ok(), "{id}: {:?}", r.errors);
    }
    let pendulum = make("Pendulum-v1", &no_kwargs()).unwrap();
    assert_eq!(
        pendulum.action_space(),
        &Space::Box {
            low: vec![-2.0],
            high: vec![2.0],
            shape: vec![1]
        }
    );
    let lake = make("FrozenLake-v1", &no_kwargs()).unwrap();
    assert_eq!(lake.observation_space(), &Space::discrete(16));
}

#[test]
fn kwargs_reach_gymnasium_make_and_bad_ones_are_named() {
    let mut kw = Kwargs::new();
    kw.insert("map_name".into(), "8x8".into());
    kw.insert("is_slippery".into(), false.into());
    let lake = make("FrozenLake-v1", &kw).unwrap();
    assert_eq!(lake.observation_space(), &Space::discrete(64));
    let mut bad = Kwargs::new();
    bad.insert("no_such_key".into(), 1.into());
    let e = make_error("CartPole-v1", &bad);
    assert!(
        e.contains("gymnasium:CartPole-v1") && e.contains("no_such_key"),
        "{e}"
    );
    let e = make_error("NoSuchEnv-v9", &no_kwargs());
    assert!(e.contains("NoSuchEnv"), "{e}");
}

#[test]
fn a_user_defined_env_class_steps_with_gymnasiums_semantics() {
    register_test_envs();
    let mut env = make("RlTest/Counter-v0", &no_kwargs()).unwrap();
    assert_eq!(env.action_space(), &Space::discrete(3));
    let mut obs = [9.0];
    let info = env.reset(Some(1), None, &mut obs).unwrap();
    assert_eq!((obs, info.get("start")), ([0.0], Some(&1.0)));
    let mut rewards = Vec::new();
    loop {
        let s = env.step(&[2.0], &mut obs).unwrap();
        rewards.push(s.reward);
        // Numeric info entries come through; others are left out.
        assert_eq!(s.info.get("t"), Some(&f64::from(obs[0])));
        assert!(!s.info.contains_key("name"));
        if s.terminated {
            assert!(!s.truncated);
            break;
        }
    }
    assert_eq!(rewards, [1.0; 5]);
    assert_eq!(obs, [5.0]);
    // An action of the wrong width is refused before Python sees it.
    assert!(matches!(
        env.step(&[1.0, 1.0], &mut obs),
        Err(EnvError::InvalidAction { .. })
    ));
}

#[test]
fn unsupported_spaces_and_python_exceptions_are_errors_naming_them() {
    register_test_envs();
    let e = make_error("RlTest/DictObs-v0", &no_kwargs());
    assert!(
        e.contains("observation_space") && e.contains("Dict") && e.contains("FlattenObservation"),
        "{e}"
    );
    let mut env = make("RlTest/Raises-v0", &no_kwargs()).unwrap();
    let mut obs = [0.0];
    env.reset(None, None, &mut obs).unwrap();
    let e = env.step(&[0.0], &mut obs).unwrap_err().to_string();
    assert!(
        e.contains("gymnasium:RlTest/Raises-v0") && e.contains("RuntimeError: boom at step"),
        "{e}"
    );
}

#[test]
fn a_snapshot_restores_the_env_and_its_generator_exactly() {
    let mut env = make("Pendulum-v1", &no_kwargs()).unwrap();
    let mut obs = vec![0.0; 3];
    env.reset(Some(3), None, &mut obs).unwrap();
    for i in 0..5 {
        env.step(&[i as f32 * 0.3 - 0.6], &mut obs).unwrap();
    }
    let snap = env.snapshot().unwrap();
    let run = |env: &mut Box<dyn Env>, obs: &mut Vec<f32>| {
        let mut out = Vec::new();
        for i in 0..10 {
            env.step(&[1.5 - i as f32 * 0.3], obs).unwrap();
            out.extend_from_slice(obs);
        }
        // A reset without a seed draws from the env's generator, which the snapshot holds.
        env.reset(None, None, obs).unwrap();
        out.extend_from_slice(obs);
        out
    };
    let first = run(&mut env, &mut obs);
    let mut other = make("Pendulum-v1", &no_kwargs()).unwrap();
    other.restore(&snap).unwrap();
    assert_eq!(run(&mut other, &mut obs), first);
    let e = other
        .restore(&serde_json::json!({"pickle": 3}))
        .unwrap_err()
        .to_string();
    assert!(e.contains("pickle"), "{e}");
}
