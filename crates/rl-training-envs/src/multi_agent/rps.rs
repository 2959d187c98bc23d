//! PettingZoo's `rps_v2` (pettingzoo 1.27.0) through its Parallel API, and RLlib's two
//! heuristic opponents for it.

use rl_training_core::algorithm::RlError;
use rl_training_core::env::{EnvError, Info, Kwargs, check_kwargs, kwarg, snap_field};
use rl_training_core::multi_agent::{
    AgentId, AgentMap, AgentTable, HeuristicPolicy, MultiAgentEnv, MultiStep, check_actions,
};
use rl_training_core::rng::Rng;
use rl_training_core::spaces::Space;
use serde_json::{Value, json};

const ID: &str = "rps_v2";

/// Rock-paper-scissors (and its odd-sized extensions: lizard, Spock, …) for `player_0` and
/// `player_1`, `max_cycles` rounds (15). Actions `Discrete(num_actions)` (3: rock, paper,
/// scissors); each player observes the other's last move, `num_actions` ("none") before the
/// first round. A round gives +1 to the winner and −1 to the loser: equal moves draw; of two
/// moves of the same parity the lower wins, of different parity the higher. The game is
/// truncated (never terminated) after the last round.
pub struct Rps {
    num_actions: usize,
    max_cycles: usize,
    last: [usize; 2],
    moves: usize,
    agents: AgentTable,
}

/// Who wins a round: `(reward of player 0, reward of player 1)`.
pub fn round_rewards(a: usize, b: usize) -> (f64, f64) {
    let first_wins = if a == b {
        return (0.0, 0.0);
    } else if (a + b).is_multiple_of(2) {
        a < b
    } else {
        a > b
    };
    if first_wins { (1.0, -1.0) } else { (-1.0, 1.0) }
}

/// The lowest move that beats `m` (for three moves: paper beats rock, scissors paper, rock
/// scissors).
pub fn beating(m: usize, num_actions: usize) -> usize {
    (0..num_actions)
        .find(|&x| round_rewards(x, m).0 > 0.0)
        .unwrap_or(0)
}

impl Rps {
    /// The game with `num_actions` moves (odd, at least 3) and `max_cycles` rounds.
    pub fn new(num_actions: usize, max_cycles: usize) -> Result<Self, EnvError> {
        if num_actions < 3 || num_actions.is_multiple_of(2) {
            return Err(EnvError::Make(format!(
                "{ID}: num_actions must be odd and at least 3, got {num_actions}"
            )));
        }
        if max_cycles == 0 {
            return Err(EnvError::Make(format!(
                "{ID}: max_cycles must be at least 1"
            )));
        }
        Ok(Self {
            num_actions,
            max_cycles,
            last: [num_actions; 2],
            moves: 0,
            agents: AgentTable::uniform(
                ID,
                vec!["player_0".into(), "player_1".into()],
                Space::discrete(num_actions + 1),
                Space::discrete(num_actions),
            ),
        })
    }

    /// From `make` keyword arguments (`num_actions`, `max_cycles`; `screen_height` and
    /// `render_mode` only concern drawing).
    pub fn from_kwargs(kw: &Kwargs) -> Result<Box<dyn MultiAgentEnv>, EnvError> {
        check_kwargs(
            ID,
            kw,
            &["num_actions", "max_cycles", "screen_height", "render_mode"],
        )?;
        Ok(Box::new(Self::new(
            kwarg(ID, kw, "num_actions")?.unwrap_or(3),
            kwarg(ID, kw, "max_cycles")?.unwrap_or(15),
        )?))
    }

    fn obs(&self) -> AgentMap<Vec<f32>> {
        // Each player sees the other's last move.
        AgentMap::from([
            (self.agents.possible[0].clone(), vec![self.last[1] as f32]),
            (self.agents.possible[1].clone(), vec![self.last[0] as f32]),
        ])
    }

    fn move_name(&self, m: usize) -> String {
        const NAMES: [&str; 5] = ["ROCK", "PAPER", "SCISSORS", "SPOCK", "LIZARD"];
        match m {
            m if m == self.num_actions => "None".into(),
            m if m < 5 => NAMES[m].into(),
            m => format!("ACTION_{}", m + 1),
        }
    }
}

impl MultiAgentEnv for Rps {
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
    fn reset(
        &mut self,
        _seed: Option<u64>,
        _options: Option<&Kwargs>,
    ) -> Result<(AgentMap<Vec<f32>>, AgentMap<Info>), EnvError> {
        self.last = [self.num_actions; 2];
        self.moves = 0;
        let infos = self.agents.start();
        Ok((self.obs(), infos))
    }
    fn step(&mut self, actions: &AgentMap<Vec<f32>>) -> Result<MultiStep, EnvError> {
        self.agents.running()?;
        check_actions(&*self, actions)?;
        let p = &self.agents.possible;
        let (a, b) = (actions[&p[0]][0] as usize, actions[&p[1]][0] as usize);
        let (ra, rb) = round_rewards(a, b);
        self.last = [a, b];
        self.moves += 1;
        let over = self.moves >= self.max_cycles;
        let obs = self.obs();
        Ok(self.agents.finish(obs, [ra, rb], false, over))
    }
    fn render(&self) -> Option<String> {
        Some(format!(
            "round {}: player_0 {} vs player_1 {}",
            self.moves,
            self.move_name(self.last[0]),
            self.move_name(self.last[1])
        ))
    }
    fn snapshot(&self) -> Result<Value, EnvError> {
        Ok(json!({"last": self.last, "moves": self.moves, "live": self.agents.live}))
    }
    fn restore(&mut self, s: &Value) -> Result<(), EnvError> {
        self.last = snap_field(ID, s, "last")?;
        self.moves = snap_field(ID, s, "moves")?;
        self.agents.live = snap_field(ID, s, "live")?;
        Ok(())
    }
}

