//! Built-in environments, ports of Gymnasium 1.x that match its trajectories exactly (see the
//! conformance test), and the registry behind [`make`].
#![warn(missing_docs)]

pub mod classic;
pub mod faults;
pub mod multi_agent;
pub mod pixels;
pub mod slow;
pub mod testing;
pub mod toy_text;

use rl_training_core::env::{Env, EnvError, Kwargs, Registry, check_kwargs};
use rl_training_core::wrappers::MaskObservation;

pub use multi_agent::{make_multi_agent, make_multi_agent_env, multi_agent_ids};

fn no_kwargs<E: Env + Default + 'static>(id: &str, kw: &Kwargs) -> Result<Box<dyn Env>, EnvError> {
    check_kwargs(id, kw, &["render_mode"])?;
    Ok(Box::new(E::default()))
}

/// The registry of built-in envs (ids as Gymnasium; time limits as Gymnasium's registrations).
pub fn registry() -> Registry {
    let mut r = Registry::new();
    r.register(
        "CartPole-v1",
        |kw| no_kwargs::<classic::CartPole>("CartPole-v1", kw),
        Some(500),
    );
    r.register(
        "Pendulum-v1",
        |kw| no_kwargs::<classic::Pendulum>("Pendulum-v1", kw),
        Some(200),
    );
    r.register(
        "MountainCar-v0",
        |kw| no_kwargs::<classic::MountainCar>("MountainCar-v0", kw),
        Some(200),
    );
    r.register(
        "MountainCarContinuous-v0",
        |kw| no_kwargs::<classic::MountainCarContinuous>("MountainCarContinuous-v0", kw),
        Some(999),
    );
    r.register(
        "Acrobot-v1",
        |kw| no_kwargs::<classic::Acrobot>("Acrobot-v1", kw),
        Some(500),
    );
    r.register(
        "FrozenLake-v1",
        toy_text::frozen_lake_from_kwargs,
        Some(100),
    );
    r.register(
        "FrozenLake8x8-v1",
        |kw| {
            let mut kw = kw.clone();
            kw.entry("map_name".into()).or_insert("8x8".into());
            toy_text::frozen_lake_from_kwargs(&kw)
        },
        Some(200),
    );
    // FrozenLake-v1 observed as a 64×64 RGB picture (image paths such as DreamerV3's CNN).
    r.register(
        "PixelFrozenLake-v1",
        pixels::pixel_frozen_lake_from_kwargs,
        Some(100),
    );
    r.register(
        "CliffWalking-v1",
        |kw| {
            check_kwargs("CliffWalking-v1", kw, &["render_mode"])?;
            Ok(Box::new(toy_text::cliff_walking()))
        },
        None,
    );
    r.register(
        "Taxi-v3",
        |kw| {
            check_kwargs("Taxi-v3", kw, &["render_mode"])?;
            Ok(Box::new(toy_text::taxi()))
        },
        Some(200),
    );
    // Velocity-masked POMDPs (rl-baselines3-zoo's MaskVelocityWrapper).
    r.register(
        "CartPoleNoVel-v1",
        |kw| {
            Ok(Box::new(MaskObservation::new(
                no_kwargs::<classic::CartPole>("CartPoleNoVel-v1", kw)?,
                vec![1, 3],
                "CartPoleNoVel-v1",
            )))
        },
        Some(500),
    );
    r.register(
        "PendulumNoVel-v1",
        |kw| {
            Ok(Box::new(MaskObservation::new(
                no_kwargs::<classic::Pendulum>("PendulumNoVel-v1", kw)?,
                vec![2],
                "PendulumNoVel-v1",
            )))
        },
        Some(200),
    );
    r.register(
        "MountainCarContinuousNoVel-v0",
        |kw| {
            Ok(Box::new(MaskObservation::new(
                no_kwargs::<classic::MountainCarContinuous>("MountainCarContinuousNoVel-v0", kw)?,
                vec![1],
                "MountainCarContinuousNoVel-v0",
            )))
        },
        Some(999),
    );
    // For benchmarks of runner processes (see `slow`); its wrapped env brings its own
    // time limit.
    r.register("SlowEnv-v0", slow::SlowEnv::from_kwargs, None);
    // For fault tests (see `faults`); its wrapped env brings its own time limit.
    r.register(
        "FaultInjection-v0",
        faults::FaultInjection::from_kwargs,
        None,
    );
    r
}

