//! The pick path: from a cluster id to a [`PickHandle`], with no lock, no allocation beyond
//! what a change of the group costs once per thread, and no write another thread reads but one
//! in-flight count where the cluster's policy compares them.
//!
//! A pick, end to end (`Engine::pick_endpoint` calls [`with_pick`], then [`Picking::pick`]):
//!
//! 1. **The snapshot.** Each thread keeps a pick cache: the engine's cluster table and, for each
//!    cluster it picked from, an [`arc_swap::Cache`] of the cluster's snapshot. While nothing was
//!    published since the thread's last pick, finding the snapshot costs a lookup of the id in
//!    the table and two pointer comparisons: no atomic read-modify-write, nothing written that
//!    another thread reads. After a publication the thread loads the new pointer once.
//! 2. **The ticket.** Beside the snapshot the cache keeps this thread's [`Ticket`] to the
//!    snapshot's best group: the reference its handles share, so that taking a handle writes the
//!    ticket's reference count, which only this thread writes, and never the destination's own
//!    memory. When the group changes the thread takes a new ticket (one small allocation a thread
//!    and change of the group). A group the policy reads no counts of comes with this thread's
//!    own counts.
//! 3. **The choice.** A cluster whose picks are shaped (they may spill to the next tier, follow
//!    an affinity key, or read latency) first asks the spill share, then the key's destination,
//!    and reads the clock (the one clock read of the path); the others, most clusters, go
//!    straight to their policy's choice. A group of one is its destination. A larger one goes
//!    to the picker the cluster's policy prepared for it (see `selection/balancing.rs`): a
//!    common form runs in place, a policy's own picker gets one dynamic call with a
//!    [`PickView`]: the group and its load signals, this thread's random generator (or the
//!    engine's seeded one), this thread's round-robin counter, the request's affinity key and,
//!    when the policy reads latency, the time of the pick.
//! 4. **The count.** The handle counts its destination in flight, in the cluster's shared count
//!    when the policy compares counts, in this thread's own count otherwise; it holds the ticket
//!    and the place it counted at, and takes the count back there when dropped, on whatever
//!    thread that is.
//!
//! The one thing read per destination, its count, sits in the cluster's signal pool with its
//! neighbours' (`destination/signals.rs`), so a pick from a large group touches a few cache
//! lines, not a destination each. Nothing else is shared: the generator, the round-robin counter
//! and the ticket belong to the thread.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::cache::Cache;
use url::Url;

use super::core::EngineCore;
use super::runtime::{ClusterRuntime, SnapshotCell};
use super::table::{ClusterTable, TableCell};
use crate::clock::Clock;
use crate::cluster::snapshot::ClusterSnapshot;
use crate::destination::signals::{SignalPool, ThreadCounts};
use crate::destination::{Destination, Latency};
use crate::health::load_report;
use crate::health::outcome::RequestOutcome;
use crate::rng::{with_thread_generator, Draws, LocalRng, RandomSource};
use crate::selection::affinity::AffinityMiss;
use crate::selection::balancing::{Group, PickView, Picker};
use crate::selection::consistent_hash::key_hash;

/// Why a pick found nothing. The error with its strings is built only on the way out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Miss {
    UnknownCluster,
    NoAvailableDestinations,
    DiscoveryPending,
    /// The cluster's first probes are running, and the caller asked not to pick before.
    Warming,
    /// A keyed pick's destination is unavailable, and the cluster's affinity fails such picks.
    AffinityUnavailable,
}

/// A pick as it leaves the thread's pick cache: a handle's two words, or no ticket and why.
/// Two words of plain data (no enum around them) are returned in two registers; a
/// `Result<PickHandle, Miss>` would be written to memory by the out-of-line lookup and read
/// back by its caller, a round trip that costs more than the rest of the pick.
pub(crate) struct Picked {
    ticket: Option<Arc<Ticket>>,
    /// The handle's slot, or the [`Miss`] when there is no ticket.
    word: u64,
}

impl Picked {
    /// Nothing picked, for `miss`.
    #[inline]
    pub fn miss(miss: Miss) -> Picked {
        Picked {
            ticket: None,
            word: miss as u64,
        }
    }

