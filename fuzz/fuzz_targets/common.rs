//! Shared by the fuzz targets: fuzz bytes as files in a per-process scratch directory.

use std::path::PathBuf;

/// A scratch directory of this process (one fuzzing process runs one input at a time).
pub fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rl-fuzz-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).expect("scratch directory");
    d
}

/// Opens `data` as a dataset file of extension `ext` and streams it like an offline
/// algorithm, for each env whose spaces could fit.
#[allow(dead_code)]
pub fn dataset(data: &[u8], ext: &str) {
    use rl::offline::{BatchStream, Dataset};
    let p = scratch(ext).join(format!("data.{ext}"));
    std::fs::write(&p, data).expect("scratch file");
    let Ok(ds) = Dataset::open(&p) else {
        return;
    };
    for id in ["CartPole-v1", "Pendulum-v1", "FrozenLake-v1", "MountainCarContinuous-v0"] {
        let env = rl::envs::make(id, &Default::default()).expect("built-in env");
        let mut ds = ds.clone();
        if ds.fit(id, env.observation_space(), env.action_space()).is_err() {
            continue;
        }
        let rows = ds.num_rows();
        let mut stream = BatchStream::new(ds, 64, Some(0.99), rl::core::Rng::seed_from(0));
        // One pass over the data, in batches (an empty or bad file is an error, not a panic).
        let mut seen = 0;
        while seen < rows {
            match stream.next_batch(32) {
                Ok(b) => seen += b.data.len().max(1),
                Err(_) => break,
            }
        }
    }
}

/// libfuzzer-sys's panic hook aborts at once, even on panics the library catches itself (the
/// parquet reader's asserts are caught and reported as errors naming the file). This hook only
/// prints: a panic that escapes the target still ends the run, through libfuzzer-sys's outer
/// `catch_unwind`, which aborts.
pub fn allow_caught_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::panic::set_hook(Box::new(|info| eprintln!("{info}")));
    });
}
