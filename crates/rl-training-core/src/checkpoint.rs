//! Checkpoint directories written atomically: files go to a temporary directory that is
//! renamed into place, and a manifest with sizes and checksums makes a truncated or corrupt
//! file an error that names it.

use crate::algorithm::RlError;
use crate::config::{ConfigError, RunConfig};
use crate::params::{TensorMap, load_module_tensors};
use serde::{Deserialize, Serialize};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Version of the checkpoint layout.
pub const FORMAT_VERSION: u32 = 1;
/// Name of the manifest file.
pub const MANIFEST: &str = "checkpoint.json";

/// Errors reading or writing checkpoints.
#[derive(Debug, Error)]
pub enum CheckpointError {
    /// I/O failure on a file.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// Saving a checkpoint failed (a full disk, a permission): nothing was replaced.
    #[error("cannot save checkpoint {dir}: {source} (any previous checkpoint there is unchanged)")]
    Save {
        /// The checkpoint directory being written.
        dir: String,
        /// What failed.
        source: Box<CheckpointError>,
    },
    /// A file is missing, truncated, corrupt or of the wrong format.
    #[error("{path}: {reason}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
}

fn io(path: &Path, source: std::io::Error) -> CheckpointError {
    CheckpointError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// FNV-1a 64-bit checksum (detects truncation and corruption; not cryptographic).
pub fn checksum(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in data {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
    h
}

#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    format_version: u32,
    algorithm: String,
    files: Vec<FileEntry>,
}

#[derive(Debug, Serialize, Deserialize)]
struct FileEntry {
    name: String,
    size: u64,
    checksum: String,
}

fn write_synced(path: &Path, data: &[u8]) -> Result<(), CheckpointError> {
    // A file name may name a folder inside the checkpoint (`policies/p0/model.safetensors`).
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
    }
    let mut f = fs::File::create(path).map_err(|e| io(path, e))?;
    f.write_all(data).map_err(|e| io(path, e))?;
    f.sync_all().map_err(|e| io(path, e))
}

/// Writes `data` to `path` through a temporary file and a rename, so readers never see a
/// partial file.
pub fn write_file_atomic(path: &Path, data: &[u8]) -> Result<(), CheckpointError> {
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    write_synced(&tmp, data)?;
    fs::rename(&tmp, path).map_err(|e| io(path, e))
}

fn backup_path(dir: &Path) -> PathBuf {
    let mut s = dir.as_os_str().to_owned();
    s.push(".old");
    PathBuf::from(s)
}

fn manifest_bytes<N: AsRef<str>>(algorithm: &str, files: &[(N, Vec<u8>)]) -> Vec<u8> {
    let manifest = Manifest {
        format_version: FORMAT_VERSION,
        algorithm: algorithm.to_string(),
        files: files
            .iter()
            .map(|(name, data)| FileEntry {
                name: name.as_ref().to_string(),
                size: data.len() as u64,
                checksum: format!("{:016x}", checksum(data)),
            })
            .collect(),
    };
    serde_json::to_string_pretty(&manifest)
        .expect("serializable")
        .into_bytes()
}

/// Writes a checkpoint directory `dir` holding `files` (name → bytes) and a manifest.
///
/// The files are written and synced in `dir.tmp-<pid>`, which is then renamed to `dir`. An
/// existing `dir` is first renamed to `dir.old` and removed at the end; [`read_checkpoint`]
/// falls back to `dir.old` if a crash left no `dir`. So a kill at any moment leaves the
/// previous checkpoint or the new one loadable.
pub fn write_checkpoint(
    dir: &Path,
    algorithm: &str,
    files: &[(&str, Vec<u8>)],
) -> Result<(), CheckpointError> {
    let mut tmp = dir.as_os_str().to_owned();
    tmp.push(format!(".tmp-{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    write_checkpoint_via(dir, &tmp, algorithm, files).map_err(|e| {
        // Free what the failed write took (a full disk needs the space back).
        let _ = fs::remove_dir_all(&tmp);
        CheckpointError::Save {
            dir: dir.display().to_string(),
            source: Box::new(e),
        }
    })
}

