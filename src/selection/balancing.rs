//! The load-balancing extension point: a policy prepares a [`Picker`] for each best group, and
//! the engine picks with it on every request, reading what it needs through a [`PickView`].
//!
//! A picker is one of the common forms of picking, which the engine runs in place (a uniform
//! draw, two choices by load, the round-robin counter, a fixed destination), or a picker of the
//! policy's own ([`Picker::custom`]), called through its object. Built-in and custom policies
//! choose among the same forms through the same doors; no policy is recognised by its type.
//! What a picker reads at pick time:
//!
//! - each destination's **requests in flight** ([`PickView::in_flight`]),
//! - its **latency estimate** ([`PickView::latency`], or [`PickView::latency_secs`] to compute
//!   a cost with: a peak-sensitive moving average of its request latencies),
//! - its **weight** ([`PickView::weight`]: its configured weight, times its slow-start factor
//!   while it warms up),
//! - the request's **affinity key**, when the caller gave one ([`PickView::key`]),
//! - random draws and a round-robin counter.
//!
//! A policy says which load signals its picks read ([`LoadBalancingPolicy::signals`]), and
//! picks pay only for those: in-flight counts are shared between threads only where a policy
//! compares them, and a pick reads the clock only where a policy reads latency.

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::destination::latency;
use crate::destination::reported_load;
use crate::destination::signals::Chunk;
use crate::destination::signals::SignalRules;
use crate::destination::Destination;
use crate::rng::Draws;

/// Chooses one destination out of a best group (YARP's `ILoadBalancingPolicy`).
///
/// [`prepare`](Self::prepare) runs when the group changes (membership or weights; never on the
/// request path): whatever a policy can compute from the group alone, such as weights turned
/// into a table or the first destination by name, belongs there. The [`Picker`] it returns is
/// used on every request with a group of two or more destinations: no locks, no allocation, no
/// I/O. A health change that leaves the group as it is does not prepare again, so a picker that
/// cares about health reads it at pick time.
///
/// ```
/// use healthpick::selection::{Group, LoadBalancingPolicy, PickView, Picker, Signals};
///
/// /// The destination with the highest weight (the first of them), found once per change.
/// struct Heaviest;
/// impl LoadBalancingPolicy for Heaviest {
///     fn prepare(&self, group: &Group) -> Picker {
///         let heaviest = (0..group.len())
///             .rev()
///             .max_by(|&a, &b| group.weight(a).total_cmp(&group.weight(b)))
///             .unwrap_or(0);
///         Picker::Fixed(heaviest)
///     }
///     fn signals(&self) -> Signals {
///         Signals::NONE
///     }
/// }
///
/// /// Whichever destination has the lower latency estimate, of two drawn at random.
/// struct Quicker;
/// impl LoadBalancingPolicy for Quicker {
///     fn prepare(&self, _group: &Group) -> Picker {
///         Picker::custom(|view: &PickView<'_>| {
///             let (i, j) = view.two_random_indices(view.len());
///             if view.latency(j) < view.latency(i) { j } else { i }
///         })
///     }
///     fn signals(&self) -> Signals {
///         Signals::LATENCY
///     }
/// }
/// ```
pub trait LoadBalancingPolicy: Send + Sync + 'static {
    /// The picker for `group`, made once per change of the group (and for each group a retry
    /// picks from).
    ///
    /// The group may have any length, 0 included; the picker is used only when it has two or
    /// more destinations.
    fn prepare(&self, group: &Group) -> Picker;

    /// The load signals its picks read. Default: in-flight counts ([`Signals::IN_FLIGHT`]).
    fn signals(&self) -> Signals {
        Signals::IN_FLIGHT
    }
}

