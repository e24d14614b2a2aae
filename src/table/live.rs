//! Keeping the table on screen while things change: redrawn in place on a terminal, timestamped
//! lines elsewhere.

use std::collections::VecDeque;
use std::fmt;
use std::io::{self, IsTerminal, Write};
use std::sync::Arc;
use std::time::Duration;

use super::describe::describe_event;
use super::render::StatusTable;
use crate::clock::{Clock, SystemClock};
use crate::engine::status::EngineStatus;
use crate::events::HealthEvent;

/// What defines "the table changed" in [`OutputMode::Lines`]: every column except the counters
/// (in flight, served) and the load signals (latency, utilization, the slow-start share), which
/// move with every request; whether a destination warms up and whether a cluster spills do
/// count.
fn health_key(status: &EngineStatus) -> String {
    let mut key = String::new();
    for c in &status.clusters {
        let spilling = c.spill.as_ref().map(|s| s.share > 0.0);
        key.push_str(&format!(
            "{}|{}|{:?}|{spilling:?}\n",
            c.id, c.panic, c.best_class
        ));
        for d in &c.destinations {
            key.push_str(&format!(
                "{}|{}|{}|{:?}|{:?}|{:?}|{:?}|{}|{}|{:?}|{}\n",
                d.id,
                d.source,
                d.tier,
                d.active,
                d.passive,
                d.reported,
                d.discovery,
                d.available,
                d.in_best_group,
                d.last_reason,
                d.slow_start.is_some()
            ));
        }
        for s in &c.sources {
            key.push_str(&format!(
                "{}|{}|{:?}|{}\n",
                s.name,
                s.endpoints,
                s.stale_since,
                s.held.is_some()
            ));
        }
    }
    key
}

/// How a [`LiveTable`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputMode {
    /// Redraw the table and the recent changes in place (a terminal that understands ANSI
    /// escapes).
    Redraw,
    /// Append timestamped lines only (a pipe, a file, a CI log).
    Lines,
}

impl OutputMode {
    /// [`Redraw`](Self::Redraw) when `stream` is a terminal and `TERM` is not `dumb`,
    /// [`Lines`](Self::Lines) otherwise.
    pub fn detect(stream: &impl IsTerminal) -> Self {
        let dumb = std::env::var_os("TERM").is_some_and(|t| t == "dumb");
        if stream.is_terminal() && !dumb {
            OutputMode::Redraw
        } else {
            OutputMode::Lines
        }
    }
}

/// A [`StatusTable`] kept up to date on an output: redrawn in place on a terminal, or printed as
/// timestamped lines elsewhere (see [`OutputMode`]).
///
/// Call [`update`](Self::update) with a fresh status whenever convenient (a timer of a few
/// hundred milliseconds is plenty: in `Redraw` mode an unchanged frame is not written again, in
/// `Lines` mode the table is printed only when its health columns changed or
/// [`reprint_every`](Self::reprint_every) elapsed), [`event`](Self::event) for each change event
/// and [`note`](Self::note) for any other line worth a timestamp, then [`finish`](Self::finish)
/// once.
///
/// Timestamps (`[  3.2s]`) come from the table's [`clock`](Self::clock); give it the engine's
/// clock (`engine.clock().clone()`) so they agree with the engine's event times.
///
/// ```
/// use healthpick::table::{LiveTable, OutputMode, StatusTable};
/// use healthpick::{Engine, ManualClock};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// let clock = Arc::new(ManualClock::new());
/// let engine = Engine::builder().clock(clock.clone()).build();
/// engine.load_json(r#"{"Clusters": {"c": {"Destinations": {"d1": {"Address": "http://127.0.0.1:1/"}}}}}"#)?;
///
/// let mut live = LiveTable::new(Vec::new(), OutputMode::Lines, StatusTable::new()).clock(clock.clone());
/// clock.advance(Duration::from_millis(3200));
/// live.note("starting")?;
/// live.update(&engine.status())?;
/// let out = String::from_utf8(live.into_inner())?;
/// assert!(out.starts_with("[  3.2s] starting\n[  3.2s] CLUSTER  DESTINATION"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct LiveTable<W: Write> {
    out: W,
    mode: OutputMode,
    table: StatusTable,
    clock: Arc<dyn Clock>,
    /// Redraw: how many lines the last frame took, the last frame, the table's last rows and
    /// the recent change lines.
    drawn: usize,
    last_frame: String,
    rows: Vec<String>,
    recent: VecDeque<String>,
    recent_lines: usize,
    /// Lines: the last printed table's health key and when it was printed.
    printed_key: Option<String>,
    printed_at: Option<Duration>,
    reprint_every: Option<Duration>,
}

