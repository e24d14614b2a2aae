//! A cluster's traffic-shaping settings (healthpick extensions; YARP ignores them): how request
//! latencies and servers' load reports become load signals (`LoadSignals`), whether the
//! preferred tier spills into the next one under load (`TierSpill`), and how a destination that
//! becomes available warms up (`SlowStart`).

use std::time::Duration;

/// `LoadSignals`: how each destination's latency estimate and reported load are kept.
///
/// ```
/// use healthpick::config::{ClusterConfig, LoadReportsConfig, LoadSignalsConfig};
/// use std::time::Duration;
///
/// let cluster = ClusterConfig::new("payments").load_signals(
///     LoadSignalsConfig::default()
///         .decay_time(Duration::from_secs(5))
///         .default_rtt(Duration::from_millis(50))
///         .load_reports(LoadReportsConfig::default().blackout(Duration::from_secs(2))),
/// );
/// assert_eq!(cluster.load_signals_setting().decay_time_setting(), Duration::from_secs(5));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct LoadSignalsConfig {
    pub(crate) decay_time: Duration,
    pub(crate) default_rtt: Duration,
    pub(crate) load_reports: LoadReportsConfig,
}

impl Default for LoadSignalsConfig {
    /// Decay 10 s, default RTT 30 ms, load reports read.
    fn default() -> Self {
        LoadSignalsConfig {
            decay_time: Duration::from_secs(10),
            default_rtt: Duration::from_millis(30),
            load_reports: LoadReportsConfig::default(),
        }
    }
}

impl LoadSignalsConfig {
    /// `DecayTime`: how fast lower latency samples pull a destination's estimate down, and how
    /// fast an estimate without samples fades (after this long an old estimate weighs 1/e).
    /// Default 10 s.
    pub fn decay_time(mut self, decay: Duration) -> Self {
        self.decay_time = decay;
        self
    }

    /// `DefaultRtt`: the latency estimate of a destination before its first sample. Default
    /// 30 ms.
    pub fn default_rtt(mut self, rtt: Duration) -> Self {
        self.default_rtt = rtt;
        self
    }

    /// `LoadReports`: how the load servers report in `endpoint-load-metrics` is read.
    pub fn load_reports(mut self, reports: LoadReportsConfig) -> Self {
        self.load_reports = reports;
        self
    }

    /// The decay time in force.
    pub fn decay_time_setting(&self) -> Duration {
        self.decay_time
    }

    /// The default RTT in force.
    pub fn default_rtt_setting(&self) -> Duration {
        self.default_rtt
    }

    /// How load reports are read.
    pub fn load_reports_setting(&self) -> &LoadReportsConfig {
        &self.load_reports
    }
}

/// `LoadSignals:LoadReports`: the load a server reports in its responses' `endpoint-load-metrics`
/// header (ORCA over HTTP, as Envoy reads it), read by the wrapped client, the middleware and
/// the tower layer. A destination's reports count once it has reported for the blackout period
/// (a server's first reports, from a cold start, are not yet representative), and stop counting
/// when none came for the expiration period.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadReportsConfig {
    pub(crate) enabled: bool,
    pub(crate) blackout: Duration,
    pub(crate) expiration: Duration,
}

impl Default for LoadReportsConfig {
    /// Read, with a 10 s blackout and a 3 min expiration.
    fn default() -> Self {
        LoadReportsConfig {
            enabled: true,
            blackout: Duration::from_secs(10),
            expiration: Duration::from_secs(180),
        }
    }
}

impl LoadReportsConfig {
    /// `Enabled`: whether reports are read at all. Default true.
    pub fn enabled(mut self, enabled: bool) -> Self {
        self.enabled = enabled;
        self
    }

    /// `Blackout`: how long after a destination's first report (or its first after an
    /// expiry) its reports begin to count. Default 10 s.
    pub fn blackout(mut self, blackout: Duration) -> Self {
        self.blackout = blackout;
        self
    }

