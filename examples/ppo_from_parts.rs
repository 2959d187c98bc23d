//! PPO on CartPole-v1 from its parts, CleanRL-style: the vector env, the rollout collector
//! (GAE), rl-training-ppo's loss terms and the optimizer in one visible loop. The library's `Ppo` runs
//! the same steps (SB3's defaults for CartPole: 8 envs, 32 steps, 20 epochs, minibatches of
//! 256); this file shows where each one happens.
//!
//! `cargo run --release --example ppo_from_parts [TOTAL_TIMESTEPS]` (default 100 000)

use rl_training::core::Rng;
use rl_training::core::algorithm::evaluate_episodes;
use rl_training::core::batch::{tensor1, tensor2};
use rl_training::core::buffers::RolloutBuffer;
use rl_training::core::burn::module::Module;
use rl_training::core::burn::tensor::Device;
use rl_training::core::optim::{FlatOptimizer, OptimizerKind};
use rl_training::core::params::flat_grads;
use rl_training::core::vec_env::VecEnv;
use rl_training::on_policy::{ActorCritic, PolicyKwargs, RolloutCollector};
use rl_training::ppo::loss;

/// The hyperparameters (rl-zoo's CartPole-v1 row).
const N_ENVS: usize = 8;
const N_STEPS: usize = 32;
const N_EPOCHS: usize = 20;
const BATCH_SIZE: usize = 256;
const GAMMA: f32 = 0.98;
const GAE_LAMBDA: f32 = 0.8;
const CLIP_RANGE: f64 = 0.2; // decayed linearly, as rl-zoo's `lin_0.2`
const ENT_COEF: f64 = 0.0;
const VF_COEF: f64 = 0.5;
const MAX_GRAD_NORM: f64 = 0.5;

/// Trains for `total_timesteps` env steps from `seed`; returns the mean deterministic return
/// of 10 evaluation episodes.
fn train(total_timesteps: u64, seed: u64) -> Result<f64, Box<dyn std::error::Error>> {
    let device = Device::flex().autodiff();
    let infer = device.clone().inner();
    let make = || rl_training::envs::make("CartPole-v1", &Default::default());
    let envs = (0..N_ENVS).map(|_| make()).collect::<Result<Vec<_>, _>>()?;
    let venv = VecEnv::new(envs)?;
    let (obs_space, act_space) = (
        venv.observation_space().clone(),
        venv.action_space().clone(),
    );
    let mut collector = RolloutCollector::new(venv, N_STEPS, seed)?;
    let mut rng_init = Rng::for_stream(seed, "init");
    let kw = PolicyKwargs::default();
    let mut policy = ActorCritic::new(&obs_space, &act_space, &kw, &mut rng_init, &device)?;
    let mut opt = FlatOptimizer::new(OptimizerKind::adam(1e-5), Some(MAX_GRAD_NORM));
    let (mut rng_act, mut rng_batch) = (Rng::for_stream(seed, "policy"), Rng::seed_from(seed));
    let mut global_step = 0u64;
    while global_step < total_timesteps {
        // Learning rate and clip range decay linearly to 0 (rl-zoo's `lin_0.001`, `lin_0.2`).
        let remaining = 1.0 - global_step as f64 / total_timesteps as f64;
        let (lr, clip) = (1e-3 * remaining, CLIP_RANGE * remaining);
        // 1. Rollout: N_STEPS steps of every env with the current policy (an inference copy),
        //    truncations bootstrapped from the true final observation, then GAE.
        let info =
            collector.collect(&policy.valid(), &infer, &mut rng_act, GAMMA, GAE_LAMBDA, -1)?;
        let buf: &RolloutBuffer = &collector.buffer;
        global_step += buf.len() as u64;
        // 2. Learning: N_EPOCHS passes in shuffled minibatches.
        let (od, ad) = (buf.obs_dim, buf.act_dim);
        for _ in 0..N_EPOCHS {
            for idx in buf.minibatches(BATCH_SIZE, &mut rng_batch) {
                let b = idx.len();
                let pick = |v: &[f32]| tensor1(idx.iter().map(|&i| v[i]).collect(), &device);
                let obs = tensor2(RolloutBuffer::gather(&buf.obs, od, &idx), b, od, &device);
                let actions = tensor2(
                    RolloutBuffer::gather(&buf.actions, ad, &idx),
                    b,
                    ad,
                    &device,
                );
                let adv: Vec<f32> = idx.iter().map(|&i| buf.advantages[i]).collect();
                let adv = tensor1(loss::normalize_advantages(&adv), &device);
                let (logp, entropy) = policy.log_prob_entropy(obs.clone(), actions);
                let (policy_loss, _ratio) =
                    loss::clipped_surrogate(logp.clone(), pick(&buf.log_probs), adv, clip);
                let entropy_loss = loss::entropy_loss(entropy, logp);
                let values = policy.values(obs);
                let value_loss =
                    loss::value_loss(values, pick(&buf.values), pick(&buf.returns), None);
                let total = policy_loss
                    + entropy_loss.mul_scalar(ENT_COEF)
                    + value_loss.mul_scalar(VF_COEF);
                let grads = flat_grads(&policy, total.backward(), &device);
                policy = opt.step_flat(lr, policy, grads).0;
            }
        }
        if let Some(ret) = mean(info.episodes.iter().map(|e| e.ret)) {
            println!("global_step {global_step:7}  charts/episodic_return {ret:6.1}");
        }
    }
    // 3. Evaluation: 10 deterministic episodes on a separately seeded env.
    let (mut env, actor) = (make()?, policy.valid());
    let d = obs_space.raw_dim();
    let eval = evaluate_episodes(env.as_mut(), 10, seed + 1_000_000, |obs, _| {
        let x = tensor2(obs.to_vec(), 1, d, &infer);
        Ok(actor.sample_actions(x, &mut rng_act, true))
    })?;
    let score = eval.mean_return;
    println!("deterministic evaluation: {score:.1}");
    Ok(score)
}

/// The mean of an iterator, None when empty.
fn mean(v: impl Iterator<Item = f64>) -> Option<f64> {
    let (n, s) = v.fold((0usize, 0.0), |(n, s), x| (n + 1, s + x));
    (n > 0).then(|| s / n as f64)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let total = std::env::args().nth(1).map_or(Ok(100_000), |s| s.parse())?;
    train(total, 0)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    /// CI runs the loop for a few thousand steps: it trains, and the return is a CartPole
    /// return (at least one step per episode).
    #[test]
    fn runs_a_few_thousand_steps() {
        let score = super::train(4096, 0).unwrap();
        assert!((1.0..=500.0).contains(&score), "{score}");
    }
}
