//! The shell around [`DreamerV3Learner`]: envs, the sequence replay, counters, generators,
//! acting with the world model's posterior state and the actor, the updates
//! `training_ratio` asks for, `predict`, checkpoints. [`DreamerV3`] is the [`Algorithm`].
//!
//! One iteration is one vector-env step: each env's observation updates its model state
//! (posterior sample), the actor's sampled action is taken, the step's rows go to the
//! replay; once the replay holds `B·T` rows, updates run so that replayed steps (`B·T` per
//! update) keep pace with `training_ratio` × env steps.

use crate::{DreamerV3Config, DreamerV3Learner, Pick, draw_actions};
use rl_training_core::agent::{
    EnvMaker, checked_flat_obs, iteration_charts, make_vec_env, run_yaml,
};
use rl_training_core::algorithm::{Algorithm, Learner, LearnerState, RunStatus, check_finite};
use rl_training_core::batch::{flatten_batch, host};
use rl_training_core::burn::module::Module;
use rl_training_core::burn::tensor::{Device, Tensor, TensorData};
use rl_training_core::checkpoint::{read_json, read_run, write_checkpoint};
use rl_training_core::config::{AlgoConfig, ConfigError, RunConfig};
use rl_training_core::logger::{Metrics, MetricsMean};
use rl_training_core::vec_env::VecEnv;
use rl_training_core::{RlError, Rng, Space};
use rl_training_model_based::categorical::mode;
use rl_training_model_based::rssm::RssmState;
use rl_training_model_based::{ObsShape, SequenceReplay, StepRow};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::path::Path;
use std::time::Instant;

/// The name in configs and checkpoints.
pub const NAME: &str = "dreamerv3";

/// What acting carries from one step to the next, per env (on the host, so checkpoints hold
/// it as plain numbers).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActState {
    /// Rows (envs).
    pub n: usize,
    /// Deterministic states `[n × gru_units]`.
    pub h: Vec<f32>,
    /// Stochastic states `[n × C·K]`.
    pub z: Vec<f32>,
    /// The last actions taken (one-hot, or Box actions in [−1, 1]) `[n × A]`.
    pub prev_action: Vec<f32>,
    /// 1 where the next observation starts an episode.
    pub is_first: Vec<f32>,
    /// The reward received on arriving at the next observation.
    pub reward: Vec<f32>,
}

impl ActState {
    /// `n` rows at an episode start.
    pub fn fresh(n: usize, learner: &DreamerV3Learner, n_actions: usize) -> Self {
        let dims = learner.config().model_size.dims();
        Self {
            n,
            h: vec![0.0; n * dims.gru_units],
            z: vec![0.0; n * dims.num_categoricals * dims.num_classes],
            prev_action: vec![0.0; n * n_actions],
            is_first: vec![1.0; n],
            reward: vec![0.0; n],
        }
    }
}

/// One acting step of `learner`'s world model and actor for `state`'s rows on `flat_obs`:
/// updates the state, returns the chosen actions `[n × A]` (one-hot, or Box actions in the
/// policy's [−1, 1] scale). The acting side of the shell and of `predict`.
pub fn act(
    learner: &DreamerV3Learner,
    state: &mut ActState,
    flat_obs: &[f32],
    rng: &mut Rng,
    pick: Pick,
) -> Vec<f32> {
    let wm = learner.world_model().valid();
    let actor = learner.actor().valid();
    let dims = learner.config().model_size.dims();
    let (n, c, k) = (state.n, dims.num_categoricals, dims.num_classes);
    let dev = learner.device().clone().inner();
    let t2 = |v: &[f32], cols: usize| {
        Tensor::<2>::from_data(TensorData::new(v.to_vec(), [n, cols]), &dev)
    };
    let obs_dim = flat_obs.len() / n.max(1);
    let a_dim = state.prev_action.len() / n.max(1);
    let prev = RssmState {
        h: t2(&state.h, dims.gru_units),
        z: Tensor::from_data(TensorData::new(state.z.clone(), [n, c, k]), &dev),
    };
    let embed = wm.embed(wm.obs_target(t2(flat_obs, obs_dim)));
    let first = t2(&state.is_first, 1);
    let prev_action = t2(&state.prev_action, a_dim);
    let o = match pick {
        Pick::Sample => wm.rssm.observe(prev, prev_action, embed, first, rng),
        Pick::Mode => wm.rssm.observe_with(prev, prev_action, embed, first, mode),
    };
    let actions = draw_actions(&actor, o.state.features(), rng, pick);
    state.h = host(o.state.h);
    state.z = host(o.state.z);
    state.prev_action.clone_from(&actions);
    actions
}

