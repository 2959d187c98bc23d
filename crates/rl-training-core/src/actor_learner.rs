//! The runner / learner split of the actor-learner algorithms (IMPALA, APPO): env runners
//! collect trajectory batches with a local copy of the policy and send them, tagged with the
//! policy version that produced them, through a [`Transport`]; the learner consumes them
//! (measuring the policy lag, dropping batches that are too old) and publishes versioned
//! weights that runners pick up. The transport is a trait so that runners and learners can
//! later live in other processes (a message broker); [`ChannelTransport`] is the in-process
//! one: a bounded queue, so a slow learner blocks the runners instead of growing memory.
//!
//! [`RunnerPool`] drives the runners either on threads (asynchronous: each runner loops
//! collect → send, a panic is caught, reported and the runner reset and restarted) or in
//! lockstep (the learner asks each runner in a fixed order; seeded runs are reproducible).

use crate::algorithm::RlError;
use crate::params::TensorMap;
use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

/// Weights with the learner version they belong to.
#[derive(Debug, Clone)]
pub struct Versioned {
    /// Learner updates that produced these weights.
    pub version: u64,
    /// The weights by parameter path.
    pub weights: TensorMap,
}

/// A batch with where and when it was produced.
#[derive(Debug)]
pub struct Tagged<B> {
    /// Policy version the runner acted with.
    pub version: u64,
    /// Which runner.
    pub runner: usize,
    /// When it was sent (queue time counts into the lag).
    pub sent: Instant,
    /// The data.
    pub batch: B,
}

/// How batches travel from runners to the learner and weights back.
pub trait Transport<B>: Send + Sync {
    /// Queues a batch; blocks while the queue is full (back-pressure). Fails once closed.
    fn send(&self, batch: Tagged<B>) -> Result<(), RlError>;
    /// The oldest queued batch, waiting up to `timeout`.
    fn recv(&self, timeout: Duration) -> Option<Tagged<B>>;
    /// Batches waiting.
    fn queue_len(&self) -> usize;
    /// Makes `w` the weights runners pick up.
    fn publish(&self, w: Arc<Versioned>);
    /// The latest published weights.
    fn latest(&self) -> Arc<Versioned>;
    /// Stops the exchange: blocked senders return an error.
    fn close(&self);
    /// Whether [`close`](Self::close) was called.
    fn is_closed(&self) -> bool;
}

/// The in-process transport: a bounded FIFO queue and a shared weights slot.
pub struct ChannelTransport<B> {
    queue: Mutex<VecDeque<Tagged<B>>>,
    capacity: usize,
    changed: Condvar,
    weights: RwLock<Arc<Versioned>>,
    closed: AtomicBool,
}

