//! A destination's recent request outcomes in 1-second buckets over a sliding window, kept
//! exactly as YARP's `ProxiedRequestHistory` keeps them:
//!
//! - a bucket is stamped with its closing time (its first outcome's time + 1 s) and closed by
//!   the first outcome at or after that time;
//! - each outcome is counted first, then closed buckets stamped **more than** the window before
//!   now are dropped (the open bucket never is); nothing decays between outcomes.
//!
//! Every destination carries one in its warm part, beside its health (a success that cannot
//! change the verdict is counted in the block the pick touched and joins the window later, see
//! `success_credit.rs`), so that recording an outcome touches no memory of its own: while no bucket closes or expires an
//! outcome reads and writes only the window's 48 bytes (the open bucket, the window's sums, the
//! oldest closed bucket's stamp); the closed buckets, a ring one box away that grows to the
//! window's length once and then allocates no more, are touched about once a second.

use std::collections::VecDeque;
use std::time::Duration;

const BUCKET_NANOS: u64 = 1_000_000_000;

/// No time: before the first outcome, or no closed bucket.
const NEVER: u64 = u64::MAX;

/// A destination's outcomes in 1-second buckets over a sliding window (YARP's
/// `ProxiedRequestHistory`), for passive policies that judge a failure rate. Reached with
/// [`PassivePolicyContext::with_outcome_window`](crate::policy::PassivePolicyContext::with_outcome_window).
///
/// ```
/// use std::time::Duration;
/// use healthpick::policy::OutcomeWindow;
///
/// let mut window = OutcomeWindow::default();
/// let ten_s = Duration::from_secs(10);
/// window.record(Duration::from_millis(0), ten_s, true);
/// let counts = window.record(Duration::from_millis(500), ten_s, false);
/// assert_eq!((counts.failed, counts.total), (1, 2));
/// // 12 s later the first bucket (closed at 1 s) has left the window.
/// let counts = window.record(Duration::from_millis(12_500), ten_s, false);
/// assert_eq!((counts.failed, counts.total), (0, 1));
/// ```
#[derive(Debug, Clone)]
pub struct OutcomeWindow {
    /// Closing time of the open bucket, in nanoseconds of the engine's clock.
    open_closes_at: u64,
    /// Closing time of the oldest closed bucket (the front of `closed`).
    oldest_closed: u64,
    total: u64,
    failed: u64,
    /// Outcomes of the open bucket (all within one second of its first).
    open_total: u32,
    open_failed: u32,
    /// Closed buckets: (closing time, total, failed), oldest first; boxed, so that the window
    /// stays 48 bytes in the destination's hot block, and allocated when the first bucket
    /// closes.
    #[allow(clippy::box_collection)]
    closed: Option<Box<VecDeque<(u64, u32, u32)>>>,
}

/// The counts of an [`OutcomeWindow`] after an outcome was recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowCounts {
    /// Outcomes recorded as failed in the window.
    pub failed: u64,
    /// All outcomes in the window.
    pub total: u64,
}

impl Default for OutcomeWindow {
    fn default() -> Self {
        OutcomeWindow {
            open_closes_at: NEVER,
            oldest_closed: NEVER,
            total: 0,
            failed: 0,
            open_total: 0,
            open_failed: 0,
            closed: None,
        }
    }
}

/// Nanoseconds, saturating (584 years).
pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX - 1)
}

impl OutcomeWindow {
    /// Records one outcome at `now` (`failed` or not), then drops the closed buckets stamped
    /// more than `window` before `now`; returns the window's counts.
    #[inline]
    pub fn record(&mut self, now: Duration, window: Duration, failed: bool) -> WindowCounts {
        let now = nanos(now);
        if self.open_closes_at == NEVER {
            self.open_closes_at = now.saturating_add(BUCKET_NANOS);
        } else if now >= self.open_closes_at {
            self.close_open_bucket(now);
        }
        self.open_total = self.open_total.saturating_add(1);
        self.total += 1;
        if failed {
            self.open_failed = self.open_failed.saturating_add(1);
            self.failed += 1;
        }
        if self.oldest_closed != NEVER && now.saturating_sub(self.oldest_closed) > nanos(window) {
            self.expire(now, nanos(window));
        }
        self.counts()
    }

