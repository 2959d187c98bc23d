//! An NPZ dataset file (the seed's `expert_data_path` layout): opened, checked against the
//! env it fits and read whole.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    rl_fuzz_common::allow_caught_panics();
    rl_fuzz_common::dataset(data, "npz");
});

#[path = "common.rs"]
mod rl_fuzz_common;