impl<B> ChannelTransport<B> {
    /// A queue of at most `capacity` batches (≥ 1) and the initial weights.
    pub fn new(capacity: usize, initial: Versioned) -> Self {
        Self {
            queue: Mutex::new(VecDeque::new()),
            capacity: capacity.max(1),
            changed: Condvar::new(),
            weights: RwLock::new(Arc::new(initial)),
            closed: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Tagged<B>>> {
        // A runner that panicked while holding the lock leaves a consistent queue (pushes and
        // pops are single calls), so the poison can be ignored.
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<B: Send> Transport<B> for ChannelTransport<B> {
    fn send(&self, batch: Tagged<B>) -> Result<(), RlError> {
        let mut q = self.lock();
        while q.len() >= self.capacity && !self.is_closed() {
            q = self
                .changed
                .wait_timeout(q, Duration::from_millis(50))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        if self.is_closed() {
            return Err(RlError::Other("transport closed".into()));
        }
        q.push_back(batch);
        self.changed.notify_all();
        Ok(())
    }

    fn recv(&self, timeout: Duration) -> Option<Tagged<B>> {
        let deadline = Instant::now() + timeout;
        let mut q = self.lock();
        loop {
            if let Some(b) = q.pop_front() {
                self.changed.notify_all();
                return Some(b);
            }
            let now = Instant::now();
            if now >= deadline || self.is_closed() {
                return None;
            }
            q = self
                .changed
                .wait_timeout(q, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    fn queue_len(&self) -> usize {
        self.lock().len()
    }

    fn publish(&self, w: Arc<Versioned>) {
        *self.weights.write().unwrap_or_else(|e| e.into_inner()) = w;
    }

    fn latest(&self) -> Arc<Versioned> {
        self.weights
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.changed.notify_all();
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }
}

/// An env runner: collects one batch with the given weights (loading them first when they
/// are newer than its copy).
pub trait Runner: Send {
    /// What one collection produces.
    type Batch: Send;
    /// Collects a batch acting with `weights`; returns it with the version it acted with.
    fn collect(&mut self, weights: &Versioned) -> Result<(u64, Self::Batch), RlError>;
    /// Starts afresh after a panic or an error (new episodes; the weights are reloaded next
    /// time).
    fn reset(&mut self) -> Result<(), RlError>;
}

/// What happened to runners, for the learner's metrics.
#[derive(Debug, Default)]
pub struct RunnerReports {
    /// Restarts: collections that panicked or failed (an env that panicked or returned NaN
    /// inside the runner's vector env is an error), each followed by a reset.
    pub restarts: AtomicU64,
    /// Messages of the panics and errors, in order.
    pub messages: Mutex<Vec<String>>,
}

/// The learner's view of incoming batches: measures the policy lag (learner version minus
/// the batch's, queue time included since it is measured on arrival) and drops batches older
/// than `max_lag`.
#[derive(Debug, Default, Clone)]
pub struct Intake {
    /// Batches older than this many versions are dropped (None: keep all).
    pub max_lag: Option<u64>,
    /// Batches dropped so far.
    pub dropped: u64,
    /// Lags of the batches admitted since the last [`take_lags`](Self::take_lags).
    lags: Vec<u64>,
    /// Seconds the admitted batches spent queued.
    queue_seconds: Vec<f64>,
}

impl Intake {
    /// An intake dropping batches older than `max_lag` versions.
    pub fn new(max_lag: Option<u64>) -> Self {
        Self {
            max_lag,
            ..Self::default()
        }
    }

    /// The batch if it is recent enough for a learner at `learner_version`, else None (and
    /// counted as dropped).
    pub fn admit<B>(&mut self, t: Tagged<B>, learner_version: u64) -> Option<Tagged<B>> {
        let lag = learner_version.saturating_sub(t.version);
        if self.max_lag.is_some_and(|m| lag > m) {
            self.dropped += 1;
            return None;
        }
        self.lags.push(lag);
        self.queue_seconds.push(t.sent.elapsed().as_secs_f64());
        Some(t)
    }

    /// Mean lag and mean queue seconds of the batches admitted since the last call.
    pub fn take_lags(&mut self) -> (f64, f64) {
        let n = self.lags.len().max(1) as f64;
        let lag = self.lags.iter().sum::<u64>() as f64 / n;
        let q = self.queue_seconds.iter().sum::<f64>() / n;
        self.lags.clear();
        self.queue_seconds.clear();
        (lag, q)
    }
}

/// Runners driven in lockstep or on threads.
pub enum RunnerPool<R: Runner> {
    /// The learner calls each runner in turn.
    Lockstep(Vec<R>),
    /// Each runner loops on its own thread.
    Threads {
        /// The threads.
        handles: Vec<std::thread::JoinHandle<()>>,
    },
}

impl<R: Runner + 'static> RunnerPool<R> {
    /// Starts one thread per runner: collect with the latest weights, send (blocking while
    /// the queue is full), repeat until the transport closes. A panic inside `collect` is
    /// caught and reported, the runner reset and the loop continues; an error is reported and
    /// retried after a reset as well.
    pub fn spawn(
        runners: Vec<R>,
        transport: Arc<dyn Transport<R::Batch>>,
        reports: Arc<RunnerReports>,
    ) -> Self {
        let handles = runners
            .into_iter()
            .enumerate()
            .map(|(i, mut r)| {
                let (transport, reports) = (transport.clone(), reports.clone());
                std::thread::Builder::new()
                    .name(format!("env-runner-{i}"))
                    .spawn(move || {
                        while !transport.is_closed() {
                            let w = transport.latest();
                            match catch_unwind(AssertUnwindSafe(|| r.collect(&w))) {
                                Ok(Ok((version, batch))) => {
                                    let t = Tagged {
                                        version,
                                        runner: i,
                                        sent: Instant::now(),
                                        batch,
                                    };
                                    if transport.send(t).is_err() {
                                        break;
                                    }
                                }
                                Ok(Err(e)) => {
                                    reports.restarts.fetch_add(1, Ordering::SeqCst);
                                    report(&reports, format!("env runner {i}: {e}; restarted"));
                                    if let Err(e) = r.reset() {
                                        report(
                                            &reports,
                                            format!("env runner {i}: reset failed: {e}"),
                                        );
                                        break;
                                    }
                                }
                                Err(p) => {
                                    reports.restarts.fetch_add(1, Ordering::SeqCst);
                                    let msg = crate::vec_env::panic_message(p.as_ref());
                                    report(
                                        &reports,
                                        format!("env runner {i} panicked: {msg}; restarted"),
                                    );
                                    if let Err(e) = r.reset() {
                                        report(
                                            &reports,
                                            format!("env runner {i}: reset failed: {e}"),
                                        );
                                        break;
                                    }
                                }
                            }
                        }
                    })
                    .expect("spawning an env runner thread")
            })
            .collect();
        RunnerPool::Threads { handles }
    }
}

fn report(reports: &RunnerReports, msg: String) {
    reports
        .messages
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(msg);
}

impl<R: Runner> RunnerPool<R> {
    /// Closes the transport and joins the threads (no-op in lockstep).
    pub fn shutdown(&mut self, transport: &dyn Transport<R::Batch>) {
        transport.close();
        if let RunnerPool::Threads { handles } = self {
            for h in handles.drain(..) {
                let _ = h.join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Counts its collections; panics on the listed ones.
    struct Counting {
        made: Arc<AtomicUsize>,
        panic_on: Vec<usize>,
        calls: usize,
    }

    impl Runner for Counting {
        type Batch = usize;
        fn collect(&mut self, w: &Versioned) -> Result<(u64, usize), RlError> {
            self.calls += 1;
            if self.panic_on.contains(&self.calls) {
                panic!("injected failure at call {}", self.calls);
            }
            Ok((w.version, self.made.fetch_add(1, Ordering::SeqCst)))
        }
        fn reset(&mut self) -> Result<(), RlError> {
            Ok(())
        }
    }

    fn v0() -> Versioned {
        Versioned {
            version: 0,
            weights: TensorMap::default(),
        }
    }

    #[test]
    fn a_slow_learner_blocks_the_runners() {
        let made = Arc::new(AtomicUsize::new(0));
        let t: Arc<ChannelTransport<usize>> = Arc::new(ChannelTransport::new(3, v0()));
        let runners = (0..2)
            .map(|_| Counting {
                made: made.clone(),
                panic_on: vec![],
                calls: 0,
            })
            .collect();
        let reports = Arc::new(RunnerReports::default());
        let mut pool = RunnerPool::spawn(runners, t.clone(), reports);
        // The learner takes nothing for a while: the queue fills to its capacity and the
        // runners stop (each holds at most one finished batch it cannot send).
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(t.queue_len(), 3);
        assert!(made.load(Ordering::SeqCst) <= 3 + 2, "{made:?}");
        // Taking batches lets them continue.
        for _ in 0..10 {
            assert!(t.recv(Duration::from_secs(5)).is_some());
        }
        assert!(made.load(Ordering::SeqCst) >= 10);
        pool.shutdown(t.as_ref());
    }

    #[test]
    fn a_runner_that_panics_is_restarted_and_training_goes_on() {
        let made = Arc::new(AtomicUsize::new(0));
        let t: Arc<ChannelTransport<usize>> = Arc::new(ChannelTransport::new(4, v0()));
        let runners = vec![Counting {
            made: made.clone(),
            panic_on: vec![3, 5],
            calls: 0,
        }];
        let reports = Arc::new(RunnerReports::default());
        let mut pool = RunnerPool::spawn(runners, t.clone(), reports.clone());
        let got: Vec<usize> = (0..8)
            .map(|_| {
                t.recv(Duration::from_secs(5))
                    .expect("batches keep coming")
                    .batch
            })
            .collect();
        assert_eq!(got, (0..8).collect::<Vec<_>>());
        assert_eq!(reports.restarts.load(Ordering::SeqCst), 2);
        let msgs = reports.messages.lock().unwrap().clone();
        assert!(msgs[0].contains("injected failure at call 3"), "{msgs:?}");
        pool.shutdown(t.as_ref());
    }

    #[test]
    fn old_batches_are_dropped_and_counted_and_lag_is_measured() {
        let mut intake = Intake::new(Some(2));
        let tag = |version| Tagged {
            version,
            runner: 0,
            sent: Instant::now(),
            batch: (),
        };
        assert!(intake.admit(tag(9), 10).is_some()); // lag 1
        assert!(intake.admit(tag(8), 10).is_some()); // lag 2
        assert!(intake.admit(tag(7), 10).is_none()); // lag 3 > 2
        assert_eq!(intake.dropped, 1);
        let (lag, queued) = intake.take_lags();
        assert_eq!(lag, 1.5);
        assert!(queued >= 0.0);
        // Weights published by the learner are what runners see next.
        let t: ChannelTransport<()> = ChannelTransport::new(1, v0());
        t.publish(Arc::new(Versioned {
            version: 5,
            weights: TensorMap::default(),
        }));
        assert_eq!(t.latest().version, 5);
    }
}