fn write_checkpoint_via(
    dir: &Path,
    tmp: &Path,
    algorithm: &str,
    files: &[(&str, Vec<u8>)],
) -> Result<(), CheckpointError> {
    if tmp.exists() {
        fs::remove_dir_all(tmp).map_err(|e| io(tmp, e))?;
    }
    fs::create_dir_all(tmp).map_err(|e| io(tmp, e))?;
    for (name, data) in files {
        write_synced(&tmp.join(name), data)?;
    }
    write_synced(&tmp.join(MANIFEST), &manifest_bytes(algorithm, files))?;
    let old = backup_path(dir);
    if dir.exists() {
        if old.exists() {
            fs::remove_dir_all(&old).map_err(|e| io(&old, e))?;
        }
        fs::rename(dir, &old).map_err(|e| io(dir, e))?;
    }
    fs::rename(tmp, dir).map_err(|e| io(dir, e))?;
    // The new checkpoint is in place; a leftover backup is only unused space.
    let _ = fs::remove_dir_all(&old);
    Ok(())
}

/// A checkpoint read back: its algorithm name and files, each verified against the manifest.
#[derive(Debug)]
pub struct Checkpoint {
    /// Directory read (may be the `.old` backup after an interrupted save).
    pub dir: PathBuf,
    /// Algorithm that wrote it.
    pub algorithm: String,
    files: Vec<(String, Vec<u8>)>,
}

impl Checkpoint {
    /// The bytes of file `name`, or an error naming it.
    pub fn file(&self, name: &str) -> Result<&[u8], CheckpointError> {
        self.files
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, d)| d.as_slice())
            .ok_or_else(|| CheckpointError::Invalid {
                path: self.dir.join(name).display().to_string(),
                reason: "missing from the checkpoint".into(),
            })
    }
    /// Whether file `name` is present.
    pub fn has(&self, name: &str) -> bool {
        self.files.iter().any(|(n, _)| n == name)
    }
    /// Full path of a file, for error messages.
    pub fn path_of(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }
    /// This checkpoint's files and manifest as files of another one, under folder `prefix`:
    /// once written, `prefix` inside it reads back as this checkpoint.
    pub fn embedded(&self, prefix: &str) -> Vec<(String, Vec<u8>)> {
        let mut out: Vec<(String, Vec<u8>)> = self
            .files
            .iter()
            .map(|(n, d)| (format!("{prefix}/{n}"), d.clone()))
            .collect();
        out.push((
            format!("{prefix}/{MANIFEST}"),
            manifest_bytes(&self.algorithm, &self.files),
        ));
        out
    }
    /// The files under folder `prefix` as a checkpoint of their own (names without the
    /// prefix), e.g. one policy's part of a multi-agent checkpoint.
    pub fn sub(&self, prefix: &str) -> Checkpoint {
        let head = format!("{prefix}/");
        Checkpoint {
            dir: self.dir.join(prefix),
            algorithm: self.algorithm.clone(),
            files: self
                .files
                .iter()
                .filter_map(|(n, d)| n.strip_prefix(&head).map(|n| (n.to_string(), d.clone())))
                .collect(),
        }
    }
}

