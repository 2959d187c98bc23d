//! Batches as they arrive from another process over the broker (an on-policy runner's
//! rollout, an off-policy runner's transition chunk): decoded (an error, never a panic or a
//! huge allocation), and a batch that decodes encodes back to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rl::broker::Wire;
use rl::off_policy::runners::TransitionChunk;
use rl::on_policy::actor_learner::RunnerBatch;

fuzz_target!(|data: &[u8]| {
    if let Ok(batch) = RunnerBatch::decode(data) {
        assert_eq!(batch.encode(), data, "decode then encode changed the bytes");
    }
    if let Ok(chunk) = TransitionChunk::decode(data) {
        assert_eq!(chunk.encode(), data, "decode then encode changed the bytes");
    }
});
