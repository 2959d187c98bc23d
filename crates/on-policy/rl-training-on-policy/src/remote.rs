//! Runners in other processes, over the NATS broker (rl-training-broker), for the actor-learner
//! algorithms (IMPALA, APPO) and the synchronous on-policy ones (PPO, A2C, TRPO with
//! `num_env_runners`): [`RunnerBatch`] as bytes, the learner's side ([`RemoteRunners`]: the
//! run's info posted for runners, batches from the work queue, weights into the bucket) and
//! a runner process's loop ([`serve_runner`], [`serve_sync_runner`]).

use crate::actor_learner::{ActorLearner, EnvRunner, RunnerBatch};
use crate::agent::{OnPolicyConfig, OnPolicyLearner};
use crate::sync_runners::{runner_settings, sync_queue_size};
use rl_training_broker::{Broker, Reader, ServeSummary, Wire, Writer, serve_batches};
use rl_training_core::Space;
use rl_training_core::agent::EnvMaker;
use rl_training_core::buffers::RolloutBuffer;
use rl_training_core::burn::module::Module;
use rl_training_core::burn::tensor::Device;
use rl_training_core::config::{AlgoConfig, ConfigError, RunConfig};
use rl_training_core::{RlError, Rng};
use std::sync::atomic::AtomicBool;

/// Leading bytes of an encoded [`RunnerBatch`] and its format version.
const MAGIC: &[u8; 4] = b"RLRB";
const FORMAT: u16 = 1;

/// The learner's side of runner processes sending rollouts.
pub type RemoteRunners = rl_training_broker::RemoteRunners<RunnerBatch>;

impl Wire for RunnerBatch {
    fn encode(&self) -> Vec<u8> {
        let b = &self.buffer;
        let mut w = Writer::with_header(
            MAGIC,
            FORMAT,
            64 + 4 * (b.obs.len() * 2 + b.actions.len() + b.rewards.len() * 8),
        );
        for d in [b.n_steps, b.n_envs, b.obs_dim, b.act_dim, b.state_dim] {
            w.u64(d as u64);
        }
        for v in [
            &b.obs,
            &b.actions,
            &b.rewards,
            &b.episode_starts,
            &b.values,
            &b.log_probs,
            &b.advantages,
            &b.returns,
            &b.next_obs,
            &b.bootstraps,
            &b.last_values,
            &b.last_dones,
            &b.states,
            &self.last_obs,
            &self.last_dones,
        ] {
            w.f32s(v);
        }
        w.u64(self.chains.len() as u64);
        for &c in &self.chains {
            w.u64(c as u64);
        }
        w.episodes(&self.episodes);
        w.f64(self.seconds);
        w.0
    }

