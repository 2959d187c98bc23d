//! Toy text: FrozenLake-v1, CliffWalking-v1, Taxi-v3, as tabular MDPs with Gymnasium's
//! transition tables and sampling (`argmax(cumsum(probs) > u)`).

use rl_training_core::env::{Env, EnvError, Info, Kwargs, Step, check_action, snap_field};
use rl_training_core::{Rng, Space};

/// `(probability, next_state, reward, terminated)`.
pub type Transition = (f64, usize, f64, bool);

/// Gymnasium's `categorical_sample`: first index whose cumulative probability exceeds `u`.
pub fn categorical_sample(probs: impl IntoIterator<Item = f64>, u: f64) -> usize {
    let mut acc = 0.0;
    let mut last = 0;
    for (i, p) in probs.into_iter().enumerate() {
        acc += p;
        if acc > u {
            return i;
        }
        last = i;
    }
    // numpy's argmax of an all-false mask is 0.
    let _ = last;
    0
}

/// A discrete MDP given by its transition table (Gymnasium's `DiscreteEnv` / `P`).
pub struct TabularEnv {
    id: String,
    /// `p[s][a]` = possible transitions.
    pub p: Vec<Vec<Vec<Transition>>>,
    initial: Vec<f64>,
    s: usize,
    last_action: Option<usize>,
    rng: Rng,
    obs_space: Space,
    act_space: Space,
    render_fn: fn(&TabularEnv) -> String,
    /// Row-major map, for rendering.
    pub desc: Vec<Vec<u8>>,
}

impl TabularEnv {
    /// Current state index.
    pub fn s(&self) -> usize {
        self.s
    }
    /// Steps with a given uniform draw `u` instead of one from the env's generator (replays
    /// recorded Gymnasium draws); returns the step and the transition index taken.
    pub fn step_with_uniform(&mut self, a: usize, u: f64) -> (Step, usize) {
        let trans = &self.p[self.s][a];
        let i = categorical_sample(trans.iter().map(|t| t.0), u);
        let (_, s, r, d) = trans[i];
        self.s = s;
        self.last_action = Some(a);
        (
            Step {
                reward: r,
                terminated: d,
                truncated: false,
                info: [("prob".to_string(), trans[i].0)].into_iter().collect(),
            },
            i,
        )
    }
    /// Resets with a given uniform draw for the initial-state sample.
    pub fn reset_with_uniform(&mut self, u: f64) -> usize {
        self.s = categorical_sample(self.initial.iter().copied(), u);
        self.last_action = None;
        self.s
    }
}

impl Env for TabularEnv {
    fn snapshot(&self) -> Result<serde_json::Value, EnvError> {
        Ok(serde_json::json!({"s": self.s, "last_action": self.last_action, "rng": self.rng}))
    }
    fn restore(&mut self, snap: &serde_json::Value) -> Result<(), EnvError> {
        let s: usize = snap_field(&self.id, snap, "s")?;
        if s >= self.p.len() {
            return Err(EnvError::InvalidState {
                env: self.id.clone(),
                reason: format!("state {s} out of range"),
            });
        }
        self.s = s;
        self.last_action = snap_field(&self.id, snap, "last_action")?;
        self.rng = snap_field(&self.id, snap, "rng")?;
        Ok(())
    }
    fn id(&self) -> &str {
        &self.id
    }
    fn observation_space(&self) -> &Space {
        &self.obs_space
    }
    fn action_space(&self) -> &Space {
        &self.act_space
    }
    fn reset(
        &mut self,
        seed: Option<u64>,
        _options: Option<&Kwargs>,
        obs: &mut [f32],
    ) -> Result<Info, EnvError> {
        // The toy-text envs take no reset options (Gymnasium ignores them too).
        if let Some(s) = seed {
            self.rng = Rng::seed_from(s);
        }
        let u = self.rng.uniform();
        obs[0] = self.reset_with_uniform(u) as f32;
        Ok([("prob".to_string(), 1.0)].into_iter().collect())
    }
    fn step(&mut self, action: &[f32], obs: &mut [f32]) -> Result<Step, EnvError> {
        check_action(&self.id, &self.act_space, action)?;
        let u = self.rng.uniform();
        let (st, _) = self.step_with_uniform(action[0] as usize, u);
        obs[0] = self.s as f32;
        Ok(st)
    }
    fn state(&self) -> Option<Vec<f64>> {
        Some(vec![self.s as f64])
    }
    fn set_state(&mut self, state: &[f64]) -> Result<(), EnvError> {
        match state {
            [s] if *s >= 0.0 && (*s as usize) < self.p.len() && s.fract() == 0.0 => {
                self.s = *s as usize;
                Ok(())
            }
            _ => Err(EnvError::InvalidState {
                env: self.id.clone(),
                reason: format!(
                    "expected one state index in [0, {}), got {state:?}",
                    self.p.len()
                ),
            }),
        }
    }
    fn render(&self) -> Option<String> {
        Some((self.render_fn)(self))
    }
}

