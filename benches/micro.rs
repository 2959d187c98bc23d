//! Micro-benchmarks: CartPole vector stepping, GAE, policy forward, one PPO minibatch update,
//! one DQN gradient step, an LSTM sequence forward and backward (burn's `Lstm` and the fused one).
//! `cargo bench --bench micro`.

#![allow(missing_docs)] // criterion_group! generates undocumented items

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rl_training::core::buffers::compute_gae;
use rl_training::core::burn::module::Module;
use rl_training::core::burn::tensor::Device;
use rl_training::core::env::{Env, Kwargs};
use rl_training::core::optim::{FlatOptimizer, OptimizerKind};
use rl_training::core::{Rng, Space, VecEnv};
use rl_training::on_policy::rollout::tensor2;
use rl_training::on_policy::{ActorCritic, PolicyKwargs};
use std::hint::black_box;

// As the `rl` binary, so the figures match training.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn cartpole_step(c: &mut Criterion) {
    let mut g = c.benchmark_group("cartpole");
    let n = 64;
    let envs: Vec<Box<dyn Env>> = (0..n)
        .map(|_| rl_training::envs::make("CartPole-v1", &Kwargs::new()).unwrap())
        .collect();
    let mut v = VecEnv::new(envs).unwrap();
    v.reset(Some(0)).unwrap();
    let mut rng = Rng::seed_from(0);
    let actions: Vec<f32> = (0..n * 1024).map(|_| rng.below(2) as f32).collect();
    let mut k = 0;
    g.throughput(Throughput::Elements(n as u64));
    g.bench_function("vec_env_64_step", |b| {
        b.iter(|| {
            k = (k + 1) % 1024;
            v.step(black_box(&actions[k * n..(k + 1) * n])).unwrap();
        })
    });
    // The raw dynamics, without the Env interface.
    let mut raw: Vec<rl_training::envs::classic::CartPole> =
        (0..n).map(|_| Default::default()).collect();
    let mut obs = [0.0f32; 4];
    for (i, e) in raw.iter_mut().enumerate() {
        e.reset(Some(i as u64), None, &mut obs).unwrap();
    }
    g.bench_function("raw_dynamics_64_step", |b| {
        b.iter(|| {
            k = (k + 1) % 1024;
            for (i, e) in raw.iter_mut().enumerate() {
                let (_, term) = e.step_fast(actions[k * n + i] == 1.0);
                if term {
                    e.reset(None, None, &mut obs).unwrap();
                }
            }
        })
    });
    g.finish();
}

fn gae(c: &mut Criterion) {
    let (t, n) = (2048, 8);
    let mut rng = Rng::seed_from(0);
    let r: Vec<f32> = (0..t * n).map(|_| rng.normal() as f32).collect();
    let v: Vec<f32> = (0..t * n).map(|_| rng.normal() as f32).collect();
    let s: Vec<f32> = (0..t * n)
        .map(|_| (rng.uniform() < 0.01) as u8 as f32)
        .collect();
    let (lv, ld) = (vec![0.5f32; n], vec![0.0f32; n]);
    let (mut a, mut ret) = (vec![0.0; t * n], vec![0.0; t * n]);
    c.bench_function("gae_2048x8", |b| {
        b.iter(|| {
            compute_gae(
                black_box(&r),
                &v,
                &s,
                &lv,
                &ld,
                0.99,
                0.95,
                &mut a,
                &mut ret,
            )
        })
    });
}