    fn decode(bytes: &[u8]) -> Result<Self, String> {
        let mut r = Reader::with_header(bytes, MAGIC, FORMAT, "a runner batch")?;
        let n_steps = r.usize("n_steps")?;
        let n_envs = r.usize("n_envs")?;
        let obs_dim = r.usize("obs_dim")?;
        let act_dim = r.usize("act_dim")?;
        let state_dim = r.usize("state_dim")?;
        let n = n_steps
            .checked_mul(n_envs)
            .ok_or("n_steps × n_envs overflows")?;
        let times = |k: usize, field: &str| {
            n.checked_mul(k)
                .ok_or_else(|| format!("{field}: size overflows"))
        };
        let mut b = RolloutBuffer::new(0, 0, obs_dim, act_dim);
        (b.n_steps, b.n_envs, b.state_dim) = (n_steps, n_envs, state_dim);
        b.obs = r.f32s("obs", Some(times(obs_dim, "obs")?))?;
        b.actions = r.f32s("actions", Some(times(act_dim, "actions")?))?;
        b.rewards = r.f32s("rewards", Some(n))?;
        b.episode_starts = r.f32s("episode_starts", Some(n))?;
        b.values = r.f32s("values", Some(n))?;
        b.log_probs = r.f32s("log_probs", Some(n))?;
        b.advantages = r.f32s("advantages", Some(n))?;
        b.returns = r.f32s("returns", Some(n))?;
        b.next_obs = r.f32s("next_obs", Some(times(obs_dim, "next_obs")?))?;
        b.bootstraps = r.f32s("bootstraps", Some(n))?;
        b.last_values = r.f32s("last_values", None)?;
        b.last_dones = r.f32s("last_dones", None)?;
        b.states = r.f32s("states", Some(times(state_dim, "states")?))?;
        let last_obs = r.f32s("last_obs", None)?;
        let last_dones = r.f32s("batch last_dones", None)?;
        if obs_dim > 0 && last_dones.len().checked_mul(obs_dim) != Some(last_obs.len()) {
            return Err(format!(
                "last_obs: {} values for {} rows of {obs_dim}",
                last_obs.len(),
                last_dones.len()
            ));
        }
        let n_chains = r.usize("chains")?;
        let mut chains = Vec::with_capacity(n_chains.min(bytes.len() / 8));
        for _ in 0..n_chains {
            chains.push(r.usize("chains")?);
        }
        // Checked: the lengths come from another process and may overflow a plain sum.
        let chain_rows = chains.iter().try_fold(0usize, |t, &c| t.checked_add(c));
        if !chains.is_empty() && chain_rows != Some(n) {
            return Err(match chain_rows {
                Some(rows) => format!("chains: lengths sum to {rows}, expected {n} rows"),
                None => format!("chains: lengths overflow, expected a sum of {n} rows"),
            });
        }
        let episodes = r.episodes()?;
        let seconds = r.f64("seconds")?;
        r.finish()?;
        Ok(RunnerBatch {
            buffer: b,
            last_obs,
            last_dones,
            chains,
            episodes,
            seconds,
        })
    }
}

/// A runner process's loop for the run `broker` belongs to, whose config `run` came from the
/// run's [`RunInfo`](rl_training_broker::RunInfo): claims a runner id, waits for the learner's
/// weights, then collects and sends batches (acting with the latest weights) until the
/// learner posts that the run is over, `stop` is set, or the broker refuses a batch for good
/// ([`serve_batches`]).
pub fn serve_runner<L: ActorLearner>(
    broker: &Broker,
    run: &RunConfig,
    make_env: EnvMaker<'_>,
    device: &Device,
    stop: &AtomicBool,
) -> Result<ServeSummary, RlError> {
    let cfg = L::Config::from_kwargs(&run.algo_kwargs).map_err(RlError::Config)?;
    let settings = L::settings(&cfg);
    let (obs_space, act_space) = spaces_of(run, make_env)?;
    // The architecture only: the weights come from the learner.
    let mut rng = Rng::for_stream(run.seed, "init");
    let autodiff = device.clone().autodiff();
    let policy = L::make_policy(&cfg, (&obs_space, &act_space), &mut rng, &autodiff)?.valid();
    serve_batches(broker, settings.learner_queue_size, false, stop, |id| {
        EnvRunner::new(
            run,
            make_env,
            settings.runner,
            id as usize,
            policy,
            device.clone(),
        )
    })
}

/// [`serve_runner`] for a synchronous on-policy run (PPO, A2C, TRPO with `num_env_runners`):
/// one rollout of the runner's share of the envs per published version, then a wait for the
/// next version.
pub fn serve_sync_runner<L: OnPolicyLearner>(
    broker: &Broker,
    run: &RunConfig,
    make_env: EnvMaker<'_>,
    device: &Device,
    stop: &AtomicBool,
) -> Result<ServeSummary, RlError> {
    let cfg = L::Config::from_kwargs(&run.algo_kwargs).map_err(RlError::Config)?;
    let rs = cfg.rollout_settings();
    let settings = runner_settings(&rs, run)?;
    let (obs_space, act_space) = spaces_of(run, make_env)?;
    let mut rng = Rng::for_stream(run.seed, "init");
    let autodiff = device.clone().autodiff();
    let policy = L::make_policy(&cfg, &obs_space, &act_space, &mut rng, &autodiff)
        .map_err(|e| RlError::Config(ConfigError::new("policy", e)))?
        .valid();
    let queue = sync_queue_size(rs.num_env_runners);
    serve_batches(broker, queue, true, stop, |id| {
        EnvRunner::new(run, make_env, settings, id as usize, policy, device.clone())
    })
}

