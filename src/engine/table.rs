//! The cluster table: cluster id (case-insensitive) to cluster runtime. It changes only when the
//! set of clusters does (a reload adding or removing one); health and destination changes are
//! published in each cluster's own snapshot and never touch it.
//!
//! A pick reads both the table and its cluster's snapshot through a per-thread
//! [`arc_swap::Cache`]: while neither changed, finding them costs two pointer comparisons and no
//! atomic read-modify-write at all. A thread's cache holds the last table and the last snapshot of
//! each cluster it picked from until its next pick (or until it exits); that keeps memory, never a
//! decision: every pick compares against what is published now.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::cache::Cache;
use arc_swap::{ArcSwap, Guard};

use super::runtime::{ClusterRuntime, SnapshotCell};
use crate::cluster::snapshot::ClusterSnapshot;
use crate::destination::handle::Ticket;
use crate::destination::pick_group::GroupCounts;
use crate::ids::with_folded;
use crate::rng::{with_thread_generator, LocalRng};
use crate::selection::round_robin_counter::{Cursor, RoundRobinCounter};

/// Every cluster, in config order, with its folded id.
#[derive(Default)]
pub(crate) struct ClusterTable {
    entries: Vec<(Arc<str>, Arc<ClusterRuntime>)>,
    /// Folded id -> position in `entries`, for tables too large to scan.
    index: HashMap<Arc<str>, usize, foldhash::fast::RandomState>,
}

/// Up to this many clusters, a lookup compares ids one by one instead of hashing: a service
/// usually calls a handful of clusters, and comparing a few short ids (mostly just their lengths)
/// costs less than hashing one.
const SCAN_LIMIT: usize = 8;

impl ClusterTable {
    /// Adds a cluster under its folded id (ids are unique: validation rejects duplicates).
    pub fn push(&mut self, key: Arc<str>, runtime: Arc<ClusterRuntime>) {
        self.index.insert(key.clone(), self.entries.len());
        self.entries.push((key, runtime));
    }

    /// Looks up a cluster by id, case-insensitively, without allocating for ASCII ids of up to
    /// 64 bytes.
    #[inline]
    pub fn get(&self, id: &str) -> Option<&Arc<ClusterRuntime>> {
        self.position(id).map(|position| &self.entries[position].1)
    }

    /// Where a cluster sits in the table (config order).
    #[inline(always)]
    fn position(&self, id: &str) -> Option<usize> {
        if self.entries.len() > SCAN_LIMIT {
            return self.position_indexed(id);
        }
        // Usual case: the caller spells the id as its folded form (lowercase ids, or the same
        // constant on every call): equal bytes, found without folding anything.
        for (position, (key, _)) in self.entries.iter().enumerate() {
            if same_bytes(key.as_bytes(), id.as_bytes()) {
                return Some(position);
            }
        }
        self.position_folded(id)
    }

    /// The small-table lookup of an id spelt other than its folded form: out of line.
    #[inline(never)]
    fn position_folded(&self, id: &str) -> Option<usize> {
        if id.is_ascii() {
            // A folded key is ASCII-lowercase when it matches an ASCII id at all, so an
            // ASCII-case-insensitive byte comparison is the fold comparison here.
            return self
                .entries
                .iter()
                .position(|(key, _)| key.as_bytes().eq_ignore_ascii_case(id.as_bytes()));
        }
        self.position_indexed(id)
    }

    /// The lookup of tables too big to scan (and of non-ASCII ids): out of line, so that the
    /// small-table scan inlined into every pick stays small.
    #[inline(never)]
    fn position_indexed(&self, id: &str) -> Option<usize> {
        with_folded(id, |folded| self.index.get(folded).copied())
    }

    /// Clusters in config order.
    pub fn runtimes(&self) -> impl Iterator<Item = &Arc<ClusterRuntime>> {
        self.entries.iter().map(|(_, runtime)| runtime)
    }
}