fn render_grid(env: &TabularEnv) -> String {
    let ncol = env.desc[0].len();
    let (r, c) = (env.s / ncol, env.s % ncol);
    let mut out = String::new();
    if let Some(a) = env.last_action {
        out.push_str(&format!(
            "  ({})\n",
            ["Left", "Down", "Right", "Up"].get(a).unwrap_or(&"?")
        ));
    }
    for (i, row) in env.desc.iter().enumerate() {
        for (j, &ch) in row.iter().enumerate() {
            if (i, j) == (r, c) {
                out.push('[');
                out.push(ch as char);
                out.push(']');
            } else {
                out.push(ch as char);
            }
        }
        out.push('\n');
    }
    out
}

/// The named FrozenLake maps.
pub fn frozen_lake_map(name: &str) -> Option<Vec<String>> {
    let m: &[&str] = match name {
        "4x4" => &["SFFF", "FHFH", "FFFH", "HFFG"],
        "8x8" => &[
            "SFFFFFFF", "FFFFFFFF", "FFFHFFFF", "FFFFFHFF", "FFFHFFFF", "FHHFFFHF", "FHFFHFHF",
            "FFFHFFFG",
        ],
        _ => return None,
    };
    Some(m.iter().map(|s| s.to_string()).collect())
}

/// FrozenLake-v1 with a named or custom map; `is_slippery` moves in the intended direction
/// with probability `success_rate` and to each perpendicular direction with half the rest.
pub fn frozen_lake(
    desc: &[String],
    is_slippery: bool,
    success_rate: f64,
) -> Result<TabularEnv, EnvError> {
    let bad = |m: String| EnvError::Make(format!("FrozenLake-v1: {m}"));
    let desc: Vec<Vec<u8>> = desc.iter().map(|r| r.bytes().collect()).collect();
    let nrow = desc.len();
    let ncol = desc.first().map_or(0, Vec::len);
    if nrow == 0 || ncol == 0 || desc.iter().any(|r| r.len() != ncol) {
        return Err(bad("map rows must be non-empty and of equal length".into()));
    }
    if let Some(c) = desc.iter().flatten().find(|c| !b"SFHG".contains(c)) {
        return Err(bad(format!(
            "map cell {:?} is not one of S, F, H, G",
            *c as char
        )));
    }
    if !desc.iter().flatten().any(|&c| c == b'S') {
        return Err(bad("map has no start cell S".into()));
    }
    if !(0.0..=1.0).contains(&success_rate) {
        return Err(bad(format!("success_rate {success_rate} is not in [0, 1]")));
    }
    let fail_rate = (1.0 - success_rate) / 2.0;
    let ns = nrow * ncol;
    let to_s = |r: usize, c: usize| r * ncol + c;
    let inc = |r: usize, c: usize, a: usize| -> (usize, usize) {
        match a {
            0 => (r, c.saturating_sub(1)),
            1 => ((r + 1).min(nrow - 1), c),
            2 => (r, (c + 1).min(ncol - 1)),
            _ => (r.saturating_sub(1), c),
        }
    };
    let mut p = vec![vec![Vec::new(); 4]; ns];
    for r in 0..nrow {
        for c in 0..ncol {
            let s = to_s(r, c);
            for a in 0..4 {
                let li = &mut p[s][a];
                let letter = desc[r][c];
                if letter == b'G' || letter == b'H' {
                    li.push((1.0, s, 0.0, true));
                    continue;
                }
                let outcome = |b: usize| {
                    let (nr, nc) = inc(r, c, b);
                    let l = desc[nr][nc];
                    (
                        to_s(nr, nc),
                        if l == b'G' { 1.0 } else { 0.0 },
                        l == b'G' || l == b'H',
                    )
                };
                if is_slippery {
                    for b in [(a + 3) % 4, a, (a + 1) % 4] {
                        let (ns2, rw, d) = outcome(b);
                        li.push((if b == a { success_rate } else { fail_rate }, ns2, rw, d));
                    }
                } else {
                    let (ns2, rw, d) = outcome(a);
                    li.push((1.0, ns2, rw, d));
                }
            }
        }
    }
    let starts = desc.iter().flatten().filter(|&&c| c == b'S').count() as f64;
    let initial = desc
        .iter()
        .flatten()
        .map(|&c| if c == b'S' { 1.0 / starts } else { 0.0 })
        .collect();
    Ok(TabularEnv {
        id: "FrozenLake-v1".into(),
        p,
        initial,
        s: 0,
        last_action: None,
        rng: Rng::seed_from(0),
        obs_space: Space::discrete(ns),
        act_space: Space::discrete(4),
        render_fn: render_grid,
        desc,
    })
}

