//! `healthpick watch FILE [--once]`: the built binary against real axum servers on 127.0.0.1.
//!
//! Every server is started by the test on port 0 before the binary runs; a refused destination
//! is a port that was bound and released. `--once` finishes after one probe round, so no test
//! waits on a timer; the one test of the live mode reads the binary's output until it has seen
//! what it expects (with a generous deadline) and then stops it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;

/// The workspace root, where the fixtures and examples live: the binary runs there, so that the
/// paths it prints are the ones the tests name.
const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// Real HTTP servers on 127.0.0.1, running on their own runtime while the test runs the binary.
struct Servers {
    runtime: tokio::runtime::Runtime,
}

impl Servers {
    fn new() -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        Servers { runtime }
    }

    /// A server whose `/api/systemstatus` answers `status` with `body`; returns its base URL.
    fn health(&self, status: StatusCode, body: &'static str) -> String {
        let app = Router::new().route(
            "/api/systemstatus",
            get(move || async move {
                (
                    status,
                    [(axum::http::header::CONTENT_TYPE, "application/json")],
                    body,
                )
            }),
        );
        self.runtime.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            let url = format!("http://{}/", listener.local_addr().expect("address"));
            tokio::spawn(async move {
                let _ = axum::serve(listener, app).await;
            });
            url
        })
    }

    /// A base URL where nothing listens: connections are refused.
    fn refused(&self) -> String {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}/", listener.local_addr().expect("address"));
        drop(listener);
        url
    }
}

const HEALTHY: &str = r#"{"status":"Healthy","version":"1.0.0"}"#;

/// A cluster with active checks on `/api/systemstatus` (threshold 2, as YARP's default) and
/// these `(id, address, priority)` destinations.
fn probed_cluster(id: &str, destinations: &[(&str, &str, u32)]) -> String {
    format!(
        r#""{id}": {{
            "HealthCheck": {{ "Active": {{ "Enabled": true, "Interval": "00:00:05",
                                           "Timeout": "00:00:05", "Path": "/api/systemstatus" }} }},
            "Destinations": {{ {} }} }}"#,
        destinations_json(destinations)
    )
}

fn destinations_json(destinations: &[(&str, &str, u32)]) -> String {
    destinations
        .iter()
        .map(|(id, address, tier)| {
            format!(r#""{id}": {{ "Address": "{address}", "Priority": {tier} }}"#)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Writes `{"ReverseProxy": {"Clusters": {<clusters>}}}` to a file of its own.
fn config_file(name: &str, clusters: &[String]) -> PathBuf {
    let text = format!(
        r#"{{ "ReverseProxy": {{ "Clusters": {{ {} }} }} }}"#,
        clusters.join(", ")
    );
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("cli_watch_{name}.json"));
    std::fs::write(&path, text).expect("write config");
    path
}

fn healthpick(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_healthpick"))
        .args(args)
        .current_dir(ROOT)
        .output()
        .expect("run healthpick")
}

fn watch_once(path: &Path) -> (i32, String) {
    let out = healthpick(&["watch", "--once", path.to_str().expect("UTF-8 path")]);
    let text = String::from_utf8(out.stdout).expect("stdout is UTF-8");
    let code = out.status.code().expect("exited normally");
    (code, text)
}

/// The table row of `destination` (a line whose second column is its id).
fn row<'a>(table: &'a str, destination: &str) -> &'a str {
    table
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(destination))
        .unwrap_or_else(|| panic!("no row for {destination} in:\n{table}"))
}

/// The `ACTIVE` column of a row.
fn active(row: &str) -> &str {
    row.split_whitespace().nth(3).expect("an ACTIVE column")
}

// ---------------------------------------------------------------------------------------------
// --once

