//! The Python package `rl`'s native module, `rl_training._rl`: one class, [`Agent`], that builds any
//! algorithm of the library from a run config (the YAML of `rl train`, as a JSON text), trains
//! it, predicts, evaluates, saves and loads the same checkpoint directories as the CLI.
//!
//! The SB3-shaped classes (`rl.core.PPO`, …) are Python (`python/rl/`); they turn keyword
//! arguments into that run config. Everything that takes time runs with the interpreter's lock
//! released: Python envs (`gymnasium:ID`) take it back around each of their calls.
#![warn(missing_docs)]

use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rl_training::core::algorithm::{Algorithm, Control, Event, RlError, StopConditions};
use rl_training::core::config::{ConfigError, RunConfig};
use rl_training::core::{EnvError, Space};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, PoisonError};

// The `rl` binary's allocator: training's many small tensors allocate at its speed here too
// (only Rust's allocations; numpy arrays made from Rust vectors are freed by it as well).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// An rl error as the Python exception a Python user expects: a bad hyperparameter, env id or
/// config value is a `ValueError` naming its key; a file that cannot be read or written an
/// `OSError`; anything else (an env that failed, a diverged loss) a `RuntimeError`.
fn py_err(e: RlError) -> PyErr {
    match e {
        RlError::Config(c) => PyValueError::new_err(format!("{}: {}", c.field, c.message)),
        RlError::Kernels(k) => PyValueError::new_err(format!("kernels: {k}")),
        RlError::Threads(t) => PyValueError::new_err(t.to_string()),
        RlError::Checkpoint(c) => PyOSError::new_err(c.to_string()),
        // An env that cannot be made (unknown id, bad env_kwargs) is a bad `env_id` value.
        RlError::Env(EnvError::Make(m)) => PyValueError::new_err(format!("env_id: {m}")),
        other => PyRuntimeError::new_err(other.to_string()),
    }
}

fn config_err(e: ConfigError) -> PyErr {
    py_err(RlError::Config(e))
}

/// A space as a small dict the Python side turns into numpy arrays.
fn space_dict<'py>(py: Python<'py>, space: &Space) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    match space {
        Space::Discrete { n, start } => {
            d.set_item("kind", "Discrete")?;
            d.set_item("n", n)?;
            d.set_item("start", start)?;
        }
        Space::Box { low, high, shape } => {
            d.set_item("kind", "Box")?;
            d.set_item("shape", shape.clone())?;
            d.set_item("low", low.clone())?;
            d.set_item("high", high.clone())?;
        }
        Space::MultiDiscrete { nvec } => {
            d.set_item("kind", "MultiDiscrete")?;
            d.set_item("nvec", nvec.clone())?;
        }
        Space::MultiBinary { n } => {
            d.set_item("kind", "MultiBinary")?;
            d.set_item("n", n)?;
        }
        other => {
            d.set_item("kind", "Flat")?;
            d.set_item("shape", vec![other.raw_dim()])?;
        }
    }
    Ok(d)
}

/// A float32 numpy vector.
type Array<'py> = Bound<'py, PyArray1<f32>>;

/// A trained or training algorithm.
#[pyclass(module = "rl_training._rl")]
pub struct Agent {
    // A Mutex makes the class `Sync`, as PyO3 asks; `&mut self` methods reach it without
    // locking (`get_mut`), the getters lock it.
    algo: Mutex<Box<dyn Algorithm + Send>>,
    run: RunConfig,
}

fn device(name: &str) -> PyResult<rl_training::core::burn::tensor::Device> {
    rl_training::core::device::parse_device(name)
        .map_err(|e| config_err(ConfigError::new("device", e)))
}

