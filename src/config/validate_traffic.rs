//! Validation of a cluster's traffic-shaping settings (`SessionAffinity`, `LoadSignals`,
//! `TierSpill`, `SlowStart`): the ranges of their values and the relation between the spill
//! marks. The reader reports what does not parse; these rules hold for every configuration,
//! read from a document or built in code, so an engine refuses a bad one either way.

use std::time::Duration;

use super::affinity::SessionAffinityConfig;
use super::diagnostics::{Diagnostics, Place};
use super::model::ClusterConfig;
use super::timespan::TimeSpan;
use super::traffic::{LoadSignalsConfig, SlowStartConfig, TierSpillConfig};

/// Every rule of the cluster's traffic-shaping settings; `SessionAffinity` only when it is
/// enabled (a disabled section is not in the model: the reader checks it).
pub(crate) fn validate_traffic(cluster: &ClusterConfig, place: Place<'_>, diags: &mut Diagnostics) {
    if let Some(affinity) = &cluster.session_affinity {
        validate_affinity(affinity, place, true, diags);
    }
    validate_load_signals(&cluster.load_signals, place, diags);
    validate_tier_spill(&cluster.tier_spill, place, diags);
    if let Some(slow_start) = &cluster.slow_start {
        validate_slow_start(slow_start, place, diags);
    }
}

/// `SessionAffinity`: a key name to read the key from, and a balance factor of at least 1.
/// Not `in_force` (a disabled section, which YARP does not validate either): warnings.
pub(crate) fn validate_affinity(
    affinity: &SessionAffinityConfig,
    place: Place<'_>,
    in_force: bool,
    diags: &mut Diagnostics,
) {
    let mut problem = |key: &str, message: String| {
        diags.problem_unless_off(
            in_force,
            place.path(&format!("SessionAffinity:{key}")),
            place.message(message),
            "SessionAffinity is disabled",
        );
    };
    // YARP's rule: null or empty is refused, anything else is a name.
    if affinity.affinity_key_name.is_empty() {
        problem(
            "AffinityKeyName",
            "AffinityKeyName must not be empty: it names the header or cookie the key is read from"
                .to_string(),
        );
    }
    let factor = affinity.balance_factor;
    // Below 1 no destination could ever take its share of the mean: every key would move on.
    if !(factor.is_finite() && factor >= 1.0) {
        problem(
            "BalanceFactor",
            format!(
                "BalanceFactor `{factor}` must be a number of at least 1 (how many times the mean in flight a destination may have)"
            ),
        );
    }
}

fn validate_load_signals(signals: &LoadSignalsConfig, place: Place<'_>, diags: &mut Diagnostics) {
    positive(diags, place, "LoadSignals:DecayTime", signals.decay_time);
    positive(diags, place, "LoadSignals:DefaultRtt", signals.default_rtt);
    positive(
        diags,
        place,
        "LoadSignals:LoadReports:Expiration",
        signals.load_reports.expiration,
    );
}

fn validate_tier_spill(spill: &TierSpillConfig, place: Place<'_>, diags: &mut Diagnostics) {
    let (upper, lower) = (spill.upper_mark, spill.lower_mark);
    if !upper.is_finite() {
        diags.error(
            place.path("TierSpill:UpperMark"),
            place.message(format!("UpperMark `{upper}` must be a finite number")),
        );
    }
    if !lower.is_finite() {
        diags.error(
            place.path("TierSpill:LowerMark"),
            place.message(format!("LowerMark `{lower}` must be a finite number")),
        );
    } else if lower < 1.0 {
        // The marks are multiples of the tier's unloaded latency, which it never beats.
        diags.error(
            place.path("TierSpill:LowerMark"),
            place.message(format!(
                "LowerMark `{lower}` must be at least 1 (a multiple of the preferred tier's unloaded latency)"
            )),
        );
    } else if upper.is_finite() && upper <= lower {
        diags.error(
            place.path("TierSpill:UpperMark"),
            place.message(format!(
                "UpperMark `{upper}` must be above LowerMark `{lower}` (between the two marks the spill share holds still)"
            )),
        );
    }
}

fn validate_slow_start(slow_start: &SlowStartConfig, place: Place<'_>, diags: &mut Diagnostics) {
    positive(diags, place, "SlowStart:Window", slow_start.window);
    let aggression = slow_start.aggression;
    if !(aggression.is_finite() && aggression > 0.0) {
        diags.error(
            place.path("SlowStart:Aggression"),
            place.message(format!(
                "Aggression `{aggression}` must be a positive number (1 is a linear ramp)"
            )),
        );
    }
    let percent = slow_start.min_weight_percent;
    if !(0.0..=100.0).contains(&percent) {
        diags.error(
            place.path("SlowStart:MinWeightPercent"),
            place.message(format!(
                "MinWeightPercent `{percent}` must be a number from 0 to 100"
            )),
        );
    }
}

/// A TimeSpan that must be longer than zero (a document's zero is the reader's to report, with
/// its text; this one comes from code).
fn positive(diags: &mut Diagnostics, place: Place<'_>, path: &str, value: Duration) {
    if value.is_zero() {
        let key = path.rsplit(':').next().unwrap_or(path);
        diags.error(
            place.path(path),
            place.message(format!(
                "{key} `{}` must be positive",
                TimeSpan::from_duration(value)
            )),
        );
    }
}
