//! rl-training-gymnasium: any Gymnasium environment as an rl [`Env`], through the Python interpreter
//! that PyO3 embeds (or the running one, when rl is called from Python). `env_id:
//! gymnasium:Hopper-v5` in a run config reaches [`make`] (rl-training-envs routes the prefix here when
//! built with its `gymnasium` feature, the facade's `python`).
//!
//! - Spaces are translated: Box (bounds as f32, its shape kept), Discrete (with its start),
//!   MultiDiscrete (start 0), MultiBinary; any other space (Dict, Tuple, Text, Graph …) is
//!   refused with an error naming it.
//! - One Python call per `reset`, and one per vector step for all of a vector env's envs
//!   ([`Env::stage`]; one per `step` for an env stepped alone) (`src/gym.py`): the action goes
//!   in as a numpy array of the raw encoding, converted to the space's dtype and shape there; the
//!   observation comes back as one contiguous float32 array read through numpy. Gymnasium's
//!   `terminated` and `truncated` stay apart (its `TimeLimit` truncates); numeric `info`
//!   entries are kept.
//! - The interpreter's lock is taken only inside those calls, so training in Rust runs
//!   without it.
//! - Snapshots (for resumable checkpoints) are the pickled env, so a picklable env resumes
//!   exactly; one that is not gives an error naming it when a checkpoint is saved.
//! - Classic-control envs expose `state` / `set_state` (the unwrapped env's `state`), which
//!   the conformance tests use to compare Gymnasium's dynamics with rl-training-envs' own.
#![warn(missing_docs)]

use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyModule;
use rl_training_core::Space;
use rl_training_core::env::{BatchPart, Env, EnvError, Info, Kwargs, Step, StepBatch};
use std::ffi::CString;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// The prefix of env ids this crate makes (`gymnasium:CartPole-v1`).
pub const PREFIX: &str = "gymnasium:";

/// The bridge's Python side, compiled once per process.
static HELPER: OnceLock<Py<PyModule>> = OnceLock::new();

/// One `gymnasium.make` at a time: envs made on several threads at once (a vector env's
/// workers, parallel tests) would import their modules concurrently, which Python's imports
/// can see half-initialized. Taken before the interpreter's lock, never inside it.
static MAKE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn helper(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    if let Some(m) = HELPER.get() {
        return Ok(m.bind(py).clone());
    }
    let code = CString::new(include_str!("gym.py")).expect("no NUL in gym.py");
    let m = PyModule::from_code(py, &code, c"rl_gymnasium_bridge.py", c"rl_gymnasium_bridge")?;
    let _ = HELPER.set(m.clone().unbind());
    Ok(m)
}

/// A Python exception as text: its type and message.
fn py_text(py: Python<'_>, e: &PyErr) -> String {
    let ty = e
        .get_type(py)
        .name()
        .map_or_else(|_| "Exception".to_string(), |n| n.to_string());
    format!("{ty}: {}", e.value(py))
}

/// `gymnasium.make(id, **kwargs)` as an rl env (`id` without the [`PREFIX`]).
pub fn make(id: &str, kwargs: &Kwargs) -> Result<Box<dyn Env>, EnvError> {
    Ok(Box::new(GymEnv::new(id, kwargs)?))
}

/// A Gymnasium env behind rl's [`Env`].
pub struct GymEnv {
    /// `gymnasium:ID`.
    id: String,
    /// The Python env and its action converter, shared with a staged batch of steps.
    py: Arc<Handles>,
    obs_space: Space,
    act_space: Space,
    /// The step staged for the next `step` ([`Env::stage`]), filled in when its batch ran.
    staged: Arc<Mutex<Option<Staged>>>,
}

/// A Gymnasium env's Python objects.
struct Handles {
    env: Py<PyAny>,
    /// The Python function that turns a raw action row into what `env.step` takes.
    convert: Py<PyAny>,
}

/// A staged step: its action, and its result once the batch ran (None: not run, e.g. an
/// earlier env's step failed, so this env steps alone).
struct Staged {
    action: Vec<f32>,
    result: Option<Result<(Vec<f32>, Step), EnvError>>,
}