/// Builds FrozenLake-v1 from `gymnasium.make` keyword arguments (`map_name`, `desc`,
/// `is_slippery`, `success_rate`).
pub fn frozen_lake_from_kwargs(kw: &Kwargs) -> Result<Box<dyn Env>, EnvError> {
    Ok(Box::new(frozen_lake_env_from_kwargs(kw)?))
}

/// The lake [`frozen_lake_from_kwargs`] makes, as a [`TabularEnv`] (for wrappers that need
/// its map and state, such as the pixel version).
pub fn frozen_lake_env_from_kwargs(kw: &Kwargs) -> Result<TabularEnv, EnvError> {
    use rl_training_core::env::{check_kwargs, kwarg};
    const ID: &str = "FrozenLake-v1";
    check_kwargs(
        ID,
        kw,
        &[
            "map_name",
            "desc",
            "is_slippery",
            "success_rate",
            "render_mode",
        ],
    )?;
    let desc: Option<Vec<String>> = kwarg(ID, kw, "desc")?;
    let map_name: Option<String> = kwarg(ID, kw, "map_name")?;
    let desc = match (desc, map_name) {
        (Some(d), _) => d,
        (None, name) => {
            let name = name.unwrap_or_else(|| "4x4".into());
            frozen_lake_map(&name).ok_or_else(|| {
                EnvError::Make(format!(
                    "{ID}: unknown map_name {name:?}; expected 4x4 or 8x8 (or give desc)"
                ))
            })?
        }
    };
    let slippery = kwarg(ID, kw, "is_slippery")?.unwrap_or(true);
    let success = kwarg(ID, kw, "success_rate")?.unwrap_or(1.0 / 3.0);
    frozen_lake(&desc, slippery, success)
}

/// CliffWalking-v1: 4×12 grid, −1 per step, −100 and back to start on the cliff.
pub fn cliff_walking() -> TabularEnv {
    let (nrow, ncol) = (4usize, 12usize);
    let ns = nrow * ncol;
    let start = 3 * ncol;
    let is_cliff = |r: usize, c: usize| r == 3 && (1..=10).contains(&c);
    let mut p = vec![vec![Vec::new(); 4]; ns];
    for s in 0..ns {
        let (r, c) = (s / ncol, s % ncol);
        // 0 UP, 1 RIGHT, 2 DOWN, 3 LEFT.
        for (a, (dr, dc)) in [(-1i64, 0i64), (0, 1), (1, 0), (0, -1)]
            .into_iter()
            .enumerate()
        {
            let nr = (r as i64 + dr).clamp(0, nrow as i64 - 1) as usize;
            let nc = (c as i64 + dc).clamp(0, ncol as i64 - 1) as usize;
            let t = if is_cliff(nr, nc) {
                (1.0, start, -100.0, false)
            } else {
                let n = nr * ncol + nc;
                (1.0, n, -1.0, n == ns - 1)
            };
            p[s][a].push(t);
        }
    }
    let mut initial = vec![0.0; ns];
    initial[start] = 1.0;
    let mut desc = vec![b"oooooooooooo".to_vec(); 4];
    desc[3] = b"xCCCCCCCCCCT".to_vec();
    desc[3][0] = b'o';
    TabularEnv {
        id: "CliffWalking-v1".into(),
        p,
        initial,
        s: start,
        last_action: None,
        rng: Rng::seed_from(0),
        obs_space: Space::discrete(ns),
        act_space: Space::discrete(4),
        render_fn: render_grid,
        desc,
    }
}

