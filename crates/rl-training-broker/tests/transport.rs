//! rl-training-core's actor-learner `Transport` over a real `nats-server -js` (127.0.0.1, random
//! port): runner threads of rl-training-core's `RunnerPool` on one connection, the learner on another,
//! as separate processes would be.

mod common;

use bytes::Bytes;
use common::{connect, store};
use rl_training_broker::{BatchMeta, NatsServer, NatsTransport, Wire};
use rl_training_core::actor_learner::{Runner, RunnerPool, RunnerReports, Transport, Versioned};
use rl_training_core::algorithm::RlError;
use rl_training_core::params::TensorMap;
use std::sync::Arc;
use std::time::Duration;

/// What a toy runner sends: who, its counter, and the weight value it acted with.
#[derive(Debug, Clone, PartialEq)]
struct ToyBatch {
    runner: u32,
    n: u64,
    acted_with: f32,
}

impl Wire for ToyBatch {
    fn encode(&self) -> Vec<u8> {
        let mut v = self.runner.to_le_bytes().to_vec();
        v.extend(self.n.to_le_bytes());
        v.extend(self.acted_with.to_le_bytes());
        v
    }
    fn decode(b: &[u8]) -> Result<Self, String> {
        if b.len() != 16 {
            return Err(format!("{} bytes, expected 16", b.len()));
        }
        Ok(ToyBatch {
            runner: u32::from_le_bytes(b[..4].try_into().unwrap()),
            n: u64::from_le_bytes(b[4..12].try_into().unwrap()),
            acted_with: f32::from_le_bytes(b[12..].try_into().unwrap()),
        })
    }
}

struct Toy {
    id: u32,
    n: u64,
}

impl Runner for Toy {
    type Batch = ToyBatch;
    fn collect(&mut self, w: &Versioned) -> Result<(u64, ToyBatch), RlError> {
        std::thread::sleep(Duration::from_millis(5));
        self.n += 1;
        let acted_with = w.weights.0.get("w").map_or(0.0, |(_, d)| d[0]);
        Ok((
            w.version,
            ToyBatch {
                runner: self.id,
                n: self.n,
                acted_with,
            },
        ))
    }
    fn reset(&mut self) -> Result<(), RlError> {
        Ok(())
    }
}

fn weights(version: u64) -> Versioned {
    let mut w = TensorMap::default();
    w.insert("w", vec![1], vec![version as f32]);
    Versioned {
        version,
        weights: w,
    }
}

/// Two runner threads and a learner exchange 40 batches and 40 weight versions through the
/// server: both runners' batches arrive in each runner's order, each acted with the weights
/// of the version it is tagged with, the runners follow the published versions (the lag
/// stays bounded by the queue), the queue never holds more than its capacity, and closing the
/// runners' transport stops their threads even while the queue is full.
#[test]
fn runner_threads_and_a_learner_exchange_batches_and_weights_through_the_broker() {
    let server = NatsServer::start(&store("pool")).unwrap();
    let capacity = 4;
    let ack_wait = Duration::from_secs(30);
    let runner_side: Arc<NatsTransport<ToyBatch>> = Arc::new(
        NatsTransport::new(&connect(&server, "pool"), capacity, ack_wait, weights(0)).unwrap(),
    );
    let learner: NatsTransport<ToyBatch> =
        NatsTransport::new(&connect(&server, "pool"), capacity, ack_wait, weights(0)).unwrap();
    let reports = Arc::new(RunnerReports::default());
    let runners = (0..2).map(|id| Toy { id, n: 0 }).collect();
    let mut pool = RunnerPool::spawn(runners, runner_side.clone(), reports.clone());
    let mut last_n = [0u64; 2];
    let mut lags = Vec::new();
    for k in 1..=40u64 {
        let t = learner.recv(Duration::from_secs(10)).expect("a batch");
        let b = &t.batch;
        assert_eq!(t.runner, b.runner as usize);
        assert_eq!(
            b.acted_with, t.version as f32,
            "weights and version travel together"
        );
        assert!(b.n > last_n[t.runner], "runner {} out of order", t.runner);
        last_n[t.runner] = b.n;
        assert!(learner.queue_len() <= capacity);
        lags.push(k - 1 - t.version);
        learner.publish(Arc::new(weights(k)));
    }
    assert!(
        last_n.iter().all(|&n| n > 3),
        "both runners sent: {last_n:?}"
    );
    let late = &lags[20..];
    assert!(
        late.iter().all(|&l| l <= (capacity + 4) as u64),
        "runners follow the published weights: lags {lags:?}"
    );
    assert!(learner.used().contains(&BatchMeta {
        runner: 0,
        seq: 0,
        version: 0
    }));
    // The learner stops taking batches: the queue fills, the runners wait in `send`, and
    // closing their transport releases them.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(learner.queue_len(), capacity);
    pool.shutdown(runner_side.as_ref());
    assert_eq!(
        reports.restarts.load(std::sync::atomic::Ordering::SeqCst),
        0
    );
}