    /// The handle, or why there is none.
    #[inline]
    pub fn into_result(self) -> Result<PickHandle, Miss> {
        match self.ticket {
            Some(ticket) => Ok(PickHandle {
                ticket,
                slot: self.word,
            }),
            None => Err(match self.word {
                0 => Miss::UnknownCluster,
                1 => Miss::NoAvailableDestinations,
                2 => Miss::DiscoveryPending,
                3 => Miss::Warming,
                _ => Miss::AffinityUnavailable,
            }),
        }
    }
}

/// One thread's view of the last engine it picked from.
struct PickCache {
    clusters: Clusters,
    /// This thread's generator for picks.
    rng: LocalRng,
}

/// The clusters a thread picked from, as of the table it saw last.
struct Clusters {
    table: Cache<TableCell, Arc<ClusterTable>>,
    /// The table `entries` belong to.
    seen: *const ClusterTable,
    /// One per cluster of that table, by position; `None` until the thread picks from it.
    entries: Vec<Option<Entry>>,
}

/// One cluster in a thread's pick cache.
struct Entry {
    snapshot: Cache<SnapshotCell, Arc<ClusterSnapshot>>,
    held: Held,
}

/// What a thread holds for one cluster.
struct Held {
    /// Its ticket to the snapshot's best group.
    ticket: Arc<Ticket>,
    /// Its ticket to the group the best group spills to, while the cluster may spill.
    spill: Option<Arc<Ticket>>,
    /// Its round-robin counter for that group: spilled picks go round it on their own.
    spill_counter: Cell<usize>,
    /// Its round-robin counter for the cluster.
    counter: Cell<usize>,
    /// Where its own counts come from.
    pool: SignalPool,
}

thread_local! {
    /// The last engine this thread picked from (one engine per thread is the usual case; a
    /// thread that alternates between engines starts its cache over each time, which stays
    /// correct).
    static PICKS: RefCell<Option<PickCache>> = const { RefCell::new(None) };
}

/// What a pick from one cluster reads: its snapshot, what this thread holds for it (its ticket
/// to the best group, its round-robin counter) and the random draws to use.
pub(crate) struct Picking<'a> {
    pub snapshot: &'a ClusterSnapshot,
    held: &'a Held,
    draws: Draws<'a>,
}

/// Picks a destination of `cluster` for a request with affinity key `key`: the pick path.
/// With `unless_warming`, a cluster whose first probes are still running gets no pick
/// ([`Miss::Warming`]): the caller waits for them instead.
#[inline]
pub(crate) fn pick(
    core: &EngineCore,
    cluster: &str,
    key: Option<&[u8]>,
    unless_warming: bool,
) -> Picked {
    // The thread-local access stays small enough to be inlined into the caller (a direct access
    // instead of a call through the key's accessor); the pick itself is out of line.
    PICKS.with(|slot| pick_cached(slot, core, cluster, key, unless_warming))
}

/// [`pick`] with this thread's pick cache.
#[inline(never)]
fn pick_cached(
    slot: &RefCell<Option<PickCache>>,
    core: &EngineCore,
    cluster: &str,
    key: Option<&[u8]>,
    unless_warming: bool,
) -> Picked {
    let Ok(mut slot) = slot.try_borrow_mut() else {
        return pick_inside_pick(&core.table, cluster, &core.rng, |picking| match picking {
            Some(picking) if unless_warming && picking.snapshot.warming => {
                Picked::miss(Miss::Warming)
            }
            Some(picking) => picking.pick(key, &*core.clock),
            None => Picked::miss(Miss::UnknownCluster),
        });
    };
    let cache = match &mut *slot {
        Some(cache) if std::ptr::eq(cache.clusters.table.arc_swap(), &*core.table) => cache,
        other => start_over(other, &core.table),
    };
    let draws = core.rng.draws(&cache.rng);
    let Some((snapshot, held)) = cache.clusters.find(cluster) else {
        return Picked::miss(Miss::UnknownCluster);
    };
    if unless_warming && snapshot.warming {
        return Picked::miss(Miss::Warming);
    }
    pick_held(snapshot, held, draws, key, &*core.clock)
}

