//! What every multi-agent shell shares ([`MultiAgentCore`]): the vector env, the policy map
//! resolved against it, the heuristics acting for frozen policies, the counters, episode
//! metrics, evaluation, and their part of a checkpoint. A family's shell adds its learners
//! and what it keeps per agent (on-policy rows, off-policy transitions).

use super::{
    AgentId, AgentMap, HeuristicPolicy, MultiAgentEnv, MultiAgentEpisode, MultiAgentEval,
    MultiAgentVecEnv, PolicyMap, check_heuristic_action,
};
use crate::algorithm::{LearnerState, Progress, RlError};
use crate::checkpoint::{Checkpoint, read_json, read_run, write_checkpoint};
use crate::config::{ConfigError, RunConfig};
use crate::env::{EnvError, Kwargs};
use crate::logger::Metrics;
use crate::rng::Rng;
use crate::spaces::Space;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Builds a multi-agent env from its id and keyword arguments (`rl_training_envs::make_multi_agent_env`).
pub type MultiAgentEnvMaker<'a> =
    &'a dyn Fn(&str, &Kwargs) -> Result<Box<dyn MultiAgentEnv>, EnvError>;

/// What a frozen policy of a run is made from.
#[derive(Debug, Clone, Copy)]
pub enum FrozenSource<'a> {
    /// The env's built-in policy `name` (`rl_training_envs::multi_agent::heuristic`).
    Heuristic(&'a str),
    /// A saved checkpoint whose policy acts with the agents' spaces.
    Checkpoint {
        /// The checkpoint directory.
        dir: &'a std::path::Path,
        /// For a multi-agent checkpoint, which of its policies acts.
        policy: &'a str,
        /// The observation space of the agents it acts for.
        observation_space: &'a Space,
        /// Their action space.
        action_space: &'a Space,
    },
}

/// Builds a frozen policy for env `id` (with its keyword arguments) from its source; the
/// facade `rl_training::frozen_policy` knows every source, `rl_training_envs::multi_agent::frozen` the
/// heuristics only.
pub type FrozenMaker<'a> =
    &'a dyn Fn(&str, &Kwargs, FrozenSource<'_>) -> Result<Box<dyn HeuristicPolicy>, RlError>;

/// Where a checkpoint embeds the checkpoint a frozen policy `id` was loaded from, so that it
/// holds every policy and resumes without the original.
pub fn frozen_prefix(id: &str) -> String {
    format!("frozen/{id}")
}

/// One learned agent's turn in [`MultiAgentCore::evaluate`].
pub struct EvalStep<'a> {
    /// The agent's policy.
    pub policy: &'a str,
    /// The agent.
    pub agent: &'a str,
    /// Its observation (raw encoding).
    pub obs: &'a [f32],
    /// Its first action of the episode (a recurrent policy starts from the zero state).
    pub first: bool,
    /// The evaluation's generator.
    pub rng: &'a mut Rng,
}

/// Envs, policy map, heuristics and counters of a multi-agent run.
pub struct MultiAgentCore {
    /// The run configuration.
    pub run: RunConfig,
    /// Which policy acts for each agent.
    pub map: PolicyMap,
    /// The envs.
    pub envs: MultiAgentVecEnv,
    /// Per env, the frozen policy (heuristic or checkpoint) acting for each agent whose
    /// policy is one.
    pub heuristics: Vec<AgentMap<Box<dyn HeuristicPolicy>>>,
    /// The checkpoints frozen policies were loaded from, by policy id (saved inside every
    /// checkpoint of this run).
    pub frozen_checkpoints: BTreeMap<String, Checkpoint>,
    /// The heuristics' draws.
    pub rng_heuristic: Rng,
    /// Env steps so far (vector-env steps × envs, RLlib's `num_env_steps_sampled`).
    pub num_timesteps: u64,
    /// Actions taken by all agents so far.
    pub agent_steps: u64,
    /// `train` calls finished.
    pub iterations: u64,
    /// The budget the schedules refer to.
    pub total_timesteps: u64,
}

/// [`MultiAgentCore`]'s part of a checkpoint's `state.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MultiAgentCoreState {
    num_timesteps: u64,
    agent_steps: u64,
    iterations: u64,
    total_timesteps: u64,
    rng_heuristic: Rng,
    envs: Vec<Value>,
    heuristics: Vec<AgentMap<Value>>,
}