    /// `Expiration`: how long a report counts without a new one. Default 3 min.
    pub fn expiration(mut self, expiration: Duration) -> Self {
        self.expiration = expiration;
        self
    }

    /// Whether reports are read.
    pub fn enabled_setting(&self) -> bool {
        self.enabled
    }

    /// The blackout period in force.
    pub fn blackout_setting(&self) -> Duration {
        self.blackout
    }

    /// The expiration period in force.
    pub fn expiration_setting(&self) -> Duration {
        self.expiration
    }
}

/// `TierSpill:Mode`: what happens to the preferred tier's traffic when that tier is loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SpillMode {
    /// The next tier gets traffic only when the preferred tier has nothing available (the
    /// default).
    #[default]
    Strict,
    /// The next tier also takes the share the preferred tier cannot serve without queueing.
    Load,
}

impl SpillMode {
    /// Both modes, the default first.
    pub const ALL: [SpillMode; 2] = [SpillMode::Strict, SpillMode::Load];

    /// Its name in a configuration document (`Strict`).
    pub fn name(self) -> &'static str {
        match self {
            SpillMode::Strict => "Strict",
            SpillMode::Load => "Load",
        }
    }
}

/// `TierSpill`: local first without overload. Under `Load`, the preferred tier (the best tier
/// of the best health class) keeps all traffic while its latency stays near its own unloaded
/// latency; when its latency passes `UpperMark` times that, the next tier of the same class is
/// given a share of the picks, grown until the preferred tier is back under the mark; once the
/// preferred tier has stayed below `LowerMark` times its unloaded latency for `Dwell`, the share
/// is withdrawn step by step. Health, panic and empty tiers are decided first: a tier with
/// nothing available hands all its traffic to the next at once, whatever the mode.
///
/// ```
/// use healthpick::config::{ClusterConfig, SpillMode, TierSpillConfig};
///
/// let cluster = ClusterConfig::new("payments")
///     .tier_spill(TierSpillConfig::default().mode(SpillMode::Load));
/// assert_eq!(cluster.tier_spill_setting().mode_setting(), SpillMode::Load);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct TierSpillConfig {
    pub(crate) mode: SpillMode,
    pub(crate) upper_mark: f64,
    pub(crate) lower_mark: f64,
    pub(crate) dwell: Duration,
}

impl Default for TierSpillConfig {
    /// `Strict`; under `Load`: upper mark 1.5, lower mark 1.2, dwell 5 s.
    fn default() -> Self {
        TierSpillConfig {
            mode: SpillMode::Strict,
            upper_mark: 1.5,
            lower_mark: 1.2,
            dwell: Duration::from_secs(5),
        }
    }
}

impl TierSpillConfig {
    /// `Mode`: `Strict` (default) or `Load`.
    pub fn mode(mut self, mode: SpillMode) -> Self {
        self.mode = mode;
        self
    }

    /// `UpperMark`: the preferred tier's latency, as a multiple of its unloaded latency, above
    /// which it counts as overloaded and the next tier's share grows. Default 1.5: a queue of
    /// half a request's service time on average, a clear sign of saturation that ordinary
    /// jitter does not reach.
    pub fn upper_mark(mut self, mark: f64) -> Self {
        self.upper_mark = mark;
        self
    }

    /// `LowerMark`: the latency multiple below which the preferred tier has room again.
    /// Default 1.2: between the marks the share holds still, so it does not flap.
    pub fn lower_mark(mut self, mark: f64) -> Self {
        self.lower_mark = mark;
        self
    }

    /// `Dwell`: how long the preferred tier must stay below the lower mark before the share is
    /// withdrawn. Default 5 s: longer than a burst, short enough to come home soon after a peak.
    pub fn dwell(mut self, dwell: Duration) -> Self {
        self.dwell = dwell;
        self
    }