/// One group's picks, as a policy prepared them: one of the common forms of picking, which the
/// engine runs in place on every pick, or a picker of the policy's own, called through its
/// object. Every form picks from a group of two or more destinations.
#[derive(Clone)]
pub enum Picker {
    /// A uniform random destination (`Random` over equal weights).
    Uniform,
    /// Two distinct random candidates; the one with fewer requests in flight wins, ties to the
    /// first (`PowerOfTwoChoices` over equal weights).
    TwoChoices,
    /// The round-robin counter ([`PickView::next_counter`]) modulo the group's length
    /// (`RoundRobin` over equal weights).
    InOrder,
    /// Always the destination at this index (`FirstAlphabetical`).
    Fixed(usize),
    /// A picker of the policy's own (see [`Picker::custom`]).
    Custom(Arc<dyn Pick>),
}

impl Picker {
    /// A picker of the policy's own: `pick` is called on every pick.
    pub fn custom(pick: impl Pick) -> Picker {
        Picker::Custom(Arc::new(pick))
    }

    /// The index it picks in the group `view` shows (of `n` >= 2 destinations) and the place
    /// of that destination's signals: the forms run in place, a picker of the policy's own
    /// through its object (its answer wrapped into range). Inlined into the pick path, so that
    /// the forms read the view from registers; only a picker of the policy's own gets a view in
    /// memory (`view` makes one for each use, which costs nothing where it does not leave).
    #[inline(always)]
    pub(crate) fn pick<'a>(&self, n: usize, view: impl Fn() -> PickView<'a>) -> (usize, u32) {
        let index = match self {
            Picker::Uniform => view().random_index(n),
            // The places found for the comparison serve the count too.
            Picker::TwoChoices => return view().two_choices(n),
            Picker::InOrder => view().next_counter() % n,
            Picker::Fixed(index) => *index,
            Picker::Custom(pick) => pick.pick(&view()),
        };
        // A custom picker may answer out of range; `%` only then (it costs a division).
        let index = if index < n { index } else { index % n };
        (index, view().group.place(index))
    }
}

impl std::fmt::Debug for Picker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Picker::Uniform => f.write_str("Uniform"),
            Picker::TwoChoices => f.write_str("TwoChoices"),
            Picker::InOrder => f.write_str("InOrder"),
            Picker::Fixed(index) => f.debug_tuple("Fixed").field(index).finish(),
            Picker::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

/// A policy's own way of picking (see [`Picker::custom`]). Any `Fn(&PickView<'_>) -> usize`
/// closure is one.
pub trait Pick: Send + Sync + 'static {
    /// The index in the group (of two or more destinations) of the destination to use. An
    /// index out of range is wrapped into range rather than trusted.
    fn pick(&self, view: &PickView<'_>) -> usize;
}

impl<F: Fn(&PickView<'_>) -> usize + Send + Sync + 'static> Pick for F {
    #[inline]
    fn pick(&self, view: &PickView<'_>) -> usize {
        self(view)
    }
}

/// The load signals a policy's picks read, so that picks pay only for what they use.
///
/// - [`Signals::IN_FLIGHT`]: every pick from the cluster counts in one count per destination
///   that all threads share, so [`PickView::in_flight`] is one read. Without it each thread
///   counts on its own (nothing shared is written on the pick path) and
///   [`PickView::in_flight`] adds the threads' counts up: exact, but slower.
/// - [`Signals::LATENCY`]: a pick reads the clock once, so that [`PickView::latency`] is as of
///   the pick and the handle times its request (a [`report`](crate::PickHandle::report) then
///   feeds the destination's latency estimate). Without it [`PickView::latency`] returns the
///   estimate as of its last sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Signals {
    in_flight: bool,
    latency: bool,
}

impl Signals {
    /// No load signal: the picks read only weights, draws, the counter or the key.
    pub const NONE: Signals = Signals {
        in_flight: false,
        latency: false,
    };
    /// Requests in flight.
    pub const IN_FLIGHT: Signals = Signals {
        in_flight: true,
        latency: false,
    };
    /// Latency estimates.
    pub const LATENCY: Signals = Signals {
        in_flight: false,
        latency: true,
    };

    /// Whether picks read in-flight counts.
    #[inline]
    pub fn reads_in_flight(self) -> bool {
        self.in_flight
    }

