//! Scale-out over NATS JetStream (issue 19): what runner and learner processes exchange
//! through a broker, so that runners on other machines join a run by pointing at the same
//! server.
//!
//! - [`BatchQueue`]: sample batches on a JetStream work-queue stream with explicit acks. A
//!   batch stays in the stream until the learner acks it (after using it, or deliberately
//!   dropping it), so batches sent to a learner that dies are redelivered to its successor.
//!   Each batch carries its runner id and that runner's sequence number ([`BatchMeta`]);
//!   [`UsedBatches`] (kept in the learner's checkpoint) makes a redelivered batch count once.
//!   The stream holds at most `capacity` batches: a sender waits while it is full.
//! - [`WeightsBucket`]: the learner's weights in a key-value bucket, tagged with the policy
//!   version; weights larger than a NATS message go through the object store.
//! - Every subject, stream and bucket is namespaced by the run id, so runs share a server.
//! - [`RunBoard`]: the run's config for runner processes that join it ([`RunInfo`], with the
//!   version that started it), runner ids unique within the run, heartbeats, and the
//!   learner's notice that the run is over.
//! - [`RemoteRunners`] and [`serve_batches`]: the learner's and a runner process's side of a
//!   run, whatever its batches hold.
//! - [`NatsServer`]: a real `nats-server -js` on 127.0.0.1 with a random port and its own
//!   store, stopped by its pid (tests, local runs).
//!
//! The API is blocking (the rest of rl is synchronous): a [`Broker`] owns a one-thread tokio
//! runtime that keeps the connection alive (pings, reconnects) between calls.

#![warn(missing_docs)]

mod board;
mod runners;
mod server;
mod transport;

pub use board::{Heartbeat, RunBoard, RunInfo, RunPost};
pub use runners::{ACK_WAIT, Reader, RemoteRunners, Writer, serve_batches};
pub use server::{NATS_SERVER_ENV, NatsServer};
pub use transport::{NatsTransport, Wire};

use async_nats::HeaderMap;
use async_nats::jetstream::{self, consumer, kv, object_store, stream};
use bytes::Bytes;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What went wrong with the broker, naming the part (connection, stream, bucket, message).
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// The configuration (`field`) is not usable.
    #[error("broker config `{field}`: {message}")]
    Config {
        /// The offending key.
        field: &'static str,
        /// What was expected.
        message: String,
    },
    /// Connecting to the server failed.
    #[error("cannot connect to the NATS server at {url}: {message}")]
    Connect {
        /// The server URL (never with credentials).
        url: String,
        /// The client's reason.
        message: String,
    },
    /// A JetStream operation failed.
    #[error("NATS {what}: {message}")]
    JetStream {
        /// The operation and the object it acted on.
        what: String,
        /// The server's or client's reason.
        message: String,
    },
    /// A message from another process is malformed.
    #[error("malformed message on {subject}: {message}")]
    Message {
        /// Where it came from.
        subject: String,
        /// What was expected.
        message: String,
    },
    /// The test server could not be started.
    #[error("nats-server: {message}")]
    Server {
        /// What happened.
        message: String,
    },
    /// The queue stayed full for the whole wait (the learner is not taking batches).
    #[error("the batch queue {subject} stayed full ({capacity} batches) for {waited:?}")]
    Full {
        /// The queue's subject.
        subject: String,
        /// Its capacity.
        capacity: usize,
        /// How long the sender waited.
        waited: Duration,
    },
    /// A batch larger than the server accepts in one message.
    #[error("a batch of {bytes} bytes exceeds the server's message limit ({max} bytes)")]
    TooLarge {
        /// The batch's size.
        bytes: usize,
        /// The server's `max_payload`.
        max: usize,
    },
}

/// A broker failure as the algorithms report it (the message names the part that failed).
impl From<BrokerError> for rl_training_core::algorithm::RlError {
    fn from(e: BrokerError) -> Self {
        rl_training_core::algorithm::RlError::Other(e.to_string())
    }
}

fn js_error(what: impl Into<String>, e: impl fmt::Display) -> BrokerError {
    BrokerError::JetStream {
        what: what.into(),
        message: e.to_string(),
    }
}