/// The raw env actions of the policy's actions: a Discrete space's value of each one-hot row
/// (from its `start`), a Box space's bounds for actions in [−1, 1] (clipped first).
fn env_actions(space: &Space, actions: &[f32], k: usize) -> Vec<f32> {
    match space {
        Space::Box { low, high, .. } => actions
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let (lo, hi) = (low[i % k], high[i % k]);
                lo + (a.clamp(-1.0, 1.0) + 1.0) * 0.5 * (hi - lo)
            })
            .collect(),
        _ => {
            let mut out = Vec::with_capacity(actions.len() / k.max(1));
            for row in actions.chunks(k) {
                space.unflatten(row, &mut out);
            }
            out
        }
    }
}

/// Counters, generators, envs and acting state: the shell's part of `state.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct ShellState {
    num_timesteps: u64,
    iterations: u64,
    total_timesteps: u64,
    /// Replayed steps owed to `training_ratio`.
    owed: f64,
    rng_act: Rng,
    rng_replay: Rng,
    rng_predict: Rng,
    last_obs: Vec<f32>,
    envs: Vec<Value>,
    acting: ActState,
}

/// What `state.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SavedState {
    shell: ShellState,
    #[serde(flatten)]
    learner: Map<String, Value>,
}

/// DreamerV3 with its envs, ready to train.
pub struct DreamerV3 {
    run: RunConfig,
    learner: DreamerV3Learner,
    env: VecEnv,
    replay: SequenceReplay,
    status: RunStatus,
    last_obs: Vec<f32>,
    flat: Vec<f32>,
    acting: ActState,
    predict_state: Option<ActState>,
    rng_act: Rng,
    rng_replay: Rng,
    rng_predict: Rng,
    owed: f64,
    n_actions: usize,
}

impl DreamerV3 {
    /// A fresh agent for `run` (its `algo_kwargs` are DreamerV3's) on `device` (gradients on
    /// `device.autodiff()`): Discrete or bounded Box actions, vector or 64×64 image
    /// observations.
    pub fn new(run: &RunConfig, make_env: EnvMaker<'_>, device: &Device) -> Result<Self, RlError> {
        run.refuse_curiosity("DreamerV3 learns from its world model's rewards")?;
        let cfg = DreamerV3Config::from_kwargs(&run.algo_kwargs)?;
        let mut env = make_vec_env(run, make_env)?;
        let obs_space = env.observation_space().clone();
        let act_space = env.action_space().clone();
        let (n_actions, continuous) = match &act_space {
            Space::Discrete { n, .. } => (*n, false),
            Space::Box { low, high, .. } if low.iter().chain(high).all(|v| v.is_finite()) => {
                (low.len(), true)
            }
            other => {
                return Err(RlError::Config(ConfigError::new(
                    &run.env_id,
                    format!(
                        "DreamerV3 takes Discrete or bounded Box action spaces, not {}",
                        other.describe()
                    ),
                )));
            }
        };
        let obs = ObsShape::of_space(&obs_space);
        obs.check()
            .map_err(|m| RlError::Config(ConfigError::new(&run.env_id, m)))?;
        let capacity = cfg.replay_buffer_config.capacity;
        let replay = SequenceReplay::new(capacity, run.n_envs, obs.flat_dim(), n_actions);
        let learner = DreamerV3Learner::new(
            cfg,
            obs,
            (n_actions, continuous),
            run.seed,
            &device.clone().autodiff(),
        );
        let env_seed = Rng::for_stream(run.seed, "env").next_seed() >> 16;
        let last_obs = env.reset(Some(env_seed))?.to_vec();
        let mut flat = Vec::new();
        flatten_batch(&obs_space, &last_obs, &mut flat);
        let acting = ActState::fresh(run.n_envs, &learner, n_actions);
        Ok(Self {
            run: run.clone(),
            status: RunStatus::new(run.total_timesteps, obs_space, act_space),
            learner,
            env,
            replay,
            last_obs,
            flat,
            acting,
            predict_state: None,
            rng_act: Rng::for_stream(run.seed, "policy"),
            rng_replay: Rng::for_stream(run.seed, "replay"),
            rng_predict: Rng::for_stream(run.seed, "predict"),
            owed: 0.0,
            n_actions,
        })
    }

