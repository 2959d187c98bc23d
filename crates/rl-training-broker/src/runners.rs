//! What every algorithm's runner processes share, whatever their batches hold: the learner's
//! side ([`RemoteRunners`]: the run's info posted for runners, batches from the work queue,
//! weights into the bucket), a runner process's loop ([`serve_batches`] around rl-training-core's
//! [`Runner`]), and the little-endian [`Writer`] / [`Reader`] the batch formats are
//! written with.

use crate::{Broker, BrokerLink, NatsTransport, RunInfo, RunPost, ServeSummary, Wire};
use rl_training_core::RlError;
use rl_training_core::actor_learner::{Runner, Tagged, Transport, Versioned};
use rl_training_core::config::RunConfig;
use rl_training_core::vec_env::EpisodeStats;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A delivered batch not acked within this time goes to the next learner (the learner acks
/// as it takes a batch, so this only matters for a learner that dies in between).
pub const ACK_WAIT: Duration = Duration::from_secs(30);

/// Appends little-endian values to a batch's bytes.
#[derive(Debug, Default)]
pub struct Writer(pub Vec<u8>);

impl Writer {
    /// A writer that starts with `magic` and the 2-byte format `version`.
    pub fn with_header(magic: &[u8; 4], version: u16, capacity: usize) -> Self {
        let mut w = Writer(Vec::with_capacity(capacity + 6));
        w.0.extend_from_slice(magic);
        w.0.extend_from_slice(&version.to_le_bytes());
        w
    }
    /// One `u64`.
    pub fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    /// One `f64`.
    pub fn f64(&mut self, v: f64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    /// Finished episodes (env, return, length each), count first.
    pub fn episodes(&mut self, eps: &[EpisodeStats]) {
        self.u64(eps.len() as u64);
        for e in eps {
            self.u64(e.env as u64);
            self.f64(e.ret);
            self.u64(e.len as u64);
        }
    }
    /// A length-prefixed `f32` array.
    pub fn f32s(&mut self, v: &[f32]) {
        self.u64(v.len() as u64);
        for x in v {
            self.0.extend_from_slice(&x.to_le_bytes());
        }
    }
}

/// Reads what a [`Writer`] wrote, every error naming the field and what was expected (the
/// bytes come from another process).
#[derive(Debug)]
pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    /// Reads `bytes` after checking their header: `magic` (named `what` in the error) and
    /// format `version`.
    pub fn with_header(
        bytes: &'a [u8],
        magic: &[u8; 4],
        version: u16,
        what: &str,
    ) -> Result<Self, String> {
        let mut r = Reader { bytes, at: 0 };
        if r.take(4, "magic")? != magic {
            return Err(format!(
                "not {what} (expected the bytes {} first)",
                String::from_utf8_lossy(magic)
            ));
        }
        let format = u16::from_le_bytes(r.take(2, "format")?.try_into().expect("2 bytes"));
        if format != version {
            return Err(format!("format version {format}, expected {version}"));
        }
        Ok(r)
    }
    /// The next `n` bytes.
    pub fn take(&mut self, n: usize, field: &str) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(format!(
                "{field}: the batch ends at byte {} (expected {n} more bytes)",
                self.bytes.len()
            ));
        };
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }
    /// One `u64`.
    pub fn u64(&mut self, field: &str) -> Result<u64, String> {
        Ok(u64::from_le_bytes(
            self.take(8, field)?.try_into().expect("8 bytes"),
        ))
    }
    /// One `u64` that must fit a `usize`.
    pub fn usize(&mut self, field: &str) -> Result<usize, String> {
        let v = self.u64(field)?;
        usize::try_from(v).map_err(|_| format!("{field}: {v} does not fit this machine"))
    }
    /// One `f64`.
    pub fn f64(&mut self, field: &str) -> Result<f64, String> {
        Ok(f64::from_le_bytes(
            self.take(8, field)?.try_into().expect("8 bytes"),
        ))
    }
    /// A length-prefixed f32 array of exactly `expected` values (None: any length).
    pub fn f32s(&mut self, field: &str, expected: Option<usize>) -> Result<Vec<f32>, String> {
        let n = self.usize(field)?;
        if let Some(e) = expected
            && n != e
        {
            return Err(format!("{field}: {n} values, expected {e}"));
        }
        // The length is checked against the bytes left before anything is allocated.
        let raw = self.take(n.saturating_mul(4), field)?;
        Ok(raw
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect())
    }
    /// What [`Writer::episodes`] wrote (the count checked against the bytes left before
    /// anything is allocated).
    pub fn episodes(&mut self) -> Result<Vec<EpisodeStats>, String> {
        let n = self.usize("episodes")?;
        let mut eps = Vec::with_capacity(n.min(self.remaining() / 24));
        for _ in 0..n {
            eps.push(EpisodeStats {
                env: self.usize("episodes.env")?,
                ret: self.f64("episodes.ret")?,
                len: self.usize("episodes.len")?,
            });
        }
        Ok(eps)
    }
    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }
    /// An error unless every byte was read.
    pub fn finish(&self) -> Result<(), String> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(format!("{n} bytes after the batch's end")),
        }
    }
}