/// Whether `a` and `b` hold the same bytes, compared in place: cluster ids are short, and a call
/// to `memcmp` per table entry cost more than the comparison (seen in `perf` on the pick path).
/// Up to 16 bytes, two overlapping words from each end (three bytes below four) cover every byte
/// without a loop, as `memcmp` implementations do; a loop over bytes compiled to a vectorised
/// loop whose set-up cost more than comparing a short id. Longer ids use the library comparison.
#[inline(always)]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    match n {
        0 => true,
        1..=3 => (a[0] ^ b[0]) | (a[n / 2] ^ b[n / 2]) | (a[n - 1] ^ b[n - 1]) == 0,
        4..=8 => {
            let word =
                |s: &[u8], at: usize| u32::from_ne_bytes([s[at], s[at + 1], s[at + 2], s[at + 3]]);
            (word(a, 0) ^ word(b, 0)) | (word(a, n - 4) ^ word(b, n - 4)) == 0
        }
        9..=16 => {
            let word = |s: &[u8], at: usize| {
                let mut bytes = [0; 8];
                bytes.copy_from_slice(&s[at..at + 8]);
                u64::from_ne_bytes(bytes)
            };
            (word(a, 0) ^ word(b, 0)) | (word(a, n - 8) ^ word(b, n - 8)) == 0
        }
        _ => a == b,
    }
}

/// Where the table is published: shared with each thread's cache of it.
pub(crate) type TableCell = Arc<ArcSwap<ClusterTable>>;

/// One thread's view of the last engine it picked from.
struct PickCache {
    table: Cache<TableCell, Arc<ClusterTable>>,
    /// The table the snapshot caches belong to.
    seen: *const ClusterTable,
    /// By position in the table; emptied when the table changes.
    snapshots: Vec<Option<Entry>>,
    /// This thread's round-robin cursors, one per cluster; they outlive table changes.
    cursors: Vec<ThreadCursor>,
    /// This thread's random generator for picks (engines with a per-thread source), kept here
    /// so that a pick finds it with the cache instead of a second thread-local lookup.
    rng: LocalRng,
}

/// One cluster in a thread's cache.
struct Entry {
    snapshot: Cache<SnapshotCell, Arc<ClusterSnapshot>>,
    /// This thread's ticket to the snapshot's best group: what its handles hold.
    ticket: Arc<Ticket>,
    /// Position of the cluster's cursor in `PickCache::cursors`.
    cursor: usize,
}

/// A thread's round-robin cursor for one cluster.
///
/// An unweighted group picked in place: the block of the cluster counter's values this thread
/// took, walked with the index of its next value; the counter is written once per block (up to
/// 64 picks), see `selection/round_robin_counter.rs`. A policy object (weighted groups, custom
/// policies): a counter of the thread's own, from 0 for the first thread that picks from the
/// cluster (one thread sees the exact sequence 0, 1, 2, ...), from its own offset for every
/// later one, so threads together still spread evenly.
pub(crate) struct ThreadCursor {
    /// The cluster's counter: blocks of values, and each thread's place. Kept until the thread
    /// sees a table without the cluster.
    counter: Arc<RoundRobinCounter>,
    /// The thread's own counter, for policy objects.
    own: Cell<usize>,
    /// Values left in the block taken, and where it ends: the next value is `end - left`.
    left: Cell<usize>,
    end: Cell<usize>,
    /// The next value mod the size of the group picked from (set anew when the group changes,
    /// see [`ThreadCursor::regroup`]).
    index: Cell<usize>,
}

impl ThreadCursor {
    /// The index of the block's next value in a group of `n` whose first count sits `offset()`
    /// counts into its cache line, taking the counter's next block when this one is used up.
    #[inline(always)]
    fn index(&self, n: usize, offset: impl FnOnce() -> usize) -> usize {
        if self.left.get() == 0 {
            self.refill(n, offset());
        }
        let i = self.index.get();
        self.left.set(self.left.get() - 1);
        self.index.set(if i + 1 < n { i + 1 } else { 0 });
        i
    }

    /// Takes the counter's next block: its values are next.
    #[cold]
    #[inline(never)]
    fn refill(&self, n: usize, offset: usize) {
        let block = self.counter.take_block(n, offset);
        self.index.set(block.start % n);
        self.end.set(block.end);
        self.left.set(block.len());
    }

    /// The thread now picks from a group of `n`: the rest of the block is walked in it, from
    /// the next value's index there.
    #[cold]
    fn regroup(&self, n: usize) {
        let value = self.end.get() - self.left.get();
        self.index.set(value.checked_rem(n).unwrap_or(0));
    }
}

/// Spreads the starting offsets of the threads' cursors (2^64 / the golden ratio).
const OFFSET_STEP: u64 = 0x9E37_79B9_7F4A_7C15;

