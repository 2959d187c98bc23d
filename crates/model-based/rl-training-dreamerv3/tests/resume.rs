//! Save, load, continue: the same metrics and weights as an uninterrupted run, bit for bit
//! (replay, envs, acting state, optimizers, generators and the return scale all saved).

use rl_training_core::algorithm::{Algorithm, Learner};
use rl_training_core::burn::tensor::Device;
use rl_training_core::config::RunConfig;
use rl_training_dreamerv3::DreamerV3;
use rl_training_envs::testing;

const RUN: &str = "algorithm: dreamerv3
env_id: FrozenLake-v1
env_kwargs: {is_slippery: false}
total_timesteps: 1000
n_envs: 2
seed: 3
algo_kwargs:
  model_size: nano
  batch_size_B: 2
  batch_length_T: 4
  horizon_H: 3
  training_ratio: 8
  store_buffer_in_checkpoints: true
";

#[test]
fn resume_is_bit_identical() {
    let run = RunConfig::from_yaml(RUN, &[], "resume test").unwrap();
    let dev = Device::flex();
    let new = || DreamerV3::new(&run, &testing::training_env, &dev).unwrap();
    let load = |d: &std::path::Path| DreamerV3::load(d, &testing::training_env, &dev).unwrap();
    let steps = testing::assert_resumes_bit_identically(
        (12, 10),
        new,
        load,
        |a| a.learner().weights(),
        "dreamerv3",
    );
    assert_eq!(steps, 24);
    // Updates ran on both sides of the save.
    let mut a = new();
    let updates: f64 = (0..22).map(|_| a.train().unwrap()["charts/updates"]).sum();
    assert!(updates >= 30.0, "{updates}");
}

#[test]
fn predict_carries_the_model_state_until_reset() {
    let run = RunConfig::from_yaml(RUN, &[], "predict test").unwrap();
    let mut a = DreamerV3::new(&run, &testing::training_env, &Device::flex()).unwrap();
    for _ in 0..10 {
        a.train().unwrap();
    }
    // Deterministic predictions depend only on the observations since the last reset.
    let seq = [0.0f32, 4.0, 8.0, 9.0];
    let mut first = Vec::new();
    for o in seq {
        first.push(a.predict(&[o], true).unwrap()[0]);
    }
    a.reset_predict_state();
    let again: Vec<f32> = seq
        .iter()
        .map(|o| a.predict(&[*o], true).unwrap()[0])
        .collect();
    assert_eq!(first, again);
    assert!(
        first
            .iter()
            .all(|x| (0.0..4.0).contains(x) && x.fract() == 0.0)
    );
    // Bad input names what was expected.
    let e = a.predict(&[f32::NAN], true).unwrap_err().to_string();
    assert!(e.contains("observation"), "{e}");
}

/// Pendulum-v1: Box actions, the normal policy, actions rescaled onto the bounds.
fn pendulum() -> RunConfig {
    let yaml = RUN
        .replace("FrozenLake-v1", "Pendulum-v1")
        .replace("env_kwargs: {is_slippery: false}", "env_kwargs: {}");
    RunConfig::from_yaml(&yaml, &[], "box test").unwrap()
}

#[test]
fn box_actions_train_resume_bit_identically_and_predict_within_the_bounds() {
    let run = pendulum();
    let dev = Device::flex();
    let new = || DreamerV3::new(&run, &testing::training_env, &dev).unwrap();
    let load = |d: &std::path::Path| DreamerV3::load(d, &testing::training_env, &dev).unwrap();
    testing::assert_resumes_bit_identically(
        (12, 10),
        new,
        load,
        |a| a.learner().weights(),
        "dreamerv3-box",
    );
    let mut a = new();
    let mut updates = 0.0;
    for _ in 0..20 {
        let m = a.train().unwrap();
        updates += m["charts/updates"];
        if let Some(e) = m.get("losses/entropy") {
            // A normal with std in [0.1, 1]: entropy per dimension in
            // [ln 0.1 + 1.419, ln 1 + 1.419].
            assert!((-0.9..=1.42).contains(e), "{e}");
        }
    }
    assert!(updates > 0.0);
    for o in [[1.0f32, 0.0, 0.0], [0.0, 1.0, 8.0], [-1.0, 0.0, -8.0]] {
        for det in [true, false] {
            let act = a.predict(&o, det).unwrap();
            assert_eq!(act.len(), 1);
            assert!((-2.0..=2.0).contains(&act[0]), "{act:?}");
        }
    }
}

/// PixelFrozenLake-v1: 64×64 RGB observations through the CNN encoder and decoder.
#[test]
fn image_observations_train_and_resume_bit_identically() {
    let yaml = RUN
        .replace("FrozenLake-v1", "PixelFrozenLake-v1")
        .replace("n_envs: 2", "n_envs: 1");
    let run = RunConfig::from_yaml(&yaml, &[], "pixel test").unwrap();
    let dev = Device::flex();
    let new = || DreamerV3::new(&run, &testing::training_env, &dev).unwrap();
    let load = |d: &std::path::Path| DreamerV3::load(d, &testing::training_env, &dev).unwrap();
    testing::assert_resumes_bit_identically(
        (12, 8),
        new,
        load,
        |a| a.learner().weights(),
        "dreamerv3-pixels",
    );
    let mut a = new();
    let wm = a.learner().world_model();
    assert!(wm.conv_encoder.is_some() && wm.conv_decoder.is_some() && wm.decoder.is_none());
    let mut decoder = Vec::new();
    for _ in 0..20 {
        if let Some(d) = a.train().unwrap().get("losses/decoder") {
            decoder.push(*d);
        }
    }
    // The squared error summed over 64·64·3 scaled pixels, finite and falling.
    assert!(
        decoder.len() > 5 && decoder.iter().all(|d| d.is_finite()),
        "{decoder:?}"
    );
    assert!(decoder.last() < decoder.first(), "{decoder:?}");
    let mut obs = vec![0.0f32; 64 * 64 * 3];
    let mut env = rl_training_envs::make("PixelFrozenLake-v1", &Default::default()).unwrap();
    env.reset(Some(0), None, &mut obs).unwrap();
    let act = a.predict(&obs, true).unwrap();
    assert!(act.len() == 1 && (0.0..4.0).contains(&act[0]), "{act:?}");
}

#[test]
fn bad_config_values_are_refused_by_name() {
    let bad = RunConfig::from_yaml(&RUN.replace("horizon_H: 3", "horizon_H: 0"), &[], "t").unwrap();
    let Err(e) = DreamerV3::new(&bad, &testing::training_env, &Device::flex()) else {
        panic!("horizon_H 0 accepted");
    };
    assert!(e.to_string().contains("algo_kwargs.horizon_H"), "{e}");
}
