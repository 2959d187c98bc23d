//! PPO with the Nature CNN (SB3's `CnnPolicy`) on Atari Breakout through the bridge, with
//! Gymnasium's Atari preprocessing (`examples/configs/ppo_breakout.yaml`; needs `pip install
//! ale-py opencv-python-headless`): a short run that trains, checkpoints and resumes (CI).
//! The 50k-step smoke run is in `learning.rs` (`#[ignore]`: `cargo xtask learn`).

mod atari_common;

use atari_common::{config, round_trip, some_observation, temp_dir, training_env};
use rl_training_core::Algorithm;
use rl_training_core::burn::tensor::Device;
use rl_training_ppo::Ppo;

#[test]
fn ppo_with_the_nature_cnn_trains_on_breakout_checkpoints_and_resumes() {
    let run = config(&[
        "total_timesteps=512",
        "n_envs=4",
        "algo_kwargs.n_steps=64",
        "algo_kwargs.batch_size=128",
        "algo_kwargs.n_epochs=2",
    ]);
    let dev = Device::flex();
    let mut ppo = Ppo::new(&run, &training_env, &dev).unwrap();
    // The Nature CNN on 4×84×84 frames: three conv layers, a 3136→512 linear layer, the
    // heads on its 512 features (Breakout's 4 actions and the value).
    let p = ppo.policy();
    let cnn = p.cnn.as_ref().expect("CnnPolicy builds the Nature CNN");
    assert_eq!(cnn.linear.weight.dims(), [3136, 512]);
    assert_eq!(p.action_net.weight.dims(), [512, 4]);
    assert!(p.vf.is_none(), "one shared extractor and trunk");
    let m = ppo.train().unwrap();
    for k in ["losses/policy_loss", "losses/value_loss", "losses/entropy"] {
        assert!(m[k].is_finite(), "{k} = {}", m[k]);
    }
    let obs = some_observation(&run);
    let dir = temp_dir("ci");
    let mut loaded = round_trip(&mut ppo, &run, &dir, &obs);
    // The copy trains on from the checkpoint. (Not bit for bit as the built-in envs: a
    // pickled ALE env does not restore its emulator's random state exactly.)
    let m = loaded.train().unwrap();
    assert!(m["losses/value_loss"].is_finite());
    assert_eq!(loaded.num_timesteps(), 512);
    let _ = std::fs::remove_dir_all(&dir);
}