#[pymethods]
impl Agent {
    /// Builds the algorithm of a run config given as JSON text (the keys of `rl train`'s
    /// YAML). Raises `ValueError` naming the key of a bad value or an unknown key.
    #[staticmethod]
    fn build(py: Python<'_>, config_json: &str) -> PyResult<Self> {
        let value: serde_json::Value = serde_json::from_str(config_json)
            .map_err(|e| PyValueError::new_err(format!("config: not JSON: {e}")))?;
        let run: RunConfig = rl_training::core::config::strict(value, "").map_err(config_err)?;
        let dev = device(&run.device)?;
        py.detach(|| {
            rl_training::check_config(&run)?;
            let algo = rl_training::build(&run, &dev)?;
            Ok(Self {
                algo: Mutex::new(algo),
                run,
            })
        })
        .map_err(py_err)
    }

    /// A run config file (`rl train`'s YAML) as JSON text, checked as `rl train` reads it.
    #[staticmethod]
    fn read_config(path: PathBuf) -> PyResult<String> {
        let text = std::fs::read_to_string(&path)
            .map_err(|e| PyOSError::new_err(format!("{}: {e}", path.display())))?;
        let run =
            RunConfig::from_yaml(&text, &[], &path.display().to_string()).map_err(config_err)?;
        Ok(serde_json::to_string(&run).expect("a run config serializes"))
    }

    /// Loads a checkpoint directory (written by `save` or by the CLI).
    #[staticmethod]
    #[pyo3(signature = (path, device_name = None))]
    fn load(py: Python<'_>, path: PathBuf, device_name: Option<&str>) -> PyResult<Self> {
        py.detach(|| {
            let run = rl_training::checkpoint_config(&path)?;
            let dev = rl_training::core::device::parse_device(device_name.unwrap_or(&run.device))
                .map_err(|e| RlError::Config(ConfigError::new("device", e)))?;
            let algo = rl_training::load(&path, &dev)?;
            Ok(Self {
                algo: Mutex::new(algo),
                run,
            })
        })
        .map_err(py_err)
    }