/// Reads and verifies a checkpoint directory.
pub fn read_checkpoint(dir: &Path) -> Result<Checkpoint, CheckpointError> {
    let dir = if !dir.exists() && backup_path(dir).exists() {
        backup_path(dir)
    } else {
        dir.to_path_buf()
    };
    let mpath = dir.join(MANIFEST);
    let raw = fs::read(&mpath).map_err(|e| io(&mpath, e))?;
    let manifest: Manifest =
        serde_json::from_slice(&raw).map_err(|e| CheckpointError::Invalid {
            path: mpath.display().to_string(),
            reason: format!("not a valid manifest: {e}"),
        })?;
    if manifest.format_version != FORMAT_VERSION {
        return Err(CheckpointError::Invalid {
            path: mpath.display().to_string(),
            reason: format!(
                "format version {}, this build reads {FORMAT_VERSION}",
                manifest.format_version
            ),
        });
    }
    let mut files = Vec::new();
    for e in &manifest.files {
        let p = dir.join(&e.name);
        let data = fs::read(&p).map_err(|err| io(&p, err))?;
        if data.len() as u64 != e.size {
            return Err(CheckpointError::Invalid {
                path: p.display().to_string(),
                reason: format!(
                    "truncated or resized: {} bytes, manifest says {}",
                    data.len(),
                    e.size
                ),
            });
        }
        if format!("{:016x}", checksum(&data)) != e.checksum {
            return Err(CheckpointError::Invalid {
                path: p.display().to_string(),
                reason: "corrupt: checksum does not match the manifest".into(),
            });
        }
        files.push((e.name.clone(), data));
    }
    Ok(Checkpoint {
        dir,
        algorithm: manifest.algorithm,
        files,
    })
}

/// A copy of checkpoint `from` in `to` whose `config.yaml` is `run`'s: the saved state under
/// other hyperparameters (`rl tune`'s population based training), which loading builds the
/// algorithm from. Written like any checkpoint (temporary directory, then rename).
pub fn copy_with_config(
    from: &Path,
    to: &Path,
    run: &crate::config::RunConfig,
) -> Result<(), RlError> {
    let ck = read_checkpoint(from)?;
    let yaml = crate::runner::config_yaml(run)?;
    let files: Vec<(&str, Vec<u8>)> = ck
        .files
        .iter()
        .map(|(n, d)| match n.as_str() {
            "config.yaml" => (n.as_str(), yaml.as_bytes().to_vec()),
            _ => (n.as_str(), d.clone()),
        })
        .collect();
    write_checkpoint(to, &ck.algorithm, &files)?;
    Ok(())
}

/// The run configuration (`config.yaml`) stored in checkpoint `ck`.
pub fn read_run_config(ck: &Checkpoint) -> Result<RunConfig, RlError> {
    let file = ck.path_of("config.yaml");
    let text = std::str::from_utf8(ck.file("config.yaml")?)
        .map_err(|e| RlError::Config(ConfigError::new(&file, e.to_string())))?;
    Ok(RunConfig::from_yaml(text, &[], &file)?)
}

/// Reads a checkpoint that `algorithm` wrote: the checkpoint and its run configuration.
pub fn read_run(dir: &Path, algorithm: &str) -> Result<(Checkpoint, RunConfig), RlError> {
    let ck = read_checkpoint(dir)?;
    if ck.algorithm != algorithm {
        return Err(RlError::Config(ConfigError::new(
            dir.display().to_string(),
            format!(
                "checkpoint of algorithm {:?}, not {algorithm}",
                ck.algorithm
            ),
        )));
    }
    let run = read_run_config(&ck)?;
    Ok((ck, run))
}

/// Parses JSON file `name` of checkpoint `ck`; errors name the file.
pub fn read_json<T: serde::de::DeserializeOwned>(
    ck: &Checkpoint,
    name: &str,
) -> Result<T, RlError> {
    serde_json::from_slice(ck.file(name)?)
        .map_err(|e| RlError::Config(ConfigError::new(ck.path_of(name), e.to_string())))
}

