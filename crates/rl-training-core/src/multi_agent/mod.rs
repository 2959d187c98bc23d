//! Multi-agent environments in the shape of PettingZoo's Parallel API.
//!
//! A [`MultiAgentEnv`] has `possible_agents`, the `agents` live in the current episode (the list
//! shrinks as agents finish), per-agent spaces, `reset(seed, options) -> (obs, infos)` and
//! `step(actions) -> (obs, rewards, terminations, truncations, infos)` keyed by agent id, and
//! an optional global `state()`. The episode is over when no agent is left (RLlib's `__all__`).
//! Values travel in their space's raw encoding, as in [`crate::env`].
//!
//! Around it: [`TurnBased`] turns an AEC-style game ([`TurnBasedEnv`], one agent moves at a
//! time) into a multi-agent env in which only the agent to move acts; [`IndependentCopies`] is
//! RLlib's `make_multi_agent` (N copies of a single-agent env, agents `"0"`, `"1"`, …);
//! [`MultiAgentVecEnv`] steps several multi-agent envs with same-step auto-reset, as
//! [`crate::vec_env::VecEnv`] does for single-agent ones; [`HeuristicPolicy`] is a policy that
//! acts without learning: a built-in one an env offers (an opponent) or a saved checkpoint.

pub mod core;

pub use self::core::{
    EvalStep, FrozenMaker, FrozenSource, MultiAgentCheckpoint, MultiAgentCore, MultiAgentCoreState,
    MultiAgentEnvMaker, learned_policy, policy_field,
};

use crate::env::{Env, EnvError, Info, Kwargs, check_action, snap_field};
use crate::rng::Rng;
use crate::spaces::Space;
use crate::vec_env::guarded;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// An agent's id (PettingZoo's string ids: `agent_0`, `player_1`; RLlib's integer ids as `"0"`).
pub type AgentId = String;

/// A value per agent, ordered by id.
pub type AgentMap<T> = BTreeMap<AgentId, T>;

/// What a multi-agent step returns: PettingZoo's five dictionaries. An agent that finished in
/// this step is in `obs` (its final observation), `rewards`, `terminations` and `truncations`,
/// and is no longer in [`MultiAgentEnv::agents`] afterwards.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MultiStep {
    /// Observation of each agent that acts next (or finished now).
    pub obs: AgentMap<Vec<f32>>,
    /// Reward of each agent for this step.
    pub rewards: AgentMap<f64>,
    /// Agents that reached a terminal state (no bootstrap).
    pub terminations: AgentMap<bool>,
    /// Agents whose episode was cut short (bootstrap from the final observation).
    pub truncations: AgentMap<bool>,
    /// Extra information per agent.
    pub infos: AgentMap<Info>,
}

impl MultiStep {
    /// Whether `agent` finished in this step (terminated or truncated).
    pub fn done(&self, agent: &str) -> bool {
        self.terminations.get(agent).copied().unwrap_or(false)
            || self.truncations.get(agent).copied().unwrap_or(false)
    }
}

fn unknown_agent(env: &str, agent: &str, known: &[AgentId]) -> EnvError {
    EnvError::Make(format!(
        "{env}: unknown agent {agent:?}; agents: {}",
        known.join(", ")
    ))
}

/// Looks up `agent`'s entry in a per-agent table, with an error naming the agent.
pub fn agent_entry<'a, T>(
    env: &str,
    agents: &[AgentId],
    table: &'a [T],
    agent: &str,
) -> Result<&'a T, EnvError> {
    agents
        .iter()
        .position(|a| a == agent)
        .and_then(|i| table.get(i))
        .ok_or_else(|| unknown_agent(env, agent, agents))
}

/// A multi-agent environment (PettingZoo's Parallel API).
pub trait MultiAgentEnv: Send {
    /// Registry id (e.g. `simple_spread_v3`).
    fn id(&self) -> &str;
    /// Every agent that may appear, in a fixed order.
    fn possible_agents(&self) -> &[AgentId];
    /// The agents live in the current episode: all of them after `reset`, fewer as agents
    /// finish, none once the episode is over.
    fn agents(&self) -> &[AgentId];
    /// The agents whose actions the next `step` takes: every live agent, or in a turn-based
    /// game the one to move.
    fn agents_to_act(&self) -> &[AgentId] {
        self.agents()
    }
    /// `agent`'s observation space (an error names an unknown agent).
    fn observation_space(&self, agent: &str) -> Result<&Space, EnvError>;
    /// `agent`'s action space (an error names an unknown agent).
    fn action_space(&self, agent: &str) -> Result<&Space, EnvError>;
    /// The space of [`state`](Self::state), if the env has a global state.
    fn state_space(&self) -> Option<&Space> {
        None
    }
    /// The global state (PettingZoo's `state()`, what a centralized critic sees), if any.
    fn state(&self) -> Option<Vec<f32>> {
        None
    }
    /// Starts an episode; `seed` reseeds the env's generator, `None` continues it. Returns the
    /// observations of the agents to act and the infos.
    fn reset(
        &mut self,
        seed: Option<u64>,
        options: Option<&Kwargs>,
    ) -> Result<(AgentMap<Vec<f32>>, AgentMap<Info>), EnvError>;
    /// Applies one action per agent of [`agents_to_act`](Self::agents_to_act) (raw encoding).
    fn step(&mut self, actions: &AgentMap<Vec<f32>>) -> Result<MultiStep, EnvError>;
    /// No agent is left: the episode is over (RLlib's `__all__`).
    fn episode_over(&self) -> bool {
        self.agents().is_empty()
    }
    /// The raw internal state, for conformance tests (e.g. positions and velocities).
    fn raw_state(&self) -> Option<Vec<f64>> {
        None
    }
    /// Sets the raw internal state, if supported.
    fn set_raw_state(&mut self, _state: &[f64]) -> Result<(), EnvError> {
        Err(EnvError::Unsupported {
            env: self.id().to_string(),
            what: "set_raw_state".into(),
        })
    }
    /// A text rendering of the current state, if any.
    fn render(&self) -> Option<String> {
        None
    }
    /// Everything needed to continue exactly where the env is, for bit-identical resume.
    fn snapshot(&self) -> Result<Value, EnvError> {
        Err(EnvError::Unsupported {
            env: self.id().to_string(),
            what: "snapshot (needed to save a resumable checkpoint)".into(),
        })
    }
    /// Restores a [`snapshot`](Self::snapshot).
    fn restore(&mut self, _snapshot: &Value) -> Result<(), EnvError> {
        Err(EnvError::Unsupported {
            env: self.id().to_string(),
            what: "restore".into(),
        })
    }
}

/// The agent bookkeeping of an env whose agents all act at every step and finish together
/// (the built-in simultaneous-move envs): ids, the live list, per-agent spaces.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentTable {
    env: String,
    /// Every agent, in order.
    pub possible: Vec<AgentId>,
    /// The agents of the running episode (empty once it ended).
    pub live: Vec<AgentId>,
    obs_spaces: Vec<Space>,
    act_spaces: Vec<Space>,
}

