//! Multi-agent IMPALA (the multi-agent shell as the runner of an `ImpalaLearner` per policy):
//! the chains each policy receives trace to the rollout's own returns before any update,
//! bit-identical resume, and the runner key that does not apply refused by name. The
//! learning test is in `learning.rs`.

use rl_training_core::algorithm::{Learner, LearnerState, Progress, RlError};
use rl_training_core::batch::{host, tensor2};
use rl_training_core::burn::module::Module;
use rl_training_core::burn::tensor::Device;
use rl_training_core::checkpoint::Checkpoint;
use rl_training_core::config::RunConfig;
use rl_training_core::logger::Metrics;
use rl_training_core::multi_agent::MultiAgentAlgorithm;
use rl_training_core::params::TensorMap;
use rl_training_envs::testing;
use rl_training_impala::{ImpalaConfig, ImpalaLearner, MultiAgentImpala};
use rl_training_on_policy::actor_learner::{
    ActorLearner, LearnerSettings, RunnerBatch, batch_vtrace,
};
use rl_training_on_policy::multi_agent::{ActorLearnerPolicy, MultiAgentOnPolicy};
use rl_training_on_policy::{ActorCritic, BuildContext, PolicyKwargs};
use serde_json::{Map, Value};
use std::sync::{Arc, Mutex};

fn config(overrides: &[String]) -> RunConfig {
    testing::example_config(
        env!("CARGO_MANIFEST_DIR"),
        "impala_multi_agent_cartpole.yaml",
        overrides,
    )
}

/// (rows, largest |v_s − GAE(λ = 1) return|) of each batch checked.
type Seen = Arc<Mutex<Vec<(usize, f64)>>>;

/// IMPALA's learner, checking every batch it gets before updating on it.
struct Checked {
    inner: ImpalaLearner,
    seen: Seen,
}

/// Where [`Checked`] learners built by the test report (the shell builds them).
static SEEN: Mutex<Option<Seen>> = Mutex::new(None);

impl Learner for Checked {
    type Batch = RunnerBatch;
    /// With the behaviour policy as the target (no update since the rollout), V-trace's
    /// targets over the chains are the discounted returns the shell computed row by row
    /// (its GAE with λ = 1, bootstrapped from the same values at the same cuts).
    fn update(&mut self, batch: &RunnerBatch, progress: &Progress) -> Result<Metrics, RlError> {
        let buf = &batch.buffer;
        let policy = self.inner.policy().valid();
        let n = batch.bootstrap_rows();
        let dev = Device::flex();
        let boot = host(policy.values(tensor2(batch.last_obs.clone(), n, buf.obs_dim, &dev)));
        let vt = batch_vtrace(batch, &buf.log_probs, &buf.values, &boot, 0.99, 1.0, 1.0);
        let worst = vt
            .vs
            .iter()
            .zip(&buf.returns)
            .map(|(v, r)| (v - *r as f64).abs())
            .fold(0.0, f64::max);
        assert_eq!(batch.chains.iter().sum::<usize>(), buf.len());
        assert_eq!(batch.last_obs.len(), n * buf.obs_dim);
        self.seen.lock().unwrap().push((buf.len(), worst));
        self.inner.update(batch, progress)
    }
    fn weights(&self) -> TensorMap {
        self.inner.weights()
    }
    fn set_weights(&mut self, w: &TensorMap) -> Result<(), RlError> {
        self.inner.set_weights(w)
    }
    fn save_state(&self) -> LearnerState {
        self.inner.save_state()
    }
    fn load_state(&mut self, ck: &Checkpoint, e: &Map<String, Value>) -> Result<(), RlError> {
        self.inner.load_state(ck, e)
    }
}

impl ActorLearner for Checked {
    type Config = ImpalaConfig;
    const NAME: &'static str = "impala";
    fn settings(cfg: &ImpalaConfig) -> LearnerSettings {
        ImpalaLearner::settings(cfg)
    }
    fn policy_kwargs(cfg: &ImpalaConfig) -> &PolicyKwargs {
        ImpalaLearner::policy_kwargs(cfg)
    }
    fn build(cfg: ImpalaConfig, policy: ActorCritic, ctx: &BuildContext) -> Result<Self, RlError> {
        let seen = SEEN.lock().unwrap().clone().expect("set by the test");
        let inner = ImpalaLearner::build(cfg, policy, ctx)?;
        Ok(Self { inner, seen })
    }
    fn config(&self) -> &ImpalaConfig {
        self.inner.config()
    }
    fn policy(&self) -> &ActorCritic {
        self.inner.policy()
    }
    fn iteration_metrics(&mut self, progress: &Progress, m: &mut Metrics) {
        self.inner.iteration_metrics(progress, m)
    }
}

#[test]
fn each_policy_gets_its_agents_chains_and_they_trace_to_the_rollout_returns() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    *SEEN.lock().unwrap() = Some(seen.clone());
    // gamma as the check's; n_steps long enough for agents to fall and wait mid-rollout.
    let run = config(&[
        "algo_kwargs.gamma=0.99".into(),
        "algo_kwargs.n_steps=64".into(),
    ]);
    let mut ma = MultiAgentOnPolicy::<ActorLearnerPolicy<Checked>>::new(
        &run,
        &rl_training_envs::make_multi_agent_env,
        &rl_training_envs::multi_agent::frozen,
        &Device::flex(),
    )
    .unwrap();
    let mut rows = 0.0;
    for _ in 0..3 {
        let m = ma.train().unwrap();
        rows += m["policies/p0/rows"] + m["policies/p1/rows"];
        assert!(m.contains_key("policies/p0/losses/mean_clipped_rho"));
        assert!(m.contains_key("policies/p1/charts/learning_rate"));
    }
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 6, "one batch per policy and iteration");
    assert_eq!(seen.iter().map(|s| s.0).sum::<usize>() as f64, rows);
    for (len, worst) in seen.iter() {
        assert!(*worst < 1e-3, "{len} rows: |v_s − return| up to {worst}");
    }
}

fn build(run: &RunConfig) -> Result<MultiAgentImpala, RlError> {
    MultiAgentImpala::new(
        run,
        &rl_training_envs::make_multi_agent_env,
        &rl_training_envs::multi_agent::frozen,
        &Device::flex(),
    )
}

#[test]
fn multi_agent_impala_resumes_bit_identically() {
    // Without replay: its batches start empty after a load (as in single-agent runs).
    let run = config(&[]);
    testing::assert_multi_agent_resumes(
        (2, 2),
        || build(&run).unwrap(),
        |d| {
            MultiAgentImpala::load(
                d,
                &rl_training_envs::make_multi_agent_env,
                &rl_training_envs::multi_agent::frozen,
                &Device::flex(),
            )
            .unwrap()
        },
        |ma| {
            ma.learned()
                .values()
                .map(|lp| lp.learner.0.weights().to_bytes())
                .collect()
        },
        "multi-agent IMPALA",
    );
}

#[test]
fn runner_envs_are_refused_naming_the_policy_and_key() {
    let run = config(&["algo_kwargs.num_envs_per_env_runner=4".into()]);
    let e = build(&run).err().expect("refused").to_string();
    assert!(
        e.contains("multi_agent.policies.p0.algo_kwargs.num_envs_per_env_runner"),
        "{e}"
    );
}