/// The spaces of `run`'s env.
fn spaces_of(run: &RunConfig, make_env: EnvMaker<'_>) -> Result<(Space, Space), RlError> {
    let probe = make_env(run)?;
    Ok((
        probe.observation_space().clone(),
        probe.action_space().clone(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rl_training_core::vec_env::EpisodeStats;

    fn batch() -> RunnerBatch {
        let mut b = RolloutBuffer::new(3, 2, 4, 1);
        for (i, x) in b.obs.iter_mut().enumerate() {
            *x = i as f32 * 0.5;
        }
        b.rewards = vec![1.0, 0.0, 1.0, 1.0, -1.0, 2.5];
        b.log_probs = vec![-0.1, -0.2, -0.3, -0.4, -0.5, -0.6];
        b.last_values = vec![0.25, 0.75];
        RunnerBatch {
            buffer: b,
            last_obs: vec![9.0; 8],
            last_dones: vec![0.0, 1.0],
            chains: Vec::new(),
            episodes: vec![EpisodeStats {
                env: 1,
                ret: 17.0,
                len: 17,
            }],
            seconds: 0.125,
        }
    }

    #[test]
    fn a_runner_batch_survives_the_wire_bit_for_bit() {
        let b = batch();
        let back = RunnerBatch::decode(&b.encode()).unwrap();
        assert_eq!(back.buffer.obs, b.buffer.obs);
        assert_eq!(back.buffer.rewards, b.buffer.rewards);
        assert_eq!(back.buffer.log_probs, b.buffer.log_probs);
        assert_eq!(back.buffer.last_values, b.buffer.last_values);
        assert_eq!(
            (back.buffer.n_steps, back.buffer.n_envs, back.buffer.obs_dim),
            (3, 2, 4)
        );
        assert_eq!(back.buffer.len(), 6);
        assert_eq!(back.last_obs, b.last_obs);
        assert_eq!(back.last_dones, b.last_dones);
        assert_eq!(back.episodes, b.episodes);
        assert_eq!(back.seconds, 0.125);
        // Encoding the decoded batch gives the same bytes: nothing was lost or reordered.
        assert_eq!(back.encode(), b.encode());
    }

    #[test]
    fn the_fuzz_seed_is_a_batch_that_encodes_back_to_its_bytes() {
        let seed = include_bytes!("../../../../fuzz/corpus/broker/cartpole_2x1.bin");
        let b = RunnerBatch::decode(seed).unwrap();
        assert_eq!(
            (b.buffer.n_steps, b.buffer.n_envs, b.buffer.obs_dim),
            (2, 1, 2)
        );
        assert_eq!(b.episodes.len(), 1);
        assert_eq!(b.encode(), seed.to_vec());
    }

    #[test]
    fn a_malformed_batch_is_an_error_naming_what_was_expected() {
        let bytes = batch().encode();
        let e = RunnerBatch::decode(&bytes[..bytes.len() - 3]).unwrap_err();
        assert!(
            e.contains("seconds") && e.contains("expected 8 more bytes"),
            "{e}"
        );
        let e = RunnerBatch::decode(b"JUNKJUNK").unwrap_err();
        assert!(e.contains("RLRB"), "{e}");
        let mut more = bytes.clone();
        more.push(0);
        assert!(RunnerBatch::decode(&more).unwrap_err().contains("after"));
        // A count that promises more values than there are bytes is refused before any
        // allocation: n_steps claims 2^40 rows.
        let mut huge = bytes.clone();
        huge[6..14].copy_from_slice(&(1u64 << 40).to_le_bytes());
        let e = RunnerBatch::decode(&huge).unwrap_err();
        assert!(e.contains("obs"), "{e}");
    }

    #[test]
    fn chain_lengths_that_overflow_are_an_error_not_a_panic() {
        // Found by the broker fuzz target (an unoptimized build checks overflow): two chain
        // lengths whose sum wraps around.
        let mut b = batch();
        b.chains = vec![usize::MAX, 7];
        let e = RunnerBatch::decode(&b.encode()).unwrap_err();
        assert!(e.contains("chains") && e.contains("overflow"), "{e}");
        b.chains = vec![2, 3];
        let e = RunnerBatch::decode(&b.encode()).unwrap_err();
        assert!(e.contains("sum to 5, expected 6"), "{e}");
    }
}