impl AgentTable {
    /// Agents `possible` of env `env`, each with the same observation and action space.
    pub fn uniform(env: &str, possible: Vec<AgentId>, obs: Space, act: Space) -> Self {
        let n = possible.len();
        Self {
            env: env.to_string(),
            possible,
            live: Vec::new(),
            obs_spaces: vec![obs; n],
            act_spaces: vec![act; n],
        }
    }
    /// `agent`'s observation space (an error names an unknown agent).
    pub fn observation_space(&self, agent: &str) -> Result<&Space, EnvError> {
        agent_entry(&self.env, &self.possible, &self.obs_spaces, agent)
    }
    /// `agent`'s action space (an error names an unknown agent).
    pub fn action_space(&self, agent: &str) -> Result<&Space, EnvError> {
        agent_entry(&self.env, &self.possible, &self.act_spaces, agent)
    }
    /// An episode begins: every agent lives. Returns their (empty) infos.
    pub fn start(&mut self) -> AgentMap<Info> {
        self.live = self.possible.clone();
        self.possible
            .iter()
            .map(|a| (a.clone(), Info::new()))
            .collect()
    }
    /// An error unless an episode is running (a step after the end needs a reset).
    pub fn running(&self) -> Result<(), EnvError> {
        if self.live.is_empty() {
            return Err(EnvError::NeedsReset {
                env: self.env.clone(),
                reason: "step after the episode ended; call reset".into(),
            });
        }
        Ok(())
    }
    /// A step's result for every agent: `obs`, `rewards` in `possible` order, and one
    /// termination and truncation for all; the episode ends when either holds.
    pub fn finish(
        &mut self,
        obs: AgentMap<Vec<f32>>,
        rewards: impl IntoIterator<Item = f64>,
        terminated: bool,
        truncated: bool,
    ) -> MultiStep {
        let mut s = MultiStep {
            obs,
            ..MultiStep::default()
        };
        for (a, r) in self.possible.iter().zip(rewards) {
            s.rewards.insert(a.clone(), r);
            s.terminations.insert(a.clone(), terminated);
            s.truncations.insert(a.clone(), truncated);
            s.infos.insert(a.clone(), Info::new());
        }
        if terminated || truncated {
            self.live.clear();
        }
        s
    }
}

