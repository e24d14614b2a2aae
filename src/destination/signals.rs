//! A cluster's load signals: each destination's requests in flight, its latency estimate and
//! the load its server reports, kept side by side in the cluster's [`SignalPool`] rather than in
//! the destination itself.
//!
//! A pick reads and writes signals of destinations it does not otherwise touch, so they sit
//! together: 10,000 destinations' counts take 40 KiB, where their destinations take over a
//! megabyte. Each destination holds one [`Place`] for its whole life, in a chunk of places that
//! never moves; the place is given back when the destination is dropped (nothing can be in
//! flight to it then) and handed out again lowest first, so that destinations published
//! together sit together and a group's places usually run on one after another
//! (`selection/balancing.rs` finds such a group's counts by adding its index). A pool's chunks
//! all have the size its first publication asked for ([`SignalPool::reserve`]): 1,024 places,
//! or as many as a larger cluster brings at first (up to 65,536), so that a large group's
//! counts are one array a pick indexes, not a chunk to look up first.
//!
//! Counts are written where their readers need them. A policy that compares in-flight counts on
//! every pick (PowerOfTwoChoices, LeastRequests, PeakEwma) reads each destination's one shared
//! count, so every pick from its cluster writes that count. A policy that never reads them
//! (Random, RoundRobin, FirstAlphabetical) lets each thread count in [`ThreadCounts`] of its own,
//! so that threads picking from one group write nothing another thread reads; the status view
//! adds the threads' counts up ([`Place::in_flight`]).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use super::latency::LatencySettings;
use super::reported_load::ReportRules;

/// How a cluster's signals are read: its latency estimates' decay and default, and whether and
/// how its reported loads count.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SignalRules {
    pub latency: LatencySettings,
    /// `None`: reported loads are not read.
    pub reports: Option<ReportRules>,
}

/// log2 of the fewest places a chunk has (1,024).
pub(crate) const MIN_CHUNK_BITS: u32 = 10;

/// log2 of the most places a chunk has (65,536): beyond, a large first publication takes
/// several chunks.
const MAX_CHUNK_BITS: u32 = 16;

/// One chunk of places' signals: the shared in-flight counts, the latency estimates (see
/// `latency.rs` for what a latency cell holds) and the reported loads (`reported_load.rs`).
pub(crate) struct Chunk {
    /// Its own allocation, which a group keeps at hand for its first chunk's counts.
    in_flight: Arc<[AtomicU32]>,
    latency: Box<[AtomicU64]>,
    load: Box<[AtomicU64]>,
    load_since: Box<[AtomicU32]>,
    /// Its position among its pool's chunks.
    number: u32,
    /// log2 of its number of places.
    bits: u32,
    /// The pool its places are given back to.
    pool: Weak<PoolState>,
}

impl Chunk {
    fn new(number: u32, bits: u32, pool: Weak<PoolState>) -> Self {
        let len = 1usize << bits;
        Chunk {
            in_flight: (0..len).map(|_| AtomicU32::new(0)).collect(),
            latency: (0..len).map(|_| AtomicU64::new(0)).collect(),
            load: (0..len).map(|_| AtomicU64::new(0)).collect(),
            load_since: (0..len).map(|_| AtomicU32::new(0)).collect(),
            number,
            bits,
            pool,
        }
    }

    /// The position in the chunk of the place numbered `place` (a place of this chunk).
    #[inline(always)]
    fn at(&self, place: u32) -> usize {
        place as usize & ((1 << self.bits) - 1)
    }

    /// The shared in-flight count of the place numbered `place` (a place of this chunk).
    #[inline(always)]
    pub fn in_flight(&self, place: u32) -> &AtomicU32 {
        &self.in_flight[self.at(place)]
    }

    /// The shared in-flight counts of its places, in order.
    pub fn counts(&self) -> &Arc<[AtomicU32]> {
        &self.in_flight
    }

    /// The latency cell of the place numbered `place` (a place of this chunk).
    #[inline]
    pub fn latency(&self, place: u32) -> &AtomicU64 {
        &self.latency[self.at(place)]
    }

    /// A chunk of no pool, standing in where a group has no chunk at all (it has no
    /// destination): nothing counts in it.
    pub fn stand_in() -> Arc<Chunk> {
        static STAND_IN: std::sync::OnceLock<Arc<Chunk>> = std::sync::OnceLock::new();
        STAND_IN
            .get_or_init(|| Arc::new(Chunk::new(0, MIN_CHUNK_BITS, Weak::new())))
            .clone()
    }

    /// The reported-load cells of the place numbered `place` (a place of this chunk).
    #[inline]
    pub fn load(&self, place: u32) -> (&AtomicU64, &AtomicU32) {
        let at = self.at(place);
        (&self.load[at], &self.load_since[at])
    }

