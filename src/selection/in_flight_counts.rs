//! [`InFlightCounts`]: the in-flight counts of a whole group, read as cheaply as a scan can be
//! (LeastRequests). Prepared once per group; a pick walks the compact arrays of counts
//! the group's destinations keep in their cluster's pool (`destination/in_flight.rs`) instead of
//! visiting every destination.
//!
//! The scan finds the first destination with the strictly smallest count:
//!
//! - counts are read eight at a time, and a block's smallest is compared with the best so far
//!   only once, so the reads do not wait on each other's comparisons (the first of equal
//!   counts still wins: a block replaces the best only with a strictly smaller count, and within
//!   a block its first smallest is taken);
//! - nothing is smaller than 0: the scan stops at the first destination with nothing in flight,
//!   so an idle or lightly loaded group costs only as far as its first idle destination.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use crate::destination::in_flight::CountChunk;
use crate::destination::Destination;

/// Where a group's in-flight counts are, prepared once per group (in
/// [`LoadBalancingPolicy::prepare`](super::LoadBalancingPolicy::prepare)) for a policy that reads
/// every count on every pick.
///
/// ```
/// use healthpick::selection::{InFlightCounts, LoadBalancingPolicy, PickContext, Prepared};
/// use healthpick::Destination;
/// use std::sync::Arc;
///
/// /// The least loaded destination of the group, as `LeastRequests` finds it.
/// struct Least;
/// impl LoadBalancingPolicy for Least {
///     fn prepare(&self, group: &[Arc<Destination>]) -> Prepared {
///         Prepared::new(InFlightCounts::of(group))
///     }
///     fn pick(&self, ctx: &PickContext<'_>, group: &[Arc<Destination>]) -> usize {
///         ctx.prepared::<InFlightCounts>()
///             .map_or(0, |counts| counts.first_least(group))
///     }
/// }
/// ```
pub struct InFlightCounts {
    runs: Box<[Run]>,
    /// The length of the group it was prepared for.
    len: usize,
}

/// A stretch of the group: positions `at..at + len` count at cells `from`, `from + step`, ...
/// of `chunk` (its step: 4 in a spread pool, 2 in an alternate one, else 1; see `Layout`).
struct Run {
    chunk: Arc<CountChunk>,
    from: usize,
    len: usize,
    at: usize,
}

impl InFlightCounts {
    /// Where the counts of `group` are.
    pub fn of(group: &[Arc<Destination>]) -> Self {
        let mut runs: Vec<Run> = Vec::new();
        for (position, d) in group.iter().enumerate() {
            let (c, index) = d.in_flight.place();
            match runs.last_mut() {
                // The place after the previous destination's: the same run goes on.
                Some(run)
                    if Arc::ptr_eq(&run.chunk, c) && run.from + run.len * c.step() == index =>
                {
                    run.len += 1;
                }
                _ => runs.push(Run {
                    chunk: c.clone(),
                    from: index,
                    len: 1,
                    at: position,
                }),
            }
        }
        InFlightCounts {
            runs: runs.into_boxed_slice(),
            len: group.len(),
        }
    }

    /// The index in `group` (the group these counts were prepared for) of the first destination
    /// with the fewest requests in flight; 0 for an empty group. Given another group (of
    /// another length), it reads that group's counts from its destinations.
    #[inline]
    pub fn first_least(&self, group: &[Arc<Destination>]) -> usize {
        if group.len() != self.len {
            return first_least(group.len(), |i| group[i].in_flight());
        }
        let mut scan = Scan::default();
        for run in &*self.runs {
            let step = run.chunk.step();
            let found_0 = if step == 1 {
                scan.side_by_side(&run.chunk.counts[run.from..run.from + run.len], run.at)
            } else {
                let counts = &run.chunk.counts[run.from..];
                scan.block(run.len, run.at, |i| {
                    counts[i * step].load(Ordering::Relaxed) as usize
                })
            };
            if found_0 {
                break;
            }
        }
        scan.best
    }
}

impl std::fmt::Debug for InFlightCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InFlightCounts")
            .field("len", &self.len)
            .field("runs", &self.runs.len())
            .finish()
    }
}