/// Checks a step's actions: exactly one per agent of `agents_to_act`, each in that agent's
/// action space; errors name the agent.
pub fn check_actions(
    env: &dyn MultiAgentEnv,
    actions: &AgentMap<Vec<f32>>,
) -> Result<(), EnvError> {
    let to_act = env.agents_to_act();
    let bad = |reason: String, action: &[f32]| EnvError::InvalidAction {
        env: env.id().to_string(),
        action: action.to_vec(),
        reason,
    };
    for (agent, action) in actions {
        if !to_act.contains(agent) {
            let why = if env.possible_agents().contains(agent) {
                format!(
                    "agent {agent:?} does not act now (acting: {})",
                    to_act.join(", ")
                )
            } else {
                format!(
                    "unknown agent {agent:?}; agents: {}",
                    env.possible_agents().join(", ")
                )
            };
            return Err(bad(why, action));
        }
        let space = env.action_space(agent)?;
        space
            .check(action)
            .map_err(|r| bad(format!("agent {agent:?}: {r}"), action))?;
    }
    if let Some(missing) = to_act.iter().find(|a| !actions.contains_key(*a)) {
        return Err(bad(format!("no action for agent {missing:?}"), &[]));
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------
// Turn-based games
// ------------------------------------------------------------------------------------------

/// What one move of a turn-based game returns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TurnOutcome {
    /// Reward of every agent for this move (absent: 0).
    pub rewards: AgentMap<f64>,
    /// The game reached a terminal state.
    pub terminated: bool,
    /// The game was cut short.
    pub truncated: bool,
}

/// A game in which one agent moves at a time (PettingZoo's AEC shape, with the game ending for
/// every agent at once).
pub trait TurnBasedEnv: Send {
    /// Registry id.
    fn id(&self) -> &str;
    /// The players, in a fixed order.
    fn possible_agents(&self) -> &[AgentId];
    /// `agent`'s observation space.
    fn observation_space(&self, agent: &str) -> Result<&Space, EnvError>;
    /// `agent`'s action space.
    fn action_space(&self, agent: &str) -> Result<&Space, EnvError>;
    /// Starts a game.
    fn reset(&mut self, seed: Option<u64>, options: Option<&Kwargs>) -> Result<(), EnvError>;
    /// The agent to move (PettingZoo's `agent_selection`); `None` once the game is over.
    fn to_move(&self) -> Option<&str>;
    /// What `agent` observes now.
    fn observe(&self, agent: &str) -> Vec<f32>;
    /// Plays the move of the agent to move.
    fn play(&mut self, action: &[f32]) -> Result<TurnOutcome, EnvError>;
    /// State for bit-identical resume.
    fn snapshot(&self) -> Result<Value, EnvError>;
    /// Restores a [`snapshot`](Self::snapshot).
    fn restore(&mut self, snapshot: &Value) -> Result<(), EnvError>;
}

/// A turn-based game as a [`MultiAgentEnv`]: the observations hold only the agent to move,
/// which is the only one to act; each step's rewards go to every agent (so an agent's reward
/// between two of its moves is the sum over the steps in between); when the game ends every
/// agent gets its final observation and its termination or truncation.
pub struct TurnBased<E> {
    game: E,
    agents: Vec<AgentId>,
    to_act: Vec<AgentId>,
}

impl<E: TurnBasedEnv> TurnBased<E> {
    /// Wraps `game`.
    pub fn new(game: E) -> Self {
        Self {
            game,
            agents: Vec::new(),
            to_act: Vec::new(),
        }
    }
    /// The wrapped game.
    pub fn game(&self) -> &E {
        &self.game
    }
    fn sync_to_act(&mut self) {
        self.to_act = self
            .game
            .to_move()
            .map(|a| vec![a.to_string()])
            .unwrap_or_default();
    }
}

impl<E: TurnBasedEnv> MultiAgentEnv for TurnBased<E> {
    fn id(&self) -> &str {
        self.game.id()
    }
    fn possible_agents(&self) -> &[AgentId] {
        self.game.possible_agents()
    }
    fn agents(&self) -> &[AgentId] {
        &self.agents
    }
    fn agents_to_act(&self) -> &[AgentId] {
        &self.to_act
    }
    fn observation_space(&self, agent: &str) -> Result<&Space, EnvError> {
        self.game.observation_space(agent)
    }
    fn action_space(&self, agent: &str) -> Result<&Space, EnvError> {
        self.game.action_space(agent)
    }
    fn reset(
        &mut self,
        seed: Option<u64>,
        options: Option<&Kwargs>,
    ) -> Result<(AgentMap<Vec<f32>>, AgentMap<Info>), EnvError> {
        self.game.reset(seed, options)?;
        self.agents = self.game.possible_agents().to_vec();
        self.sync_to_act();
        let obs = self
            .to_act
            .iter()
            .map(|a| (a.clone(), self.game.observe(a)))
            .collect();
        let infos = self
            .agents
            .iter()
            .map(|a| (a.clone(), Info::new()))
            .collect();
        Ok((obs, infos))
    }
    fn step(&mut self, actions: &AgentMap<Vec<f32>>) -> Result<MultiStep, EnvError> {
        if self.to_act.is_empty() {
            return Err(EnvError::NeedsReset {
                env: self.id().to_string(),
                reason: "step after the game ended; call reset".into(),
            });
        }
        check_actions(&*self, actions)?;
        let mover = self.to_act[0].clone();
        let out = self.game.play(&actions[&mover])?;
        let over = out.terminated || out.truncated || self.game.to_move().is_none();
        let mut s = MultiStep::default();
        for a in &self.agents {
            s.rewards
                .insert(a.clone(), out.rewards.get(a).copied().unwrap_or(0.0));
        }
        self.sync_to_act();
        let shown: Vec<AgentId> = if over {
            self.agents.clone()
        } else {
            self.to_act.clone()
        };
        for a in shown {
            s.obs.insert(a.clone(), self.game.observe(&a));
            s.terminations.insert(a.clone(), over && out.terminated);
            // A game that stops without a terminal state (no one to move) is cut short.
            s.truncations.insert(a.clone(), over && !out.terminated);
            s.infos.insert(a, Info::new());
        }
        if over {
            self.agents.clear();
            self.to_act.clear();
        }
        Ok(s)
    }
    fn snapshot(&self) -> Result<Value, EnvError> {
        Ok(json!({"game": self.game.snapshot()?, "agents": self.agents}))
    }
    fn restore(&mut self, snap: &Value) -> Result<(), EnvError> {
        let game = snap.get("game").ok_or_else(|| EnvError::InvalidState {
            env: self.id().to_string(),
            reason: "snapshot lacks field \"game\"".into(),
        })?;
        self.game.restore(game)?;
        self.agents = snap_field(self.game.id(), snap, "agents")?;
        self.sync_to_act();
        Ok(())
    }
}

// ------------------------------------------------------------------------------------------
// RLlib's make_multi_agent
// ------------------------------------------------------------------------------------------

/// N independent copies of a single-agent env as one multi-agent env (RLlib's
/// `make_multi_agent`): agent `"i"` lives in copy `i`, an agent that finishes stops acting, and
/// the episode is over when every copy has finished. `reset(seed)` gives copy `i` the seed
/// `seed + i` (RLlib passes the same seed to every copy, which would start all of them in the
/// same state), so agent `"0"` plays exactly the single-agent env seeded `seed`.
pub struct IndependentCopies {
    id: String,
    copies: Vec<Box<dyn Env>>,
    possible: Vec<AgentId>,
    live: Vec<AgentId>,
    obs_dim: usize,
}

impl IndependentCopies {
    /// `copies` as agents `"0"`, `"1"`, …; they must share their spaces.
    pub fn new(id: &str, copies: Vec<Box<dyn Env>>) -> Result<Self, EnvError> {
        let first = copies
            .first()
            .ok_or_else(|| EnvError::Make(format!("{id}: num_agents must be at least 1")))?;
        let (os, acs) = (first.observation_space(), first.action_space());
        if let Some(e) = copies
            .iter()
            .find(|e| e.observation_space() != os || e.action_space() != acs)
        {
            return Err(EnvError::Make(format!(
                "{id}: every copy must share its spaces; {} differs",
                e.id()
            )));
        }
        let obs_dim = os.raw_dim();
        Ok(Self {
            id: id.to_string(),
            possible: (0..copies.len()).map(|i| i.to_string()).collect(),
            live: Vec::new(),
            copies,
            obs_dim,
        })
    }

    fn index(&self, agent: &str) -> Result<usize, EnvError> {
        self.possible
            .iter()
            .position(|a| a == agent)
            .ok_or_else(|| unknown_agent(&self.id, agent, &self.possible))
    }
}

impl MultiAgentEnv for IndependentCopies {
    fn id(&self) -> &str {
        &self.id
    }
    fn possible_agents(&self) -> &[AgentId] {
        &self.possible
    }
    fn agents(&self) -> &[AgentId] {
        &self.live
    }
    fn observation_space(&self, agent: &str) -> Result<&Space, EnvError> {
        Ok(self.copies[self.index(agent)?].observation_space())
    }
    fn action_space(&self, agent: &str) -> Result<&Space, EnvError> {
        Ok(self.copies[self.index(agent)?].action_space())
    }
    fn reset(
        &mut self,
        seed: Option<u64>,
        options: Option<&Kwargs>,
    ) -> Result<(AgentMap<Vec<f32>>, AgentMap<Info>), EnvError> {
        let (mut obs, mut infos) = (AgentMap::new(), AgentMap::new());
        for (i, env) in self.copies.iter_mut().enumerate() {
            let mut o = vec![0.0; self.obs_dim];
            let info = env.reset(seed.map(|s| s.wrapping_add(i as u64)), options, &mut o)?;
            obs.insert(self.possible[i].clone(), o);
            infos.insert(self.possible[i].clone(), info);
        }
        self.live = self.possible.clone();
        Ok((obs, infos))
    }
    fn step(&mut self, actions: &AgentMap<Vec<f32>>) -> Result<MultiStep, EnvError> {
        check_actions(&*self, actions)?;
        let mut s = MultiStep::default();
        for (agent, action) in actions {
            let i = self.index(agent)?;
            let mut o = vec![0.0; self.obs_dim];
            let st = self.copies[i].step(action, &mut o)?;
            s.obs.insert(agent.clone(), o);
            s.rewards.insert(agent.clone(), st.reward);
            s.terminations.insert(agent.clone(), st.terminated);
            s.truncations.insert(agent.clone(), st.truncated);
            s.infos.insert(agent.clone(), st.info);
        }
        self.live.retain(|a| !s.done(a));
        Ok(s)
    }
    fn render(&self) -> Option<String> {
        self.copies[0].render()
    }
    fn snapshot(&self) -> Result<Value, EnvError> {
        let copies = self
            .copies
            .iter()
            .map(|e| e.snapshot())
            .collect::<Result<Vec<_>, _>>()?;
        Ok(json!({"copies": copies, "live": self.live}))
    }
    fn restore(&mut self, snap: &Value) -> Result<(), EnvError> {
        let copies: Vec<Value> = snap_field(&self.id, snap, "copies")?;
        if copies.len() != self.copies.len() {
            return Err(EnvError::InvalidState {
                env: self.id.clone(),
                reason: format!(
                    "snapshot holds {} copies, the env has {}",
                    copies.len(),
                    self.copies.len()
                ),
            });
        }
        for (e, s) in self.copies.iter_mut().zip(&copies) {
            e.restore(s)?;
        }
        let live: Vec<AgentId> = snap_field(&self.id, snap, "live")?;
        if let Some(a) = live.iter().find(|a| !self.possible.contains(a)) {
            return Err(unknown_agent(&self.id, a, &self.possible));
        }
        self.live = live;
        Ok(())
    }
}

// ------------------------------------------------------------------------------------------
// Vectorized
// ------------------------------------------------------------------------------------------

/// One finished episode of a [`MultiAgentVecEnv`] env.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MultiAgentEpisode {
    /// Index of the env in the vector.
    pub env: usize,
    /// Each agent's return (sum of its rewards).
    pub returns: AgentMap<f64>,
    /// Each agent's number of actions.
    pub lengths: AgentMap<usize>,
    /// Env steps of the episode.
    pub len: usize,
}

impl MultiAgentEpisode {
    /// The sum of the agents' returns (`charts/episodic_return` of a multi-agent run).
    pub fn total_return(&self) -> f64 {
        self.returns.values().sum()
    }
}

/// Several multi-agent envs stepped together, with same-step auto-reset: when an env's episode
/// is over after a step, [`last`](Self::last) keeps that step (final observations included),
/// the env is reset and [`obs`](Self::obs) holds the first observations of the next episode.
pub struct MultiAgentVecEnv {
    envs: Vec<Box<dyn MultiAgentEnv>>,
    obs: Vec<AgentMap<Vec<f32>>>,
    last: Vec<MultiStep>,
    ended: Vec<bool>,
    returns: Vec<AgentMap<f64>>,
    lengths: Vec<AgentMap<usize>>,
    steps_in_episode: Vec<usize>,
    episodes: Vec<MultiAgentEpisode>,
    needs_reset: bool,
    steps: u64,
}

