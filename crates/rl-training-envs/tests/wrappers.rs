//! Gymnasium's wrappers on the built-in envs.

use rl_training_core::Space;
use rl_training_core::env::{Env, Kwargs};
use rl_training_core::wrappers::*;

fn make(id: &str) -> Box<dyn Env> {
    rl_training_envs::make(id, &Kwargs::new()).unwrap()
}

#[test]
fn time_limit_truncates() {
    let mut env = TimeLimit::new(make("Pendulum-v1"), 7);
    let mut obs = vec![0.0; 3];
    env.reset(Some(0), None, &mut obs).unwrap();
    for t in 1..=7 {
        let s = env.step(&[0.0], &mut obs).unwrap();
        assert_eq!(s.truncated, t == 7);
    }
}

#[test]
fn record_episode_statistics_reports_true_return() {
    let mut env =
        RecordEpisodeStatistics::new(TransformReward::new(make("CartPole-v1"), |r| r * 2.0));
    let mut obs = vec![0.0; 4];
    env.reset(Some(1), None, &mut obs).unwrap();
    let mut total = 0.0;
    loop {
        let s = env.step(&[1.0], &mut obs).unwrap();
        total += s.reward;
        if s.terminated || s.truncated {
            assert_eq!(s.info["episode_return"], total);
            assert_eq!(s.info["episode_length"], total / 2.0);
            break;
        }
    }
}

#[test]
fn clip_and_rescale_actions() {
    // Pendulum's torque bound is 2: ClipAction turns 5 into 2, RescaleAction maps [-1, 1] to [-2, 2].
    let run = |env: &mut dyn Env, a: f32| {
        let mut obs = vec![0.0; 3];
        env.reset(Some(3), None, &mut obs).unwrap();
        env.set_state(&[0.5, 0.0]).unwrap();
        env.step(&[a], &mut obs).unwrap();
        env.state().unwrap()
    };
    let direct = run(make("Pendulum-v1").as_mut(), 2.0);
    assert_eq!(
        run(&mut ClipAction::new(make("Pendulum-v1")).unwrap(), 5.0),
        direct
    );
    let mut rescaled = RescaleAction::new(make("Pendulum-v1"), -1.0, 1.0).unwrap();
    assert_eq!(
        rescaled.action_space(),
        &Space::boxed(vec![-1.0], vec![1.0])
    );
    assert_eq!(run(&mut rescaled, 1.0), direct);
    assert!(RescaleAction::new(make("CartPole-v1"), -1.0, 1.0).is_err());
}

#[test]
fn flatten_observation_one_hot() {
    let mut env = FlattenObservation::new(make("FrozenLake-v1"));
    assert_eq!(env.observation_space().raw_dim(), 16);
    let mut obs = vec![0.0; 16];
    env.reset(Some(0), None, &mut obs).unwrap();
    assert_eq!(obs.iter().sum::<f32>(), 1.0);
    assert_eq!(obs[0], 1.0, "FrozenLake starts in cell 0");
}

#[test]
fn frame_stack_shifts_frames() {
    let mut env = FrameStack::new(make("Pendulum-v1"), 3).unwrap();
    assert_eq!(env.observation_space().raw_dim(), 9);
    let mut obs = vec![0.0; 9];
    env.reset(Some(0), None, &mut obs).unwrap();
    assert_eq!(&obs[..6], &[0.0; 6], "zero padding at reset");
    let first = obs[6..].to_vec();
    env.step(&[0.0], &mut obs).unwrap();
    assert_eq!(&obs[3..6], &first[..]);
    assert!(FrameStack::new(make("Pendulum-v1"), 0).is_err());
}

#[test]
fn normalizers_standardize_and_freeze() {
    let mut env = NormalizeReward::new(
        NormalizeObservation::new(make("Pendulum-v1")).unwrap(),
        0.99,
    );
    let mut obs = vec![0.0; 3];
    env.reset(Some(0), None, &mut obs).unwrap();
    let (mut sum, mut sq, mut n) = ([0.0f64; 3], [0.0f64; 3], 0.0);
    for t in 0..4000 {
        let a = [((t as f32) * 0.37).sin() * 2.0];
        let s = env.step(&a, &mut obs).unwrap();
        // The first steps are large (Gymnasium: the variance starts from one sample); then O(1).
        if t > 200 {
            assert!(
                s.reward.abs() < 10.0,
                "step {t}: reward {} not scaled",
                s.reward
            );
        }
        if t >= 2000 {
            for i in 0..3 {
                sum[i] += obs[i] as f64;
                sq[i] += (obs[i] as f64).powi(2);
            }
            n += 1.0;
        }
        if s.truncated {
            env.reset(None, None, &mut obs).unwrap();
        }
    }
    for i in 0..3 {
        let m = sum[i] / n;
        let sd = (sq[i] / n - m * m).sqrt();
        assert!(
            m.abs() < 0.5 && (sd - 1.0).abs() < 0.5,
            "element {i}: mean {m} sd {sd}"
        );
    }
    let stats = env.save_stats();
    assert_eq!(stats.len(), 2);
    env.set_training(false);
    let mut obs2 = vec![0.0; 3];
    env.reset(Some(5), None, &mut obs2).unwrap();
    env.step(&[0.0], &mut obs2).unwrap();
    // The running statistics stay; the discounted-return accumulator keeps running (as Gymnasium).
    let strip = |v: Vec<serde_json::Value>| {
        v.into_iter()
            .map(|mut x| {
                x.as_object_mut().unwrap().remove("discounted");
                x
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        strip(env.save_stats()),
        strip(stats.clone()),
        "frozen statistics do not move"
    );
    // An eval env without reward normalization takes the observation statistics.
    let mut eval = NormalizeObservation::new(make("Pendulum-v1")).unwrap();
    eval.load_stats(&stats).unwrap();
    assert_eq!(eval.save_stats()[0], stats[1]);
}

#[test]
fn reset_options_bound_the_initial_state() {
    let opts = |v: serde_json::Value| -> Kwargs { serde_json::from_value(v).unwrap() };
    let mut env = make("CartPole-v1");
    let mut obs = vec![0.0; 4];
    env.reset(
        Some(0),
        Some(&opts(serde_json::json!({"low": 0.2, "high": 0.3}))),
        &mut obs,
    )
    .unwrap();
    assert!(
        env.state()
            .unwrap()
            .iter()
            .all(|&x| (0.2..0.3).contains(&x)),
        "{:?}",
        env.state()
    );
    let mut env = make("Pendulum-v1");
    let mut obs = vec![0.0; 3];
    env.reset(
        Some(0),
        Some(&opts(serde_json::json!({"x_init": 0.1, "y_init": 0.0}))),
        &mut obs,
    )
    .unwrap();
    let s = env.state().unwrap();
    assert!(s[0].abs() <= 0.1 && s[1] == 0.0, "{s:?}");
    let e = env
        .reset(
            Some(0),
            Some(&opts(serde_json::json!({"x_start": 1.0}))),
            &mut obs,
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("x_start") && e.contains("x_init"), "{e}");
    let mut env = make("MountainCar-v0");
    let e = env
        .reset(
            None,
            Some(&opts(serde_json::json!({"low": 1.0, "high": 0.0}))),
            &mut [0.0; 2],
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("low"), "{e}");
}
