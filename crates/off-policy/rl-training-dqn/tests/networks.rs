//! Noisy layers, dueling and distributional heads.

use rl_training_core::Rng;
use rl_training_core::batch::{host, tensor2};
use rl_training_core::burn::tensor::Device;
use rl_training_core::nn::Activation;
use rl_training_dqn::{QNetwork, QNetworkConfig};

fn config(noisy: bool, dueling: bool, atoms: usize) -> QNetworkConfig {
    QNetworkConfig {
        d_input: 3,
        n_actions: 4,
        net_arch: vec![8],
        hiddens: vec![6],
        activation: Activation::Relu,
        dueling,
        atoms,
        noisy_sigma0: noisy.then_some(0.5),
        head_gain: 1.0,
    }
}

fn net(noisy: bool, dueling: bool, atoms: usize) -> QNetwork {
    config(noisy, dueling, atoms).init(&mut Rng::seed_from(0), &Device::flex())
}

fn rows(n: usize) -> Vec<f32> {
    (0..n).flat_map(|_| [0.3f32, -1.2, 0.7]).collect()
}

#[test]
fn noise_is_fixed_within_one_forward_pass() {
    let dev = Device::flex();
    let q = net(true, true, 1);
    let noise = q
        .sample_noise(&mut Rng::seed_from(1))
        .unwrap()
        .to_device(&dev);
    let out = host(q.q_values(tensor2(rows(5), 5, 3, &dev), Some(&noise), None));
    for r in 1..5 {
        assert_eq!(
            &out[r * 4..(r + 1) * 4],
            &out[..4],
            "row {r} saw other noise"
        );
    }
    let mean = host(q.q_values(tensor2(rows(1), 1, 3, &dev), None, None));
    assert_ne!(&out[..4], &mean[..], "noise changes the output");
}

#[test]
fn fresh_noise_differs_and_deterministic_mode_uses_the_mean_weights() {
    let dev = Device::flex();
    let q = net(true, false, 1);
    let mut rng = Rng::seed_from(2);
    let (a, b) = (
        q.sample_noise(&mut rng).unwrap(),
        q.sample_noise(&mut rng).unwrap(),
    );
    assert_ne!(a, b, "each training step draws new noise");
    let x = || tensor2(rows(1), 1, 3, &dev);
    let qa = host(q.q_values(x(), Some(&a.to_device(&dev)), None));
    let qb = host(q.q_values(x(), Some(&b.to_device(&dev)), None));
    assert_ne!(qa, qb);
    // Zero noise is the same as no noise: deterministic mode is the mean network.
    let zero = rl_training_dqn::NetNoise(
        a.0.iter()
            .map(|(i, o)| (vec![0.0; i.len()], vec![0.0; o.len()]))
            .collect(),
    );
    assert_eq!(
        host(q.q_values(x(), Some(&zero.to_device(&dev)), None)),
        host(q.q_values(x(), None, None))
    );
    assert!(net(false, false, 1).sample_noise(&mut rng).is_none());
}

#[test]
fn dueling_and_c51_heads_have_the_right_shapes() {
    let dev = Device::flex();
    let q = net(false, true, 11);
    let out = q.forward(tensor2(rows(2), 2, 3, &dev), None);
    assert_eq!(out.dims(), [2, 4, 11]);
    let z = rl_training_core::batch::tensor1((0..11).map(|i| i as f32).collect(), &dev);
    let qv = host(q.q_values(tensor2(rows(2), 2, 3, &dev), None, Some(&z)));
    assert_eq!(qv.len(), 8);
    assert!(
        qv.iter().all(|&v| (0.0..=10.0).contains(&v)),
        "expectations lie in the support: {qv:?}"
    );
}

#[test]
fn a_zero_head_gain_starts_every_action_value_equal() {
    // An autodiff device, as the learner's: the scaled layers must stay trainable leaves.
    let dev = Device::flex().autodiff();
    for (dueling, atoms) in [(false, 1), (true, 1), (true, 11)] {
        let q = QNetworkConfig {
            head_gain: 0.0,
            ..config(false, dueling, atoms)
        }
        .init(&mut Rng::seed_from(0), &dev);
        let y = q.forward(tensor2(rows(3), 3, 3, &dev), None);
        let out = host(y.clone());
        // Q-values (or C51 logits) of 0: no action is preferred before any reward.
        assert!(out.iter().all(|v| *v == 0.0), "{dueling} {atoms}: {out:?}");
        let grads = y.sum().backward();
        assert!(q.adv.last().unwrap().weight.grad(&grads).is_some());
    }
    // The other layers are drawn as with gain 1 (the generator's stream is the same).
    let half = QNetworkConfig {
        head_gain: 0.5,
        ..config(false, true, 1)
    };
    let (a, b) = (net(false, true, 1), half.init(&mut Rng::seed_from(0), &dev));
    assert_eq!(host(a.trunk[0].weight.val()), host(b.trunk[0].weight.val()));
    let (wa, wb) = (host(a.adv[1].weight.val()), host(b.adv[1].weight.val()));
    assert!(wa.iter().zip(&wb).all(|(x, y)| (x * 0.5 - y).abs() < 1e-7));
}
