//! The bodies of the fuzz targets, shared by `fuzz/fuzz_targets/*.rs` (cargo-fuzz) and the
//! facade's `tests/fuzz_corpus.rs`, which replays every committed seed (`fuzz/corpus/<target>`)
//! through them in the ordinary test build. Each takes raw bytes: input the readers refuse must
//! come back as an error, so a panic here is a bug (the round-trip asserts are invariants). Each
//! returns whether the readers accepted the input, which the seed replay checks.
// Each fuzz target uses one body of this file.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// A scratch directory of this process (one fuzzing process runs one input at a time).
pub fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rl-fuzz-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).expect("scratch directory");
    d
}

/// The YAML run config through the path `rl train` takes before it trains: `--set key=value`
/// overrides (input lines starting with `#set `), YAML parsing, strict deserialization (aliases,
/// schedules, unknown keys), the algorithm's range checks and making the env. Accepted: the
/// config parses (the range checks may still refuse it).
pub fn config(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let overrides: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("#set "))
        .map(String::from)
        .collect();
    if let Ok(run) = rl_training::core::config::RunConfig::from_yaml(text, &overrides, "fuzz.yaml")
    {
        // What `rl train` saves into the run directory must parse back to the same config.
        let saved =
            rl_training::core::runner::config_yaml(&run).expect("a parsed config serializes");
        let back = rl_training::core::config::RunConfig::from_yaml(&saved, &[], "config.yaml")
            .unwrap_or_else(|e| panic!("saved config does not parse back: {e}\n{saved}"));
        assert_eq!(back, run, "saved config differs:\n{saved}");
        let _ = rl_training::check_config(&run);
        return true;
    }
    false
}

/// Batches as they arrive from another process over the broker (an on-policy runner's
/// rollout, an off-policy runner's transition chunk): decoded (an error, never a panic or a
/// huge allocation), and a batch that decodes encodes back to the same bytes. Accepted: one of
/// the two decodes it.
pub fn broker(data: &[u8]) -> bool {
    use rl_training::broker::Wire;
    use rl_training::off_policy::runners::TransitionChunk;
    use rl_training::on_policy::actor_learner::RunnerBatch;
    let mut accepted = false;
    if let Ok(batch) = RunnerBatch::decode(data) {
        assert_eq!(batch.encode(), data, "decode then encode changed the bytes");
        accepted = true;
    }
    if let Ok(chunk) = TransitionChunk::decode(data) {
        assert_eq!(chunk.encode(), data, "decode then encode changed the bytes");
        accepted = true;
    }
    accepted
}

/// A checkpoint directory: the manifest (`checkpoint.json`), the run config, JSON state files
/// and safetensors weights, read as `rl eval` / `rl resume` read them.
///
/// Input layout (what `fuzz/pack_checkpoint.py` makes from real checkpoints): one byte of
/// mode, then files as `[name length u8][name][data length u32 LE][data]`. Mode bit 0 set: the
/// manifest is rewritten with the files' true sizes and checksums, so mutations reach the
/// parsers behind the checksum check; clear: the manifest is taken as given. Accepted: the
/// manifest and run config read, and the algorithm loads (when its networks are of a size the
/// fuzzer loads, `modest`).
pub fn checkpoint(data: &[u8]) -> bool {
    let Some((&mode, rest)) = data.split_first() else {
        return false;
    };
    let dir = scratch("checkpoint").join("ck");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut fs = packed_files(rest);
    if mode & 1 == 1 {
        fs.retain(|(n, _)| n != rl_training::core::checkpoint::MANIFEST);
        let entries: Vec<serde_json::Value> = fs
            .iter()
            .map(|(n, d)| {
                serde_json::json!({"name": n, "size": d.len(),
                    "checksum": format!("{:016x}", rl_training::core::checkpoint::checksum(d))})
            })
            .collect();
        let algo = ["ppo", "dqn", "sac", "bc", "es"][(mode as usize >> 1) % 5];
        let m = serde_json::json!({"format_version": 1, "algorithm": algo, "files": entries});
        fs.push((
            rl_training::core::checkpoint::MANIFEST.into(),
            m.to_string().into_bytes(),
        ));
    }
    for (n, d) in &fs {
        // A name the file system refuses is no checkpoint anyone could have.
        if std::fs::write(dir.join(n), d).is_err() {
            return false;
        }
    }
    read_checkpoint(&dir)
}