/// Where the cursor of the thread that takes `place` among a cluster's pickers starts in a
/// group of `n`: that fraction of the golden ratio's multiples of the way round the group
/// (0, 0.618, 0.236, 0.854, ... of `n`), so that any number of threads start far apart, and two
/// threads half-way-ish round (their counts then sit in different cache lines, see
/// `destination/in_flight.rs`). The first thread starts at 0.
fn offset(place: u64, n: usize) -> usize {
    let fraction = place.wrapping_mul(OFFSET_STEP);
    ((u128::from(fraction) * n as u128) >> 64) as usize
}

/// What a pick reads: the cluster's snapshot, the ticket its handle holds, where its
/// round-robin counter comes from, and this thread's random generator.
#[derive(Clone, Copy)]
pub(crate) struct Picking<'a> {
    pub snapshot: &'a ClusterSnapshot,
    /// A ticket to the snapshot's best group.
    pub ticket: &'a Arc<Ticket>,
    pub counter: Counter<'a>,
    /// The generator a per-thread random source draws from on this thread.
    pub rng: &'a LocalRng,
}

/// Where a pick's round-robin counter comes from.
#[derive(Clone, Copy)]
pub(crate) enum Counter<'a> {
    /// This thread's own cursor: the one at `at` among its cursors, looked up only when the
    /// policy counts (a pick by any other policy does not pay for finding it).
    Thread {
        cursors: &'a [ThreadCursor],
        at: usize,
    },
    /// The cluster's counter (picks from inside a pick, retries).
    Shared(&'a RoundRobinCounter),
}

impl Cursor for Counter<'_> {
    #[inline]
    fn next(&self) -> usize {
        match self {
            Counter::Thread { cursors, at } => {
                let cursor = &cursors[*at].own;
                let value = cursor.get();
                cursor.set(value.wrapping_add(1));
                value
            }
            Counter::Shared(shared) => shared.next(),
        }
    }

    #[inline(always)]
    fn index(&self, n: usize, counts: &GroupCounts) -> usize {
        match self {
            Counter::Thread { cursors, at } => cursors[*at].index(n, || counts.line_offset()),
            Counter::Shared(shared) => shared.next() % n,
        }
    }
}

thread_local! {
    /// The last engine this thread picked from (one engine per thread is the usual case; a
    /// thread that alternates between engines starts its cache over each time, which stays
    /// correct).
    static PICKS: RefCell<Option<PickCache>> = const { RefCell::new(None) };
}