    /// Trains until `num_timesteps` reaches `until` env steps. `callback(metrics)` runs after
    /// every iteration with the iteration's metrics (and `num_timesteps`); returning `False`
    /// stops training. The interpreter's lock is released while Rust trains.
    #[pyo3(signature = (until, callback = None, progress_bar = false))]
    fn learn(
        &mut self,
        py: Python<'_>,
        until: u64,
        callback: Option<Py<PyAny>>,
        progress_bar: bool,
    ) -> PyResult<()> {
        let algo = self.algo_mut();
        if until > algo.total_timesteps() {
            algo.set_total_timesteps(until);
        }
        let stop = StopConditions {
            total_timesteps: until,
            ..StopConditions::default()
        };
        let start = algo.num_timesteps();
        let bar = progress_bar.then(|| {
            let b = indicatif::ProgressBar::new(until.saturating_sub(start));
            b.set_style(
                indicatif::ProgressStyle::with_template(
                    "{bar:40} {pos}/{len} env steps [{elapsed} < {eta}]",
                )
                .expect("a valid template"),
            );
            b
        });
        let mut failure: Option<PyErr> = None;
        let result = py.detach(|| {
            let mut on_event = |event: &Event<'_>| {
                let Event::Iteration { timesteps, metrics } = event else {
                    return Control::Continue;
                };
                if let Some(b) = &bar {
                    b.set_position(timesteps.saturating_sub(start));
                }
                let Some(cb) = &callback else {
                    return Control::Continue;
                };
                Python::attach(|py| {
                    let call = || -> PyResult<bool> {
                        let d = PyDict::new(py);
                        for (k, v) in metrics.iter() {
                            d.set_item(k, v)?;
                        }
                        d.set_item("num_timesteps", *timesteps)?;
                        let out = cb.call1(py, (d,))?;
                        // `None` (a callback that returns nothing) goes on, as in SB3.
                        Ok(out.is_none(py) || out.bind(py).is_truthy()?)
                    };
                    match call() {
                        Ok(true) => Control::Continue,
                        Ok(false) => Control::Stop,
                        Err(e) => {
                            failure = Some(e);
                            Control::Stop
                        }
                    }
                })
            };
            algo.learn(&stop, &mut on_event)
        });
        if let Some(b) = bar {
            b.finish();
        }
        if let Some(e) = failure {
            return Err(e);
        }
        result.map_err(py_err)
    }

    /// The action (raw encoding: a discrete action as its value) for one flat observation.
    #[pyo3(signature = (obs, deterministic = true))]
    fn predict<'py>(
        &mut self,
        py: Python<'py>,
        obs: PyReadonlyArray1<'py, f32>,
        deterministic: bool,
    ) -> PyResult<Bound<'py, PyArray1<f32>>> {
        let obs = obs.as_slice()?.to_vec();
        self.check_obs(&obs)?;
        let algo = self.algo_mut();
        let act = py
            .detach(|| algo.predict(&obs, deterministic))
            .map_err(py_err)?;
        Ok(PyArray1::from_vec(py, act))
    }

    /// [`predict`](Self::predict) from a recurrent state the caller keeps (empty at an
    /// episode's start); returns the action and the next state.
    #[pyo3(signature = (obs, state, deterministic = true))]
    fn predict_with_state<'py>(
        &mut self,
        py: Python<'py>,
        obs: PyReadonlyArray1<'py, f32>,
        state: PyReadonlyArray1<'py, f32>,
        deterministic: bool,
    ) -> PyResult<(Array<'py>, Array<'py>)> {
        let obs = obs.as_slice()?.to_vec();
        self.check_obs(&obs)?;
        let mut state = state.as_slice()?.to_vec();
        let algo = self.algo_mut();
        let act = py
            .detach(|| algo.predict_with_state(&obs, &mut state, deterministic))
            .map_err(py_err)?;
        Ok((PyArray1::from_vec(py, act), PyArray1::from_vec(py, state)))
    }

    /// Forgets the recurrent state `predict` carries (an episode starts).
    fn reset_predict_state(&mut self) {
        self.algo_mut().reset_predict_state();
    }

    /// Returns of `n_eval_episodes` episodes on a fresh evaluation env of the run (episode `i`
    /// reset with `seed + i`): `(returns, mean_length)`.
    #[pyo3(signature = (n_eval_episodes = 10, deterministic = true, seed = None))]
    fn evaluate(
        &mut self,
        py: Python<'_>,
        n_eval_episodes: usize,
        deterministic: bool,
        seed: Option<u64>,
    ) -> PyResult<(Vec<f64>, f64)> {
        let (algo, run) = (
            self.algo.get_mut().unwrap_or_else(PoisonError::into_inner),
            &self.run,
        );
        let seed = seed.unwrap_or_else(|| run.eval_seed());
        py.detach(|| {
            let mut env = rl_training::make_eval_env(run)?;
            let r = algo.evaluate(env.as_mut(), n_eval_episodes, deterministic, seed)?;
            Ok((r.returns, r.mean_length))
        })
        .map_err(py_err)
    }

    /// Writes a checkpoint directory (the CLI's format: `rl resume` and `rl eval` read it).
    fn save(&mut self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        let algo = self.algo_mut();
        // `move`: the closure owns the `&mut` (Send), not a `&` to it (which would need Sync).
        py.detach(move || algo.save(&path)).map_err(py_err)
    }

    /// Env steps taken so far.
    #[getter]
    fn num_timesteps(&self) -> u64 {
        self.lock().num_timesteps()
    }

    /// The algorithm's short name (`ppo`, `dqn`, …).
    #[getter]
    fn algorithm(&self) -> String {
        self.lock().name().to_string()
    }

    /// The run config as JSON text.
    #[getter]
    fn config(&self) -> String {
        serde_json::to_string(&self.run).expect("a run config serializes")
    }

    /// The observation space, as a dict (`kind`, `shape`, `low`, `high`, `n`, …).
    #[getter]
    fn observation_space<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        space_dict(py, self.lock().observation_space())
    }

    /// The action space, as a dict.
    #[getter]
    fn action_space<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        space_dict(py, self.lock().action_space())
    }
}

