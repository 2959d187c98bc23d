//! Vector envs: threads do not change results; auto-reset keeps the true final observation.

use rl_core::env::{Env, Kwargs};
use rl_core::{Rng, VecEnv};
use rl_envs::faults::{Fault, FaultInjection};

fn envs(id: &str, n: usize) -> Vec<Box<dyn Env>> {
    (0..n)
        .map(|_| rl_envs::make_training_env(id, &Kwargs::new(), &Default::default(), 0.99).unwrap())
        .collect()
}

#[test]
fn threaded_equals_sequential() {
    for id in ["CartPole-v1", "Pendulum-v1", "FrozenLake-v1", "Acrobot-v1"] {
        let mut a = VecEnv::new(envs(id, 5)).unwrap();
        let mut b = VecEnv::with_threads(envs(id, 5), 3).unwrap();
        assert_eq!(a.reset(Some(42)).unwrap(), b.reset(Some(42)).unwrap());
        let space = a.action_space().clone();
        let mut rng = Rng::seed_from(1);
        for _ in 0..600 {
            let mut act = Vec::new();
            for _ in 0..5 {
                space.sample(&mut rng, &mut act);
            }
            a.step(&act).unwrap();
            b.step(&act).unwrap();
            assert_eq!(a.obs(), b.obs(), "{id}");
            assert_eq!(a.rewards(), b.rewards(), "{id}");
            assert_eq!(
                (a.terminated(), a.truncated()),
                (b.terminated(), b.truncated()),
                "{id}"
            );
        }
        assert_eq!(a.drain_episodes(), b.drain_episodes(), "{id}");
    }
}

#[test]
fn autoreset_keeps_true_final_observation() {
    // A twin env stepped by hand shows what the final observation must be.
    let mut v = VecEnv::new(envs("CartPole-v1", 1)).unwrap();
    let mut twin = rl_envs::make("CartPole-v1", &Kwargs::new()).unwrap();
    let mut obs = vec![0.0; 4];
    v.reset(Some(3)).unwrap();
    twin.reset(Some(3), None, &mut obs).unwrap();
    assert_eq!(v.obs(), &obs[..]);
    let mut rng = Rng::seed_from(9);
    let (mut terminations, mut truncations) = (0, 0);
    for _ in 0..3000 {
        // A weak controller so some episodes reach the 500-step time limit.
        let a = if rng.uniform() < 0.1 {
            (rng.below(2)) as f32
        } else if obs[2] + 0.3 * obs[3] > 0.0 {
            1.0
        } else {
            0.0
        };
        v.step(&[a]).unwrap();
        let s = twin.step(&[a], &mut obs).unwrap();
        assert_eq!(
            (v.terminated()[0], v.truncated()[0]),
            (s.terminated, s.truncated)
        );
        if s.terminated || s.truncated {
            assert_eq!(v.final_obs(0), &obs[..], "final observation kept");
            terminations += s.terminated as usize;
            truncations += s.truncated as usize;
            twin.reset(None, None, &mut obs).unwrap();
            assert_eq!(v.obs(), &obs[..], "observation after auto-reset");
            let ep = v.drain_episodes();
            assert_eq!(ep.len(), 1);
        } else {
            assert_eq!(v.obs(), &obs[..]);
        }
    }
    assert!(
        terminations > 0 && truncations > 0,
        "{terminations} terminations, {truncations} truncations"
    );
}

/// `n` CartPoles of which env `index` misbehaves on step `at_step`.
fn faulty(fault: Fault, at_step: u64, index: usize, n: usize) -> Vec<Box<dyn Env>> {
    (0..n)
        .map(|i| {
            let inner = rl_envs::make("CartPole-v1", &Kwargs::new()).unwrap();
            Box::new(FaultInjection::new(inner, Some(fault), at_step, i == index)) as Box<dyn Env>
        })
        .collect()
}

/// Steps random actions until the vector env fails; returns the error's text.
fn run_until_error(v: &mut VecEnv) -> String {
    v.reset(Some(10)).unwrap();
    let space = v.action_space().clone();
    let mut rng = Rng::seed_from(0);
    for _ in 0..1000 {
        let mut act = Vec::new();
        for _ in 0..v.num_envs() {
            space.sample(&mut rng, &mut act);
        }
        if let Err(e) = v.step(&act) {
            return e.to_string();
        }
    }
    panic!("no error in 1000 steps")
}

#[test]
fn a_panicking_env_is_an_error_naming_index_and_step_on_any_thread_count() {
    for threads in [1, 2, 4] {
        // Env 3 panics on its 7th step.
        let mut v = VecEnv::with_threads(faulty(Fault::Panic, 7, 3, 4), threads).unwrap();
        let e = run_until_error(&mut v);
        assert!(
            e.contains("env 3 (FaultInjection-v0)")
                && e.contains("at step 7")
                && e.contains("injected panic"),
            "{threads} threads: {e}"
        );
        // The failed vector env refuses to step until it is reset, then runs again.
        assert!(
            v.step(&[0.0; 4])
                .unwrap_err()
                .to_string()
                .contains("before reset")
        );
        v.reset(Some(100)).unwrap();
        v.step(&[0.0; 4]).unwrap();
    }
}

#[test]
fn nan_observations_and_rewards_name_index_step_and_value() {
    for threads in [1, 3] {
        let mut v = VecEnv::with_threads(faulty(Fault::NanObservation, 5, 1, 3), threads).unwrap();
        let e = run_until_error(&mut v);
        assert!(
            e.contains("env 1 (") && e.contains("at step 5") && e.contains("element 0 is NaN"),
            "{e}"
        );
        let mut v = VecEnv::with_threads(faulty(Fault::NanReward, 4, 2, 3), threads).unwrap();
        let e = run_until_error(&mut v);
        assert!(
            e.contains("env 2 (") && e.contains("at step 4") && e.contains("reward is NaN"),
            "{e}"
        );
    }
}
