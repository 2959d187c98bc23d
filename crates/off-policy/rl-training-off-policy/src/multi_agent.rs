//! The multi-agent off-policy shell: one [`MultiAgentVecEnv`](rl_training_core::multi_agent::MultiAgentVecEnv)
//! (in the [`MultiAgentCore`]), and for every learned policy its own [`OffPolicyLearner`]
//! (DQN, SAC, …) with its own replay buffer holding the transitions of the agents mapped to it.
//!
//! One iteration: `train_freq` vector-env steps. At each, the agents to act are grouped by
//! policy; each learned policy's actor acts for its agents in one batch (uniform random
//! actions before its `learning_starts`), heuristics per agent. An agent's transition stays
//! open, its rewards adding up, until its next observation: the one it acts on next, or its
//! final one when its episode ends (terminated or truncated, kept apart as in a single-agent
//! run). Then each learned policy takes the gradient steps due (counted in env steps), each on
//! a batch sampled from its replay, and its metrics go under `policies/<id>/`.
//!
//! A policy's replay is one [linked](rl_training_core::replay::Replay::linked) column of transitions in
//! the order they closed: each transition names the same agent's next one, so n-step returns
//! (and RLlib's n-step ranges) sum one agent's rewards, never its neighbours'. AWR's
//! whole-replay feed is refused.

use crate::agent::{
    ActMode, Feed, OffPolicyActor, OffPolicyLearner, OffPolicySettings, random_actions,
};
use crate::{restore_replay, save_replay};
use rl_training_core::batch::flatten_batch;
use rl_training_core::burn::tensor::Device;
use rl_training_core::config::{AlgoConfig, ConfigError, RunConfig};
use rl_training_core::logger::{Metrics, MetricsMean};
use rl_training_core::multi_agent::{
    AgentMap, FrozenMaker, MultiAgentAlgorithm, MultiAgentCheckpoint, MultiAgentCore,
    MultiAgentEnv, MultiAgentEnvMaker, MultiAgentEpisode, MultiAgentEval, learned_policy,
    policy_field,
};
use rl_training_core::replay::{Replay, ReplayMeta, TransitionRef};
use rl_training_core::{RlError, Rng, Space};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

/// A policy the run's algorithm learns (or keeps as initialized, when not in
/// `policies_to_train`).
pub struct LearnedOffPolicy<L: OffPolicyLearner> {
    /// The learner.
    pub learner: L,
    /// Whether it learns.
    pub train: bool,
    /// Its replay buffer.
    pub replay: Replay,
    settings: OffPolicySettings,
    rng_replay: Rng,
    /// Fractional gradient steps owed (`training_intensity`).
    credit: f64,
    /// The acting side, kept while the weights do not change.
    actor: Option<L::Actor>,
    obs_space: Space,
    act_space: Space,
}

/// An agent's transition waiting for its next observation.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Pending {
    /// Flat observation.
    obs: Vec<f32>,
    /// The action as the replay stores it.
    action: Vec<f32>,
    reward: f32,
}

/// Each learned policy's part of the shell state in a checkpoint.
#[derive(Serialize, Deserialize)]
struct PolicyState {
    rng_replay: Rng,
    credit: f64,
    replay: Option<ReplayMeta>,
}

/// The shell's part of a checkpoint's `state.json`.
#[derive(Serialize, Deserialize)]
struct ShellState {
    rng_act: Rng,
    pending: Vec<AgentMap<Pending>>,
    /// Per env, each agent's last stored transition of its current episode (its number in
    /// its policy's replay: the next one links to it).
    #[serde(default)]
    last_stored: Vec<AgentMap<u64>>,
    policies: BTreeMap<String, PolicyState>,
}

/// The multi-agent shell around off-policy learners of type `L`.
pub struct MultiAgentOffPolicy<L: OffPolicyLearner> {
    core: MultiAgentCore,
    learned: BTreeMap<String, LearnedOffPolicy<L>>,
    pending: Vec<AgentMap<Pending>>,
    last_stored: Vec<AgentMap<u64>>,
    train_freq: usize,
    rng_act: Rng,
}

fn flat(space: &Space, raw: &[f32]) -> Vec<f32> {
    let mut out = Vec::new();
    flatten_batch(space, raw, &mut out);
    out
}