/// The staged steps of a vector's Gymnasium envs: one Python call steps them all.
#[derive(Default)]
struct GymSteps {
    envs: Vec<(String, Arc<Handles>, Arc<Mutex<Option<Staged>>>)>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl BatchPart for GymSteps {
    fn run(&mut self) -> Result<(), EnvError> {
        if self.envs.is_empty() {
            return Ok(());
        }
        let first = self.envs[0].0.clone();
        Python::attach(|py| {
            let bridge_err = |e: PyErr| EnvError::BadOutput {
                env: first.clone(),
                reason: format!("the bridge's step_many raised {}", py_text(py, &e)),
            };
            let m = helper(py).map_err(bridge_err)?;
            let (mut envs, mut converts, mut actions) = (Vec::new(), Vec::new(), Vec::new());
            for (_, h, s) in &self.envs {
                envs.push(h.env.bind(py).clone());
                converts.push(h.convert.bind(py).clone());
                let staged = lock(s);
                let a = staged.as_ref().map_or(&[][..], |s| &s.action[..]);
                actions.push(PyArray1::from_slice(py, a));
            }
            let r = m
                .call_method1("step_many", (envs, converts, actions))
                .map_err(bridge_err)?;
            let (results, failed): (Vec<Bound<'_, PyAny>>, Option<(usize, Bound<'_, PyAny>)>) =
                r.extract().map_err(bridge_err)?;
            for (i, out) in results.iter().enumerate() {
                let (id, _, slot) = &self.envs[i];
                let res = read_step(py, id, out);
                if let Some(s) = lock(slot).as_mut() {
                    s.result = Some(res);
                }
            }
            if let Some((i, e)) = failed
                && let Some((id, _, slot)) = self.envs.get(i)
            {
                let err = EnvError::BadOutput {
                    env: id.clone(),
                    reason: format!("step raised {}", py_text(py, &PyErr::from_value(e))),
                };
                if let Some(s) = lock(slot).as_mut() {
                    s.result = Some(Err(err));
                }
            }
            Ok(())
        })
    }
    fn as_any(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

/// A step's `(obs, reward, terminated, truncated, info)` from the bridge's Python side.
fn read_step(
    py: Python<'_>,
    id: &str,
    out: &Bound<'_, PyAny>,
) -> Result<(Vec<f32>, Step), EnvError> {
    let err = |e: PyErr| EnvError::BadOutput {
        env: id.to_string(),
        reason: format!("step's result: {}", py_text(py, &e)),
    };
    let (o, reward, terminated, truncated, info): (
        PyReadonlyArray1<'_, f32>,
        f64,
        bool,
        bool,
        Info,
    ) = out.extract().map_err(err)?;
    let obs = o
        .as_slice()
        .map_err(|e| EnvError::BadOutput {
            env: id.to_string(),
            reason: format!("observation: {e}"),
        })?
        .to_vec();
    Ok((
        obs,
        Step {
            reward,
            terminated,
            truncated,
            info,
        },
    ))
}

impl std::fmt::Debug for GymEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GymEnv").field("id", &self.id).finish()
    }
}

/// rl's space for a described Gymnasium space, or why it has none.
fn space_of(what: &str, d: &Bound<'_, PyAny>) -> Result<Space, String> {
    let kind: String = d
        .get_item(0)
        .and_then(|k| k.extract())
        .map_err(|e| e.to_string())?;
    let item = |i: usize| d.get_item(i);
    let err = |e: PyErr| format!("{what}: {e}");
    match kind.as_str() {
        "box" => {
            let low: Vec<f32> = item(1).and_then(|v| v.extract()).map_err(err)?;
            let high: Vec<f32> = item(2).and_then(|v| v.extract()).map_err(err)?;
            let shape: Vec<usize> = item(3).and_then(|v| v.extract()).map_err(err)?;
            Ok(Space::Box { low, high, shape })
        }
        "discrete" => {
            let n: usize = item(1).and_then(|v| v.extract()).map_err(err)?;
            let start: i64 = item(2).and_then(|v| v.extract()).map_err(err)?;
            Ok(Space::Discrete { n, start })
        }
        "multidiscrete" => {
            let nvec: Vec<usize> = item(1).and_then(|v| v.extract()).map_err(err)?;
            Ok(Space::MultiDiscrete { nvec })
        }
        "multibinary" => {
            let n: usize = item(1).and_then(|v| v.extract()).map_err(err)?;
            Ok(Space::MultiBinary { n })
        }
        _ => {
            let repr: String = item(1).and_then(|v| v.extract()).map_err(err)?;
            Err(format!(
                "{what} {repr} is not supported (Box, Discrete, MultiDiscrete and MultiBinary \
                 are; flatten a Dict or Tuple space with gymnasium.wrappers.FlattenObservation)"
            ))
        }
    }
}

