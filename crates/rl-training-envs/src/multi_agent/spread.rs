//! MPE2's `simple_spread_v3` (mpe2 1.1.1), its physics in float64 in numpy's order of
//! operations: N agents cover N landmarks; every agent gets the shared reward (minus the sum
//! over landmarks of the nearest agent's distance) weighted `1 − local_ratio` plus its own
//! collision penalty (−1 per other agent closer than the two radii) weighted `local_ratio`.

use rl_training_core::env::{EnvError, Info, Kwargs, check_kwargs, kwarg, snap_field};
use rl_training_core::multi_agent::{
    AgentId, AgentMap, AgentTable, MultiAgentEnv, MultiStep, check_actions,
};
use rl_training_core::rng::Rng;
use rl_training_core::spaces::Space;
use serde_json::{Value, json};

const ID: &str = "simple_spread_v3";
const DT: f64 = 0.1;
const DAMPING: f64 = 0.25;
const CONTACT_FORCE: f64 = 1e2;
const CONTACT_MARGIN: f64 = 1e-3;
const AGENT_SIZE: f64 = 0.15;
/// Accelerations of a movement action (`agent.accel` is unset, so MPE's sensitivity 5).
const SENSITIVITY: f64 = 5.0;
const MASS: f64 = 1.0;

type V2 = [f64; 2];

/// `simple_spread_v3` with its keyword arguments `N` (3), `local_ratio` (0.5), `max_cycles`
/// (25) and `continuous_actions` (false: `Discrete(5)` = no-op, left, right, down, up; true:
/// `Box(0, 1, (5,))`, the force along x is `a[2] − a[1]`, along y `a[4] − a[3]`).
/// Observations (float32): own velocity, own position, each landmark's position relative to
/// the agent, each other agent's relative position, and the others' (always zero)
/// communication; `state()` is every agent's observation in turn.
pub struct SimpleSpread {
    n: usize,
    local_ratio: f64,
    max_cycles: usize,
    continuous: bool,
    pos: Vec<V2>,
    vel: Vec<V2>,
    landmarks: Vec<V2>,
    steps: usize,
    rng: Rng,
    agents: AgentTable,
    state_space: Space,
}

/// numpy's `logaddexp(0, v)`.
fn logaddexp0(v: f64) -> f64 {
    if v == 0.0 {
        return std::f64::consts::LN_2;
    }
    let tmp = -v;
    if tmp > 0.0 {
        (v).exp().ln_1p()
    } else {
        v + (-v).exp().ln_1p()
    }
}

fn dist(a: V2, b: V2) -> f64 {
    let d = [a[0] - b[0], a[1] - b[1]];
    (d[0] * d[0] + d[1] * d[1]).sqrt()
}

impl SimpleSpread {
    /// The env with `n` agents and landmarks.
    pub fn new(
        n: usize,
        local_ratio: f64,
        max_cycles: usize,
        continuous: bool,
    ) -> Result<Self, EnvError> {
        if n == 0 {
            return Err(EnvError::Make(format!("{ID}: N must be at least 1")));
        }
        if !(0.0..=1.0).contains(&local_ratio) {
            return Err(EnvError::Make(format!(
                "{ID}: local_ratio must be in [0, 1], got {local_ratio}"
            )));
        }
        if max_cycles == 0 {
            return Err(EnvError::Make(format!(
                "{ID}: max_cycles must be at least 1"
            )));
        }
        let obs_dim = 6 * n;
        let obs = Space::uniform_box(f32::NEG_INFINITY, f32::INFINITY, &[obs_dim]);
        let act = if continuous {
            Space::uniform_box(0.0, 1.0, &[5])
        } else {
            Space::discrete(5)
        };
        Ok(Self {
            n,
            local_ratio,
            max_cycles,
            continuous,
            pos: vec![[0.0; 2]; n],
            vel: vec![[0.0; 2]; n],
            landmarks: vec![[0.0; 2]; n],
            steps: 0,
            rng: Rng::seed_from(0),
            agents: AgentTable::uniform(
                ID,
                (0..n).map(|i| format!("agent_{i}")).collect(),
                obs,
                act,
            ),
            state_space: Space::uniform_box(f32::NEG_INFINITY, f32::INFINITY, &[obs_dim * n]),
        })
    }

