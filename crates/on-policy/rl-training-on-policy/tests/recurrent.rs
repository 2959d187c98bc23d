//! The recurrent actor-critic: states reset at episode starts, stepping equals running the
//! sequence at once, and padded steps contribute nothing to a masked loss or its gradient.

use rl_training_core::batch::{host, tensor1, tensor2};
use rl_training_core::burn::tensor::{Device, Tensor, TensorData};
use rl_training_core::params::{flat_grads, to_vec1};
use rl_training_core::{Rng, Space};
use rl_training_on_policy::PolicyKwargs;
use rl_training_on_policy::recurrent::{RecurrentActorCritic, masked_mean};
use rl_training_on_policy::rollout::RolloutPolicy;

const D: usize = 3;
const H: usize = 8;

fn policy(shared: bool, device: &Device) -> RecurrentActorCritic {
    policy_layers(shared, 1, device)
}

fn policy_layers(shared: bool, layers: usize, device: &Device) -> RecurrentActorCritic {
    RecurrentActorCritic::new(
        &Space::boxed(vec![-1.0; D], vec![1.0; D]),
        &Space::discrete(2),
        &PolicyKwargs::default(),
        H,
        layers,
        shared,
        false,
        &mut Rng::seed_from(2),
        device,
    )
    .unwrap()
}

fn obs(n: usize, k: usize) -> Vec<f32> {
    (0..n * D)
        .map(|i| (((i + 3 * k) * 7 % 13) as f32 - 6.0) / 6.0)
        .collect()
}

#[test]
fn states_reset_at_episode_starts_and_carry_otherwise() {
    for (shared, layers) in [(false, 1), (true, 1), (false, 2)] {
        let dev = Device::flex();
        let p = policy_layers(shared, layers, &dev);
        let sd = p.state_dim();
        assert_eq!(sd, 2 * H * layers * if shared { 1 } else { 2 });
        let zero = vec![0.0f32; 2 * sd];
        let mut s1 = zero.clone();
        p.step(tensor2(obs(2, 0), 2, D, &dev), &mut s1, &[1.0, 1.0]);
        assert!(
            s1[..sd].iter().all(|&x| x != 0.0),
            "the first step moves every state"
        );
        // Env 0 starts a new episode, env 1 continues.
        let out = p.step(tensor2(obs(2, 1), 2, D, &dev), &mut s1.clone(), &[1.0, 0.0]);
        let fresh = p.step(
            tensor2(obs(2, 1), 2, D, &dev),
            &mut zero.clone(),
            &[1.0, 1.0],
        );
        // The values path agrees with the step's.
        let v = p.values_from(tensor2(obs(2, 1), 2, D, &dev), &s1, &[1.0, 0.0]);
        let (a, b) = (host(out.params), host(fresh.params));
        let (va, vb) = (host(out.values), host(fresh.values));
        assert_eq!(
            &a[..2],
            &b[..2],
            "shared {shared}: env 0 kept its old state"
        );
        assert_eq!(
            va[0], vb[0],
            "shared {shared}: env 0's critic kept its old state"
        );
        assert_ne!(&a[2..], &b[2..], "shared {shared}: env 1 lost its state");
        assert_ne!(
            va[1], vb[1],
            "shared {shared}: env 1's critic lost its state"
        );
        assert_eq!(v, va, "values_from differs from step");
    }
}

#[test]
fn stepping_equals_running_the_sequence() {
    let dev = Device::flex();
    let p = policy_layers(false, 2, &dev);
    let t = 5;
    // Start from a non-zero state: the one two steps leave.
    let mut state = vec![0.0f32; p.state_dim()];
    for k in 0..2 {
        p.step(tensor2(obs(1, 10 + k), 1, D, &dev), &mut state, &[0.0]);
    }
    let init = state.clone();
    let (mut params, mut values) = (Vec::new(), Vec::new());
    let xs: Vec<Vec<f32>> = (0..t).map(|k| obs(1, k)).collect();
    for x in &xs {
        let o = p.step(tensor2(x.clone(), 1, D, &dev), &mut state, &[0.0]);
        params.extend(host(o.params));
        values.extend(host(o.values));
    }
    let seq: Vec<f32> = xs.concat();
    let o = p.forward_sequences(
        Tensor::from_data(TensorData::new(seq.clone(), [1, t, D]), &dev),
        &init,
    );
    let (actor, _) = p.actor_sequences(
        Tensor::from_data(TensorData::new(seq.clone(), [1, t, D]), &dev),
        &init,
    );
    let critic = p.critic_sequences(
        Tensor::from_data(TensorData::new(seq, [1, t, D]), &dev),
        &init,
    );
    assert_eq!(host(actor), host(o.params.clone()));
    assert_eq!(host(critic), host(o.values.clone()));
    for (a, b) in params.iter().zip(host(o.params)) {
        assert!((a - b).abs() < 1e-5, "{a} vs {b}");
    }
    for (a, b) in values.iter().zip(host(o.values)) {
        assert!((a - b).abs() < 1e-5, "{a} vs {b}");
    }
}

#[test]
fn padded_steps_contribute_nothing_to_the_loss_or_gradient() {
    let dev = Device::flex().autodiff();
    let p = policy(false, &dev);
    let (s, t) = (2, 4);
    // Sequence 0 has 3 real steps, sequence 1 has 2.
    let mask = vec![1.0f32, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0];
    let run = |pad: f32| {
        let mut x = obs(s * t, 0);
        let mut acts = vec![0.0f32, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0, 1.0];
        let mut returns = vec![1.0f32, 0.5, -0.5, 0.0, 2.0, 1.0, 0.0, 0.0];
        for (i, &m) in mask.iter().enumerate() {
            if m == 0.0 {
                x[i * D..(i + 1) * D].fill(pad);
                acts[i] = if pad > 0.0 { 1.0 } else { 0.0 };
                returns[i] = pad * 100.0;
            }
        }
        let init = vec![0.0f32; s * p.state_dim()];
        let o = p.forward_sequences(
            Tensor::from_data(TensorData::new(x, [s, t, D]), &dev),
            &init,
        );
        let logp =
            p.ac.dist
                .log_prob(o.params, o.log_std, tensor2(acts, s * t, 1, &dev));
        let m = tensor1(mask.clone(), &dev);
        let v_err = o.values - tensor1(returns, &dev);
        let loss = masked_mean(logp, m.clone()).neg() + masked_mean(v_err.clone() * v_err, m);
        let value = host(loss.clone().inner())[0];
        (value, to_vec1(flat_grads(&p, loss.backward(), &dev)))
    };
    let (l0, g0) = run(0.0);
    let (l1, g1) = run(7.5);
    assert_eq!(l0, l1, "padding changed the loss");
    assert_eq!(g0, g1, "padding changed the gradient");
    assert!(g0.iter().any(|g| *g != 0.0));
}
