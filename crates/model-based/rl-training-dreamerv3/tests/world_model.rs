//! The world model learns a fixed replayed batch: its loss falls well below its start
//! within a few hundred Adam steps (a broken gradient anywhere in the chain — encoder,
//! RSSM, heads, KL — leaves it high).

use rl_training_core::Rng;
use rl_training_core::algorithm::{Learner, Progress};
use rl_training_core::burn::tensor::Device;
use rl_training_core::config::AlgoConfig;
use rl_training_dreamerv3::{DreamerV3Config, DreamerV3Learner};
use rl_training_model_based::SequenceBatch;

/// `b` windows of `t` CartPole-v1 steps under uniformly random actions (one-hot), each
/// window starting at a reset, time-major.
fn cartpole_batch(b: usize, t: usize, seed: u64) -> SequenceBatch {
    let mut rng = Rng::seed_from(seed);
    let (od, ad) = (4, 2);
    let mut batch = SequenceBatch::zeros(b, t, od, ad);
    for col in 0..b {
        let mut env = rl_training_envs::make("CartPole-v1", &Default::default()).unwrap();
        let mut obs = vec![0.0f32; od];
        env.reset(Some(seed * 100 + col as u64), None, &mut obs)
            .unwrap();
        let (mut first, mut reward, mut term) = (1.0, 0.0, 0.0);
        for step in 0..t {
            let i = step * b + col;
            batch.obs[i * od..(i + 1) * od].copy_from_slice(&obs);
            batch.is_first[i] = first;
            batch.rewards[i] = reward;
            batch.is_terminated[i] = term;
            let a = rng.below(2) as usize;
            batch.actions[i * ad + a] = 1.0;
            if term == 1.0 {
                env.reset(None, None, &mut obs).unwrap();
                (first, reward, term) = (1.0, 0.0, 0.0);
                continue;
            }
            let s = env.step(&[a as f32], &mut obs).unwrap();
            (first, reward, term) = (0.0, s.reward as f32, s.terminated as u8 as f32);
        }
    }
    batch
}

/// A learner configured by `kw` for CartPole, and a batch of 4 windows of `t` steps.
fn nano_on_cartpole(
    kw: serde_json::Value,
    t: usize,
    seed: u64,
) -> (DreamerV3Learner, SequenceBatch) {
    let cfg = DreamerV3Config::from_kwargs(kw.as_object().unwrap()).unwrap();
    let learner = DreamerV3Learner::new(cfg, 4, (2, false), seed, &Device::flex().autodiff());
    (learner, cartpole_batch(4, t, seed))
}

/// Counters for the loss checks (nothing here depends on them).
const PROGRESS: Progress = Progress {
    num_timesteps: 0,
    total_timesteps: 0,
    iteration: 0,
};

#[test]
fn world_model_loss_of_a_fixed_batch_falls_below_a_third_of_its_start() {
    let kw = serde_json::json!({"model_size": "nano", "world_model_lr": 1e-3});
    let (mut learner, batch) = nano_on_cartpole(kw, 32, 0);
    let mut curve = Vec::new();
    for _ in 0..300 {
        let (m, _) = learner.train_world_model(&batch, &PROGRESS).unwrap();
        curve.push(m["losses/world_model"]);
    }
    let (start, end) = (curve[0], *curve.last().unwrap());
    println!(
        "world model loss: start {start:.3}, every 50: {:?}",
        curve
            .iter()
            .step_by(50)
            .map(|x| (x * 1000.0).round() / 1000.0)
            .collect::<Vec<_>>()
    );
    // At the start the reward head is uniform over 255 bins (ln 255 ≈ 5.5 nats).
    assert!(start > 5.5, "{start}");
    assert!(end < start / 3.0, "start {start}, after 300 updates {end}");
}

