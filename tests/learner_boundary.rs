//! Every algorithm of `rl_training::ALGORITHMS` through the traits only: build the learner from a
//! config, collect one batch with an acting side made from the learner's weights alone,
//! update through `Learner`, check that an acting side given the new weights acts as the
//! learner's policy does, and round-trip weights and learner state (a restored learner's next
//! update equals the original's, bit for bit).

mod common;

use rl_training::core::Rng;
use rl_training::core::algorithm::{Learner, LearnerState, Progress};
use rl_training::core::batch::{flatten_batch, tensor2};
use rl_training::core::burn::module::Module;
use rl_training::core::burn::tensor::Device;
use rl_training::core::checkpoint::{read_checkpoint, write_checkpoint};
use rl_training::core::config::{AlgoConfig, RunConfig};
use rl_training::core::params::{TensorMap, load_module_tensors};
use rl_training::core::{Env, Space};
use rl_training::evolution::{Evaluated, EvolutionCore, Strategy};
use rl_training::off_policy::{ActMode, Collector, Feed, OffPolicyActor, OffPolicyLearner};
use rl_training::offline::{OfflineCore, OfflineLearner};
use rl_training::on_policy::actor_learner::{ActorLearner, EnvRunner};
use rl_training::on_policy::rollout::{RolloutCollector, RolloutPolicy};
use rl_training::on_policy::{ActorCritic, BuildContext, OnPolicyConfig, OnPolicyLearner};

fn run_of(name: &str) -> RunConfig {
    RunConfig::from_yaml(&common::tiny(name, 256), &[], name).unwrap()
}

fn spaces(run: &RunConfig) -> (Space, Space) {
    let env = rl_training::make_training_env(run).unwrap();
    (env.observation_space().clone(), env.action_space().clone())
}

fn progress(num_timesteps: u64) -> Progress {
    Progress {
        num_timesteps,
        total_timesteps: 256,
        iteration: 1,
    }
}

/// Updates `learner` on `batch`: finite metrics, changed weights.
fn update<L: Learner>(name: &str, learner: &mut L, batch: &L::Batch) {
    let before = learner.weights();
    let m = learner.update(batch, &progress(64)).unwrap();
    assert!(!m.is_empty(), "{name}: an update reports metrics");
    assert!(m.values().all(|v| v.is_finite()), "{name}: {m:?}");
    assert_ne!(
        learner.weights(),
        before,
        "{name}: the update changed the weights"
    );
}