    /// Its position among its pool's chunks: places `number << bits ..` are in it.
    pub fn number(&self) -> usize {
        self.number as usize
    }

    /// log2 of its number of places, the same for every chunk of its pool.
    pub fn bits(&self) -> u32 {
        self.bits
    }
}

/// One cluster's places, shared by its destinations and the threads that count on their own.
#[derive(Clone, Default)]
pub(crate) struct SignalPool(Arc<PoolState>);

#[derive(Default)]
struct PoolState {
    places: Mutex<Places>,
    /// Every thread's own counts for this cluster, while they may count something.
    threads: Mutex<Vec<Weak<ThreadCounts>>>,
}

#[derive(Default)]
struct Places {
    chunks: Vec<Arc<Chunk>>,
    /// log2 of the places per chunk, once the first chunk is made.
    bits: Option<u32>,
    /// Places given back: handed out again lowest first.
    free: BTreeSet<u32>,
    /// The next place never handed out.
    next: u32,
}

impl SignalPool {
    /// Says that `count` destinations are about to take places: before the pool's first place,
    /// its chunks are made to hold them all (from 1,024 up to 65,536 places a chunk). Later
    /// calls change nothing: chunks never move, and they all have one size.
    pub fn reserve(&self, count: usize) {
        let mut places = self.0.places.lock();
        if places.bits.is_none() && count > 0 {
            let bits = count.max(1).next_power_of_two().trailing_zeros();
            places.bits = Some(bits.clamp(MIN_CHUNK_BITS, MAX_CHUNK_BITS));
        }
    }

    /// A place for a new destination: no requests in flight, no latency sample.
    pub fn place(&self) -> Place {
        let mut places = self.0.places.lock();
        let number = match places.free.pop_first() {
            Some(number) => number,
            None => {
                places.next += 1;
                places.next - 1
            }
        };
        let bits = *places.bits.get_or_insert(MIN_CHUNK_BITS);
        let position = (number >> bits) as usize;
        while places.chunks.len() <= position {
            let chunk = Chunk::new(places.chunks.len() as u32, bits, Arc::downgrade(&self.0));
            places.chunks.push(Arc::new(chunk));
        }
        let chunk = places.chunks[position].clone();
        chunk.in_flight(number).store(0, Ordering::Relaxed);
        chunk.latency(number).store(0, Ordering::Relaxed);
        let (load, since) = chunk.load(number);
        load.store(0, Ordering::Relaxed);
        since.store(0, Ordering::Relaxed);
        Place { chunk, number }
    }

    /// Counts for one thread that covers every place handed out so far (a thread makes new
    /// ones when it meets a place beyond them); the status view sees them until they are gone.
    pub fn thread_counts(&self) -> Arc<ThreadCounts> {
        let places = self.0.places.lock();
        let capacity = places.chunks.len() << places.bits.unwrap_or(MIN_CHUNK_BITS);
        drop(places);
        let counts = Arc::new(ThreadCounts {
            counts: (0..capacity).map(|_| AtomicU32::new(0)).collect(),
        });
        let mut threads = self.0.threads.lock();
        threads.retain(|t| t.strong_count() > 0);
        threads.push(Arc::downgrade(&counts));
        counts
    }
}

/// Where one destination's signals are: a place in its cluster's pool, given back when the
/// destination is dropped.
pub(crate) struct Place {
    chunk: Arc<Chunk>,
    number: u32,
}

impl Place {
    /// Its number in the pool (its chunk's number times the places a chunk has, plus its
    /// position in the chunk).
    #[inline]
    pub fn number(&self) -> u32 {
        self.number
    }

    /// The chunk it is in.
    pub fn chunk(&self) -> &Arc<Chunk> {
        &self.chunk
    }

    /// The shared in-flight count.
    pub fn shared_in_flight(&self) -> &AtomicU32 {
        self.chunk.in_flight(self.number)
    }

    /// The latency cell.
    pub fn latency(&self) -> &AtomicU64 {
        self.chunk.latency(self.number)
    }

    /// The reported-load cells.
    pub fn load(&self) -> (&AtomicU64, &AtomicU32) {
        self.chunk.load(self.number)
    }

    /// Requests in flight: the shared count and every thread's own count of this place.
    pub fn in_flight(&self) -> usize {
        let mut total = self.shared_in_flight().load(Ordering::Relaxed) as usize;
        if let Some(pool) = self.chunk.pool.upgrade() {
            for counts in pool.threads.lock().iter().filter_map(Weak::upgrade) {
                if let Some(count) = counts.counts.get(self.number as usize) {
                    total += count.load(Ordering::Relaxed) as usize;
                }
            }
        }
        total
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        if let Some(pool) = self.chunk.pool.upgrade() {
            pool.places.lock().free.insert(self.number);
        }
    }
}

