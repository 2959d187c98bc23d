//! How many threads flex's kernels (and rl's own parallel loops) use: rayon's global pool, which
//! flex's matrix products, convolutions and reductions split their work over. By default it has
//! one thread per core. `RL_NUM_THREADS=N` (or the run config's `num_threads: N`) pins it, as
//! `torch.set_num_threads` does for PyTorch: on a machine shared with other jobs, fewer threads
//! than cores keeps a split product from waiting on a thread the OS has descheduled.
//!
//! The pool is process-wide and is built once, at the first parallel operation; so the count is
//! fixed by the first run a process builds, and a later run asking for another count gets an
//! error instead of silently running with the first one's.

/// The environment variable that pins the thread count for a whole process.
pub const ENV_VAR: &str = "RL_NUM_THREADS";

/// A thread count that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ThreadsError {
    /// Not a whole number of threads.
    #[error(
        "{source_name}: {value:?} is not a thread count; expected a whole number (0: one per core)"
    )]
    NotACount {
        /// `RL_NUM_THREADS` or the config key `num_threads`.
        source_name: String,
        /// What it said.
        value: String,
    },
    /// The process's pool already runs another number of threads.
    #[error(
        "{source_name}: asks for {asked} threads, but this process already runs {running} \
         (the thread pool is built once per process: start a new process for another count)"
    )]
    AlreadyRunning {
        /// `RL_NUM_THREADS` or the config key `num_threads`.
        source_name: String,
        /// The count asked for.
        asked: usize,
        /// The count the pool has.
        running: usize,
    },
}

/// Parses a thread count (`0` or empty: one per core, returned as `None`); `source` names where
/// the value came from, for the error.
pub fn parse(source: &str, value: &str) -> Result<Option<usize>, ThreadsError> {
    let v = value.trim();
    if v.is_empty() {
        return Ok(None);
    }
    match v.parse::<usize>() {
        Ok(0) => Ok(None),
        Ok(n) => Ok(Some(n)),
        Err(_) => Err(ThreadsError::NotACount {
            source_name: source.to_string(),
            value: v.to_string(),
        }),
    }
}

/// The count `RL_NUM_THREADS` asks for (`None` when it is unset or 0).
pub fn from_env() -> Result<Option<usize>, ThreadsError> {
    match std::env::var(ENV_VAR) {
        Ok(v) => parse(ENV_VAR, &v),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(v)) => Err(ThreadsError::NotACount {
            source_name: ENV_VAR.to_string(),
            value: v.to_string_lossy().into_owned(),
        }),
    }
}

/// Gives the process's pool `threads` threads (`source` names where the count came from): builds
/// the pool if no parallel operation has run yet; an error if it already runs another count.
pub fn pin(source: &str, threads: usize) -> Result<(), ThreadsError> {
    let built = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("rl-compute-{i}"))
        .build_global();
    let running = rayon::current_num_threads();
    match built {
        Ok(()) => Ok(()),
        Err(_) if running == threads => Ok(()),
        Err(_) => Err(ThreadsError::AlreadyRunning {
            source_name: source.to_string(),
            asked: threads,
            running,
        }),
    }
}

/// Applies a run config's `num_threads` key (0: not set): a count is pinned; 0 leaves the choice
/// to `RL_NUM_THREADS` (checked here, so a bad value is named) and then to rayon (one thread per
/// core, or `RAYON_NUM_THREADS`). Returns the count in force.
pub fn apply(config: usize) -> Result<usize, ThreadsError> {
    let asked = match config {
        0 => from_env()?.map(|n| (ENV_VAR, n)),
        n => Some(("num_threads", n)),
    };
    if let Some((source, n)) = asked {
        pin(source, n)?;
    }
    Ok(rayon::current_num_threads())
}

/// Runs `f` on a thread of the compute pool while the caller waits (inline when the caller is
/// one already). Work that splits itself in two many times over (an update's actor and critic
/// halves, `rayon::join`) then starts each split on a pool thread, whose partner picks the other
/// half from its queue; called from outside, every split would be handed to the pool and the
/// caller put to sleep and woken again, two thread switches per minibatch.
pub fn on_pool<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    rayon::scope(|_| f())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_pool_runs_on_a_pool_thread_and_returns() {
        assert_eq!(rayon::current_thread_index(), None);
        let (inside, v) = on_pool(|| (rayon::current_thread_index(), on_pool(|| 41) + 1));
        assert!(inside.is_some(), "a pool thread");
        assert_eq!(v, 42);
    }

    #[test]
    fn counts_parse_and_bad_ones_are_named() {
        assert_eq!(parse("num_threads", "3"), Ok(Some(3)));
        assert_eq!(parse("num_threads", " 0 "), Ok(None));
        assert_eq!(parse(ENV_VAR, ""), Ok(None));
        let e = parse(ENV_VAR, "two").unwrap_err();
        assert_eq!(
            e.to_string(),
            "RL_NUM_THREADS: \"two\" is not a thread count; expected a whole number (0: one per core)"
        );
    }
}
