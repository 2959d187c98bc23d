//! Runner batches from another process over the broker (`common::broker`).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    common::broker(data);
});