impl GymEnv {
    /// `gymnasium.make(id, **kwargs)` (`id` without the [`PREFIX`]).
    pub fn new(id: &str, kwargs: &Kwargs) -> Result<Self, EnvError> {
        let full = format!("{PREFIX}{id}");
        let kwargs_json = serde_json::to_string(kwargs).expect("JSON values serialize");
        let _one_at_a_time = MAKE
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Python::attach(|py| {
            let make_err = |e: PyErr| EnvError::Make(format!("{full}: {}", py_text(py, &e)));
            let m = helper(py).map_err(make_err)?;
            let env = m
                .call_method1("make", (id, kwargs_json))
                .map_err(make_err)?;
            let describe = |attr: &str| -> Result<Space, EnvError> {
                let space = env.getattr(attr).map_err(make_err)?;
                let d = m.call_method1("describe", (space,)).map_err(make_err)?;
                space_of(attr, &d).map_err(|e| EnvError::Make(format!("{full}: {e}")))
            };
            let obs_space = describe("observation_space")?;
            let act_space = describe("action_space")?;
            let convert = m
                .call_method1(
                    "action_converter",
                    (env.getattr("action_space").map_err(make_err)?,),
                )
                .map_err(make_err)?;
            Ok(Self {
                id: full.clone(),
                py: Arc::new(Handles {
                    env: env.unbind(),
                    convert: convert.unbind(),
                }),
                obs_space,
                act_space,
                staged: Arc::new(Mutex::new(None)),
            })
        })
    }

    fn python_error(&self, py: Python<'_>, what: &str, e: &PyErr) -> EnvError {
        EnvError::BadOutput {
            env: self.id.clone(),
            reason: format!("{what} raised {}", py_text(py, e)),
        }
    }

    /// Copies the float32 observation `o` into `obs`, checking its length.
    fn write_obs(&self, o: &Bound<'_, PyAny>, obs: &mut [f32]) -> Result<(), EnvError> {
        let arr: PyReadonlyArray1<'_, f32> = o.extract().map_err(|e| EnvError::BadOutput {
            env: self.id.clone(),
            reason: format!("observation: {e}"),
        })?;
        let s = arr.as_slice().map_err(|e| EnvError::BadOutput {
            env: self.id.clone(),
            reason: format!("observation: {e}"),
        })?;
        self.put_obs(s, obs)
    }

    /// Copies observation `o` into `obs`, checking its length.
    fn put_obs(&self, o: &[f32], obs: &mut [f32]) -> Result<(), EnvError> {
        if o.len() != obs.len() {
            return Err(EnvError::BadOutput {
                env: self.id.clone(),
                reason: format!(
                    "observation of {} values, the observation space has {}",
                    o.len(),
                    obs.len()
                ),
            });
        }
        obs.copy_from_slice(o);
        Ok(())
    }
}