    /// From `make` keyword arguments (`render_mode` and `dynamic_rescaling` only concern
    /// drawing and are accepted).
    pub fn from_kwargs(kw: &Kwargs) -> Result<Box<dyn MultiAgentEnv>, EnvError> {
        check_kwargs(
            ID,
            kw,
            &[
                "N",
                "local_ratio",
                "max_cycles",
                "continuous_actions",
                "dynamic_rescaling",
                "render_mode",
            ],
        )?;
        Ok(Box::new(Self::new(
            kwarg(ID, kw, "N")?.unwrap_or(3),
            kwarg(ID, kw, "local_ratio")?.unwrap_or(0.5),
            kwarg(ID, kw, "max_cycles")?.unwrap_or(25),
            kwarg(ID, kw, "continuous_actions")?.unwrap_or(false),
        )?))
    }

    fn observe(&self, i: usize) -> Vec<f32> {
        let p = self.pos[i];
        let mut o = Vec::with_capacity(6 * self.n);
        o.extend([self.vel[i][0], self.vel[i][1], p[0], p[1]]);
        for l in &self.landmarks {
            o.extend([l[0] - p[0], l[1] - p[1]]);
        }
        for (j, q) in self.pos.iter().enumerate() {
            if j != i {
                o.extend([q[0] - p[0], q[1] - p[1]]);
            }
        }
        // The others' communication: silent agents, always zero.
        o.extend(std::iter::repeat_n(0.0, 2 * (self.n - 1)));
        o.into_iter().map(|v| v as f32).collect()
    }

    fn force_of(&self, action: &[f32]) -> V2 {
        let mut u = [0.0f64; 2];
        if self.continuous {
            // The differences are float32 (the action's dtype), widened when added.
            u[0] += (action[2] - action[1]) as f64;
            u[1] += (action[4] - action[3]) as f64;
        } else {
            match action[0] as u32 {
                1 => u[0] = -1.0,
                2 => u[0] = 1.0,
                3 => u[1] = -1.0,
                4 => u[1] = 1.0,
                _ => {}
            }
        }
        [u[0] * SENSITIVITY, u[1] * SENSITIVITY]
    }

    fn world_step(&mut self, forces: &mut [V2]) {
        // Soft contact between every pair of agents (landmarks do not collide).
        for a in 0..self.n {
            for b in a + 1..self.n {
                let delta = [
                    self.pos[a][0] - self.pos[b][0],
                    self.pos[a][1] - self.pos[b][1],
                ];
                let d = (delta[0] * delta[0] + delta[1] * delta[1]).sqrt();
                let k = CONTACT_MARGIN;
                let penetration = logaddexp0(-(d - 2.0 * AGENT_SIZE) / k) * k;
                let f = [
                    CONTACT_FORCE * delta[0] / d * penetration,
                    CONTACT_FORCE * delta[1] / d * penetration,
                ];
                forces[a] = [f[0] + forces[a][0], f[1] + forces[a][1]];
                forces[b] = [-f[0] + forces[b][0], -f[1] + forces[b][1]];
            }
        }
        for i in 0..self.n {
            for j in 0..2 {
                self.pos[i][j] += self.vel[i][j] * DT;
                self.vel[i][j] *= 1.0 - DAMPING;
                self.vel[i][j] += forces[i][j] / MASS * DT;
            }
        }
    }

    fn global_reward(&self) -> f64 {
        let mut r = 0.0;
        for l in &self.landmarks {
            let nearest = self
                .pos
                .iter()
                .map(|p| dist(*p, *l))
                .fold(f64::INFINITY, f64::min);
            r -= nearest;
        }
        r
    }

    fn collisions(&self, i: usize) -> f64 {
        let mut r = 0.0;
        for j in 0..self.n {
            if j != i && dist(self.pos[i], self.pos[j]) < 2.0 * AGENT_SIZE {
                r -= 1.0;
            }
        }
        r
    }

    fn all_obs(&self) -> AgentMap<Vec<f32>> {
        (0..self.n)
            .map(|i| (self.agents.possible[i].clone(), self.observe(i)))
            .collect()
    }
}

