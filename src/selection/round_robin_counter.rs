//! A cluster's round-robin counter (SPEC §6), handed to threads in blocks so that two threads
//! going round one group do not write the same cache line of counts.
//!
//! A round-robin pick writes its destination's in-flight count, and a group's counts sit side by
//! side, sixteen to a cache line (`destination/in_flight.rs`). If every thread walked the group
//! with a counter of its own, two threads whose positions came within sixteen places of each
//! other would move a line between their cores on every pick and, slowed alike, stay together.
//! So a thread picking an unweighted group in place takes the counter's values a *block* at a
//! time ([`block`]): from the counter's current value to the end of the stretch of four cache
//! lines (64 counts) that value's index falls in, and walks it on its own. Two threads hold
//! blocks of different lines while the group has more stretches than there are threads; a thread
//! writes the shared counter once per block (up to 64 picks) and meets the other thread's writes
//! once per line (16 picks): the line was last written by whichever thread walked it last.
//!
//! It is still the spec's one counter: every value is used once, by the thread that took its
//! block, with index = value mod group size. One thread alone takes every block in turn, so it
//! sees the exact sequence 0, 1, 2, ... of the counter (across changes of the group too); threads
//! together use each value once, so the spread stays even (each thread at most one block,
//! 64 picks, off its share).
//!
//! Why four lines and not one: taking a block costs a shared compare-and-swap and two
//! divisions; spread over sixteen picks that cost a thread about 1 ns a pick more than over 64,
//! and two threads scaled no better.
//!
//! Taking a block writes shared memory on the pick path, once per block, which SPEC §12 rules
//! out for a round-robin cursor. It is kept because nothing measured that writes no shared memory
//! scaled as well: a counter per thread, each from its own start (the design before this one),
//! reached 0.65-0.78 of the machine's own two-thread scaling at 100 destinations, each thread
//! walking the lines in a random order of its own 0.59-0.86, blocks 0.85-0.97 (README,
//! Performance).

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::destination::in_flight::COUNTS_PER_LINE;
use crate::destination::pick_group::GroupCounts;

/// The most values a block holds: the counts of four cache lines.
const BLOCK: usize = 4 * COUNTS_PER_LINE;

/// A cluster's round-robin counter, shared by all its snapshots. On a cache line of its own:
/// threads write it once per block, and nothing a pick reads may share the line.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct RoundRobinCounter {
    /// The spec's one counter.
    value: AtomicUsize,
    /// Hands each thread its place among the cluster's pickers: where its own counter for the
    /// policy objects (weighted groups, custom policies) starts.
    places: AtomicUsize,
}

impl RoundRobinCounter {
    /// The counter's value, advanced by one.
    #[inline]
    pub fn next(&self) -> usize {
        self.value.fetch_add(1, Ordering::Relaxed)
    }

    /// Takes the counter's next block for a group of `n` (>= 1) whose first count sits `offset`
    /// (< 16) counts into its cache line: the values from the counter's current one to the end
    /// of its index's stretch of lines (see [`block`]).
    pub fn take_block(&self, n: usize, offset: usize) -> Range<usize> {
        let mut from = self.value.load(Ordering::Relaxed);
        loop {
            let block = block(from, n, offset);
            match self.value.compare_exchange_weak(
                from,
                block.end,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return block,
                Err(now) => from = now,
            }
        }
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

    /// The index in the unweighted group of `n` (>= 2) whose counts are `counts`: the cluster
    /// counter's next value mod `n`, walked a block at a time (see the module's docs).
    fn index(&self, n: usize, counts: &GroupCounts) -> usize;
}

/// The block of the counter's values that starts at `from`, for a group of `n` (>= 1) whose
/// first count sits `offset` (< 16) counts into its line: up to the end of the stretch of
/// [`BLOCK`] counts (four lines, counted from the line the group starts in) that `from mod n`
/// falls in, or the end of the group. A group within one stretch is gone round several times a
/// block instead, so that threads take a block about every 64 picks there too. Never empty.
#[inline]
pub(crate) fn block(from: usize, n: usize, offset: usize) -> Range<usize> {
    let index = from % n;
    let line_end = ((index + offset) / BLOCK + 1) * BLOCK - offset;
    let mut len = line_end.min(n) - index;
    if n + offset <= BLOCK {
        len += n * (BLOCK / n);
    }
    from..from + len
}

#[cfg(test)]
mod tests {
    use super::{block, RoundRobinCounter};

    #[test]
    fn blocks_end_where_four_lines_of_counts_or_the_group_do() {
        // 200 counts starting 5 into a line: 59 values, then 64 at a time, then the last 13.
        assert_eq!(block(0, 200, 5), 0..59);
        assert_eq!(block(59, 200, 5), 59..123);
        assert_eq!(block(187, 200, 5), 187..200);
        assert_eq!(block(200, 200, 5), 200..259);
        // Taken part-way (after a retry used a value): to the end of that stretch.
        assert_eq!(block(61, 200, 5), 61..123);
        // A group within one stretch: round it several times.
        assert_eq!(block(0, 3, 0), 0..66);
        assert_eq!(block(19, 3, 0), 19..84);
        for n in 1..300 {
            for offset in 0..16 {
                let mut from = 0;
                while from < 3 * n {
                    let b = block(from, n, offset);
                    assert!(!b.is_empty(), "n {n} offset {offset} from {from}");
                    if n + offset > 64 {
                        // The block's counts share one stretch of four lines, and it does not
                        // wrap.
                        let (first, last) = (b.start % n, (b.end - 1) % n);
                        assert!(first <= last);
                        assert_eq!((first + offset) / 64, (last + offset) / 64);
                    } else {
                        assert!(b.len() > 64 - n);
                    }
                    from = b.end;
                }
            }
        }
    }

    #[test]
    fn one_taker_gets_every_value_in_order() {
        let counter = RoundRobinCounter::default();
        let mut values = Vec::new();
        while values.len() < 250 {
            values.extend(counter.take_block(100, 5));
        }
        assert_eq!(values, (0..values.len()).collect::<Vec<_>>());
        // A retry's single value sits between two blocks.
        let before = counter.next();
        assert_eq!(before, values.len());
        assert_eq!(counter.take_block(100, 5).start, before + 1);
        assert_eq!((counter.next_place(), counter.next_place()), (0, 1));
    }

    #[test]
    fn the_counter_sits_on_lines_of_its_own() {
        assert_eq!(std::mem::align_of::<RoundRobinCounter>(), 128);
        assert_eq!(std::mem::size_of::<RoundRobinCounter>(), 128);
    }
}
