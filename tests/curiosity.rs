//! The curiosity plugin through the family shells: every online algorithm runs with it, the
//! on-policy bonus is in the rewards GAE saw, the off-policy bonus is recomputed on each
//! replayed batch and never stored, resume with the plugin is bit-identical, and the
//! algorithms that cannot use it (offline, imitation, evolution) refuse it by name.

mod common;

use rl_training::core::algorithm::{Algorithm, Learner};
use rl_training::core::buffers::compute_gae;
use rl_training::core::burn::tensor::Device;
use rl_training::core::config::RunConfig;
use rl_training::dqn::Dqn;
use rl_training::ppo::Ppo;

/// A small ICM, so that the tests stay quick.
const SMALL_ICM: &str = "curiosity: {type: icm, feature_dim: 8, feature_net_hiddens: [16], inverse_net_hiddens: [16], forward_net_hiddens: [16], minibatch_size: 16}\n";

/// The algorithms that take no plugin (offline, GAIL/AIRL, evolution, DreamerV3); every
/// other one of `rl_training::ALGORITHMS` must train with it.
const REFUSING: [&str; 7] = ["bc", "marwil", "cql", "gail", "es", "ars", "dreamerv3"];

/// A small RND.
const SMALL_RND: &str = "curiosity: {type: rnd, feature_dim: 8, target_net_hiddens: [16], predictor_net_hiddens: [16], minibatch_size: 16}\n";

/// FrozenLake 8×8, not slippery: rewards are 0 except at the goal, so any other reward the
/// learner sees is the bonus.
fn frozen_lake(algorithm: &str, kwargs: &str) -> RunConfig {
    let y = format!(
        "algorithm: {algorithm}\nenv_id: FrozenLake-v1\nenv_kwargs: {{map_name: 8x8, is_slippery: false, max_episode_steps: 14}}\ntotal_timesteps: 2000\nn_envs: 2\nseed: 3\n{SMALL_ICM}algo_kwargs: {kwargs}\n"
    );
    RunConfig::from_yaml(&y, &[], "curiosity-test").unwrap()
}

#[test]
fn every_online_algorithm_trains_with_the_plugin() {
    let online = rl_training::ALGORITHMS
        .iter()
        .filter(|a| !REFUSING.contains(a));
    for (plugin, loss) in [(SMALL_ICM, "losses/icm_loss"), (SMALL_RND, "losses/rnd")] {
        for &name in online.clone() {
            let y = format!("{}{plugin}", common::tiny(name, 64));
            let run = RunConfig::from_yaml(&y, &[], name).unwrap();
            let mut alg =
                rl_training::build(&run, &Device::flex()).unwrap_or_else(|e| panic!("{name}: {e}"));
            let mut seen = None;
            while alg.num_timesteps() < run.total_timesteps {
                let m = alg.train().unwrap_or_else(|e| panic!("{name}: {e}"));
                if let Some(&r) = m.get("curiosity/intrinsic_reward_mean") {
                    assert!(m[loss].is_finite(), "{name}: {loss} = {}", m[loss]);
                    seen = Some(r);
                }
            }
            let r = seen.unwrap_or_else(|| panic!("{name}: the plugin never ran"));
            assert!(
                r > 0.0 && r.is_finite(),
                "{name}: intrinsic reward mean {r}"
            );
        }
    }
}

#[test]
fn the_on_policy_bonus_is_in_the_rewards_gae_saw() {
    let run = frozen_lake("ppo", "{n_steps: 32, batch_size: 16, n_epochs: 1}");
    let mut ppo = Ppo::new(&run, &rl_training::make_training_env, &Device::flex()).unwrap();
    ppo.train().unwrap();
    let b = ppo.rollout_buffer();
    // Without the truncation bootstraps the rewards are the env's (0, or 1 at the goal) plus
    // the bonus, which is positive.
    let base: Vec<f32> = b
        .rewards
        .iter()
        .zip(&b.bootstraps)
        .map(|(r, t)| r - t)
        .collect();
    assert!(
        base.iter().all(|&r| r > 0.0) && base.iter().any(|&r| r < 1.0),
        "{:?}",
        &base[..8]
    );
    // ... and the advantages are GAE of those rewards: a bonus added after GAE fails here.
    let gae = |rewards: &[f32]| {
        let (mut adv, mut ret) = (vec![0.0; b.len()], vec![0.0; b.len()]);
        let (v, starts) = (&b.values, &b.episode_starts);
        compute_gae(
            rewards,
            v,
            starts,
            &b.last_values,
            &b.last_dones,
            0.99,
            0.95,
            &mut adv,
            &mut ret,
        );
        adv
    };
    assert_eq!(gae(&b.rewards), b.advantages);
    let extrinsic: Vec<f32> = base
        .iter()
        .zip(&b.bootstraps)
        .map(|(&r, &t)| if r >= 1.0 { 1.0 + t } else { t })
        .collect();
    assert_ne!(gae(&extrinsic), b.advantages, "the bonus changed nothing");
}