fn packed_files(mut data: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    while let Some((&n, rest)) = data.split_first() {
        let n = n as usize;
        if rest.len() < n + 4 {
            break;
        }
        let name = String::from_utf8_lossy(&rest[..n]).to_string();
        let len = u32::from_le_bytes(rest[n..n + 4].try_into().unwrap()) as usize;
        let body = &rest[n + 4..];
        let body = &body[..len.min(body.len())];
        // Plain, short file names only: the directory is the fuzzer's own.
        let plain = !name.is_empty() && name.len() <= 64 && !name.contains(['/', '\\', '\0']);
        if plain && name != "." && name != ".." {
            out.push((name, body.to_vec()));
        }
        data = &rest[n + 4 + body.len()..];
    }
    out
}

/// Keeps full loads (which build the networks the config asks for) to configs of modest size:
/// a checkpoint may legitimately ask for a network larger than the fuzzer's memory limit.
fn modest(v: &serde_json::Value, in_list: bool) -> bool {
    match v {
        serde_json::Value::Number(n) => n
            .as_f64()
            .is_none_or(|x| x.abs() <= if in_list { 1024.0 } else { 200_000.0 }),
        serde_json::Value::Array(a) => a.len() <= 16 && a.iter().all(|x| modest(x, true)),
        serde_json::Value::Object(o) => o.values().all(|x| modest(x, in_list)),
        _ => true,
    }
}

fn read_checkpoint(dir: &Path) -> bool {
    use rl_training::core::checkpoint::{read_checkpoint, read_run_config};
    let Ok(ck) = read_checkpoint(dir) else {
        return false;
    };
    let Ok(run) = read_run_config(&ck) else {
        return false;
    };
    for name in ["model.safetensors", "state.json"] {
        if let Ok(bytes) = ck.file(name) {
            if name.ends_with(".safetensors") {
                let _ = rl_training::core::params::TensorMap::from_bytes(bytes, name);
            } else {
                let _ = serde_json::from_slice::<serde_json::Value>(bytes);
            }
        }
    }
    if run.n_envs <= 16 && modest(&serde_json::Value::Object(run.algo_kwargs.clone()), false) {
        let dev = rl_training::core::burn::tensor::Device::flex();
        return rl_training::load(dir, &dev).is_ok();
    }
    true
}

/// Opens `data` as a dataset file of extension `ext` (`parquet`, `npz`) and streams it like an
/// offline algorithm, for each env whose spaces could fit. Accepted: it opens, and streams
/// without an error for every env it fits.
pub fn dataset(data: &[u8], ext: &str) -> bool {
    use rl_training::offline::{BatchStream, Dataset};
    let p = scratch(ext).join(format!("data.{ext}"));
    std::fs::write(&p, data).expect("scratch file");
    let Ok(ds) = Dataset::open(&p) else {
        return false;
    };
    let mut accepted = true;
    for id in [
        "CartPole-v1",
        "Pendulum-v1",
        "FrozenLake-v1",
        "MountainCarContinuous-v0",
    ] {
        let env = rl_training::envs::make(id, &Default::default()).expect("built-in env");
        let mut ds = ds.clone();
        if ds
            .fit(id, env.observation_space(), env.action_space())
            .is_err()
        {
            continue;
        }
        let rows = ds.num_rows();
        let mut stream = BatchStream::new(ds, 64, Some(0.99), rl_training::core::Rng::seed_from(0));
        // One pass over the data, in batches (an empty or bad file is an error, not a panic).
        let mut seen = 0;
        while seen < rows {
            match stream.next_batch(32) {
                Ok(b) => seen += b.data.len().max(1),
                Err(_) => break,
            }
        }
        accepted &= seen >= rows;
    }
    accepted
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