/// Credentials for the server: NATS user and password, or a token. `Debug` never shows the
/// secret.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub enum Auth {
    /// No credentials.
    #[default]
    None,
    /// `user` and `password`.
    UserPassword {
        /// The NATS user.
        user: String,
        /// Its password.
        password: String,
    },
    /// A token.
    Token(String),
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Auth::None => f.write_str("None"),
            Auth::UserPassword { user, .. } => write!(f, "UserPassword {{ user: {user:?} }}"),
            Auth::Token(_) => f.write_str("Token(<hidden>)"),
        }
    }
}

impl Auth {
    /// From the environment: `RL_NATS_TOKEN`, else `RL_NATS_USER` with `RL_NATS_PASSWORD`,
    /// else none.
    pub fn from_env() -> Self {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        match (var("RL_NATS_TOKEN"), var("RL_NATS_USER")) {
            (Some(t), _) => Auth::Token(t),
            (None, Some(user)) => Auth::UserPassword {
                user,
                password: var("RL_NATS_PASSWORD").unwrap_or_default(),
            },
            _ => Auth::None,
        }
    }
}

/// Where the broker is and which run this process belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerConfig {
    /// `nats://HOST:PORT`.
    pub url: String,
    /// The run id: letters, digits, `_` and `-`, at most 64 (it names subjects and streams).
    pub run_id: String,
    /// Credentials.
    pub auth: Auth,
}

impl BrokerConfig {
    /// Checks the run id and the URL's scheme.
    pub fn validate(&self) -> Result<(), BrokerError> {
        let ok = !self.run_id.is_empty()
            && self.run_id.len() <= 64
            && self
                .run_id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !ok {
            return Err(BrokerError::Config {
                field: "run_id",
                message: format!(
                    "{:?}: expected 1 to 64 letters, digits, '_' or '-'",
                    self.run_id
                ),
            });
        }
        // Credentials belong in `auth`: a URL with them would be echoed by errors and logs.
        if self.url.contains('@') {
            return Err(BrokerError::Config {
                field: "broker",
                message: "the URL holds credentials (user@ or user:password@): put them in \
                          the auth settings or RL_NATS_USER / RL_NATS_PASSWORD / RL_NATS_TOKEN"
                    .into(),
            });
        }
        if !(self.url.starts_with("nats://") || self.url.starts_with("tls://")) {
            return Err(BrokerError::Config {
                field: "broker",
                message: format!("{:?}: expected nats://HOST:PORT", self.url),
            });
        }
        Ok(())
    }
}

/// A connection to the server for one run (cheap to clone: the clones share it).
#[derive(Clone)]
pub struct Broker {
    inner: Arc<Inner>,
}

struct Inner {
    rt: tokio::runtime::Runtime,
    client: async_nats::Client,
    js: jetstream::Context,
    run: String,
}

impl fmt::Debug for Broker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Broker")
            .field("run", &self.inner.run)
            .finish()
    }
}

impl Broker {
    /// Connects (reconnecting forever after a lost connection, as a long run needs).
    ///
    /// The client is blocking: calling it (or dropping the last clone) from inside a tokio
    /// runtime is refused here rather than left to panic there.
    pub fn connect(cfg: &BrokerConfig) -> Result<Self, BrokerError> {
        cfg.validate()?;
        if tokio::runtime::Handle::try_current().is_ok() {
            return Err(BrokerError::Config {
                field: "broker",
                message: "the blocking broker client cannot run inside an async runtime; \
                          call it from a plain thread"
                    .into(),
            });
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|e| BrokerError::Connect {
                url: cfg.url.clone(),
                message: format!("no async runtime: {e}"),
            })?;
        let mut opts = async_nats::ConnectOptions::new()
            .connection_timeout(Duration::from_secs(5))
            .max_reconnects(None);
        opts = match &cfg.auth {
            Auth::None => opts,
            Auth::UserPassword { user, password } => {
                opts.user_and_password(user.clone(), password.clone())
            }
            Auth::Token(t) => opts.token(t.clone()),
        };
        let client =
            rt.block_on(opts.connect(cfg.url.as_str()))
                .map_err(|e| BrokerError::Connect {
                    url: cfg.url.clone(),
                    message: e.to_string(),
                })?;
        // The context spawns its own task: create it inside the runtime.
        let js = {
            let _inside = rt.enter();
            jetstream::new(client.clone())
        };
        Ok(Self {
            inner: Arc::new(Inner {
                rt,
                client,
                js,
                run: cfg.run_id.clone(),
            }),
        })
    }