/// The learner's side of a run whose runners are processes: batches `B` from the run's work
/// queue, weights into its bucket, the run's info on its board (while it lives: dropping it
/// posts that the run is over and the runners exit).
pub struct RemoteRunners<B> {
    /// Batches in, weights out.
    pub transport: Arc<NatsTransport<B>>,
    /// The run id.
    pub run_id: String,
    /// Runner processes restarted (by a local supervisor; shared with it).
    pub restarts: Arc<AtomicU64>,
    _post: RunPost,
}

impl<B> std::fmt::Debug for RemoteRunners<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteRunners")
            .field("run_id", &self.run_id)
            .finish()
    }
}

impl<B> RemoteRunners<B> {
    /// Connects the learner of `run` to the broker: posts the run's info for runners to join
    /// and opens the queue (`queue_size` batches). Nothing is published yet: the learner
    /// publishes its weights once they are final (a fresh run's, or a checkpoint's), so that
    /// runners never act with a placeholder.
    pub fn start(
        link: &BrokerLink,
        run: &RunConfig,
        queue_size: usize,
        placeholder: Versioned,
    ) -> Result<Self, RlError> {
        let post = link.broker.post_run(&RunInfo {
            rl_version: crate::protocol_version(),
            algorithm: run.algorithm.to_ascii_lowercase(),
            config_yaml: rl_training_core::runner::config_yaml(run)?,
        })?;
        // Batches a dead learner took but never acked come back at once.
        link.broker.take_over_batches()?;
        let transport = NatsTransport::new(&link.broker, queue_size, ACK_WAIT, placeholder)?;
        Ok(Self {
            transport: Arc::new(transport),
            run_id: link.broker.run_id().to_string(),
            restarts: link.restarts.clone(),
            _post: post,
        })
    }
}

/// A runner process's loop: claims a runner id in the run `broker` belongs to, builds its
/// runner for that id, waits for the learner's weights, then collects and sends batches
/// (acting with the latest weights; with `sync`, one batch per published version) until the
/// learner posts that the run is over, `stop` is set, or the broker refuses a batch for good.
/// A collection that panics or fails resets the runner and continues. `queue_size` is the
/// queue's size as the learner opens it.
pub fn serve_batches<R: Runner<Batch: Wire>>(
    broker: &Broker,
    queue_size: usize,
    sync: bool,
    stop: &AtomicBool,
    make_runner: impl FnOnce(u32) -> Result<R, RlError>,
) -> Result<ServeSummary, RlError> {
    let board = broker.board()?;
    let id = board.claim_runner_id()?;
    let mut runner = make_runner(id)?;
    let placeholder = Versioned {
        version: u64::MAX,
        weights: Default::default(),
    };
    let transport = NatsTransport::<R::Batch>::new(broker, queue_size, ACK_WAIT, placeholder)?;
    let mut summary = ServeSummary {
        runner: id,
        ..ServeSummary::default()
    };
    // The learner's notice (or `stop`) closes the transport, which ends a send that waits
    // for room in a full queue.
    let done = AtomicBool::new(false);
    let sent = AtomicU64::new(0);
    let result = std::thread::scope(|scope| {
        scope.spawn(|| board.beat_until_end(id, &sent, stop, &done, || transport.close()));
        let r = serve_loop(&mut runner, &transport, sync, id, &sent, &mut summary);
        done.store(true, Ordering::SeqCst);
        r
    });
    // The last word: every batch this runner sent (the learner's count is checked against it).
    let _ = board.heartbeat(id, summary.batches);
    result.map(|()| summary)
}

/// Collects and sends until the transport closes.
fn serve_loop<R: Runner<Batch: Wire>>(
    runner: &mut R,
    transport: &NatsTransport<R::Batch>,
    sync: bool,
    id: u32,
    sent: &AtomicU64,
    summary: &mut ServeSummary,
) -> Result<(), RlError> {
    let mut last_sent = None;
    loop {
        if transport.is_closed() {
            return Ok(());
        }
        let w = transport.latest();
        // Nothing published yet, or (synchronous) this version's batch already sent.
        if w.version == u64::MAX || (sync && last_sent == Some(w.version)) {
            std::thread::sleep(Duration::from_millis(if sync { 5 } else { 50 }));
            continue;
        }
        let collected = catch_unwind(AssertUnwindSafe(|| runner.collect(&w)));
        let (version, batch) = match collected {
            Ok(Ok(vb)) => vb,
            failed => {
                let why = match failed {
                    Ok(Err(e)) => e.to_string(),
                    _ => "a panic".into(),
                };
                eprintln!("runner {id}: collection failed ({why}); resetting its envs");
                summary.restarts += 1;
                runner.reset()?;
                continue;
            }
        };
        let tagged = Tagged {
            version,
            runner: id as usize,
            sent: Instant::now(),
            batch,
        };
        match transport.send(tagged) {
            Ok(()) => {
                last_sent = Some(version);
                summary.batches += 1;
                sent.store(summary.batches, Ordering::SeqCst);
            }
            // Closed: the run is over.
            Err(_) if transport.is_closed() => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}
