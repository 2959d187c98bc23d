//! `FaultInjection-v0`: a built-in env that misbehaves on cue, for fault tests. A run whose env
//! panics or returns NaN inside a (threaded) vector env must end with an error that names the
//! env index, the step and the value, never with a process abort; this env lets a test (or a
//! user checking their setup) drive the real `rl` binary into that situation.
//!
//! Keyword arguments: `env` (the wrapped built-in env, default `CartPole-v1`), `fault`
//! (`panic`, `nan_observation` or `nan_reward`; without it the env behaves as the wrapped
//! one, so `rl envs` and the env checker can make it), `at_step` (the fault happens on this env
//! step, counted over the instance's life, default 100) and `instance` (only the `k`-th
//! `FaultInjection-v0` made in this process misbehaves, counting from 0; `rl train` makes the
//! training envs first, in index order, so this is the env index; default: every instance).

use rl_training_core::Space;
use rl_training_core::env::{Env, EnvError, Info, Kwargs, Step, check_kwargs};
use std::sync::atomic::{AtomicU64, Ordering};

/// `FaultInjection-v0` instances made by `from_kwargs` in this process (for `instance`).
static MADE: AtomicU64 = AtomicU64::new(0);

/// What the env does wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// `step` panics.
    Panic,
    /// `step` returns an observation whose first element is NaN.
    NanObservation,
    /// `step` returns a NaN reward.
    NanReward,
}

/// A wrapped env that injects one [`Fault`] at a chosen step.
pub struct FaultInjection {
    inner: Box<dyn Env>,
    fault: Option<Fault>,
    at_step: u64,
    /// Whether this instance misbehaves.
    armed: bool,
    steps: u64,
}

impl FaultInjection {
    /// Wraps `inner`; when `armed`, `fault` happens on step `at_step`.
    pub fn new(inner: Box<dyn Env>, fault: Option<Fault>, at_step: u64, armed: bool) -> Self {
        Self {
            inner,
            fault,
            at_step,
            armed,
            steps: 0,
        }
    }

    /// Builds it from `make` keyword arguments (see the module docs).
    pub fn from_kwargs(kw: &Kwargs) -> Result<Box<dyn Env>, EnvError> {
        const ID: &str = "FaultInjection-v0";
        check_kwargs(
            ID,
            kw,
            &["env", "fault", "at_step", "instance", "render_mode"],
        )?;
        let bad = |k: &str, want: &str| {
            EnvError::Make(format!("{ID}: keyword argument {k:?}: expected {want}"))
        };
        let inner_id = match kw.get("env") {
            None => "CartPole-v1",
            Some(v) => v.as_str().ok_or_else(|| bad("env", "an env id"))?,
        };
        if inner_id == ID {
            return Err(bad("env", "another env than FaultInjection-v0"));
        }
        let fault = match kw.get("fault").map(|v| v.as_str()) {
            None => None,
            Some(Some("panic")) => Some(Fault::Panic),
            Some(Some("nan_observation")) => Some(Fault::NanObservation),
            Some(Some("nan_reward")) => Some(Fault::NanReward),
            _ => {
                return Err(bad(
                    "fault",
                    "\"panic\", \"nan_observation\" or \"nan_reward\"",
                ));
            }
        };
        let at_step = match kw.get("at_step") {
            None => 100,
            Some(v) => v.as_u64().ok_or_else(|| bad("at_step", "a step number"))?,
        };
        let instance = match kw.get("instance") {
            None => None,
            Some(v) => Some(
                v.as_u64()
                    .ok_or_else(|| bad("instance", "an instance number"))?,
            ),
        };
        let inner = crate::make(inner_id, &Kwargs::new())?;
        let k = MADE.fetch_add(1, Ordering::SeqCst);
        let armed = instance.is_none_or(|i| i == k);
        Ok(Box::new(Self::new(inner, fault, at_step, armed)))
    }
}

impl Env for FaultInjection {
    fn id(&self) -> &str {
        "FaultInjection-v0"
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
        self.steps += 1;
        let fire = self.armed && self.steps == self.at_step;
        let fault = if fire { self.fault } else { None };
        if fault == Some(Fault::Panic) {
            panic!("FaultInjection-v0: injected panic at step {}", self.steps);
        }
        let mut st = self.inner.step(action, obs)?;
        if fault == Some(Fault::NanObservation) {
            obs[0] = f32::NAN;
        }
        if fault == Some(Fault::NanReward) {
            st.reward = f64::NAN;
        }
        Ok(st)
    }
    fn state(&self) -> Option<Vec<f64>> {
        self.inner.state()
    }
    fn snapshot(&self) -> Result<serde_json::Value, EnvError> {
        Ok(
            serde_json::json!({"inner": self.inner.snapshot()?, "steps": self.steps, "armed": self.armed}),
        )
    }
    fn restore(&mut self, snapshot: &serde_json::Value) -> Result<(), EnvError> {
        let id = self.id().to_string();
        let inner: serde_json::Value = rl_training_core::env::snap_field(&id, snapshot, "inner")?;
        self.inner.restore(&inner)?;
        self.steps = rl_training_core::env::snap_field(&id, snapshot, "steps")?;
        self.armed = rl_training_core::env::snap_field(&id, snapshot, "armed")?;
        Ok(())
    }
}