    /// The run id.
    pub fn run_id(&self) -> &str {
        &self.inner.run
    }

    fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.inner.rt.block_on(f)
    }

    /// The run's batch queue (created if missing): at most `capacity` batches wait; a batch
    /// delivered but not acked within `ack_wait` goes to the next receiver.
    pub fn batch_queue(
        &self,
        capacity: usize,
        ack_wait: Duration,
    ) -> Result<BatchQueue, BrokerError> {
        self.queue(BATCHES, capacity, ack_wait)
    }

    /// The run's work queue `kind` (created if missing), read by the durable consumer of that
    /// queue ([`Queue::consumer`]): at most `capacity` messages wait; one delivered but not
    /// acked within `ack_wait` goes to the next receiver.
    pub fn queue(
        &self,
        kind: Queue,
        capacity: usize,
        ack_wait: Duration,
    ) -> Result<BatchQueue, BrokerError> {
        let name = format!("RL_{}_{}", self.inner.run, kind.stream);
        let subject = format!("rl.{}.{}", self.inner.run, kind.stream.to_ascii_lowercase());
        let durable = kind.consumer;
        let cfg = stream::Config {
            name: name.clone(),
            subjects: vec![subject.clone()],
            retention: stream::RetentionPolicy::WorkQueue,
            storage: stream::StorageType::File,
            max_messages: capacity.max(1) as i64,
            discard: stream::DiscardPolicy::New,
            ..Default::default()
        };
        let stream = self
            .block_on(self.inner.js.get_or_create_stream(cfg))
            .map_err(|e| js_error(format!("stream {name}"), e))?;
        let consumer: consumer::PullConsumer = self
            .block_on(stream.get_or_create_consumer(
                durable,
                consumer::pull::Config {
                    durable_name: Some(durable.into()),
                    ack_policy: consumer::AckPolicy::Explicit,
                    ack_wait,
                    ..Default::default()
                },
            ))
            .map_err(|e| js_error(format!("consumer {durable} on {name}"), e))?;
        Ok(BatchQueue {
            broker: self.clone(),
            stream,
            consumer,
            subject,
            capacity: capacity.max(1),
        })
    }

    /// Makes this process the run's only learner: batches delivered to an earlier learner
    /// and never acked (it died between taking and acking them) go to the next receiver at
    /// once instead of after their ack wait. Call it before [`batch_queue`](Self::batch_queue)
    /// on the learner's side only.
    pub fn take_over_batches(&self) -> Result<(), BrokerError> {
        self.take_over(BATCHES)
    }

    /// [`take_over_batches`](Self::take_over_batches) for the work queue `kind`: what its
    /// consumer took and never acked goes to the next receiver at once.
    pub fn take_over(&self, kind: Queue) -> Result<(), BrokerError> {
        let name = format!("RL_{}_{}", self.inner.run, kind.stream);
        let Ok(stream) = self.block_on(self.inner.js.get_stream(&name)) else {
            // No stream yet: nothing was delivered.
            return Ok(());
        };
        if self.block_on(stream.consumer_info(kind.consumer)).is_err() {
            // No consumer: nobody took anything.
            return Ok(());
        }
        self.block_on(stream.delete_consumer(kind.consumer))
            .map(drop)
            .map_err(|e| js_error(format!("delete consumer {} on {name}", kind.consumer), e))
    }

    /// The key-value bucket `bucket` (file-backed, the latest value per key; created if
    /// missing).
    fn kv_bucket(&self, bucket: &str) -> Result<kv::Store, BrokerError> {
        match self.block_on(self.inner.js.get_key_value(bucket)) {
            Ok(kv) => Ok(kv),
            Err(_) => self
                .block_on(self.inner.js.create_key_value(kv::Config {
                    bucket: bucket.to_string(),
                    history: 1,
                    storage: stream::StorageType::File,
                    ..Default::default()
                }))
                .map_err(|e| js_error(format!("key-value bucket {bucket}"), e)),
        }
    }

    /// The run's weights bucket (created if missing).
    pub fn weights(&self) -> Result<WeightsBucket, BrokerError> {
        let bucket = format!("rl_{}_weights", self.inner.run);
        let kv = self.kv_bucket(&bucket)?;
        let obj_name = format!("rl_{}_weights_obj", self.inner.run);
        let objects = match self.block_on(self.inner.js.get_object_store(&obj_name)) {
            Ok(o) => o,
            Err(_) => self
                .block_on(self.inner.js.create_object_store(object_store::Config {
                    bucket: obj_name.clone(),
                    storage: stream::StorageType::File,
                    ..Default::default()
                }))
                .map_err(|e| js_error(format!("object store {obj_name}"), e))?,
        };
        Ok(WeightsBucket {
            broker: self.clone(),
            kv,
            objects,
            bucket,
            written: std::sync::Mutex::new(std::collections::VecDeque::new()),
        })
    }
}