impl<W: Write> fmt::Debug for LiveTable<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LiveTable")
            .field("mode", &self.mode)
            .field("table", &self.table)
            .field("recent_lines", &self.recent_lines)
            .field("reprint_every", &self.reprint_every)
            .finish_non_exhaustive()
    }
}

impl LiveTable<io::Stdout> {
    /// A live table on standard output, in the mode [`OutputMode::detect`] picks for it.
    pub fn stdout(table: StatusTable) -> Self {
        let out = io::stdout();
        let mode = OutputMode::detect(&out);
        LiveTable::new(out, mode, table)
    }
}

impl<W: Write> LiveTable<W> {
    /// A live table writing `table` to `out` in `mode`. Defaults: timestamps from a
    /// [`SystemClock`] started now, 8 recent change lines under the table in `Redraw` mode, an
    /// unchanged table printed again every 10 s in `Lines` mode.
    pub fn new(out: W, mode: OutputMode, table: StatusTable) -> Self {
        LiveTable {
            out,
            mode,
            table,
            clock: Arc::new(SystemClock::new()),
            drawn: 0,
            last_frame: String::new(),
            rows: Vec::new(),
            recent: VecDeque::new(),
            recent_lines: 8,
            printed_key: None,
            printed_at: None,
            reprint_every: Some(Duration::from_secs(10)),
        }
    }

    /// Takes timestamps from `clock`. Default: a [`SystemClock`] started when the table was made.
    #[must_use]
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// In `Redraw` mode, how many of the most recent change lines stay under the table.
    /// Default 8.
    #[must_use]
    pub fn recent_lines(mut self, lines: usize) -> Self {
        self.recent_lines = lines;
        self
    }

    /// In `Lines` mode, print the table again after `every` even if its health columns did not
    /// change (so counters show progress); `None` prints it only on change. Default 10 s.
    #[must_use]
    pub fn reprint_every(mut self, every: Option<Duration>) -> Self {
        self.reprint_every = every;
        self
    }

    /// The mode in use.
    pub fn mode(&self) -> OutputMode {
        self.mode
    }

    /// The output.
    pub fn get_ref(&self) -> &W {
        &self.out
    }

    /// Gives the output back.
    pub fn into_inner(self) -> W {
        self.out
    }

    /// `[  3.2s] `: the clock's time, as every line of `Lines` mode starts.
    pub fn timestamp(&self) -> String {
        format!("[{:5.1}s] ", self.clock.now().as_secs_f64())
    }

    /// Records a change event: one timestamped line (see [`describe_event`]).
    ///
    /// # Errors
    /// When writing to the output fails.
    pub fn event(&mut self, event: &HealthEvent) -> io::Result<()> {
        self.note(&describe_event(event))
    }

    /// Records any line worth a timestamp (a fault the demo injects, a configuration problem).
    /// In `Lines` mode it is written at once; in `Redraw` mode it joins the recent lines under the
    /// table, which is redrawn.
    ///
    /// # Errors
    /// When writing to the output fails.
    pub fn note(&mut self, text: &str) -> io::Result<()> {
        let line = format!("{}{text}", self.timestamp());
        match self.mode {
            OutputMode::Lines => {
                writeln!(self.out, "{line}")?;
                self.out.flush()
            }
            OutputMode::Redraw => {
                self.recent.push_back(line);
                while self.recent.len() > self.recent_lines {
                    self.recent.pop_front();
                }
                self.redraw()
            }
        }
    }