fn check_finite(
    env: &dyn MultiAgentEnv,
    s: &MultiStep,
    obs: &AgentMap<Vec<f32>>,
) -> Result<(), EnvError> {
    let bad = |reason: String| EnvError::BadOutput {
        env: env.id().to_string(),
        reason,
    };
    for (a, o) in obs {
        if let Some(i) = o.iter().position(|v| !v.is_finite()) {
            return Err(bad(format!(
                "agent {a:?}: observation element {i} is {}",
                o[i]
            )));
        }
    }
    for (a, r) in &s.rewards {
        if !r.is_finite() {
            return Err(bad(format!("agent {a:?}: reward is {r}")));
        }
    }
    Ok(())
}

impl MultiAgentVecEnv {
    /// `envs` stepped on the calling thread; they must have the same agents and spaces.
    pub fn new(envs: Vec<Box<dyn MultiAgentEnv>>) -> Result<Self, EnvError> {
        let first = envs
            .first()
            .ok_or_else(|| EnvError::Make("a vector env needs at least one env".into()))?;
        let agents = first.possible_agents().to_vec();
        for e in &envs[1..] {
            let same = e.possible_agents() == agents.as_slice()
                && agents.iter().all(|a| {
                    e.observation_space(a).ok() == first.observation_space(a).ok()
                        && e.action_space(a).ok() == first.action_space(a).ok()
                });
            if !same {
                return Err(EnvError::Make(format!(
                    "all envs of a vector env must share agents and spaces; {} differs",
                    e.id()
                )));
            }
        }
        let n = envs.len();
        Ok(Self {
            envs,
            obs: vec![AgentMap::new(); n],
            last: vec![MultiStep::default(); n],
            ended: vec![false; n],
            returns: vec![AgentMap::new(); n],
            lengths: vec![AgentMap::new(); n],
            steps_in_episode: vec![0; n],
            episodes: Vec::new(),
            needs_reset: true,
            steps: 0,
        })
    }

    /// Number of envs.
    pub fn num_envs(&self) -> usize {
        self.envs.len()
    }
    /// The envs.
    pub fn envs(&self) -> &[Box<dyn MultiAgentEnv>] {
        &self.envs
    }
    /// Every agent that may appear (the same in every env).
    pub fn possible_agents(&self) -> &[AgentId] {
        self.envs[0].possible_agents()
    }
    /// `agent`'s observation space.
    pub fn observation_space(&self, agent: &str) -> Result<&Space, EnvError> {
        self.envs[0].observation_space(agent)
    }
    /// `agent`'s action space.
    pub fn action_space(&self, agent: &str) -> Result<&Space, EnvError> {
        self.envs[0].action_space(agent)
    }

    /// Resets every env; env `i` gets `seed + i` when a seed is given.
    pub fn reset(&mut self, seed: Option<u64>) -> Result<&[AgentMap<Vec<f32>>], EnvError> {
        for i in 0..self.envs.len() {
            let env = &mut self.envs[i];
            let (obs, _) = guarded(i, self.steps, || {
                env.reset(seed.map(|s| s.wrapping_add(i as u64)), None)
            })
            .map_err(|e| self.named(e))?;
            self.obs[i] = obs;
            self.start_episode(i);
        }
        self.needs_reset = false;
        Ok(&self.obs)
    }

    fn start_episode(&mut self, i: usize) {
        self.returns[i].clear();
        self.lengths[i].clear();
        self.steps_in_episode[i] = 0;
    }

    /// Steps env `i` with `actions[i]` (one action per agent to act, raw encoding). Every
    /// env's actions are checked before any env moves.
    pub fn step(&mut self, actions: &[AgentMap<Vec<f32>>]) -> Result<(), EnvError> {
        if self.needs_reset {
            return Err(EnvError::NeedsReset {
                env: self.envs[0].id().to_string(),
                reason: "MultiAgentVecEnv::step called before reset".into(),
            });
        }
        if actions.len() != self.envs.len() {
            return Err(EnvError::InvalidAction {
                env: self.envs[0].id().to_string(),
                action: Vec::new(),
                reason: format!(
                    "expected actions for {} envs, got {}",
                    self.envs.len(),
                    actions.len()
                ),
            });
        }
        for (env, a) in self.envs.iter().zip(actions) {
            check_actions(env.as_ref(), a)?;
        }
        self.steps += 1;
        let step = self.steps;
        for (i, a) in actions.iter().enumerate() {
            let env = &mut self.envs[i];
            let r = guarded(i, step, || {
                let s = env.step(a)?;
                check_finite(env.as_ref(), &s, &s.obs)?;
                let next = if env.episode_over() {
                    let (obs, _) = env.reset(None, None)?;
                    check_finite(env.as_ref(), &MultiStep::default(), &obs)?;
                    Some(obs)
                } else {
                    None
                };
                Ok((s, next))
            });
            let (s, next) = match r {
                Ok(x) => x,
                Err(e) => {
                    self.needs_reset = true;
                    return Err(self.named(e));
                }
            };
            self.steps_in_episode[i] += 1;
            for (agent, r) in &s.rewards {
                *self.returns[i].entry(agent.clone()).or_default() += r;
            }
            for agent in a.keys() {
                *self.lengths[i].entry(agent.clone()).or_default() += 1;
            }
            self.ended[i] = next.is_some();
            match next {
                Some(obs) => {
                    self.episodes.push(MultiAgentEpisode {
                        env: i,
                        returns: std::mem::take(&mut self.returns[i]),
                        lengths: std::mem::take(&mut self.lengths[i]),
                        len: self.steps_in_episode[i],
                    });
                    self.start_episode(i);
                    self.obs[i] = obs;
                }
                None => {
                    // Agents still to act keep their new observations; finished ones drop out.
                    let to_act = self.envs[i].agents_to_act();
                    self.obs[i] = s
                        .obs
                        .iter()
                        .filter(|(a, _)| to_act.contains(*a))
                        .map(|(a, o)| (a.clone(), o.clone()))
                        .collect();
                }
            }
            self.last[i] = s;
        }
        Ok(())
    }

    fn named(&self, mut e: EnvError) -> EnvError {
        if let EnvError::InVector { env, index, .. } = &mut e
            && let Some(x) = self.envs.get(*index)
        {
            *env = x.id().to_string();
        }
        e
    }

    /// Each env's observations of the agents to act next (after auto-reset).
    pub fn obs(&self) -> &[AgentMap<Vec<f32>>] {
        &self.obs
    }
    /// The last step of env `i` (its final observations when the episode ended in it).
    pub fn last(&self, i: usize) -> &MultiStep {
        &self.last[i]
    }
    /// Whether env `i`'s episode ended in the last step (and it was reset).
    pub fn ended(&self, i: usize) -> bool {
        self.ended[i]
    }
    /// Env `i`'s global state, if it has one.
    pub fn state(&self, i: usize) -> Option<Vec<f32>> {
        self.envs[i].state()
    }
    /// Episodes finished since the last call.
    pub fn drain_episodes(&mut self) -> Vec<MultiAgentEpisode> {
        std::mem::take(&mut self.episodes)
    }

