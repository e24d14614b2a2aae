//! A throwaway single-member etcd for the examples: the `etcd` binary (on the PATH, or `ETCD`)
//! started on free loopback ports with its data in a temporary directory, and killed (its
//! directory removed) when the handle is dropped — or, through the parent-death signal, when the
//! example itself is killed.
//!
//! - etcd cannot be given port 0 (its JSON gateway dials the configured address), so two free
//!   ports are reserved first and released just before etcd binds them; a start that loses that
//!   race is retried with new ones.
//! - Elections are fast (`--heartbeat-interval 10 --election-timeout 50`) and fsync is off
//!   (`--unsafe-no-fsync`): the server is ready in well under a second. Throwaway data only.
//! - Ready means the JSON gateway answers a `kv/range`, not just that the port is open.

#![allow(dead_code)] // each example uses part of it

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The `etcd` binary: `ETCD` when set (a path that does not exist counts as none), else the
/// first `etcd` on the PATH, `/usr/bin` or `/usr/local/bin`.
pub fn find_etcd() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("ETCD") {
        let path = PathBuf::from(path);
        return path.is_file().then_some(path);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/local/bin")])
        .map(|dir| dir.join("etcd"))
        .find(|p| p.is_file())
}

/// A running etcd of our own; dropping it kills it and removes its data.
pub struct LocalEtcd {
    child: Option<Child>,
    dir: tempfile::TempDir,
    client_url: String,
    version: String,
}

impl LocalEtcd {
    /// Starts `binary` and waits (at most 15 s per attempt) until its gateway answers.
    pub async fn start(binary: &Path) -> Result<LocalEtcd, String> {
        let version = Command::new(binary)
            .arg("--version")
            .output()
            .ok()
            .and_then(|out| {
                let text = String::from_utf8_lossy(&out.stdout).into_owned();
                text.lines()
                    .next()
                    .and_then(|l| l.strip_prefix("etcd Version: "))
                    .map(str::to_string)
            })
            .unwrap_or_else(|| "(version unknown)".into());
        let mut last = String::new();
        for _ in 0..5 {
            let dir = tempfile::Builder::new()
                .prefix("healthpick-etcd-")
                .tempdir()
                .map_err(|e| format!("no temporary directory: {e}"))?;
            let (client, peer) = free_ports()?;
            let mut etcd = LocalEtcd {
                child: None,
                dir,
                client_url: format!("http://127.0.0.1:{client}"),
                version: version.clone(),
            };
            match etcd.spawn(binary, peer).await {
                Ok(()) => return Ok(etcd),
                Err(why) => last = why,
            }
        }
        Err(format!("etcd did not start: {last}"))
    }

    /// The client URL, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.client_url
    }

    /// What `etcd --version` says (`3.4.23`).
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The data directory (removed on drop).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    async fn spawn(&mut self, binary: &Path, peer_port: u16) -> Result<(), String> {
        let client = self.client_url.clone();
        let peer = format!("http://127.0.0.1:{peer_port}");
        let log_path = self.dir.path().join("etcd.log");
        let log = std::fs::File::create(&log_path).map_err(|e| e.to_string())?;
        let mut command = Command::new(binary);
        command
            .args(["--name", "example", "--data-dir"])
            .arg(self.dir.path().join("data"))
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .arg("--initial-cluster")
            .arg(format!("example={peer}"))
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
            .stderr(log);
        {
            use std::os::unix::process::CommandExt;
            // SAFETY: prctl is async-signal-safe, and this closure touches nothing else. etcd
            // gets SIGKILL when the thread that started it ends (the example's main thread),
            // so even a killed example leaves no etcd behind.
            unsafe {
                command.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    Ok(())
                });
            }
        }
        let child = command
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", binary.display()))?;
        self.child = Some(child);
        let http = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_millis(500))
            .build()
            .map_err(|e| e.to_string())?;
        let ready = format!("{client}/v3/kv/range");
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.child = None;
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                return Err(format!(
                    "etcd exited ({status}): {}",
                    log.lines().rev().take(3).collect::<Vec<_>>().join(" | ")
                ));
            }
            let answer = http
                .post(&ready)
                .body(r#"{"key": "cmVhZHk="}"#) // "ready"
                .send()
                .await;
            if answer.is_ok_and(|a| a.status().is_success()) {
                return Ok(());
            }
            if Instant::now() > deadline {
                self.kill();
                return Err("etcd not ready within 15 s".into());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// SIGKILL and reap.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for LocalEtcd {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Two distinct free loopback ports, reserved and released (etcd binds them next).
fn free_ports() -> Result<(u16, u16), String> {
    let bind = || TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"));
    let (a, b) = (bind()?, bind()?);
    let port = |l: &TcpListener| l.local_addr().map(|a| a.port()).map_err(|e| e.to_string());
    Ok((port(&a)?, port(&b)?))
}