    /// Shows `status`: redraws the frame in `Redraw` mode (if it changed); in `Lines` mode prints
    /// the table when its health columns changed since it was last printed, or when
    /// [`reprint_every`](Self::reprint_every) elapsed.
    ///
    /// # Errors
    /// When writing to the output fails.
    pub fn update(&mut self, status: &EngineStatus) -> io::Result<()> {
        match self.mode {
            OutputMode::Redraw => {
                self.rows = self.table.lines(status);
                self.redraw()
            }
            OutputMode::Lines => {
                let key = health_key(status);
                let now = self.clock.now();
                let due = match (self.reprint_every, self.printed_at) {
                    (Some(every), Some(at)) => now.saturating_sub(at) >= every,
                    _ => false,
                };
                if self.printed_key.as_ref() != Some(&key) || due {
                    self.print_table(status)?;
                    self.printed_key = Some(key);
                    self.printed_at = Some(now);
                }
                Ok(())
            }
        }
    }

    /// Shows `status` a last time: in `Redraw` mode the final frame stays on screen and the
    /// cursor ends below it; in `Lines` mode the table is printed whether or not it changed.
    ///
    /// # Errors
    /// When writing to the output fails.
    pub fn finish(&mut self, status: &EngineStatus) -> io::Result<()> {
        match self.mode {
            OutputMode::Redraw => {
                self.rows = self.table.lines(status);
                self.redraw()?;
                // Later output starts below the frame, which is no longer ours to redraw.
                self.drawn = 0;
                self.last_frame.clear();
                Ok(())
            }
            OutputMode::Lines => {
                self.print_table(status)?;
                self.printed_key = Some(health_key(status));
                self.printed_at = Some(self.clock.now());
                Ok(())
            }
        }
    }

    fn print_table(&mut self, status: &EngineStatus) -> io::Result<()> {
        let stamp = self.timestamp();
        let mut text = String::new();
        for row in self.table.lines(status) {
            text.push_str(&stamp);
            text.push_str(&row);
            text.push('\n');
        }
        self.out.write_all(text.as_bytes())?;
        self.out.flush()
    }

