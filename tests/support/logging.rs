//! What healthpick logs, seen by the tests: a global subscriber that shows it in a failing
//! test's output ([`init_tracing`]), a layer that keeps every event ([`Captured`]) and a writer
//! that keeps what a `fmt` subscriber writes ([`CapturedOutput`]).
//!
//! A test that captures events through a subscriber of its own is alone in its binary unless
//! it runs on one thread with a thread-local subscriber: tracing caches per-callsite interest
//! process-wide.

#![allow(dead_code)] // each test binary uses part of it

use std::sync::{Arc, Mutex};

/// Installs a global tracing subscriber that writes to the test output (shown for failing
/// tests): healthpick at debug (every failed attempt), everything else at info, so the
/// connection pool's per-request debug lines do not flood the output. The first call in a
/// process installs it; later calls do nothing.
pub fn init_tracing() {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = tracing_subscriber::filter::Targets::new()
        .with_target("healthpick", tracing::Level::DEBUG)
        .with_default(tracing::Level::INFO);
    let _ = tracing_subscriber::registry()
        .with(tracing_subscriber::fmt::layer().with_test_writer())
        .with(filter)
        .try_init();
}

/// One captured event: level, target, and its fields as (name, debug text).
pub type Record = (tracing::Level, String, Vec<(String, String)>);

/// A layer that keeps every event it sees (level, target, fields as text).
#[derive(Clone, Default)]
pub struct Captured(pub Arc<Mutex<Vec<Record>>>);

struct Visitor<'a>(&'a mut Vec<(String, String)>);

impl tracing::field::Visit for Visitor<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0
            .push((field.name().to_string(), format!("{value:?}")));
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Captured {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        let mut fields = Vec::new();
        event.record(&mut Visitor(&mut fields));
        self.0.lock().unwrap().push((
            *event.metadata().level(),
            event.metadata().target().to_string(),
            fields,
        ));
    }
}

/// Collects what a `tracing` fmt subscriber writes (give it `move || output.clone()`).
#[derive(Clone, Default)]
pub struct CapturedOutput(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for CapturedOutput {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl CapturedOutput {
    /// The lines written so far that contain `needle`.
    pub fn lines(&self, needle: &str) -> Vec<String> {
        String::from_utf8_lossy(&self.0.lock().unwrap())
            .lines()
            .filter(|l| l.contains(needle))
            .map(str::to_string)
            .collect()
    }
}
