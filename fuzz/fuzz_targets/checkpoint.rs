//! A checkpoint directory: the manifest (`checkpoint.json`), the run config, JSON state files
//! and safetensors weights, read as `rl eval` / `rl resume` read them.
//!
//! Input layout (what `cargo xtask fuzz` seeds from real checkpoints): one byte of mode, then
//! files as `[name length u8][name][data length u32 LE][data]`. Mode bit 0 set: the manifest is
//! rewritten with the files' true sizes and checksums, so mutations reach the parsers behind
//! the checksum check; clear: the manifest is taken as given.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

#[path = "common.rs"]
mod common;

fn files(mut data: &[u8]) -> Vec<(String, Vec<u8>)> {
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
        serde_json::Value::Number(n) => {
            n.as_f64().is_none_or(|x| x.abs() <= if in_list { 1024.0 } else { 200_000.0 })
        }
        serde_json::Value::Array(a) => a.len() <= 16 && a.iter().all(|x| modest(x, true)),
        serde_json::Value::Object(o) => o.values().all(|x| modest(x, in_list)),
        _ => true,
    }
}

fuzz_target!(|data: &[u8]| {
    common::allow_caught_panics();
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let dir = common::scratch("checkpoint").join("ck");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut fs = files(rest);
    if mode & 1 == 1 {
        fs.retain(|(n, _)| n != rl::core::checkpoint::MANIFEST);
        let entries: Vec<serde_json::Value> = fs
            .iter()
            .map(|(n, d)| {
                serde_json::json!({"name": n, "size": d.len(),
                    "checksum": format!("{:016x}", rl::core::checkpoint::checksum(d))})
            })
            .collect();
        let algo = ["ppo", "dqn", "sac", "bc", "es"][(mode as usize >> 1) % 5];
        let m = serde_json::json!({"format_version": 1, "algorithm": algo, "files": entries});
        fs.push((rl::core::checkpoint::MANIFEST.into(), m.to_string().into_bytes()));
    }
    for (n, d) in &fs {
        // A name the file system refuses is no checkpoint anyone could have.
        if std::fs::write(dir.join(n), d).is_err() {
            return;
        }
    }
    read(&dir);
});

fn read(dir: &Path) {
    use rl::core::checkpoint::{read_checkpoint, read_run_config};
    let Ok(ck) = read_checkpoint(dir) else {
        return;
    };
    let run = read_run_config(&ck);
    for (name, _) in [("model.safetensors", 0), ("state.json", 1)] {
        if let Ok(bytes) = ck.file(name) {
            if name.ends_with(".safetensors") {
                let _ = rl::core::params::TensorMap::from_bytes(bytes, name);
            } else {
                let _ = serde_json::from_slice::<serde_json::Value>(bytes);
            }
        }
    }
    if let Ok(run) = run
        && run.n_envs <= 16
        && modest(&serde_json::Value::Object(run.algo_kwargs.clone()), false)
    {
        let dev = rl::core::burn::tensor::Device::flex();
        let _ = rl::load(dir, &dev);
    }
}