/// A work queue of a run: its stream's name (after the run's prefix) and the durable
/// consumer that reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queue {
    /// Upper-case stream name part (`BATCHES`).
    pub stream: &'static str,
    /// The consumer (`learner`; the runners' side of a task queue: `workers`).
    pub consumer: &'static str,
}

/// Runners' sample batches, read by the learner.
pub const BATCHES: Queue = Queue {
    stream: "BATCHES",
    consumer: "learner",
};

/// How a learner reaches its runner (or worker) processes: the run's broker, and the count
/// of runner processes restarted by whoever supervises them (`rl train --local-runners N`),
/// which the learner reports as `perf/runner_restarts`.
#[derive(Debug, Clone)]
pub struct BrokerLink {
    /// The run's connection.
    pub broker: Broker,
    /// Runner processes restarted so far.
    pub restarts: Arc<std::sync::atomic::AtomicU64>,
}

/// The version of everything that crosses the broker (bumped when a message format changes).
const PROTOCOL: u32 = 1;

/// The version runners and learner compare before they work together: the package version
/// and the protocol's.
pub fn protocol_version() -> String {
    format!("{}+wire{PROTOCOL}", env!("CARGO_PKG_VERSION"))
}

/// What a runner (or worker) process did, when it stops.
#[derive(Debug, Clone, Copy, Default)]
pub struct ServeSummary {
    /// Its runner id in the run.
    pub runner: u32,
    /// Batches (or results) it sent.
    pub batches: u64,
    /// Collections that failed or panicked (each followed by a reset).
    pub restarts: u64,
}

/// Where a batch comes from: the runner, its sequence number (0, 1, … per runner) and the
/// policy version it acted with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchMeta {
    /// The runner's id.
    pub runner: u32,
    /// The runner's batch counter.
    pub seq: u64,
    /// The policy version the runner acted with.
    pub version: u64,
}

const H_RUNNER: &str = "Rl-Runner";
const H_SEQ: &str = "Rl-Seq";
const H_VERSION: &str = "Rl-Version";

/// A batch taken from the queue; [`BatchQueue::ack`] it once used (or dropped on purpose).
#[derive(Debug)]
pub struct Delivery {
    /// Its origin.
    pub meta: BatchMeta,
    /// The encoded batch.
    pub payload: Bytes,
    /// How many times the server has delivered it (1 the first time).
    pub delivered: i64,
    /// Time since the server stored it (clocks of one machine; 0 if the server's time is
    /// ahead).
    pub age: Duration,
    msg: jetstream::Message,
}

/// The run's sample batches: a JetStream work queue with explicit acks.
pub struct BatchQueue {
    broker: Broker,
    stream: stream::Stream,
    consumer: consumer::PullConsumer,
    subject: String,
    capacity: usize,
}

impl fmt::Debug for BatchQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BatchQueue")
            .field("subject", &self.subject)
            .field("capacity", &self.capacity)
            .finish()
    }
}

