//! DQN on CartPole-v1 from its parts, CleanRL-style: the env, the replay buffer, the
//! Q-network and its target, rl-training-dqn's loss terms and the optimizer in one visible loop (vanilla
//! DQN with rl-zoo's settings; the library's `Dqn` adds the Rainbow options and vector envs).
//!
//! `cargo run --release --example dqn_from_parts [TOTAL_TIMESTEPS]` (default 50 000)

use rl_training::core::Rng;
use rl_training::core::algorithm::evaluate_episodes;
use rl_training::core::batch::{host, tensor1, tensor2};
use rl_training::core::burn::module::Module;
use rl_training::core::burn::tensor::Device;
use rl_training::core::nn::Activation;
use rl_training::core::optim::{FlatOptimizer, OptimizerKind};
use rl_training::core::params::flat_grads;
use rl_training::core::replay::{NStep, Replay, ReplayConfig};
use rl_training::core::vec_env::VecEnv;
use rl_training::dqn::{QNetworkConfig, TdLoss, loss};
use rl_training::off_policy::linear_epsilon;

/// The hyperparameters (rl-zoo's CartPole-v1 row).
const LEARNING_RATE: f64 = 2.3e-3;
const BUFFER_SIZE: usize = 100_000;
const LEARNING_STARTS: u64 = 1_000;
const BATCH_SIZE: usize = 64;
const GAMMA: f32 = 0.99;
const TARGET_UPDATE_INTERVAL: u64 = 10;
const TRAIN_FREQ: u64 = 256;
const GRADIENT_STEPS: usize = 128;
const EXPLORATION_FRACTION: f64 = 0.16;
const EXPLORATION_FINAL_EPS: f64 = 0.04;
const MAX_GRAD_NORM: f64 = 10.0;

/// Trains for `total_timesteps` env steps from `seed`; returns the mean greedy return of 10
/// evaluation episodes.
fn train(total_timesteps: u64, seed: u64) -> Result<f64, Box<dyn std::error::Error>> {
    let device = Device::flex().autodiff();
    let infer = device.clone().inner();
    let make = || rl_training::envs::make("CartPole-v1", &Default::default());
    let mut env = VecEnv::new(vec![make()?])?;
    let (od, n_actions) = (env.obs_dim(), env.action_space().flat_dim());
    let mut obs = env.reset(Some(seed))?.to_vec();
    let mut replay = Replay::new(ReplayConfig {
        capacity: BUFFER_SIZE,
        n_envs: 1,
        obs_dim: od,
        act_dim: 1,
        n_step: NStep::Fixed(1),
        prioritized: None,
    });
    let net = QNetworkConfig {
        d_input: od,
        n_actions,
        net_arch: vec![256, 256],
        hiddens: Vec::new(),
        activation: Activation::Relu,
        dueling: false,
        atoms: 1,
        noisy_sigma0: None,
        head_gain: 1.0,
    };
    let mut q = net.init(&mut Rng::for_stream(seed, "init"), &device);
    let mut target = q.valid();
    let mut opt = FlatOptimizer::new(OptimizerKind::adam(1e-8), Some(MAX_GRAD_NORM));
    let (mut rng, mut rng_replay) = (Rng::for_stream(seed, "policy"), Rng::seed_from(seed));
    for global_step in 0..total_timesteps {
        // 1. Act: uniform before learning starts, then ε-greedy with ε falling linearly.
        let eps = linear_epsilon(
            1.0,
            EXPLORATION_FINAL_EPS,
            EXPLORATION_FRACTION,
            global_step,
            total_timesteps,
        );
        let action = if global_step < LEARNING_STARTS || rng.uniform() < eps {
            rng.below(n_actions as u64) as usize
        } else {
            let qs = q
                .valid()
                .q_values(tensor2(obs.clone(), 1, od, &infer), None, None);
            loss::argmax_rows(&host(qs), n_actions)[0]
        };
        env.step(&[action as f32])?;
        // 2. Store: at an episode's end the true final observation is `next_obs`, so a
        //    truncation bootstraps from it and a termination does not.
        let (terminated, truncated) = (env.terminated()[0], env.truncated()[0]);
        let next = if terminated || truncated {
            env.final_obs(0).to_vec()
        } else {
            env.obs().to_vec()
        };
        let reward = env.rewards()[0] as f32;
        replay.add(
            &obs,
            &[action as f32],
            &[reward],
            &next,
            &[terminated],
            &[truncated],
        );
        obs = env.obs().to_vec();
        for e in env.drain_episodes() {
            println!(
                "global_step {global_step:6}  charts/episodic_return {:6.1}",
                e.ret
            );
        }
        // 3. Learn: every TRAIN_FREQ steps, GRADIENT_STEPS batches toward r + γ max Q_target.
        if global_step >= LEARNING_STARTS && (global_step + 1) % TRAIN_FREQ == 0 {
            for _ in 0..GRADIENT_STEPS {
                let b = replay.sample(BATCH_SIZE, GAMMA, 1.0, &mut rng_replay);
                let n = b.len();
                let next_q =
                    target.q_values(tensor2(b.next_obs.clone(), n, od, &infer), None, None);
                let next_q = host(next_q);
                let best = loss::argmax_rows(&next_q, n_actions);
                let q_next: Vec<f32> = (0..n).map(|i| next_q[i * n_actions + best[i]]).collect();
                let y = loss::td_targets(&b.rewards, &b.discounts, &b.terminated, &q_next);
                let mut taken = vec![0.0f32; n * n_actions];
                for (i, &a) in b.actions.iter().enumerate() {
                    taken[i * n_actions + a as usize] = 1.0;
                }
                let q_all = q.q_values(tensor2(b.obs.clone(), n, od, &device), None, None);
                let q_sa = (q_all * tensor2(taken, n, n_actions, &device))
                    .sum_dim(1)
                    .reshape([n]);
                let weights = tensor1(b.weights.clone(), &device);
                let td_loss = loss::td_loss(q_sa, tensor1(y, &device), weights, TdLoss::Huber);
                let grads = flat_grads(&q, td_loss.backward(), &device);
                q = opt.step_flat(LEARNING_RATE, q, grads).0;
            }
        }
        // 4. The target network: a hard copy every TARGET_UPDATE_INTERVAL env steps.
        if (global_step + 1) % TARGET_UPDATE_INTERVAL == 0 {
            target = q.valid();
        }
    }
    // 5. Evaluation: 10 greedy episodes on a separately seeded env.
    let (mut eval_env, greedy) = (make()?, q.valid());
    let eval = evaluate_episodes(eval_env.as_mut(), 10, seed + 1_000_000, |o, _| {
        let qs = greedy.q_values(tensor2(o.to_vec(), 1, od, &infer), None, None);
        Ok(vec![loss::argmax_rows(&host(qs), n_actions)[0] as f32])
    })?;
    let score = eval.mean_return;
    println!("greedy evaluation: {score:.1}");
    Ok(score)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let total = std::env::args().nth(1).map_or(Ok(50_000), |s| s.parse())?;
    train(total, 0)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    /// CI runs the loop for a few thousand steps (past `learning_starts`, so gradient steps
    /// and target copies happen); the score is a CartPole return.
    #[test]
    fn runs_a_few_thousand_steps() {
        let score = super::train(3000, 0).unwrap();
        assert!((1.0..=500.0).contains(&score), "{score}");
    }
}
