//! The actor-critic trains: value regression and action log-likelihood both improve under the
//! flat optimizer, and every parameter receives a gradient.

use rl_training_core::burn::tensor::Device;
use rl_training_core::optim::{FlatOptimizer, OptimizerKind};
use rl_training_core::params::{flat_grads, num_params};
use rl_training_core::{Rng, Space};
use rl_training_on_policy::rollout::{host, tensor2};
use rl_training_on_policy::{ActorCritic, PolicyKwargs};

fn setup() -> (ActorCritic, Device, Vec<f32>, Vec<f32>) {
    let device = Device::flex().autodiff();
    let mut rng = Rng::seed_from(0);
    let obs_space = Space::boxed(vec![-5.0; 4], vec![5.0; 4]);
    let policy = ActorCritic::new(
        &obs_space,
        &Space::discrete(2),
        &PolicyKwargs::default(),
        &mut rng,
        &device,
    )
    .unwrap();
    let obs: Vec<f32> = (0..64 * 4).map(|_| rng.normal() as f32).collect();
    // Targets: a smooth function of the observation, scale ~10.
    let target: Vec<f32> = obs
        .chunks(4)
        .map(|o| 10.0 + 5.0 * o[0] - 3.0 * o[2])
        .collect();
    (policy, device, obs, target)
}

#[test]
fn value_regression_learns() {
    let (mut policy, device, obs, target) = setup();
    let mut opt = FlatOptimizer::new(OptimizerKind::adam(1e-5), Some(0.5));
    let loss_at = |p: &ActorCritic| {
        let v = p.values(tensor2(obs.clone(), 64, 4, &device));
        host(
            rl_training_core::losses::mse(
                v,
                tensor2(target.clone(), 64, 1, &device).squeeze_dim::<1>(1),
            )
            .inner(),
        )[0]
    };
    let first = loss_at(&policy);
    for _ in 0..300 {
        let v = policy.values(tensor2(obs.clone(), 64, 4, &device));
        let l = rl_training_core::losses::mse(
            v,
            tensor2(target.clone(), 64, 1, &device).squeeze_dim::<1>(1),
        );
        let (p, _) = opt.step(3e-3, policy.clone(), l.backward(), &device);
        policy = p;
    }
    let last = loss_at(&policy);
    assert!(last < first * 0.05, "value loss {first} -> {last}");
}

#[test]
fn every_parameter_gets_a_gradient() {
    let (policy, device, obs, _) = setup();
    let acts = tensor2((0..64).map(|i| (i % 2) as f32).collect(), 64, 1, &device);
    let (values, logp, ent) = policy.evaluate_actions(tensor2(obs, 64, 4, &device), acts);
    let loss = values.mean() + logp.mean() + ent.unwrap().mean();
    let g = host(flat_grads(&policy, loss.backward(), &device));
    assert_eq!(g.len(), num_params(&policy));
    for info_and_slice in
        rl_training_core::params::param_infos(&policy)
            .iter()
            .scan(0usize, |o, p| {
                let r = (p.path.clone(), *o..*o + p.numel());
                *o += p.numel();
                Some(r)
            })
    {
        let (path, range) = info_and_slice;
        let norm: f32 = g[range].iter().map(|x| x * x).sum();
        assert!(norm > 0.0, "no gradient for {path}");
    }
}

#[test]
fn valid_copy_computes_the_same_values_after_updates() {
    use rl_training_core::burn::module::Module;
    let (mut policy, device, obs, target) = setup();
    let mut opt = FlatOptimizer::new(OptimizerKind::adam(1e-5), Some(0.5));
    for _ in 0..20 {
        let v = policy.values(tensor2(obs.clone(), 64, 4, &device));
        let l = rl_training_core::losses::mse(
            v,
            tensor2(target.clone(), 64, 1, &device).squeeze_dim::<1>(1),
        );
        policy = opt.step(3e-3, policy.clone(), l.backward(), &device).0;
    }
    let a = host(policy.values(tensor2(obs.clone(), 64, 4, &device)).inner());
    let valid = policy.valid();
    let b = host(valid.values(tensor2(obs.clone(), 64, 4, &device.clone().inner())));
    assert_eq!(a, b);
}

