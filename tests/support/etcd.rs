//! A real etcd for the etcd discovery tests: one private single-member server per test, on free
//! loopback ports, with its data in a temporary directory, changed through the real `etcdctl`.
//!
//! - etcd cannot be given port 0 (its JSON gateway dials the configured address), so two free
//!   ports are reserved first and a start that loses the race is retried with new ones.
//! - Elections are fast (`--heartbeat-interval 10 --election-timeout 50`), fsync is off: a
//!   server is ready in tens of milliseconds, and the shortest lease etcd grants is 1 s.
//! - [`Etcd::kill`] sends SIGKILL to its own pid; [`Etcd::restart`] starts it again on the same
//!   ports and data. Dropping the handle kills it and removes the directory.
//!
//! Without an `etcd` binary, [`Etcd::start`] returns `None` after printing that the test is
//! skipped — unless the environment variable `CI` is set, when it panics: a missing install step
//! must not turn CI green. `ETCD` and `ETCDCTL` name other binaries (a path that does not exist
//! counts as not installed).

#![allow(dead_code)] // each test crate uses part of it

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn find(var: &str, name: &str) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(var) {
        let path = PathBuf::from(path);
        return path.is_file().then_some(path);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/local/bin")])
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// A running etcd.
pub struct Etcd {
    dir: tempfile::TempDir,
    etcd: PathBuf,
    etcdctl: PathBuf,
    client_port: u16,
    peer_port: u16,
    child: Option<Child>,
}

impl Etcd {
    /// Starts a fresh etcd, or says the test is skipped (`None`) when etcd is not installed and
    /// `CI` is not set.
    pub fn start() -> Option<Etcd> {
        let (Some(etcd), Some(etcdctl)) = (find("ETCD", "etcd"), find("ETCDCTL", "etcdctl")) else {
            if std::env::var_os("CI").is_some() {
                panic!(
                    "etcd and etcdctl are needed by this test and CI is set: install them \
                     (apt-get install -y --no-install-recommends etcd-server etcd-client)"
                );
            }
            eprintln!("SKIPPED: etcd or etcdctl is not installed (apt-get install etcd-server etcd-client)");
            return None;
        };
        let mut last = String::new();
        for _ in 0..5 {
            let ports = free_ports();
            let mut server = Etcd {
                dir: tempfile::Builder::new()
                    .prefix("healthpick-etcd-")
                    .tempdir()
                    .expect("a temporary directory"),
                etcd: etcd.clone(),
                etcdctl: etcdctl.clone(),
                client_port: ports.0,
                peer_port: ports.1,
                child: None,
            };
            match server.spawn() {
                Ok(()) => return Some(server),
                Err(why) => last = why,
            }
        }
        panic!("etcd did not start: {last}");
    }

    /// The client URL.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    /// The client port.
    pub fn port(&self) -> u16 {
        self.client_port
    }

    fn spawn(&mut self) -> Result<(), String> {
        let client = self.url();
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("etcd.log"))
            .map_err(|e| e.to_string())?;
        let child = Command::new(&self.etcd)
            .args(["--name", "t", "--data-dir"])
            .arg(self.dir.path().join("data"))
            .args([
                "--listen-client-urls",
                &client,
                "--advertise-client-urls",
                &client,
            ])
            .args([
                "--listen-peer-urls",
                &peer,
                "--initial-advertise-peer-urls",
                &peer,
            ])
            .arg("--initial-cluster")
            .arg(format!("t={peer}"))
            .args(["--initial-cluster-state", "new"])
            .args(["--heartbeat-interval", "10", "--election-timeout", "50"])
            .args([
                "--unsafe-no-fsync",
                "--logger",
                "zap",
                "--log-level",
                "warn",
            ])
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", self.etcd.display()))?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.child = None;
                let log =
                    std::fs::read_to_string(self.dir.path().join("etcd.log")).unwrap_or_default();
                return Err(format!(
                    "etcd exited ({status}): {}",
                    log.lines().rev().take(5).collect::<Vec<_>>().join(" | ")
                ));
            }
            // Ready once the gateway's own connection works, not just the port.
            if self.ctl_quiet(&["get", "ready-check"]).is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                self.kill();
                return Err("etcd not ready within 15 s".into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// SIGKILL (to its own pid) and reap.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same ports and data.
    pub fn restart(&mut self) {
        self.kill();
        let mut last = String::new();
        for _ in 0..3 {
            match self.spawn() {
                Ok(()) => return,
                Err(why) => last = why,
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("etcd did not restart: {last}");
    }

    fn ctl_quiet(&self, args: &[&str]) -> Result<Output, String> {
        let out = Command::new(&self.etcdctl)
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={}", self.url()))
            .args(["--dial-timeout=1s", "--command-timeout=3s"])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(out)
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// Runs `etcdctl args...`; its stdout. Panics when it fails.
    pub fn ctl(&self, args: &[&str]) -> String {
        match self.ctl_quiet(args) {
            Ok(out) => String::from_utf8_lossy(&out.stdout).into_owned(),
            Err(why) => panic!("etcdctl {args:?} failed: {why}"),
        }
    }

    /// `etcdctl put key value`.
    pub fn put(&self, key: &str, value: &str) {
        self.ctl(&["put", key, value]);
    }

    /// Puts a destination object at `key`.
    pub fn put_destination(&self, key: &str, address: &str) {
        self.put(key, &format!(r#"{{"Address": "{address}"}}"#));
    }

    /// `etcdctl del key` (`--prefix` when `prefix`).
    pub fn delete(&self, key: &str, prefix: bool) {
        if prefix {
            self.ctl(&["del", "--prefix", key]);
        } else {
            self.ctl(&["del", key]);
        }
    }

    /// The store's current revision.
    pub fn revision(&self) -> i64 {
        let out = self.ctl(&["get", "revision-check", "-w", "json"]);
        let v: serde_json::Value = serde_json::from_str(&out).expect("etcdctl json");
        v["header"]["revision"].as_i64().expect("a revision")
    }

    /// Compacts the history up to the current revision (physically).
    pub fn compact(&self) -> i64 {
        let revision = self.revision();
        self.ctl(&["compaction", "--physical", &revision.to_string()]);
        revision
    }

    /// Grants a lease of `ttl` seconds; its id in hex, as etcdctl takes it.
    pub fn grant(&self, ttl: u32) -> String {
        let out = self.ctl(&["lease", "grant", &ttl.to_string()]);
        // "lease 694d7d4b1d3a1c0f granted with TTL(2s)"
        out.split_whitespace()
            .nth(1)
            .expect("a lease id")
            .to_string()
    }

    /// Puts `key` = `value` attached to `lease` (hex).
    pub fn put_with_lease(&self, key: &str, value: &str, lease: &str) {
        self.ctl(&["put", &format!("--lease={lease}"), key, value]);
    }

    /// The keys under `prefix`.
    pub fn keys(&self, prefix: &str) -> Vec<String> {
        self.ctl(&["get", "--prefix", "--keys-only", prefix])
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect()
    }

    /// The value of `key`, if any.
    pub fn get(&self, key: &str) -> Option<String> {
        let out = self.ctl(&["get", "--print-value-only", key]);
        let value = out.trim_end_matches('\n');
        (!value.is_empty()).then(|| value.to_string())
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Two distinct free loopback ports (reserved and released: a start may lose them, and retries).
fn free_ports() -> (u16, u16) {
    let a = TcpListener::bind("127.0.0.1:0").expect("a free port");
    let b = TcpListener::bind("127.0.0.1:0").expect("a free port");
    (
        a.local_addr().expect("an address").port(),
        b.local_addr().expect("an address").port(),
    )
}

/// A TCP relay between a client and etcd that a test can cut: [`Relay::block`] drops every
/// relayed connection and refuses new ones until [`Relay::unblock`], so the client sees etcd
/// vanish while etcd itself keeps running (and can be changed behind its back).
pub struct Relay {
    port: u16,
    blocked: std::sync::Arc<std::sync::atomic::AtomicBool>,
    generation: tokio::sync::watch::Sender<u64>,
    task: tokio::task::JoinHandle<()>,
}

impl Relay {
    /// Relays 127.0.0.1:(a free port) to `upstream`; runs on the current tokio runtime.
    pub async fn start(upstream: u16) -> Relay {
        use std::sync::atomic::Ordering;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        let port = listener.local_addr().expect("an address").port();
        let blocked = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (generation, _) = tokio::sync::watch::channel(0u64);
        let cut = generation.clone();
        let is_blocked = blocked.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    return;
                };
                if is_blocked.load(Ordering::SeqCst) {
                    drop(inbound);
                    continue;
                }
                let mut cut = cut.subscribe();
                tokio::spawn(async move {
                    let Ok(mut outbound) =
                        tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await
                    else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = cut.changed() => {}
                    }
                });
            }
        });
        Relay {
            port,
            blocked,
            generation,
            task,
        }
    }

    /// The URL clients use.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Drops every relayed connection and refuses new ones.
    pub fn block(&self) {
        self.blocked
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.generation.send_modify(|g| *g += 1);
    }

    /// Relays again.
    pub fn unblock(&self) {
        self.blocked
            .store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
        self.generation.send_modify(|g| *g += 1);
    }
}
