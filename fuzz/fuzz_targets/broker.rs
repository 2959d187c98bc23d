//! A runner batch as it arrives from another process over the broker: decoded (an error, never
//! a panic or a huge allocation), and a batch that decodes encodes back to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rl::broker::Wire;
use rl::on_policy::actor_learner::RunnerBatch;

fuzz_target!(|data: &[u8]| {
    if let Ok(batch) = RunnerBatch::decode(data) {
        assert_eq!(batch.encode(), data, "decode then encode changed the bytes");
    }
});
