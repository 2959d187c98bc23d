//! Staged steps ([`Env::stage`], [`StepBatch`]): wrappers that change actions stage the changed
//! action, and a vector env runs its envs' staged steps once per vector step before each env's
//! `step` takes its result.

use rl_training_core::Space;
use rl_training_core::env::{BatchPart, Env, EnvError, Info, Kwargs, Step, StepBatch};
use rl_training_core::vec_env::VecEnv;
use rl_training_core::wrappers::{ClipAction, RescaleAction};
use std::sync::{Arc, Mutex};

/// What a probe env's batch did: the actions it ran, and how many times it ran.
#[derive(Default)]
struct Ledger {
    actions: Vec<Vec<f32>>,
    runs: usize,
}

/// A backend whose staged steps run together: each run logs the actions it took.
#[derive(Default)]
struct ProbeSteps {
    staged: Vec<(Arc<Mutex<Ledger>>, Vec<f32>)>,
}

impl BatchPart for ProbeSteps {
    fn run(&mut self) -> Result<(), EnvError> {
        for (ledger, action) in &self.staged {
            ledger.lock().unwrap().actions.push(action.clone());
        }
        if let Some((ledger, _)) = self.staged.first() {
            ledger.lock().unwrap().runs += 1;
        }
        Ok(())
    }
    fn as_any(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

/// An env with one Box action whose step returns, as its observation, the action its staged
/// step ran with (so a step that did not find its staged result would show).
struct Probe {
    space: Space,
    ledger: Arc<Mutex<Ledger>>,
    mine: Arc<Mutex<Ledger>>,
}

impl Probe {
    fn new(low: f32, high: f32, ledger: &Arc<Mutex<Ledger>>) -> Self {
        Self {
            space: Space::boxed(vec![low], vec![high]),
            ledger: ledger.clone(),
            mine: Arc::new(Mutex::new(Ledger::default())),
        }
    }
}

impl Env for Probe {
    fn id(&self) -> &str {
        "Probe"
    }
    fn observation_space(&self) -> &Space {
        &self.space
    }
    fn action_space(&self) -> &Space {
        &self.space
    }
    fn reset(
        &mut self,
        _: Option<u64>,
        _: Option<&Kwargs>,
        obs: &mut [f32],
    ) -> Result<Info, EnvError> {
        obs[0] = 0.0;
        Ok(Info::new())
    }
    fn step(&mut self, action: &[f32], obs: &mut [f32]) -> Result<Step, EnvError> {
        let ran = self
            .mine
            .lock()
            .unwrap()
            .actions
            .pop()
            .expect("a staged step ran");
        assert_eq!(ran, action, "the step's action is the staged one");
        obs[0] = ran[0];
        Ok(Step {
            reward: 0.0,
            terminated: false,
            truncated: false,
            info: Info::new(),
        })
    }
    fn stage(&mut self, action: &[f32], batch: &mut StepBatch) -> Result<(), EnvError> {
        // Logged both in the shared ledger (runs, order) and the env's own (its result).
        let part = batch.part::<ProbeSteps>();
        part.staged.push((self.ledger.clone(), action.to_vec()));
        part.staged.push((self.mine.clone(), action.to_vec()));
        Ok(())
    }
}

#[test]
fn wrappers_that_change_actions_stage_the_changed_action() {
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let mut batch = StepBatch::default();
    let mut clip = ClipAction::new(Probe::new(-1.0, 1.0, &ledger)).unwrap();
    clip.stage(&[5.0], &mut batch).unwrap();
    let mut rescale = RescaleAction::new(Probe::new(-2.0, 2.0, &ledger), -1.0, 1.0).unwrap();
    rescale.stage(&[0.5], &mut batch).unwrap();
    assert!(!batch.is_empty());
    batch.run().unwrap();
    assert!(batch.is_empty());
    let l = ledger.lock().unwrap();
    assert_eq!(l.actions, vec![vec![1.0], vec![1.0]]);
    assert_eq!(l.runs, 1, "one run for both envs of the backend");
    drop(l);
    let mut obs = [0.0];
    rescale.step(&[0.5], &mut obs).unwrap();
    assert_eq!(obs, [1.0]);
}

#[test]
fn a_vector_env_runs_the_staged_steps_once_per_vector_step() {
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let envs: Vec<Box<dyn Env>> = (0..3)
        .map(|_| Box::new(Probe::new(-1.0, 1.0, &ledger)) as Box<dyn Env>)
        .collect();
    let mut v = VecEnv::with_threads(envs, 2).unwrap();
    v.reset(Some(0)).unwrap();
    for t in 0..5 {
        let actions = [0.1 * t as f32, -0.2, 0.3];
        v.step(&actions).unwrap();
        assert_eq!(v.obs(), &actions);
    }
    let l = ledger.lock().unwrap();
    assert_eq!(l.runs, 5);
    assert_eq!(l.actions.len(), 15);
    assert_eq!(l.actions[3..6], [vec![0.1], vec![-0.2], vec![0.3]]);
}
