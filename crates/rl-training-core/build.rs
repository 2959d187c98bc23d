//! Finds out whether flex's kernels can be pinned to an x86 level (`src/kernels.rs`).
//!
//! The switch lives in patched copies of `macerator` and `gemm-common` (the workspace's
//! `[patch.crates-io]`, `vendor/README.md`). A patch does not travel with a published crate, so a
//! build from crates.io gets the unpatched crates: their build scripts then do not announce the
//! switch (`links` metadata), and `kernels` is compiled without it (`cfg(kernel_switch)` unset),
//! where a pin other than the CPU's own level is an error rather than silently ignored.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(kernel_switch)");
    println!("cargo::rerun-if-changed=build.rs");
    let announced = |var: &str| std::env::var_os(var).is_some();
    if announced("DEP_RL_TRAINING_MACERATOR_LEVEL_CAP_SWITCH")
        && announced("DEP_RL_TRAINING_GEMM_COMMON_LEVEL_CAP_SWITCH")
    {
        println!("cargo::rustc-cfg=kernel_switch");
    }
}