/// Runs `f` on what a pick from `cluster` reads (`None` when the table has no such cluster),
/// through this thread's pick cache: for a caller that reads the snapshot beside its pick.
pub(crate) fn with_pick<R>(
    table: &TableCell,
    cluster: &str,
    source: &RandomSource,
    f: impl FnOnce(Option<Picking<'_>>) -> R,
) -> R {
    PICKS.with(|slot| {
        let Ok(mut slot) = slot.try_borrow_mut() else {
            return pick_inside_pick(table, cluster, source, f);
        };
        let cache = match &mut *slot {
            Some(cache) if std::ptr::eq(cache.clusters.table.arc_swap(), &**table) => cache,
            other => start_over(other, table),
        };
        let draws = source.draws(&cache.rng);
        f(cache
            .clusters
            .find(cluster)
            .map(|(snapshot, held)| Picking {
                snapshot,
                held,
                draws,
            }))
    })
}

/// A thread's first pick from an engine (or from another engine than its last).
#[cold]
#[inline(never)]
fn start_over<'a>(slot: &'a mut Option<PickCache>, table: &TableCell) -> &'a mut PickCache {
    slot.insert(PickCache {
        clusters: Clusters {
            table: Cache::new(table.clone()),
            seen: std::ptr::null(),
            entries: Vec::new(),
        },
        rng: LocalRng::new(),
    })
}

impl Clusters {
    /// The current snapshot of `cluster` and what this thread holds for it (its ticket to the
    /// snapshot's best group); `None` when the table has no such cluster.
    #[inline]
    fn find(&mut self, cluster: &str) -> Option<(&ClusterSnapshot, &Held)> {
        let table = self.table.load();
        if !std::ptr::eq(Arc::as_ptr(table), self.seen) {
            self.seen = Arc::as_ptr(table);
            self.entries = carry_over(std::mem::take(&mut self.entries), table);
        }
        let position = table.position(cluster)?;
        let entry = match &mut self.entries[position] {
            Some(entry) => entry,
            empty => empty.insert(Entry::new(table.runtime(position))),
        };
        let snapshot = entry.snapshot.load();
        if !Arc::ptr_eq(&entry.held.ticket.group, &snapshot.best) {
            entry.held.renew(&snapshot.best);
        }
        if let Some(spill) = &snapshot.spill {
            if !entry
                .held
                .spill
                .as_ref()
                .is_some_and(|ticket| Arc::ptr_eq(&ticket.group, &spill.group))
            {
                entry.held.renew_spill(&spill.group);
            }
        }
        Some((snapshot, &entry.held))
    }
}

/// The entries of the clusters `table` still has, moved to their new positions, so that a
/// thread's round-robin counters and own counts outlive a reload that adds or removes another
/// cluster.
#[cold]
#[inline(never)]
fn carry_over(mut old: Vec<Option<Entry>>, table: &ClusterTable) -> Vec<Option<Entry>> {
    table
        .runtimes()
        .map(|runtime| {
            let kept = old.iter().position(|e| {
                e.as_ref()
                    .is_some_and(|e| std::ptr::eq(e.snapshot.arc_swap(), &*runtime.cell))
            })?;
            old[kept].take()
        })
        .collect()
}

impl Entry {
    /// The thread's entry for the cluster of `runtime`, when it first picks from it.
    #[cold]
    #[inline(never)]
    fn new(runtime: &ClusterRuntime) -> Entry {
        let mut snapshot = Cache::new(runtime.cell.clone());
        let best = snapshot.load().best.clone();
        let place = runtime.counter.pickers.fetch_add(1, Ordering::Relaxed);
        let pool = runtime.signals.clone();
        Entry {
            held: Held {
                counter: Cell::new(start(place as u64, best.len())),
                ticket: Ticket::first(best, &pool),
                spill: None,
                spill_counter: Cell::new(place),
                pool,
            },
            snapshot,
        }
    }
}

impl Held {
    /// The best group changed: a new ticket to it.
    #[cold]
    #[inline(never)]
    fn renew(&mut self, best: &Arc<Group>) {
        self.ticket = Ticket::new(best.clone(), &self.pool, &self.ticket);
    }

    /// The group the best group spills to changed: a new ticket to it.
    #[cold]
    #[inline(never)]
    fn renew_spill(&mut self, group: &Arc<Group>) {
        self.spill = Some(Ticket::new(group.clone(), &self.pool, &self.ticket));
    }
}

/// Spreads the starting counters of a cluster's picking threads (2^64 / the golden ratio).
const START_STEP: u64 = 0x9E37_79B9_7F4A_7C15;

