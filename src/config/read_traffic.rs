//! Reading a cluster's traffic-shaping sections: YARP's `SessionAffinity`, and healthpick's
//! `LoadSignals`, `TierSpill` and `SlowStart` (extensions, which YARP ignores). Keys are read as
//! .NET configuration reads them (case-insensitive, scalars as text, TimeSpans); a value that
//! does not parse is an error naming cluster, key path and value. Ranges and the relation between
//! keys are validation's (`validate_traffic.rs`), so that settings built in code meet the same
//! rules; the reader keeps every value that parses for it to judge.

use super::affinity::{AffinityFailurePolicy, AffinityPolicy, SessionAffinityConfig};
use super::metadata::parse_number;
use super::traffic::{
    LoadReportsConfig, LoadSignalsConfig, SlowStartConfig, SpillMode, TierSpillConfig,
};
use super::tree::{is_unset, join, Node, Reader};
use super::validate_traffic::validate_affinity;
use crate::ids::eq_ignore_case;

/// The keys of YARP's `SessionAffinity`, with healthpick's `BalanceFactor`. Other keys are
/// ignored (YARP's section may grow), misspelt ones get a "did you mean".
const AFFINITY_KEYS: &[&str] = &[
    "Enabled",
    "Policy",
    "FailurePolicy",
    "AffinityKeyName",
    "Cookie",
    "BalanceFactor",
];
const LOAD_SIGNALS_KEYS: &[&str] = &["DecayTime", "DefaultRtt", "LoadReports"];
const LOAD_REPORTS_KEYS: &[&str] = &["Enabled", "Blackout", "Expiration"];
const TIER_SPILL_KEYS: &[&str] = &["Mode", "UpperMark", "LowerMark", "Dwell"];
const SLOW_START_KEYS: &[&str] = &["Window", "Aggression", "MinWeightPercent"];

/// The cluster's `SessionAffinity`, when enabled. As in YARP, a section without `Enabled: true`
/// is off; YARP does not validate it, so its bad values are only warnings here (errors in strict
/// mode). Its `Cookie` subsection is accepted and not read: it shapes the cookie a proxy writes,
/// and a client writes none.
pub(crate) fn read_session_affinity(
    r: &mut Reader<'_, '_>,
    cluster: &Node,
) -> Option<SessionAffinityConfig> {
    const AT: &str = "SessionAffinity";
    let node = r.object(cluster, "", AT)?;
    r.misspelt_keys(node, AT, AFFINITY_KEYS);
    let enabled = r.bool(node, AT, "Enabled").unwrap_or(false);
    let off = (!enabled).then_some("SessionAffinity is disabled");
    let policy = named(
        r,
        node,
        AT,
        "Policy",
        &AffinityPolicy::ALL,
        AffinityPolicy::name,
        off,
    )
    .unwrap_or_default();
    let failure_policy = named(
        r,
        node,
        AT,
        "FailurePolicy",
        &AffinityFailurePolicy::ALL,
        AffinityFailurePolicy::name,
        off,
    )
    .unwrap_or_default();
    let mut affinity = SessionAffinityConfig::new(policy).failure_policy(failure_policy);
    // YARP refuses an enabled section without a key name, so a document must give one (the
    // builder's default is for code).
    if is_unset(node, "AffinityKeyName") {
        if enabled {
            r.diags.error(
                r.place.path(&join(AT, "AffinityKeyName")),
                r.place.message(
                    "SessionAffinity is enabled without an AffinityKeyName (the header or cookie the key is read from), which YARP requires",
                ),
            );
        }
    } else if let Some(name) = r.text(node, AT, "AffinityKeyName") {
        affinity = affinity.affinity_key_name(name);
    }
    if let Some(factor) = number(r, node, AT, "BalanceFactor", off) {
        affinity = affinity.balance_factor(factor);
    }
    if enabled {
        Some(affinity)
    } else {
        validate_affinity(&affinity, r.place, false, r.diags);
        None
    }
}

/// The cluster's `LoadSignals` (absent: the defaults).
pub(crate) fn read_load_signals(r: &mut Reader<'_, '_>, cluster: &Node) -> LoadSignalsConfig {
    const AT: &str = "LoadSignals";
    let mut signals = LoadSignalsConfig::default();
    let Some(node) = r.object(cluster, "", AT) else {
        return signals;
    };
    r.unknown_keys(node, AT, &[LOAD_SIGNALS_KEYS]);
    if let Some(decay) = r.positive_duration(node, AT, "DecayTime", true) {
        signals = signals.decay_time(decay);
    }
    if let Some(rtt) = r.positive_duration(node, AT, "DefaultRtt", true) {
        signals = signals.default_rtt(rtt);
    }
    if let Some(reports) = r.object(node, AT, "LoadReports") {
        signals = signals.load_reports(read_load_reports(r, reports));
    }
    signals
}