    /// Full state of every env (its snapshot, its current observations and episode sums).
    pub fn snapshots(&self) -> Result<Vec<Value>, EnvError> {
        (0..self.envs.len())
            .map(|i| {
                Ok(json!({
                    "env": self.envs[i].snapshot()?,
                    "obs": self.obs[i],
                    "returns": self.returns[i],
                    "lengths": self.lengths[i],
                    "steps_in_episode": self.steps_in_episode[i],
                }))
            })
            .collect()
    }

    /// Restores what [`snapshots`](Self::snapshots) returned; the count must match.
    pub fn restore_snapshots(&mut self, snaps: &[Value]) -> Result<(), EnvError> {
        let id = self.envs[0].id().to_string();
        if snaps.len() != self.envs.len() {
            return Err(EnvError::InvalidState {
                env: id,
                reason: format!(
                    "checkpoint holds {} envs, the run has {}",
                    snaps.len(),
                    self.envs.len()
                ),
            });
        }
        for (i, s) in snaps.iter().enumerate() {
            let env = s.get("env").ok_or_else(|| EnvError::InvalidState {
                env: id.clone(),
                reason: format!("env entry {i} lacks field \"env\""),
            })?;
            self.envs[i].restore(env)?;
            self.obs[i] = snap_field(&id, s, "obs")?;
            self.returns[i] = snap_field(&id, s, "returns")?;
            self.lengths[i] = snap_field(&id, s, "lengths")?;
            self.steps_in_episode[i] = snap_field(&id, s, "steps_in_episode")?;
        }
        self.needs_reset = false;
        Ok(())
    }
}

// ------------------------------------------------------------------------------------------
// Built-in policies
// ------------------------------------------------------------------------------------------

/// A fixed policy for one agent that never learns: a built-in one (an opponent such as
/// rock-paper-scissors' `beat_last`), drawing from the generator it is given, or a policy
/// loaded from a checkpoint. One instance plays one agent in one env, so it may remember the
/// episode so far.
pub trait HeuristicPolicy: Send {
    /// The policy's name (`always_same`, `beat_last`, …).
    fn name(&self) -> &str;
    /// A new episode begins.
    fn reset(&mut self, _rng: &mut Rng) {}
    /// The action for `obs` (raw encodings).
    fn act(&mut self, obs: &[f32], rng: &mut Rng) -> Result<Vec<f32>, crate::algorithm::RlError>;
    /// A fresh instance of the same policy (for another env, e.g. an evaluation env).
    fn fresh(&self) -> Box<dyn HeuristicPolicy>;
    /// What the policy remembers of the episode, for checkpoints.
    fn save(&self) -> Value {
        Value::Null
    }
    /// Restores what [`save`](Self::save) returned.
    fn load(&mut self, _state: &Value) -> Result<(), EnvError> {
        Ok(())
    }
}

/// Mean per-episode returns of a multi-agent evaluation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MultiAgentEval {
    /// Mean over episodes of the sum over agents.
    pub mean_return: f64,
    /// Mean return of each agent.
    pub per_agent: AgentMap<f64>,
    /// Mean over episodes of the sum over each policy's agents.
    pub per_policy: BTreeMap<String, f64>,
    /// Each episode's sum over agents and its length in env steps.
    pub episodes: Vec<(f64, usize)>,
}

/// A multi-agent run as the CLI and the tests drive it (the multi-agent counterpart of
/// [`crate::algorithm::Algorithm`]).
pub trait MultiAgentAlgorithm {
    /// The algorithm's name (`ppo`, …).
    fn name(&self) -> &str;
    /// The envs, the policy map, heuristics and counters.
    fn core(&self) -> &MultiAgentCore;
    /// The same, to change.
    fn core_mut(&mut self) -> &mut MultiAgentCore;
    /// Env steps so far (vector-env steps × envs).
    fn num_timesteps(&self) -> u64 {
        self.core().num_timesteps
    }
    /// The budget the schedules are relative to.
    fn total_timesteps(&self) -> u64 {
        self.core().total_timesteps
    }
    /// Changes the budget (resuming with more steps).
    fn set_total_timesteps(&mut self, total: u64) {
        self.core_mut().total_timesteps = total;
    }
    /// The policies and which agent each acts for.
    fn policy_map(&self) -> &PolicyMap {
        &self.core().map
    }
    /// One iteration; its metrics.
    fn train(&mut self) -> Result<crate::logger::Metrics, crate::algorithm::RlError>;
    /// Actions of policy `policy` for raw observations (rows of its observation space); the
    /// greedy action (the mode) when `deterministic`, Box actions clipped to the bounds.
    fn predict(
        &mut self,
        policy: &str,
        obs: &[f32],
        deterministic: bool,
    ) -> Result<Vec<f32>, crate::algorithm::RlError>;
    /// [`predict`](Self::predict) for one agent's observation, continuing from the state the
    /// caller keeps for it (a recurrent policy's; empty at the agent's episode start), updated
    /// in place. Stateless policies ignore `state`.
    fn predict_with_state(
        &mut self,
        policy: &str,
        obs: &[f32],
        state: &mut Vec<f32>,
        deterministic: bool,
    ) -> Result<Vec<f32>, crate::algorithm::RlError> {
        let _ = state;
        self.predict(policy, obs, deterministic)
    }
    /// Mean returns of `n_episodes` on `env`, episode `e` reset with `seed + e`: learned
    /// policies act deterministically (or not), heuristics as in training with their own
    /// generator.
    fn evaluate(
        &mut self,
        env: &mut dyn MultiAgentEnv,
        n_episodes: usize,
        deterministic: bool,
        seed: u64,
    ) -> Result<MultiAgentEval, crate::algorithm::RlError>;
    /// Writes a checkpoint directory: `config.yaml`, each learned policy's files under
    /// `policies/<id>/`, `state.json`.
    fn save(&self, dir: &std::path::Path) -> Result<(), crate::algorithm::RlError>;
}

/// Checks an action a heuristic gave against the agent's space (a heuristic built for another
/// env is an error naming both).
pub fn check_heuristic_action(
    env: &str,
    policy: &str,
    space: &Space,
    action: &[f32],
) -> Result<(), EnvError> {
    check_action(env, space, action).map_err(|e| match e {
        EnvError::InvalidAction {
            env,
            action,
            reason,
        } => EnvError::InvalidAction {
            env,
            action,
            reason: format!("heuristic policy {policy:?}: {reason}"),
        },
        other => other,
    })
}

// ------------------------------------------------------------------------------------------
// Policies and their mapping to agents (the run config's `multi_agent:` table)
// ------------------------------------------------------------------------------------------

/// What one policy of a multi-agent run is: learned by the run's algorithm (with its own
/// `algo_kwargs` overrides), or frozen: a built-in heuristic or a saved checkpoint.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicySpec {
    /// Keys that override the run's `algo_kwargs` for this policy.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub algo_kwargs: serde_json::Map<String, Value>,
    /// A built-in policy of the env (e.g. `rps_v2`'s `beat_last`); never trained.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heuristic: Option<String>,
    /// A checkpoint directory whose policy acts, frozen and deterministic (any algorithm with
    /// the agents' spaces; a multi-agent checkpoint gives its policy `checkpoint_policy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<std::path::PathBuf>,
    /// Which policy of a multi-agent `checkpoint` acts (default: the one with this id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_policy: Option<String>,
}

impl PolicySpec {
    /// Frozen policies act but never learn.
    pub fn is_frozen(&self) -> bool {
        self.heuristic.is_some() || self.checkpoint.is_some()
    }
}