#[test]
fn once_exits_0_and_lists_every_destination_healthy() {
    let servers = Servers::new();
    let local = servers.health(StatusCode::OK, HEALTHY);
    let plain = servers.health(StatusCode::OK, "ok"); // a 2xx without a payload is a success
    let remote = servers.health(StatusCode::OK, HEALTHY);
    let path = config_file(
        "healthy",
        &[probed_cluster(
            "orders",
            &[
                ("local-1", &local, 0),
                ("local-2", &plain, 0),
                ("remote-1", &remote, 1),
            ],
        )],
    );
    let (code, text) = watch_once(&path);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.starts_with("CLUSTER  DESTINATION  TIER  ACTIVE"),
        "{text}"
    );
    for id in ["local-1", "local-2", "remote-1"] {
        let row = row(&text, id);
        assert_eq!(active(row), "Healthy", "{row}");
        assert!(row.starts_with("orders "), "{row}");
    }
    assert!(
        row(&text, "local-1").contains(" Healthy   yes (best)"),
        "{text}"
    );
    assert!(
        row(&text, "local-2").contains(" -         yes (best)"),
        "{text}"
    );
    assert!(
        row(&text, "remote-1").contains(" yes "),
        "tier 1 ranks lower: {text}"
    );
    assert!(
        text.contains("cluster `orders`: available: 2 destinations Healthy"),
        "{text}"
    );
}

#[test]
fn once_exits_1_when_the_only_destination_refuses_connections() {
    let servers = Servers::new();
    let path = config_file(
        "refused",
        &[probed_cluster(
            "payments",
            &[("only", &servers.refused(), 0)],
        )],
    );
    let (code, text) = watch_once(&path);
    assert_eq!(code, 1, "{text}");
    let row = row(&text, "only");
    assert_eq!(active(row), "Unhealthy", "one round decides: {row}");
    assert!(
        row.contains("connect"),
        "the reason names the failure: {row}"
    );
    assert!(
        text.contains("cluster `payments`: NO AVAILABLE DESTINATION"),
        "{text}"
    );
}

