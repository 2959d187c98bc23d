//! Classic control: CartPole-v1, Pendulum-v1, MountainCar-v0, MountainCarContinuous-v0,
//! Acrobot-v1 — ports of Gymnasium 1.x that reproduce its float64/float32 arithmetic
//! operation by operation (see `testdata/reference/README.md`).

use rl_training_core::env::{
    Env, EnvError, Info, Kwargs, Step, check_action, check_kwargs, kwarg, snap_field,
};
use rl_training_core::{Rng, Space};
use serde_json::{Value, json};
use std::f64::consts::PI;

/// `x ** 2` as Python computes it: libm's `pow`, which can differ from `x * x` in the last bit.
/// The exponent goes through `black_box` so LLVM does not rewrite the call into `x * x`.
#[inline]
fn py_sq(x: f64) -> f64 {
    x.powf(std::hint::black_box(2.0))
}

fn invalid_state(env: &str, want: usize, got: usize) -> EnvError {
    EnvError::InvalidState {
        env: env.into(),
        reason: format!("expected {want} values, got {got}"),
    }
}

/// Gymnasium's `maybe_parse_reset_bounds`: `options` may hold `low`/`high` for the uniform
/// reset draw; unknown option keys are errors naming them.
fn reset_bounds(
    env: &str,
    options: Option<&Kwargs>,
    low: f64,
    high: f64,
) -> Result<(f64, f64), EnvError> {
    let Some(o) = options else {
        return Ok((low, high));
    };
    check_kwargs(env, o, &["low", "high"])?;
    let l: f64 = kwarg(env, o, "low")?.unwrap_or(low);
    let h: f64 = kwarg(env, o, "high")?.unwrap_or(high);
    if l > h {
        return Err(EnvError::Make(format!(
            "{env}: reset option low ({l}) is greater than high ({h})"
        )));
    }
    Ok((l, h))
}

fn seed_rng(rng: &mut Rng, seed: Option<u64>) {
    if let Some(s) = seed {
        *rng = Rng::seed_from(s);
    }
}

/// CartPole-v1 (Barto, Sutton & Anderson), Euler integration.
pub struct CartPole {
    state: [f64; 4],
    rng: Rng,
    obs_space: Space,
    act_space: Space,
    steps_beyond_terminated: Option<usize>,
}

const CP_X_THRESHOLD: f64 = 2.4;
const CP_THETA_THRESHOLD: f64 = 12.0 * 2.0 * PI / 360.0;

impl Default for CartPole {
    fn default() -> Self {
        Self::new()
    }
}

impl CartPole {
    /// A new env (call `reset` before `step`).
    pub fn new() -> Self {
        let high = [
            CP_X_THRESHOLD * 2.0,
            f64::INFINITY,
            CP_THETA_THRESHOLD * 2.0,
            f64::INFINITY,
        ];
        let high: Vec<f32> = high.iter().map(|&h| h as f32).collect();
        Self {
            state: [0.0; 4],
            rng: Rng::seed_from(0),
            obs_space: Space::boxed(high.iter().map(|h| -h).collect(), high),
            act_space: Space::discrete(2),
            steps_beyond_terminated: None,
        }
    }
    fn write_obs(&self, obs: &mut [f32]) {
        for i in 0..4 {
            obs[i] = self.state[i] as f32;
        }
    }
    /// One step of the dynamics without validation (the hot loop of the benchmarks).
    #[inline]
    pub fn step_fast(&mut self, push_right: bool) -> (f64, bool) {
        let (gravity, masspole, total_mass, length, polemass_length, force_mag, tau) =
            (9.8, 0.1, 1.1, 0.5, 0.05, 10.0, 0.02);
        let [x, x_dot, theta, theta_dot] = self.state;
        let force = if push_right { force_mag } else { -force_mag };
        let costheta = theta.cos();
        let sintheta = theta.sin();
        let temp = (force + polemass_length * (theta_dot * theta_dot) * sintheta) / total_mass;
        let thetaacc = (gravity * sintheta - costheta * temp)
            / (length * (4.0 / 3.0 - masspole * (costheta * costheta) / total_mass));
        let xacc = temp - polemass_length * thetaacc * costheta / total_mass;
        let x = x + tau * x_dot;
        let x_dot = x_dot + tau * xacc;
        let theta = theta + tau * theta_dot;
        let theta_dot = theta_dot + tau * thetaacc;
        self.state = [x, x_dot, theta, theta_dot];
        let terminated = !(-CP_X_THRESHOLD..=CP_X_THRESHOLD).contains(&x)
            || !(-CP_THETA_THRESHOLD..=CP_THETA_THRESHOLD).contains(&theta);
        let reward = if !terminated {
            1.0
        } else if self.steps_beyond_terminated.is_none() {
            self.steps_beyond_terminated = Some(0);
            1.0
        } else {
            *self.steps_beyond_terminated.as_mut().unwrap() += 1;
            0.0
        };
        (reward, terminated)
    }
}