impl MultiAgentCore {
    /// `run.n_envs` envs of `run.env_id`, the run's `multi_agent:` table (default: one shared
    /// policy) resolved against them, a frozen policy per agent of a heuristic or checkpoint
    /// policy (a bad name, a missing checkpoint or one with other spaces is an error naming
    /// the policy), and the envs reset from the run seed.
    pub fn new(
        run: &RunConfig,
        make_env: MultiAgentEnvMaker<'_>,
        make_frozen: FrozenMaker<'_>,
    ) -> Result<Self, RlError> {
        run.refuse_curiosity("multi-agent runs take no curiosity plugin yet")?;
        let envs = (0..run.n_envs.max(1))
            .map(|_| make_env(&run.env_id, &run.env_kwargs))
            .collect::<Result<Vec<_>, _>>()?;
        let map = run
            .multi_agent
            .clone()
            .unwrap_or_default()
            .resolve(envs[0].as_ref())?;
        let possible = envs[0].possible_agents().to_vec();
        // One frozen policy per policy id, copied (`fresh`) for each of its agents in each env.
        let mut frozen: BTreeMap<String, Box<dyn HeuristicPolicy>> = BTreeMap::new();
        let mut frozen_checkpoints = BTreeMap::new();
        for (id, spec) in &map.policies {
            let field = |f: &str| format!("multi_agent.policies.{id}.{f}");
            let named = |f: &str, e: RlError| -> RlError {
                match e {
                    RlError::Config(c) if c.field.starts_with("multi_agent.") => RlError::Config(c),
                    other => RlError::Config(ConfigError::new(field(f), other.to_string())),
                }
            };
            let policy = if let Some(name) = &spec.heuristic {
                make_frozen(&run.env_id, &run.env_kwargs, FrozenSource::Heuristic(name))
                    .map_err(|e| named("heuristic", e))?
            } else if let Some(dir) = &spec.checkpoint {
                let ck = crate::checkpoint::read_checkpoint(dir)
                    .map_err(|e| named("checkpoint", e.into()))?;
                let agent = map.agents_of(id, &possible).next().ok_or_else(|| {
                    ConfigError::new(field("checkpoint"), "the policy acts for no agent")
                })?;
                let source = FrozenSource::Checkpoint {
                    dir,
                    policy: spec.checkpoint_policy.as_deref().unwrap_or(id),
                    observation_space: envs[0].observation_space(agent)?,
                    action_space: envs[0].action_space(agent)?,
                };
                let p = make_frozen(&run.env_id, &run.env_kwargs, source)
                    .map_err(|e| named("checkpoint", e))?;
                frozen_checkpoints.insert(id.clone(), ck);
                p
            } else {
                continue;
            };
            frozen.insert(id.clone(), policy);
        }
        let mut rng_heuristic = Rng::for_stream(run.seed, "heuristic");
        let mut heuristics = Vec::new();
        for _ in 0..envs.len() {
            let mut per_agent = AgentMap::new();
            for a in &possible {
                if let Some(f) = frozen.get(&map.agent_policy[a]) {
                    let mut h = f.fresh();
                    h.reset(&mut rng_heuristic);
                    per_agent.insert(a.clone(), h);
                }
            }
            heuristics.push(per_agent);
        }
        let mut vec_env = MultiAgentVecEnv::new(envs)?;
        vec_env.reset(Some(Rng::for_stream(run.seed, "env").next_seed() >> 16))?;
        Ok(Self {
            run: run.clone(),
            map,
            envs: vec_env,
            heuristics,
            frozen_checkpoints,
            rng_heuristic,
            num_timesteps: 0,
            agent_steps: 0,
            iterations: 0,
            total_timesteps: run.total_timesteps,
        })
    }

    /// Every agent of the env.
    pub fn possible(&self) -> Vec<AgentId> {
        self.envs.possible_agents().to_vec()
    }