/// Taxi-v3: 500 states, 6 actions (south, north, east, west, pickup, dropoff).
pub fn taxi() -> TabularEnv {
    let map: [&[u8]; 7] = [
        b"+---------+",
        b"|R: | : :G|",
        b"| : | : : |",
        b"| : : : : |",
        b"| | : | : |",
        b"|Y| : |B: |",
        b"+---------+",
    ];
    let locs = [(0usize, 0usize), (0, 4), (4, 0), (4, 3)];
    let encode =
        |row: usize, col: usize, pass: usize, dest: usize| ((row * 5 + col) * 5 + pass) * 4 + dest;
    let mut p = vec![vec![Vec::new(); 6]; 500];
    let mut initial = vec![0.0; 500];
    for row in 0..5 {
        for col in 0..5 {
            for pass in 0..5 {
                for dest in 0..4 {
                    let s = encode(row, col, pass, dest);
                    if pass < 4 && pass != dest {
                        initial[s] += 1.0;
                    }
                    for a in 0..6 {
                        let (mut nr, mut nc, mut np) = (row, col, pass);
                        let mut reward = -1.0;
                        let mut terminated = false;
                        let taxi = (row, col);
                        match a {
                            0 => nr = (row + 1).min(4),
                            1 => nr = row.saturating_sub(1),
                            2 if map[1 + row][2 * col + 2] == b':' => nc = (col + 1).min(4),
                            3 if map[1 + row][2 * col] == b':' => nc = col.saturating_sub(1),
                            4 => {
                                if pass < 4 && taxi == locs[pass] {
                                    np = 4;
                                } else {
                                    reward = -10.0;
                                }
                            }
                            5 => {
                                if taxi == locs[dest] && pass == 4 {
                                    np = dest;
                                    terminated = true;
                                    reward = 20.0;
                                } else if let (Some(i), true) =
                                    (locs.iter().position(|&l| l == taxi), pass == 4)
                                {
                                    np = i;
                                } else {
                                    reward = -10.0;
                                }
                            }
                            _ => {}
                        }
                        p[s][a].push((1.0, encode(nr, nc, np, dest), reward, terminated));
                    }
                }
            }
        }
    }
    let total: f64 = initial.iter().sum();
    initial.iter_mut().for_each(|v| *v /= total);
    TabularEnv {
        id: "Taxi-v3".into(),
        p,
        initial,
        s: 0,
        last_action: None,
        rng: Rng::seed_from(0),
        obs_space: Space::discrete(500),
        act_space: Space::discrete(6),
        render_fn: render_taxi,
        desc: map.iter().map(|r| r.to_vec()).collect(),
    }
}

fn render_taxi(env: &TabularEnv) -> String {
    let s = env.s;
    let (dest, pass, col, row) = (s % 4, (s / 4) % 5, (s / 20) % 5, s / 100);
    let mut out: Vec<Vec<u8>> = env.desc.clone();
    let taxi_ch = if pass == 4 { b'@' } else { b'T' };
    out[1 + row][2 * col + 1] = taxi_ch;
    let mut text: String = out
        .iter()
        .map(|r| String::from_utf8_lossy(r).into_owned() + "\n")
        .collect();
    text.push_str(&format!(
        "passenger: {}, destination: {}\n",
        ["R", "G", "Y", "B", "in taxi"][pass],
        ["R", "G", "Y", "B"][dest]
    ));
    text
}