impl Env for CartPole {
    fn snapshot(&self) -> Result<Value, EnvError> {
        Ok(
            json!({"state": self.state, "rng": self.rng, "steps_beyond_terminated": self.steps_beyond_terminated}),
        )
    }
    fn restore(&mut self, s: &Value) -> Result<(), EnvError> {
        let id = self.id().to_string();
        self.state = snap_field(&id, s, "state")?;
        self.rng = snap_field(&id, s, "rng")?;
        self.steps_beyond_terminated = snap_field(&id, s, "steps_beyond_terminated")?;
        Ok(())
    }
    fn id(&self) -> &str {
        "CartPole-v1"
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
        options: Option<&Kwargs>,
        obs: &mut [f32],
    ) -> Result<Info, EnvError> {
        let (lo, hi) = reset_bounds("CartPole-v1", options, -0.05, 0.05)?;
        seed_rng(&mut self.rng, seed);
        for s in &mut self.state {
            *s = self.rng.uniform_range(lo, hi);
        }
        self.steps_beyond_terminated = None;
        self.write_obs(obs);
        Ok(Info::new())
    }
    fn step(&mut self, action: &[f32], obs: &mut [f32]) -> Result<Step, EnvError> {
        // Fast path for the two valid actions; anything else gets the full check and message.
        if !matches!(action, [a] if *a == 0.0 || *a == 1.0) {
            check_action(self.id(), &self.act_space, action)?;
        }
        let (reward, terminated) = self.step_fast(action[0] == 1.0);
        self.write_obs(obs);
        Ok(Step {
            reward,
            terminated,
            truncated: false,
            info: Info::new(),
        })
    }
    fn state(&self) -> Option<Vec<f64>> {
        Some(self.state.to_vec())
    }
    fn set_state(&mut self, s: &[f64]) -> Result<(), EnvError> {
        self.state = s
            .try_into()
            .map_err(|_| invalid_state("CartPole-v1", 4, s.len()))?;
        self.steps_beyond_terminated = None;
        Ok(())
    }
}

fn angle_normalize(x: f64) -> f64 {
    // Python's floored modulo with a positive divisor.
    (x + PI).rem_euclid(2.0 * PI) - PI
}

/// Pendulum-v1, with numpy 2's float32 roundings of the action terms.
pub struct Pendulum {
    th: f64,
    thdot: f64,
    rng: Rng,
    obs_space: Space,
    act_space: Space,
}

impl Default for Pendulum {
    fn default() -> Self {
        Self::new()
    }
}

impl Pendulum {
    /// A new env (g = 10).
    pub fn new() -> Self {
        Self {
            th: 0.0,
            thdot: 0.0,
            rng: Rng::seed_from(0),
            obs_space: Space::boxed(vec![-1.0, -1.0, -8.0], vec![1.0, 1.0, 8.0]),
            act_space: Space::boxed(vec![-2.0], vec![2.0]),
        }
    }
    fn write_obs(&self, obs: &mut [f32]) {
        obs[0] = self.th.cos() as f32;
        obs[1] = self.th.sin() as f32;
        obs[2] = self.thdot as f32;
    }
}