/// Where the round-robin counter of the thread that takes `place` among a cluster's pickers
/// starts, in a group of `n`: that fraction of the golden ratio's multiples of the way round
/// (0, 0.618, 0.236, 0.854, ... of `n`), so that threads start far apart and together spread
/// evenly from their first picks on. The first thread starts at 0.
fn start(place: u64, n: usize) -> usize {
    ((u128::from(place.wrapping_mul(START_STEP)) * n as u128) >> 64) as usize
}

impl Picking<'_> {
    /// Picks a destination of the best group for a request with affinity key `key`, reading
    /// the clock (`clock`) only when the cluster's policy reads latency.
    #[inline]
    pub fn pick(&self, key: Option<&[u8]>, clock: &dyn Clock) -> Picked {
        pick_held(self.snapshot, self.held, self.draws, key, clock)
    }
}

/// A pick with what the thread holds for the cluster. A cluster whose picks are shaped (they
/// may spill, follow an affinity key or read latency) goes through [`pick_shaped`]; the rest,
/// most clusters, pick from the best group in place, with nothing but their policy's choice and
/// the count between the snapshot and the handle.
#[inline(always)]
fn pick_held(
    snapshot: &ClusterSnapshot,
    held: &Held,
    draws: Draws<'_>,
    key: Option<&[u8]>,
    clock: &dyn Clock,
) -> Picked {
    if snapshot.shaped() {
        return pick_shaped(snapshot, held, draws, key, clock);
    }
    let view = || PickView::new(&held.ticket.group, draws, &held.counter, key, None);
    choose(snapshot, &held.ticket, &snapshot.picker, view, None)
}

/// A pick of a cluster whose picks are shaped: from the group the best group spills to when
/// the spill takes this pick, else from the best group; timed from here when the policy reads
/// latency. Keyed picks of a cluster with affinity stay with their key's destination: its load
/// bound spreads them.
#[inline(never)]
fn pick_shaped(
    snapshot: &ClusterSnapshot,
    held: &Held,
    draws: Draws<'_>,
    key: Option<&[u8]>,
    clock: &dyn Clock,
) -> Picked {
    let now = snapshot.signals.reads_latency().then(|| clock.now());
    if let (Some(spill), Some(ticket)) = (&snapshot.spill, &held.spill) {
        let keyed = key.is_some() && snapshot.affinity.is_some();
        if !keyed && spill.state.takes(draws) {
            let counter = &held.spill_counter;
            return pick_with(snapshot, ticket, &spill.picker, counter, draws, key, now);
        }
    }
    let (ticket, counter) = (&held.ticket, &held.counter);
    pick_with(snapshot, ticket, &snapshot.picker, counter, draws, key, now)
}

/// A pick from the group `ticket` holds, by `picker`, or by the affinity key where the cluster
/// has affinity; `now`: the time of the pick, when the policy reads latency.
#[inline(always)]
fn pick_with(
    snapshot: &ClusterSnapshot,
    ticket: &Arc<Ticket>,
    picker: &Picker,
    counter: &Cell<usize>,
    draws: Draws<'_>,
    key: Option<&[u8]>,
    now: Option<Duration>,
) -> Picked {
    let group = &*ticket.group;
    if let (Some(key), Some(affinity), false) = (key, &snapshot.affinity, group.is_empty()) {
        let total = group
            .total()
            .map_or(0, |t| t.in_flight.load(Ordering::Relaxed));
        let keyed = if Arc::ptr_eq(&ticket.group, &snapshot.best) {
            affinity.pick(group, key_hash(key), total)
        } else {
            affinity.pick_in(group, key_hash(key), total)
        };
        match keyed {
            Ok(index) => return count(ticket, index, group.place(index), now),
            Err(AffinityMiss::Unavailable) => return Picked::miss(Miss::AffinityUnavailable),
            // No member of the tier can take keys (all weigh nothing): the policy picks.
            Err(AffinityMiss::NoCandidate) => {}
        }
    }
    let view = || PickView::new(group, draws, counter, key, now);
    choose(snapshot, ticket, picker, view, now)
}