/// RLlib's `AlwaysSameHeuristic`: one move drawn at the start of each episode, played every
/// round.
pub struct AlwaysSame {
    num_actions: usize,
    choice: Option<usize>,
}

impl AlwaysSame {
    /// For a game of `num_actions` moves.
    pub fn new(num_actions: usize) -> Self {
        Self {
            num_actions,
            choice: None,
        }
    }
}

impl HeuristicPolicy for AlwaysSame {
    fn name(&self) -> &str {
        "always_same"
    }
    fn reset(&mut self, rng: &mut Rng) {
        self.choice = Some(rng.below(self.num_actions as u64) as usize);
    }
    fn fresh(&self) -> Box<dyn HeuristicPolicy> {
        Box::new(Self::new(self.num_actions))
    }
    fn save(&self) -> Value {
        json!(self.choice)
    }
    fn load(&mut self, state: &Value) -> Result<(), EnvError> {
        self.choice =
            serde_json::from_value(state.clone()).map_err(|e| EnvError::InvalidState {
                env: ID.into(),
                reason: format!("always_same's saved move: {e}"),
            })?;
        Ok(())
    }
    fn act(&mut self, _obs: &[f32], rng: &mut Rng) -> Result<Vec<f32>, RlError> {
        let n = self.num_actions as u64;
        let m = *self.choice.get_or_insert_with(|| rng.below(n) as usize);
        Ok(vec![m as f32])
    }
}

/// RLlib's `BeatLastHeuristic`: plays the move that beats the opponent's last one (a random
/// move in the first round).
pub struct BeatLast {
    num_actions: usize,
}

impl BeatLast {
    /// For a game of `num_actions` moves.
    pub fn new(num_actions: usize) -> Self {
        Self { num_actions }
    }
}

impl HeuristicPolicy for BeatLast {
    fn name(&self) -> &str {
        "beat_last"
    }
    fn fresh(&self) -> Box<dyn HeuristicPolicy> {
        Box::new(Self::new(self.num_actions))
    }
    fn act(&mut self, obs: &[f32], rng: &mut Rng) -> Result<Vec<f32>, RlError> {
        let &[last] = obs else {
            return Err(EnvError::BadOutput {
                env: ID.into(),
                reason: format!(
                    "beat_last reads one observation (the opponent's last move), got {}",
                    obs.len()
                ),
            }
            .into());
        };
        let m = if last as usize >= self.num_actions {
            rng.below(self.num_actions as u64) as usize
        } else {
            beating(last as usize, self.num_actions)
        };
        Ok(vec![m as f32])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_of_three_and_five_moves() {
        // Rock 0, paper 1, scissors 2.
        assert_eq!(round_rewards(1, 0), (1.0, -1.0));
        assert_eq!(round_rewards(0, 2), (1.0, -1.0));
        assert_eq!(round_rewards(2, 1), (1.0, -1.0));
        assert_eq!(round_rewards(2, 2), (0.0, 0.0));
        assert_eq!(round_rewards(0, 1), (-1.0, 1.0));
        assert_eq!([beating(0, 3), beating(1, 3), beating(2, 3)], [1, 2, 0]);
        // Every move of five beats exactly two others and loses to two.
        for m in 0..5 {
            let wins = (0..5).filter(|&x| round_rewards(m, x).0 > 0.0).count();
            assert_eq!(wins, 2, "move {m}");
            assert!(round_rewards(beating(m, 5), m).0 > 0.0);
        }
    }

    #[test]
    fn beat_last_wins_every_round_after_the_first_against_always_same() {
        let mut env = Rps::new(3, 15).unwrap();
        let mut rng = Rng::seed_from(3);
        let (mut same, mut beat) = (AlwaysSame::new(3), BeatLast::new(3));
        same.reset(&mut rng);
        beat.reset(&mut rng);
        let (mut obs, _) = env.reset(None, None).unwrap();
        let mut total = 0.0;
        for round in 0..15 {
            let a = same.act(&obs["player_0"], &mut rng).unwrap();
            let b = beat.act(&obs["player_1"], &mut rng).unwrap();
            let s = env
                .step(&AgentMap::from([
                    ("player_0".into(), a),
                    ("player_1".into(), b),
                ]))
                .unwrap();
            if round > 0 {
                assert_eq!(s.rewards["player_1"], 1.0, "round {round}");
            }
            total += s.rewards["player_1"];
            obs = s.obs;
        }
        assert!(total >= 13.0);
        assert!(env.episode_over());
    }
}