impl<L: OffPolicyLearner> MultiAgentOffPolicy<L> {
    /// Builds the run: the `multi_agent:` table resolved against the env, one learner and
    /// replay per learned policy (the run's `algo_kwargs` with the policy's overrides),
    /// heuristics for the frozen ones.
    pub fn new(
        run: &RunConfig,
        make_env: MultiAgentEnvMaker<'_>,
        make_frozen: FrozenMaker<'_>,
        device: &Device,
    ) -> Result<Self, RlError> {
        if run
            .multi_agent
            .as_ref()
            .is_some_and(|m| m.centralized_critic)
        {
            return Err(ConfigError::new(
                "multi_agent.centralized_critic",
                format!(
                    "a centralized critic is an on-policy option (ppo, a2c), not {}'s",
                    L::NAME
                ),
            )
            .into());
        }
        let core = MultiAgentCore::new(run, make_env, make_frozen)?;
        let mut learned = BTreeMap::new();
        let mut train_freq = None;
        for id in core.learned_ids() {
            let field = |k: &str| format!("multi_agent.policies.{id}.algo_kwargs.{k}");
            let cfg = L::Config::from_kwargs(&core.policy_kwargs(&id))
                .map_err(|e| policy_field(&id, e))?;
            let settings = L::settings(&cfg);
            if settings.feed != Feed::Sampled {
                return Err(ConfigError::new(
                    "algorithm",
                    format!(
                        "{} learns from its whole replay, which multi-agent runs do not feed yet",
                        L::NAME
                    ),
                )
                .into());
            }
            let tf = settings.frequency.train_freq;
            match train_freq {
                None => train_freq = Some(tf),
                Some(t) if t != tf => {
                    let m = format!("every policy collects the same steps: train_freq {tf} vs {t}");
                    return Err(ConfigError::new(field("train_freq"), m).into());
                }
                Some(_) => {}
            }
            let (obs_space, act_space) = core.spaces_of(&id)?;
            let act_dim = L::stored_action_dim(&act_space)
                .map_err(|e| ConfigError::new(format!("multi_agent.policies.{id}"), e))?;
            let prun = core.policy_run(&id);
            let learner = L::build(
                cfg,
                &prun,
                (&obs_space, &act_space),
                device.clone().autodiff(),
            )?;
            learned.insert(
                id.clone(),
                LearnedOffPolicy {
                    learner,
                    train: core.map.to_train.contains(&id),
                    replay: settings
                        .replay
                        .build(1, obs_space.flat_dim(), act_dim)
                        .linked(),
                    rng_replay: Rng::for_stream(prun.seed, "replay"),
                    settings,
                    credit: 0.0,
                    actor: None,
                    obs_space,
                    act_space,
                },
            );
        }
        let n = core.envs.num_envs();
        Ok(Self {
            core,
            learned,
            pending: vec![AgentMap::new(); n],
            last_stored: vec![AgentMap::new(); n],
            train_freq: train_freq.unwrap_or(1),
            rng_act: Rng::for_stream(run.seed, "act"),
        })
    }

    /// The learned policies by id.
    pub fn learned(&self) -> &BTreeMap<String, LearnedOffPolicy<L>> {
        &self.learned
    }