impl Env for Pendulum {
    fn snapshot(&self) -> Result<Value, EnvError> {
        Ok(json!({"th": self.th, "thdot": self.thdot, "rng": self.rng}))
    }
    fn restore(&mut self, s: &Value) -> Result<(), EnvError> {
        let id = self.id().to_string();
        self.th = snap_field(&id, s, "th")?;
        self.thdot = snap_field(&id, s, "thdot")?;
        self.rng = snap_field(&id, s, "rng")?;
        Ok(())
    }
    fn id(&self) -> &str {
        "Pendulum-v1"
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
        options: Option<&Kwargs>,
        obs: &mut [f32],
    ) -> Result<Info, EnvError> {
        // Gymnasium's Pendulum options: x_init (angle bound, default pi), y_init (velocity, 1).
        let (x, y) = match options {
            None => (PI, 1.0),
            Some(o) => {
                check_kwargs("Pendulum-v1", o, &["x_init", "y_init"])?;
                (
                    kwarg("Pendulum-v1", o, "x_init")?.unwrap_or(PI),
                    kwarg("Pendulum-v1", o, "y_init")?.unwrap_or(1.0),
                )
            }
        };
        seed_rng(&mut self.rng, seed);
        self.th = self.rng.uniform_range(-x, x);
        self.thdot = self.rng.uniform_range(-y, y);
        self.write_obs(obs);
        Ok(Info::new())
    }
    fn step(&mut self, action: &[f32], obs: &mut [f32]) -> Result<Step, EnvError> {
        if action.len() != 1 || action[0].is_nan() {
            return Err(EnvError::InvalidAction {
                env: self.id().into(),
                action: action.to_vec(),
                reason: "expected one finite torque".into(),
            });
        }
        let (g, m, l, dt, max_speed, max_torque) =
            (10.0f64, 1.0f64, 1.0f64, 0.05f64, 8.0f64, 2.0f32);
        // Gymnasium clips the torque itself, so out-of-range actions are allowed.
        let u = action[0].clamp(-max_torque, max_torque);
        let ctrl_cost = (0.001f32 * (u * u)) as f64;
        let costs = py_sq(angle_normalize(self.th)) + 0.1 * py_sq(self.thdot) + ctrl_cost;
        let torque_term = ((3.0 / (m * l * l)) as f32 * u) as f64;
        let mut nthdot = self.thdot + (3.0 * g / (2.0 * l) * self.th.sin() + torque_term) * dt;
        nthdot = nthdot.clamp(-max_speed, max_speed);
        self.th += nthdot * dt;
        self.thdot = nthdot;
        self.write_obs(obs);
        Ok(Step {
            reward: -costs,
            terminated: false,
            truncated: false,
            info: Info::new(),
        })
    }
    fn state(&self) -> Option<Vec<f64>> {
        Some(vec![self.th, self.thdot])
    }
    fn set_state(&mut self, s: &[f64]) -> Result<(), EnvError> {
        let [th, thdot]: [f64; 2] = s
            .try_into()
            .map_err(|_| invalid_state("Pendulum-v1", 2, s.len()))?;
        (self.th, self.thdot) = (th, thdot);
        Ok(())
    }
}

/// MountainCar-v0 (discrete actions).
pub struct MountainCar {
    pos: f64,
    vel: f64,
    rng: Rng,
    obs_space: Space,
    act_space: Space,
}

impl Default for MountainCar {
    fn default() -> Self {
        Self::new()
    }
}

impl MountainCar {
    /// A new env.
    pub fn new() -> Self {
        Self {
            pos: 0.0,
            vel: 0.0,
            rng: Rng::seed_from(0),
            obs_space: Space::boxed(vec![-1.2, -0.07], vec![0.6, 0.07]),
            act_space: Space::discrete(3),
        }
    }
}

