//! Helpers for tests that read the reference recordings.

use std::path::{Path, PathBuf};

/// The workspace root: the nearest ancestor of `start` whose `Cargo.toml` has `[workspace]`.
pub fn workspace_root(start: &Path) -> PathBuf {
    let mut dir = Some(start);
    while let Some(d) = dir {
        if std::fs::read_to_string(d.join("Cargo.toml")).is_ok_and(|t| t.contains("[workspace]")) {
            return d.to_path_buf();
        }
        dir = d.parent();
    }
    start.to_path_buf()
}

/// The path in environment variable `var`, or `default` (relative to the workspace root, e.g.
/// `testdata/reference/envs`); a relative path in `var` is also taken from the workspace root.
pub fn reference_path(var: &str, default: &str, manifest_dir: &str) -> PathBuf {
    let root = workspace_root(Path::new(manifest_dir));
    let p = std::env::var(var)
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(default));
    if p.is_absolute() { p } else { root.join(p) }
}