/// `gymnasium.make(id, **kwargs)` for the built-in envs (with the registered TimeLimit).
pub fn make(id: &str, kwargs: &Kwargs) -> Result<Box<dyn Env>, EnvError> {
    if let Some(gym_id) = id.strip_prefix(GYMNASIUM_PREFIX) {
        return make_gymnasium(gym_id, kwargs);
    }
    registry().make(id, kwargs)
}

/// The prefix of env ids made by Gymnasium (`gymnasium:Hopper-v5`).
pub const GYMNASIUM_PREFIX: &str = "gymnasium:";

/// What makes a `gymnasium:ID` env: `rl_training_gymnasium::make`.
pub type GymnasiumMaker = fn(&str, &Kwargs) -> Result<Box<dyn Env>, EnvError>;

static GYMNASIUM_MAKER: std::sync::OnceLock<GymnasiumMaker> = std::sync::OnceLock::new();

/// Routes `gymnasium:ID` env ids to `maker` for the rest of the process, in a build without the
/// `gymnasium` feature. The Python extension module does this when it is imported: it links
/// rl-training-gymnasium itself (without an embedded interpreter), so this crate, and the
/// facade above it, keep the features of the test build and the wheel reuses their artifacts.
/// Returns false when a maker was set already (the first one stays).
pub fn set_gymnasium_maker(maker: GymnasiumMaker) -> bool {
    GYMNASIUM_MAKER.set(maker).is_ok()
}

#[cfg(feature = "gymnasium")]
fn make_gymnasium(id: &str, kwargs: &Kwargs) -> Result<Box<dyn Env>, EnvError> {
    rl_training_gymnasium::make(id, kwargs)
}

#[cfg(not(feature = "gymnasium"))]
fn make_gymnasium(id: &str, kwargs: &Kwargs) -> Result<Box<dyn Env>, EnvError> {
    match GYMNASIUM_MAKER.get() {
        Some(make) => make(id, kwargs),
        None => Err(EnvError::Make(format!(
            "env_id \"{GYMNASIUM_PREFIX}{id}\": Gymnasium envs need rl built with the `python` \
             feature (cargo build --release --features python), and gymnasium installed in its \
             Python"
        ))),
    }
}

/// Builds a training env: `make(id)` (with its TimeLimit), then RecordEpisodeStatistics (so
/// recorded returns are the true ones), then the optional normalization wrappers.
pub fn make_training_env(
    id: &str,
    kwargs: &Kwargs,
    normalize: &rl_training_core::config::NormalizeConfig,
    gamma: f64,
) -> Result<Box<dyn Env>, EnvError> {
    use rl_training_core::wrappers::{
        NormalizeObservation, NormalizeReward, RecordEpisodeStatistics,
    };
    let mut env: Box<dyn Env> = Box::new(RecordEpisodeStatistics::new(make(id, kwargs)?));
    // Shared statistics live in the vector env (`VecEnv::share_normalization`), not here.
    if normalize.obs && !normalize.shared {
        env = Box::new(NormalizeObservation::new(env)?);
    }
    if normalize.reward && !normalize.shared {
        env = Box::new(NormalizeReward::new(env, gamma));
    }
    Ok(env)
}