    /// Writes the frame (table, a blank line, recent changes) over the previous one.
    fn redraw(&mut self) -> io::Result<()> {
        let mut lines: Vec<&str> = self.rows.iter().map(String::as_str).collect();
        if !self.recent.is_empty() {
            if !lines.is_empty() {
                lines.push("");
            }
            lines.extend(self.recent.iter().map(String::as_str));
        }
        let mut frame = String::new();
        for line in &lines {
            frame.push_str(line);
            frame.push('\n');
        }
        if frame == self.last_frame {
            return Ok(());
        }
        let mut bytes = String::with_capacity(frame.len() + 32);
        // Line wrap off while drawing: a row wider than the terminal is cut, not wrapped, so
        // every row takes exactly one screen line and the cursor-up count stays right.
        bytes.push_str("\x1b[?7l");
        if self.drawn > 0 {
            bytes.push_str(&format!("\x1b[{}A\r", self.drawn));
        }
        for line in &lines {
            bytes.push_str(line);
            bytes.push_str("\x1b[K\n");
        }
        bytes.push_str("\x1b[J\x1b[?7h");
        self.out.write_all(bytes.as_bytes())?;
        self.out.flush()?;
        self.drawn = lines.len();
        self.last_frame = frame;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::status::{ClusterStatus, DestinationStatus, SpillStatus};
    use crate::events::{HealthEventKind, PartValue};
    use crate::health::reason::Reason;
    use crate::health::state::{HealthClass, HealthPart, HealthState, ReportedHealth};

    fn destination(id: &str, tier: u32) -> DestinationStatus {
        DestinationStatus {
            id: id.to_string(),
            address: format!("http://{id}/"),
            source: "config".to_string(),
            tier,
            active: HealthState::Healthy,
            passive: HealthState::Unknown,
            reported: Some(ReportedHealth::Healthy),
            available: true,
            in_best_group: false,
            in_flight: 0,
            latency: None,
            utilization: None,
            slow_start: None,
            last_change: None,
            last_reason: None,
            last_probe: None,
            last_probe_result: None,
            last_error: None,
            discovery: crate::health::state::DiscoveryHealth::Unknown,
            last_seen: None,
            locality: "-".to_string(),
            last_probe_succeeded: None,
        }
    }

    fn status() -> EngineStatus {
        let mut local = destination("local-1", 0);
        local.in_best_group = true;
        local.in_flight = 12;
        local.last_reason = Some("active Unknown -> Healthy: probe HTTP 200".to_string());
        let mut degraded = destination("local-2", 0);
        degraded.reported = Some(ReportedHealth::Degraded);
        let mut remote = destination("remote-1", 1);
        remote.active = HealthState::Unhealthy;
        remote.reported = None;
        remote.available = false;
        EngineStatus {
            at: Duration::from_secs(3),
            config: crate::engine::status::ConfigStatus::default(),
            clusters: vec![ClusterStatus {
                id: "orders".to_string(),
                load_balancing_policy: "PowerOfTwoChoices".to_string(),
                available_destinations_policy: "HealthyOrPanic".to_string(),
                active_enabled: true,
                passive_enabled: false,
                panic: false,
                best_class: Some(HealthClass::Healthy),
                sources: Vec::new(),
                destinations: vec![local, degraded, remote],
                spill: None,
            }],
        }
    }

    #[test]
    fn renders_a_known_status() {
        let text = StatusTable::new().render(&status());
        let expected = "\
CLUSTER  DESTINATION  TIER  ACTIVE     PASSIVE  REPORTED  AVAILABLE   IN FLIGHT  LAST CHANGE
orders   local-1         0  Healthy    off      Healthy   yes (best)         12  active Unknown -> Healthy: probe HTTP 200
orders   local-2         0  Healthy    off      Degraded  yes                 0  -
orders   remote-1        1  Unhealthy  off      -         no                  0  -
";
        assert_eq!(text, expected);
    }

    #[test]
    fn served_column_and_widths_follow_the_content() {
        let mut s = status();
        s.clusters[0].destinations[0].id = "a-much-longer-destination-id".to_string();
        s.clusters[0].destinations[2].tier = 12345;
        let table = StatusTable::new()
            .served(|cluster, d| (cluster == "orders" && d != "local-2").then_some(1500))
            .max_reason_width(10);
        let expected = "\
CLUSTER  DESTINATION                    TIER  ACTIVE     PASSIVE  REPORTED  AVAILABLE   IN FLIGHT  SERVED  LAST CHANGE
orders   a-much-longer-destination-id      0  Healthy    off      Healthy   yes (best)         12    1500  active ...
orders   local-2                           0  Healthy    off      Degraded  yes                 0       -  -
orders   remote-1                      12345  Unhealthy  off      -         no                  0    1500  -
";
        assert_eq!(table.render(&s), expected);
    }

    /// Load columns appear only when some destination has a value, each filled where it has
    /// one; a cluster that may spill gets a line under the rows saying where it stands.
    #[test]
    fn load_signals_and_spill_show_when_present() {
        let mut s = status();
        let c = &mut s.clusters[0];
        c.destinations[0].latency = Some(Duration::from_micros(12_345));
        c.destinations[1].latency = Some(Duration::from_micros(850));
        c.destinations[1].utilization = Some(0.42);
        c.destinations[1].slow_start = Some(0.25);
        c.spill = Some(SpillStatus {
            from_tier: 0,
            to_tier: 1,
            share: 0.35,
            latency_ratio: Some(2.1),
            baseline: Some(Duration::from_millis(12)),
        });
        let expected = "\
CLUSTER  DESTINATION  TIER  ACTIVE     PASSIVE  REPORTED  AVAILABLE   IN FLIGHT  LATENCY  UTIL  SLOW START  LAST CHANGE
orders   local-1         0  Healthy    off      Healthy   yes (best)         12   12.3ms     -           -  active Unknown -> Healthy: probe HTTP 200
orders   local-2         0  Healthy    off      Degraded  yes                 0    850us   42%         25%  -
orders   remote-1        1  Unhealthy  off      -         no                  0        -     -           -  -
spill orders: tier 0 -> tier 1: 35% of picks; tier 0 at 2.10x its unloaded latency (12.0ms)
";
        assert_eq!(StatusTable::new().render(&s), expected);

        // Only latency: only its column; spill not judged yet.
        let c = &mut s.clusters[0];
        c.destinations[1].utilization = None;
        c.destinations[1].slow_start = None;
        c.spill = Some(SpillStatus {
            from_tier: 0,
            to_tier: 1,
            share: 0.0,
            latency_ratio: None,
            baseline: None,
        });
        let lines = StatusTable::new().lines(&s);
        assert!(
            lines[0].contains("IN FLIGHT  LATENCY  LAST CHANGE"),
            "{}",
            lines[0]
        );
        assert_eq!(
            lines[4],
            "spill orders: tier 0 -> tier 1: none; tier 0 not measured yet"
        );
    }

    #[test]
    fn lines_mode_reprints_when_spill_or_warming_starts_not_when_signals_move() {
        let (live, clock) = live(OutputMode::Lines);
        let mut live = live.reprint_every(None);
        let mut s = status();
        live.update(&s).unwrap();
        // Latencies move with every request: no reprint.
        s.clusters[0].destinations[0].latency = Some(Duration::from_millis(3));
        live.update(&s).unwrap();
        s.clusters[0].destinations[0].latency = Some(Duration::from_millis(4));
        live.update(&s).unwrap();
        clock.advance(Duration::from_secs(1));
        // A destination starts warming: reprinted; its factor moving is not.
        s.clusters[0].destinations[1].slow_start = Some(0.1);
        live.update(&s).unwrap();
        s.clusters[0].destinations[1].slow_start = Some(0.2);
        live.update(&s).unwrap();
        // Spill starts: reprinted; its share moving is not.
        let spill = |share| SpillStatus {
            from_tier: 0,
            to_tier: 1,
            share,
            latency_ratio: Some(1.8),
            baseline: Some(Duration::from_millis(10)),
        };
        s.clusters[0].spill = Some(spill(0.0));
        live.update(&s).unwrap();
        s.clusters[0].spill = Some(spill(0.3));
        live.update(&s).unwrap();
        s.clusters[0].spill = Some(spill(0.4));
        live.update(&s).unwrap();
        let out = String::from_utf8(live.into_inner()).unwrap();
        let tables = out.lines().filter(|l| l.contains("CLUSTER")).count();
        assert_eq!(tables, 4, "{out}");
    }

    #[test]
    fn panic_mode_and_disabled_checks_are_spelled_out() {
        let mut s = status();
        let c = &mut s.clusters[0];
        c.panic = true;
        c.active_enabled = false;
        c.passive_enabled = true;
        let lines = StatusTable::new().lines(&s);
        assert!(
            lines[1].contains("off     Unknown  Healthy   panic (best)"),
            "{}",
            lines[1]
        );
        assert!(lines[2].contains("panic "), "{}", lines[2]);
        assert!(lines.iter().all(|l| !l.ends_with(' ')));
    }

    fn live(mode: OutputMode) -> (LiveTable<Vec<u8>>, Arc<crate::ManualClock>) {
        let clock = Arc::new(crate::ManualClock::new());
        let live = LiveTable::new(Vec::new(), mode, StatusTable::new()).clock(clock.clone());
        (live, clock)
    }

    #[test]
    fn lines_mode_prints_changes_once_and_stamps_every_line() {
        let (mut live, clock) = live(OutputMode::Lines);
        let mut s = status();
        clock.advance(Duration::from_millis(3200));
        live.update(&s).unwrap();
        // Counters move: not a change.
        s.clusters[0].destinations[0].in_flight = 3;
        live.update(&s).unwrap();
        clock.advance(Duration::from_millis(800));
        live.event(&HealthEvent {
            at: Duration::from_secs(4),
            cluster: "orders".into(),
            kind: HealthEventKind::HealthChanged {
                destination: "local-1".into(),
                part: HealthPart::Active,
                from: PartValue::State(HealthState::Healthy),
                to: PartValue::State(HealthState::Unhealthy),
                reason: Reason::Probe {
                    result: "HTTP 503".to_string(),
                    consecutive_failures: 2,
                },
            },
        })
        .unwrap();
        s.clusters[0].destinations[0].active = HealthState::Unhealthy;
        live.update(&s).unwrap();
        let out = String::from_utf8(live.into_inner()).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 4 + 1 + 4, "{out}");
        assert!(
            lines[..4].iter().all(|l| l.starts_with("[  3.2s] ")),
            "{out}"
        );
        assert_eq!(
            lines[4],
            "[  4.0s] orders/local-1: active Healthy -> Unhealthy (probe HTTP 503, 2 consecutive failures)"
        );
        assert!(
            lines[6].starts_with("[  4.0s] orders   local-1         0  Unhealthy"),
            "{out}"
        );
        assert!(!out.contains('\x1b'));
    }