    /// Whether picks read latency estimates.
    #[inline]
    pub fn reads_latency(self) -> bool {
        self.latency
    }
}

impl std::ops::BitOr for Signals {
    type Output = Signals;

    fn bitor(self, other: Signals) -> Signals {
        Signals {
            in_flight: self.in_flight || other.in_flight,
            latency: self.latency || other.latency,
        }
    }
}

/// [`Group::run`] of a group whose places do not run on.
const NO_RUN: u32 = u32::MAX;

/// A group of destinations a pick chooses from (a cluster's best group, or a retry's), as a
/// policy prepares for it: the destinations in group order and their weights, and where their
/// load signals are in the cluster's signal pool.
pub struct Group {
    destinations: Box<[Arc<Destination>]>,
    /// Each destination's weight, with its slow-start factor.
    weights: Box<[f64]>,
    /// Whether the weights differ.
    weighted: bool,
    /// Each destination's place in the pool, in group order.
    places: Box<[u32]>,
    /// The first place when the places run on one after another (`places[k] == run + k`), as
    /// they do for a healthy cluster whose destinations were placed together: a count is then
    /// found by adding its index, without reading `places`. [`NO_RUN`] otherwise.
    run: u32,
    /// The pool's first chunk, where every place of a cluster is that has not grown past its
    /// first publication (or 1,024 places): kept at hand so that most lookups read no list
    /// (another chunk of the group, never read there, when the group has no place in it).
    first: Arc<Chunk>,
    /// The first chunk's in-flight counts: a place below their length counts there.
    first_counts: Arc<[AtomicU32]>,
    /// log2 of the places per chunk of the pool.
    chunk_bits: u32,
    /// The pool's chunks, by chunk number (a number none of the group's places uses holds
    /// another chunk of the group, never read there).
    chunks: Box<[Arc<Chunk>]>,
    /// One past the highest place of the group.
    places_end: u32,
    /// Whether picks from it count in the shared counts (the policy reads them) or each
    /// thread in its own.
    shared_counts: bool,
    /// The cluster's counter, when its picks also count in its total in flight (keyed picks
    /// bound each destination's load by the mean).
    total: Option<Arc<ClusterCounter>>,
    /// Each destination's slow-start factor, already in its weight, when some destination
    /// is still warming up.
    ramp: Option<Box<[f64]>>,
    rules: SignalRules,
}

impl Group {
    /// The group of `destinations` in that order, weighing `weights` (one per destination),
    /// counting in the shared counts when `shared_counts`.
    pub(crate) fn new(
        destinations: Vec<Arc<Destination>>,
        weights: Vec<f64>,
        shared_counts: bool,
        rules: SignalRules,
    ) -> Group {
        debug_assert_eq!(destinations.len(), weights.len());
        let places: Box<[u32]> = destinations.iter().map(|d| d.signals.number()).collect();
        let run = places
            .first()
            .copied()
            .filter(|&first| {
                places
                    .iter()
                    .enumerate()
                    .all(|(k, &place)| u64::from(place) == u64::from(first) + k as u64)
            })
            .unwrap_or(NO_RUN);
        let mut chunks: Vec<Option<Arc<Chunk>>> = Vec::new();
        for d in &destinations {
            let chunk = d.signals.chunk();
            if chunks.len() <= chunk.number() {
                chunks.resize(chunk.number() + 1, None);
            }
            chunks[chunk.number()].get_or_insert_with(|| chunk.clone());
        }
        let filler = chunks.iter().flatten().next().cloned();
        let chunks: Box<[Arc<Chunk>]> = chunks
            .into_iter()
            .filter_map(|chunk| chunk.or_else(|| filler.clone()))
            .collect();
        let first = chunks.first().cloned().unwrap_or_else(Chunk::stand_in);
        let (first_counts, chunk_bits) = (first.counts().clone(), first.bits());
        let weighted = weights.first().is_some_and(|&first| {
            weights.iter().any(|&w| w != first) && weights.iter().any(|&w| w > 0.0)
        });
        Group {
            places_end: places.iter().max().map_or(0, |&p| p + 1),
            destinations: destinations.into_boxed_slice(),
            weights: weights.into_boxed_slice(),
            weighted,
            places,
            run,
            first,
            first_counts,
            chunk_bits,
            chunks,
            shared_counts,
            total: None,
            ramp: None,
            rules,
        }
    }

