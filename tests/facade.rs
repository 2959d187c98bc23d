//! Every algorithm the build lists can be built by name, trained, saved and loaded back by
//! `rl_training::load`, which picks it from the checkpoint.

use rl_training::core::burn::tensor::Device;
use rl_training::core::config::RunConfig;

mod common;

use common::tiny;

#[test]
fn every_listed_algorithm_builds_trains_saves_and_loads_by_name() {
    let dev = Device::flex();
    for name in rl_training::ALGORITHMS {
        let run = RunConfig::from_yaml(&tiny(name, 64), &[], "tiny").unwrap();
        let mut alg = rl_training::build(&run, &dev).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(alg.name(), *name);
        alg.train().unwrap_or_else(|e| panic!("{name}: {e}"));
        let steps = alg.num_timesteps();
        assert!(steps > 0, "{name}");
        let dir = std::env::temp_dir().join(format!("rl-facade-{}-{name}", std::process::id()));
        alg.save(&dir).unwrap_or_else(|e| panic!("{name}: {e}"));
        let back = rl_training::load(&dir, &dev).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            (back.name(), back.num_timesteps()),
            (*name, steps),
            "{name}"
        );
        assert_eq!(
            rl_training::checkpoint_config(&dir).unwrap().algorithm,
            *name
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
