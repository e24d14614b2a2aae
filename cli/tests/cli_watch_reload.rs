//! `healthpick watch FILE` follows its file (feature `file`): the built binary on a pipe, its
//! configuration saved anew by rename while it runs. The clusters have no active checks, so
//! nothing is probed and no server is needed. Each step reads the binary's output until it
//! shows what the step expects, with a deadline; the child is stopped (Ctrl-C, or killed when
//! a step fails) before the test ends.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(20);

/// Cluster `orders` without active checks, with these destination ids (nothing listens at
/// their addresses; nothing is sent to them either).
fn doc(ids: &[&str]) -> String {
    let destinations = ids
        .iter()
        .enumerate()
        .map(|(i, id)| format!(r#""{id}": {{ "Address": "http://127.0.0.1:{}/" }}"#, 9 + i))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        r#"{{ "ReverseProxy": {{ "Clusters": {{ "orders": {{ "Destinations": {{ {destinations} }} }} }} }} }}"#
    )
}

fn replace(path: &Path, text: &str) {
    let temp = path.with_extension("json.tmp");
    std::fs::write(&temp, text).unwrap();
    std::fs::rename(&temp, path).unwrap();
}

/// The running binary; killed if the test fails before stopping it.
struct Watch {
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl Watch {
    fn start(path: &Path) -> Watch {
        let mut child = Command::new(env!("CARGO_BIN_EXE_healthpick"))
            .args(["watch", path.to_str().unwrap()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("run healthpick");
        let stdout = child.stdout.take().unwrap();
        let (send, lines) = mpsc::channel();
        // Ends when the child's stdout closes.
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Watch {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Reads lines until one satisfies `done`, or fails after the deadline with all it read.
    fn until(&mut self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if done(&line) {
                        return line;
                    }
                }
                Err(_) => panic!(
                    "no line showing {what} within {DEADLINE:?}:\n{}",
                    self.seen.join("\n")
                ),
            }
        }
    }

    /// Ctrl-C, then the exit code (bounded).
    fn interrupt(&mut self) -> Option<i32> {
        let sent = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(sent, "could not send SIGINT");
        let deadline = Instant::now() + DEADLINE;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return status.code(),
                _ if Instant::now() > deadline => return None,
                _ => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `line` is a table row of destination `id` of `orders`.
fn row_of(line: &str, id: &str) -> bool {
    line.split_whitespace()
        .collect::<Vec<_>>()
        .windows(2)
        .any(|w| w == ["orders", id])
}

#[test]
fn live_mode_reloads_the_file_when_it_changes_and_shows_a_rejected_version() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("appsettings.json");
    std::fs::write(&path, doc(&["a"])).unwrap();
    let name = path.display().to_string();

    let mut watch = Watch::start(&path);
    let header = watch.until("the header", |l| l.contains("healthpick watch"));
    assert!(header.contains("1 cluster, 1 destination"), "{header}");
    assert!(header.contains("reloaded when it changes"), "{header}");
    watch.until("a row for a", |l| row_of(l, "a"));

    // A new version: a line says so and the table follows.
    replace(&path, &doc(&["a", "b"]));
    let reloaded = watch.until("the reload", |l| l.contains("reloaded:"));
    assert!(
        reloaded.contains(&format!(
            "configuration {name} reloaded: 1 cluster, 2 destinations"
        )),
        "{reloaded}"
    );
    watch.until("a row for b", |l| row_of(l, "b"));

    // A bad version: rejected with its problem, the one in force stays.
    replace(
        &path,
        r#"{ "ReverseProxy": { "Clusters": { "orders": { "LoadBalancingPolicy": "Nope" } } } }"#,
    );
    let rejected = watch.until("the rejection", |l| l.contains("rejected"));
    assert!(
        rejected.contains(&format!(
            "configuration {name} rejected, the one in force stays"
        )),
        "{rejected}"
    );
    assert!(rejected.contains("Nope"), "{rejected}");

    // Good again.
    replace(&path, &doc(&["c"]));
    watch.until("a row for c", |l| row_of(l, "c"));

    let code = watch.interrupt();
    assert_eq!(code, Some(0), "Ctrl-C exits 0:\n{}", watch.seen.join("\n"));
    let text = watch.seen.join("\n");
    assert!(
        watch.seen.iter().all(|l| l.starts_with('[')),
        "every line is timestamped on a pipe:\n{text}"
    );
}