fn read_load_reports(r: &mut Reader<'_, '_>, node: &Node) -> LoadReportsConfig {
    const AT: &str = "LoadSignals:LoadReports";
    r.unknown_keys(node, AT, &[LOAD_REPORTS_KEYS]);
    let mut reports = LoadReportsConfig::default();
    if let Some(enabled) = r.bool(node, AT, "Enabled") {
        reports = reports.enabled(enabled);
    }
    if let Some(blackout) = r.non_negative_duration(node, AT, "Blackout") {
        reports = reports.blackout(blackout);
    }
    if let Some(expiration) = r.positive_duration(node, AT, "Expiration", true) {
        reports = reports.expiration(expiration);
    }
    reports
}

/// The cluster's `TierSpill` (absent: `Strict`).
pub(crate) fn read_tier_spill(r: &mut Reader<'_, '_>, cluster: &Node) -> TierSpillConfig {
    const AT: &str = "TierSpill";
    let mut spill = TierSpillConfig::default();
    let Some(node) = r.object(cluster, "", AT) else {
        return spill;
    };
    r.unknown_keys(node, AT, &[TIER_SPILL_KEYS]);
    if let Some(mode) = named(r, node, AT, "Mode", &SpillMode::ALL, SpillMode::name, None) {
        spill = spill.mode(mode);
    }
    if let Some(mark) = number(r, node, AT, "UpperMark", None) {
        spill = spill.upper_mark(mark);
    }
    if let Some(mark) = number(r, node, AT, "LowerMark", None) {
        spill = spill.lower_mark(mark);
    }
    if let Some(dwell) = r.non_negative_duration(node, AT, "Dwell") {
        spill = spill.dwell(dwell);
    }
    spill
}

/// The cluster's `SlowStart`: off when absent or when it sets nothing; a section that sets
/// anything needs its `Window`.
pub(crate) fn read_slow_start(r: &mut Reader<'_, '_>, cluster: &Node) -> Option<SlowStartConfig> {
    const AT: &str = "SlowStart";
    let node = r.object(cluster, "", AT)?;
    r.unknown_keys(node, AT, &[SLOW_START_KEYS]);
    if node.entries().iter().all(|(key, _)| is_unset(node, key)) {
        return None;
    }
    let window = if is_unset(node, "Window") {
        r.diags.error(
            r.place.path(&join(AT, "Window")),
            r.place.message(
                "SlowStart needs a Window, the time a destination takes to reach its full weight (00:00:30); leave the section out to turn slow start off",
            ),
        );
        None
    } else {
        r.positive_duration(node, AT, "Window", true)
    };
    // Read before giving up on a missing window, so that every problem is reported at once.
    let aggression = number(r, node, AT, "Aggression", None);
    let min_weight_percent = number(r, node, AT, "MinWeightPercent", None);
    let mut slow_start = SlowStartConfig::new(window?);
    if let Some(aggression) = aggression {
        slow_start = slow_start.aggression(aggression);
    }
    if let Some(percent) = min_weight_percent {
        slow_start = slow_start.min_weight_percent(percent);
    }
    Some(slow_start)
}

/// A finite number; validation judges its range. A problem is a warning when the section is
/// `off` (why: "SessionAffinity is disabled").
fn number(
    r: &mut Reader<'_, '_>,
    node: &Node,
    at: &str,
    key: &str,
    off: Option<&str>,
) -> Option<f64> {
    let text = r.text(node, at, key)?;
    let value = parse_number(&text);
    if value.is_none() {
        r.diags.problem_unless_off(
            off.is_none(),
            r.place.path(&join(at, key)),
            r.place.message(format!("{key} `{text}` is not a number")),
            off.unwrap_or_default(),
        );
    }
    value
}

/// One of `values` by its name, compared case-insensitively; another name is a problem listing
/// them (a warning when the section is `off`).
fn named<T: Copy>(
    r: &mut Reader<'_, '_>,
    node: &Node,
    at: &str,
    key: &str,
    values: &[T],
    name: fn(T) -> &'static str,
    off: Option<&str>,
) -> Option<T> {
    let text = r.text(node, at, key)?;
    let found = values
        .iter()
        .copied()
        .find(|value| eq_ignore_case(name(*value), text.trim()));
    if found.is_none() {
        let known: Vec<&str> = values.iter().map(|value| name(*value)).collect();
        r.diags.problem_unless_off(
            off.is_none(),
            r.place.path(&join(at, key)),
            r.place
                .message(format!("{key} `{text}` is not one of {}", known.join(", "))),
            off.unwrap_or_default(),
        );
    }
    found
}