fn policy(c: &mut Criterion) {
    let device = Device::flex().autodiff();
    let mut rng = Rng::seed_from(0);
    let obs_space = Space::boxed(vec![-5.0; 4], vec![5.0; 4]);
    let mut p = ActorCritic::new(
        &obs_space,
        &Space::discrete(2),
        &PolicyKwargs::default(),
        &mut rng,
        &device,
    )
    .unwrap();
    let infer = device.clone().inner();
    let valid = p.valid();
    let mut g = c.benchmark_group("policy_forward");
    for batch in [1usize, 8, 256] {
        let x: Vec<f32> = (0..batch * 4).map(|_| rng.normal() as f32).collect();
        g.bench_with_input(BenchmarkId::from_parameter(batch), &batch, |b, &batch| {
            b.iter(|| {
                let out = valid.forward(tensor2(x.clone(), batch, 4, &infer));
                black_box(out.params.into_data());
            })
        });
    }
    g.finish();
    let batch = 256;
    let x: Vec<f32> = (0..batch * 4).map(|_| rng.normal() as f32).collect();
    let acts: Vec<f32> = (0..batch).map(|_| rng.below(2) as f32).collect();
    // A PPO-shaped loss: log-prob, value regression and entropy terms.
    let loss_of = |p: &ActorCritic| {
        let (v, lp, ent) = p.evaluate_actions(
            tensor2(x.clone(), batch, 4, &device),
            tensor2(acts.clone(), batch, 1, &device),
        );
        lp.mean().neg() + v.square().mean().mul_scalar(0.5) - ent.unwrap().mean().mul_scalar(0.01)
    };
    c.bench_function("ppo_minibatch_forward_backward_256", |b| {
        b.iter(|| {
            black_box(loss_of(&p).backward());
        })
    });
    c.bench_function("policy_forward_backward_no_loss_256", |b| {
        b.iter(|| {
            let out = p.forward(tensor2(x.clone(), batch, 4, &device));
            black_box((out.params.mean() + out.values.mean()).backward());
        })
    });
    let mut opt = FlatOptimizer::new(OptimizerKind::adam(1e-5), Some(0.5));
    c.bench_function("ppo_minibatch_update_256", |b| {
        b.iter(|| {
            let grads = loss_of(&p).backward();
            p = opt.step(1e-4, p.clone(), grads, &device).0;
        })
    });
}

/// One DQN gradient step with the zoo CartPole settings (256-256, batch 64): target forward,
/// online forward/backward in two halves, Adam.
fn dqn_step(c: &mut Criterion) {
    use rl_training::core::algorithm::Learner;
    use rl_training::core::replay::TransitionBatch;
    let device = Device::flex().autodiff();
    let mut rng = Rng::seed_from(0);
    let net = rl_training::dqn::QNetworkConfig {
        d_input: 4,
        n_actions: 2,
        net_arch: vec![256, 256],
        hiddens: vec![],
        activation: rl_training::core::nn::Activation::Relu,
        dueling: false,
        atoms: 1,
        noisy_sigma0: None,
        head_gain: 1.0,
    }
    .init(&mut rng, &device);
    let mut learner = rl_training::dqn::DqnLearner::new(
        rl_training::dqn::DqnConfig::default(),
        net,
        device,
        Rng::seed_from(1),
    );
    let b = 64;
    let mut r = |n: usize| (0..n).map(|_| rng.normal() as f32).collect::<Vec<f32>>();
    let batch = TransitionBatch {
        indices: (0..b).collect(),
        obs: r(b * 4),
        actions: (0..b).map(|i| (i % 2) as f32).collect(),
        rewards: vec![1.0; b],
        next_obs: r(b * 4),
        terminated: vec![0.0; b],
        truncated: vec![0.0; b],
        discounts: vec![0.99; b],
        weights: vec![1.0; b],
        lengths: vec![1; b],
    };
    c.bench_function("dqn_gradient_step_64_256x256", |bn| {
        let progress = rl_training::core::Progress::default();
        bn.iter(|| black_box(learner.update(&batch, &progress).unwrap()))
    });
}

/// Recurrent PPO's LSTM (sb3-contrib's zoo CartPoleNoVel: 64 units, 2 inputs) over 8 sequences
/// of 32 steps, forward and backward: burn's `Lstm::forward` against the fused one.
fn lstm_sequence(c: &mut Criterion) {
    use rl_training::core::burn::nn::LstmState;
    use rl_training::core::burn::tensor::{Tensor, TensorData};
    let dev = Device::flex().autodiff();
    let mut rng = Rng::seed_from(0);
    let lstm = rl_training::on_policy::recurrent::lstm_torch_default(2, 64, &mut rng, &dev);
    let (n, t) = (8, 32);
    let x: Vec<f32> = (0..n * t * 2)
        .map(|i| ((i % 13) as f32 - 6.0) * 0.1)
        .collect();
    let x = Tensor::<3>::from_data(TensorData::new(x, [n, t, 2]), &dev);
    let state = || LstmState::new(Tensor::zeros([n, 64], &dev), Tensor::zeros([n, 64], &dev));
    let mut g = c.benchmark_group("lstm_8x32_64_forward_backward");
    g.bench_function("burn", |b| {
        b.iter(|| {
            let (out, _) = lstm.forward(x.clone(), Some(state()));
            black_box(out.sum().backward())
        })
    });
    g.bench_function("fused", |b| {
        b.iter(|| {
            let (out, _) = rl_training::core::recurrent::lstm_forward(&lstm, x.clone(), state());
            black_box(out.sum().backward())
        })
    });
    g.finish();
}

criterion_group!(benches, cartpole_step, gae, policy, dqn_step, lstm_sequence);
criterion_main!(benches);