/// Which policy acts for each agent: `shared` (every agent, one policy), or a table from
/// agent ids to policy ids in which a key ending in `*` matches every agent id with that
/// prefix (`"*"` alone: every agent); an exact id wins over a pattern, a longer prefix over a
/// shorter one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PolicyMapping {
    /// `shared`.
    Named(String),
    /// Agent id or pattern → policy id.
    Table(BTreeMap<String, String>),
}

impl Default for PolicyMapping {
    fn default() -> Self {
        PolicyMapping::Named("shared".into())
    }
}

/// The `multi_agent:` table of a run config (RLlib's `config.multi_agent(...)`):
/// `policies: {p0: {}, p1: {algo_kwargs: {learning_rate: 1e-3}}}`, `policy_mapping: {"0": p0,
/// "1": p1}` (or `shared`), `policies_to_train: [p0, p1]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MultiAgentConfig {
    /// Policy id → what it is (none: one learned policy, `default_policy`).
    #[serde(default)]
    pub policies: BTreeMap<String, PolicySpec>,
    /// Which policy acts for each agent (default `shared`).
    #[serde(default, alias = "policy_mapping_fn")]
    pub policy_mapping: PolicyMapping,
    /// The policies that learn (default: every policy that is not frozen).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policies_to_train: Option<Vec<String>>,
    /// MAPPO's centralized critic (on-policy algorithms): each learned policy's value
    /// function sees the agent's own observation followed by every agent's observation
    /// (`possible_agents` order, zeros for an agent without one); the actor sees only its own.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub centralized_critic: bool,
}

/// A [`MultiAgentConfig`] checked against an env: every agent has a policy, every policy id
/// is known, and the agents of a policy share their spaces.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyMap {
    /// Policy id → its settings (with `default_policy` filled in when none was given).
    pub policies: BTreeMap<String, PolicySpec>,
    /// Agent id → the policy that acts for it.
    pub agent_policy: AgentMap<String>,
    /// The policies that learn.
    pub to_train: Vec<String>,
}

impl PolicyMap {
    /// The agents `policy` acts for, in `possible_agents` order.
    pub fn agents_of<'a>(
        &'a self,
        policy: &'a str,
        possible: &'a [AgentId],
    ) -> impl Iterator<Item = &'a AgentId> + 'a {
        possible
            .iter()
            .filter(move |a| self.agent_policy.get(*a).map(String::as_str) == Some(policy))
    }
}

fn ma_err(field: &str, message: String) -> crate::config::ConfigError {
    crate::config::ConfigError::new(format!("multi_agent.{field}"), message)
}