#[test]
fn flat_adam_matches_burn_adam() {
    use rl_training_core::burn::optim::{AdamConfig, GradientsParams};
    use rl_training_core::params::module_tensors;
    let (policy, device, obs, target) = setup();
    let loss_of = |p: &ActorCritic| {
        let acts = tensor2((0..64).map(|i| (i % 2) as f32).collect(), 64, 1, &device);
        let (v, lp, _) = p.evaluate_actions(tensor2(obs.clone(), 64, 4, &device), acts);
        rl_training_core::losses::mse(
            v,
            tensor2(target.clone(), 64, 1, &device).squeeze_dim::<1>(1),
        ) - lp.mean()
    };
    let mut flat = FlatOptimizer::new(OptimizerKind::adam(1e-5), None);
    let mut burn_opt = AdamConfig::new().with_epsilon(1e-5).init();
    let (mut a, mut b) = (policy.clone(), policy);
    for _ in 0..5 {
        a = flat
            .step(1e-3, a.clone(), loss_of(&a).backward(), &device)
            .0;
        let g = GradientsParams::from_grads(loss_of(&b).backward(), &b);
        b = burn_opt.step(1e-3, b, g);
    }
    let (ta, tb) = (module_tensors(&a), module_tensors(&b));
    for (k, (_, va)) in &ta.0 {
        let vb = &tb.0[k].1;
        let err = va
            .iter()
            .zip(vb)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0f32, f32::max);
        assert!(err < 1e-5, "{k}: max diff {err}");
    }
}

mod gsde {
    use rl_training_core::batch::{host, tensor2};
    use rl_training_core::burn::tensor::Device;
    use rl_training_core::{Rng, Space};
    use rl_training_on_policy::{ActorCritic, PolicyKwargs};

    fn policy(full_std: bool) -> ActorCritic {
        policy_on(full_std, &Device::flex())
    }

    fn policy_on(full_std: bool, device: &Device) -> ActorCritic {
        let kw = PolicyKwargs {
            log_std_init: -1.0,
            full_std,
            ..PolicyKwargs::default()
        };
        ActorCritic::with_sde(
            &Space::boxed(vec![-1.0; 3], vec![1.0; 3]),
            &Space::boxed(vec![-2.0; 2], vec![2.0; 2]),
            &kw,
            true,
            &mut Rng::seed_from(1),
            device,
        )
        .unwrap()
    }

    fn obs(n: usize) -> Vec<f32> {
        (0..n * 3)
            .map(|i| ((i * 7 % 11) as f32 - 5.0) / 5.0)
            .collect()
    }

    #[test]
    fn noise_is_a_function_of_the_state_until_resampled() {
        let p = policy(true);
        let dev = Device::flex();
        let out = p.forward(tensor2(obs(4), 4, 3, &dev));
        let (mean, latent) = (host(out.params), host(out.latent_sde.unwrap()));
        let mut rng = Rng::seed_from(3);
        let noise = p.sde_noise(4 * 2, &mut rng).unwrap();
        let (a1, lp1) = noise.act(&mean, &latent, false);
        // The same matrix and state give the same action (no fresh per-step noise) ...
        let (a2, lp2) = noise.act(&mean, &latent, false);
        assert_eq!((&a1, &lp1), (&a2, &lp2));
        assert_ne!(a1, mean, "exploration moves the actions");
        // ... a new matrix other actions; deterministic mode is the mean.
        let other = p.sde_noise(4 * 2, &mut rng).unwrap();
        assert_ne!(other.act(&mean, &latent, false).0, a1);
        assert_eq!(noise.act(&mean, &latent, true).0, mean);
    }

    #[test]
    fn collected_log_probs_match_the_training_log_probs() {
        for full_std in [true, false] {
            let p = policy(full_std);
            let dev = Device::flex();
            let x = tensor2(obs(5), 5, 3, &dev);
            let out = p.forward(x.clone());
            let (mean, latent) = (host(out.params), host(out.latent_sde.unwrap()));
            let noise = p.sde_noise(5 * 2, &mut Rng::seed_from(9)).unwrap();
            let (a, lp) = noise.act(&mean, &latent, false);
            // The loss path: Gaussian log-prob with the per-sample log_std from the network.
            let (lp_t, ent) = p.log_prob_entropy(x, tensor2(a, 5, 2, &dev));
            for (x, y) in lp.iter().zip(host(lp_t)) {
                assert!((x - y).abs() < 1e-4, "full_std {full_std}: {x} vs {y}");
            }
            assert!(ent.is_some());
        }
    }