/// The policy's choice in the group `ticket` holds (`view`: what its picker reads), counted in
/// flight for the handle.
#[inline(always)]
fn choose<'a>(
    snapshot: &ClusterSnapshot,
    ticket: &'a Arc<Ticket>,
    picker: &Picker,
    view: impl Fn() -> PickView<'a>,
    now: Option<Duration>,
) -> Picked {
    let group = &*ticket.group;
    let (index, place) = match group.len() {
        0 => return Picked::miss(nothing_to_pick(snapshot)),
        1 => (0, group.place(0)),
        n => picker.pick(n, view),
    };
    count(ticket, index, place, now)
}

/// Why a cluster has nothing to pick: it left the engine (a pick that read the table just
/// before the reload that removed it), a source it waits for has not answered, or nothing it
/// has is available.
#[cold]
pub(crate) fn nothing_to_pick(snapshot: &ClusterSnapshot) -> Miss {
    if snapshot.retired {
        Miss::UnknownCluster
    } else if snapshot.discovery_pending && snapshot.members.is_empty() {
        Miss::DiscoveryPending
    } else {
        Miss::NoAvailableDestinations
    }
}

/// A pick from `group`, a group computed for one pick (a retry's): prepared for it now, counted
/// in the shared counts, with the cluster's shared round-robin counter.
pub(crate) fn pick_from_group(
    snapshot: &ClusterSnapshot,
    group: Group,
    key: Option<&[u8]>,
    source: &RandomSource,
    clock: &dyn Clock,
) -> Picked {
    let picker = snapshot
        .settings
        .policies
        .load_balancing
        .policy
        .prepare(&group);
    let ticket = Arc::new(Ticket {
        group: Arc::new(group),
        own: None,
    });
    // One value of the cluster's shared counter: the most a pick takes.
    let counter = Cell::new(snapshot.counter.shared.fetch_add(1, Ordering::Relaxed));
    let now = snapshot.signals.reads_latency().then(|| clock.now());
    with_thread_generator(|own| {
        let draws = source.draws(own);
        pick_with(snapshot, &ticket, &picker, &counter, draws, key, now)
    })
}