    /// Loads a checkpoint written by [`Algorithm::save`]; `device` overrides the saved one.
    pub fn load(dir: &Path, make_env: EnvMaker<'_>, device: &Device) -> Result<Self, RlError> {
        let (ck, run) = read_run(dir, NAME)?;
        let mut agent = Self::new(&run, make_env, device)?;
        let state: SavedState = read_json(&ck, "state.json")?;
        agent.learner.load_state(&ck, &state.learner)?;
        let s = state.shell;
        if s.last_obs.len() != agent.last_obs.len() || s.acting.n != agent.acting.n {
            return Err(RlError::Config(ConfigError::new(
                ck.path_of("state.json"),
                "holds another number of envs or observation size than the run",
            )));
        }
        agent.env.restore_snapshots(&s.envs)?;
        agent.last_obs = s.last_obs;
        flatten_batch(&agent.status.obs_space, &agent.last_obs, &mut agent.flat);
        agent.acting = s.acting;
        agent.status.num_timesteps = s.num_timesteps;
        agent.status.iterations = s.iterations;
        agent.status.total_timesteps = s.total_timesteps;
        (agent.rng_act, agent.rng_replay, agent.rng_predict) =
            (s.rng_act, s.rng_replay, s.rng_predict);
        agent.owed = s.owed;
        if agent.learner.config().store_buffer_in_checkpoints && ck.has("replay.json") {
            let replay: SequenceReplay = read_json(&ck, "replay.json")?;
            let (od, ad) = (agent.flat.len() / agent.acting.n.max(1), agent.n_actions);
            replay
                .validate(agent.acting.n, od, ad)
                .map_err(|m| RlError::Config(ConfigError::new(ck.path_of("replay.json"), m)))?;
            agent.replay = replay;
        }
        Ok(agent)
    }

    /// The learner (networks, optimizers).
    pub fn learner(&self) -> &DreamerV3Learner {
        &self.learner
    }

    /// The replay.
    pub fn replay(&self) -> &SequenceReplay {
        &self.replay
    }

    /// Stores this step's rows and moves the acting state past the env step.
    fn record_step(&mut self, actions: &[f32]) -> Result<(), RlError> {
        let n = self.acting.n;
        let (od, a) = (self.flat.len() / n, self.n_actions);
        for e in 0..n {
            self.replay.push(
                e,
                StepRow {
                    obs: &self.flat[e * od..(e + 1) * od],
                    action: &actions[e * a..(e + 1) * a],
                    reward: self.acting.reward[e],
                    is_first: self.acting.is_first[e] == 1.0,
                    is_terminated: false,
                },
            );
        }
        self.env
            .step(&env_actions(&self.status.act_space, actions, a))?;
        let zeros = vec![0.0f32; a];
        let mut final_flat = Vec::new();
        for e in 0..n {
            let r = self.env.rewards()[e] as f32;
            let (term, trunc) = (self.env.terminated()[e], self.env.truncated()[e]);
            if term || trunc {
                // The episode's last observation, where no action is taken.
                let space = &self.status.obs_space;
                flatten_batch(space, self.env.final_obs(e), &mut final_flat);
                self.replay.push(
                    e,
                    StepRow {
                        obs: &final_flat,
                        action: &zeros,
                        reward: r,
                        is_first: false,
                        is_terminated: term,
                    },
                );
                (self.acting.is_first[e], self.acting.reward[e]) = (1.0, 0.0);
            } else {
                (self.acting.is_first[e], self.acting.reward[e]) = (0.0, r);
            }
        }
        self.last_obs.clear();
        self.last_obs.extend_from_slice(self.env.obs());
        flatten_batch(&self.status.obs_space, &self.last_obs, &mut self.flat);
        Ok(())
    }
}

