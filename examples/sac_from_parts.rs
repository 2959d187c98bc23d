//! SAC on Pendulum-v1 from its parts, CleanRL-style: the env, the replay buffer, the actor,
//! twin critics and their Polyak targets, the learned entropy coefficient, rl-training-sac's loss terms
//! and the optimizers in one visible loop (SB3's defaults, learning rate 1e-3; the library's
//! `Sac` adds discrete actions, vector envs and the two-core batch split).
//!
//! `cargo run --release --example sac_from_parts [TOTAL_TIMESTEPS]` (default 20 000)

use rl_training::core::Rng;
use rl_training::core::algorithm::evaluate_episodes;
use rl_training::core::batch::{host, tensor1, tensor2};
use rl_training::core::burn::module::Module;
use rl_training::core::burn::tensor::{Device, Tensor};
use rl_training::core::nn::Activation;
use rl_training::core::optim::{FlatOptimizer, OptimizerKind};
use rl_training::core::params::{flat_grads, polyak};
use rl_training::core::replay::{NStep, Replay, ReplayConfig};
use rl_training::core::vec_env::VecEnv;
use rl_training::sac::loss::{self, ScalarAdam};
use rl_training::sac::{Actor, Critics};

/// The hyperparameters (SB3's SAC defaults; rl-zoo's learning rate for Pendulum).
const LEARNING_RATE: f64 = 1e-3;
const LEARNING_STARTS: u64 = 100;
const BATCH_SIZE: usize = 256;
const GAMMA: f32 = 0.99;
const TAU: f64 = 0.005;
const NET_ARCH: [usize; 2] = [256, 256];