impl Env for MountainCar {
    fn snapshot(&self) -> Result<Value, EnvError> {
        Ok(json!({"pos": self.pos, "vel": self.vel, "rng": self.rng}))
    }
    fn restore(&mut self, s: &Value) -> Result<(), EnvError> {
        let id = self.id().to_string();
        self.pos = snap_field(&id, s, "pos")?;
        self.vel = snap_field(&id, s, "vel")?;
        self.rng = snap_field(&id, s, "rng")?;
        Ok(())
    }
    fn id(&self) -> &str {
        "MountainCar-v0"
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
        options: Option<&Kwargs>,
        obs: &mut [f32],
    ) -> Result<Info, EnvError> {
        let (lo, hi) = reset_bounds(self.id(), options, -0.6, -0.4)?;
        seed_rng(&mut self.rng, seed);
        self.pos = self.rng.uniform_range(lo, hi);
        self.vel = 0.0;
        obs[0] = self.pos as f32;
        obs[1] = self.vel as f32;
        Ok(Info::new())
    }
    fn step(&mut self, action: &[f32], obs: &mut [f32]) -> Result<Step, EnvError> {
        check_action(self.id(), &self.act_space, action)?;
        let (min_p, max_p, max_v, goal_p, force, gravity) = (-1.2, 0.6, 0.07, 0.5, 0.001, 0.0025);
        let a = action[0] as i64;
        let mut v = self.vel + ((a - 1) as f64 * force + (3.0 * self.pos).cos() * (-gravity));
        v = v.clamp(-max_v, max_v);
        let mut p = self.pos + v;
        p = p.clamp(min_p, max_p);
        if p == min_p && v < 0.0 {
            v = 0.0;
        }
        (self.pos, self.vel) = (p, v);
        let terminated = p >= goal_p && v >= 0.0;
        obs[0] = p as f32;
        obs[1] = v as f32;
        Ok(Step {
            reward: -1.0,
            terminated,
            truncated: false,
            info: Info::new(),
        })
    }
    fn state(&self) -> Option<Vec<f64>> {
        Some(vec![self.pos, self.vel])
    }
    fn set_state(&mut self, s: &[f64]) -> Result<(), EnvError> {
        let [p, v]: [f64; 2] = s
            .try_into()
            .map_err(|_| invalid_state("MountainCar-v0", 2, s.len()))?;
        (self.pos, self.vel) = (p, v);
        Ok(())
    }
}

/// MountainCarContinuous-v0, with numpy 2's float32 state after the first step.
pub struct MountainCarContinuous {
    pos: f64,
    vel: f64,
    /// The state is float64 right after reset and float32 after every step.
    state_is_f32: bool,
    rng: Rng,
    obs_space: Space,
    act_space: Space,
}

impl Default for MountainCarContinuous {
    fn default() -> Self {
        Self::new()
    }
}

impl MountainCarContinuous {
    /// A new env.
    pub fn new() -> Self {
        Self {
            pos: 0.0,
            vel: 0.0,
            state_is_f32: false,
            rng: Rng::seed_from(0),
            obs_space: Space::boxed(vec![-1.2, -0.07], vec![0.6, 0.07]),
            act_space: Space::boxed(vec![-1.0], vec![1.0]),
        }
    }
}