/// `set_weights(weights())` reproduces the weights; the saved state, through a checkpoint
/// directory, restores a learner whose next update equals the original's.
fn round_trips<L: Learner>(name: &str, learner: &mut L, mut a: L, mut b: L, batch: &L::Batch) {
    a.set_weights(&learner.weights()).unwrap();
    assert_eq!(a.weights(), learner.weights(), "{name}: weights round trip");
    let LearnerState { mut files, entries } = learner.save_state();
    files.push(("state.json", serde_json::to_vec(&entries).unwrap()));
    let dir = std::env::temp_dir().join(format!("rl-boundary-{}-{name}", std::process::id()));
    write_checkpoint(&dir, name, &files).unwrap();
    b.load_state(&read_checkpoint(&dir).unwrap(), &entries)
        .unwrap();
    assert_eq!(
        b.weights(),
        learner.weights(),
        "{name}: state restores the weights"
    );
    learner.update(batch, &progress(128)).unwrap();
    b.update(batch, &progress(128)).unwrap();
    assert_eq!(
        b.weights(),
        learner.weights(),
        "{name}: a restored learner updates as the original"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// Deterministic actions of an on-policy policy for `obs` (`[n × d]` flat).
fn modes(policy: &impl RolloutPolicy, obs: &[f32], n: usize, dim: usize) -> Vec<f32> {
    let x = tensor2(obs.to_vec(), n, dim, &Device::flex());
    let mut state = vec![0.0; n * policy.state_dim()];
    policy.sample_actions(x, &mut state, &vec![1.0; n], &mut Rng::seed_from(0), true)
}

fn on_policy<L: OnPolicyLearner>(name: &str) {
    let run = run_of(name);
    let cfg = L::Config::from_kwargs(&run.algo_kwargs).unwrap();
    let (o, a) = spaces(&run);
    let dev = Device::flex().autodiff();
    let infer = dev.clone().inner();
    let learner = |seed: u64| {
        let p = L::make_policy(&cfg, &o, &a, &mut Rng::for_stream(seed, "init"), &dev).unwrap();
        let ctx = BuildContext {
            device: dev.clone(),
            run: &run,
            spaces: (&o, &a),
        };
        L::build(cfg.clone(), p, &ctx).unwrap()
    };
    // The acting side from weights alone: a policy of the config's shape, other initial
    // weights, then the learner's.
    let acting = |w: &TensorMap| {
        let p = L::make_policy(&cfg, &o, &a, &mut Rng::seed_from(99), &dev).unwrap();
        load_module_tensors(p, w, "weights", &dev).unwrap().valid()
    };
    let mut l = learner(1);
    let s = cfg.rollout_settings();
    let venv =
        rl_training::core::agent::make_vec_env(&run, &rl_training::make_training_env).unwrap();
    let mut collector = RolloutCollector::new(venv, s.n_steps, 5).unwrap();
    let policy = acting(&l.weights());
    collector.set_state_dim(policy.state_dim());
    let (g, lambda) = (s.gamma as f32, s.gae_lambda as f32);
    let freq = s.sde_sample_freq.unwrap_or(-1);
    let mut rng = Rng::seed_from(3);
    collector
        .collect(&policy, &infer, &mut rng, g, lambda, freq)
        .unwrap();
    let batch = collector.buffer.clone();
    update(name, &mut l, &batch);
    let (n, d) = (batch.len(), batch.obs_dim);
    assert_eq!(
        modes(&acting(&l.weights()), &batch.obs, n, d),
        modes(&l.policy().valid(), &batch.obs, n, d),
        "{name}: the acting side with the new weights acts as the learner's policy"
    );
    round_trips(name, &mut l, learner(2), learner(3), &batch);
}

fn actor_learner<L: ActorLearner>(name: &str) {
    let run = run_of(name);
    let cfg = L::Config::from_kwargs(&run.algo_kwargs).unwrap();
    let (o, a) = spaces(&run);
    let dev = Device::flex().autodiff();
    let infer = dev.clone().inner();
    let learner = || {
        let p = L::make_policy(&cfg, (&o, &a), &mut Rng::for_stream(1, "init"), &dev).unwrap();
        let ctx = BuildContext {
            device: dev.clone(),
            run: &run,
            spaces: (&o, &a),
        };
        L::build(cfg.clone(), p, &ctx).unwrap()
    };
    let template =
        |seed: u64| L::make_policy(&cfg, (&o, &a), &mut Rng::seed_from(seed), &infer).unwrap();
    let mut l = learner();
    // A runner holds a policy of the config's shape and acts with published weights.
    let settings = L::settings(&cfg).runner;
    let mut runner = EnvRunner::new(
        &run,
        &rl_training::make_training_env,
        settings,
        0,
        template(99),
        infer.clone(),
    )
    .unwrap();
    use rl_training::core::actor_learner::{Runner, Versioned};
    let published = Versioned {
        version: 0,
        weights: l.weights(),
    };
    let (_, batch) = runner.collect(&published).unwrap();
    update(name, &mut l, &batch);
    let acting: ActorCritic = load_module_tensors(template(7), &l.weights(), "w", &infer).unwrap();
    let (n, d) = (batch.buffer.len(), batch.buffer.obs_dim);
    assert_eq!(
        modes(&acting, &batch.buffer.obs, n, d),
        modes(&l.policy().valid(), &batch.buffer.obs, n, d),
        "{name}: a runner's policy with the new weights acts as the learner's"
    );
    round_trips(name, &mut l, learner(), learner(), &batch);
}

fn off_policy<L: OffPolicyLearner>(name: &str) {
    let run = run_of(name);
    let cfg = L::Config::from_kwargs(&run.algo_kwargs).unwrap();
    let (o, a) = spaces(&run);
    let dev = Device::flex().autodiff();
    let infer = dev.clone().inner();
    let learner = || L::build(cfg.clone(), &run, (&o, &a), dev.clone()).unwrap();
    let mut l = learner();
    let s = L::settings(&cfg);
    let actor = L::actor_from_weights(&cfg, (&o, &a), &l.weights(), &infer).unwrap();
    let venv =
        rl_training::core::agent::make_vec_env(&run, &rl_training::make_training_env).unwrap();
    let mut collector = Collector::new(venv, 5).unwrap();
    let act_dim = L::stored_action_dim(&a).unwrap();
    let mut replay = s.replay.build(run.n_envs, o.flat_dim(), act_dim);
    let mut rng = Rng::seed_from(3);
    for _ in 0..32 {
        let obs = collector.obs().to_vec();
        let n = collector.num_envs();
        let (env_a, stored) = actor.act(&obs, n, &mut rng, ActMode::Explore, &progress(0));
        collector.step(&env_a, &stored, &mut replay).unwrap();
    }
    let batch = match s.feed {
        Feed::Sampled => replay.sample(s.frequency.batch_size, s.gamma as f32, 1.0, &mut rng),
        Feed::WholeReplay => replay.chronological(),
    };
    update(name, &mut l, &batch);
    let n = batch.len();
    let act = |actor: &L::Actor| {
        let p = progress(64);
        actor.act(
            &batch.obs,
            n,
            &mut Rng::seed_from(0),
            ActMode::Deterministic,
            &p,
        )
    };
    let rebuilt = L::actor_from_weights(&cfg, (&o, &a), &l.weights(), &infer).unwrap();
    assert_eq!(
        act(&rebuilt),
        act(&l.actor()),
        "{name}: an actor from the new weights acts as the learner's"
    );
    round_trips(name, &mut l, learner(), learner(), &batch);
}

fn offline<L: OfflineLearner>(name: &str) {
    let run = run_of(name);
    let cfg = L::Config::from_kwargs(&run.algo_kwargs).unwrap();
    let (o, a) = spaces(&run);
    let dev = Device::flex().autodiff();
    let learner = || L::build(cfg.clone(), &run, (&o, &a), dev.clone()).unwrap();
    let mut l = learner();
    let s = L::settings(&cfg);
    let mut data =
        OfflineCore::new(&run, &rl_training::make_training_env, None, s.returns_gamma).unwrap();
    let batch = data.batch(s.batch_size).unwrap();
    update(name, &mut l, &batch);
    // Offline policies act only in `predict`: a learner given the weights acts the same.
    let mut acting = learner();
    acting.set_weights(&l.weights()).unwrap();
    let mut flat = Vec::new();
    flatten_batch(&o, &batch.data.obs, &mut flat);
    let n = batch.data.len();
    assert_eq!(
        acting.act(flat.clone(), n, &mut Rng::seed_from(0), true),
        l.act(flat, n, &mut Rng::seed_from(0), true),
        "{name}: a learner given the new weights acts as the original"
    );
    round_trips(name, &mut l, learner(), learner(), &batch);
}

fn evolution<L: Strategy>(name: &str) {
    let run = run_of(name);
    let cfg = L::Config::from_kwargs(&run.algo_kwargs).unwrap();
    let settings = L::core_settings(&cfg);
    let (mut core, params) =
        EvolutionCore::new(&run, &rl_training::make_training_env, &settings).unwrap();
    let noise = core.noise.clone();
    let learner = || L::build(cfg.clone(), params.clone(), noise.clone());
    let mut l = learner();
    // The workers act with θ from the weights alone.
    let theta = |w: &TensorMap| w.clone().take("theta", &[params.len()], "w").unwrap();
    let pop = L::population(&cfg);
    let offsets = core.sample_offsets(pop.directions, params.len());
    let returns = core
        .evaluate_perturbations(&theta(&l.weights()), &offsets, pop.sigma, pop.antithetic, 1)
        .unwrap();
    let batch = Evaluated { offsets, returns };
    update(name, &mut l, &batch);
    let obs = vec![0.1; core.status.obs_space.raw_dim() * 3];
    assert_eq!(
        core.predict(&theta(&l.weights()), &obs).unwrap(),
        core.predict(l.params(), &obs).unwrap(),
        "{name}: parameters from the new weights act as the learner's"
    );
    let (a, b) = (learner(), learner());
    round_trips(name, &mut l, a, b, &batch);
}

#[test]
fn every_algorithm_through_the_traits() {
    for &name in rl_training::ALGORITHMS {
        match name {
            "ppo" => on_policy::<rl_training::ppo::PpoLearner>(name),
            "a2c" => on_policy::<rl_training::a2c::A2cLearner>(name),
            "trpo" => on_policy::<rl_training::trpo::TrpoLearner>(name),
            "ppg" => on_policy::<rl_training::ppg::PpgLearner>(name),
            "recurrent_ppo" => on_policy::<rl_training::recurrent_ppo::RecurrentPpoLearner>(name),
            "gail" => on_policy::<rl_training::gail::GailLearner>(name),
            "impala" => actor_learner::<rl_training::impala::ImpalaLearner>(name),
            "appo" => actor_learner::<rl_training::appo::AppoLearner>(name),
            "dqn" => off_policy::<rl_training::dqn::DqnLearner>(name),
            "sac" => off_policy::<rl_training::sac::SacLearner>(name),
            "awr" => off_policy::<rl_training::awr::AwrLearner>(name),
            "bc" => offline::<rl_training::bc::BcLearner>(name),
            "marwil" => offline::<rl_training::marwil::MarwilLearner>(name),
            "cql" => offline::<rl_training::cql::CqlLearner>(name),
            "es" => evolution::<rl_training::es::EsLearner>(name),
            "ars" => evolution::<rl_training::ars::ArsLearner>(name),
            "dreamerv3" => model_based(name),
            other => panic!("{other} is in rl_training::ALGORITHMS but not checked here"),
        }
    }
}

/// DreamerV3: a batch of windows from a sequence replay filled by an acting side made from
/// the learner's weights alone (its world model and actor).
fn model_based(name: &str) {
    use rl_training::dreamerv3::agent::{ActState, act};
    use rl_training::dreamerv3::{DreamerV3Config, DreamerV3Learner, Pick};
    use rl_training::model_based::{SequenceReplay, StepRow};
    let run = run_of(name);
    let cfg = DreamerV3Config::from_kwargs(&run.algo_kwargs).unwrap();
    let (o, a) = spaces(&run);
    let Space::Discrete { n: k, .. } = a else {
        panic!("{name}: the tiny config has Discrete actions")
    };
    let dev = Device::flex().autodiff();
    let learner =
        |seed: u64| DreamerV3Learner::new(cfg.clone(), o.flat_dim(), (k, false), seed, &dev);
    let acting = |w: &TensorMap| {
        let mut side = learner(99);
        side.set_weights(w).unwrap();
        side
    };
    let mut l = learner(1);
    let side = acting(&l.weights());
    let mut env = rl_training::make_training_env(&run).unwrap();
    let mut obs = vec![0.0; o.raw_dim()];
    env.reset(Some(5), None, &mut obs).unwrap();
    let (mut state, mut rng) = (ActState::fresh(1, &side, k), Rng::seed_from(3));
    let mut replay = SequenceReplay::new(1000, 1, o.flat_dim(), k);
    let mut flat = Vec::new();
    for _ in 0..64 {
        flatten_batch(&o, &obs, &mut flat);
        let (first, reward) = (state.is_first[0] == 1.0, state.reward[0]);
        let action = act(&side, &mut state, &flat, &mut rng, Pick::Sample);
        replay.push(
            0,
            StepRow {
                obs: &flat,
                action: &action,
                reward,
                is_first: first,
                is_terminated: false,
            },
        );
        let chosen = action.iter().position(|&x| x == 1.0).unwrap();
        let s = env.step(&[chosen as f32], &mut obs).unwrap();
        let done = s.terminated || s.truncated;
        if done {
            env.reset(None, None, &mut obs).unwrap();
        }
        (state.is_first[0], state.reward[0]) = (done as u8 as f32, s.reward as f32);
    }
    let (b, t) = (cfg.batch_size_b, cfg.batch_length_t);
    let batch = replay.sample(b, t, &mut rng).unwrap();
    update(name, &mut l, &batch);
    flatten_batch(&o, &obs, &mut flat);
    let modes = |side: &DreamerV3Learner| {
        let mut s = ActState::fresh(1, side, k);
        act(side, &mut s, &flat, &mut Rng::seed_from(0), Pick::Mode)
    };
    assert_eq!(
        modes(&acting(&l.weights())),
        modes(&l),
        "{name}: an acting side with the new weights acts as the learner"
    );
    round_trips(name, &mut l, learner(2), learner(3), &batch);
}