#[test]
fn the_off_policy_bonus_is_recomputed_on_replay_and_never_stored() {
    let run = frozen_lake(
        "dqn",
        "{learning_starts: 16, train_freq: 4, batch_size: 8, exploration_fraction: 1.0}",
    );
    let mut dqn = Dqn::new(&run, &rl_training::make_training_env, &Device::flex()).unwrap();
    let mut bonuses = Vec::new();
    while dqn.num_timesteps() < 800 {
        let m = dqn.train().unwrap();
        if let Some(&r) = m.get("curiosity/intrinsic_reward_mean") {
            bonuses.push(r);
        }
    }
    // The replay holds the env's rewards only.
    let stored = dqn.replay().chronological().rewards;
    assert!(!stored.is_empty());
    assert!(stored.iter().all(|&r| r == 0.0 || r == 1.0), "{stored:?}");
    // Each replayed batch got the bonus of the module as it was then: it falls as the module
    // learns the (deterministic) transitions it keeps seeing.
    let (first, last) = (bonuses[0], *bonuses.last().unwrap());
    assert!(
        bonuses.len() > 50 && last < first,
        "{first} → {last} over {}",
        bonuses.len()
    );
}

#[test]
fn resume_with_the_plugin_is_bit_identical() {
    let dev = Device::flex();
    let run = frozen_lake("ppo", "{n_steps: 16, batch_size: 16, n_epochs: 2}");
    rl_training::envs::testing::assert_resumes_bit_identically(
        (2, 2),
        || Ppo::new(&run, &rl_training::make_training_env, &dev).unwrap(),
        |dir| Ppo::load(dir, &rl_training::make_training_env, &dev).unwrap(),
        |a| a.learner().weights(),
        "ppo-icm",
    );
    let mut run = frozen_lake("ppo", "{n_steps: 16, batch_size: 16, n_epochs: 2}");
    run.curiosity = RunConfig::from_yaml(
        &format!("{}{SMALL_RND}", common::tiny("ppo", 64)),
        &[],
        "rnd",
    )
    .unwrap()
    .curiosity;
    rl_training::envs::testing::assert_resumes_bit_identically(
        (2, 2),
        || Ppo::new(&run, &rl_training::make_training_env, &dev).unwrap(),
        |dir| Ppo::load(dir, &rl_training::make_training_env, &dev).unwrap(),
        |a| a.learner().weights(),
        "ppo-rnd",
    );
    let run = frozen_lake(
        "dqn",
        "{learning_starts: 16, train_freq: 4, batch_size: 8, store_buffer_in_checkpoints: true}",
    );
    rl_training::envs::testing::assert_resumes_bit_identically(
        (8, 8),
        || Dqn::new(&run, &rl_training::make_training_env, &dev).unwrap(),
        |dir| Dqn::load(dir, &rl_training::make_training_env, &dev).unwrap(),
        |a| a.learner().weights(),
        "dqn-icm",
    );
}

#[test]
fn offline_imitation_and_evolution_algorithms_refuse_the_plugin_by_name() {
    for name in REFUSING {
        let y = format!("{}{SMALL_ICM}", common::tiny(name, 64));
        let run = RunConfig::from_yaml(&y, &[], name).unwrap();
        let e = rl_training::build(&run, &Device::flex())
            .err()
            .unwrap_or_else(|| panic!("{name} took it"));
        assert!(e.to_string().contains("curiosity"), "{name}: {e}");
    }
}

#[test]
fn a_bad_plugin_config_is_an_error_naming_the_field() {
    let y = format!(
        "{}curiosity: {{type: icm, forward_loss_weight: 2}}\n",
        common::tiny("ppo", 64)
    );
    let run = RunConfig::from_yaml(&y, &[], "ppo").unwrap();
    let e = rl_training::build(&run, &Device::flex())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("curiosity.forward_loss_weight"), "{e}");
}