    /// The group, whose weights include these slow-start factors (one per destination).
    pub(crate) fn ramping(mut self, factors: Vec<f64>) -> Group {
        self.ramp = factors
            .iter()
            .any(|&f| f < 1.0)
            .then(|| factors.into_boxed_slice());
        self
    }

    /// The slow-start factor of the destination at `index`: from the cluster's minimum up to
    /// 1 while it warms up after becoming available, 1 once warm. Already part of its
    /// [`weight`](Self::weight); a policy that does not balance by weight can read it here.
    #[inline]
    pub fn slow_start_factor(&self, index: usize) -> f64 {
        self.ramp.as_ref().map_or(1.0, |factors| factors[index])
    }

    /// The group, its picks also counted in `counter`'s total in flight.
    pub(crate) fn counting_total(mut self, counter: Arc<ClusterCounter>) -> Group {
        self.total = Some(counter);
        self
    }

    /// The cluster's counter of requests in flight, when picks from it count there.
    #[inline]
    pub(crate) fn total(&self) -> Option<&ClusterCounter> {
        self.total.as_deref()
    }

    /// The group of `destinations` at their configured weights.
    pub(crate) fn of(
        destinations: Vec<Arc<Destination>>,
        shared_counts: bool,
        rules: SignalRules,
    ) -> Group {
        let weights = destinations.iter().map(|d| d.weight()).collect();
        Group::new(destinations, weights, shared_counts, rules)
    }

    /// How many destinations it has.
    #[inline]
    pub fn len(&self) -> usize {
        self.destinations.len()
    }

    /// Whether it has none.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.destinations.is_empty()
    }

    /// Its destinations, in group order.
    #[inline]
    pub fn destinations(&self) -> &[Arc<Destination>] {
        &self.destinations
    }

    /// The destination at `index`.
    #[inline]
    pub fn destination(&self, index: usize) -> &Arc<Destination> {
        &self.destinations[index]
    }

    /// The weight of the destination at `index`: its configured weight, times its slow-start
    /// factor while it warms up.
    #[inline]
    pub fn weight(&self, index: usize) -> f64 {
        self.weights[index]
    }

    /// The weights in group order when they differ, `None` when they are all the same (an
    /// unweighted group, which the built-in policies pick in their plain form).
    pub fn weights(&self) -> Option<&[f64]> {
        self.weighted.then_some(&*self.weights)
    }

    /// The place in the cluster's signal pool of the destination at `index`.
    #[inline(always)]
    pub(crate) fn place(&self, index: usize) -> u32 {
        if self.run != NO_RUN {
            self.run + index as u32
        } else {
            self.places[index]
        }
    }

    /// The chunk place `place` of the group is in.
    #[inline(always)]
    fn chunk(&self, place: u32) -> &Chunk {
        match place >> self.chunk_bits {
            0 => &self.first,
            number => &self.chunks[number as usize],
        }
    }

    /// The shared in-flight count of place `place` of the group.
    #[inline(always)]
    pub(crate) fn shared_count(&self, place: u32) -> &AtomicU32 {
        match self.first_counts.get(place as usize) {
            Some(count) => count,
            None => self.chunk(place).in_flight(place),
        }
    }

    /// Whether picks from it count in the shared counts.
    #[inline]
    pub(crate) fn counts_shared(&self) -> bool {
        self.shared_counts
    }

    /// One past its highest place: what a thread's own counts must cover.
    pub(crate) fn places_end(&self) -> u32 {
        self.places_end
    }

    /// The rules its signals are read with.
    pub(crate) fn signal_rules(&self) -> &SignalRules {
        &self.rules
    }

    /// Whether it has the same destinations in the same order, with the same weights and the
    /// same way of counting, as `other` (a group a new snapshot can keep, with its picker and
    /// the threads' tickets to it).
    pub(crate) fn same_as(
        &self,
        destinations: &[Arc<Destination>],
        weights: &[f64],
        shared_counts: bool,
        rules: &SignalRules,
        counts_total: bool,
    ) -> bool {
        self.shared_counts == shared_counts
            && self.total.is_some() == counts_total
            && self.rules == *rules
            && *self.weights == *weights
            && self.destinations.len() == destinations.len()
            && self
                .destinations
                .iter()
                .zip(destinations)
                .all(|(a, b)| Arc::ptr_eq(a, b))
    }
}

