//! The interactive screen of `healthpick watch` on a terminal: the alternate screen,
//! sized to the terminal and redrawn on resize, coloured by state (unless `NO_COLOR`), problems
//! first, a summary line per cluster and the latest changes below.
//!
//! [`draw`] is a pure function of a [`View`] onto a ratatui frame, tested headless on ratatui's
//! `TestBackend` at several sizes; [`Screen`] drives the real terminal (crossterm) and leaves a
//! plain final table on the normal screen when it ends.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::time::Duration;

use healthpick::table::{format_latency, spill_summary, StatusTable};
use healthpick::{
    ClusterStatus, DestinationStatus, DiscoveryHealth, EngineStatus, HealthState, ReportedHealth,
    SourceStatus,
};
use ratatui::crossterm::event::{Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::{DefaultTerminal, Frame};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

/// How the destinations are ordered, cycled with `s`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SortOrder {
    /// Clusters and destinations with problems first (not available, unhealthy, degraded or
    /// suspect, not yet probed), otherwise in config order.
    ProblemsFirst,
    /// As the configuration lists them.
    Config,
    /// Clusters and destinations by id.
    Name,
}

impl SortOrder {
    fn next(self) -> Self {
        match self {
            SortOrder::ProblemsFirst => SortOrder::Config,
            SortOrder::Config => SortOrder::Name,
            SortOrder::Name => SortOrder::ProblemsFirst,
        }
    }

    fn label(self) -> &'static str {
        match self {
            SortOrder::ProblemsFirst => "unhealthy first",
            SortOrder::Config => "config order",
            SortOrder::Name => "by name",
        }
    }
}

/// How bad a destination looks to an operator, worst (0) first.
fn severity(cluster: &ClusterStatus, d: &DestinationStatus) -> u8 {
    let unhealthy = HealthState::Unhealthy;
    if cluster.panic || !d.available {
        0
    } else if d.active == unhealthy
        || d.passive == unhealthy
        || d.reported == Some(ReportedHealth::Unhealthy)
        || d.discovery == DiscoveryHealth::Unhealthy
    {
        1
    } else if d.reported == Some(ReportedHealth::Degraded)
        || d.discovery == DiscoveryHealth::Draining
        || d.last_probe_succeeded == Some(false)
    {
        2
    } else if cluster.active_enabled && d.active == HealthState::Unknown {
        3
    } else {
        4
    }
}

/// How bad a cluster looks, worst (0) first: in panic or without an available destination, then
/// by its worst destination; a stale source or a held change counts as a degraded destination.
fn cluster_severity(c: &ClusterStatus) -> u8 {
    if c.panic || !c.destinations.iter().any(|d| d.available) {
        return 0;
    }
    let worst = c
        .destinations
        .iter()
        .map(|d| severity(c, d))
        .min()
        .unwrap_or(0);
    let troubled_source = c
        .sources
        .iter()
        .any(|s| s.stale_since.is_some() || s.held.is_some());
    1 + if troubled_source { worst.min(2) } else { worst }
}

/// `status` with its clusters and their destinations in `order` (sorts are stable: ties keep
/// config order).
pub(crate) fn sorted(status: &EngineStatus, order: SortOrder) -> EngineStatus {
    let mut status = status.clone();
    match order {
        SortOrder::Config => {}
        SortOrder::Name => {
            status.clusters.sort_by(|a, b| a.id.cmp(&b.id));
            for c in &mut status.clusters {
                c.destinations.sort_by(|a, b| a.id.cmp(&b.id));
            }
        }
        SortOrder::ProblemsFirst => {
            for c in &mut status.clusters {
                let mut destinations = std::mem::take(&mut c.destinations);
                destinations.sort_by_key(|d| severity(c, d));
                c.destinations = destinations;
            }
            status.clusters.sort_by_key(cluster_severity);
        }
    }
    status
}

/// What the screen shows: the latest status and changes, and the operator's choices.
#[derive(Debug)]
pub(crate) struct View {
    /// The watched file, as given.
    pub file: String,
    pub status: EngineStatus,
    /// Timestamped change lines, oldest first.
    pub recent: VecDeque<String>,
    pub sort: SortOrder,
    pub colour: bool,
    /// Rows of the table scrolled past.
    pub scroll: usize,
}

/// Change lines kept for the screen (the bottom of the screen shows as many as fit).
const RECENT_KEPT: usize = 50;

impl View {
    pub(crate) fn new(file: String, status: EngineStatus, colour: bool) -> Self {
        View {
            file,
            status,
            recent: VecDeque::new(),
            sort: SortOrder::ProblemsFirst,
            colour,
            scroll: 0,
        }
    }

    pub(crate) fn push_recent(&mut self, line: String) {
        self.recent.push_back(line);
        while self.recent.len() > RECENT_KEPT {
            self.recent.pop_front();
        }
    }

    /// A style, or none at all without colour.
    fn paint(&self, style: Style) -> Style {
        if self.colour {
            style
        } else {
            // NO_COLOR: no colours, but bold and reverse still mark headings.
            Style::default().add_modifier(style.add_modifier)
        }
    }

    /// Applies a key; returns why the screen ends, when it does.
    pub(crate) fn key(&mut self, key: KeyEvent) -> Option<&'static str> {
        if key.kind != KeyEventKind::Press {
            return None;
        }
        match key.code {
            // Raw mode: Ctrl-C is a key, not SIGINT.
            KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                return Some("Ctrl-C");
            }
            KeyCode::Char('q') | KeyCode::Esc => return Some("quit"),
            KeyCode::Char('s') => {
                self.sort = self.sort.next();
                self.scroll = 0;
            }
            KeyCode::Down | KeyCode::Char('j') => self.scroll = self.scroll.saturating_add(1),
            KeyCode::Up | KeyCode::Char('k') => self.scroll = self.scroll.saturating_sub(1),
            KeyCode::PageDown | KeyCode::Char(' ') => {
                self.scroll = self.scroll.saturating_add(PAGE);
            }
            KeyCode::PageUp => self.scroll = self.scroll.saturating_sub(PAGE),
            KeyCode::Home | KeyCode::Char('g') => self.scroll = 0,
            _ => {}
        }
        None
    }
}

