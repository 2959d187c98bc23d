//! The run's notice board: what a runner process needs to join a run (the run's config and the
//! binary version that started it), runner ids unique within the run, runner heartbeats, and
//! the learner's "finished" notice.

use crate::{Broker, BrokerError, js_error};
use async_nats::jetstream::kv;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// What the learner tells runners about its run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunInfo {
    /// The version of the binary that started the run (runners of another version refuse to
    /// join: batches and weights are only compatible within one).
    pub rl_version: String,
    /// The algorithm (`impala`, `appo` …).
    pub algorithm: String,
    /// The run's config as YAML (envs, seed, hyperparameters).
    pub config_yaml: String,
}

impl RunInfo {
    /// Refuses to join a run started by another version (`mine` is this binary's).
    pub fn check_version(&self, mine: &str) -> Result<(), BrokerError> {
        if self.rl_version == mine {
            return Ok(());
        }
        Err(BrokerError::Config {
            field: "rl_version",
            message: format!(
                "the run was started by rl {}, this binary is rl {mine}: runners and learner \
                 must run the same version",
                self.rl_version
            ),
        })
    }
}

/// A runner's last word on the board.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heartbeat {
    /// Time since it beat (clocks of the two machines).
    pub age: Duration,
    /// Batches it had sent by then.
    pub sent: u64,
}

/// The run's key-value bucket of notices (keys `info`, `finished`, `runner.N`,
/// `heartbeat.N`).
pub struct RunBoard {
    broker: Broker,
    kv: kv::Store,
    bucket: String,
}

impl fmt::Debug for RunBoard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunBoard")
            .field("bucket", &self.bucket)
            .finish()
    }
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A learner's hold on its run: the run's info is posted for runners to join; dropping it
/// posts the run's end (the runners leave).
#[derive(Debug)]
pub struct RunPost {
    board: RunBoard,
}

impl Drop for RunPost {
    fn drop(&mut self) {
        // Best effort: a runner that misses it is stopped by its supervisor.
        let _ = self.board.post_finished();
    }
}

impl Broker {
    /// Posts `info` on the run's board for runners to join, until the returned hold is
    /// dropped.
    pub fn post_run(&self, info: &RunInfo) -> Result<RunPost, BrokerError> {
        let board = self.board()?;
        board.post_info(info)?;
        Ok(RunPost { board })
    }

    /// The run's notice board (created if missing).
    pub fn board(&self) -> Result<RunBoard, BrokerError> {
        let bucket = format!("rl_{}_board", self.inner.run);
        let kv = self.kv_bucket(&bucket)?;
        Ok(RunBoard {
            broker: self.clone(),
            kv,
            bucket,
        })
    }
}

impl RunBoard {
    fn get(&self, key: &str) -> Result<Option<bytes::Bytes>, BrokerError> {
        self.broker
            .block_on(self.kv.get(key))
            .map_err(|e| js_error(format!("get {key} from {}", self.bucket), e))
    }

    fn put(&self, key: &str, value: Vec<u8>) -> Result<(), BrokerError> {
        self.broker
            .block_on(self.kv.put(key, value.into()))
            .map(drop)
            .map_err(|e| js_error(format!("put {key} in {}", self.bucket), e))
    }

    /// Posts the run's info (the learner, at its start) and clears an earlier `finished`.
    pub fn post_info(&self, info: &RunInfo) -> Result<(), BrokerError> {
        self.put("info", serde_json::to_vec(info).expect("serializable"))?;
        self.broker
            .block_on(self.kv.purge("finished"))
            .map_err(|e| js_error(format!("purge finished in {}", self.bucket), e))
    }

    /// The run's info, waiting up to `wait` for a learner to post it.
    pub fn info(&self, wait: Duration) -> Result<RunInfo, BrokerError> {
        let deadline = Instant::now() + wait;
        loop {
            if let Some(b) = self.get("info")? {
                return serde_json::from_slice(&b).map_err(|e| BrokerError::Message {
                    subject: format!("{}.info", self.bucket),
                    message: format!("expected the run's info as JSON: {e}"),
                });
            }
            if Instant::now() >= deadline {
                return Err(BrokerError::Config {
                    field: "run",
                    message: format!(
                        "no learner has posted run {:?} on this server within {wait:?} (start \
                         `rl train CONFIG --broker URL` first, and check the run id)",
                        self.broker.run_id()
                    ),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// A runner id no other runner of this run has claimed (0, 1, 2 … in claim order).
    pub fn claim_runner_id(&self) -> Result<u32, BrokerError> {
        for id in 0..u32::MAX {
            let key = format!("runner.{id}");
            // `create` fails when the key exists: the claim is atomic on the server.
            match self.broker.block_on(
                self.kv
                    .create(&key, unix_ms().to_le_bytes().to_vec().into()),
            ) {
                Ok(_) => return Ok(id),
                Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => continue,
                Err(e) => return Err(js_error(format!("create {key} in {}", self.bucket), e)),
            }
        }
        Err(BrokerError::Config {
            field: "runner",
            message: "every runner id is taken".into(),
        })
    }

    /// Says runner `id` is alive (now), having sent `sent` batches so far.
    pub fn heartbeat(&self, id: u32, sent: u64) -> Result<(), BrokerError> {
        let mut v = unix_ms().to_le_bytes().to_vec();
        v.extend_from_slice(&sent.to_le_bytes());
        self.put(&format!("heartbeat.{id}"), v)
    }

    /// The runners' last heartbeats by id (runners that never beat are absent).
    pub fn heartbeats(&self) -> Result<BTreeMap<u32, Heartbeat>, BrokerError> {
        let keys: Vec<String> = self.broker.block_on(async {
            use futures_util::TryStreamExt;
            match self.kv.keys().await {
                Ok(k) => k.try_collect().await.unwrap_or_default(),
                Err(_) => Vec::new(),
            }
        });
        let now = unix_ms();
        let mut out = BTreeMap::new();
        for k in keys {
            let Some(id) = k.strip_prefix("heartbeat.").and_then(|s| s.parse().ok()) else {
                continue;
            };
            let Some(b) = self.get(&k)? else { continue };
            if b.len() != 16 {
                return Err(BrokerError::Message {
                    subject: format!("{}.{k}", self.bucket),
                    message: format!("{} bytes, expected 16", b.len()),
                });
            }
            let t = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
            out.insert(
                id,
                Heartbeat {
                    age: Duration::from_millis(now.saturating_sub(t)),
                    sent: u64::from_le_bytes(b[8..].try_into().expect("8 bytes")),
                },
            );
        }
        Ok(out)
    }

    /// A runner's watch, for a thread of its own: beats for runner `id` (with the count in
    /// `sent`) every 250 ms until `done` is set, and calls `on_end` (then returns) once the
    /// learner has posted the run's end or `stop` is set.
    pub fn beat_until_end(
        &self,
        id: u32,
        sent: &AtomicU64,
        stop: &AtomicBool,
        done: &AtomicBool,
        on_end: impl FnOnce(),
    ) {
        while !done.load(Ordering::SeqCst) {
            let _ = self.heartbeat(id, sent.load(Ordering::SeqCst));
            if stop.load(Ordering::SeqCst) || self.finished().unwrap_or(false) {
                on_end();
                return;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Tells the runners that the run is over (they exit).
    pub fn post_finished(&self) -> Result<(), BrokerError> {
        self.put("finished", vec![1])
    }

    /// Whether the learner has finished.
    pub fn finished(&self) -> Result<bool, BrokerError> {
        Ok(self.get("finished")?.is_some_and(|b| !b.is_empty()))
    }
}