    /// One vector-env step: the learned policies' actors (or random actions before their
    /// `learning_starts`) and the heuristics act, then the agents' transitions that closed go
    /// to their policies' replays.
    fn collect_step(&mut self) -> Result<(), RlError> {
        let n = self.core.envs.num_envs();
        let mut env_actions = vec![AgentMap::new(); n];
        let progress = self.core.progress();
        for (id, lp) in self.learned.iter_mut() {
            let (who, raw) = self.core.to_act(id);
            if who.is_empty() {
                continue;
            }
            let obs = flat(&lp.obs_space, &raw);
            let (env_a, stored) = if progress.num_timesteps < lp.settings.frequency.learning_starts
            {
                random_actions(&lp.act_space, who.len(), &mut self.rng_act)
            } else {
                let actor = lp.actor.get_or_insert_with(|| lp.learner.actor());
                actor.act(
                    &obs,
                    who.len(),
                    &mut self.rng_act,
                    ActMode::Explore,
                    &progress,
                )
            };
            let (ea, sa, od) = (
                env_a.len() / who.len(),
                stored.len() / who.len(),
                obs.len() / who.len(),
            );
            for (k, (i, a)) in who.into_iter().enumerate() {
                env_actions[i].insert(a.clone(), env_a[k * ea..(k + 1) * ea].to_vec());
                self.pending[i].insert(
                    a,
                    Pending {
                        obs: obs[k * od..(k + 1) * od].to_vec(),
                        action: stored[k * sa..(k + 1) * sa].to_vec(),
                        reward: 0.0,
                    },
                );
            }
        }
        self.core.heuristic_actions(&mut env_actions)?;
        self.core.step(&env_actions)?;
        for i in 0..n {
            let s = self.core.envs.last(i);
            let next = &self.core.envs.obs()[i];
            let agents: Vec<String> = self.pending[i].keys().cloned().collect();
            for a in agents {
                let p = self.pending[i].get_mut(&a).expect("listed");
                p.reward += s.rewards.get(&a).copied().unwrap_or(0.0) as f32;
                // Closed by the agent's next observation: its final one, or the one it acts on.
                let (next_obs, terminated, truncated) = if s.done(&a) {
                    let t = s.terminations.get(&a).copied().unwrap_or(false);
                    (&s.obs[&a], t, !t)
                } else if let Some(o) = next.get(&a) {
                    (o, false, false)
                } else {
                    continue;
                };
                let p = self.pending[i].remove(&a).expect("listed");
                let lp = self
                    .learned
                    .get_mut(&self.core.map.agent_policy[&a])
                    .expect("a learned agent");
                let next_flat = flat(&lp.obs_space, next_obs);
                let prev = self.last_stored[i].remove(&a);
                let w = lp.replay.add_after(
                    TransitionRef {
                        obs: &p.obs,
                        action: &p.action,
                        reward: p.reward,
                        next_obs: &next_flat,
                        terminated,
                        truncated,
                    },
                    prev,
                );
                if !(terminated || truncated) {
                    self.last_stored[i].insert(a, w);
                }
            }
        }
        Ok(())
    }

    /// Loads a checkpoint written by [`save`](Self::save) and continues exactly where it
    /// stopped (with the replays when they were stored).
    pub fn load(
        dir: &Path,
        make_env: MultiAgentEnvMaker<'_>,
        make_frozen: FrozenMaker<'_>,
        device: &Device,
    ) -> Result<Self, RlError> {
        let saved = MultiAgentCheckpoint::read(dir, L::NAME)?;
        let mut me = Self::new(&saved.run, make_env, make_frozen, device)?;
        let mut shell: ShellState = saved.shell()?;
        let file = saved.ck.path_of("state.json");
        let envs = me.pending.len();
        // Checkpoints from before n-step links have no `last_stored`: nothing to link to.
        if shell.last_stored.is_empty() {
            shell.last_stored = vec![AgentMap::new(); envs];
        }
        for saved_envs in [shell.pending.len(), shell.last_stored.len()] {
            if saved_envs != envs {
                let m = format!("saved for {saved_envs} envs, the run has {envs}");
                return Err(ConfigError::new(file, m).into());
            }
        }
        for (id, lp) in &mut me.learned {
            let (ck, entries) = saved.policy(id)?;
            lp.learner.load_state(&ck, entries)?;
            let ps = shell.policies.remove(id).ok_or_else(|| {
                ConfigError::new(&file, format!("no shell state of policy {id:?}"))
            })?;
            let store = lp.settings.store_buffer;
            if let Some(w) = restore_replay(&mut lp.replay, store, &ck, ps.replay.as_ref())? {
                eprintln!("warning: {w}");
            }
            lp.rng_replay = ps.rng_replay;
            lp.credit = ps.credit;
        }
        saved.restore_core(&mut me.core)?;
        me.pending = shell.pending;
        me.last_stored = shell.last_stored;
        // A replay not stored in the checkpoint starts empty: nothing there to link to.
        for stored in &mut me.last_stored {
            stored.retain(|a, _| {
                let id = me.core.map.agent_policy.get(a);
                id.and_then(|id| me.learned.get(id))
                    .is_some_and(|lp| !lp.replay.is_empty())
            });
        }
        me.rng_act = shell.rng_act;
        Ok(me)
    }
}