const PAGE: usize = 10;

// ---------------------------------------------------------------------------------------------
// Styles

fn state_style(enabled: bool, s: HealthState) -> Style {
    match (enabled, s) {
        (false, _) => Style::new().fg(Color::DarkGray),
        (true, HealthState::Healthy) => Style::new().fg(Color::Green),
        (true, HealthState::Unhealthy) => Style::new().fg(Color::Red).add_modifier(Modifier::BOLD),
        (true, HealthState::Unknown) => Style::new().fg(Color::Yellow),
    }
}

fn reported_style(r: Option<ReportedHealth>) -> Style {
    match r {
        None => Style::new().fg(Color::DarkGray),
        Some(ReportedHealth::Healthy) => Style::new().fg(Color::Green),
        Some(ReportedHealth::Degraded) => Style::new().fg(Color::Yellow),
        Some(ReportedHealth::Unhealthy) => Style::new().fg(Color::Red).add_modifier(Modifier::BOLD),
    }
}

fn discovery_style(h: DiscoveryHealth) -> Style {
    match h {
        DiscoveryHealth::Unknown => Style::new().fg(Color::DarkGray),
        DiscoveryHealth::Healthy => Style::new().fg(Color::Green),
        DiscoveryHealth::Draining => Style::new().fg(Color::Yellow),
        DiscoveryHealth::Unhealthy => Style::new().fg(Color::Red).add_modifier(Modifier::BOLD),
    }
}

fn change_style(line: &str) -> Style {
    let bad = [
        "-> Unhealthy",
        "PANIC",
        "STALE",
        "rejected",
        "HELD",
        "available nothing",
    ];
    if bad.iter().any(|b| line.contains(b)) {
        Style::new().fg(Color::Red)
    } else if line.contains("-> Healthy") || line.contains("answering again") {
        Style::new().fg(Color::Green)
    } else {
        Style::new()
    }
}

// ---------------------------------------------------------------------------------------------
// The table: columns sized to the terminal

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Column {
    Destination,
    Source,
    Discovery,
    Tier,
    Active,
    Passive,
    Reported,
    Available,
    InFlight,
    Latency,
    Utilization,
    SlowStart,
    Reason,
}

impl Column {
    fn header(self) -> &'static str {
        match self {
            Column::Destination => DESTINATION,
            Column::Source => "SOURCE",
            Column::Discovery => "DISCOVERY",
            Column::Tier => "TIER",
            Column::Active => "ACTIVE",
            Column::Passive => "PASSIVE",
            Column::Reported => "REPORTED",
            Column::Available => "AVAILABLE",
            Column::InFlight => "IN FLIGHT",
            Column::Latency => "LATENCY",
            Column::Utilization => "UTIL",
            Column::SlowStart => "SLOW START",
            Column::Reason => "LAST CHANGE",
        }
    }

    fn right_aligned(self) -> bool {
        matches!(
            self,
            Column::Tier
                | Column::InFlight
                | Column::Latency
                | Column::Utilization
                | Column::SlowStart
        )
    }

    /// A load signal: shown only when some destination has a value.
    fn is_load(self) -> bool {
        matches!(
            self,
            Column::Latency | Column::Utilization | Column::SlowStart
        )
    }
}

const DESTINATION: &str = "DESTINATION";

const ALL_COLUMNS: [Column; 13] = [
    Column::Destination,
    Column::Source,
    Column::Discovery,
    Column::Tier,
    Column::Active,
    Column::Passive,
    Column::Reported,
    Column::Available,
    Column::InFlight,
    Column::Latency,
    Column::Utilization,
    Column::SlowStart,
    Column::Reason,
];

/// The reason column is cut down to this before any other column gives way.
const MIN_REASON: usize = 20;
/// Destination ids are cut down to this, last of all.
const MIN_DESTINATION: usize = 6;

fn width(text: &str) -> usize {
    text.chars().count()
}

/// `text` in at most `max` characters, ending with `…` when cut.
fn cut(text: &str, max: usize) -> String {
    if width(text) <= max {
        text.to_string()
    } else if max == 0 {
        String::new()
    } else {
        let mut out: String = text.chars().take(max - 1).collect();
        out.push('…');
        out
    }
}

/// A `LAST CHANGE` cell (`active Healthy -> Unhealthy: probe HTTP 503, ...`) in `w` characters:
/// in full when it fits, otherwise only why (the state columns show what it changed to).
fn reason_in(text: &str, w: usize) -> String {
    if width(text) <= w {
        return text.to_string();
    }
    let why = text.split_once(": ").map_or(text, |(_, why)| why);
    cut(why, w)
}