impl BatchQueue {
    /// Sends a batch once the server has stored it; while the queue holds `capacity`
    /// batches, waits (up to `timeout`) for the learner to take one.
    pub fn send(
        &self,
        meta: BatchMeta,
        payload: Bytes,
        timeout: Duration,
    ) -> Result<(), BrokerError> {
        // The server closes the connection on an oversized message: refuse it here.
        let max = self.broker.inner.client.server_info().max_payload;
        if max > 0 && payload.len() + 1024 > max {
            return Err(BrokerError::TooLarge {
                bytes: payload.len(),
                max,
            });
        }
        let mut headers = HeaderMap::new();
        headers.insert(H_RUNNER, meta.runner.to_string().as_str());
        headers.insert(H_SEQ, meta.seq.to_string().as_str());
        headers.insert(H_VERSION, meta.version.to_string().as_str());
        // The server drops a second copy of a batch whose first publish was stored but whose
        // acknowledgement was lost (a reconnect), within its duplicate window.
        let id = format!("{}-{}", meta.runner, meta.seq);
        headers.insert("Nats-Msg-Id", id.as_str());
        let deadline = Instant::now() + timeout;
        loop {
            let sent = self.broker.block_on(async {
                self.broker
                    .inner
                    .js
                    .publish_with_headers(self.subject.clone(), headers.clone(), payload.clone())
                    .await?
                    .await
            });
            let err = match sent {
                Ok(_) => return Ok(()),
                Err(e) => e,
            };
            // A full stream (discard-new) refuses the message with a store error: wait for
            // room, then retry; anything else is the caller's to handle.
            let full = std::error::Error::source(&err)
                .and_then(|e| e.downcast_ref::<jetstream::Error>())
                .is_some_and(|e| e.error_code() == jetstream::ErrorCode::STREAM_STORE_FAILED);
            if !full {
                return Err(js_error(format!("publish to {}", self.subject), err));
            }
            if Instant::now() > deadline {
                return Err(BrokerError::Full {
                    subject: self.subject.clone(),
                    capacity: self.capacity,
                    waited: timeout,
                });
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The oldest batch not yet acked or being worked on, waiting up to `timeout`.
    pub fn recv(&self, timeout: Duration) -> Result<Option<Delivery>, BrokerError> {
        let what = || format!("fetch from {}", self.subject);
        let rt = &self.broker.inner.rt;
        let expires = timeout.max(Duration::from_millis(10));
        let msg = rt.block_on(async {
            let fetch = async {
                let mut batch = self
                    .consumer
                    .batch()
                    .max_messages(1)
                    .expires(expires)
                    .messages()
                    .await
                    .map_err(|e| js_error(what(), e))?;
                batch
                    .next()
                    .await
                    .transpose()
                    .map_err(|e| js_error(what(), e))
            };
            // A request the server lost (it restarted meanwhile) is never answered: give up
            // on it shortly after it expired.
            tokio::time::timeout(expires + Duration::from_secs(1), fetch)
                .await
                .unwrap_or(Ok(None))
        })?;
        let Some(msg) = msg else { return Ok(None) };
        let (delivered, age) = msg
            .info()
            .map(|i| {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as i128)
                    .unwrap_or(0);
                let ns = (now - i.published.unix_timestamp_nanos()).max(0);
                (i.delivered, Duration::from_nanos(ns as u64))
            })
            .unwrap_or((1, Duration::ZERO));
        let meta = match parse_meta(&msg) {
            Ok(m) => m,
            Err(message) => {
                // Never redelivered: it would come back forever and hold a slot of the queue.
                let _ = rt.block_on(msg.ack_with(jetstream::AckKind::Term));
                return Err(BrokerError::Message {
                    subject: self.subject.clone(),
                    message,
                });
            }
        };
        let payload = msg.payload.clone();
        Ok(Some(Delivery {
            meta,
            payload,
            delivered,
            age,
            msg,
        }))
    }

    /// Acks a delivery: the server removes the batch (waits for the server's confirmation).
    pub fn ack(&self, d: &Delivery) -> Result<(), BrokerError> {
        self.broker
            .inner
            .rt
            .block_on(d.msg.double_ack())
            .map_err(|e| js_error(format!("ack on {}", self.subject), e))
    }

    /// Batches in the stream (waiting or delivered but not yet acked).
    pub fn len(&self) -> Result<usize, BrokerError> {
        let mut s = self.stream.clone();
        let info = self
            .broker
            .block_on(s.info())
            .map_err(|e| js_error(format!("stream info of {}", self.subject), e))?;
        Ok(info.state.messages as usize)
    }

    /// Whether the stream holds no batch.
    pub fn is_empty(&self) -> Result<bool, BrokerError> {
        Ok(self.len()? == 0)
    }
}

/// A malformed or missing header is the sender's fault: say which.
fn parse_meta(msg: &jetstream::Message) -> Result<BatchMeta, String> {
    let headers = msg
        .headers
        .as_ref()
        .ok_or_else(|| format!("no headers (expected {H_RUNNER}, {H_SEQ}, {H_VERSION})"))?;
    fn field<T: std::str::FromStr>(h: &HeaderMap, key: &str) -> Result<T, String> {
        let v = h
            .get(key)
            .ok_or_else(|| format!("header {key} missing"))?
            .as_str();
        v.parse()
            .map_err(|_| format!("header {key}: {v:?} is not a non-negative integer"))
    }
    Ok(BatchMeta {
        runner: field(headers, H_RUNNER)?,
        seq: field(headers, H_SEQ)?,
        version: field(headers, H_VERSION)?,
    })
}

/// The (runner, sequence) pairs a learner has used, so that a batch redelivered after a
/// learner restart counts once. Per runner: every sequence below a watermark, plus the used
/// ones above it (batches arrive roughly in order, so the set stays small). Saved in the
/// learner's checkpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "Vec<UsedByRunner>", from = "Vec<UsedByRunner>")]
pub struct UsedBatches {
    runners: BTreeMap<u32, (u64, BTreeSet<u64>)>,
}

/// [`UsedBatches`] as saved: a list, since JSON's map keys are strings (which a flattened
/// checkpoint entry would not read back as numbers).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct UsedByRunner {
    runner: u32,
    /// Every sequence below this was used.
    below: u64,
    /// The used ones above it.
    above: BTreeSet<u64>,
}

impl From<UsedBatches> for Vec<UsedByRunner> {
    fn from(u: UsedBatches) -> Self {
        u.runners
            .into_iter()
            .map(|(runner, (below, above))| UsedByRunner {
                runner,
                below,
                above,
            })
            .collect()
    }
}

impl From<Vec<UsedByRunner>> for UsedBatches {
    fn from(v: Vec<UsedByRunner>) -> Self {
        Self {
            runners: v
                .into_iter()
                .map(|r| (r.runner, (r.below, r.above)))
                .collect(),
        }
    }
}

impl UsedBatches {
    /// Records `meta` as used; false if it was used before (a redelivery: ack and skip it).
    pub fn first_use(&mut self, meta: &BatchMeta) -> bool {
        let (below, above) = self.runners.entry(meta.runner).or_default();
        if meta.seq < *below || !above.insert(meta.seq) {
            return false;
        }
        while above.remove(below) {
            *below += 1;
        }
        true
    }

