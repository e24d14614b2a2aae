//! The examples' backend in a child process: this test binary run again with only its entry
//! test, for faults that are signals: `SIGKILL` (a crash: the kernel closes its sockets) and
//! `SIGSTOP`/`SIGCONT` (a freeze), each sent to the child's own pid.

use std::time::Duration;

use super::backend;

/// The environment variable that makes this test binary a child backend: its value is the
/// backend's name.
const CHILD_ENV: &str = "HEALTHPICK_CHILD_BACKEND";
/// The line a child backend prints once it listens: the marker, then its URL.
const CHILD_MARKER: &str = "HEALTHPICK_CHILD_URL=";
/// The test that is a child backend's entry point (see [`run_child_backend_if_asked`]), by its
/// full name in the `client` test binary, the one binary that starts children.
pub const CHILD_TEST: &str = "client::child_backend_process";

/// In a process started by [`ChildBackend::start`]: serves the examples' backend until killed
/// and never returns. Anywhere else: returns at once.
pub fn run_child_backend_if_asked() {
    let Ok(name) = std::env::var(CHILD_ENV) else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("child runtime");
    runtime.block_on(async move {
        let server = backend::Backend::start(&name).await.expect("child backend");
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        writeln!(out, "{CHILD_MARKER}{}", server.url()).expect("stdout");
        out.flush().expect("stdout");
        drop(out);
        std::future::pending::<()>().await;
    });
}

/// The examples' backend (it answers its name) in a child process: this test binary, run again
/// with only [`CHILD_TEST`]. Killed (SIGKILL) when dropped.
pub struct ChildBackend {
    child: std::process::Child,
    url: String,
}

impl ChildBackend {
    /// Starts a child backend called `name` and waits (bounded) until it listens.
    pub fn start(name: &str) -> ChildBackend {
        use std::io::BufRead;
        let mut child = std::process::Command::new(std::env::current_exe().expect("test binary"))
            .args([CHILD_TEST, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, name)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn a child backend");
        let stdout = child.stdout.take().expect("child stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                // libtest has printed `test <name> ... ` on the same line.
                if let Some(at) = line.find(CHILD_MARKER) {
                    let _ = tx.send(line[at + CHILD_MARKER.len()..].trim().to_string());
                }
            }
        });
        let url = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("the child backend did not start listening");
        ChildBackend { child, url }
    }

    /// `http://127.0.0.1:PORT/`
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, and waits for the process to be gone (its sockets closed by the kernel).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends `signal` (`"STOP"`, `"CONT"`) to the child.
    pub fn signal(&self, signal: &str) {
        let status = std::process::Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .status()
            .expect("kill(1)");
        assert!(status.success(), "kill -{signal} {} failed", self.pid());
        if signal == "STOP" {
            // The signal is delivered asynchronously: wait (bounded) until the kernel shows the
            // process stopped.
            let stat = format!("/proc/{}/stat", self.pid());
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while !std::fs::read_to_string(&stat).is_ok_and(|s| {
                s.rsplit(") ")
                    .next()
                    .is_some_and(|rest| rest.starts_with('T'))
            }) {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the child did not stop"
                );
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
}

impl Drop for ChildBackend {
    fn drop(&mut self) {
        self.kill();
    }
}
