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
use crate::destination::pick_group::PickGroup;
use crate::ids::with_folded;
use crate::rng::{with_thread_generator, Draws, LocalRng, RandomSource};
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

/// A thread's round-robin cursor for one cluster: the thread's own counter, so that a pick
/// writes nothing shared but its destination's count.
///
/// The first thread that picks from the cluster (place 0) counts from 0 and walks the group in
/// order: one thread sees YARP's exact sequence 0, 1, 2, ... mod the group size, in place and
/// through a policy object alike, across changes of the group too. Every later thread starts
/// its counter elsewhere ([`offset`]) and, picking an unweighted group in place, goes round it in
/// *laps*: whole rounds of the group in order (one round, or enough of a small group's to make
/// [`LAP_AT_LEAST`] picks), each lap from a start of its own ([`lap_start`]). Two threads
/// walking the group at the same speed from nearby places would write the same cache lines of
/// counts on every pick and, slowed alike, stay together; a lap that starts beside the other
/// thread's walk ends after its rounds, and the next one starts somewhere unrelated. Each lap
/// picks every destination equally often, so threads together spread evenly (each thread at
/// most one lap off its share).
pub(crate) struct ThreadCursor {
    /// The cluster's counter: each thread's place, and what identifies the cluster. Kept until
    /// the thread sees a table without the cluster.
    counter: Arc<RoundRobinCounter>,
    /// This thread's place among the cluster's pickers: 0 for the first.
    place: u64,
    /// The thread's counter as last brought up to date: the first thread's picks in place
    /// since then are counted by `left` (see [`ThreadCursor::value`]).
    own: Cell<usize>,
    /// The index of the next pick in place, in the group picked from (set anew when the group
    /// changes, see [`ThreadCursor::regroup`]).
    index: Cell<usize>,
    /// Picks in place left in the current lap; counted down from `usize::MAX` on the first
    /// thread, which never leaves its order.
    left: Cell<usize>,
    /// Laps started, for the next lap's start.
    laps: Cell<u64>,
}

/// A lap is at least this many picks: whole rounds of a group smaller than this, so that a
/// thread starts a lap (a hash, out of line) at most once per 64 picks.
const LAP_AT_LEAST: usize = 64;

impl ThreadCursor {
    fn new(counter: Arc<RoundRobinCounter>, place: u64, n: usize) -> ThreadCursor {
        let cursor = ThreadCursor {
            counter,
            place,
            own: Cell::new(offset(place, n)),
            index: Cell::new(0),
            left: Cell::new(usize::MAX),
            laps: Cell::new(0),
        };
        cursor.regroup(n);
        cursor
    }

    /// The index of the next pick in place from an unweighted group of `n` (>= 2): the next in
    /// order, or the first of a new lap.
    #[inline(always)]
    fn index(&self, n: usize) -> usize {
        let i = self.index.get();
        self.index.set(if i + 1 < n { i + 1 } else { 0 });
        let left = self.left.get() - 1;
        self.left.set(left);
        if left == 0 {
            self.new_lap(n);
        }
        i
    }

    /// The thread's counter now: the first thread's picks in place count in it.
    #[inline]
    fn value(&self) -> usize {
        if self.place == 0 {
            self.own.get().wrapping_add(usize::MAX - self.left.get())
        } else {
            self.own.get()
        }
    }

    /// The counter's next value, for a policy object.
    #[inline]
    fn next(&self) -> usize {
        let value = self.value();
        self.own.set(value.wrapping_add(1));
        if self.place == 0 {
            self.left.set(usize::MAX);
        }
        value
    }

    /// A lap is over: the next one starts elsewhere (on the first thread, after 2^64 picks,
    /// where it left off).
    #[cold]
    #[inline(never)]
    fn new_lap(&self, n: usize) {
        if self.place == 0 {
            self.regroup(n);
            return;
        }
        let lap = self.laps.get().wrapping_add(1);
        self.laps.set(lap);
        self.index.set(lap_start(self.place, lap, n));
        self.left.set(lap_length(n));
    }