    /// How many of `runner`'s batches were used.
    pub fn count(&self, runner: u32) -> u64 {
        self.runners
            .get(&runner)
            .map_or(0, |(below, above)| below + above.len() as u64)
    }

    /// Whether `meta` was used.
    pub fn contains(&self, meta: &BatchMeta) -> bool {
        self.runners
            .get(&meta.runner)
            .is_some_and(|(below, above)| meta.seq < *below || above.contains(&meta.seq))
    }
}

/// Weights up to this size travel inline in the key-value bucket (NATS's default message
/// limit is 1 MiB); larger ones through the object store.
pub const INLINE_WEIGHTS_LIMIT: usize = 512 * 1024;

/// How long one read of weights from the object store may take.
const OBJECT_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// The run's weights: key `latest` holds the policy version and the weights (or the name of
/// the object holding them).
pub struct WeightsBucket {
    broker: Broker,
    kv: kv::Store,
    objects: object_store::ObjectStore,
    bucket: String,
    /// The objects this writer put, newest last (versions need not be consecutive).
    written: std::sync::Mutex<std::collections::VecDeque<String>>,
}

impl fmt::Debug for WeightsBucket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WeightsBucket")
            .field("bucket", &self.bucket)
            .finish()
    }
}

const INLINE: u8 = 0;
const OBJECT: u8 = 1;