impl Env for MountainCarContinuous {
    fn snapshot(&self) -> Result<Value, EnvError> {
        Ok(
            json!({"pos": self.pos, "vel": self.vel, "state_is_f32": self.state_is_f32, "rng": self.rng}),
        )
    }
    fn restore(&mut self, s: &Value) -> Result<(), EnvError> {
        let id = self.id().to_string();
        self.pos = snap_field(&id, s, "pos")?;
        self.vel = snap_field(&id, s, "vel")?;
        self.state_is_f32 = snap_field(&id, s, "state_is_f32")?;
        self.rng = snap_field(&id, s, "rng")?;
        Ok(())
    }
    fn id(&self) -> &str {
        "MountainCarContinuous-v0"
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
        options: Option<&Kwargs>,
        obs: &mut [f32],
    ) -> Result<Info, EnvError> {
        let (lo, hi) = reset_bounds(self.id(), options, -0.6, -0.4)?;
        seed_rng(&mut self.rng, seed);
        self.pos = self.rng.uniform_range(lo, hi);
        self.vel = 0.0;
        self.state_is_f32 = false;
        obs[0] = self.pos as f32;
        obs[1] = self.vel as f32;
        Ok(Info::new())
    }
    fn step(&mut self, action: &[f32], obs: &mut [f32]) -> Result<Step, EnvError> {
        if action.len() != 1 || action[0].is_nan() {
            return Err(EnvError::InvalidAction {
                env: self.id().into(),
                action: action.to_vec(),
                reason: "expected one finite force".into(),
            });
        }
        let (min_p, max_p, max_v, goal_p, power) = (-1.2f64, 0.6f64, 0.07f64, 0.45f64, 0.0015f64);
        let first = !self.state_is_f32;
        let (mut p, mut v) = (self.pos, self.vel);
        // Python constants compared with a float32 value are rounded to float32 first (NEP 50).
        let cmp = |c: f64| if first { c } else { c as f32 as f64 };
        let f = action[0].clamp(-1.0, 1.0);
        let fp = f * power as f32;
        let three_p = if first {
            3.0 * p
        } else {
            (3.0 * p as f32) as f64
        };
        let grav = 0.0025 * three_p.cos();
        let dv = fp - grav as f32;
        v = if first {
            v + dv as f64
        } else {
            (v as f32 + dv) as f64
        };
        // A clamped velocity becomes the Python constant; rounding it to float32 for the
        // float32 position update gives the same value as a float32 velocity would.
        if v > cmp(max_v) {
            v = max_v;
        }
        if v < cmp(-max_v) {
            v = -max_v;
        }
        p = if first {
            p + v
        } else {
            (p as f32 + v as f32) as f64
        };
        let mut p_is_py = false;
        if p > cmp(max_p) {
            p = max_p;
            p_is_py = true;
        }
        if p < cmp(min_p) {
            p = min_p;
            p_is_py = true;
        }
        if p == (if p_is_py { min_p } else { cmp(min_p) }) && v < 0.0 {
            v = 0.0;
        }
        let (p32, v32) = (p as f32, v as f32);
        (self.pos, self.vel, self.state_is_f32) = (p32 as f64, v32 as f64, true);
        let terminated = p32 >= goal_p as f32 && v32 >= 0.0;
        let reward = (if terminated { 100.0 } else { 0.0 }) - py_sq(action[0] as f64) * 0.1;
        obs[0] = p32;
        obs[1] = v32;
        Ok(Step {
            reward,
            terminated,
            truncated: false,
            info: Info::new(),
        })
    }
    fn state(&self) -> Option<Vec<f64>> {
        Some(vec![self.pos, self.vel])
    }
    /// Sets a float64 state, as right after `reset`.
    fn set_state(&mut self, s: &[f64]) -> Result<(), EnvError> {
        let [p, v]: [f64; 2] = s
            .try_into()
            .map_err(|_| invalid_state("MountainCarContinuous-v0", 2, s.len()))?;
        (self.pos, self.vel, self.state_is_f32) = (p, v, false);
        Ok(())
    }
}

/// Acrobot-v1 ("book" dynamics, RK4 over one `dt` = 0.2).
pub struct Acrobot {
    s: [f64; 4],
    rng: Rng,
    obs_space: Space,
    act_space: Space,
}

impl Default for Acrobot {
    fn default() -> Self {
        Self::new()
    }
}

const MAX_VEL_1: f64 = 4.0 * PI;
const MAX_VEL_2: f64 = 9.0 * PI;

fn acrobot_dsdt(y: &[f64; 5]) -> [f64; 5] {
    let (m1, m2, l1, lc1, lc2, i1, i2, g) = (
        1.0f64, 1.0f64, 1.0f64, 0.5f64, 0.5f64, 1.0f64, 1.0f64, 9.8f64,
    );
    let a = y[4];
    let (theta1, theta2, dtheta1, dtheta2) = (y[0], y[1], y[2], y[3]);
    let d1 =
        m1 * (lc1 * lc1) + m2 * ((l1 * l1) + (lc2 * lc2) + 2.0 * l1 * lc2 * theta2.cos()) + i1 + i2;
    let d2 = m2 * ((lc2 * lc2) + l1 * lc2 * theta2.cos()) + i2;
    let phi2 = m2 * lc2 * g * (theta1 + theta2 - PI / 2.0).cos();
    let phi1 = -m2 * l1 * lc2 * py_sq(dtheta2) * theta2.sin()
        - 2.0 * m2 * l1 * lc2 * dtheta2 * dtheta1 * theta2.sin()
        + (m1 * lc1 + m2 * l1) * g * (theta1 - PI / 2.0).cos()
        + phi2;
    let ddtheta2 = (a + d2 / d1 * phi1 - m2 * l1 * lc2 * py_sq(dtheta1) * theta2.sin() - phi2)
        / (m2 * (lc2 * lc2) + i2 - py_sq(d2) / d1);
    let ddtheta1 = -(d2 * ddtheta2 + phi1) / d1;
    [dtheta1, dtheta2, ddtheta1, ddtheta2, 0.0]
}