    /// The thread now picks from a group of `n`: in place from the counter's value mod `n` (a
    /// lap from there, on a thread other than the first).
    #[cold]
    fn regroup(&self, n: usize) {
        let value = self.value();
        self.own.set(value);
        self.index.set(value.checked_rem(n).unwrap_or(0));
        self.left.set(if self.place == 0 {
            usize::MAX
        } else {
            lap_length(n)
        });
    }
}

/// Picks in a lap over a group of `n`: whole rounds, at least [`LAP_AT_LEAST`].
fn lap_length(n: usize) -> usize {
    n.max(1) * LAP_AT_LEAST.div_ceil(n.max(1))
}

/// Spreads the starting offsets of the threads' counters (2^64 / the golden ratio).
const OFFSET_STEP: u64 = 0x9E37_79B9_7F4A_7C15;

/// Where the counter of the thread that takes `place` among a cluster's pickers starts in a
/// group of `n`: that fraction of the golden ratio's multiples of the way round the group
/// (0, 0.618, 0.236, 0.854, ... of `n`), so that any number of threads start far apart. The
/// first thread starts at 0.
fn offset(place: u64, n: usize) -> usize {
    fraction_of(place.wrapping_mul(OFFSET_STEP), n)
}

/// Where lap `lap` of the thread at `place` (>= 1) starts in a group of `n`: a hash of the two,
/// so that two threads' laps start at unrelated places, lap after lap.
fn lap_start(place: u64, lap: u64, n: usize) -> usize {
    // SplitMix64's finaliser over the pair.
    let mut x = place
        .wrapping_mul(OFFSET_STEP)
        .wrapping_add(lap.wrapping_mul(0xD1B5_4A32_D192_ED03));
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    fraction_of(x ^ (x >> 31), n)
}