/// A pick from inside a pick (a picker that picks): no cache, same answer, with the cluster's
/// shared counter and the thread's other generator.
#[cold]
#[inline(never)]
fn pick_inside_pick<R>(
    table: &TableCell,
    cluster: &str,
    source: &RandomSource,
    f: impl FnOnce(Option<Picking<'_>>) -> R,
) -> R {
    let found = table.load().get(cluster).map(|runtime| {
        let snapshot = runtime.cell.load_full();
        let held = Held {
            ticket: Arc::new(Ticket {
                group: snapshot.best.clone(),
                own: None,
            }),
            // One value of the cluster's shared counter: the most a pick takes.
            counter: Cell::new(snapshot.counter.shared.fetch_add(1, Ordering::Relaxed)),
            spill: None,
            spill_counter: Cell::new(0),
            pool: runtime.signals.clone(),
        };
        (snapshot, held)
    });
    with_thread_generator(|own| {
        f(found.as_ref().map(|(snapshot, held)| Picking {
            snapshot,
            held,
            draws: source.draws(own),
        }))
    })
}

/// Runs `f` on the current snapshot of the cluster published in `cell`: through this thread's
/// pick cache when it holds that cluster (the thread picked from it: no shared write), else with
/// a plain load. The outcome path: a request is usually reported on the thread that picked it.
#[inline]
pub(crate) fn with_current<R>(cell: &SnapshotCell, f: impl FnOnce(&ClusterSnapshot) -> R) -> R {
    PICKS.with(|slot| {
        // Busy: an outcome reported from inside a pick or another outcome.
        if let Ok(mut slot) = slot.try_borrow_mut() {
            if let Some(entry) = slot.as_mut().and_then(|cache| {
                cache
                    .clusters
                    .entries
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

/// One thread's reference to a group it picks from: what the handles it takes there hold, and
/// where they count.
pub(crate) struct Ticket {
    group: Arc<Group>,
    /// This thread's own counts, when the group's picks do not count in the shared ones.
    own: Option<Arc<ThreadCounts>>,
}

impl Ticket {
    /// A thread's first ticket to `group`, a group of a cluster whose places `pool` hands out.
    #[cold]
    fn first(group: Arc<Group>, pool: &SignalPool) -> Arc<Ticket> {
        let own = (!group.counts_shared()).then(|| pool.thread_counts());
        Arc::new(Ticket { group, own })
    }

    /// The thread's ticket to `group` after `before`: its own counts carry on while they cover
    /// the group's places.
    #[cold]
    #[inline(never)]
    fn new(group: Arc<Group>, pool: &SignalPool, before: &Ticket) -> Arc<Ticket> {
        let own = match &before.own {
            _ if group.counts_shared() => None,
            Some(own) if own.covers(group.places_end()) => Some(own.clone()),
            _ => Some(pool.thread_counts()),
        };
        Arc::new(Ticket { group, own })
    }

    /// The count a pick of the destination at place `place` writes.
    #[inline(always)]
    fn count(&self, place: u32) -> &AtomicU32 {
        match &self.own {
            Some(own) => own.count(place),
            None => self.group.shared_count(place),
        }
    }
}

/// What [`Engine::pick_endpoint`](crate::Engine::pick_endpoint) returns: the chosen destination,
/// counted in flight until this handle is dropped.
///
/// Report how the request went with [`report`](Self::report) so that passive health checks see
/// it (and, where the cluster balances by latency, its latency estimate). Keep the handle alive
/// for the whole exchange, including reading the body, so that policies that compare requests
/// in flight see real load.
#[must_use = "the destination counts as in flight until the handle is dropped"]
pub struct PickHandle {
    ticket: Arc<Ticket>,
    /// The destination's position in the ticket's group in the low [`INDEX_BITS`] bits; above
    /// them, when the request is timed (the cluster's policy reads latency), the engine-clock
    /// microsecond of the pick plus one, wrapping every 3 days (only the time to the report is
    /// used). One word, so that a handle, and a pick's result, is two words: returned in
    /// registers, never copied out through memory.
    slot: u64,
}

/// Bits of [`PickHandle::slot`] that hold the index: groups of up to 16 million destinations.
const INDEX_BITS: u32 = 24;

/// The part of an engine-clock time in microseconds a handle keeps: the low 38 bits (3.2 days;
/// plus one, it fits the 39 bits above the index).
const STARTED_MASK: u64 = (1 << (62 - INDEX_BITS)) - 1;

/// The top bit of [`PickHandle::slot`]: the pick also counted in its cluster's total.
const COUNTED_IN_TOTAL: u64 = 1 << 63;

/// Engine-clock time in microseconds.
fn micros(at: Duration) -> u64 {
    at.as_micros() as u64
}

/// Counts the destination at `index` of `ticket`'s group, whose signals are at `place`, in
/// flight, for a handle; `started`: the time of the pick, when the request is timed.
#[inline]
fn count(ticket: &Arc<Ticket>, index: usize, place: u32, started: Option<Duration>) -> Picked {
    ticket.count(place).fetch_add(1, Ordering::Relaxed);
    let counted = match ticket.group.total() {
        Some(total) => {
            total.in_flight.fetch_add(1, Ordering::Relaxed);
            COUNTED_IN_TOTAL
        }
        None => 0,
    };
    #[cfg(feature = "metrics")]
    {
        let metrics = ticket.group.destination(index).metrics();
        metrics.picks.increment(1);
        metrics.in_flight.increment(1.0);
    }
    let started = started.map_or(0, |at| (micros(at) & STARTED_MASK) + 1);
    Picked {
        ticket: Some(ticket.clone()),
        word: counted | started << INDEX_BITS | index as u64,
    }
}

/// How long since a request timed by its handle started (`started`: what the handle kept of
/// the pick's time), at engine-clock time `now`.
pub(crate) fn elapsed_since(started: u64, now: Duration) -> Duration {
    Duration::from_micros(micros(now).wrapping_sub(started) & STARTED_MASK)
}

impl PickHandle {
    /// The destination's position in its group.
    #[inline]
    fn index(&self) -> usize {
        (self.slot & ((1 << INDEX_BITS) - 1)) as usize
    }

    /// A handle counting `destination` in flight, taken outside a pick (a group of its own).
    pub(crate) fn of(destination: Arc<Destination>) -> Self {
        let group = Group::of(vec![destination], true, Default::default());
        let ticket = Arc::new(Ticket {
            group: Arc::new(group),
            own: None,
        });
        count(&ticket, 0, ticket.group.place(0), None)
            .into_result()
            .expect("a group of one has a destination")
    }

    #[inline]
    fn arc(&self) -> &Arc<Destination> {
        self.ticket.group.destination(self.index())
    }

    /// The picked destination.
    pub fn destination(&self) -> &Destination {
        self.arc()
    }

    /// The picked destination's base URL.
    pub fn address(&self) -> &Url {
        self.destination().address()
    }

    /// The URL of `path_and_query` on the picked destination, joined as the wrapped client and
    /// the probes join it: the base URL's own path is kept (`http://h/v1/` and `/api/orders`
    /// give `http://h/v1/api/orders`, where `Url::join` would drop `/v1`). See
    /// [`Destination::url`].
    pub fn url(&self, path_and_query: &str) -> Url {
        self.destination().url(path_and_query)
    }

    /// A shared reference to the picked destination, for callers that keep it past the handle.
    pub fn destination_arc(&self) -> Arc<Destination> {
        self.arc().clone()
    }

    /// Reports the request's outcome to the cluster's passive health policy, if passive checks
    /// are enabled, and, where the cluster's policy balances by latency, the time since the pick
    /// to the destination's latency estimate. Call it once per request. It never blocks on I/O;
    /// a health change it causes is applied before it returns. Outcomes of a destination that has
    /// left its cluster count for nothing.
    pub fn report(&self, outcome: RequestOutcome) {
        let latency = match (self.slot & !COUNTED_IN_TOTAL) >> INDEX_BITS {
            0 => Latency::Unknown,
            started => Latency::Since(started - 1),
        };
        self.arc().report(outcome, latency);
    }

    /// Reports the load the destination's server sent with its response: the value of an
    /// `endpoint-load-metrics` header (ORCA over HTTP, `TEXT` or `JSON` form). Its utilization
    /// (`application_utilization`, else `cpu_utilization`) then weighs in the destination's cost
    /// for load-aware policies (`PeakEwma`) once the destination has reported for the cluster's
    /// blackout period, until the reports expire. A malformed value is ignored, with a debug log:
    /// a server's load report never fails the caller's request. The wrapped client, the
    /// middleware and the tower layer call this for every response that carries the header.
    ///
    /// ```
    /// # let engine = healthpick::Engine::from_json(r#"{"Clusters": {"c": {"Destinations": {
    /// #     "d": { "Address": "http://127.0.0.1:8001/" } } } } }"#).unwrap();
    /// let pick = engine.pick_endpoint("c")?;
    /// pick.report_load("TEXT application_utilization=0.42, cpu_utilization=0.7");
    /// # Ok::<(), healthpick::PickError>(())
    /// ```
    pub fn report_load(&self, header_value: &str) {
        match load_report::parse(header_value) {
            Ok(report) => {
                if let Some(utilization) = report.utilization() {
                    self.arc().report_load(utilization);
                }
            }
            Err(error) => tracing::debug!(
                target: "healthpick",
                cluster = self.destination().cluster_id(),
                destination = self.destination().id(),
                %error,
                "load report ignored"
            ),
        }
    }

    /// Reports an outcome whose latency the caller measured itself (the wrapped client's
    /// attempts).
    pub(crate) fn report_took(&self, outcome: RequestOutcome, took: Duration) {
        self.arc().report(outcome, Latency::Took(took));
    }
}

impl Drop for PickHandle {
    #[inline]
    fn drop(&mut self) {
        let group = &self.ticket.group;
        self.ticket
            .count(group.place(self.index()))
            .fetch_sub(1, Ordering::Relaxed);
        if self.slot & COUNTED_IN_TOTAL != 0 {
            if let Some(total) = group.total() {
                total.in_flight.fetch_sub(1, Ordering::Relaxed);
            }
        }
        #[cfg(feature = "metrics")]
        self.arc().metrics().in_flight.decrement(1.0);
    }
}

impl fmt::Debug for PickHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("PickHandle")
            .field(self.destination())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    use super::{start, Miss, PickHandle, Picked};
    use crate::engine::Engine;
    use crate::health::probe_result::ProbeResult;

    fn engine(policy: &str) -> Engine {
        Engine::from_json(&format!(
            r#"{{"Clusters": {{"c": {{"LoadBalancingPolicy": "{policy}",
                "HealthCheck": {{"Active": {{"Enabled": true}}}},
                "Destinations": {{
                    "a": {{"Address": "http://127.0.0.1:1/"}},
                    "b": {{"Address": "http://127.0.0.1:2/"}},
                    "z": {{"Address": "http://127.0.0.1:3/", "Priority": 1}}}}}}}}}}"#
        ))
        .unwrap()
    }

    /// A policy that reads no counts lets each thread count on its own: a pick leaves the
    /// shared count alone, and the destination's count still shows it. One that reads them
    /// counts in the shared count.
    #[test]
    fn picks_write_the_shared_count_only_where_the_policy_reads_counts() {
        for (policy, shared) in [
            ("Random", false),
            ("RoundRobin", false),
            ("FirstAlphabetical", false),
            ("PowerOfTwoChoices", true),
            ("LeastRequests", true),
            ("PeakEwma", true),
        ] {
            let engine = engine(policy);
            let pick = engine.pick_endpoint("c").unwrap();
            let d = pick.destination();
            let shared_count = d.signals.shared_in_flight().load(Ordering::Relaxed);
            assert_eq!(shared_count, u32::from(shared), "{policy}");
            assert_eq!(d.in_flight(), 1, "{policy}");
            let other = std::thread::scope(|s| {
                s.spawn(|| engine.pick_endpoint("c").unwrap())
                    .join()
                    .unwrap()
            });
            drop(pick);
            assert_eq!(other.destination().in_flight(), 1, "{policy}: dropped here");
            drop(other);
            let status = engine.status();
            assert!(status.clusters[0]
                .destinations
                .iter()
                .all(|d| d.in_flight == 0));
        }
    }

    /// A health change that leaves the best group as it was keeps the group (and with it the
    /// picker and every thread's ticket); one that changes it makes a new one.
    #[test]
    fn the_group_is_kept_while_its_destinations_stay() {
        let engine = engine("PowerOfTwoChoices");
        let group = || engine.core.snapshot("c").unwrap().best.clone();
        let before = group();
        drop(engine.pick_endpoint("c").unwrap());
        let ok = |id: &str| ProbeResult::status(id, 200);
        engine
            .report_probe_round("c", &[ok("a"), ok("b"), ok("z")])
            .unwrap();
        assert!(
            Arc::ptr_eq(&before, &group()),
            "Unknown to Healthy: same group"
        );
        engine
            .report_probe_round("c", &[ProbeResult::status("z", 500)])
            .unwrap();
        engine
            .report_probe_round("c", &[ProbeResult::status("z", 500)])
            .unwrap();
        assert!(Arc::ptr_eq(&before, &group()), "another tier's change");
        engine
            .report_probe_round("c", &[ProbeResult::status("a", 500)])
            .unwrap();
        engine
            .report_probe_round("c", &[ProbeResult::status("a", 500)])
            .unwrap();
        let after = group();
        assert!(!Arc::ptr_eq(&before, &after));
        assert_eq!(after.len(), 1);
        assert_eq!(engine.pick_endpoint("c").unwrap().destination().id(), "b");
    }

    /// The first thread starts at 0 (one thread sees 0, 1, 2, ...); the second 61.8% of the way
    /// round, the third 23.6%; and any number of threads start apart: eight threads in a group
    /// of 100 are at least 9 places from each other.
    #[test]
    fn threads_start_their_counters_far_apart() {
        assert_eq!(start(0, 100), 0);
        assert_eq!(start(1, 100), 61);
        assert_eq!(start(2, 100), 23);
        assert_eq!(start(1, 1), 0);
        assert_eq!(start(5, 0), 0);
        let mut starts: Vec<usize> = (0..8).map(|k| start(k, 100)).collect();
        starts.sort_unstable();
        let gaps = starts.windows(2).map(|w| w[1] - w[0]);
        let wrap = 100 - starts[7] + starts[0];
        assert!(gaps.chain([wrap]).all(|g| g >= 9), "{starts:?}");
    }

    /// A handle is two words, and a pick's result is no larger: it leaves the pick path in
    /// two registers.
    #[test]
    fn a_handle_and_a_picks_result_are_two_words() {
        assert_eq!(std::mem::size_of::<PickHandle>(), 16);
        assert_eq!(std::mem::size_of::<Picked>(), 16);
        assert_eq!(std::mem::size_of::<Result<PickHandle, Miss>>(), 16);
    }
}
