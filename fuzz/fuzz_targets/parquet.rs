//! A Parquet dataset file: opened, checked against the env its schema or shapes fit, and every
//! row group read, as an offline algorithm does.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    rl_fuzz_common::allow_caught_panics();
    rl_fuzz_common::dataset(data, "parquet");
});

#[path = "common.rs"]
mod rl_fuzz_common;
