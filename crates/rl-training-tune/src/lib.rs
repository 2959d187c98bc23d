//! rl-training-tune: hyperparameter search over ordinary run configs (`rl tune CONFIG.yaml`), in Ray
//! Tune's terms.
//!
//! A search space sits inside the run YAML wherever a value can stand
//! (`learning_rate: {loguniform: [1e-5, 1e-2]}`, `seed: {grid_search: [0, 1, 2]}`; see
//! [`space`]); a `tune:` section says what to optimize and how ([`config::TuneConfig`]). Each
//! trial is a child process of the `rl` binary with its own run directory; a scheduler
//! ([`scheduler`]: FIFO, ASHA, median stopping, population based training) stops the poor ones
//! early or restarts them from better ones; the experiment's
//! state is one JSON file rewritten atomically, so `rl tune --resume DIR` continues after a
//! crash ([`experiment`]).
#![warn(missing_docs)]

pub mod config;
pub mod experiment;
pub mod scheduler;
pub mod search;
pub mod space;

pub use config::{Mode, SchedulerConfig, TuneConfig};
pub use experiment::{ExperimentState, Options, Status, Trial, TuneError};

use rl_training_core::algorithm::RlError;
use rl_training_core::config::{ConfigError, RunConfig};
use std::path::Path;

/// Starts the experiment of `config` (a run YAML with a `tune:` section) in `dir`, or with
/// `resume` continues the one saved there. `validate` checks each trial's config before any
/// trial starts (the CLI builds the algorithm).
pub fn tune(
    config: Option<&Path>,
    dir: &Path,
    validate: &dyn Fn(&RunConfig) -> Result<(), RlError>,
    opts: &Options,
) -> Result<ExperimentState, TuneError> {
    let state = match config {
        Some(path) => {
            if dir.join(experiment::STATE_FILE).exists() {
                return Err(TuneError::File {
                    path: dir.display().to_string(),
                    message: "holds an experiment already: continue it with --resume, or pick \
                              another --out"
                        .into(),
                });
            }
            let source = path.display().to_string();
            let text = std::fs::read_to_string(path).map_err(|e| TuneError::File {
                path: source.clone(),
                message: e.to_string(),
            })?;
            let tree: serde_json::Value = serde_saphyr::from_str(&text)
                .map_err(|e| ConfigError::new(source.clone(), format!("not valid YAML: {e}")))?;
            ExperimentState::new(tree, validate).map_err(|e| match e {
                TuneError::Config(c) => TuneError::Config(c.in_file(&source)),
                other => other,
            })?
        }
        None => ExperimentState::load(dir)?,
    };
    experiment::run(dir, state, opts)
}

impl From<TuneError> for RlError {
    fn from(e: TuneError) -> Self {
        match e {
            TuneError::Config(c) => RlError::Config(c),
            other => RlError::Other(other.to_string()),
        }
    }
}
