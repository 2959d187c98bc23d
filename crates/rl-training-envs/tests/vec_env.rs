//! Vector envs: threads do not change results; auto-reset keeps the true final observation.

use rl_training_core::env::{Env, Kwargs};
use rl_training_core::{Rng, VecEnv};
use rl_training_envs::faults::{Fault, FaultInjection};

fn envs(id: &str, n: usize) -> Vec<Box<dyn Env>> {
    (0..n)
        .map(|_| {
            rl_training_envs::make_training_env(id, &Kwargs::new(), &Default::default(), 0.99)
                .unwrap()
        })
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
    let mut twin = rl_training_envs::make("CartPole-v1", &Kwargs::new()).unwrap();
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
            let inner = rl_training_envs::make("CartPole-v1", &Kwargs::new()).unwrap();
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

/// Raw vector env and its shared-normalization twin, stepped with the same actions.
fn shared_pair(id: &str, n: usize, threads: usize) -> (VecEnv, VecEnv) {
    let raw = VecEnv::new(envs(id, n)).unwrap();
    let mut shared = VecEnv::with_threads(envs(id, n), threads).unwrap();
    shared.share_normalization(true, true, 0.9).unwrap();
    (raw, shared)
}

#[test]
fn shared_normalization_is_vecnormalize_over_the_batch() {
    use rl_training_core::wrappers::RunningMeanStd;
    // The statistics by hand, from the raw twin: SB3's VecNormalize order (update with the
    // batch after auto-reset, normalize rows and final observations, discounted returns
    // zeroed at episode ends).
    let (mut raw, mut shared) = shared_pair("CartPole-v1", 4, 1);
    let (mut rms, mut ret) = (RunningMeanStd::new(4), RunningMeanStd::new(1));
    let mut returns = [0.0f64; 4];
    let norm = |rms: &RunningMeanStd, rows: &[f32]| {
        let mut v = rows.to_vec();
        v.chunks_mut(4).for_each(|r| rms.normalize(r));
        v
    };
    rms.update_batch(raw.reset(Some(7)).unwrap());
    assert_eq!(shared.reset(Some(7)).unwrap(), &norm(&rms, raw.obs())[..]);
    let mut rng = Rng::seed_from(2);
    let mut ended = 0;
    for _ in 0..400 {
        let act: Vec<f32> = (0..4).map(|_| rng.below(2) as f32).collect();
        raw.step(&act).unwrap();
        shared.step(&act).unwrap();
        rms.update_batch(raw.obs());
        assert_eq!(shared.obs(), &norm(&rms, raw.obs())[..]);
        for (g, r) in returns.iter_mut().zip(raw.rewards()) {
            *g = *g * 0.9 + r;
        }
        let m = returns.iter().sum::<f64>() / 4.0;
        let v = returns.iter().map(|g| (g - m).powi(2)).sum::<f64>() / 4.0;
        ret.update_from_moments(&[m], &[v], 4.0);
        for i in 0..4 {
            let want = raw.rewards()[i] / (ret.var[0] + 1e-8).sqrt();
            assert_eq!(shared.rewards()[i], want);
            if raw.terminated()[i] || raw.truncated()[i] {
                assert_eq!(shared.final_obs(i), &norm(&rms, raw.final_obs(i))[..]);
                returns[i] = 0.0;
                ended += 1;
            }
        }
    }
    assert!(ended > 10, "episodes ended: {ended}");
    // An evaluation env loads the shared statistics in the per-env wrapper's format.
    let stats = shared.save_stats();
    let mut eval = rl_training_envs::make_eval_env(
        "CartPole-v1",
        &Kwargs::new(),
        &rl_training_core::config::NormalizeConfig {
            obs: true,
            reward: false,
            shared: true,
        },
    )
    .unwrap();
    eval.load_stats(&stats).unwrap();
    eval.set_training(false);
    let mut o = vec![0.0; 4];
    let mut raw_eval = rl_training_envs::make("CartPole-v1", &Kwargs::new()).unwrap();
    let mut ro = vec![0.0; 4];
    eval.reset(Some(5), None, &mut o).unwrap();
    raw_eval.reset(Some(5), None, &mut ro).unwrap();
    assert_eq!(o, norm(&rms, &ro));
}

#[test]
fn shared_normalization_is_the_same_on_any_thread_count_and_resumes() {
    let (_, mut a) = shared_pair("Pendulum-v1", 5, 1);
    let (_, mut b) = shared_pair("Pendulum-v1", 5, 3);
    assert_eq!(a.reset(Some(1)).unwrap(), b.reset(Some(1)).unwrap());
    let mut rng = Rng::seed_from(4);
    let space = a.action_space().clone();
    let mut actions = |n: usize| {
        let mut act = Vec::new();
        for _ in 0..n {
            space.sample(&mut rng, &mut act);
        }
        act
    };
    for _ in 0..300 {
        let act = actions(5);
        a.step(&act).unwrap();
        b.step(&act).unwrap();
        assert_eq!((a.obs(), a.rewards()), (b.obs(), b.rewards()));
    }
    assert_eq!(a.shared_normalizer(), b.shared_normalizer());
    // A snapshot carries the statistics: a fresh twin restored from it steps the same.
    let snaps = a.snapshots().unwrap();
    assert_eq!(snaps.len(), 6);
    let (_, mut c) = shared_pair("Pendulum-v1", 5, 1);
    c.reset(Some(99)).unwrap();
    c.restore_snapshots(&snaps).unwrap();
    assert_eq!(c.shared_normalizer(), a.shared_normalizer());
    for _ in 0..50 {
        let act = actions(5);
        a.step(&act).unwrap();
        c.step(&act).unwrap();
        assert_eq!((a.obs(), a.rewards()), (c.obs(), c.rewards()));
    }
    // Frozen statistics do not move; a snapshot without them is refused, naming the env.
    a.set_training(false);
    let before = a.shared_normalizer().cloned();
    a.step(&actions(5)).unwrap();
    assert_eq!(a.shared_normalizer().cloned(), before);
    let e = c.restore_snapshots(&snaps[..5]).unwrap_err().to_string();
    assert!(
        e.contains("Pendulum-v1") && e.contains("shared normalization"),
        "{e}"
    );
    // Observations must be a Box to be normalized.
    let mut d = VecEnv::new(envs("FrozenLake-v1", 2)).unwrap();
    let e = d
        .share_normalization(true, false, 0.99)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("normalize.obs") && e.contains("FrozenLake"),
        "{e}"
    );
}
