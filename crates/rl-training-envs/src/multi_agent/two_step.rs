//! The two-step cooperative matrix game of the QMIX paper (Rashid et al. 2018), as RLlib's
//! `TwoStepGame` example env.

use rl_training_core::env::{EnvError, Info, Kwargs, check_kwargs, kwarg, snap_field};
use rl_training_core::multi_agent::{
    AgentId, AgentMap, AgentTable, MultiAgentEnv, MultiStep, check_actions,
};
use rl_training_core::spaces::Space;
use serde_json::{Value, json};

const ID: &str = "TwoStepGame";

/// Agents `"0"` and `"1"`, actions `Discrete(2)`. In the first state agent 0's action picks
/// the second state (agent 1's is ignored): 0 leads to state 2A, which pays 7 whatever both do;
/// 1 leads to 2B, which pays 0 for (0, 0), 8 for (1, 1) and 1 otherwise. Each agent gets half
/// the payoff, so the team's optimum is 8 and the safe choice 7. Observations: `Discrete(6)`,
/// the state's index (agent 1: index + 3); with `one_hot_state_encoding`,
/// `MultiDiscrete([2, 2, 2, 3])`, the one-hot state and the agent's number (1 or 2). `state()`
/// is the one-hot state (for a centralized critic; RLlib's `separate_state_space`).
pub struct TwoStepGame {
    one_hot: bool,
    state: usize,
    agents: AgentTable,
    state_space: Space,
}

impl TwoStepGame {
    /// The game; `one_hot` selects RLlib's `one_hot_state_encoding`.
    pub fn new(one_hot: bool) -> Self {
        let obs = if one_hot {
            Space::MultiDiscrete {
                nvec: vec![2, 2, 2, 3],
            }
        } else {
            Space::discrete(6)
        };
        Self {
            one_hot,
            state: 0,
            agents: AgentTable::uniform(ID, vec!["0".into(), "1".into()], obs, Space::discrete(2)),
            state_space: Space::uniform_box(0.0, 1.0, &[3]),
        }
    }

    /// From `make` keyword arguments (`one_hot_state_encoding`).
    pub fn from_kwargs(kw: &Kwargs) -> Result<Box<dyn MultiAgentEnv>, EnvError> {
        check_kwargs(ID, kw, &["one_hot_state_encoding"])?;
        Ok(Box::new(Self::new(
            kwarg(ID, kw, "one_hot_state_encoding")?.unwrap_or(false),
        )))
    }

    fn one_hot_state(&self) -> Vec<f32> {
        (0..3).map(|i| (i == self.state) as u8 as f32).collect()
    }

    fn obs(&self) -> AgentMap<Vec<f32>> {
        let of = |agent: usize| {
            if self.one_hot {
                let mut o = self.one_hot_state();
                o.push((agent + 1) as f32);
                o
            } else {
                vec![(self.state + 3 * agent) as f32]
            }
        };
        let p = &self.agents.possible;
        AgentMap::from([(p[0].clone(), of(0)), (p[1].clone(), of(1))])
    }
}

impl MultiAgentEnv for TwoStepGame {
    fn id(&self) -> &str {
        ID
    }
    fn possible_agents(&self) -> &[AgentId] {
        &self.agents.possible
    }
    fn agents(&self) -> &[AgentId] {
        &self.agents.live
    }
    fn observation_space(&self, agent: &str) -> Result<&Space, EnvError> {
        self.agents.observation_space(agent)
    }
    fn action_space(&self, agent: &str) -> Result<&Space, EnvError> {
        self.agents.action_space(agent)
    }
    fn state_space(&self) -> Option<&Space> {
        Some(&self.state_space)
    }
    fn state(&self) -> Option<Vec<f32>> {
        Some(self.one_hot_state())
    }
    fn reset(
        &mut self,
        _seed: Option<u64>,
        _options: Option<&Kwargs>,
    ) -> Result<(AgentMap<Vec<f32>>, AgentMap<Info>), EnvError> {
        self.state = 0;
        let infos = self.agents.start();
        Ok((self.obs(), infos))
    }
    fn step(&mut self, actions: &AgentMap<Vec<f32>>) -> Result<MultiStep, EnvError> {
        self.agents.running()?;
        check_actions(&*self, actions)?;
        let (a, b) = (actions["0"][0] as u8, actions["1"][0] as u8);
        let (payoff, over) = match self.state {
            0 => {
                self.state = if a == 0 { 1 } else { 2 };
                (0.0, false)
            }
            1 => (7.0, true),
            _ => (
                match (a, b) {
                    (0, 0) => 0.0,
                    (1, 1) => 8.0,
                    _ => 1.0,
                },
                true,
            ),
        };
        let obs = self.obs();
        Ok(self.agents.finish(obs, [payoff / 2.0; 2], over, false))
    }
    fn snapshot(&self) -> Result<Value, EnvError> {
        Ok(json!({"state": self.state, "live": self.agents.live}))
    }
    fn restore(&mut self, s: &Value) -> Result<(), EnvError> {
        let state: usize = snap_field(ID, s, "state")?;
        if state > 2 {
            return Err(EnvError::InvalidState {
                env: ID.into(),
                reason: format!("state {state} is not 0, 1 or 2"),
            });
        }
        self.state = state;
        self.agents.live = snap_field(ID, s, "live")?;
        Ok(())
    }
}
