//! Vector envs: threads do not change results; auto-reset keeps the true final observation.

use rl_core::env::{Env, Kwargs};
use rl_core::{Rng, VecEnv};

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