impl MultiAgentEnv for SimpleSpread {
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
        Some((0..self.n).flat_map(|i| self.observe(i)).collect())
    }
    fn reset(
        &mut self,
        seed: Option<u64>,
        _options: Option<&Kwargs>,
    ) -> Result<(AgentMap<Vec<f32>>, AgentMap<Info>), EnvError> {
        if let Some(s) = seed {
            self.rng = Rng::seed_from(s);
        }
        // As mpe2: every agent's position, then every landmark's, uniform in [-1, 1)².
        for i in 0..self.n {
            self.pos[i] = [
                self.rng.uniform_range(-1.0, 1.0),
                self.rng.uniform_range(-1.0, 1.0),
            ];
            self.vel[i] = [0.0; 2];
        }
        for l in 0..self.n {
            self.landmarks[l] = [
                self.rng.uniform_range(-1.0, 1.0),
                self.rng.uniform_range(-1.0, 1.0),
            ];
        }
        self.steps = 0;
        let infos = self.agents.start();
        Ok((self.all_obs(), infos))
    }
    fn step(&mut self, actions: &AgentMap<Vec<f32>>) -> Result<MultiStep, EnvError> {
        self.agents.running()?;
        check_actions(&*self, actions)?;
        let mut forces: Vec<V2> = (0..self.n)
            .map(|i| self.force_of(&actions[&self.agents.possible[i]]))
            .collect();
        self.world_step(&mut forces);
        self.steps += 1;
        let global = self.global_reward();
        let truncated = self.steps >= self.max_cycles;
        let rewards: Vec<f64> = (0..self.n)
            .map(|i| global * (1.0 - self.local_ratio) + self.collisions(i) * self.local_ratio)
            .collect();
        let obs = self.all_obs();
        Ok(self.agents.finish(obs, rewards, false, truncated))
    }
    /// Agents' positions, agents' velocities, landmarks' positions (2 values each).
    fn raw_state(&self) -> Option<Vec<f64>> {
        Some(
            [&self.pos, &self.vel, &self.landmarks]
                .into_iter()
                .flat_map(|v| v.iter().flatten().copied())
                .collect(),
        )
    }
    fn set_raw_state(&mut self, s: &[f64]) -> Result<(), EnvError> {
        let n = self.n;
        if s.len() != 6 * n {
            return Err(EnvError::InvalidState {
                env: ID.into(),
                reason: format!(
                    "expected {} values (positions, velocities, landmarks), got {}",
                    6 * n,
                    s.len()
                ),
            });
        }
        for i in 0..n {
            self.pos[i] = [s[2 * i], s[2 * i + 1]];
            self.vel[i] = [s[2 * n + 2 * i], s[2 * n + 2 * i + 1]];
            self.landmarks[i] = [s[4 * n + 2 * i], s[4 * n + 2 * i + 1]];
        }
        Ok(())
    }
    fn render(&self) -> Option<String> {
        let fmt = |v: &[V2]| {
            v.iter()
                .map(|p| format!("({:.2}, {:.2})", p[0], p[1]))
                .collect::<Vec<_>>()
                .join(" ")
        };
        Some(format!(
            "step {}: agents {} landmarks {}",
            self.steps,
            fmt(&self.pos),
            fmt(&self.landmarks)
        ))
    }
    fn snapshot(&self) -> Result<Value, EnvError> {
        Ok(json!({
            "pos": self.pos, "vel": self.vel, "landmarks": self.landmarks,
            "steps": self.steps, "rng": self.rng, "live": self.agents.live,
        }))
    }
    fn restore(&mut self, s: &Value) -> Result<(), EnvError> {
        let pos: Vec<V2> = snap_field(ID, s, "pos")?;
        let vel: Vec<V2> = snap_field(ID, s, "vel")?;
        let landmarks: Vec<V2> = snap_field(ID, s, "landmarks")?;
        if pos.len() != self.n || vel.len() != self.n || landmarks.len() != self.n {
            return Err(EnvError::InvalidState {
                env: ID.into(),
                reason: format!("snapshot is of another N (this env has {})", self.n),
            });
        }
        (self.pos, self.vel, self.landmarks) = (pos, vel, landmarks);
        self.steps = snap_field(ID, s, "steps")?;
        self.rng = snap_field(ID, s, "rng")?;
        self.agents.live = snap_field(ID, s, "live")?;
        Ok(())
    }
}