/// Runs `f` on the current snapshot of `cluster` (`None` when there is no such cluster) and the
/// round-robin counter picks advance: the pick path. Loads nothing shared while the table and
/// the snapshot are unchanged, and writes nothing shared (a round-robin pick takes a block of
/// the cluster's counter once per up to 64 picks).
#[inline(always)]
pub(crate) fn with_snapshot<R>(
    cell: &TableCell,
    cluster: &str,
    f: impl FnOnce(Option<Picking<'_>>) -> R,
) -> R {
    PICKS.with(|slot| with_cache(slot, cell, cluster, f))
}

/// [`with_snapshot`] with this thread's pick cache. Out of line, so that the thread-local lookup
/// in [`with_snapshot`] is inlined into the caller (a direct access rather than a call through
/// the key's accessor); `f` is called in one place only, so that it is inlined here.
#[inline(never)]
fn with_cache<R>(
    slot: &RefCell<Option<PickCache>>,
    cell: &TableCell,
    cluster: &str,
    f: impl FnOnce(Option<Picking<'_>>) -> R,
) -> R {
    let Ok(mut slot) = slot.try_borrow_mut() else {
        return pick_inside_pick(cell, cluster, f);
    };
    let picks = match &mut *slot {
        Some(picks) if std::ptr::eq(picks.table.arc_swap(), &**cell) => picks,
        other => other.insert(PickCache {
            table: Cache::new(cell.clone()),
            seen: std::ptr::null(),
            snapshots: Vec::new(),
            cursors: Vec::new(),
            rng: LocalRng::new(),
        }),
    };
    f(picks.find(cluster))
}

impl PickCache {
    /// What a pick from `cluster` reads: its current snapshot, this thread's cursor for it and
    /// generator; `None` when the table has no such cluster.
    #[inline(always)]
    fn find(&mut self, cluster: &str) -> Option<Picking<'_>> {
        let table = self.table.load();
        if Arc::as_ptr(table) != self.seen {
            self.seen = Arc::as_ptr(table);
            self.snapshots.clear();
            self.snapshots.resize_with(table.entries.len(), || None);
            // The cursors of clusters this table no longer has go (before any entry points
            // into the cursors again).
            self.cursors.retain(|c| {
                table
                    .entries
                    .iter()
                    .any(|(_, runtime)| Arc::ptr_eq(&runtime.counter, &c.counter))
            });
        }
        let position = table.position(cluster)?;
        let entry = match &mut self.snapshots[position] {
            Some(entry) => entry,
            empty => {
                let runtime = &table.entries[position].1;
                let mut snapshot = Cache::new(runtime.cell.clone());
                let best = snapshot.load().best.clone();
                let cursor = cursor_of(&mut self.cursors, &runtime.counter, best.len());
                self.cursors[cursor].regroup(best.len());
                let ticket = Ticket::new(best);
                empty.insert(Entry {
                    snapshot,
                    ticket,
                    cursor,
                })
            }
        };
        let snapshot = entry.snapshot.load();
        if !Arc::ptr_eq(entry.ticket.group(), &snapshot.best) {
            entry.ticket = Ticket::new(snapshot.best.clone());
            self.cursors[entry.cursor].regroup(snapshot.best.len());
        }
        Some(Picking {
            snapshot,
            ticket: &entry.ticket,
            counter: Counter::Thread {
                cursors: &self.cursors,
                at: entry.cursor,
            },
            rng: &self.rng,
        })
    }
}

/// A pick from inside a pick (a policy that picks): no cache, same answer, with the cluster's
/// shared counter and the thread's other generator.
#[cold]
#[inline(never)]
fn pick_inside_pick<R>(
    cell: &TableCell,
    cluster: &str,
    f: impl FnOnce(Option<Picking<'_>>) -> R,
) -> R {
    let snapshot = load(cell, cluster);
    let ticket = snapshot.as_deref().map(|s| Ticket::new(s.best.clone()));
    with_thread_generator(|rng| {
        f(snapshot
            .as_deref()
            .zip(ticket.as_ref())
            .map(|(s, ticket)| Picking {
                snapshot: s,
                ticket,
                counter: Counter::Shared(&s.counter),
                rng,
            }))
    })
}

/// Runs `f` on the current snapshot of the cluster published in `cell`: through this thread's
/// pick cache when it holds that cluster (the thread picked from it: one pointer comparison, no
/// shared write), else with a plain load. The outcome path: a request is usually reported on
/// the thread that picked it. Keeps nothing the pick cache does not keep already.
#[inline]
pub(crate) fn with_current<R>(cell: &SnapshotCell, f: impl FnOnce(&ClusterSnapshot) -> R) -> R {
    PICKS.with(|slot| {
        // Busy: an outcome reported from inside a pick or another outcome.
        if let Ok(mut slot) = slot.try_borrow_mut() {
            if let Some(entry) = slot.as_mut().and_then(|picks| {
                picks
                    .snapshots
                    .iter_mut()
                    .flatten()
                    .find(|entry| std::ptr::eq(entry.snapshot.arc_swap(), &**cell))
            }) {
                return f(entry.snapshot.load());
            }
        }
        f(&cell.load())
    })
}

/// The position of this thread's cursor for the cluster counting with `counter`, added when the
/// thread first picks from it.
#[cold]
fn cursor_of(cursors: &mut Vec<ThreadCursor>, counter: &Arc<RoundRobinCounter>, n: usize) -> usize {
    if let Some(position) = cursors
        .iter()
        .position(|c| Arc::ptr_eq(&c.counter, counter))
    {
        return position;
    }
    let place = counter.next_place() as u64;
    cursors.push(ThreadCursor {
        counter: counter.clone(),
        own: Cell::new(offset(place, n)),
        left: Cell::new(0),
        end: Cell::new(0),
        index: Cell::new(0),
    });
    cursors.len() - 1
}

/// The current snapshot of `cluster`, loaded without the pick cache (off the pick path).
pub(crate) fn load(cell: &TableCell, cluster: &str) -> Option<Guard<Arc<ClusterSnapshot>>> {
    cell.load().get(cluster).map(|runtime| runtime.cell.load())
}

#[cfg(test)]
mod tests {
    use super::{offset, same_bytes, RoundRobinCounter, ThreadCursor};
    use std::cell::Cell;
    use std::sync::Arc;

    fn cursor(counter: &Arc<RoundRobinCounter>) -> ThreadCursor {
        ThreadCursor {
            counter: counter.clone(),
            own: Cell::new(0),
            left: Cell::new(0),
            end: Cell::new(0),
            index: Cell::new(0),
        }
    }

    /// Two threads' cursors on one cluster counter, picking in turn from 200 destinations whose
    /// first count sits 5 into a line: each uses every value of its blocks once, the two are
    /// never in the same stretch of four lines, and together they pick every destination as
    /// often as one thread would (up to the unused rest of their last blocks).
    #[test]
    fn two_cursors_share_the_counter_a_stretch_apart() {
        let counter = Arc::new(RoundRobinCounter::default());
        let (a, b) = (cursor(&counter), cursor(&counter));
        let (n, offset) = (200, 5);
        let stretch = |i: usize| (i + offset) / 64;
        let mut picks = vec![0u32; n];
        for step in 0..4000 {
            let i = a.index(n, || offset);
            let j = b.index(n, || offset);
            picks[i] += 1;
            picks[j] += 1;
            // Both took their first block before this: from then on they walk apart.
            assert_ne!(stretch(i), stretch(j), "step {step}: {i} and {j}");
        }
        // 8,000 picks: 40 a destination; each cursor's unused rest costs a destination at most 1.
        assert!(picks.iter().all(|&p| (38..=41).contains(&p)), "{picks:?}");
        assert_eq!(picks.iter().sum::<u32>(), 8000);
    }

    /// One cursor alone follows the spec's counter: 0, 1, 2, ... mod the group size, and after
    /// the group changes size mid-block, the next value mod the new size.
    #[test]
    fn one_cursor_sees_the_counters_sequence_across_a_change_of_the_group() {
        let counter = Arc::new(RoundRobinCounter::default());
        let c = cursor(&counter);
        let picked: Vec<usize> = (0..250).map(|_| c.index(100, || 3)).collect();
        let expected: Vec<usize> = (0..250).map(|v| v % 100).collect();
        assert_eq!(picked, expected);
        c.regroup(7);
        let picked: Vec<usize> = (250..400).map(|_| c.index(7, || 0)).collect();
        let expected: Vec<usize> = (250..400).map(|v| v % 7).collect();
        assert_eq!(picked, expected);
        // A retry's value in between: the cursor's next block starts after it.
        c.regroup(1000);
        let rest = c.left.get();
        (0..rest).for_each(|_| {
            c.index(1000, || 0);
        });
        let retry = counter.next();
        assert_eq!(c.index(1000, || 0), (retry + 1) % 1000);
    }

    /// The first thread starts at 0 (one thread sees 0, 1, 2, ...); the second 61.8% of the way
    /// round, the third 23.6%; and any number of threads start apart: eight threads in a group
    /// of 100 are at least 9 places from each other.
    #[test]
    fn threads_start_their_cursors_far_apart() {
        assert_eq!(offset(0, 100), 0);
        assert_eq!(offset(1, 100), 61);
        assert_eq!(offset(2, 100), 23);
        assert_eq!(offset(1, 1), 0);
        assert_eq!(offset(5, 0), 0);
        let mut starts: Vec<usize> = (0..8).map(|k| offset(k, 100)).collect();
        starts.sort_unstable();
        let gaps = starts.windows(2).map(|w| w[1] - w[0]);
        let wrap = 100 - starts[7] + starts[0];
        assert!(gaps.chain([wrap]).all(|g| g >= 9), "{starts:?}");
    }

    /// Every length up to past the word cases, equal and with one byte changed at each
    /// position: the overlapping words must see every byte.
    #[test]
    fn same_bytes_sees_every_byte() {
        for n in 0..40usize {
            let a: Vec<u8> = (0..n as u8).map(|i| b'a' + i % 26).collect();
            assert!(same_bytes(&a, &a.clone()), "equal, length {n}");
            for at in 0..n {
                let mut b = a.clone();
                b[at] ^= 0x20;
                assert!(!same_bytes(&a, &b), "byte {at} of {n} differs");
            }
            let mut longer = a.clone();
            longer.push(b'x');
            assert!(!same_bytes(&a, &longer), "lengths {n} and {}", n + 1);
        }
    }
}
