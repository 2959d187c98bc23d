//! An NPZ dataset file (the seed's `expert_data_path` layout), opened, fitted and read (`common::dataset`).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    common::allow_caught_panics();
    common::dataset(data, "npz");
});