impl Default for Group {
    fn default() -> Self {
        Group::new(Vec::new(), Vec::new(), true, SignalRules::default())
    }
}

impl std::fmt::Debug for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group")
            .field("len", &self.len())
            .field("weighted", &self.weighted)
            .finish_non_exhaustive()
    }
}

/// A cluster's round-robin counter for picks off the pick path (retries, picks from inside a
/// pick), and the order in which threads first pick from the cluster (the first counts from 0).
/// On cache lines of its own: nothing a pick reads may share a line that threads write.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct ClusterCounter {
    /// The shared counter.
    pub shared: AtomicUsize,
    /// Hands each thread its place among the cluster's pickers: 0, 1, 2, ...
    pub pickers: AtomicUsize,
    /// Requests in flight to the cluster, counted where keyed picks bound each destination's
    /// load by the mean (a cluster with `SessionAffinity`).
    pub in_flight: AtomicUsize,
}

/// What a [`Picker`] reads on one pick: the group's load signals, random draws, the
/// round-robin counter and the request's affinity key.
pub struct PickView<'a> {
    group: &'a Group,
    draws: Draws<'a>,
    /// The round-robin counter this pick advances: the picking thread's own for the cluster.
    counter: &'a Cell<usize>,
    key: Option<&'a [u8]>,
    /// The engine-clock time of the pick, when the policy reads latency.
    now: Option<Duration>,
}

impl<'a> PickView<'a> {
    pub(crate) fn new(
        group: &'a Group,
        draws: Draws<'a>,
        counter: &'a Cell<usize>,
        key: Option<&'a [u8]>,
        now: Option<Duration>,
    ) -> Self {
        PickView {
            group,
            draws,
            counter,
            key,
            now,
        }
    }

    /// The group's length (at least 2 when a picker is called).
    #[inline]
    pub fn len(&self) -> usize {
        self.group.len()
    }