impl Env for GymEnv {
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
        options: Option<&Kwargs>,
        obs: &mut [f32],
    ) -> Result<Info, EnvError> {
        // A step staged but never taken (its vector step failed) is dropped.
        *lock(&self.staged) = None;
        Python::attach(|py| {
            let m = helper(py).map_err(|e| self.python_error(py, "the bridge", &e))?;
            let options = match options {
                Some(o) => {
                    let json = py
                        .import("json")
                        .map_err(|e| self.python_error(py, "json", &e))?;
                    let text = serde_json::to_string(o).expect("JSON values serialize");
                    json.call_method1("loads", (text,))
                        .map_err(|e| self.python_error(py, "reset options", &e))?
                }
                None => py.None().into_bound(py),
            };
            let r = m
                .call_method1("reset", (self.py.env.bind(py), seed, options))
                .map_err(|e| self.python_error(py, "reset", &e))?;
            let o = r
                .get_item(0)
                .map_err(|e| self.python_error(py, "reset", &e))?;
            self.write_obs(&o, obs)?;
            r.get_item(1)
                .and_then(|i| i.extract::<Info>())
                .map_err(|e| self.python_error(py, "reset's info", &e))
        })
    }

    /// Joins the vector step's batch: one Python call steps every staged Gymnasium env.
    fn stage(&mut self, action: &[f32], batch: &mut StepBatch) -> Result<(), EnvError> {
        if action.len() != self.act_space.raw_dim() {
            return Ok(()); // `step` reports it.
        }
        *lock(&self.staged) = Some(Staged {
            action: action.to_vec(),
            result: None,
        });
        batch
            .part::<GymSteps>()
            .envs
            .push((self.id.clone(), self.py.clone(), self.staged.clone()));
        Ok(())
    }

    fn step(&mut self, action: &[f32], obs: &mut [f32]) -> Result<Step, EnvError> {
        if action.len() != self.act_space.raw_dim() {
            return Err(EnvError::InvalidAction {
                env: self.id.clone(),
                action: action.to_vec(),
                reason: format!("expected {} values", self.act_space.raw_dim()),
            });
        }
        let staged = lock(&self.staged).take();
        if let Some(s) = staged {
            if s.action != action {
                return Err(EnvError::InvalidAction {
                    env: self.id.clone(),
                    action: action.to_vec(),
                    reason: format!(
                        "differs from the staged action {:?} (a wrapper that changes actions \
                         must stage the changed one)",
                        s.action
                    ),
                });
            }
            if let Some(r) = s.result {
                let (o, step) = r?;
                self.put_obs(&o, obs)?;
                return Ok(step);
            }
        }
        Python::attach(|py| {
            let m = helper(py).map_err(|e| self.python_error(py, "the bridge", &e))?;
            let a = PyArray1::from_slice(py, action);
            let r = m
                .call_method1("step", (self.py.env.bind(py), self.py.convert.bind(py), a))
                .map_err(|e| self.python_error(py, "step", &e))?;
            let (o, step) = read_step(py, &self.id, &r)?;
            self.put_obs(&o, obs)?;
            Ok(step)
        })
    }

    /// The unwrapped env's `state` attribute (classic control), as f64.
    fn state(&self) -> Option<Vec<f64>> {
        Python::attach(|py| {
            let s = self
                .py
                .env
                .bind(py)
                .getattr("unwrapped")
                .ok()?
                .getattr("state")
                .ok()?;
            let np = py.import("numpy").ok()?;
            let flat = np
                .call_method1("asarray", (s, "float64"))
                .ok()?
                .call_method0("ravel")
                .ok()?;
            flat.call_method0("tolist").ok()?.extract().ok()
        })
    }

    /// Sets the unwrapped env's `state` (classic control), as a float64 array of the same
    /// shape.
    fn set_state(&mut self, state: &[f64]) -> Result<(), EnvError> {
        Python::attach(|py| {
            let err = |e: PyErr| EnvError::InvalidState {
                env: self.id.clone(),
                reason: py_text(py, &e),
            };
            let unwrapped = self.py.env.bind(py).getattr("unwrapped").map_err(err)?;
            let old = unwrapped.getattr("state").map_err(err)?;
            let np = py.import("numpy").map_err(err)?;
            let shape = np.call_method1("shape", (old,)).map_err(err)?;
            let new = np
                .call_method1("asarray", (state.to_vec(), "float64"))
                .and_then(|a| a.call_method1("reshape", (shape,)))
                .map_err(err)?;
            unwrapped.setattr("state", new).map_err(err)
        })
    }

    /// The pickled env (hex), so that a picklable env resumes exactly.
    fn snapshot(&self) -> Result<serde_json::Value, EnvError> {
        Python::attach(|py| {
            let m = helper(py).map_err(|e| self.python_error(py, "the bridge", &e))?;
            let hex: String = m
                .call_method1("snapshot", (self.py.env.bind(py),))
                .and_then(|h| h.extract())
                .map_err(|e| EnvError::Unsupported {
                    env: self.id.clone(),
                    what: format!("snapshot (pickling the env raised {})", py_text(py, &e)),
                })?;
            Ok(serde_json::json!({ "pickle": hex }))
        })
    }

    fn restore(&mut self, snapshot: &serde_json::Value) -> Result<(), EnvError> {
        let hex = snapshot
            .get("pickle")
            .and_then(|v| v.as_str())
            .ok_or_else(|| EnvError::InvalidState {
                env: self.id.clone(),
                reason: "snapshot: expected {\"pickle\": hex string}".into(),
            })?;
        Python::attach(|py| {
            let m = helper(py).map_err(|e| self.python_error(py, "the bridge", &e))?;
            let env = m
                .call_method1("restore", (hex,))
                .map_err(|e| EnvError::InvalidState {
                    env: self.id.clone(),
                    reason: format!("unpickling the snapshot raised {}", py_text(py, &e)),
                })?;
            let convert = self.py.convert.clone_ref(py);
            self.py = Arc::new(Handles {
                env: env.unbind(),
                convert,
            });
            *lock(&self.staged) = None;
            Ok(())
        })
    }
}