fn wrap(mut x: f64, m: f64, big_m: f64) -> f64 {
    let diff = big_m - m;
    while x > big_m {
        x -= diff;
    }
    while x < m {
        x += diff;
    }
    x
}

impl Acrobot {
    /// A new env.
    pub fn new() -> Self {
        let high = [1.0f32, 1.0, 1.0, 1.0, MAX_VEL_1 as f32, MAX_VEL_2 as f32];
        Self {
            s: [0.0; 4],
            rng: Rng::seed_from(0),
            obs_space: Space::boxed(high.iter().map(|h| -h).collect(), high.to_vec()),
            act_space: Space::discrete(3),
        }
    }
    fn write_obs(&self, obs: &mut [f32]) {
        let s = &self.s;
        let o = [s[0].cos(), s[0].sin(), s[1].cos(), s[1].sin(), s[2], s[3]];
        for i in 0..6 {
            obs[i] = o[i] as f32;
        }
    }
}

impl Env for Acrobot {
    fn snapshot(&self) -> Result<Value, EnvError> {
        Ok(json!({"s": self.s, "rng": self.rng}))
    }
    fn restore(&mut self, s: &Value) -> Result<(), EnvError> {
        let id = self.id().to_string();
        self.s = snap_field(&id, s, "s")?;
        self.rng = snap_field(&id, s, "rng")?;
        Ok(())
    }
    fn id(&self) -> &str {
        "Acrobot-v1"
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
        options: Option<&Kwargs>,
        obs: &mut [f32],
    ) -> Result<Info, EnvError> {
        let (lo, hi) = reset_bounds("Acrobot-v1", options, -0.1, 0.1)?;
        seed_rng(&mut self.rng, seed);
        for v in &mut self.s {
            // Gymnasium draws float64 then casts the state to float32.
            *v = self.rng.uniform_range(lo, hi) as f32 as f64;
        }
        self.write_obs(obs);
        Ok(Info::new())
    }
    fn step(&mut self, action: &[f32], obs: &mut [f32]) -> Result<Step, EnvError> {
        check_action(self.id(), &self.act_space, action)?;
        let torque = [-1.0, 0.0, 1.0][action[0] as usize];
        let y0 = [self.s[0], self.s[1], self.s[2], self.s[3], torque];
        let (dt, dt2) = (0.2f64, 0.2f64 / 2.0);
        let add = |y: &[f64; 5], h: f64, k: &[f64; 5]| -> [f64; 5] {
            std::array::from_fn(|i| y[i] + h * k[i])
        };
        let k1 = acrobot_dsdt(&y0);
        let k2 = acrobot_dsdt(&add(&y0, dt2, &k1));
        let k3 = acrobot_dsdt(&add(&y0, dt2, &k2));
        let k4 = acrobot_dsdt(&add(&y0, dt, &k3));
        let ns: [f64; 5] =
            std::array::from_fn(|i| y0[i] + dt / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]));
        self.s = [
            wrap(ns[0], -PI, PI),
            wrap(ns[1], -PI, PI),
            ns[2].clamp(-MAX_VEL_1, MAX_VEL_1),
            ns[3].clamp(-MAX_VEL_2, MAX_VEL_2),
        ];
        let terminated = -self.s[0].cos() - (self.s[1] + self.s[0]).cos() > 1.0;
        self.write_obs(obs);
        Ok(Step {
            reward: if terminated { 0.0 } else { -1.0 },
            terminated,
            truncated: false,
            info: Info::new(),
        })
    }
    fn state(&self) -> Option<Vec<f64>> {
        Some(self.s.to_vec())
    }
    fn set_state(&mut self, s: &[f64]) -> Result<(), EnvError> {
        self.s = s
            .try_into()
            .map_err(|_| invalid_state("Acrobot-v1", 4, s.len()))?;
        Ok(())
    }
}