impl Algorithm for DreamerV3 {
    fn name(&self) -> &str {
        NAME
    }

    fn status(&self) -> &RunStatus {
        &self.status
    }

    fn status_mut(&mut self) -> &mut RunStatus {
        &mut self.status
    }

    fn env_stats(&self) -> Vec<Value> {
        self.env.save_stats()
    }

    /// One vector-env step with sampled actions, then the updates due.
    fn train(&mut self) -> Result<Metrics, RlError> {
        let t0 = Instant::now();
        let actions = act(
            &self.learner,
            &mut self.acting,
            &self.flat,
            &mut self.rng_act,
            Pick::Sample,
        );
        self.record_step(&actions)?;
        let n = self.acting.n as u64;
        self.status.num_timesteps += n;
        let rollout_seconds = t0.elapsed().as_secs_f64();
        let cfg = self.learner.config();
        let (b, t) = (cfg.batch_size_b, cfg.batch_length_t);
        let mut mean = MetricsMean::default();
        let mut updates = 0;
        if self.replay.len() >= b * t {
            self.owed += n as f64 * cfg.training_ratio;
            let progress = self.status.progress();
            while self.owed >= (b * t) as f64 {
                let Some(batch) = self.replay.sample(b, t, &mut self.rng_replay) else {
                    break;
                };
                mean.add(self.learner.update(&batch, &progress)?);
                self.owed -= (b * t) as f64;
                updates += 1;
            }
        }
        let mut m = mean.mean();
        m.insert("charts/updates".into(), updates as f64);
        let episodes = self.env.drain_episodes();
        iteration_charts(&mut m, &episodes, n, rollout_seconds, t0);
        self.status.iterations += 1;
        check_finite(self.status.num_timesteps, &m)?;
        Ok(m)
    }

    /// The policy's action for each observation row, the model state carried between calls
    /// until [`reset_predict_state`](Algorithm::reset_predict_state): modes when
    /// `deterministic`, samples otherwise.
    fn predict(&mut self, obs: &[f32], deterministic: bool) -> Result<Vec<f32>, RlError> {
        let (flat, n) = checked_flat_obs(&self.status.obs_space, &self.run.env_id, obs)?;
        let mut state = match self.predict_state.take() {
            Some(s) if s.n == n => s,
            _ => ActState::fresh(n, &self.learner, self.n_actions),
        };
        let pick = if deterministic {
            Pick::Mode
        } else {
            Pick::Sample
        };
        let a = act(
            &self.learner,
            &mut state,
            &flat,
            &mut self.rng_predict,
            pick,
        );
        state.is_first.iter_mut().for_each(|f| *f = 0.0);
        self.predict_state = Some(state);
        Ok(env_actions(&self.status.act_space, &a, self.n_actions))
    }

    fn reset_predict_state(&mut self) {
        self.predict_state = None;
    }

    fn save(&self, dir: &Path) -> Result<(), RlError> {
        let LearnerState {
            files: learner_files,
            entries,
        } = self.learner.save_state();
        let shell = ShellState {
            num_timesteps: self.status.num_timesteps,
            iterations: self.status.iterations,
            total_timesteps: self.status.total_timesteps,
            owed: self.owed,
            rng_act: self.rng_act.clone(),
            rng_replay: self.rng_replay.clone(),
            rng_predict: self.rng_predict.clone(),
            last_obs: self.last_obs.clone(),
            envs: self.env.snapshots()?,
            acting: self.acting.clone(),
        };
        let state = SavedState {
            shell,
            learner: entries,
        };
        let cfg = self.learner.config();
        let mut files = vec![(
            "config.yaml",
            run_yaml(&self.run, self.status.total_timesteps, cfg)?,
        )];
        files.extend(learner_files);
        files.push((
            "state.json",
            serde_json::to_vec(&state).expect("serializable"),
        ));
        if cfg.store_buffer_in_checkpoints {
            files.push((
                "replay.json",
                serde_json::to_vec(&self.replay).expect("serializable"),
            ));
        }
        write_checkpoint(dir, NAME, &files)?;
        Ok(())
    }
}