impl Agent {
    fn algo_mut(&mut self) -> &mut Box<dyn Algorithm + Send> {
        self.algo.get_mut().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock(&self) -> MutexGuard<'_, Box<dyn Algorithm + Send>> {
        self.algo.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn check_obs(&self, obs: &[f32]) -> PyResult<()> {
        let want = self.lock().observation_space().raw_dim();
        if obs.len() == want {
            return Ok(());
        }
        Err(PyValueError::new_err(format!(
            "observation: {} values, the policy's observation space has {want}",
            obs.len()
        )))
    }
}

/// Ids of the envs built into rl (Gymnasium-exact Rust envs); others go to Gymnasium.
#[pyfunction]
fn builtin_env_ids() -> Vec<String> {
    rl_training::envs::registry()
        .ids()
        .into_iter()
        .map(str::to_string)
        .chain(
            rl_training::envs::multi_agent_ids()
                .iter()
                .map(|s| s.to_string()),
        )
        .collect()
}

/// Algorithms this build provides (their `algorithm:` names).
#[pyfunction]
fn algorithms() -> Vec<&'static str> {
    rl_training::ALGORITHMS.to_vec()
}

/// The run config keys of `rl train`'s YAML (aliases included) outside `algo_kwargs`.
#[pyfunction]
fn run_config_keys() -> Vec<&'static str> {
    rl_training::core::config::accepted_keys::<RunConfig>()
}

/// Env steps per second of `env_id` (an rl id: built-in, or `gymnasium:ID` through the bridge)
/// stepped `steps` times with uniformly random actions from rl's own generator, reset at every
/// episode's end, timed in Rust with the interpreter's lock released (a bridged env takes it per
/// call): the bridge's overhead benchmark (`python/bench/bridge.py`). With `n_envs` > 1, a
/// vector env of that many (same-step autoreset; Gymnasium envs stage their steps, one Python
/// call per vector step), `steps` counting env steps.
#[pyfunction]
#[pyo3(signature = (env_id, steps, seed = 0, n_envs = 1))]
fn env_steps_per_second(
    py: Python<'_>,
    env_id: &str,
    steps: u64,
    seed: u64,
    n_envs: usize,
) -> PyResult<f64> {
    py.detach(|| -> Result<f64, EnvError> {
        let mut rng = rl_training::core::Rng::seed_from(seed);
        let mut action = Vec::new();
        if n_envs > 1 {
            let envs = (0..n_envs)
                .map(|_| rl_training::envs::make(env_id, &Default::default()))
                .collect::<Result<Vec<_>, _>>()?;
            let mut venv = rl_training::core::vec_env::VecEnv::new(envs)?;
            let space = venv.action_space().clone();
            venv.reset(Some(seed))?;
            let rounds = steps / n_envs as u64;
            let t = std::time::Instant::now();
            for _ in 0..rounds {
                action.clear();
                for _ in 0..n_envs {
                    space.sample(&mut rng, &mut action);
                }
                venv.step(&action)?;
            }
            return Ok((rounds * n_envs as u64) as f64 / t.elapsed().as_secs_f64());
        }
        let mut env = rl_training::envs::make(env_id, &Default::default())?;
        let mut obs = vec![0.0; env.observation_space().raw_dim()];
        let space = env.action_space().clone();
        env.reset(Some(seed), None, &mut obs)?;
        let t = std::time::Instant::now();
        for _ in 0..steps {
            action.clear();
            space.sample(&mut rng, &mut action);
            let s = env.step(&action, &mut obs)?;
            if s.terminated || s.truncated {
                env.reset(None, None, &mut obs)?;
            }
        }
        Ok(steps as f64 / t.elapsed().as_secs_f64())
    })
    .map_err(|e| py_err(RlError::Env(e)))
}

/// The native module.
#[pymodule]
fn _rl(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // `gymnasium:ID` ids are made in this interpreter (see Cargo.toml); a second import keeps
    // the first route, which is the same function.
    rl_training::envs::set_gymnasium_maker(rl_training_gymnasium::make);
    m.add_class::<Agent>()?;
    m.add_function(wrap_pyfunction!(builtin_env_ids, m)?)?;
    m.add_function(wrap_pyfunction!(algorithms, m)?)?;
    m.add_function(wrap_pyfunction!(run_config_keys, m)?)?;
    m.add_function(wrap_pyfunction!(env_steps_per_second, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