impl WeightsBucket {
    /// Publishes `weights` as policy `version`.
    pub fn put(&self, version: u64, weights: &[u8]) -> Result<(), BrokerError> {
        let rt = &self.broker.inner.rt;
        let mut value = version.to_le_bytes().to_vec();
        if weights.len() <= INLINE_WEIGHTS_LIMIT {
            value.push(INLINE);
            value.extend_from_slice(weights);
        } else {
            // One object per version; the one before the previous is deleted once the
            // pointer has moved, so a reader of the previous pointer still finds its object
            // (a slower one retries). The object repeats the version, which the reader checks.
            let name = format!("v{version}");
            let mut body = version.to_le_bytes().to_vec();
            body.extend_from_slice(weights);
            rt.block_on(self.objects.put(name.as_str(), &mut body.as_slice()))
                .map_err(|e| js_error(format!("object {name} in {}", self.bucket), e))?;
            value.push(OBJECT);
            value.extend_from_slice(name.as_bytes());
            self.written
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push_back(name);
        }
        rt.block_on(self.kv.put("latest", value.into()))
            .map_err(|e| js_error(format!("put latest in {}", self.bucket), e))?;
        let old = {
            let mut w = self
                .written
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if w.len() > 2 { w.pop_front() } else { None }
        };
        if let Some(old) = old {
            // Best effort: one left behind is removed with the run's store.
            let _ = rt.block_on(self.objects.delete(old));
        }
        // The version alone, so that readers check for news without fetching the weights.
        rt.block_on(
            self.kv
                .put("version", version.to_le_bytes().to_vec().into()),
        )
        .map_err(|e| js_error(format!("put version in {}", self.bucket), e))?;
        Ok(())
    }

    /// The names of the weight objects stored (large weights; for diagnostics and tests).
    pub fn objects(&self) -> Result<Vec<String>, BrokerError> {
        let what = || format!("list objects of {}", self.bucket);
        self.broker.block_on(async {
            let mut list = self.objects.list().await.map_err(|e| js_error(what(), e))?;
            let mut names = Vec::new();
            while let Some(info) = list.next().await {
                let info = info.map_err(|e| js_error(what(), e))?;
                if !info.deleted {
                    names.push(info.name);
                }
            }
            Ok(names)
        })
    }

    /// The version of the latest weights, if any were published (one small read).
    pub fn version(&self) -> Result<Option<u64>, BrokerError> {
        let v = self
            .broker
            .block_on(self.kv.get("version"))
            .map_err(|e| js_error(format!("get version from {}", self.bucket), e))?;
        match v {
            None => Ok(None),
            Some(b) if b.len() == 8 => {
                Ok(Some(u64::from_le_bytes(b[..].try_into().expect("8 bytes"))))
            }
            Some(b) => Err(BrokerError::Message {
                subject: format!("{}.version", self.bucket),
                message: format!("{} bytes, expected 8", b.len()),
            }),
        }
    }

