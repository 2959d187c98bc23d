//! What the broker tests share: a fresh store directory and a connection to a run.

use rl_training_broker::{Auth, Broker, BrokerConfig, NatsServer};
use std::path::PathBuf;

/// A fresh store directory for one test's server.
pub fn store(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rl-broker-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// A connection to `server` for run `run`, without credentials.
pub fn connect(server: &NatsServer, run: &str) -> Broker {
    Broker::connect(&BrokerConfig {
        url: server.url(),
        run_id: run.into(),
        auth: Auth::None,
    })
    .unwrap()
}