/// Loads `module`'s weights from tensor file `name` of checkpoint `ck`.
pub fn read_module<M: burn::module::Module>(
    ck: &Checkpoint,
    name: &str,
    module: M,
    device: &burn::tensor::Device,
) -> Result<M, RlError> {
    let path = ck.path_of(name);
    let w = TensorMap::from_bytes(ck.file(name)?, &path)?;
    Ok(load_module_tensors(module, &w, &path, device)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("rl-ckpt-test-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn roundtrip_overwrite_and_corruption_named() {
        let root = tmpdir("rt");
        let dir = root.join("ck");
        write_checkpoint(
            &dir,
            "ppo",
            &[("a.bin", vec![1, 2, 3]), ("b.json", b"{}".to_vec())],
        )
        .unwrap();
        write_checkpoint(
            &dir,
            "ppo",
            &[("a.bin", vec![4, 5, 6, 7]), ("b.json", b"{}".to_vec())],
        )
        .unwrap();
        let c = read_checkpoint(&dir).unwrap();
        assert_eq!(c.file("a.bin").unwrap(), &[4, 5, 6, 7]);
        assert!(c.file("zzz").unwrap_err().to_string().contains("zzz"));
        // Truncate a file: the error names it.
        fs::write(dir.join("a.bin"), [4, 5]).unwrap();
        let e = read_checkpoint(&dir).unwrap_err().to_string();
        assert!(e.contains("a.bin") && e.contains("truncated"), "{e}");
        // Corrupt same-size content.
        fs::write(dir.join("a.bin"), [9, 9, 9, 9]).unwrap();
        let e = read_checkpoint(&dir).unwrap_err().to_string();
        assert!(e.contains("a.bin") && e.contains("corrupt"), "{e}");
        fs::write(dir.join(MANIFEST), "{not json").unwrap();
        let e = read_checkpoint(&dir).unwrap_err().to_string();
        assert!(e.contains(MANIFEST), "{e}");
        let _ = fs::remove_dir_all(&root);
    }

    #[test]
    fn crash_between_renames_leaves_previous_loadable() {
        let root = tmpdir("crash");
        let dir = root.join("ck");
        write_checkpoint(&dir, "ppo", &[("a.bin", vec![1])]).unwrap();
        // Simulate a kill after `dir` was moved aside and before the new one was renamed in:
        // `dir.old` exists, `dir` does not, a half-written temp dir lies around.
        fs::rename(&dir, backup_path(&dir)).unwrap();
        fs::create_dir_all(root.join("ck.tmp-999")).unwrap();
        fs::write(root.join("ck.tmp-999/a.bin"), [7]).unwrap();
        let c = read_checkpoint(&dir).unwrap();
        assert_eq!(c.file("a.bin").unwrap(), &[1]);
        // And a kill while writing the temp dir leaves `dir` untouched.
        write_checkpoint(&dir, "ppo", &[("a.bin", vec![2])]).unwrap();
        assert_eq!(read_checkpoint(&dir).unwrap().file("a.bin").unwrap(), &[2]);
        let _ = fs::remove_dir_all(&root);
    }

    #[test]
    fn an_embedded_checkpoint_reads_back_from_its_folder() {
        let root = tmpdir("embed");
        write_checkpoint(&root.join("inner"), "sac", &[("w.bin", vec![3, 1, 4])]).unwrap();
        let inner = read_checkpoint(&root.join("inner")).unwrap();
        let mut files = vec![("config.yaml".to_string(), b"x".to_vec())];
        files.extend(inner.embedded("frozen/p1"));
        let refs: Vec<(&str, Vec<u8>)> =
            files.iter().map(|(n, d)| (n.as_str(), d.clone())).collect();
        write_checkpoint(&root.join("outer"), "ppo", &refs).unwrap();
        fs::remove_dir_all(root.join("inner")).unwrap();
        let outer = read_checkpoint(&root.join("outer")).unwrap();
        assert!(outer.has("frozen/p1/w.bin") && outer.has("frozen/p1/checkpoint.json"));
        let back = read_checkpoint(&root.join("outer/frozen/p1")).unwrap();
        assert_eq!(back.algorithm, "sac");
        assert_eq!(back.file("w.bin").unwrap(), &[3, 1, 4]);
        let _ = fs::remove_dir_all(&root);
    }
}
