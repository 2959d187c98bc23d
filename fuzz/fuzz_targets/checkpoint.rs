//! A checkpoint directory, read as `rl eval` / `rl resume` read it (`common::checkpoint`).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    common::allow_caught_panics();
    common::checkpoint(data);
});