    /// Whether the group is empty (never, when a picker is called).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.group.is_empty()
    }

    /// The destination at `index`.
    #[inline]
    pub fn destination(&self, index: usize) -> &Arc<Destination> {
        self.group.destination(index)
    }

    /// Requests in flight to the destination at `index`.
    #[inline]
    pub fn in_flight(&self, index: usize) -> usize {
        if self.group.shared_counts {
            self.group
                .shared_count(self.group.place(index))
                .load(Ordering::Relaxed) as usize
        } else {
            self.added_up(index)
        }
    }

    /// The count of a destination of a group whose picks count per thread: every thread's,
    /// added up (the policy did not declare that it reads counts).
    #[cold]
    #[inline(never)]
    fn added_up(&self, index: usize) -> usize {
        self.group.destination(index).in_flight()
    }

    /// Two choices by in-flight counts in a group of `n`: the index of the one with fewer in
    /// flight (ties to the first drawn) and its place. A select rather than a branch: under real
    /// load the comparison goes either way.
    #[inline(always)]
    fn two_choices(&self, n: usize) -> (usize, u32) {
        let group = self.group;
        let (i, j) = self.two_random_indices(n);
        let (place_i, place_j) = (group.place(i), group.place(j));
        let j_wins = if group.shared_counts {
            let load = |place| group.shared_count(place).load(Ordering::Relaxed);
            load(place_j) < load(place_i)
        } else {
            self.added_up(j) < self.added_up(i)
        };
        [(i, place_i), (j, place_j)][usize::from(j_wins)]
    }

    /// The latency estimate of the destination at `index` (its decay and the default before
    /// the first sample are cluster settings): as of this pick where the policy reads latency
    /// ([`Signals::LATENCY`]), else as of the destination's last sample.
    #[inline]
    pub fn latency(&self, index: usize) -> Duration {
        // Whole nanoseconds, from a non-negative finite estimate.
        Duration::from_nanos((self.latency_secs(index) * 1e9) as u64)
    }

    /// [`latency`](Self::latency) in seconds: for a policy that computes a cost with it.
    #[inline]
    pub fn latency_secs(&self, index: usize) -> f64 {
        let group = self.group;
        let place = group.place(index);
        let cell = group.chunk(place).latency(place);
        let rules = &group.rules.latency;
        match self.now {
            Some(now) => latency::estimate_secs(cell, now, rules),
            None => latency::last_estimate_secs(cell, rules),
        }
    }

    /// The utilization the destination at `index` reports (`endpoint-load-metrics`), when a
    /// report counts: after its blackout and before it expires, as of this pick where the
    /// policy reads latency ([`Signals::LATENCY`]: the pick then reads the clock); else the last
    /// one reported. `None` when the cluster reads no reports or none counts.
    #[inline]
    pub fn utilization(&self, index: usize) -> Option<f64> {
        let group = self.group;
        let rules = group.rules.reports.as_ref()?;
        let place = group.place(index);
        let (load, since) = group.chunk(place).load(place);
        match self.now {
            Some(now) => reported_load::utilization(load, since, now, rules),
            None => reported_load::last_reported(load),
        }
    }

    /// The weight of the destination at `index` (with its slow-start factor).
    #[inline]
    pub fn weight(&self, index: usize) -> f64 {
        self.group.weight(index)
    }

    /// The request's affinity key, when the caller gave one.
    #[inline]
    pub fn key(&self) -> Option<&[u8]> {
        self.key
    }

    /// A uniform random index in `0..n` (0 when `n` is 0), from the engine's (possibly seeded)
    /// source.
    #[inline]
    pub fn random_index(&self, n: usize) -> usize {
        self.draws.index(n)
    }

    /// 64 random bits from the engine's (possibly seeded) source.
    #[inline]
    pub fn random_u64(&self) -> u64 {
        self.draws.next_u64()
    }

    /// 64 bits from an evenly spread sequence (this thread's, or the seeded source's), for
    /// draws in proportion to weights: read as two 32-bit fractions, its halves fill the unit
    /// square evenly from one pick to the next, so that a destination drawn by area (a column
    /// and a coin of an alias table, say) gets its share of any run of picks within a few
    /// picks, where independent random draws wander by the square root of the run. Each
    /// thread's sequence starts at a random point.
    #[inline]
    pub fn spread_u64(&self) -> u64 {
        self.draws.next_spread()
    }

    /// Two distinct uniform random indices in `0..n` (`n` >= 2).
    #[inline]
    pub fn two_random_indices(&self, n: usize) -> (usize, usize) {
        self.draws.two_distinct(n)
    }

    /// The round-robin counter, advanced by one. Each thread counts on its own, so that a
    /// pick writes nothing another thread reads: the first thread that picks from the cluster
    /// counts from 0 (one thread sees 0, 1, 2, ...), every later thread from a start of its own
    /// (see `engine/fast_path.rs`). A retry's pick takes the next value of one counter the
    /// cluster keeps for them.
    #[inline]
    pub fn next_counter(&self) -> usize {
        let value = self.counter.get();
        self.counter.set(value.wrapping_add(1));
        value
    }
}

impl std::fmt::Debug for PickView<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PickView")
            .field("group", self.group)
            .field("key", &self.key.is_some())
            .finish_non_exhaustive()
    }
}