impl MultiAgentConfig {
    /// Checks the table against `env`'s agents and spaces; errors name the agent, the policy
    /// id or the key.
    pub fn resolve(
        &self,
        env: &dyn MultiAgentEnv,
    ) -> Result<PolicyMap, crate::config::ConfigError> {
        let mut policies = self.policies.clone();
        if policies.is_empty() {
            policies.insert("default_policy".into(), PolicySpec::default());
        }
        let ids = || policies.keys().cloned().collect::<Vec<_>>().join(", ");
        for (id, p) in &policies {
            if p.heuristic.is_some() && p.checkpoint.is_some() {
                return Err(ma_err(
                    &format!("policies.{id}"),
                    "a policy is a heuristic or a checkpoint, not both".into(),
                ));
            }
            if p.checkpoint_policy.is_some() && p.checkpoint.is_none() {
                return Err(ma_err(
                    &format!("policies.{id}.checkpoint_policy"),
                    "names a policy of a multi-agent `checkpoint`, which is not given".into(),
                ));
            }
            if p.is_frozen() && !p.algo_kwargs.is_empty() {
                return Err(ma_err(
                    &format!("policies.{id}.algo_kwargs"),
                    "a frozen policy (heuristic or checkpoint) takes no algo_kwargs".into(),
                ));
            }
        }
        let possible = env.possible_agents();
        let mut agent_policy = AgentMap::new();
        match &self.policy_mapping {
            PolicyMapping::Named(name) if name == "shared" => {
                if policies.len() != 1 {
                    return Err(ma_err(
                        "policy_mapping",
                        format!(
                            "`shared` maps every agent to one policy, but policies has {}",
                            ids()
                        ),
                    ));
                }
                let only = policies.keys().next().cloned().unwrap_or_default();
                for a in possible {
                    agent_policy.insert(a.clone(), only.clone());
                }
            }
            PolicyMapping::Named(other) => {
                return Err(ma_err(
                    "policy_mapping",
                    format!("expected `shared` or a table agent → policy, got {other:?}"),
                ));
            }
            PolicyMapping::Table(table) => {
                for key in table.keys() {
                    let matches = match key.strip_suffix('*') {
                        Some(prefix) => possible.iter().any(|a| a.starts_with(prefix)),
                        None => possible.contains(key),
                    };
                    if !matches {
                        return Err(ma_err(
                            &format!("policy_mapping.{key}"),
                            format!(
                                "matches no agent of {}; agents: {}",
                                env.id(),
                                possible.join(", ")
                            ),
                        ));
                    }
                }
                for a in possible {
                    // Exact id first, then the longest matching prefix pattern.
                    let hit = table.get(a).map(|p| (a.clone(), p)).or_else(|| {
                        table
                            .iter()
                            .filter_map(|(k, p)| {
                                k.strip_suffix('*')
                                    .filter(|pre| a.starts_with(pre))
                                    .map(|pre| (pre, k, p))
                            })
                            .max_by_key(|(pre, _, _)| pre.len())
                            .map(|(_, k, p)| (k.clone(), p))
                    });
                    let Some((key, policy)) = hit else {
                        return Err(ma_err(
                            "policy_mapping",
                            format!(
                                "agent {a:?} has no policy (add it, a pattern such as \"*\", or use `shared`)"
                            ),
                        ));
                    };
                    if !policies.contains_key(policy) {
                        return Err(ma_err(
                            &format!("policy_mapping.{key}"),
                            format!("unknown policy id {policy:?}; policies: {}", ids()),
                        ));
                    }
                    agent_policy.insert(a.clone(), policy.clone());
                }
            }
        }
        for id in policies.keys() {
            let mut agents = possible.iter().filter(|a| agent_policy.get(*a) == Some(id));
            let Some(first) = agents.next() else {
                return Err(ma_err(
                    &format!("policies.{id}"),
                    "acts for no agent (policy_mapping names it nowhere)".into(),
                ));
            };
            let space = |a: &str, obs: bool| {
                let s = if obs {
                    env.observation_space(a)
                } else {
                    env.action_space(a)
                };
                s.map_err(|e| ma_err("policy_mapping", e.to_string()))
            };
            for a in agents {
                for (what, obs) in [("observation", true), ("action", false)] {
                    let (theirs, mine) = (space(first, obs)?, space(a, obs)?);
                    if mine != theirs {
                        return Err(ma_err(
                            "policy_mapping",
                            format!(
                                "policy {id:?} acts for agents {first:?} and {a:?}, whose {what} spaces differ ({} vs {})",
                                theirs.describe(),
                                mine.describe()
                            ),
                        ));
                    }
                }
            }
        }
        let to_train = match &self.policies_to_train {
            None => policies
                .iter()
                .filter(|(_, p)| !p.is_frozen())
                .map(|(id, _)| id.clone())
                .collect(),
            Some(list) => {
                for id in list {
                    match policies.get(id) {
                        None => {
                            return Err(ma_err(
                                "policies_to_train",
                                format!("unknown policy id {id:?}; policies: {}", ids()),
                            ));
                        }
                        Some(p) if p.is_frozen() => {
                            return Err(ma_err(
                                "policies_to_train",
                                format!(
                                    "policy {id:?} is a heuristic or a checkpoint and cannot be trained"
                                ),
                            ));
                        }
                        Some(_) => {}
                    }
                }
                list.clone()
            }
        };
        Ok(PolicyMap {
            policies,
            agent_policy,
            to_train,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::Step;

    /// A counter env: observation = steps so far, reward = the action, ends after `len` steps.
    struct Counter {
        t: usize,
        len: usize,
        os: Space,
        acs: Space,
    }
    impl Counter {
        fn new(len: usize) -> Self {
            Self {
                t: 0,
                len,
                os: Space::boxed(vec![0.0], vec![100.0]),
                acs: Space::discrete(3),
            }
        }
    }
    impl Env for Counter {
        fn id(&self) -> &str {
            "Counter"
        }
        fn observation_space(&self) -> &Space {
            &self.os
        }
        fn action_space(&self) -> &Space {
            &self.acs
        }
        fn reset(
            &mut self,
            seed: Option<u64>,
            _: Option<&Kwargs>,
            obs: &mut [f32],
        ) -> Result<Info, EnvError> {
            // The seed shows in the first observation, so the per-copy seeds can be checked.
            self.t = 0;
            obs[0] = seed.map(|s| s as f32).unwrap_or(-1.0);
            Ok(Info::new())
        }
        fn step(&mut self, action: &[f32], obs: &mut [f32]) -> Result<Step, EnvError> {
            self.t += 1;
            obs[0] = self.t as f32;
            Ok(Step {
                reward: action[0] as f64,
                terminated: self.t >= self.len,
                truncated: false,
                info: Info::new(),
            })
        }
        fn snapshot(&self) -> Result<Value, EnvError> {
            Ok(json!({"t": self.t}))
        }
        fn restore(&mut self, s: &Value) -> Result<(), EnvError> {
            self.t = snap_field("Counter", s, "t")?;
            Ok(())
        }
    }

    fn copies(lens: &[usize]) -> IndependentCopies {
        let envs = lens
            .iter()
            .map(|&l| Box::new(Counter::new(l)) as Box<dyn Env>)
            .collect();
        IndependentCopies::new("MultiCounter", envs).unwrap()
    }

    fn acts(pairs: &[(&str, f32)]) -> AgentMap<Vec<f32>> {
        pairs
            .iter()
            .map(|(a, v)| (a.to_string(), vec![*v]))
            .collect()
    }

    #[test]
    fn copies_seed_each_copy_and_drop_finished_agents() {
        let mut env = copies(&[1, 3]);
        let (obs, _) = env.reset(Some(10), None).unwrap();
        assert_eq!(obs["0"], vec![10.0]);
        assert_eq!(obs["1"], vec![11.0]);
        assert_eq!(env.agents(), ["0", "1"]);
        let s = env.step(&acts(&[("0", 1.0), ("1", 2.0)])).unwrap();
        assert_eq!(s.rewards["0"], 1.0);
        assert!(s.terminations["0"] && !s.terminations["1"]);
        assert_eq!(env.agents(), ["1"]);
        // The finished agent may not act again.
        let e = env
            .step(&acts(&[("0", 1.0), ("1", 2.0)]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"0\" does not act now"), "{e}");
        env.step(&acts(&[("1", 2.0)])).unwrap();
        assert!(!env.episode_over());
        let s = env.step(&acts(&[("1", 0.0)])).unwrap();
        assert_eq!(s.obs.keys().collect::<Vec<_>>(), ["1"]);
        assert!(env.episode_over());
    }

    #[test]
    fn bad_actions_name_the_agent() {
        let mut env = copies(&[2, 2]);
        env.reset(Some(0), None).unwrap();
        let e = env.step(&acts(&[("0", 1.0)])).unwrap_err().to_string();
        assert!(e.contains("no action for agent \"1\""), "{e}");
        let e = env
            .step(&acts(&[("0", 1.0), ("1", 7.0)]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("agent \"1\""), "{e}");
        let e = env
            .step(&acts(&[("0", 1.0), ("1", 1.0), ("x", 0.0)]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown agent \"x\""), "{e}");
        let e = env.observation_space("2").unwrap_err().to_string();
        assert!(e.contains("unknown agent \"2\""), "{e}");
    }

    #[test]
    fn vec_env_resets_in_the_same_step_and_sums_episodes() {
        let envs: Vec<Box<dyn MultiAgentEnv>> =
            vec![Box::new(copies(&[1, 2])), Box::new(copies(&[2, 2]))];
        let mut v = MultiAgentVecEnv::new(envs).unwrap();
        v.reset(Some(0)).unwrap();
        assert_eq!(v.obs()[1]["0"], vec![1.0]);
        v.step(&[
            acts(&[("0", 1.0), ("1", 2.0)]),
            acts(&[("0", 1.0), ("1", 1.0)]),
        ])
        .unwrap();
        assert!(!v.ended(0));
        // Env 0's agent "0" finished: only "1" acts now.
        assert_eq!(v.obs()[0].keys().collect::<Vec<_>>(), ["1"]);
        let snaps = v.snapshots().unwrap();
        v.step(&[acts(&[("1", 2.0)]), acts(&[("0", 2.0), ("1", 0.0)])])
            .unwrap();
        assert!(v.ended(0) && v.ended(1));
        // Final observations are kept, the new episode has begun.
        assert_eq!(v.last(0).obs["1"], vec![2.0]);
        assert_eq!(v.obs()[0].len(), 2);
        let eps = v.drain_episodes();
        assert_eq!(eps.len(), 2);
        assert_eq!(eps[0].returns["0"], 1.0);
        assert_eq!(eps[0].returns["1"], 4.0);
        assert_eq!(eps[0].total_return(), 5.0);
        assert_eq!(eps[0].lengths["0"], 1);
        assert_eq!(eps[0].len, 2);
        assert_eq!(eps[1].total_return(), 4.0);
        // Restoring the snapshot replays the second step exactly.
        v.restore_snapshots(&snaps).unwrap();
        assert_eq!(v.obs()[0].keys().collect::<Vec<_>>(), ["1"]);
        v.step(&[acts(&[("1", 2.0)]), acts(&[("0", 2.0), ("1", 0.0)])])
            .unwrap();
        assert_eq!(v.drain_episodes(), eps);
    }

    /// Nim with one pile: players "a" and "b" take 1 or 2 (actions 0, 1); who takes the last wins.
    struct Nim {
        pile: u32,
        turn: usize,
        agents: Vec<AgentId>,
        os: Vec<Space>,
        acs: Vec<Space>,
    }
    impl TurnBasedEnv for Nim {
        fn id(&self) -> &str {
            "Nim"
        }
        fn possible_agents(&self) -> &[AgentId] {
            &self.agents
        }
        fn observation_space(&self, a: &str) -> Result<&Space, EnvError> {
            agent_entry("Nim", &self.agents, &self.os, a)
        }
        fn action_space(&self, a: &str) -> Result<&Space, EnvError> {
            agent_entry("Nim", &self.agents, &self.acs, a)
        }
        fn reset(&mut self, _: Option<u64>, _: Option<&Kwargs>) -> Result<(), EnvError> {
            self.pile = 4;
            self.turn = 0;
            Ok(())
        }
        fn to_move(&self) -> Option<&str> {
            (self.pile > 0).then(|| self.agents[self.turn].as_str())
        }
        fn observe(&self, _: &str) -> Vec<f32> {
            vec![self.pile as f32]
        }
        fn play(&mut self, action: &[f32]) -> Result<TurnOutcome, EnvError> {
            self.pile = self.pile.saturating_sub(action[0] as u32 + 1);
            let mover = self.agents[self.turn].clone();
            let other = self.agents[1 - self.turn].clone();
            self.turn = 1 - self.turn;
            let mut out = TurnOutcome::default();
            if self.pile == 0 {
                out.rewards.insert(mover, 1.0);
                out.rewards.insert(other, -1.0);
                out.terminated = true;
            }
            Ok(out)
        }
        fn snapshot(&self) -> Result<Value, EnvError> {
            Ok(json!([self.pile, self.turn]))
        }
        fn restore(&mut self, s: &Value) -> Result<(), EnvError> {
            (self.pile, self.turn) = serde_json::from_value(s.clone()).unwrap();
            Ok(())
        }
    }

    #[test]
    fn turn_based_games_let_only_the_mover_act() {
        let nim = Nim {
            pile: 0,
            turn: 0,
            agents: vec!["a".into(), "b".into()],
            os: vec![Space::boxed(vec![0.0], vec![4.0]); 2],
            acs: vec![Space::discrete(2); 2],
        };
        let mut env = TurnBased::new(nim);
        let (obs, _) = env.reset(None, None).unwrap();
        assert_eq!(obs.keys().collect::<Vec<_>>(), ["a"]);
        let e = env.step(&acts(&[("b", 0.0)])).unwrap_err().to_string();
        assert!(e.contains("\"b\" does not act now"), "{e}");
        let s = env.step(&acts(&[("a", 1.0)])).unwrap(); // takes 2: pile 2
        assert_eq!(s.obs.keys().collect::<Vec<_>>(), ["b"]);
        assert_eq!(s.obs["b"], vec![2.0]);
        assert_eq!(
            s.rewards,
            AgentMap::from([("a".into(), 0.0), ("b".into(), 0.0)])
        );
        let snap = env.snapshot().unwrap();
        let s = env.step(&acts(&[("b", 1.0)])).unwrap(); // b takes the last two and wins
        assert_eq!(s.obs.len(), 2, "both players see the end");
        assert_eq!((s.rewards["a"], s.rewards["b"]), (-1.0, 1.0));
        assert!(s.terminations["a"] && s.terminations["b"]);
        assert!(env.episode_over());
        assert!(env.step(&acts(&[("a", 0.0)])).is_err());
        env.restore(&snap).unwrap();
        assert_eq!(env.agents_to_act(), ["b"]);
        assert_eq!(env.step(&acts(&[("b", 1.0)])).unwrap(), s);
    }
    fn two_space_env() -> TurnBased<Nim> {
        let mut nim = Nim {
            pile: 0,
            turn: 0,
            agents: vec!["a".into(), "b".into()],
            os: vec![Space::boxed(vec![0.0], vec![4.0]); 2],
            acs: vec![Space::discrete(2); 2],
        };
        nim.acs[1] = Space::discrete(3);
        TurnBased::new(nim)
    }

    fn resolve(
        yaml: &str,
        env: &dyn MultiAgentEnv,
    ) -> Result<PolicyMap, crate::config::ConfigError> {
        let cfg: MultiAgentConfig = serde_json::from_str(yaml).unwrap();
        cfg.resolve(env)
    }

    #[test]
    fn policy_mapping_defaults_patterns_and_training() {
        let env = copies(&[1, 1, 1]);
        let m = resolve("{}", &env).unwrap();
        assert_eq!(
            m.agent_policy.values().collect::<Vec<_>>(),
            ["default_policy"; 3]
        );
        assert_eq!(m.to_train, ["default_policy"]);
        let m = resolve(
            r#"{"policies": {"p0": {}, "rest": {}, "opp": {"heuristic": "beat_last"}},
                "policy_mapping": {"0": "p0", "*": "rest", "2": "opp"}}"#,
            &env,
        )
        .unwrap();
        assert_eq!(m.agent_policy["0"], "p0");
        assert_eq!(m.agent_policy["1"], "rest");
        assert_eq!(m.agent_policy["2"], "opp");
        assert_eq!(m.to_train, ["p0", "rest"], "the heuristic is frozen");
        assert_eq!(
            m.agents_of("rest", env.possible_agents())
                .collect::<Vec<_>>(),
            ["1"]
        );
    }

    #[test]
    fn bad_mappings_name_the_agent_the_policy_or_the_space() {
        let env = copies(&[1, 1]);
        let err = |yaml: &str, env: &dyn MultiAgentEnv| resolve(yaml, env).unwrap_err().to_string();
        let e = err(
            r#"{"policies": {"p0": {}, "p1": {}}, "policy_mapping": {"0": "p0"}}"#,
            &env,
        );
        assert!(e.contains("agent \"1\" has no policy"), "{e}");
        let e = err(
            r#"{"policies": {"p0": {}}, "policy_mapping": {"0": "p0", "1": "p9"}}"#,
            &env,
        );
        assert!(
            e.contains("multi_agent.policy_mapping.1") && e.contains("unknown policy id \"p9\""),
            "{e}"
        );
        let e = err(
            r#"{"policies": {"p0": {}}, "policy_mapping": {"7": "p0", "*": "p0"}}"#,
            &env,
        );
        assert!(
            e.contains("policy_mapping.7") && e.contains("matches no agent"),
            "{e}"
        );
        let e = err(r#"{"policies": {"p0": {}, "p1": {}}}"#, &env);
        assert!(e.contains("`shared`") && e.contains("p0, p1"), "{e}");
        let e = err(
            r#"{"policies": {"p0": {}, "p1": {}}, "policy_mapping": {"*": "p0"}}"#,
            &env,
        );
        assert!(
            e.contains("policies.p1") && e.contains("acts for no agent"),
            "{e}"
        );
        let e = err(
            r#"{"policies": {"p0": {}}, "policies_to_train": ["p1"]}"#,
            &env,
        );
        assert!(
            e.contains("policies_to_train") && e.contains("\"p1\""),
            "{e}"
        );
        let e = err(
            r#"{"policies": {"h": {"heuristic": "beat_last"}}, "policies_to_train": ["h"]}"#,
            &env,
        );
        assert!(e.contains("cannot be trained"), "{e}");
        let e = err(
            r#"{"policies": {"h": {"heuristic": "x", "algo_kwargs": {"gamma": 0.9}}}}"#,
            &env,
        );
        assert!(e.contains("policies.h.algo_kwargs"), "{e}");
        let e = err(r#"{"policy_mapping": "everyone"}"#, &env);
        assert!(
            e.contains("policy_mapping") && e.contains("everyone"),
            "{e}"
        );
        // Agents whose action spaces differ cannot share a policy.
        let e = err("{}", &two_space_env());
        assert!(
            e.contains("\"a\" and \"b\"") && e.contains("action spaces differ"),
            "{e}"
        );
        let bad: Result<MultiAgentConfig, _> = serde_json::from_str(r#"{"policy": {}}"#);
        assert!(
            bad.unwrap_err()
                .to_string()
                .contains("unknown field `policy`")
        );
    }
}
