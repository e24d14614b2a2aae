//! A cluster's round-robin counter, and where a pick's counter value comes from.
//!
//! YARP's counter is one per cluster; a pick on the pick path writes no shared memory but
//! its destination's in-flight count, so each thread counts on its own (a
//! `ThreadCursor` in `engine/table.rs`): the first thread that picks from a cluster from 0, so
//! that one thread sees the exact sequence 0, 1, 2, ..., later threads from offsets of their own
//! and in laps that start at unrelated places, so that threads together spread evenly without
//! walking the same cache lines of counts. The cluster's [`RoundRobinCounter`] hands each
//! thread its place among the cluster's pickers, and counts the picks made from inside a pick
//! (off the pick path).

use std::sync::atomic::{AtomicUsize, Ordering};

/// A cluster's round-robin counter, shared by all its snapshots. On a cache line of its own:
/// nothing a pick reads may share a line that threads write.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct RoundRobinCounter {
    /// The counter of picks made from inside a pick (a policy that picks).
    value: AtomicUsize,
    /// Hands each thread its place among the cluster's pickers: 0 for the first thread, which
    /// counts from 0.
    places: AtomicUsize,
}

impl RoundRobinCounter {
    /// The counter's value, advanced by one.
    #[inline]
    pub fn next(&self) -> usize {
        self.value.fetch_add(1, Ordering::Relaxed)
    }

    /// The next place among the cluster's pickers: 0 for the first thread, 1, 2, ...
    #[inline]
    pub fn next_place(&self) -> usize {
        self.places.fetch_add(1, Ordering::Relaxed)
    }
}

/// Where a round-robin pick's position comes from: a thread's cursor or the cluster's counter.
pub(crate) trait Cursor {
    /// A counter's value, advanced by one: what a policy object's context hands out.
    fn next(&self) -> usize;

    /// The index of the next pick from an unweighted group of `n` (>= 2), picked in place.
    fn index(&self, n: usize) -> usize;
}

#[cfg(test)]
mod tests {
    use super::RoundRobinCounter;

    #[test]
    fn the_counter_counts_and_hands_out_places_in_order() {
        let counter = RoundRobinCounter::default();
        assert_eq!((counter.next(), counter.next()), (0, 1));
        assert_eq!((counter.next_place(), counter.next_place()), (0, 1));
        assert_eq!(counter.next(), 2);
    }

    #[test]
    fn the_counter_sits_on_lines_of_its_own() {
        assert_eq!(std::mem::align_of::<RoundRobinCounter>(), 128);
        assert_eq!(std::mem::size_of::<RoundRobinCounter>(), 128);
    }
}
