//! A tracing layer that keeps every event it sees (level, target, fields as text), for the tests
//! that assert what healthpick logs. Each such test is alone in its binary: tracing caches
//! per-callsite interest process-wide.

use std::sync::{Arc, Mutex};

/// One captured event: level, target, and its fields as (name, debug text).
pub type Record = (tracing::Level, String, Vec<(String, String)>);

/// The events seen so far.
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
