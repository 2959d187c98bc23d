//! Every committed fuzz seed (`fuzz/corpus/<target>/*`) through its fuzz target's body, in the
//! ordinary test build: the readers of user bytes (configs, checkpoints, Parquet and NPZ
//! datasets, runner batches) must take each seed without a panic. CI replays the seeds here;
//! `cargo xtask fuzz` runs the coverage-guided mutations from them (`docs/ci.md`).

use std::path::{Path, PathBuf};

#[path = "../fuzz/fuzz_targets/common.rs"]
mod common;

fn seeds(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("corpus entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{}: no seeds", dir.display());
    files
}

/// Runs `body` on every seed of `target`, naming the seed that panicked; the readers must
/// accept every seed but those named in `refused` (seeds made to be refused, such as a
/// regression input), and refuse those.
fn replay(target: &str, refused: &[&str], body: impl Fn(&[u8]) -> bool) {
    for path in seeds(target) {
        let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(&data)));
        let accepted = match run {
            Ok(accepted) => accepted,
            Err(e) => {
                let what = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                panic!("fuzz seed {} panicked: {what}", path.display());
            }
        };
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let expected = !refused.contains(&name.as_deref().unwrap_or(""));
        assert_eq!(
            accepted,
            expected,
            "fuzz seed {}: {}",
            path.display(),
            if expected {
                "refused, but it is a valid input"
            } else {
                "accepted, but it was made to be refused"
            }
        );
    }
}

#[test]
fn config_seeds() {
    // anchor.yaml: YAML anchors and aliases, with the anchor under a key the strict parser
    // refuses (`base`).
    replay("config", &["anchor.yaml"], common::config);
}

#[test]
fn checkpoint_seeds() {
    replay("checkpoint", &[], common::checkpoint);
}

#[test]
fn parquet_seeds() {
    replay("parquet", &["row_count_claim.parquet"], |d| {
        common::dataset(d, "parquet")
    });
}

#[test]
fn npz_seeds() {
    replay("npz", &[], |d| common::dataset(d, "npz"));
}

#[test]
fn broker_seeds() {
    replay("broker", &["chains_overflow.bin"], common::broker);
}