    /// The mode in force.
    pub fn mode_setting(&self) -> SpillMode {
        self.mode
    }

    /// The upper mark in force.
    pub fn upper_mark_setting(&self) -> f64 {
        self.upper_mark
    }

    /// The lower mark in force.
    pub fn lower_mark_setting(&self) -> f64 {
        self.lower_mark
    }

    /// The dwell time in force.
    pub fn dwell_setting(&self) -> Duration {
        self.dwell
    }
}

/// `SlowStart`: a destination that becomes available (new, or back from Unhealthy or an
/// ejection) counts with its weight times `max(MinWeightPercent / 100, (t / Window) ^ (1 /
/// Aggression))` until `Window` has passed, `t` counted from when it became available (Envoy's
/// formula). Every built-in policy honours it, and so does tier spill. A group whose
/// destinations all warm up still takes all its traffic: the ramp shapes shares, it never
/// refuses traffic.
///
/// ```
/// use healthpick::config::{ClusterConfig, SlowStartConfig};
/// use std::time::Duration;
///
/// let cluster = ClusterConfig::new("payments")
///     .slow_start(SlowStartConfig::new(Duration::from_secs(30)).aggression(2.0));
/// assert_eq!(cluster.slow_start_setting().unwrap().window_setting(), Duration::from_secs(30));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct SlowStartConfig {
    pub(crate) window: Duration,
    pub(crate) aggression: f64,
    pub(crate) min_weight_percent: f64,
}

impl SlowStartConfig {
    /// A ramp over `window`, aggression 1 (linear), at least 10% of the weight.
    pub fn new(window: Duration) -> Self {
        SlowStartConfig {
            window,
            aggression: 1.0,
            min_weight_percent: 10.0,
        }
    }

    /// `Aggression`: the ramp's curve; 1 is linear, more is faster at first. Default 1.
    pub fn aggression(mut self, aggression: f64) -> Self {
        self.aggression = aggression;
        self
    }

    /// `MinWeightPercent`: the least share of its weight a warming destination counts with.
    /// Default 10.
    pub fn min_weight_percent(mut self, percent: f64) -> Self {
        self.min_weight_percent = percent;
        self
    }

    /// The window in force.
    pub fn window_setting(&self) -> Duration {
        self.window
    }

    /// The aggression in force.
    pub fn aggression_setting(&self) -> f64 {
        self.aggression
    }

    /// The minimum weight in force, in percent.
    pub fn min_weight_percent_setting(&self) -> f64 {
        self.min_weight_percent
    }

    /// The factor a destination's weight counts with `since` after it became available: 1 once
    /// the window has passed.
    pub fn factor(&self, since: Duration) -> f64 {
        let window = self.window.as_secs_f64();
        if window <= 0.0 || since.as_secs_f64() >= window {
            return 1.0;
        }
        let ramp =
            (since.as_secs_f64() / window).powf(1.0 / self.aggression.max(f64::MIN_POSITIVE));
        ramp.max(self.min_weight_percent / 100.0).min(1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::SlowStartConfig;
    use std::time::Duration;

    /// Envoy's formula: a linear ramp, floored at the minimum, 1 from the end of the window.
    #[test]
    fn the_slow_start_factor_ramps_from_the_minimum_to_one() {
        let ramp = SlowStartConfig::new(Duration::from_secs(30));
        let at = |s: f64| ramp.factor(Duration::from_secs_f64(s));
        assert_eq!(at(0.0), 0.1);
        assert_eq!(at(1.5), 0.1);
        assert!((at(15.0) - 0.5).abs() < 1e-12);
        assert_eq!(at(30.0), 1.0);
        assert_eq!(at(300.0), 1.0);
        let eager = ramp.clone().aggression(2.0).min_weight_percent(0.0);
        assert!((eager.factor(Duration::from_secs_f64(7.5)) - 0.5).abs() < 1e-12);
    }
}