/// One destination's cells, with their styles (before the view's colour choice).
fn cells(cluster: &ClusterStatus, d: &DestinationStatus) -> Vec<(Column, String, Style)> {
    let state = |enabled: bool, s: HealthState| {
        let text = if enabled {
            s.to_string()
        } else {
            "off".to_string()
        };
        (text, state_style(enabled, s))
    };
    let (available, available_style) = match (d.available, d.in_best_group, cluster.panic) {
        (false, _, _) => (
            "no",
            Style::new().fg(Color::Red).add_modifier(Modifier::BOLD),
        ),
        (true, true, false) => (
            "yes (best)",
            Style::new().fg(Color::Green).add_modifier(Modifier::BOLD),
        ),
        (true, false, false) => ("yes", Style::new().fg(Color::Green)),
        (true, best, true) => (
            if best { "panic (best)" } else { "panic" },
            Style::new().fg(Color::Magenta).add_modifier(Modifier::BOLD),
        ),
    };
    let (active, active_style) = state(cluster.active_enabled, d.active);
    let (passive, passive_style) = state(cluster.passive_enabled, d.passive);
    let discovery = match d.discovery {
        DiscoveryHealth::Unknown => "-".to_string(),
        other => other.to_string(),
    };
    vec![
        (Column::Destination, d.id.clone(), Style::new()),
        (Column::Source, d.source.clone(), Style::new()),
        (Column::Discovery, discovery, discovery_style(d.discovery)),
        (Column::Tier, d.tier.to_string(), Style::new()),
        (Column::Active, active, active_style),
        (Column::Passive, passive, passive_style),
        (
            Column::Reported,
            d.reported
                .map_or_else(|| "-".to_string(), |r| r.to_string()),
            reported_style(d.reported),
        ),
        (Column::Available, available.to_string(), available_style),
        (Column::InFlight, d.in_flight.to_string(), Style::new()),
        (
            Column::Latency,
            d.latency.map_or_else(|| "-".to_string(), format_latency),
            Style::new(),
        ),
        (
            Column::Utilization,
            d.utilization.map_or_else(|| "-".to_string(), percent),
            utilization_style(d.utilization),
        ),
        (
            Column::SlowStart,
            d.slow_start.map_or_else(|| "-".to_string(), percent),
            Style::new().fg(Color::Cyan),
        ),
        (
            Column::Reason,
            d.last_reason.clone().unwrap_or_else(|| "-".to_string()),
            Style::new(),
        ),
    ]
}

/// `42%`: a utilization or a slow-start share.
fn percent(value: f64) -> String {
    format!("{:.0}%", value * 100.0)
}

/// A reported utilization near or past full is worth a glance.
fn utilization_style(utilization: Option<f64>) -> Style {
    match utilization {
        Some(u) if u >= 0.9 => Style::new().fg(Color::Red),
        Some(u) if u >= 0.7 => Style::new().fg(Color::Yellow),
        _ => Style::new(),
    }
}

/// Which columns fit in `total` characters, how wide each is, and the gap between them.
///
/// The reason column gives way first (cut down to [`MIN_REASON`]), then the load columns
/// (`LATENCY`, `UTIL`, `SLOW START`), `IN FLIGHT`, `SOURCE` and `DISCOVERY`, the gaps, the
/// reason column itself, `TIER`, and last the destination ids are cut to [`MIN_DESTINATION`].
/// The state columns (`ACTIVE`, `PASSIVE`, `REPORTED`, `AVAILABLE`) are never dropped nor cut.
fn layout(natural: &[(Column, usize)], total: usize) -> (Vec<(Column, usize)>, usize) {
    let mut cols: Vec<(Column, usize)> = natural.to_vec();
    let mut gap = 2;
    let fixed = |cols: &[(Column, usize)], gap: usize| {
        let fixed: usize = cols
            .iter()
            .filter(|(c, _)| *c != Column::Reason)
            .map(|(_, w)| w)
            .sum();
        fixed + gap * cols.len().saturating_sub(1)
    };
    let fits = |cols: &[(Column, usize)], gap: usize| {
        let reason = cols
            .iter()
            .find(|(c, _)| *c == Column::Reason)
            .map_or(0, |&(_, w)| w.min(MIN_REASON));
        fixed(cols, gap) + reason <= total
    };
    // What gives way, in order, until the rest fits.
    for step in 0..6 {
        if fits(&cols, gap) {
            break;
        }
        match step {
            0 => cols.retain(|(c, _)| !c.is_load()),
            1 => cols.retain(|(c, _)| *c != Column::InFlight),
            2 => cols.retain(|(c, _)| !matches!(c, Column::Source | Column::Discovery)),
            3 => gap = 1,
            4 => cols.retain(|(c, _)| *c != Column::Reason),
            _ => cols.retain(|(c, _)| *c != Column::Tier),
        }
    }
    // Last, the destination ids, by what is still missing; the state columns stay whatever
    // happens (a screen narrower than them cuts the line at its edge).
    let over = fixed(&cols, gap).saturating_sub(total);
    if let Some((_, w)) = cols.iter_mut().find(|(c, _)| *c == Column::Destination) {
        *w = w.saturating_sub(over).max(MIN_DESTINATION.min(*w));
    }
    let room = total.saturating_sub(fixed(&cols, gap));
    if let Some((_, w)) = cols.iter_mut().find(|(c, _)| *c == Column::Reason) {
        *w = (*w).min(room);
    }
    (cols, gap)
}

/// One table line from `(text, style)` cells laid out by [`layout`].
fn table_line(
    view: &View,
    cols: &[(Column, usize)],
    gap: usize,
    cell: impl Fn(Column) -> (String, Style),
) -> Line<'static> {
    let mut spans = Vec::new();
    for (i, &(column, w)) in cols.iter().enumerate() {
        if i > 0 {
            spans.push(Span::raw(" ".repeat(gap)));
        }
        let (text, style) = cell(column);
        let text = if column == Column::Reason {
            reason_in(&text, w)
        } else {
            cut(&text, w)
        };
        let pad = " ".repeat(w - width(&text));
        let last = i + 1 == cols.len();
        if column.right_aligned() {
            spans.push(Span::raw(pad));
            spans.push(Span::styled(text, view.paint(style)));
        } else {
            spans.push(Span::styled(text, view.paint(style)));
            if !last {
                spans.push(Span::raw(pad));
            }
        }
    }
    Line::from(spans)
}

// ---------------------------------------------------------------------------------------------
// Summary lines