    /// The learned (not frozen) policies, in id order.
    pub fn learned_ids(&self) -> Vec<String> {
        self.map
            .policies
            .iter()
            .filter(|(_, p)| !p.is_frozen())
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// The observation and action spaces of `policy`'s agents.
    pub fn spaces_of(&self, policy: &str) -> Result<(Space, Space), RlError> {
        let possible = self.possible();
        let agent = self
            .map
            .agents_of(policy, &possible)
            .next()
            .ok_or_else(|| {
                ConfigError::new(
                    format!("multi_agent.policies.{policy}"),
                    "acts for no agent",
                )
            })?;
        Ok((
            self.envs.observation_space(agent)?.clone(),
            self.envs.action_space(agent)?.clone(),
        ))
    }

    /// The agents of `policy` about to act, as `(env, agent)`, and their raw observations
    /// one after the other.
    pub fn to_act(&self, policy: &str) -> (Vec<(usize, AgentId)>, Vec<f32>) {
        let (mut who, mut raw) = (Vec::new(), Vec::new());
        for (i, obs) in self.envs.obs().iter().enumerate() {
            for (a, o) in obs {
                if self.map.agent_policy[a] == policy {
                    who.push((i, a.clone()));
                    raw.extend_from_slice(o);
                }
            }
        }
        (who, raw)
    }

    /// The heuristics' actions for their agents about to act, into `actions` (one map per env).
    pub fn heuristic_actions(&mut self, actions: &mut [AgentMap<Vec<f32>>]) -> Result<(), RlError> {
        for (i, obs) in self.envs.obs().iter().enumerate() {
            for (a, o) in obs {
                if let Some(h) = self.heuristics[i].get_mut(a) {
                    let action = h.act(o, &mut self.rng_heuristic)?;
                    check_heuristic_action(
                        &self.run.env_id,
                        h.name(),
                        self.envs.action_space(a)?,
                        &action,
                    )?;
                    actions[i].insert(a.clone(), action);
                }
            }
        }
        Ok(())
    }

    /// Steps every env with its actions and counts the steps; the heuristics of an env that
    /// was reset start a new episode.
    pub fn step(&mut self, actions: &[AgentMap<Vec<f32>>]) -> Result<(), RlError> {
        self.envs.step(actions)?;
        self.num_timesteps += actions.len() as u64;
        self.agent_steps += actions.iter().map(|a| a.len() as u64).sum::<u64>();
        for i in 0..actions.len() {
            if self.envs.ended(i) {
                for h in self.heuristics[i].values_mut() {
                    h.reset(&mut self.rng_heuristic);
                }
            }
        }
        Ok(())
    }

    /// Where training stands, as a learner's update receives it.
    pub fn progress(&self) -> Progress {
        Progress {
            num_timesteps: self.num_timesteps,
            total_timesteps: self.total_timesteps,
            iteration: self.iterations,
        }
    }

    /// Counts the iteration and adds the episode metrics (`charts/episodic_return`: the sum
    /// over agents; `agents/<id>/episodic_return`; `policies/<id>/episodic_return`: the sum
    /// over the policy's agents), SPS over `steps` env steps and the time split; checks that
    /// every metric is finite.
    pub fn finish(
        &mut self,
        m: &mut Metrics,
        episodes: &[MultiAgentEpisode],
        steps: u64,
        started: std::time::Instant,
        rollout_seconds: f64,
    ) -> Result<(), RlError> {
        self.iterations += 1;
        if !episodes.is_empty() {
            let k = episodes.len() as f64;
            let mean =
                |f: &dyn Fn(&MultiAgentEpisode) -> f64| episodes.iter().map(f).sum::<f64>() / k;
            m.insert("charts/episodic_return".into(), mean(&|e| e.total_return()));
            m.insert("charts/episodic_length".into(), mean(&|e| e.len as f64));
            m.insert("charts/episodes".into(), k);
            for a in self.envs.possible_agents() {
                m.insert(
                    format!("agents/{a}/episodic_return"),
                    mean(&|e| e.returns.get(a).copied().unwrap_or(0.0)),
                );
            }
            for id in self.map.policies.keys() {
                let of = |e: &MultiAgentEpisode| {
                    e.returns
                        .iter()
                        .filter(|(a, _)| &self.map.agent_policy[*a] == id)
                        .map(|(_, r)| r)
                        .sum::<f64>()
                };
                m.insert(format!("policies/{id}/episodic_return"), mean(&of));
            }
        }
        let secs = started.elapsed().as_secs_f64();
        m.insert("charts/SPS".into(), steps as f64 / secs.max(1e-9));
        m.insert("charts/agent_steps".into(), self.agent_steps as f64);
        m.insert("time/rollout_seconds".into(), rollout_seconds);
        m.insert("time/update_seconds".into(), secs - rollout_seconds);
        crate::algorithm::check_finite(self.num_timesteps, m)
    }

    /// Mean returns of `n_episodes` on `env` (episode `e` reset with `seed + e`): `act` gives
    /// a learned policy's action for an [`EvalStep`], heuristics act as in training (fresh
    /// copies, their own generator).
    pub fn evaluate(
        &self,
        env: &mut dyn MultiAgentEnv,
        n_episodes: usize,
        seed: u64,
        mut act: impl FnMut(EvalStep<'_>) -> Result<Vec<f32>, RlError>,
    ) -> Result<MultiAgentEval, RlError> {
        let possible = env.possible_agents().to_vec();
        let mut heuristics: AgentMap<Box<dyn HeuristicPolicy>> = self.heuristics[0]
            .iter()
            .map(|(a, h)| (a.clone(), h.fresh()))
            .collect();
        let mut rng = Rng::for_stream(seed, "evaluate");
        let mut total = AgentMap::<f64>::new();
        let mut episodes = Vec::new();
        for e in 0..n_episodes {
            let (mut obs, _) = env.reset(Some(seed + e as u64), None)?;
            for h in heuristics.values_mut() {
                h.reset(&mut rng);
            }
            let (mut ret, mut len) = (AgentMap::<f64>::new(), 0);
            let mut acted = std::collections::BTreeSet::new();
            while !env.episode_over() {
                len += 1;
                let mut actions = AgentMap::new();
                for a in env.agents_to_act().to_vec() {
                    let o = obs.get(&a).ok_or_else(|| EnvError::BadOutput {
                        env: env.id().to_string(),
                        reason: format!("no observation for agent {a:?}, which is to act"),
                    })?;
                    let action = match heuristics.get_mut(&a) {
                        Some(h) => h.act(o, &mut rng)?,
                        None => act(EvalStep {
                            policy: &self.map.agent_policy[&a],
                            agent: &a,
                            obs: o,
                            first: acted.insert(a.clone()),
                            rng: &mut rng,
                        })?,
                    };
                    actions.insert(a, action);
                }
                let s = env.step(&actions)?;
                for (a, r) in &s.rewards {
                    *ret.entry(a.clone()).or_default() += r;
                }
                obs = s.obs;
            }
            for a in &possible {
                *total.entry(a.clone()).or_default() += ret.get(a).copied().unwrap_or(0.0);
            }
            episodes.push((ret.values().sum(), len));
        }
        let k = n_episodes.max(1) as f64;
        let per_agent: AgentMap<f64> = total.into_iter().map(|(a, r)| (a, r / k)).collect();
        let mut per_policy = BTreeMap::new();
        for (a, r) in &per_agent {
            *per_policy
                .entry(self.map.agent_policy[a].clone())
                .or_insert(0.0) += r;
        }
        Ok(MultiAgentEval {
            mean_return: per_agent.values().sum(),
            per_agent,
            per_policy,
            episodes,
        })
    }

    /// The state to save.
    pub fn state(&self) -> Result<MultiAgentCoreState, RlError> {
        Ok(MultiAgentCoreState {
            num_timesteps: self.num_timesteps,
            agent_steps: self.agent_steps,
            iterations: self.iterations,
            total_timesteps: self.total_timesteps,
            rng_heuristic: self.rng_heuristic.clone(),
            envs: self.envs.snapshots()?,
            heuristics: self
                .heuristics
                .iter()
                .map(|m| m.iter().map(|(a, h)| (a.clone(), h.save())).collect())
                .collect(),
        })
    }

    /// Restores a saved state (`file` names the checkpoint file in errors).
    pub fn restore(&mut self, s: MultiAgentCoreState, file: &str) -> Result<(), RlError> {
        if s.heuristics.len() != self.heuristics.len() {
            return Err(RlError::Config(ConfigError::new(
                file,
                format!(
                    "saved for {} envs, the run has {}",
                    s.heuristics.len(),
                    self.heuristics.len()
                ),
            )));
        }
        self.envs.restore_snapshots(&s.envs)?;
        for (mine, saved) in self.heuristics.iter_mut().zip(&s.heuristics) {
            for (a, h) in mine.iter_mut() {
                h.load(saved.get(a).unwrap_or(&Value::Null))?;
            }
        }
        self.num_timesteps = s.num_timesteps;
        self.agent_steps = s.agent_steps;
        self.iterations = s.iterations;
        self.total_timesteps = s.total_timesteps;
        self.rng_heuristic = s.rng_heuristic;
        Ok(())
    }

    /// The run's `algo_kwargs` with policy `id`'s overrides.
    pub fn policy_kwargs(&self, id: &str) -> Map<String, Value> {
        let mut kw = self.run.algo_kwargs.clone();
        if let Some(p) = self.map.policies.get(id) {
            kw.extend(p.algo_kwargs.clone());
        }
        kw
    }

    /// The run as policy `id`'s learner sees it: its own seed (its weights, minibatches and
    /// replay draws come from the run seed's stream `policy/<id>`).
    pub fn policy_run(&self, id: &str) -> RunConfig {
        let mut prun = self.run.clone();
        prun.seed = Rng::for_stream(self.run.seed, &format!("policy/{id}")).next_seed();
        prun
    }

    /// Writes a checkpoint of algorithm `algorithm`: `config.yaml` (the run with the budget
    /// now), each learned policy's files under `policies/<id>/`, and `state.json` with this
    /// core's state, each policy's entries and the shell's own `shell` part.
    pub fn save_checkpoint(
        &self,
        dir: &std::path::Path,
        algorithm: &str,
        policies: Vec<(String, LearnerState)>,
        shell: Value,
    ) -> Result<(), RlError> {
        let yaml = crate::agent::run_yaml(&self.run, self.total_timesteps, &self.run.algo_kwargs)?;
        let mut files: Vec<(String, Vec<u8>)> = vec![("config.yaml".into(), yaml)];
        let mut entries = BTreeMap::new();
        for (id, st) in policies {
            for (name, bytes) in st.files {
                files.push((format!("policies/{id}/{name}"), bytes));
            }
            entries.insert(id, st.entries);
        }
        for (id, ck) in &self.frozen_checkpoints {
            files.extend(ck.embedded(&frozen_prefix(id)));
        }
        let state = SavedMultiAgent {
            core: self.state()?,
            policies: entries,
            shell,
        };
        files.push((
            "state.json".into(),
            serde_json::to_vec_pretty(&state).expect("serializable"),
        ));
        let refs: Vec<(&str, Vec<u8>)> =
            files.iter().map(|(n, b)| (n.as_str(), b.clone())).collect();
        write_checkpoint(dir, algorithm, &refs)?;
        Ok(())
    }
}

/// A multi-agent checkpoint's `state.json`.
#[derive(Serialize, Deserialize)]
struct SavedMultiAgent {
    core: MultiAgentCoreState,
    policies: BTreeMap<String, Map<String, Value>>,
    shell: Value,
}

/// A multi-agent checkpoint read back ([`MultiAgentCore::save_checkpoint`]'s).
pub struct MultiAgentCheckpoint {
    /// The checkpoint.
    pub ck: Checkpoint,
    /// The run it was saved from.
    pub run: RunConfig,
    core: MultiAgentCoreState,
    policies: BTreeMap<String, Map<String, Value>>,
    /// The shell's own part of `state.json`.
    pub shell: Value,
}

impl MultiAgentCheckpoint {
    /// Reads checkpoint `dir`, which `algorithm` must have written.
    /// A frozen policy's checkpoint embedded in it replaces the original in [`run`](Self::run).
    pub fn read(dir: &std::path::Path, algorithm: &str) -> Result<Self, RlError> {
        let (ck, mut run) = read_run(dir, algorithm)?;
        if let Some(ma) = run.multi_agent.as_mut() {
            for (id, spec) in ma.policies.iter_mut() {
                let prefix = frozen_prefix(id);
                if spec.checkpoint.is_some()
                    && ck.has(&format!("{prefix}/{}", crate::checkpoint::MANIFEST))
                {
                    spec.checkpoint = Some(ck.dir.join(prefix));
                }
            }
        }
        let s: SavedMultiAgent = read_json(&ck, "state.json")?;
        Ok(Self {
            ck,
            run,
            core: s.core,
            policies: s.policies,
            shell: s.shell,
        })
    }

    /// Policy `id`'s files (as a checkpoint of their own) and `state.json` entries.
    pub fn policy(&self, id: &str) -> Result<(Checkpoint, &Map<String, Value>), RlError> {
        let entries = self.policies.get(id).ok_or_else(|| {
            ConfigError::new(
                self.ck.path_of("state.json"),
                format!("no state of policy {id:?}"),
            )
        })?;
        Ok((self.ck.sub(&format!("policies/{id}")), entries))
    }

    /// Restores `core` (a fresh one built from [`run`](Self::run)) to the saved state.
    pub fn restore_core(&self, core: &mut MultiAgentCore) -> Result<(), RlError> {
        core.restore(self.core.clone(), &self.ck.path_of("state.json"))
    }

    /// The shell's part, parsed; errors name the file.
    pub fn shell<T: serde::de::DeserializeOwned>(&self) -> Result<T, RlError> {
        serde_json::from_value(self.shell.clone()).map_err(|e| {
            ConfigError::new(self.ck.path_of("state.json"), format!("shell: {e}")).into()
        })
    }
}

/// A learned policy's key path in errors (`multi_agent.policies.<id>.<field>`).
pub fn policy_field(id: &str, e: ConfigError) -> ConfigError {
    ConfigError::new(format!("multi_agent.policies.{id}.{}", e.field), e.message)
}

/// Policy `id` of `learned`, or an error naming the learned ones.
pub fn learned_policy<'a, P>(learned: &'a BTreeMap<String, P>, id: &str) -> Result<&'a P, RlError> {
    learned.get(id).ok_or_else(|| {
        ConfigError::new(
            "policy",
            format!(
                "{id:?} is not a learned policy; learned: {}",
                learned.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
        )
        .into()
    })
}
