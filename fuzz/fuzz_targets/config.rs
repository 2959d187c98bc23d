//! The YAML run config through `rl train`'s path (`common::config`).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    common::config(data);
});