/// `orders  2/3 available · tier 0 Healthy · SPILL tier 0 -> tier 1: 35% of picks; ... ·
/// source dns: 3, answered 2.1s ago`, in spans.
pub(crate) fn cluster_summary(c: &ClusterStatus, now: Duration) -> Vec<(String, Style)> {
    let secs = |d: Duration| format!("{:.1}s", d.as_secs_f64());
    let red = Style::new().fg(Color::Red).add_modifier(Modifier::BOLD);
    let mut parts: Vec<(String, Style)> = Vec::new();
    let n = c.destinations.len();
    let available = if c.panic {
        0
    } else {
        c.destinations.iter().filter(|d| d.available).count()
    };
    if n == 0 {
        parts.push(("no destinations".to_string(), red));
    } else if c.panic {
        parts.push((
            format!("PANIC 0/{n} available, all get traffic"),
            Style::new().fg(Color::Magenta).add_modifier(Modifier::BOLD),
        ));
    } else {
        let style = if available == n {
            Style::new().fg(Color::Green)
        } else if available == 0 {
            red
        } else {
            Style::new().fg(Color::Yellow)
        };
        parts.push((format!("{available}/{n} available"), style));
        let tier = c
            .destinations
            .iter()
            .filter(|d| d.in_best_group)
            .map(|d| d.tier)
            .min();
        if let (Some(tier), Some(class)) = (tier, c.best_class) {
            let style = match class {
                healthpick::HealthClass::Healthy => Style::new(),
                _ => Style::new().fg(Color::Yellow),
            };
            parts.push((format!("tier {tier} {class}"), style));
        }
    }
    if !c.active_enabled {
        parts.push(("not probed".to_string(), Style::new().fg(Color::DarkGray)));
    }
    if let Some(spill) = &c.spill {
        // Spilling is worth a glance; a tier that keeps all its picks is only reassuring.
        if spill.share > 0.0 {
            parts.push((
                format!("SPILL {}", spill_summary(spill)),
                Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD),
            ));
        } else {
            parts.push((format!("spill {}", spill_summary(spill)), Style::new()));
        }
    }
    for s in &c.sources {
        parts.push((source_summary(s, now, &secs), Style::new()));
        if let Some(since) = s.stale_since {
            parts.push((
                format!(
                    "STALE for {}{}",
                    secs(now.saturating_sub(since)),
                    s.last_error
                        .as_ref()
                        .map_or(String::new(), |(_, e)| format!(": {e}"))
                ),
                red,
            ));
        }
        if let Some(held) = &s.held {
            parts.push((
                format!("HELD: removes {} of {}", held.removes, held.of),
                Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD),
            ));
        }
    }
    parts
}

fn source_summary(s: &SourceStatus, now: Duration, secs: &dyn Fn(Duration) -> String) -> String {
    let answered = match s.last_success {
        Some(at) => format!("answered {} ago", secs(now.saturating_sub(at))),
        None => "no answer yet".to_string(),
    };
    format!("source {}: {}, {answered}", s.name, s.endpoints)
}

/// The summary as one plain line, for the final text on the normal screen.
pub(crate) fn plain_summary(c: &ClusterStatus, now: Duration) -> String {
    let parts: Vec<String> = cluster_summary(c, now)
        .into_iter()
        .map(|(t, _)| t)
        .collect();
    format!("{}  {}", c.id, parts.join(" · "))
}

// ---------------------------------------------------------------------------------------------
// The frame

