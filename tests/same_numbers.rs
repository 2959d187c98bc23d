//! The same numbers before and after a refactor: a short run of every algorithm (and of the
//! Rainbow and discrete-SAC variants; IMPALA and APPO in lockstep), every tensor of its
//! checkpoint (parameters, optimizer state, targets) hashed by content
//! (tensor names and file layout may change, values may not) and compared with
//! `tests/data/same-numbers.json`, one table per kernel level.
//!
//! Hashes hold for one machine type at one kernel level (gemm's block sizes follow the CPU's
//! caches), so the test is `#[ignore]`d: `cargo xtask same-numbers [--record]` runs it at each
//! level, `RL_SAME_NUMBERS=record` rewrites this level's table.

use rl_training::core::burn::tensor::Device;
use rl_training::core::config::RunConfig;
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};

mod common;

/// Every case: a label and its config (`total_timesteps` steps, 2 envs, seed 1).
fn cases() -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = rl_training::ALGORITHMS
        .iter()
        .map(|n| {
            let yaml = common::tiny(n, steps(n));
            // The asynchronous runners' interleaving depends on timing; lockstep does not.
            let yaml = match *n {
                "impala" | "appo" => {
                    yaml.replace("algo_kwargs: {", "algo_kwargs: {lockstep: true, ")
                }
                _ => yaml,
            };
            (n.to_string(), yaml)
        })
        .collect();
    let rainbow = "algorithm: dqn\nenv_id: CartPole-v1\ntotal_timesteps: 512\nn_envs: 2\nseed: 1\nalgo_kwargs: {learning_starts: 64, train_freq: 4, batch_size: 16, double_q: true, dueling: true, n_step: 3, prioritized_replay: true, num_atoms: 11, v_min: 0.0, v_max: 100.0, noisy: true, hiddens: [16], policy_kwargs: {net_arch: [16]}}\n";
    let sac_discrete = "algorithm: sac\nenv_id: CartPole-v1\ntotal_timesteps: 512\nn_envs: 2\nseed: 1\nalgo_kwargs: {learning_starts: 64, train_freq: 4, batch_size: 16, target_entropy: 0.3, policy_kwargs: {net_arch: [16]}}\n";
    v.push(("dqn_rainbow".into(), rainbow.into()));
    v.push(("sac_discrete".into(), sac_discrete.into()));
    v
}

/// Enough steps for several updates of each.
fn steps(name: &str) -> u64 {
    match name {
        "es" | "ars" => 4096,
        _ => 512,
    }
}

/// FNV-1a, 64 bits: enough to tell two byte strings apart in a regression check.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The tensors of a safetensors file as `dtype shape hash` lines, sorted (names left out).
fn tensor_lines(path: &Path) -> Vec<String> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: Map<String, Value> = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let data = &bytes[8 + n..];
    let mut lines: Vec<String> = header
        .iter()
        .filter(|(k, _)| *k != "__metadata__")
        .map(|(_, t)| {
            let off = &t["data_offsets"];
            let (a, b) = (
                off[0].as_u64().unwrap() as usize,
                off[1].as_u64().unwrap() as usize,
            );
            format!("{} {} {:016x}", t["dtype"], t["shape"], fnv(&data[a..b]))
        })
        .collect();
    lines.sort();
    lines
}

/// Every tensor of every safetensors file of a checkpoint (parameters, optimizer state,
/// targets), by content.
fn checkpoint_hash(dir: &Path) -> String {
    let mut lines: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "safetensors"))
        .flat_map(|p| tensor_lines(&p))
        .collect();
    lines.sort();
    format!(
        "{:016x} ({} tensors)",
        fnv(lines.join("\n").as_bytes()),
        lines.len()
    )
}

fn record_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/same-numbers.json")
}

#[test]
#[ignore = "machine- and kernel-specific: run by cargo xtask same-numbers"]
fn short_runs_give_the_recorded_numbers() {
    let dev = Device::flex();
    // RL_KERNELS, as `rl_training::build` applies it; a bad value is named here.
    let level = rl_training::core::kernels::apply(Default::default())
        .map(|_| rl_training::core::kernels::active().name())
        .unwrap_or_else(|e| panic!("{e}"));
    let mut now = Map::new();
    for (label, yaml) in cases() {
        let run = RunConfig::from_yaml(&yaml, &[], &label).unwrap();
        let mut alg = rl_training::build(&run, &dev).unwrap_or_else(|e| panic!("{label}: {e}"));
        while alg.num_timesteps() < run.total_timesteps {
            alg.train().unwrap_or_else(|e| panic!("{label}: {e}"));
        }
        let dir = std::env::temp_dir().join(format!("rl-same-{}-{label}", std::process::id()));
        alg.save(&dir).unwrap_or_else(|e| panic!("{label}: {e}"));
        let h = json!({"num_timesteps": alg.num_timesteps(), "tensors": checkpoint_hash(&dir)});
        let _ = std::fs::remove_dir_all(&dir);
        println!("same-numbers {level} {label}: {h}");
        now.insert(label, h);
    }
    let path = record_path();
    let mut all: Map<String, Value> = std::fs::read_to_string(&path)
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or_default();
    if std::env::var("RL_SAME_NUMBERS").is_ok_and(|v| v == "record") {
        all.insert(level.into(), Value::Object(now));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_string_pretty(&all).unwrap() + "\n").unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        return;
    }
    let want = all
        .get(level)
        .and_then(Value::as_object)
        .unwrap_or_else(|| panic!("{}: no table for {level}; record one", path.display()));
    let differ: Vec<String> = want
        .iter()
        .filter(|(k, v)| now.get(*k) != Some(v))
        .map(|(k, v)| {
            format!(
                "{k}: recorded {v}, now {}",
                now.get(k).unwrap_or(&Value::Null)
            )
        })
        .collect();
    assert!(
        differ.is_empty(),
        "different numbers at {level}:\n{}",
        differ.join("\n")
    );
    let new: Vec<&String> = now.keys().filter(|k| !want.contains_key(*k)).collect();
    assert!(new.is_empty(), "cases without a record at {level}: {new:?}");
}