/// Trains for `total_timesteps` env steps from `seed`; returns the mean deterministic return
/// of 10 evaluation episodes.
fn train(total_timesteps: u64, seed: u64) -> Result<f64, Box<dyn std::error::Error>> {
    let (device, infer) = (Device::flex().autodiff(), Device::flex());
    let make = || rl_training::envs::make("Pendulum-v1", &Default::default());
    let mut env = VecEnv::new(vec![make()?])?;
    let od = env.obs_dim();
    let (low, high) = match env.action_space().bounds() {
        Some((l, h)) => (l.to_vec(), h.to_vec()),
        None => return Err("SAC here needs a Box action space".into()),
    };
    let ad = low.len();
    // The policy acts in [−1, 1]; the env gets the action rescaled onto its bounds.
    let to_env = |a: &[f32]| -> Vec<f32> {
        (0..ad)
            .map(|i| low[i] + (a[i] + 1.0) * 0.5 * (high[i] - low[i]))
            .collect()
    };
    let mut obs = env.reset(Some(seed))?.to_vec();
    let mut replay = Replay::new(ReplayConfig {
        capacity: 1_000_000,
        n_envs: 1,
        obs_dim: od,
        act_dim: ad,
        n_step: NStep::Fixed(1),
        prioritized: None,
    });
    let mut rng = Rng::for_stream(seed, "init");
    let relu = Activation::Relu;
    let mut actor = Actor::new(od, Some(ad), 0, &NET_ARCH, relu, &mut rng, &device);
    let mut critic = Critics::new(2, od + ad, 1, &NET_ARCH, relu, &mut rng, &device);
    let mut critic_target = critic.valid();
    let mut opt_actor = FlatOptimizer::new(OptimizerKind::adam(1e-8), None);
    let mut opt_critic = FlatOptimizer::new(OptimizerKind::adam(1e-8), None);
    // The entropy coefficient α = exp(log α), learned toward the target entropy −dim(A).
    let (mut log_alpha, mut opt_alpha, target_entropy) =
        (0.0f64, ScalarAdam::default(), -(ad as f64));
    let (mut rng_act, mut rng_replay) = (Rng::for_stream(seed, "policy"), Rng::seed_from(seed));
    let normal =
        |n: usize, rng: &mut Rng| (0..n).map(|_| rng.normal() as f32).collect::<Vec<f32>>();
    for global_step in 0..total_timesteps {
        // 1. Act: uniform in [−1, 1] before learning starts, then a policy sample.
        let action: Vec<f32> = if global_step < LEARNING_STARTS {
            (0..ad)
                .map(|_| rng_act.uniform_range(-1.0, 1.0) as f32)
                .collect()
        } else {
            let x = tensor2(obs.clone(), 1, od, &infer);
            let eps = tensor2(normal(ad, &mut rng_act), 1, ad, &infer);
            host(actor.valid().sample(x, eps).0)
        };
        env.step(&to_env(&action))?;
        // 2. Store the policy's action, the true final observation at an episode's end.
        let (terminated, truncated) = (env.terminated()[0], env.truncated()[0]);
        let next = if terminated || truncated {
            env.final_obs(0).to_vec()
        } else {
            env.obs().to_vec()
        };
        let reward = env.rewards()[0] as f32;
        replay.add(&obs, &action, &[reward], &next, &[terminated], &[truncated]);
        obs = env.obs().to_vec();
        for e in env.drain_episodes() {
            println!(
                "global_step {global_step:6}  charts/episodic_return {:7.1}",
                e.ret
            );
        }
        if global_step < LEARNING_STARTS {
            continue;
        }
        // 3. One gradient step per env step.
        let b = replay.sample(BATCH_SIZE, GAMMA, 1.0, &mut rng_replay);
        let n = b.len();
        let alpha = log_alpha.exp();
        // Critics toward soft targets y = r + γ (1 − done) (min Q'(s', a') − α log π(a'|s')).
        let next_obs = tensor2(b.next_obs.clone(), n, od, &infer);
        let eps = tensor2(normal(n * ad, &mut rng_act), n, ad, &infer);
        let (next_a, next_logp) = actor.valid().sample(next_obs.clone(), eps);
        let q_next = critic_target
            .min(Tensor::cat(vec![next_obs, next_a], 1))
            .reshape([n]);
        let v_next = host(q_next - next_logp.mul_scalar(alpha));
        let y = loss::soft_targets(&b.rewards, &b.discounts, &b.terminated, &v_next);
        let obs_t = tensor2(b.obs.clone(), n, od, &device);
        let act_t = tensor2(b.actions.clone(), n, ad, &device);
        let qs: Vec<Tensor<1>> = critic
            .forward(Tensor::cat(vec![obs_t.clone(), act_t], 1))
            .into_iter()
            .map(|q| q.reshape([n]))
            .collect();
        let weights = tensor1(b.weights.clone(), &device);
        let qf_loss = loss::critic_loss(qs, tensor1(y, &device), weights);
        let grads = flat_grads(&critic, qf_loss.backward(), &device);
        critic = opt_critic.step_flat(LEARNING_RATE, critic, grads).0;
        // The actor through the updated critics (frozen): mean(α log π(a|s) − min Q(s, a)).
        let frozen = critic.clone().no_grad();
        let eps = tensor2(normal(n * ad, &mut rng_act), n, ad, &device);
        let (a, logp) = actor.sample(obs_t.clone(), eps);
        let min_q = frozen.min(Tensor::cat(vec![obs_t, a], 1)).reshape([n]);
        let log_pi = host(logp.clone().inner());
        let actor_loss = loss::actor_loss(logp, min_q, alpha);
        let grads = flat_grads(&actor, actor_loss.backward(), &device);
        actor = opt_actor.step_flat(LEARNING_RATE, actor, grads).0;
        // α's step on −log α · mean(log π + H̄), then the Polyak target update.
        let alpha_grad = loss::alpha_loss_grad(&log_pi, target_entropy);
        log_alpha = opt_alpha.step(log_alpha, alpha_grad, LEARNING_RATE);
        critic_target = polyak(critic_target, &critic.valid(), TAU);
    }
    // 4. Evaluation: 10 episodes of the squashed mean on a separately seeded env.
    let (mut eval_env, policy) = (make()?, actor.valid());
    let eval = evaluate_episodes(eval_env.as_mut(), 10, seed + 1_000_000, |o, _| {
        let a = host(policy.mean_action(tensor2(o.to_vec(), 1, od, &infer)));
        Ok(to_env(&a))
    })?;
    let score = eval.mean_return;
    println!("deterministic evaluation: {score:.1}");
    Ok(score)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let total = std::env::args().nth(1).map_or(Ok(20_000), |s| s.parse())?;
    train(total, 0)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    /// CI runs the loop for a few thousand steps (gradient steps from step 100 on); the score
    /// is a Pendulum return (between −16.3·200 and 0).
    #[test]
    fn runs_a_few_thousand_steps() {
        let score = super::train(2000, 0).unwrap();
        assert!((-3300.0..=0.0).contains(&score), "{score}");
    }
}