#[test]
fn once_exits_1_when_the_only_destination_answers_503() {
    let servers = Servers::new();
    let down = servers.health(StatusCode::SERVICE_UNAVAILABLE, r#"{"status":"Unhealthy"}"#);
    let path = config_file("503", &[probed_cluster("payments", &[("only", &down, 0)])]);
    let (code, text) = watch_once(&path);
    assert_eq!(code, 1, "{text}");
    let row = row(&text, "only");
    assert_eq!(active(row), "Unhealthy", "{row}");
    assert!(row.contains("HTTP 503"), "{row}");
}

#[test]
fn once_needs_every_cluster_to_have_a_destination() {
    let servers = Servers::new();
    let up = servers.health(StatusCode::OK, HEALTHY);
    let path = config_file(
        "one_cluster_down",
        &[
            probed_cluster("orders", &[("up", &up, 0)]),
            probed_cluster("payments", &[("down", &servers.refused(), 0)]),
        ],
    );
    let (code, text) = watch_once(&path);
    assert_eq!(code, 1, "{text}");
    assert_eq!(active(row(&text, "up")), "Healthy");
    assert!(text.contains("cluster `orders`: available"), "{text}");
    assert!(text.contains("cluster `payments`: NO AVAILABLE"), "{text}");
}

#[test]
fn once_does_not_probe_clusters_without_active_checks_and_counts_them_available() {
    let servers = Servers::new();
    let up = servers.health(StatusCode::OK, HEALTHY);
    let unchecked = format!(
        r#""static": {{ "Destinations": {{ {} }} }}"#,
        destinations_json(&[("s1", &servers.refused(), 0)])
    );
    let path = config_file(
        "unchecked",
        &[probed_cluster("orders", &[("up", &up, 0)]), unchecked],
    );
    let (code, text) = watch_once(&path);
    assert_eq!(code, 0, "{text}");
    let row = row(&text, "s1");
    assert_eq!(active(row), "off", "{row}");
    assert!(row.contains("yes (best)"), "{row}");
    assert!(text.contains("cluster `static`: not probed"), "{text}");
}

// ---------------------------------------------------------------------------------------------
// bad input and help

#[test]
fn invalid_config_exits_1_with_the_problems() {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli_watch_invalid.json");
    std::fs::write(
        &path,
        r#"{"Clusters": {"c": {"LoadBalancingPolicy": "Nope", "Destinations": {"d": {"Address": "localhost:1"}}}}}"#,
    )
    .unwrap();
    let (code, text) = watch_once(&path);
    assert_eq!(code, 1);
    assert!(
        text.contains("configuration is INVALID (2 errors)"),
        "{text}"
    );
    assert!(text.contains("error: "), "{text}");
    assert!(text.contains("Nope"), "{text}");
}

#[test]
fn unreadable_file_exits_1_and_missing_file_argument_exits_2() {
    let out = healthpick(&["watch", "--once", "no/such/appsettings.json"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot read `no/such/appsettings.json`"),
        "{err}"
    );

    let out = healthpick(&["watch"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("<FILE>"));
    let out = healthpick(&["watch", "--bogus", "x.json"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn help_explains_the_table_exit_statuses_and_shows_examples() {
    let out = healthpick(&["watch", "--help"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    for needle in [
        "<FILE>",
        "--once",
        "Clusters without active checks are not probed",
        "timestamped",
        "Exit status:",
        "2  usage error",
        "Examples:",
        "healthpick watch appsettings.json",
        "healthpick watch --once appsettings.json",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    let main = String::from_utf8(healthpick(&["--help"]).stdout).unwrap();
    assert!(
        main.contains("healthpick watch --once appsettings.json"),
        "{main}"
    );
}

// ---------------------------------------------------------------------------------------------
// live mode on a pipe

#[test]
fn live_mode_on_a_pipe_prints_timestamped_changes_and_tables() {
    live_on_a_pipe_until("INT", "Ctrl-C");
}

#[test]
fn sigterm_ends_the_live_mode_with_a_final_table_as_ctrl_c_does() {
    live_on_a_pipe_until("TERM", "SIGTERM");
}

/// Runs the live mode on a pipe until its one destination shows Healthy, then sends `signal`
/// and checks the end: exit 0, a `stopped (why)` line and a final table.
fn live_on_a_pipe_until(signal: &str, why: &str) {
    let servers = Servers::new();
    let up = servers.health(StatusCode::OK, HEALTHY);
    let path = config_file(
        &format!("live_{signal}"),
        &[probed_cluster("orders", &[("up", &up, 0)])],
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_healthpick"))
        .args(["watch", path.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run healthpick");
    let stdout = child.stdout.take().unwrap();
    let (lines, received) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    // Read until the change and a table showing it arrived; the deadline only guards a hang.
    let mut seen = Vec::new();
    let mut done = false;
    while !done {
        match received.recv_timeout(Duration::from_secs(20)) {
            Ok(line) => {
                done = line.contains("orders   up ") && line.contains(" Healthy ");
                seen.push(line);
            }
            Err(_) => break,
        }
    }
    // Ctrl-C (SIGINT) or SIGTERM ends the watch cleanly: exit 0 after a final table.
    let before = seen.len();
    let interrupted = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .is_ok_and(|s| s.success());
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let exit = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            _ if std::time::Instant::now() > deadline => break None,
            _ => std::thread::sleep(Duration::from_millis(10)),
        }
    };
    if exit.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    while let Ok(line) = received.recv_timeout(Duration::from_secs(2)) {
        seen.push(line);
    }
    let text = seen.join("\n");
    assert!(done, "no table row showing `up` Healthy in:\n{text}");
    assert!(interrupted, "could not send SIG{signal}");
    assert_eq!(
        exit.and_then(|s| s.code()),
        Some(0),
        "{why} exits 0:\n{text}"
    );
    let end = &seen[before..];
    let stopped = end
        .iter()
        .position(|l| l.ends_with(&format!("s] stopped ({why})")))
        .unwrap_or_else(|| panic!("no `stopped ({why})` line after the signal:\n{text}"));
    assert!(
        end[stopped..].iter().any(|l| l.contains("orders   up ")),
        "a final table after {why}:\n{text}"
    );
    assert!(
        seen.iter().all(|l| l.starts_with('[') && l.contains("s] ")),
        "every line is timestamped:\n{text}"
    );
    assert!(!text.contains('\x1b'), "no escapes on a pipe:\n{text}");
    assert!(
        text.contains("orders/up: active Unknown -> Healthy (probe HTTP 200 (Healthy)"),
        "{text}"
    );
    // The reported part was set by the same probe: no second line saying so.
    assert!(
        !text.contains("orders/up: reported"),
        "the reported part's echo of the active change is not printed:\n{text}"
    );
}