/// The first index in `0..n` whose `count` is the smallest (0 when `n` is 0).
#[inline]
pub(crate) fn first_least(n: usize, count: impl Fn(usize) -> usize) -> usize {
    let mut scan = Scan::default();
    scan.block(n, 0, count);
    scan.best
}

/// Counts read per block.
const BLOCK: usize = 8;

/// The best so far of a scan in group order.
struct Scan {
    least: usize,
    best: usize,
}

impl Default for Scan {
    fn default() -> Self {
        Scan {
            least: usize::MAX,
            best: 0,
        }
    }
}

impl Scan {
    /// [`Scan::block`] over counts side by side, read in blocks of [`BLOCK`] known to be in
    /// bounds: no bounds check a count (indexing the slice in `block` checked each of eight).
    #[inline]
    fn side_by_side(&mut self, counts: &[AtomicU32], at: usize) -> bool {
        let (blocks, rest) = counts.as_chunks::<BLOCK>();
        for (b, block) in blocks.iter().enumerate() {
            let found_0 = self.block(BLOCK, at + b * BLOCK, |k| {
                block[k].load(Ordering::Relaxed) as usize
            });
            if found_0 {
                return true;
            }
        }
        let rest_at = at + blocks.len() * BLOCK;
        self.block(rest.len(), rest_at, |k| {
            rest[k].load(Ordering::Relaxed) as usize
        })
    }

    /// Reads the counts `count(0..n)` of group positions `at..at + n`; true once a 0 was found
    /// (nothing later can be smaller).
    #[inline]
    fn block(&mut self, n: usize, at: usize, count: impl Fn(usize) -> usize) -> bool {
        let mut start = 0;
        while start + BLOCK <= n {
            let block: [usize; BLOCK] = std::array::from_fn(|k| count(start + k));
            let smallest = block.iter().copied().fold(usize::MAX, usize::min);
            if smallest < self.least {
                self.least = smallest;
                self.best = at + start + block.iter().position(|&c| c == smallest).unwrap_or(0);
                if smallest == 0 {
                    return true;
                }
            }
            start += BLOCK;
        }
        for i in start..n {
            let c = count(i);
            if c < self.least {
                self.least = c;
                self.best = at + i;
                if c == 0 {
                    return true;
                }
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plain definition: one pass, strictly smaller replaces.
    fn reference(counts: &[usize]) -> usize {
        let mut best = 0;
        let mut least = usize::MAX;
        for (i, &c) in counts.iter().enumerate() {
            if c < least {
                least = c;
                best = i;
            }
        }
        best
    }

    #[test]
    fn the_first_of_the_smallest_counts_wins() {
        let cases: [&[usize]; 8] = [
            &[],
            &[3],
            &[2, 1, 1],
            &[5, 4, 3, 2, 1, 1, 2, 3, 4, 5, 1],
            &[7; 20],
            &[9, 9, 9, 9, 9, 9, 9, 9, 8, 9, 9, 9, 9, 9, 9, 9, 8, 1],
            &[4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 0, 0],
            &[
                1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0,
            ],
        ];
        for counts in cases {
            assert_eq!(
                first_least(counts.len(), |i| counts[i]),
                reference(counts),
                "{counts:?}"
            );
        }
    }

    proptest::proptest! {
        /// Any counts, any length (blocks and the remainder), read in any runs: the same index
        /// as one plain pass.
        #[test]
        fn the_block_scan_picks_what_one_pass_picks(
            counts in proptest::collection::vec(0usize..4, 0..70),
            cuts in proptest::collection::vec(0usize..70, 0..5),
        ) {
            proptest::prop_assert_eq!(first_least(counts.len(), |i| counts[i]), reference(&counts));
            let mut cuts: Vec<usize> = cuts.into_iter().filter(|&c| c <= counts.len()).collect();
            cuts.push(0);
            cuts.push(counts.len());
            cuts.sort_unstable();
            let mut scan = Scan::default();
            for pair in cuts.windows(2) {
                let (from, to) = (pair[0], pair[1]);
                if scan.block(to - from, from, |i| counts[from + i]) {
                    break;
                }
            }
            proptest::prop_assert_eq!(scan.best, reference(&counts));
        }
    }
}