/// Builds an evaluation env: like [`make_training_env`] but rewards are never normalized, so
/// evaluation returns are true returns; observation statistics come from training.
pub fn make_eval_env(
    id: &str,
    kwargs: &Kwargs,
    normalize: &rl_training_core::config::NormalizeConfig,
) -> Result<Box<dyn Env>, EnvError> {
    use rl_training_core::wrappers::{NormalizeObservation, RecordEpisodeStatistics};
    let mut env: Box<dyn Env> = Box::new(RecordEpisodeStatistics::new(make(id, kwargs)?));
    if normalize.obs {
        env = Box::new(NormalizeObservation::new(env)?);
    }
    Ok(env)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rl_training_core::checker::check_env;

    #[test]
    fn every_builtin_passes_the_checker() {
        for id in registry().ids() {
            let mut env = make(id, &Kwargs::new()).unwrap();
            let r = check_env(env.as_mut(), 300);
            assert!(r.ok(), "{id}: {:?}", r.errors);
        }
    }

    #[test]
    fn snapshot_restore_continues_identically() {
        for id in registry().ids() {
            let mut a = make(id, &Kwargs::new()).unwrap();
            let mut b = make(id, &Kwargs::new()).unwrap();
            let space = a.action_space().clone();
            let mut rng = rl_training_core::Rng::seed_from(5);
            let (mut oa, mut ob) = (
                vec![0.0; a.observation_space().raw_dim()],
                vec![0.0; b.observation_space().raw_dim()],
            );
            a.reset(Some(11), None, &mut oa).unwrap();
            for _ in 0..37 {
                let mut act = Vec::new();
                space.sample(&mut rng, &mut act);
                let s = a.step(&act, &mut oa).unwrap();
                if s.terminated || s.truncated {
                    a.reset(None, None, &mut oa).unwrap();
                }
            }
            b.restore(&a.snapshot().unwrap()).unwrap();
            ob.copy_from_slice(&oa);
            for t in 0..300 {
                let mut act = Vec::new();
                space.sample(&mut rng, &mut act);
                let sa = a.step(&act, &mut oa).unwrap();
                let sb = b.step(&act, &mut ob).unwrap();
                assert_eq!(
                    (sa.reward, sa.terminated, sa.truncated, &oa),
                    (sb.reward, sb.terminated, sb.truncated, &ob),
                    "{id} step {t}"
                );
                if sa.terminated || sa.truncated {
                    a.reset(None, None, &mut oa).unwrap();
                    b.reset(None, None, &mut ob).unwrap();
                    assert_eq!(oa, ob, "{id} reset after step {t}");
                }
            }
        }
    }

    #[test]
    fn make_errors_name_the_problem() {
        let e = make("CartPole-v9", &Kwargs::new())
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("CartPole-v9") && e.contains("CartPole-v1"),
            "{e}"
        );
        let kw: Kwargs = [("colour".to_string(), serde_json::json!(1))]
            .into_iter()
            .collect();
        let e = make("CartPole-v1", &kw).err().unwrap().to_string();
        assert!(e.contains("colour"), "{e}");
        let kw: Kwargs = [("is_slippery".to_string(), serde_json::json!("yes"))]
            .into_iter()
            .collect();
        let e = make("FrozenLake-v1", &kw).err().unwrap().to_string();
        assert!(e.contains("is_slippery"), "{e}");
    }

    #[test]
    fn novel_variants_zero_velocities_and_keep_shape() {
        let mut env = make("CartPoleNoVel-v1", &Kwargs::new()).unwrap();
        let mut obs = vec![9.0; 4];
        env.reset(Some(0), None, &mut obs).unwrap();
        for _ in 0..5 {
            env.step(&[1.0], &mut obs).unwrap();
            assert_eq!((obs[1], obs[3]), (0.0, 0.0));
            assert!(obs[0] != 0.0 && obs[2] != 0.0);
        }
    }

    #[test]
    fn taxi_and_cliff_semantics() {
        let mut cliff = toy_text::cliff_walking();
        let mut obs = [0.0f32];
        cliff.reset(Some(0), None, &mut obs).unwrap();
        assert_eq!(obs[0], 36.0);
        let s = cliff.step(&[1.0], &mut obs).unwrap(); // RIGHT into the cliff
        assert_eq!((s.reward, s.terminated, obs[0]), (-100.0, false, 36.0));
        let mut taxi = toy_text::taxi();
        taxi.reset(Some(3), None, &mut obs).unwrap();
        let s0 = obs[0] as usize;
        let (pass, dest) = ((s0 / 4) % 5, s0 % 4);
        assert!(pass < 4 && pass != dest);
        let s = taxi.step(&[5.0], &mut obs).unwrap(); // illegal dropoff
        assert_eq!(s.reward, -10.0);
    }
}