    #[test]
    fn lines_mode_reprints_an_unchanged_table_when_due() {
        let (live, clock) = live(OutputMode::Lines);
        let mut live = live.reprint_every(Some(Duration::from_secs(5)));
        let s = status();
        live.update(&s).unwrap();
        clock.advance(Duration::from_secs(4));
        live.update(&s).unwrap();
        clock.advance(Duration::from_secs(1));
        live.update(&s).unwrap();
        let out = String::from_utf8(live.into_inner()).unwrap();
        assert_eq!(out.lines().count(), 8, "{out}");
        assert!(out.lines().nth(4).unwrap().starts_with("[  5.0s] CLUSTER"));
    }

    #[test]
    fn redraw_mode_moves_up_over_the_previous_frame() {
        let (live, _clock) = live(OutputMode::Redraw);
        let mut live = live.recent_lines(2);
        let mut s = status();
        live.update(&s).unwrap();
        live.update(&s).unwrap(); // unchanged: nothing written
        let first = live.get_ref().len();
        live.note("one").unwrap();
        live.note("two").unwrap();
        live.note("three").unwrap();
        s.clusters[0].destinations[0].in_flight = 7;
        live.update(&s).unwrap();
        let out = String::from_utf8(live.into_inner()).unwrap();
        assert!(out.starts_with("\x1b[?7lCLUSTER"), "{out:?}");
        assert!(
            !out[..first].contains("A\r"),
            "the first frame moves nowhere"
        );
        // Table (4) + blank + the 2 most recent notes = 7 lines to move over.
        assert!(out.ends_with("\x1b[J\x1b[?7h"), "{out:?}");
        let last = out.rsplit("\x1b[?7l").next().unwrap();
        assert!(last.starts_with("\x1b[7A\r"), "{last:?}");
        assert!(
            last.contains("[  0.0s] two\x1b[K\n[  0.0s] three\x1b[K\n"),
            "{last:?}"
        );
        assert!(!last.contains("one"));
        assert_eq!(
            out.matches("\x1b[?7l").count(),
            5,
            "one write per changed frame"
        );
    }
}