/// One thread's own in-flight counts for one cluster, by place. What a handle counts there it
/// takes back there, on whatever thread it is dropped, so each count is exact and the sum over
/// the threads is the destination's count.
pub(crate) struct ThreadCounts {
    counts: Box<[AtomicU32]>,
}

impl ThreadCounts {
    /// Whether it has a count for every place below `end`.
    pub fn covers(&self, end: u32) -> bool {
        end as usize <= self.counts.len()
    }

    /// The count of place `place` (covered: see [`ThreadCounts::covers`]).
    #[inline(always)]
    pub fn count(&self, place: u32) -> &AtomicU32 {
        &self.counts[place as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHUNK: usize = 1 << MIN_CHUNK_BITS;

    /// A pool's first publication sizes its chunks: 10,000 destinations take one chunk of
    /// 16,384 places, a small cluster's 1,024; the size never changes afterwards.
    #[test]
    fn the_first_publication_sizes_the_chunks() {
        let pool = SignalPool::default();
        pool.reserve(10_000);
        let places: Vec<Place> = (0..10_000).map(|_| pool.place()).collect();
        assert!(places.iter().all(|p| p.chunk().number() == 0));
        assert_eq!(places[0].chunk().bits(), 14);
        pool.reserve(100_000);
        let more: Vec<Place> = (0..7_000).map(|_| pool.place()).collect();
        assert_eq!(more[6_383].chunk().number(), 0);
        assert_eq!(more[6_384].chunk().number(), 1);
        assert_eq!(more[6_384].chunk().bits(), 14);
        assert!(pool.thread_counts().covers(2 << 14));

        let small = SignalPool::default();
        small.reserve(0);
        small.reserve(3);
        assert_eq!(small.place().chunk().bits(), 10);
        let unreserved = SignalPool::default();
        assert_eq!(unreserved.place().chunk().bits(), 10);
        let huge = SignalPool::default();
        huge.reserve(1 << 20);
        assert_eq!(huge.place().chunk().bits(), 16);
    }

    #[test]
    fn places_are_handed_out_side_by_side_and_given_back_lowest_first() {
        let pool = SignalPool::default();
        let places: Vec<Place> = (0..CHUNK + 2).map(|_| pool.place()).collect();
        assert_eq!(places[0].number(), 0);
        assert_eq!(places[CHUNK].number() as usize, CHUNK);
        assert_eq!(places[CHUNK].chunk().number(), 1);
        places[5].shared_in_flight().fetch_add(3, Ordering::Relaxed);
        assert_eq!(places[5].in_flight(), 3);
        assert_eq!(places[6].in_flight(), 0);
        let mut places = places;
        let gone = vec![places.remove(7), places.remove(3)];
        drop(gone);
        let again: Vec<u32> = (0..3).map(|_| pool.place().number()).collect();
        // Each dropped again at once: 3, then 3 again, then 7 is still free... so hand them
        // out while holding them.
        assert_eq!(again, [3, 3, 3]);
        let held: Vec<Place> = (0..3).map(|_| pool.place()).collect();
        let numbers: Vec<u32> = held.iter().map(Place::number).collect();
        assert_eq!(numbers, [3, 7, CHUNK as u32 + 2]);
    }

    /// A place handed out again starts from nothing, whatever its last destination left.
    #[test]
    fn a_place_handed_out_again_starts_clean() {
        let pool = SignalPool::default();
        let place = pool.place();
        place.latency().store(77, Ordering::Relaxed);
        drop(place);
        let again = pool.place();
        assert_eq!(again.number(), 0);
        assert_eq!(again.latency().load(Ordering::Relaxed), 0);
        assert_eq!(again.in_flight(), 0);
    }

    /// What threads count on their own shows in the destination's count, and leaves it once
    /// taken back; counts of threads that are gone are not read.
    #[test]
    fn a_destination_counts_what_every_thread_counts_for_it() {
        let pool = SignalPool::default();
        let places: Vec<Place> = (0..3).map(|_| pool.place()).collect();
        let (a, b) = (pool.thread_counts(), pool.thread_counts());
        assert!(a.covers(3) && a.covers(CHUNK as u32) && !a.covers(CHUNK as u32 + 1));
        a.count(1).fetch_add(2, Ordering::Relaxed);
        b.count(1).fetch_add(1, Ordering::Relaxed);
        places[1].shared_in_flight().fetch_add(4, Ordering::Relaxed);
        assert_eq!(places[1].in_flight(), 7);
        assert_eq!(places[0].in_flight(), 0);
        b.count(1).fetch_sub(1, Ordering::Relaxed);
        assert_eq!(places[1].in_flight(), 6);
        drop(a);
        assert_eq!(places[1].in_flight(), 4);
    }
}
