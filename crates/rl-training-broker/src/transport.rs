//! rl-training-core's actor-learner [`Transport`] over the broker: runners' batches through the
//! run's [`BatchQueue`](crate::BatchQueue), the learner's weights through its
//! [`WeightsBucket`](crate::WeightsBucket). The runners and the learner may be threads of one
//! process (each side holding its own `NatsTransport`, or one shared) or other processes.

use crate::{BatchMeta, BatchQueue, Broker, BrokerError, UsedBatches, WeightsBucket};
use bytes::Bytes;
use rl_training_core::actor_learner::{Tagged, Transport, Versioned};
use rl_training_core::algorithm::RlError;
use rl_training_core::params::TensorMap;
use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

/// How a batch travels as bytes. `decode` errors say what was expected; a batch that does not
/// decode is dropped (and acked) by the learner, never fatal.
pub trait Wire: Sized {
    /// The batch as bytes.
    fn encode(&self) -> Vec<u8>;
    /// The batch back from [`encode`](Self::encode)'s bytes.
    fn decode(bytes: &[u8]) -> Result<Self, String>;
}

/// A [`Transport`] over NATS JetStream.
///
/// Sending: each runner's batches are numbered (per runner id, from 0: runner ids must be
/// unique within a run, since a batch whose (runner, sequence) was used is skipped) and stored
/// in the run's work queue; while it holds `capacity` batches the sender waits (and gives up once
/// the transport is closed). Receiving: a batch is acked as it is handed to the learner (a
/// learner that dies afterwards loses it with its own updates since its last checkpoint);
/// one already used (a redelivery) is acked and skipped, one that does not decode is acked,
/// counted in [`dropped`](Self::dropped) and skipped, as is one with malformed headers
/// (terminated, never redelivered). Weights: `publish` writes the bucket,
/// `latest` reads the version key and fetches the weights only when it changed; while the
/// broker cannot be reached, `latest` keeps the last weights it had.
pub struct NatsTransport<B> {
    queue: BatchQueue,
    weights: WeightsBucket,
    used: Mutex<UsedBatches>,
    next_seq: Mutex<BTreeMap<usize, u64>>,
    cache: RwLock<Arc<Versioned>>,
    closed: AtomicBool,
    dropped: Mutex<Vec<String>>,
    _batch: PhantomData<fn() -> B>,
}

impl<B> std::fmt::Debug for NatsTransport<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsTransport")
            .field("queue", &self.queue)
            .finish()
    }
}

impl<B> NatsTransport<B> {
    /// The run's queue (at most `capacity` batches; a delivered batch not acked within
    /// `ack_wait` is delivered again) and weights; `initial` until the bucket holds newer
    /// ones.
    pub fn new(
        broker: &Broker,
        capacity: usize,
        ack_wait: Duration,
        initial: Versioned,
    ) -> Result<Self, BrokerError> {
        Ok(Self {
            queue: broker.batch_queue(capacity, ack_wait)?,
            weights: broker.weights()?,
            used: Mutex::new(UsedBatches::default()),
            next_seq: Mutex::new(BTreeMap::new()),
            cache: RwLock::new(Arc::new(initial)),
            closed: AtomicBool::new(false),
            dropped: Mutex::new(Vec::new()),
            _batch: PhantomData,
        })
    }

    /// The batches used so far (for the learner's checkpoint).
    pub fn used(&self) -> UsedBatches {
        self.used
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Restores the used batches of a checkpoint: their redeliveries are skipped.
    pub fn set_used(&self, used: UsedBatches) {
        *self.used.lock().unwrap_or_else(PoisonError::into_inner) = used;
    }

    /// Continues a runner's numbering at `seq` (a runner process restarted from its state).
    pub fn set_next_seq(&self, runner: usize, seq: u64) {
        self.next_seq
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(runner, seq);
    }

    /// Why received batches were dropped (undecodable ones), in order.
    pub fn dropped(&self) -> Vec<String> {
        self.dropped
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// A pause between retries while the broker is away.
const RETRY: Duration = Duration::from_millis(50);

impl<B: Wire + Send> Transport<B> for NatsTransport<B> {
    fn send(&self, batch: Tagged<B>) -> Result<(), RlError> {
        let seq = {
            let mut s = self.next_seq.lock().unwrap_or_else(PoisonError::into_inner);
            let slot = s.entry(batch.runner).or_insert(0);
            *slot += 1;
            *slot - 1
        };
        let meta = BatchMeta {
            runner: batch.runner as u32,
            seq,
            version: batch.version,
        };
        let payload = Bytes::from(batch.batch.encode());
        // Short waits, so that a close is noticed while the queue is full or the server away.
        loop {
            if self.is_closed() {
                return Err(RlError::Other("the batch transport was closed".into()));
            }
            match self
                .queue
                .send(meta, payload.clone(), Duration::from_millis(200))
            {
                Ok(()) => return Ok(()),
                // Full, or the server away (the client reconnects): try again.
                Err(BrokerError::Full { .. } | BrokerError::JetStream { .. }) => {
                    std::thread::sleep(RETRY)
                }
                Err(e) => return Err(RlError::Other(e.to_string())),
            }
        }
    }

    fn recv(&self, timeout: Duration) -> Option<Tagged<B>> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            // Short fetches, so that one lost with a restarting server costs little.
            let d = match self.queue.recv(left.min(Duration::from_secs(1))) {
                Ok(Some(d)) => d,
                // Nothing in this short fetch: wait on until the caller's deadline.
                Ok(None) => continue,
                Err(BrokerError::Message { message, .. }) => {
                    // Terminated by the queue (never redelivered); say why it was dropped.
                    self.dropped
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(message);
                    continue;
                }
                Err(_) => {
                    std::thread::sleep(RETRY.min(left));
                    continue;
                }
            };
            let first = self
                .used
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .first_use(&d.meta);
            // An ack that fails leaves the batch to be redelivered; the used set skips it then.
            let _ = self.queue.ack(&d);
            if !first {
                continue;
            }
            match B::decode(&d.payload) {
                Ok(batch) => {
                    return Some(Tagged {
                        version: d.meta.version,
                        runner: d.meta.runner as usize,
                        sent: Instant::now()
                            .checked_sub(d.age)
                            .unwrap_or_else(Instant::now),
                        batch,
                    });
                }
                Err(e) => self
                    .dropped
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(format!(
                        "batch {} of runner {}: {e}",
                        d.meta.seq, d.meta.runner
                    )),
            }
        }
    }

    fn queue_len(&self) -> usize {
        self.queue.len().unwrap_or(0)
    }

    fn publish(&self, w: Arc<Versioned>) {
        // A failed write leaves the runners on older weights (the policy lag shows it); the
        // next publish tries again.
        let _ = self.weights.put(w.version, &w.weights.to_bytes());
        *self.cache.write().unwrap_or_else(PoisonError::into_inner) = w;
    }

    fn latest(&self) -> Arc<Versioned> {
        let cached = self
            .cache
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        match self.weights.version() {
            Ok(Some(v)) if v != cached.version => {}
            _ => return cached,
        }
        let fresh = match self.weights.latest() {
            Ok(Some((version, bytes))) => match TensorMap::from_bytes(&bytes, "weights") {
                Ok(weights) => Arc::new(Versioned { version, weights }),
                Err(_) => return cached,
            },
            _ => return cached,
        };
        *self.cache.write().unwrap_or_else(PoisonError::into_inner) = fresh.clone();
        fresh
    }

    fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }
}