    /// The latest weights and their version, if any were published.
    pub fn latest(&self) -> Result<Option<(u64, Vec<u8>)>, BrokerError> {
        let rt = &self.broker.inner.rt;
        let bad = |message: String| BrokerError::Message {
            subject: format!("{}.latest", self.bucket),
            message,
        };
        for _ in 0..10 {
            let Some(v) = rt
                .block_on(self.kv.get("latest"))
                .map_err(|e| js_error(format!("get latest from {}", self.bucket), e))?
            else {
                return Ok(None);
            };
            if v.len() < 9 {
                return Err(bad(format!("{} bytes, expected at least 9", v.len())));
            }
            let version = u64::from_le_bytes(v[..8].try_into().expect("8 bytes"));
            match v[8] {
                INLINE => return Ok(Some((version, v[9..].to_vec()))),
                OBJECT => {
                    let name = std::str::from_utf8(&v[9..])
                        .map_err(|_| bad("object name is not UTF-8".into()))?
                        .to_string();
                    // Bounded (a read of an object deleted meanwhile would wait forever) and
                    // caught (the client library unwraps inside its object reader).
                    let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        rt.block_on(async {
                            let read = async {
                                let mut obj = self.objects.get(name.as_str()).await.ok()?;
                                let mut body = Vec::new();
                                tokio::io::AsyncReadExt::read_to_end(&mut obj, &mut body)
                                    .await
                                    .ok()?;
                                Some(body)
                            };
                            tokio::time::timeout(OBJECT_READ_TIMEOUT, read).await
                        })
                    }));
                    if let Ok(Ok(Some(body))) = read
                        && body.len() >= 8
                        && body[..8] == version.to_le_bytes()
                    {
                        return Ok(Some((version, body[8..].to_vec())));
                    }
                    // Replaced by a newer version meanwhile: read the pointer again.
                }
                k => {
                    return Err(bad(format!(
                        "kind byte {k}, expected 0 (inline) or 1 (object)"
                    )));
                }
            }
        }
        Err(bad(
            "the weights' object could not be read in 10 tries (replaced each time, or the \
             server is unreachable)"
                .into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn used_batches_count_each_runner_sequence_once_and_compact() {
        let mut u = UsedBatches::default();
        let m = |runner, seq| BatchMeta {
            runner,
            seq,
            version: 0,
        };
        assert!(u.first_use(&m(0, 1)));
        assert!(u.first_use(&m(0, 0)));
        assert!(u.first_use(&m(1, 0)));
        assert!(!u.first_use(&m(0, 1)));
        assert!(!u.first_use(&m(0, 0)));
        assert!(u.contains(&m(1, 0)) && !u.contains(&m(1, 1)));
        // 0 and 1 are below the watermark now, nothing above it.
        assert_eq!(u.runners[&0], (2, BTreeSet::new()));
        let back: UsedBatches = serde_json::from_str(&serde_json::to_string(&u).unwrap()).unwrap();
        assert_eq!(back, u);
        assert_eq!((u.count(0), u.count(1), u.count(7)), (2, 1, 0));
        // Read back through a flattened map too, as a checkpoint's state.json holds it.
        #[derive(serde::Deserialize)]
        struct Outer {
            #[serde(flatten)]
            rest: serde_json::Map<String, serde_json::Value>,
        }
        let text = serde_json::json!({ "used_batches": u }).to_string();
        let outer: Outer = serde_json::from_str(&text).unwrap();
        let back: UsedBatches = serde_json::from_value(outer.rest["used_batches"].clone()).unwrap();
        assert_eq!(back, u);
    }

    #[test]
    fn config_errors_name_the_field_and_debug_hides_secrets() {
        let cfg = |run: &str, url: &str| BrokerConfig {
            url: url.into(),
            run_id: run.into(),
            auth: Auth::None,
        };
        let e = cfg("a.b", "nats://127.0.0.1:4222").validate().unwrap_err();
        assert!(e.to_string().contains("`run_id`"), "{e}");
        let e = cfg("run1", "http://127.0.0.1").validate().unwrap_err();
        assert!(e.to_string().contains("`broker`"), "{e}");
        assert!(cfg("run-1_a", "nats://127.0.0.1:4222").validate().is_ok());
        let e = cfg("run1", "nats://me:s3cret@127.0.0.1:4222")
            .validate()
            .unwrap_err();
        assert!(
            e.to_string().contains("`broker`") && !e.to_string().contains("s3cret"),
            "{e}"
        );
        let a = Auth::UserPassword {
            user: "u".into(),
            password: "s3cret".into(),
        };
        assert!(!format!("{a:?}").contains("s3cret"));
        assert!(!format!("{:?}", Auth::Token("tok3n".into())).contains("tok3n"));
    }
}