impl<L: OffPolicyLearner> MultiAgentAlgorithm for MultiAgentOffPolicy<L> {
    fn name(&self) -> &str {
        L::NAME
    }
    fn core(&self) -> &MultiAgentCore {
        &self.core
    }
    fn core_mut(&mut self) -> &mut MultiAgentCore {
        &mut self.core
    }
    fn train(&mut self) -> Result<Metrics, RlError> {
        let started = Instant::now();
        let n = self.core.envs.num_envs() as u64;
        let calls_before = self.core.num_timesteps / n;
        let mut episodes: Vec<MultiAgentEpisode> = Vec::new();
        for _ in 0..self.train_freq {
            self.collect_step()?;
            episodes.extend(self.core.envs.drain_episodes());
        }
        let rollout_seconds = started.elapsed().as_secs_f64();
        let collected = self.train_freq as u64 * n;
        let calls_after = self.core.num_timesteps / n;
        let progress = self.core.progress();
        let mut m = Metrics::new();
        for (id, lp) in self.learned.iter_mut() {
            if !lp.train {
                continue;
            }
            lp.learner
                .after_collect(calls_before, calls_after, n as usize);
            let f = &lp.settings.frequency;
            let steps = f.gradient_steps(progress.num_timesteps, collected, &mut lp.credit);
            let beta = lp
                .settings
                .replay
                .beta_at(progress.num_timesteps, progress.total_timesteps);
            let (batch_size, gamma) = (f.batch_size, lp.settings.gamma as f32);
            let mut mean = MetricsMean::default();
            for _ in 0..steps {
                if lp.replay.is_empty() {
                    break;
                }
                let batch = lp
                    .replay
                    .sample(batch_size, gamma, beta, &mut lp.rng_replay);
                mean.add(lp.learner.update(&batch, &progress)?);
                let priorities = lp.learner.priorities().to_vec();
                lp.replay.update_priorities(&batch.indices, &priorities);
            }
            if steps > 0 {
                lp.actor = None;
            }
            let mut pm = mean.mean();
            pm.insert("charts/gradient_steps".into(), steps as f64);
            lp.learner.acting_metrics(&progress, &mut pm);
            for (k, v) in pm {
                m.insert(format!("policies/{id}/{k}"), v);
            }
        }
        self.core
            .finish(&mut m, &episodes, collected, started, rollout_seconds)?;
        Ok(m)
    }
    fn predict(&mut self, id: &str, obs: &[f32], deterministic: bool) -> Result<Vec<f32>, RlError> {
        let lp = learned_policy(&self.learned, id)?;
        let (flat_obs, rows) =
            rl_training_core::agent::checked_flat_obs(&lp.obs_space, &self.core.run.env_id, obs)?;
        let mode = if deterministic {
            ActMode::Deterministic
        } else {
            ActMode::Explore
        };
        let progress = self.core.progress();
        let (a, _) = lp
            .learner
            .actor()
            .act(&flat_obs, rows, &mut self.rng_act, mode, &progress);
        Ok(a)
    }
    fn evaluate(
        &mut self,
        env: &mut dyn MultiAgentEnv,
        n_episodes: usize,
        deterministic: bool,
        seed: u64,
    ) -> Result<MultiAgentEval, RlError> {
        let mode = if deterministic {
            ActMode::Deterministic
        } else {
            ActMode::Explore
        };
        let progress = self.core.progress();
        let actors: BTreeMap<String, (L::Actor, &Space)> = self
            .learned
            .iter()
            .map(|(id, lp)| (id.clone(), (lp.learner.actor(), &lp.obs_space)))
            .collect();
        self.core.evaluate(env, n_episodes, seed, |e| {
            let (actor, space) = &actors[e.policy];
            Ok(actor.act(&flat(space, e.obs), 1, e.rng, mode, &progress).0)
        })
    }
    fn save(&self, dir: &Path) -> Result<(), RlError> {
        let mut policies = Vec::new();
        let mut states = BTreeMap::new();
        for (id, lp) in &self.learned {
            let mut st = lp.learner.save_state();
            let (file, meta) = save_replay(&lp.replay, lp.settings.store_buffer);
            st.files.extend(file);
            policies.push((id.clone(), st));
            states.insert(
                id.clone(),
                PolicyState {
                    rng_replay: lp.rng_replay.clone(),
                    credit: lp.credit,
                    replay: meta,
                },
            );
        }
        let shell = ShellState {
            rng_act: self.rng_act.clone(),
            pending: self.pending.clone(),
            last_stored: self.last_stored.clone(),
            policies: states,
        };
        let shell = serde_json::to_value(shell).expect("serializable");
        self.core.save_checkpoint(dir, L::NAME, policies, shell)
    }
}
