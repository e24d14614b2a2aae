//! Recording a live engine's inputs as a scenario, for offline replay with another config.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{json, Value};

use super::run::outcome_json;
use crate::health::outcome::RequestOutcome;
use crate::health::probe_result::ProbeResult;
use crate::observer::Observer;

/// An [`Observer`] that writes every probe round and request outcome the engine takes, with times
/// relative to the engine's start, as a scenario document `healthpick simulate` replays.
///
/// Install it with [`EngineBuilder::observer`](crate::EngineBuilder::observer); call
/// [`finish`](Self::finish) (or drop the last reference) to close the document. Recording costs a
/// lock and a buffered write per outcome: it is for incidents and tests, not for every service
/// all the time.
///
/// ```
/// use std::sync::Arc;
/// use healthpick::simulate::{Recorder, Scenario, Simulation};
/// use healthpick::{Engine, ManualClock, RequestOutcome};
///
/// let config = r#"{"Clusters": {"c": {"HealthCheck": {"Passive": {"Enabled": true}},
///     "Destinations": {"d": {"Address": "http://127.0.0.1:1/"}}}}}"#;
/// let file = std::env::temp_dir().join("healthpick-recorder-doctest.json");
/// let recorder = Arc::new(Recorder::to_file(&file)?.with_config(config));
/// let engine = Engine::builder()
///     .clock(Arc::new(ManualClock::new()))
///     .observer(recorder.clone())
///     .build();
/// engine.load_json(config)?;
/// engine.pick_endpoint("c")?.report(RequestOutcome::TransportFailure);
/// recorder.finish()?;
///
/// let replay = Scenario::from_json(&std::fs::read_to_string(&file)?)?;
/// assert_eq!(replay.event_count(), 1);
/// let lines = Simulation::new(replay).run()?;
/// assert!(lines.iter().any(|l| l.contains(r#""type":"evaluation""#)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Recorder {
    state: Mutex<State>,
}

struct State {
    out: Option<BufWriter<Box<dyn Write + Send>>>,
    config: Option<String>,
    start: Duration,
    header_written: bool,
    events: usize,
    error: Option<io::Error>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state.lock();
        f.debug_struct("Recorder")
            .field("events", &state.events)
            .field("finished", &state.out.is_none())
            .finish_non_exhaustive()
    }
}

impl Recorder {
    /// Records into `writer` (buffered).
    pub fn new(writer: impl Write + Send + 'static) -> Self {
        Recorder {
            state: Mutex::new(State {
                out: Some(BufWriter::new(Box::new(writer))),
                config: None,
                start: Duration::ZERO,
                header_written: false,
                events: 0,
                error: None,
            }),
        }
    }

    /// Records into a new file at `path` (replacing one that exists).
    ///
    /// # Errors
    /// When the file cannot be created.
    pub fn to_file(path: impl AsRef<Path>) -> io::Result<Self> {
        Ok(Recorder::new(File::create(path)?))
    }

    /// Embeds `config` (a YARP JSON document, written verbatim) as the scenario's `config`, so
    /// the recording replays on its own. Without it, replay needs a config given separately
    /// (`healthpick simulate --config FILE`).
    pub fn with_config(self, config: &str) -> Self {
        let config = config.strip_prefix('\u{feff}').unwrap_or(config).trim();
        self.state.lock().config = Some(config.to_string());
        self
    }

    /// How many events were recorded so far.
    pub fn event_count(&self) -> usize {
        self.state.lock().events
    }

    /// Closes the document and flushes it. Inputs after this are not recorded. Calling it again
    /// does nothing.
    ///
    /// # Errors
    /// The first write error met while recording, or one closing the document.
    pub fn finish(&self) -> io::Result<()> {
        let mut state = self.state.lock();
        state.write_header();
        let Some(mut out) = state.out.take() else {
            return Ok(());
        };
        if let Some(e) = state.error.take() {
            return Err(e);
        }
        let close = if state.events == 0 {
            "]\n}\n"
        } else {
            "\n  ]\n}\n"
        };
        out.write_all(close.as_bytes())?;
        out.flush()
    }
}

impl State {
    fn write_header(&mut self) {
        if self.header_written {
            return;
        }
        self.header_written = true;
        let config = self.config.as_deref().unwrap_or("null");
        let header = format!(
            "{{\n  \"description\": \"recorded by healthpick\",\n  \"config\": {config},\n  \"events\": ["
        );
        self.write(header.as_bytes());
    }

    fn write(&mut self, bytes: &[u8]) {
        if let Some(out) = &mut self.out {
            if let Err(e) = out.write_all(bytes) {
                self.error.get_or_insert(e);
            }
        }
    }

    /// Writes one event: `body` is the event's JSON text after `"at"` (e.g. `"probe":{...}`).
    fn record(&mut self, at: Duration, body: &str) {
        if self.out.is_none() {
            return;
        }
        self.write_header();
        let at = at.saturating_sub(self.start);
        // Microseconds are plenty for replay and keep the file readable.
        let seconds = at.as_micros() as f64 / 1e6;
        let separator = if self.events == 0 {
            "\n    "
        } else {
            ",\n    "
        };
        let text = format!("{separator}{{\"at\":{},{body}}}", json!(seconds));
        self.write(text.as_bytes());
        self.events += 1;
    }
}

impl Observer for Recorder {
    fn attached(&self, now: Duration) {
        self.state.lock().start = now;
    }

    fn probe_round(&self, at: Duration, cluster: &str, results: &[ProbeResult]) {
        // Written by hand, not through a map: the order of a round's results is the order the
        // active policy sees them in, and replay must keep it.
        let results: Vec<String> = results
            .iter()
            .map(|r| format!("{}:{}", json!(r.destination), probe_json(r)))
            .collect();
        let body = format!(
            "\"probe\":{{\"cluster\":{},\"results\":{{{}}}}}",
            json!(cluster),
            results.join(",")
        );
        self.state.lock().record(at, &body);
    }

    fn request_completed(
        &self,
        at: Duration,
        cluster: &str,
        destination: &str,
        outcome: RequestOutcome,
    ) {
        let body = format!(
            "\"request\":{}",
            json!({"cluster": cluster, "destination": destination, "outcome": outcome_json(outcome)})
        );
        self.state.lock().record(at, &body);
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

/// A probe result as the scenario spells it.
fn probe_json(r: &ProbeResult) -> Value {
    match (&r.error, r.status, r.reported) {
        (Some(e), _, _) => json!({ "error": e }),
        (None, Some(status), Some(payload)) => {
            json!({"status": status, "payload": payload.as_str()})
        }
        (None, Some(status), None) => json!(status),
        (None, None, _) => json!({"error": "no response"}),
    }
}
