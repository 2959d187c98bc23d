//! `SlowEnv-v0`: a built-in env whose every step also costs a fixed CPU time, standing in for
//! an expensive simulator in benchmarks of the runners (a runner process on another core only
//! pays when the env is expensive).
//!
//! Keyword arguments: `env` (the wrapped built-in env, default `CartPole-v1`, with its time
//! limit) and `step_cost_us` (microseconds of busy work per step, default 50; at most one
//! second). The trajectories are the wrapped env's.

use rl_training_core::Space;
use rl_training_core::env::{Env, EnvError, Info, Kwargs, Step, check_kwargs};
use std::time::{Duration, Instant};

const ID: &str = "SlowEnv-v0";

/// A wrapped env that spins for a fixed time on every step.
pub struct SlowEnv {
    inner: Box<dyn Env>,
    cost: Duration,
}

impl SlowEnv {
    /// Wraps `inner`; each step also spins for `cost`.
    pub fn new(inner: Box<dyn Env>, cost: Duration) -> Self {
        Self { inner, cost }
    }

    /// Builds it from `make` keyword arguments (see the module docs).
    pub fn from_kwargs(kw: &Kwargs) -> Result<Box<dyn Env>, EnvError> {
        check_kwargs(ID, kw, &["env", "step_cost_us", "render_mode"])?;
        let bad = |k: &str, want: &str| {
            EnvError::Make(format!("{ID}: keyword argument {k:?}: expected {want}"))
        };
        let inner_id = match kw.get("env") {
            None => "CartPole-v1",
            Some(v) => v.as_str().ok_or_else(|| bad("env", "an env id"))?,
        };
        if inner_id == ID {
            return Err(bad("env", "another env than SlowEnv-v0"));
        }
        let us = match kw.get("step_cost_us") {
            None => 50,
            Some(v) => v
                .as_u64()
                .filter(|&u| u <= 1_000_000)
                .ok_or_else(|| bad("step_cost_us", "microseconds from 0 to 1000000"))?,
        };
        let inner = crate::make(inner_id, &Kwargs::new())?;
        Ok(Box::new(Self::new(inner, Duration::from_micros(us))))
    }
}

impl Env for SlowEnv {
    fn id(&self) -> &str {
        ID
    }
    fn observation_space(&self) -> &Space {
        self.inner.observation_space()
    }
    fn action_space(&self) -> &Space {
        self.inner.action_space()
    }
    fn reset(
        &mut self,
        seed: Option<u64>,
        options: Option<&Kwargs>,
        obs: &mut [f32],
    ) -> Result<Info, EnvError> {
        self.inner.reset(seed, options, obs)
    }
    fn step(&mut self, action: &[f32], obs: &mut [f32]) -> Result<Step, EnvError> {
        // Busy work, not a sleep: a simulator keeps its core busy.
        let until = Instant::now() + self.cost;
        while Instant::now() < until {
            std::hint::spin_loop();
        }
        self.inner.step(action, obs)
    }
    fn state(&self) -> Option<Vec<f64>> {
        self.inner.state()
    }
    fn snapshot(&self) -> Result<serde_json::Value, EnvError> {
        self.inner.snapshot()
    }
    fn restore(&mut self, snapshot: &serde_json::Value) -> Result<(), EnvError> {
        self.inner.restore(snapshot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_env_steps_as_its_inner_env_and_takes_at_least_its_cost() {
        let mut kw = Kwargs::new();
        kw.insert("step_cost_us".into(), 2000.into());
        let mut slow = crate::make(ID, &kw).unwrap();
        let mut fast = crate::make("CartPole-v1", &Kwargs::new()).unwrap();
        let (mut a, mut b) = (vec![0.0; 4], vec![0.0; 4]);
        slow.reset(Some(3), None, &mut a).unwrap();
        fast.reset(Some(3), None, &mut b).unwrap();
        let t = Instant::now();
        for k in 0..10 {
            let act = [(k % 2) as f32];
            let (s, f) = (
                slow.step(&act, &mut a).unwrap(),
                fast.step(&act, &mut b).unwrap(),
            );
            assert_eq!((a.clone(), s.reward), (b.clone(), f.reward));
        }
        assert!(t.elapsed() >= Duration::from_millis(20));
        kw.insert("step_cost_us".into(), "fast".into());
        let e = crate::make(ID, &kw).err().unwrap().to_string();
        assert!(e.contains("step_cost_us"), "{e}");
    }
}
