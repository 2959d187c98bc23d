//! Save, load, continue: the same metrics and weights as an uninterrupted run, bit for bit
//! (replay, envs, acting state, optimizers, generators and the return scale all saved).

use rl_core::algorithm::{Algorithm, Learner};
use rl_core::burn::tensor::Device;
use rl_core::config::RunConfig;
use rl_dreamerv3::DreamerV3;
use rl_envs::testing;

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

#[test]
fn what_is_not_built_yet_is_refused_by_name() {
    let run = RunConfig::from_yaml(
        &RUN.replace("FrozenLake-v1", "Pendulum-v1")
            .replace("env_kwargs: {is_slippery: false}", "env_kwargs: {}"),
        &[],
        "box test",
    )
    .unwrap();
    let Err(e) = DreamerV3::new(&run, &testing::training_env, &Device::flex()) else {
        panic!("Box actions are not built yet");
    };
    let e = e.to_string();
    assert!(e.contains("Pendulum-v1") && e.contains("Discrete"), "{e}");
    let bad = RunConfig::from_yaml(&RUN.replace("horizon_H: 3", "horizon_H: 0"), &[], "t").unwrap();
    let Err(e) = DreamerV3::new(&bad, &testing::training_env, &Device::flex()) else {
        panic!("horizon_H 0 accepted");
    };
    assert!(e.to_string().contains("algo_kwargs.horizon_H"), "{e}");
}