#[test]
fn an_update_trains_world_model_critic_and_actor_and_the_critic_fits_its_targets() {
    let kw = serde_json::json!({
        "model_size": "nano", "world_model_lr": 1e-3, "critic_lr": 1e-3, "actor_lr": 1e-4,
        "horizon_H": 5
    });
    let (mut learner, batch) = nano_on_cartpole(kw, 16, 1);
    let mut critic = Vec::new();
    for _ in 0..150 {
        let m = learner.update(&batch, &PROGRESS).unwrap();
        for key in [
            "losses/world_model",
            "losses/kl_dyn",
            "losses/kl_rep",
            "losses/actor",
            "losses/critic",
            "losses/entropy",
            "dreamer/return_scale",
            "dreamer/imagined_return",
        ] {
            assert!(m[key].is_finite(), "{key}: {m:?}");
        }
        // Two actions: the entropy stays within (0, ln 2].
        assert!(m["losses/entropy"] > 0.0 && m["losses/entropy"] <= 2f64.ln() + 1e-6);
        critic.push((m["dreamer/imagined_value"], m["dreamer/imagined_return"]));
    }
    println!(
        "critic loss every 25: {:?}",
        critic.iter().step_by(25).collect::<Vec<_>>()
    );
    // The critic starts at 0 (zero output layer) and moves up towards its λ-return targets
    // (built from the rewards the world model learned, CartPole's 1 per step), held back by
    // its pull towards the slow copy: after 150 updates the returns are about 0.7 and the
    // values about 0.04.
    let (v_end, r_end) = critic[critic.len() - 1];
    assert!(critic[0].0.abs() < 1e-3, "{:?}", critic[0]);
    assert!(r_end > 0.3, "{critic:?}");
    assert!(v_end > 0.01 && v_end < r_end, "{critic:?}");
}

/// A one-dimensional Box-action task where the reward on arriving is the action just taken
/// (`r_{t+1} = a_t`, a constant observation): `b` windows of `t` steps under uniform
/// actions in [−1, 1].
fn action_is_reward_batch(b: usize, t: usize, seed: u64) -> SequenceBatch {
    let mut rng = Rng::seed_from(seed);
    let mut batch = SequenceBatch::zeros(b, t, 1, 1);
    for col in 0..b {
        let mut last = 0.0;
        for step in 0..t {
            let i = step * b + col;
            batch.is_first[i] = (step == 0) as u8 as f32;
            batch.rewards[i] = last;
            last = (2.0 * rng.uniform() - 1.0) as f32;
            batch.actions[i] = last;
        }
    }
    batch
}

/// Box actions, by dynamics backpropagation (the default) and by REINFORCE: on a task whose
/// reward is the action itself, once the world model has learned the reward (800 world-model
/// steps), the imagined reward climbs towards the world model's prediction for the bound
/// (about 0.6 at that point), well above a frozen actor's (whose imagined reward rises only
/// as the world model keeps learning).
#[test]
fn box_actor_climbs_the_imagined_reward_by_either_gradient() {
    let mut frozen = f64::NAN;
    for (gradient, train_actor) in [("dynamics", false), ("dynamics", true), ("reinforce", true)] {
        let kw = serde_json::json!({
            "model_size": "nano", "world_model_lr": 1e-3, "critic_lr": 1e-3,
            "actor_lr": 1e-3, "horizon_H": 5, "continuous_actor_gradient": gradient,
            "train_actor": train_actor
        });
        let cfg = DreamerV3Config::from_kwargs(kw.as_object().unwrap()).unwrap();
        let dev = Device::flex().autodiff();
        let mut learner = DreamerV3Learner::new(cfg, 1, (1, true), 0, &dev);
        let batch = action_is_reward_batch(4, 16, 0);
        for _ in 0..800 {
            learner.train_world_model(&batch, &PROGRESS).unwrap();
        }
        let mut curve = Vec::new();
        for _ in 0..300 {
            let m = learner.update(&batch, &PROGRESS).unwrap();
            assert!(m["losses/critic"].is_finite(), "{gradient}: {m:?}");
            curve.push(m["dreamer/imagined_reward"]);
        }
        let label = format!("{gradient}, train_actor {train_actor}");
        println!(
            "{label}: imagined reward every 50: {:?}",
            curve.iter().step_by(50).collect::<Vec<_>>()
        );
        let end = curve[curve.len() - 10..].iter().sum::<f64>() / 10.0;
        if train_actor {
            assert!(
                end > 0.5 && end > frozen + 0.1,
                "{label}: {end} vs frozen {frozen}"
            );
        } else {
            frozen = end;
        }
    }
}
