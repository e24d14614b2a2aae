//! Where time comes from.
//!
//! Every rule that depends on time (the failure-rate window, reactivation, "last change" stamps)
//! reads it through [`Clock`], so tests and the simulator can drive time by hand with
//! [`ManualClock`] while production uses [`SystemClock`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A monotonic clock, read as the time elapsed since the clock's own start.
///
/// Implementations must be cheap to read and never go backwards.
pub trait Clock: Send + Sync + 'static {
    /// Time elapsed since this clock's start.
    fn now(&self) -> Duration;
}

/// The real clock, based on [`tokio::time::Instant`].
///
/// Outside a tokio runtime it is the operating system's monotonic clock; inside a runtime whose
/// time is paused (`tokio::time::pause()`), it follows the paused time, so timing tests stay
/// deterministic.
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    start: tokio::time::Instant,
}

impl SystemClock {
    /// A clock whose zero is now.
    pub fn new() -> Self {
        SystemClock {
            start: tokio::time::Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Duration {
        tokio::time::Instant::now().saturating_duration_since(self.start)
    }
}

/// A clock that moves only when told to: for tests and the simulator.
///
/// ```
/// use healthpick::{Clock, ManualClock};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// clock.advance(Duration::from_millis(1500));
/// assert_eq!(clock.now(), Duration::from_millis(1500));
/// ```
#[derive(Debug, Default)]
pub struct ManualClock {
    nanos: AtomicU64,
}

impl ManualClock {
    /// A clock standing at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        self.nanos.fetch_add(saturating_nanos(by), Ordering::SeqCst);
    }

    /// Sets the clock to `to`; a time earlier than now is ignored (the clock never goes back).
    pub fn set(&self, to: Duration) {
        self.nanos.fetch_max(saturating_nanos(to), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::SeqCst))
    }
}

impl<C: Clock> Clock for std::sync::Arc<C> {
    fn now(&self) -> Duration {
        (**self).now()
    }
}

fn saturating_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