/// Draws the whole screen for `view` into `frame`.
pub(crate) fn draw(frame: &mut Frame<'_>, view: &View) {
    let area = frame.area();
    if area.width == 0 || area.height == 0 {
        return;
    }
    let total = usize::from(area.width);
    let status = sorted(&view.status, view.sort);
    let row = |frame: &mut Frame<'_>, y: u16, line: Line<'static>| {
        frame.render_widget(line, Rect::new(area.x, area.y + y, area.width, 1));
    };

    // Title: the file on the left, the keys on the right.
    let title = format!(" healthpick watch {}", view.file);
    let keys = if total >= 70 {
        format!("sort: {} (s) · q quit ", view.sort.label())
    } else {
        "s sort · q quit ".to_string()
    };
    let room = total.saturating_sub(width(&keys) + 1);
    let title = cut(&title, room);
    let fill = total.saturating_sub(width(&title) + width(&keys));
    let bar = view.paint(Style::new().add_modifier(Modifier::REVERSED | Modifier::BOLD));
    row(
        frame,
        0,
        Line::from(vec![
            Span::styled(title, bar),
            Span::styled(" ".repeat(fill), bar),
            Span::styled(keys, bar),
        ]),
    );

    // The body: a configuration problem, then each cluster's summary and rows.
    let discovered = status
        .clusters
        .iter()
        .any(|c| !c.sources.is_empty() || c.destinations.iter().any(|d| d.source != "config"));
    let all_cells: Vec<Vec<Vec<(Column, String, Style)>>> = status
        .clusters
        .iter()
        .map(|c| c.destinations.iter().map(|d| cells(c, d)).collect())
        .collect();
    // A load column shows when some destination has a value in it.
    let valued = |column: Column| {
        all_cells
            .iter()
            .flatten()
            .flatten()
            .any(|(c, text, _)| *c == column && text != "-")
    };
    let mut natural: Vec<(Column, usize)> = ALL_COLUMNS
        .iter()
        .filter(|c| discovered || !matches!(c, Column::Source | Column::Discovery))
        .filter(|c| !c.is_load() || valued(**c))
        .map(|&c| (c, width(c.header())))
        .collect();
    for (column, w) in &mut natural {
        for cell in all_cells.iter().flatten().flatten() {
            if cell.0 == *column {
                *w = (*w).max(width(&cell.1));
            }
        }
    }
    let (cols, gap) = layout(&natural, total);
    let header = table_line(view, &cols, gap, |c| {
        let text = match cols.iter().find(|(col, _)| *col == c) {
            // A destination column cut narrower than its header says `DEST`.
            Some(&(Column::Destination, w)) if w < width(DESTINATION) => "DEST",
            _ => c.header(),
        };
        (text.to_string(), Style::new().add_modifier(Modifier::BOLD))
    });
    let mut body: Vec<Line<'static>> = Vec::new();
    if let Some(rejected) = &status.config.last_error {
        body.push(Line::from(Span::styled(
            format!(
                "configuration on disk rejected, the one in force stays: {}",
                rejected.errors.join("; ")
            ),
            view.paint(Style::new().fg(Color::Red).add_modifier(Modifier::BOLD)),
        )));
    }
    for (c, rows) in status.clusters.iter().zip(&all_cells) {
        let mut spans = vec![Span::styled(
            c.id.clone(),
            view.paint(Style::new().add_modifier(Modifier::BOLD)),
        )];
        for (i, (text, style)) in cluster_summary(c, status.at).into_iter().enumerate() {
            spans.push(Span::raw(if i == 0 { "  " } else { " · " }));
            spans.push(Span::styled(text, view.paint(style)));
        }
        body.push(Line::from(spans));
        for cells in rows {
            body.push(table_line(view, &cols, gap, |column| {
                cells
                    .iter()
                    .find(|(c, _, _)| *c == column)
                    .map(|(_, t, s)| (t.clone(), *s))
                    .unwrap_or_default()
            }));
        }
    }

    // Heights: the table first; the recent changes get what is left (a few lines at least
    // on a tall screen).
    let below_title = usize::from(area.height) - 1;
    let table_needed = 1 + body.len();
    let recent_wanted = if view.recent.is_empty() {
        0
    } else {
        view.recent.len() + 1
    };
    let recent_min = if below_title >= 16 { 4 } else { 0 };
    let recent_height = recent_wanted
        .min(below_title.saturating_sub(table_needed).max(recent_min))
        .min(below_title);
    let table_height = below_title - recent_height;

    let mut y = 1u16;
    if table_height > 0 {
        row(frame, y, header);
        y += 1;
        let rows_room = table_height - 1;
        let scroll = view.scroll.min(body.len().saturating_sub(rows_room));
        let shown_end = (scroll + rows_room).min(body.len());
        let hidden_after = body.len() - shown_end;
        let mut visible: Vec<Line<'static>> = body[scroll..shown_end].to_vec();
        if hidden_after > 0 || scroll > 0 {
            if let Some(last) = visible.last_mut() {
                let hidden = hidden_after + 1;
                *last = Line::from(Span::styled(
                    format!(
                        "… {hidden} more below{} (↑↓ scroll)",
                        if scroll > 0 {
                            format!(", {scroll} above")
                        } else {
                            String::new()
                        }
                    ),
                    view.paint(Style::new().add_modifier(Modifier::DIM)),
                ));
            }
        }
        for line in visible {
            row(frame, y, line);
            y += 1;
        }
    }
    if recent_height > 0 {
        let y = area.height - u16::try_from(recent_height).unwrap_or(area.height);
        row(
            frame,
            y,
            Line::from(Span::styled(
                "RECENT CHANGES",
                view.paint(Style::new().add_modifier(Modifier::BOLD)),
            )),
        );
        let lines = recent_height - 1;
        let start = view.recent.len().saturating_sub(lines);
        for (i, line) in view.recent.iter().skip(start).enumerate() {
            let y = y + 1 + u16::try_from(i).unwrap_or(0);
            row(
                frame,
                y,
                Line::from(Span::styled(line.clone(), view.paint(change_style(line)))),
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The terminal

/// Whether colours may be used: not when `NO_COLOR` is set to anything non-empty
/// (<https://no-color.org>).
pub(crate) fn colour_allowed() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// The real terminal in the alternate screen, raw mode, with keys and resizes read on a thread
/// of their own.
pub(crate) struct Screen {
    terminal: DefaultTerminal,
    pub view: View,
    pub input: UnboundedReceiver<Event>,
    /// False once the input thread ended (no terminal to read keys from).
    pub input_open: bool,
    restored: bool,
}

impl Screen {
    /// Enters the alternate screen (ratatui also restores the terminal if the program panics).
    pub(crate) fn start(view: View) -> io::Result<Screen> {
        let terminal = ratatui::try_init()?;
        let (send, input) = unbounded_channel();
        // Ends at the first read error, or when the screen is gone; blocking reads are why it
        // is a thread and not a task.
        std::thread::spawn(move || {
            while let Ok(event) = ratatui::crossterm::event::read() {
                if send.send(event).is_err() {
                    break;
                }
            }
        });
        Ok(Screen {
            terminal,
            view,
            input,
            input_open: true,
            restored: false,
        })
    }

    /// Redraws (ratatui writes only the cells that changed; a resize clears and redraws all).
    pub(crate) fn draw(&mut self) -> io::Result<()> {
        let view = &self.view;
        self.terminal.draw(|frame| draw(frame, view))?;
        Ok(())
    }

    /// Leaves the alternate screen and prints the final state on the normal screen, plain:
    /// `stopped` line, a summary line per cluster and the table, in the order on screen.
    pub(crate) fn finish(mut self, status: &EngineStatus, why: &str) -> io::Result<()> {
        self.restore();
        let status = sorted(status, self.view.sort);
        let mut out = format!(
            "healthpick watch {}: stopped ({why}) at {:.1}s\n",
            self.view.file,
            status.at.as_secs_f64()
        );
        for c in &status.clusters {
            out.push_str(&plain_summary(c, status.at));
            out.push('\n');
        }
        out.push('\n');
        out.push_str(&StatusTable::new().render(&status));
        let mut stdout = io::stdout().lock();
        stdout.write_all(out.as_bytes())?;
        stdout.flush()
    }

    fn restore(&mut self) {
        if !self.restored {
            self.restored = true;
            ratatui::restore();
        }
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        self.restore();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use healthpick::{ConfigStatus, HealthClass, SpillStatus};
    use ratatui::backend::TestBackend;
    use ratatui::buffer::Buffer;
    use ratatui::Terminal;

    fn destination(id: &str, tier: u32, active: HealthState) -> DestinationStatus {
        // Field by field: the status types are non-exhaustive (they may grow).
        let mut d = DestinationStatus::default();
        d.id = id.to_string();
        d.address = format!("http://{id}/");
        d.source = "config".to_string();
        d.tier = tier;
        d.active = active;
        d.passive = HealthState::Unknown;
        d.reported = (active == HealthState::Healthy).then_some(ReportedHealth::Healthy);
        d.available = active != HealthState::Unhealthy;
        d.in_best_group = active == HealthState::Healthy && tier == 0;
        d.last_change = Some(Duration::from_secs(2));
        d.last_reason = Some(format!(
            "active Unknown -> {active}: probe HTTP 200 (Healthy)"
        ));
        d.last_probe = Some(Duration::from_secs(2));
        d.discovery = DiscoveryHealth::Unknown;
        d.locality = "-".to_string();
        d.last_probe_succeeded = Some(active == HealthState::Healthy);
        d
    }

    const LONG_REASON: &str = "active Healthy -> Unhealthy: probe connect error (Connection \
                               refused), 2 consecutive failures";

    fn cluster(id: &str, destinations: Vec<DestinationStatus>) -> ClusterStatus {
        let mut c = ClusterStatus::default();
        c.id = id.to_string();
        c.load_balancing_policy = "PowerOfTwoChoices".to_string();
        c.available_destinations_policy = "HealthyOrPanic".to_string();
        c.active_enabled = true;
        c.best_class = Some(HealthClass::Healthy);
        c.destinations = destinations;
        c
    }

    /// `orders`: local-1 Healthy (best), local-2 Unhealthy with a long reason, remote-1 Healthy
    /// on tier 1; `payments`: its only destination Unhealthy, in panic.
    fn status() -> EngineStatus {
        let mut down = destination("local-2", 0, HealthState::Unhealthy);
        down.last_reason = Some(LONG_REASON.to_string());
        let orders = cluster(
            "orders",
            vec![
                destination("local-1", 0, HealthState::Healthy),
                down,
                destination("remote-1", 1, HealthState::Healthy),
            ],
        );
        let mut only = destination("only", 0, HealthState::Unhealthy);
        only.available = true;
        only.in_best_group = true;
        let mut payments = cluster("payments", vec![only]);
        payments.panic = true;
        payments.best_class = Some(HealthClass::Unhealthy);
        let mut status = EngineStatus::default();
        status.at = Duration::from_secs(12);
        status.config = ConfigStatus::default();
        status.clusters = vec![orders, payments];
        status
    }

    fn view(status: EngineStatus) -> View {
        let mut view = View::new("appsettings.json".to_string(), status, true);
        view.push_recent(
            "[  2.0s] orders/local-1: active Unknown -> Healthy (probe HTTP 200 (Healthy))"
                .to_string(),
        );
        view.push_recent(format!("[  9.5s] orders/local-2: {LONG_REASON}"));
        view
    }

    fn render(view: &View, w: u16, h: u16) -> Buffer {
        let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
        terminal.draw(|frame| draw(frame, view)).unwrap();
        terminal.backend().buffer().clone()
    }

    /// The screen as text, one string per row, trailing spaces trimmed.
    fn text_rows(buffer: &Buffer) -> Vec<String> {
        let area = buffer.area;
        (0..area.height)
            .map(|y| {
                let row: String = (0..area.width)
                    .map(|x| buffer.cell((x, y)).unwrap().symbol().to_string())
                    .collect();
                row.trim_end().to_string()
            })
            .collect()
    }

    fn find<'a>(lines: &'a [String], needle: &str) -> (usize, &'a String) {
        lines
            .iter()
            .enumerate()
            .find(|(_, l)| l.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle:?} in:\n{}", lines.join("\n")))
    }

    /// The row of destination `id` (its first word).
    fn row_of<'a>(lines: &'a [String], id: &str) -> (usize, &'a String) {
        lines
            .iter()
            .enumerate()
            .find(|(_, l)| l.split_whitespace().next() == Some(id))
            .unwrap_or_else(|| panic!("no row for {id} in:\n{}", lines.join("\n")))
    }

    fn assert_state_columns(lines: &[String]) {
        let (_, header) = find(lines, "ACTIVE");
        for column in ["DEST", "ACTIVE", "PASSIVE", "REPORTED", "AVAILABLE"] {
            assert!(header.contains(column), "{column} missing: {header}");
        }
        let (_, down) = row_of(lines, "local-2");
        assert!(down.contains("Unhealthy"), "{down}");
        assert!(
            down.contains(" no"),
            "AVAILABLE shows `no`: {down}\n{}",
            lines.join("\n")
        );
        let (_, up) = row_of(lines, "local-1");
        assert!(up.contains("Healthy") && up.contains("yes (best)"), "{up}");
        let (_, panic) = row_of(lines, "only");
        assert!(panic.contains("panic (best)"), "{panic}");
    }

    #[test]
    fn at_80x24_the_reason_is_cut_first_and_problems_come_first() {
        let buffer = render(&view(status()), 80, 24);
        let lines = text_rows(&buffer);
        let text = lines.join("\n");
        assert!(
            lines[0].starts_with(" healthpick watch appsettings.json"),
            "{text}"
        );
        assert!(lines[0].contains("q quit"), "{text}");
        assert_state_columns(&lines);
        let (header_y, header) = find(&lines, "DESTINATION");
        assert!(
            header.contains("TIER") && header.contains("LAST CHANGE"),
            "{header}"
        );
        assert!(
            !header.contains("IN FLIGHT"),
            "IN FLIGHT gives way: {header}"
        );
        // The reason is there, as why, cut with an ellipsis at the screen's edge.
        let (_, down) = row_of(&lines, "local-2");
        assert!(
            down.contains(" no ") && down.contains(" probe connect error"),
            "{down}"
        );
        assert!(down.ends_with('…'), "{down}");
        assert!(!down.contains("consecutive failures"), "{down}");
        // Summary lines, the cluster in panic first, then Unhealthy before Healthy.
        let (payments_y, payments) = find(&lines, "payments  PANIC 0/1 available, all get traffic");
        let (orders_y, orders) = find(&lines, "orders  2/3 available · tier 0 Healthy");
        assert!(!payments.is_empty() && !orders.is_empty());
        assert!(header_y < payments_y && payments_y < orders_y, "{text}");
        let (down_y, _) = row_of(&lines, "local-2");
        let (up_y, _) = row_of(&lines, "local-1");
        let (remote_y, _) = row_of(&lines, "remote-1");
        assert!(
            orders_y < down_y && down_y < up_y && up_y < remote_y,
            "{text}"
        );
        // The latest changes below the table.
        let (recent_y, _) = find(&lines, "RECENT CHANGES");
        assert!(recent_y > remote_y, "{text}");
        find(
            &lines,
            "[  9.5s] orders/local-2: active Healthy -> Unhealthy",
        );
        assert!(lines.iter().all(|l| width(l) <= 80));
    }

    #[test]
    fn at_50x12_the_state_columns_stay_and_the_rest_gives_way() {
        let buffer = render(&view(status()), 50, 12);
        let lines = text_rows(&buffer);
        let text = lines.join("\n");
        assert_state_columns(&lines);
        let (_, header) = find(&lines, "ACTIVE");
        for gone in ["LAST CHANGE", "IN FLIGHT", "TIER"] {
            assert!(!header.contains(gone), "{gone} gives way: {header}");
        }
        let (_, up) = row_of(&lines, "local-1");
        assert!(!up.contains("active"), "no room for the reason: {up}");
        find(&lines, "payments  PANIC");
        find(&lines, "orders  2/3 available");
        assert!(lines[0].contains("q quit"), "{text}");
        // Table first; what is left shows the latest change.
        find(&lines, "RECENT CHANGES");
        find(&lines, "[  9.5s] orders/local-2");
    }

    #[test]
    fn at_200x50_everything_shows_in_full() {
        let mut status = status();
        let mut discovered = destination("10.0.0.7:8080", 0, HealthState::Healthy);
        discovered.source = "dns".to_string();
        discovered.discovery = DiscoveryHealth::Healthy;
        let mut search = cluster("search", vec![discovered]);
        let mut dns = SourceStatus::default();
        dns.name = "dns".to_string();
        dns.kind = "Dns".to_string();
        dns.target = "search.svc A/AAAA".to_string();
        dns.answered = true;
        dns.last_success = Some(Duration::from_secs(4));
        dns.age = Some(Duration::from_secs(8));
        dns.last_error = Some((Duration::from_secs(9), "timed out".to_string()));
        dns.stale_since = Some(Duration::from_secs(9));
        dns.generation = 3;
        dns.endpoints = 1;
        search.sources.push(dns);
        let calm = cluster("calm", vec![destination("calm-1", 0, HealthState::Healthy)]);
        status.clusters.push(calm);
        status.clusters.push(search);
        let buffer = render(&view(status), 200, 50);
        let lines = text_rows(&buffer);
        let text = lines.join("\n");
        let (_, header) = find(&lines, "DESTINATION");
        for column in [
            "SOURCE",
            "DISCOVERY",
            "TIER",
            "ACTIVE",
            "PASSIVE",
            "REPORTED",
            "AVAILABLE",
            "IN FLIGHT",
            "LAST CHANGE",
        ] {
            assert!(header.contains(column), "{column} missing: {header}");
        }
        let (_, down) = row_of(&lines, "local-2");
        assert!(down.ends_with(LONG_REASON), "{down}");
        find(
            &lines,
            "search  1/1 available · tier 0 Healthy · source dns: 1, answered 8.0s ago · \
             STALE for 3.0s: timed out",
        );
        let (search_y, _) = find(&lines, "search  1/1");
        let (calm_y, _) = find(&lines, "calm  1/1");
        assert!(search_y < calm_y, "a stale source comes first: {text}");
        let (_, row) = row_of(&lines, "10.0.0.7:8080");
        assert!(row.contains(" dns ") && row.contains(" Healthy "), "{row}");
        find(&lines, "sort: unhealthy first (s)");
        find(&lines, "[  2.0s] orders/local-1");
        assert!(lines.len() == 50 && text.contains("RECENT CHANGES"));
    }

    /// `orders` with load signals: local-1 measured at 12.3 ms, remote-1 reporting 95%
    /// utilization and warming at a quarter of its weight; spilling 35% to tier 1.
    fn loaded_status() -> EngineStatus {
        let mut status = status();
        let orders = &mut status.clusters[0];
        orders.destinations[0].latency = Some(Duration::from_micros(12_345));
        orders.destinations[2].latency = Some(Duration::from_millis(40));
        orders.destinations[2].utilization = Some(0.95);
        orders.destinations[2].slow_start = Some(0.25);
        let mut spill = SpillStatus::default();
        spill.from_tier = 0;
        spill.to_tier = 1;
        spill.share = 0.35;
        spill.latency_ratio = Some(2.1);
        spill.baseline = Some(Duration::from_millis(12));
        orders.spill = Some(spill);
        status
    }

    #[test]
    fn load_signals_show_in_their_columns_and_spill_in_the_summary() {
        let buffer = render(&view(loaded_status()), 200, 30);
        let lines = text_rows(&buffer);
        let (_, header) = find(&lines, "DESTINATION");
        for column in ["IN FLIGHT", "LATENCY", "UTIL", "SLOW START", "LAST CHANGE"] {
            assert!(header.contains(column), "{column} missing: {header}");
        }
        let (_, up) = row_of(&lines, "local-1");
        assert!(up.contains(" 12.3ms "), "{up}");
        let (_, remote) = row_of(&lines, "remote-1");
        assert!(
            remote.contains(" 40.0ms ") && remote.contains(" 95% ") && remote.contains(" 25% "),
            "{remote}"
        );
        let (_, only) = row_of(&lines, "only");
        assert!(only.contains(" - "), "no value, a dash: {only}");
        find(
            &lines,
            "orders  2/3 available · tier 0 Healthy · SPILL tier 0 -> tier 1: 35% of picks; \
             tier 0 at 2.10x its unloaded latency (12.0ms)",
        );
        // A utilization past 90% is red.
        let (y, row) = row_of(&lines, "remote-1");
        let x = row.find("95%").unwrap();
        let cell = buffer.cell((u16::try_from(x).unwrap(), u16::try_from(y).unwrap()));
        assert_eq!(cell.unwrap().fg, Color::Red);

        // On 80 columns the load columns give way before IN FLIGHT does, and the state columns
        // stay.
        let lines = text_rows(&render(&view(loaded_status()), 80, 24));
        let (_, header) = find(&lines, "ACTIVE");
        assert!(
            !header.contains("LATENCY") && !header.contains("UTIL"),
            "{header}"
        );
        assert_state_columns(&lines);

        // Without values anywhere, no load column at all.
        let lines = text_rows(&render(&view(status()), 200, 30));
        let (_, header) = find(&lines, "DESTINATION");
        assert!(
            !header.contains("LATENCY") && !header.contains("SLOW START"),
            "{header}"
        );
    }

    #[test]
    fn states_are_coloured_unless_colour_is_off() {
        let buffer = render(&view(status()), 120, 24);
        let lines = text_rows(&buffer);
        let (y, row) = row_of(&lines, "local-2");
        let x = row.find("Unhealthy").unwrap();
        let cell = buffer.cell((u16::try_from(x).unwrap(), u16::try_from(y).unwrap()));
        assert_eq!(cell.unwrap().fg, Color::Red);
        let (y, row) = row_of(&lines, "local-1");
        let x = row.find("Healthy").unwrap();
        let cell = buffer.cell((u16::try_from(x).unwrap(), u16::try_from(y).unwrap()));
        assert_eq!(cell.unwrap().fg, Color::Green);

        let mut plain = view(status());
        plain.colour = false;
        let buffer = render(&plain, 120, 24);
        assert!(
            buffer
                .content()
                .iter()
                .all(|c| c.fg == Color::Reset && c.bg == Color::Reset),
            "NO_COLOR: no colour anywhere"
        );
        assert_eq!(text_rows(&buffer), lines, "the same text without colour");
    }

    #[test]
    fn s_cycles_the_sort_orders_and_q_quits() {
        let press = |c: char| KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE);
        let mut view = view(status());
        let order = |view: &View| {
            let lines = text_rows(&render(view, 100, 24));
            ["local-1", "local-2", "remote-1", "only"].map(|id| row_of(&lines, id).0)
        };
        let [l1, l2, r1, only] = order(&view);
        assert!(only < l2 && l2 < l1 && l1 < r1, "unhealthy first");
        assert_eq!(view.key(press('s')), None);
        assert_eq!(view.sort, SortOrder::Config);
        let [l1, l2, r1, only] = order(&view);
        assert!(l1 < l2 && l2 < r1 && r1 < only, "config order");
        assert!(find(&text_rows(&render(&view, 100, 24)), "sort: config order").0 == 0);
        view.key(press('s'));
        assert_eq!(view.sort, SortOrder::Name);
        view.key(press('s'));
        assert_eq!(view.sort, SortOrder::ProblemsFirst);
        assert_eq!(view.key(press('q')), Some("quit"));
        assert_eq!(
            view.key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)),
            Some("Ctrl-C")
        );
        assert_eq!(view.key(press('c')), None);
    }

    #[test]
    fn a_table_taller_than_the_screen_says_what_is_hidden_and_scrolls() {
        let many = (0..20)
            .map(|i| destination(&format!("d{i:02}"), 0, HealthState::Healthy))
            .collect();
        let mut view = View::new("f.json".to_string(), status(), true);
        view.status.clusters = vec![cluster("big", many)];
        let lines = text_rows(&render(&view, 50, 12));
        // Title, header, summary, 8 rows, the marker.
        let (y, marker) = find(&lines, "more below");
        assert_eq!(y, 11, "{}", lines.join("\n"));
        assert!(marker.contains("… 12 more below"), "{marker}");
        row_of(&lines, "d07");
        assert!(!lines.iter().any(|l| l.starts_with("d08")));
        view.key(KeyEvent::new(KeyCode::PageDown, KeyModifiers::NONE));
        let lines = text_rows(&render(&view, 50, 12));
        row_of(&lines, "d17");
        find(&lines, "10 above");
        assert!(!lines.iter().any(|l| l.starts_with("d00")));
    }

    #[test]
    fn a_narrow_screen_never_panics() {
        let view = view(status());
        for (w, h) in [(1, 1), (5, 3), (20, 4), (34, 6), (45, 10), (50, 2)] {
            let lines = text_rows(&render(&view, w, h));
            assert_eq!(lines.len(), usize::from(h));
        }
    }
}