    /// The window's counts as of the last outcome.
    pub fn counts(&self) -> WindowCounts {
        WindowCounts {
            failed: self.failed,
            total: self.total,
        }
    }

    /// Until when (exclusive) an outcome would be counted in the open bucket with no bucket
    /// closing and none expiring, given the detection `window`; `None` before the first outcome.
    ///
    /// ```
    /// use std::time::Duration;
    /// use healthpick::policy::OutcomeWindow;
    ///
    /// let mut window = OutcomeWindow::default();
    /// let ten_s = Duration::from_secs(10);
    /// assert_eq!(window.quiet_until(ten_s), None);
    /// window.record(Duration::from_millis(200), ten_s, false);
    /// // The open bucket closes 1 s after its first outcome.
    /// assert_eq!(window.quiet_until(ten_s), Some(Duration::from_millis(1_200)));
    /// ```
    pub fn quiet_until(&self, window: Duration) -> Option<Duration> {
        self.quiet_until_nanos(window).map(Duration::from_nanos)
    }

    /// [`quiet_until`](Self::quiet_until) in nanoseconds.
    fn quiet_until_nanos(&self, window: Duration) -> Option<u64> {
        if self.open_closes_at == NEVER {
            return None;
        }
        // A closed bucket expires once now - stamp > window: now <= stamp + window keeps it.
        let expiry = match self.oldest_closed {
            NEVER => NEVER,
            oldest => oldest.saturating_add(nanos(window)).saturating_add(1),
        };
        Some(self.open_closes_at.min(expiry))
    }

    /// Counts `n` non-failed outcomes that arrived before [`quiet_until`](Self::quiet_until):
    /// what `n` calls of [`record`](Self::record) would have done.
    pub(crate) fn count_successes(&mut self, n: u32) {
        self.open_total = self.open_total.saturating_add(n);
        self.total += u64::from(n);
    }

    /// Forgets every outcome.
    pub fn clear(&mut self) {
        *self = OutcomeWindow::default();
    }

    /// The open bucket joins the closed ones; a new one opens at `now`.
    #[cold]
    fn close_open_bucket(&mut self, now: u64) {
        let stamp = self.open_closes_at;
        self.closed.get_or_insert_with(Box::default).push_back((
            stamp,
            self.open_total,
            self.open_failed,
        ));
        if self.oldest_closed == NEVER {
            self.oldest_closed = stamp;
        }
        self.open_closes_at = now.saturating_add(BUCKET_NANOS);
        self.open_total = 0;
        self.open_failed = 0;
    }

    /// Drops the closed buckets stamped more than `window` before `now`.
    #[cold]
    fn expire(&mut self, now: u64, window: u64) {
        let Some(closed) = self.closed.as_mut() else {
            return;
        };
        while let Some(&(stamp, total, failed)) = closed.front() {
            if now.saturating_sub(stamp) > window {
                closed.pop_front();
                self.total -= u64::from(total);
                self.failed -= u64::from(failed);
            } else {
                break;
            }
        }
        self.oldest_closed = closed.front().map_or(NEVER, |&(stamp, _, _)| stamp);
    }

    /// Closed buckets kept (for tests).
    #[cfg(test)]
    pub(crate) fn closed_buckets(&self) -> usize {
        self.closed.as_ref().map_or(0, |closed| closed.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The window fits the destination's hot block: 48 bytes, the closed buckets one box away.
    #[test]
    fn the_window_is_48_bytes() {
        assert_eq!(std::mem::size_of::<OutcomeWindow>(), 48);
    }
}