/// A batch that does not decode (another binary's format, say) is acked and dropped with a
/// message naming it; the next good one is delivered.
#[test]
fn an_undecodable_batch_is_dropped_and_named() {
    let server = NatsServer::start(&store("bad")).unwrap();
    let b = connect(&server, "bad");
    let q = b.batch_queue(8, Duration::from_secs(30)).unwrap();
    let meta = |seq| BatchMeta {
        runner: 7,
        seq,
        version: 0,
    };
    q.send(
        meta(0),
        Bytes::from_static(b"short"),
        Duration::from_secs(5),
    )
    .unwrap();
    let good = ToyBatch {
        runner: 7,
        n: 1,
        acted_with: 0.0,
    };
    q.send(meta(1), Bytes::from(good.encode()), Duration::from_secs(5))
        .unwrap();
    let learner: NatsTransport<ToyBatch> =
        NatsTransport::new(&b, 8, Duration::from_secs(30), weights(0)).unwrap();
    let t = learner
        .recv(Duration::from_secs(5))
        .expect("the good batch");
    assert_eq!(t.batch, good);
    assert_eq!(
        learner.dropped(),
        vec!["batch 0 of runner 7: 5 bytes, expected 16".to_string()]
    );
    assert!(q.is_empty().unwrap());
}

/// A message without rl's headers (another program publishing on the run's subject) is
/// terminated, never redelivered, and named among the dropped; a batch too large for one
/// message is refused before it reaches the server (which would drop the connection).
#[test]
fn foreign_and_oversized_messages_are_refused_by_name() {
    let server = NatsServer::start(&store("foreign")).unwrap();
    let b = connect(&server, "foreign");
    let learner: NatsTransport<ToyBatch> =
        NatsTransport::new(&b, 8, Duration::from_secs(1), weights(0)).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = async_nats::connect(server.url()).await.unwrap();
        let js = async_nats::jetstream::new(client);
        js.publish("rl.foreign.batches", Bytes::from_static(b"hello"))
            .await
            .unwrap()
            .await
            .unwrap();
    });
    assert!(learner.recv(Duration::from_secs(3)).is_none());
    assert_eq!(
        learner.dropped(),
        vec!["no headers (expected Rl-Runner, Rl-Seq, Rl-Version)".to_string()]
    );
    assert_eq!(
        learner.queue_len(),
        0,
        "terminated, not waiting for redelivery"
    );
    let q = b.batch_queue(8, Duration::from_secs(1)).unwrap();
    let huge = Bytes::from(vec![0u8; 2 * 1024 * 1024]);
    let meta = BatchMeta {
        runner: 0,
        seq: 0,
        version: 0,
    };
    let e = q.send(meta, huge, Duration::from_secs(1)).unwrap_err();
    assert!(
        matches!(
            e,
            rl_training_broker::BrokerError::TooLarge { bytes: 2097152, .. }
        ),
        "{e}"
    );
    // The connection is intact.
    q.send(meta, Bytes::from_static(b"ok"), Duration::from_secs(1))
        .unwrap();
    assert_eq!(q.len().unwrap(), 1);
}

/// `recv` waits for its whole timeout, not for one of its short fetches: a batch sent 2.5 s
/// after the learner started waiting (two and a half fetches later) still arrives.
#[test]
fn recv_waits_its_whole_timeout_across_empty_fetches() {
    let server = NatsServer::start(&store("late")).unwrap();
    let b = connect(&server, "late");
    let learner: NatsTransport<ToyBatch> =
        NatsTransport::new(&b, 8, Duration::from_secs(30), weights(0)).unwrap();
    let late = ToyBatch {
        runner: 3,
        n: 1,
        acted_with: 0.0,
    };
    let sender = {
        let b = connect(&server, "late");
        let batch = late.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(2500));
            let q = b.batch_queue(8, Duration::from_secs(30)).unwrap();
            let meta = BatchMeta {
                runner: 3,
                seq: 0,
                version: 0,
            };
            q.send(meta, Bytes::from(batch.encode()), Duration::from_secs(5))
                .unwrap();
        })
    };
    let t0 = std::time::Instant::now();
    let t = learner
        .recv(Duration::from_secs(20))
        .expect("the late batch");
    assert_eq!(t.batch, late);
    assert!(t0.elapsed() >= Duration::from_secs(2), "{:?}", t0.elapsed());
    sender.join().unwrap();
    // Nothing more: it returns None after its timeout.
    assert!(learner.recv(Duration::from_millis(1500)).is_none());
}