    #[test]
    fn sde_std_only_reaches_the_exploration_parameters() {
        // The variance holds the latent features constant: its gradient reaches sde_log_std
        // but not the trunk.
        let dev = Device::flex().autodiff();
        let p = policy_on(true, &dev);
        let latent = p.pi.forward(tensor2(obs(3), 3, 3, &dev));
        let ls = p.dist_log_std(&latent).unwrap();
        let g = ls.sum().backward();
        let w = p.pi.layers[0].weight.grad(&g);
        let s = p.sde_log_std.as_ref().unwrap().grad(&g);
        assert!(w.is_none(), "trunk got a gradient through the variance");
        assert!(s.is_some());
    }
}

#[test]
fn value_gain_scales_the_initial_values() {
    let device = Device::flex();
    let (obs, act) = (
        Space::uniform_box(-1.0, 1.0, &[3]),
        Space::Discrete { n: 2, start: 0 },
    );
    let values = |value_gain: f64| {
        let kw = PolicyKwargs {
            value_gain,
            ..PolicyKwargs::default()
        };
        let p = ActorCritic::new(&obs, &act, &kw, &mut Rng::seed_from(4), &device).unwrap();
        host(p.values(tensor2(vec![0.5, -0.2, 0.9, 0.1, 0.3, -0.7], 2, 3, &device)))
    };
    let (one, small) = (values(1.0), values(0.01));
    for (a, b) in one.iter().zip(&small) {
        assert!(
            a.abs() > 1e-3 && (b - 0.01 * a).abs() < 1e-6,
            "{one:?} vs {small:?}"
        );
    }
}

/// SB3's `CnnPolicy`: `features_extractor_class: NatureCNN` reads `[C, H, W]` pixels through the
/// Nature CNN that both heads share; values and log-probabilities agree between the full
/// forward pass and the single-head paths, every parameter (the CNN's too) gets a gradient,
/// and a flat observation space or an unknown extractor is refused naming the key.
#[test]
fn the_cnn_policy_reads_images_through_a_shared_nature_cnn() {
    let device = Device::flex().autodiff();
    let kw: PolicyKwargs = serde_json::from_value(serde_json::json!({
        "features_extractor_class": "NatureCNN",
        "features_extractor_kwargs": {"features_dim": 64},
        "net_arch": []
    }))
    .unwrap();
    let image = Space::Box {
        low: vec![0.0; 4 * 36 * 36],
        high: vec![255.0; 4 * 36 * 36],
        shape: vec![4, 36, 36],
    };
    let mut rng = Rng::seed_from(3);
    let p = ActorCritic::new(&image, &Space::discrete(3), &kw, &mut rng, &device).unwrap();
    assert!(p.cnn.is_some() && !p.separate_trunks());
    assert_eq!(p.action_net.weight.dims(), [64, 3]);
    let d = 4 * 36 * 36;
    let pixels: Vec<f32> = (0..2 * d).map(|_| rng.below(256) as f32).collect();
    let obs = tensor2(pixels, 2, d, &device);
    let out = p.forward(obs.clone());
    assert_eq!(out.params.dims(), [2, 3]);
    assert_eq!(host(out.values.clone()), host(p.values(obs.clone())));
    let actions = tensor2(vec![0.0, 2.0], 2, 1, &device);
    let (v, lp, _) = p.evaluate_actions(obs.clone(), actions.clone());
    let (lp2, _) = p.log_prob_entropy(obs, actions);
    assert_eq!(host(lp.clone()), host(lp2));
    let g = host(flat_grads(&p, (v.sum() + lp.sum()).backward(), &device));
    assert_eq!(g.len(), num_params(&p));
    let cnn_params = num_params(p.cnn.as_ref().unwrap());
    assert!(
        g[..cnn_params].iter().any(|x| *x != 0.0),
        "the CNN gets a gradient"
    );

    let flat = Space::boxed(vec![-1.0; 4], vec![1.0; 4]);
    let e = ActorCritic::new(&flat, &Space::discrete(2), &kw, &mut rng, &device).unwrap_err();
    assert!(
        e.contains("features_extractor_class") && e.contains("image"),
        "{e}"
    );
    let bad = serde_json::from_value::<PolicyKwargs>(
        serde_json::json!({"features_extractor_class": "ResNet"}),
    )
    .unwrap_err()
    .to_string();
    assert!(bad.contains("ResNet") && bad.contains("NatureCNN"), "{bad}");
}
