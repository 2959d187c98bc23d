//! A Parquet dataset file, opened, fitted and streamed (`common::dataset`).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    common::allow_caught_panics();
    common::dataset(data, "parquet");
});