/// `fraction` / 2^64 of `n`, rounded down.
fn fraction_of(fraction: u64, n: usize) -> usize {
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
    /// Where the pick's random draws come from: this thread's own generator for a per-thread
    /// random source, the engine's seeded one otherwise.
    pub rng: Draws<'a>,
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
            Counter::Thread { cursors, at } => cursors[*at].next(),
            Counter::Shared(shared) => shared.next(),
        }
    }

    #[inline(always)]
    fn index(&self, n: usize) -> usize {
        match self {
            Counter::Thread { cursors, at } => cursors[*at].index(n),
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
/// the snapshot are unchanged, and writes nothing shared (a round-robin pick counts on this
/// thread's own cursor).
///
/// The engine's random `source` is told apart here, once a pick, rather than at every draw:
/// the lookup for a per-thread source (the default) is compiled knowing that it draws from the
/// thread's own generator, which makes it shorter with less stack traffic (a seeded engine, for
/// tests and simulations, has a copy of its own). The two are called
/// from one place, through a function pointer, so that the caller reads the result straight
/// from the call (with two calls it would copy the result out of either as one 16-byte load,
/// which stalls on the two 8-byte stores that wrote it).
#[inline(always)]
pub(crate) fn with_snapshot<R, F: FnOnce(Option<Picking<'_>>) -> R>(
    cell: &TableCell,
    cluster: &str,
    source: &RandomSource,
    f: F,
) -> R {
    let lookup: fn(&RefCell<Option<PickCache>>, &TableCell, &str, &RandomSource, F) -> R =
        match source {
            RandomSource::PerThread => with_cache::<false, R, F>,
            RandomSource::Seeded(_) => with_cache::<true, R, F>,
        };
    PICKS.with(|slot| lookup(slot, cell, cluster, source, f))
}

/// [`with_snapshot`] with this thread's pick cache. Out of line, so that the thread-local lookup
/// in [`with_snapshot`] is inlined into the caller (a direct access rather than a call through
/// the key's accessor); `f` is called in one place only, so that it is inlined here.
/// `SEEDED`: whether `source` is seeded (see [`with_snapshot`]).
#[inline(never)]
fn with_cache<const SEEDED: bool, R, F: FnOnce(Option<Picking<'_>>) -> R>(
    slot: &RefCell<Option<PickCache>>,
    cell: &TableCell,
    cluster: &str,
    source: &RandomSource,
    f: F,
) -> R {
    let Ok(mut slot) = slot.try_borrow_mut() else {
        return pick_inside_pick(cell, cluster, source, f);
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
    let picking = picks.find(cluster);
    f(if SEEDED {
        picking.map(|picking| Picking {
            rng: Draws::Source(source),
            ..picking
        })
    } else {
        picking
    })
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
            empty => empty.insert(Entry::new(&table.entries[position].1, &mut self.cursors)),
        };
        let snapshot = entry.snapshot.load();
        if !Arc::ptr_eq(entry.ticket.group(), &snapshot.best) {
            renew_ticket(
                &mut entry.ticket,
                &snapshot.best,
                &self.cursors[entry.cursor],
            );
        }
        Some(Picking {
            snapshot,
            ticket: &entry.ticket,
            counter: Counter::Thread {
                cursors: &self.cursors,
                at: entry.cursor,
            },
            rng: Draws::Own(&self.rng),
        })
    }
}

impl Entry {
    /// The thread's entry for the cluster of `runtime`, when it first picks from it (or from
    /// this table): out of line, so that the pick path keeps its registers.
    #[cold]
    #[inline(never)]
    fn new(runtime: &ClusterRuntime, cursors: &mut Vec<ThreadCursor>) -> Entry {
        let mut snapshot = Cache::new(runtime.cell.clone());
        let best = snapshot.load().best.clone();
        let cursor = cursor_of(cursors, &runtime.counter, best.len());
        Entry {
            snapshot,
            ticket: Ticket::new(best),
            cursor,
        }
    }
}

/// The group changed: a new ticket, and the cursor goes on in the new group.
#[cold]
#[inline(never)]
fn renew_ticket(ticket: &mut Arc<Ticket>, best: &Arc<PickGroup>, cursor: &ThreadCursor) {
    *ticket = Ticket::new(best.clone());
    cursor.regroup(best.len());
}

/// A pick from inside a pick (a policy that picks): no cache, same answer, with the cluster's
/// shared counter and the thread's other generator.
#[cold]
#[inline(never)]
fn pick_inside_pick<R>(
    cell: &TableCell,
    cluster: &str,
    source: &RandomSource,
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
                rng: source.draws(rng),
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

/// The position of this thread's cursor for the cluster counting with `counter`, set to pick
/// from a group of `n`: added when the thread first picks from the cluster, else kept from the
/// thread's last table (and moved on to the group).
#[cold]
fn cursor_of(cursors: &mut Vec<ThreadCursor>, counter: &Arc<RoundRobinCounter>, n: usize) -> usize {
    if let Some(position) = cursors
        .iter()
        .position(|c| Arc::ptr_eq(&c.counter, counter))
    {
        cursors[position].regroup(n);
        return position;
    }
    let place = counter.next_place() as u64;
    cursors.push(ThreadCursor::new(counter.clone(), place, n));
    cursors.len() - 1
}

/// The current snapshot of `cluster`, loaded without the pick cache (off the pick path).
pub(crate) fn load(cell: &TableCell, cluster: &str) -> Option<Guard<Arc<ClusterSnapshot>>> {
    cell.load().get(cluster).map(|runtime| runtime.cell.load())
}

#[cfg(test)]
mod tests {
    use super::{offset, same_bytes, RoundRobinCounter, ThreadCursor};
    use std::sync::Arc;

    /// The cursor of the thread at `place` among the pickers of a fresh cluster, in a group of
    /// `n`.
    fn cursor(place: u64, n: usize) -> ThreadCursor {
        ThreadCursor::new(Arc::new(RoundRobinCounter::default()), place, n)
    }

    /// The first thread follows YARP's counter: 0, 1, 2, ... mod the group size, across a
    /// change of the group, with the values a policy object takes (a weighted group's picks)
    /// counted in the same sequence; it never starts a lap elsewhere.
    #[test]
    fn the_first_thread_sees_the_counters_sequence_across_changes_of_the_group() {
        let c = cursor(0, 100);
        let picked: Vec<usize> = (0..250).map(|_| c.index(100)).collect();
        let expected: Vec<usize> = (0..250).map(|v| v % 100).collect();
        assert_eq!(picked, expected);
        c.regroup(7);
        let picked: Vec<usize> = (250..400).map(|_| c.index(7)).collect();
        let expected: Vec<usize> = (250..400).map(|v| v % 7).collect();
        assert_eq!(picked, expected);
        assert_eq!((c.next(), c.next()), (400, 401));
        c.regroup(1000);
        let picked: Vec<usize> = (402..3000).map(|_| c.index(1000)).collect();
        let expected: Vec<usize> = (402..3000).map(|v| v % 1000).collect();
        assert_eq!(picked, expected);
    }

    /// A later thread goes round the group in laps: each lap is the whole group once, in order
    /// from its start, and the laps start at places of their own. So the thread spreads its
    /// picks evenly, and a lap that started beside another thread's walk is the last one there.
    #[test]
    fn a_later_thread_goes_round_in_laps_from_starts_of_their_own() {
        let n = 100;
        let c = cursor(1, n);
        // The first lap from where its counter starts (61.8% round), as a policy object would.
        assert_eq!(c.index(n), 61);
        (1..n).for_each(|_| {
            c.index(n);
        });
        let mut starts = Vec::new();
        let mut picks = vec![0u32; n];
        for _ in 0..500 {
            let lap: Vec<usize> = (0..n).map(|_| c.index(n)).collect();
            starts.push(lap[0]);
            for (k, &i) in lap.iter().enumerate() {
                assert_eq!(
                    i,
                    (lap[0] + k) % n,
                    "in order from the lap's start: {lap:?}"
                );
                picks[i] += 1;
            }
        }
        assert!(picks.iter().all(|&p| p == 500), "{picks:?}");
        // Starts of their own: the same start twice in a row about once in `n` laps (a fixed
        // start, as a thread's offset, would give 499), and most places a start somewhere.
        let repeats = starts.windows(2).filter(|w| w[0] == w[1]).count();
        assert!(repeats < 20, "{repeats} repeated starts: {starts:?}");
        starts.sort_unstable();
        starts.dedup();
        assert!(starts.len() > 95, "{} distinct starts", starts.len());
        // A small group: laps of 22 rounds (66 picks), each in order from its start.
        let c = cursor(1, 3);
        let first = c.index(3);
        (1..66).for_each(|k| assert_eq!(c.index(3), (first + k) % 3));
        let lap_starts: Vec<usize> = (0..40)
            .map(|_| {
                let start = c.index(3);
                (1..66).for_each(|k| assert_eq!(c.index(3), (start + k) % 3));
                start
            })
            .collect();
        assert_eq!(
            (0..3)
                .map(|i| lap_starts.iter().filter(|&&s| s == i).count() > 5)
                .collect::<Vec<_>>(),
            [true; 3]
        );
    }

    /// Two threads that walk the same cache lines of counts (eight counts to a line) in step,
    /// the worst case of a counter per thread: after the later thread's lap ends they part, and
    /// over many laps they share a line about as often as two independent walks would (one
    /// group in thirteen lines: 1 in 13), not on every pick.
    #[test]
    fn two_threads_walking_in_step_part_after_a_lap() {
        let n = 100;
        let (first, later) = (cursor(0, n), cursor(1, n));
        // The later thread's lap starts where the first thread is.
        later.index.set(0);
        later.left.set(n);
        let line = |i: usize| i / 8;
        let mut shared = 0;
        for step in 0..100 * n {
            let (i, j) = (first.index(n), later.index(n));
            if step < n {
                assert_eq!(i, j, "in step for the rest of the lap");
            }
            shared += usize::from(line(i) == line(j));
        }
        // 10,000 picks each: in step, all of them would share a line.
        assert!(shared < 1500, "{shared} picks in a shared line");
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
