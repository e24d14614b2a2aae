//! A destination's in-flight count: picks whose handle is not dropped yet.
//!
//! Every destination keeps its count in its cluster's [`CountPool`]: 4-byte counts in chunks of
//! [`CHUNK`], side by side or, in a small cluster balanced by round robin or at random, two or
//! four cells apart ([`Layout`]). A pick writes the count and nothing else of the destination
//! (the handle keeps the destination alive through its thread's ticket, see `handle.rs`), so:
//!
//! - the counts a pick writes at 10,000 destinations take 40 KiB, not a 64-byte block each;
//! - two threads picking from one group move lines of counts between them as seldom as the
//!   policy's way of walking the group allows (see [`Layout`]);
//! - a policy that reads every count (LeastRequests) walks a compact array.
//!
//! A place is given back when its destination is dropped, and handed out again lowest first, so
//! that destinations published together sit together.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

/// Counts per chunk of a pool (4 KiB).
pub(crate) const CHUNK: usize = 1024;

/// How many cells apart a spread pool keeps its counts: four to a cache line instead of sixteen.
pub(crate) const SPREAD: usize = 4;

/// How many cells apart an alternate pool keeps its counts: eight to a cache line.
pub(crate) const ALTERNATE: usize = 2;

/// The most destinations a spread or alternate pool takes in its first placement: a cluster
/// that starts larger keeps its counts side by side (see [`Layout`]).
pub(crate) const SPREAD_UP_TO: usize = 256;

/// How a pool lays out its counts.
///
/// Two threads picking from one group move a line of counts between their cores whenever a
/// pick writes a count in a line the other thread wrote last. How often that happens depends
/// on how the policy walks the group, so each policy gets its layout:
///
/// - `Compact`: every count next to the previous one, sixteen to a line. LeastRequests scans as
///   few lines as there can be, and a large group's counts take as little cache as they can
///   (10,000 take 40 KiB).
/// - `Alternate`: every other cell, eight counts to a line, for round robin. Each thread goes
///   round the whole group (`engine/table.rs`), so the lines it reaches were mostly written by
///   the other thread since its last lap: one move per line, fewer counts to a line meaning
///   more moves; and two threads that happen to walk the same line at the same time move it on
///   each pick, more counts to a line meaning more such meetings (one group in seven lines at
///   100 compact counts). Two cells apart scales best of the three on two threads.
/// - `Spread`: four cells apart, four counts to a line. A policy that writes counts at random
///   places (Random, PowerOfTwoChoices) on several threads moves a line between cores whenever
///   two threads' picks meet in it; 100 compact counts have seven lines to meet in, spread
///   ones 25.
///
/// Counts further apart take more cache, which costs one thread more than it saves two in a
/// large group, so a cluster whose first placement brings more than [`SPREAD_UP_TO`]
/// destinations keeps them compact; in a large group two threads rarely meet in a line anyway.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Layout {
    #[default]
    Compact,
    Alternate,
    Spread,
}

impl Layout {
    /// Cells between two places handed out one after another.
    #[inline]
    pub fn step(self) -> u32 {
        match self {
            Layout::Compact => 1,
            Layout::Alternate => ALTERNATE as u32,
            Layout::Spread => SPREAD as u32,
        }
    }

    /// The place number of the `ordinal`-th place handed out (0, 1, 2, ...).
    #[inline]
    pub fn place(self, ordinal: u32) -> u32 {
        ordinal * self.step()
    }
}

/// Where one destination's in-flight count lives: its place in its cluster's pool, given back
/// when dropped.
pub(crate) struct InFlight {
    chunk: Arc<CountChunk>,
    index: u32,
}

impl InFlight {
    /// The counter itself.
    #[inline]
    pub fn cell(&self) -> &AtomicU32 {
        self.chunk.count(self.index as usize)
    }

    #[inline]
    pub fn get(&self) -> usize {
        self.cell().load(Ordering::Relaxed) as usize
    }

    /// Its place in the pool: the chunk and the index in it.
    #[inline]
    pub fn place(&self) -> (&Arc<CountChunk>, usize) {
        (&self.chunk, self.index as usize)
    }

    /// Its place as one number: the chunk's position among its pool's chunks times [`CHUNK`],
    /// plus the index in it (what a pick group keeps, see `pick_group.rs`).
    #[inline]
    pub fn number(&self) -> u32 {
        self.chunk.number * CHUNK as u32 + self.index
    }

    /// The layout of the pool it is in.
    #[inline]
    pub fn layout(&self) -> Layout {
        self.chunk.layout
    }
}

/// `CHUNK` counts side by side, starting half-way into a cache line, the same in every chunk:
/// LeastRequests' scan of a busy group runs slower with the counts starting on a line than
/// half-way, where the allocator happened to put them.
#[repr(C, align(64))]
pub(crate) struct CountChunk {
    /// Puts the counts half-way into a line.
    lead: [u32; 8],
    pub counts: [AtomicU32; CHUNK],
    /// Its position among its pool's chunks.
    number: u32,
    /// Its pool's layout.
    layout: Layout,
    /// The pool places are given back to.
    pool: Weak<PoolState>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(pool) = self.chunk.pool.upgrade() {
            pool.places.lock().free.insert(self.number());
        }
    }
}

impl CountChunk {
    fn new(number: u32, layout: Layout, pool: Weak<PoolState>) -> Self {
        CountChunk {
            lead: [0; 8],
            counts: std::array::from_fn(|_| AtomicU32::new(0)),
            number,
            layout,
            pool,
        }
    }

    /// The count at `index` (below [`CHUNK`]; the mask spares a bounds check).
    #[inline(always)]
    pub fn count(&self, index: usize) -> &AtomicU32 {
        &self.counts[index & (CHUNK - 1)]
    }

    /// Its position among its pool's chunks.
    #[inline]
    pub fn number(&self) -> usize {
        self.number as usize
    }

    /// Cells between two places one after another in it.
    #[inline]
    pub fn step(&self) -> usize {
        self.layout.step() as usize
    }
}

/// A chunk of no pool, standing in where a group has no place in a pool's first chunk: nothing
/// counts in it.
pub(crate) fn stand_in_chunk() -> Arc<CountChunk> {
    static STAND_IN: std::sync::OnceLock<Arc<CountChunk>> = std::sync::OnceLock::new();
    STAND_IN
        .get_or_init(|| Arc::new(CountChunk::new(u32::MAX, Layout::Compact, Weak::new())))
        .clone()
}

/// One cluster's chunks of counts.
#[derive(Default)]
pub(crate) struct CountPool(Arc<PoolState>);

#[derive(Default)]
struct PoolState {
    places: Mutex<Places>,
}

#[derive(Default)]
struct Places {
    /// Fixed once the first place is handed out.
    layout: Layout,
    chunks: Vec<Arc<CountChunk>>,
    /// Place numbers given back: handed out again lowest first.
    free: BTreeSet<u32>,
    /// The ordinal of the next place never handed out (see [`Layout::place`]).
    next: u32,
}

impl CountPool {
    /// An empty pool laying its counts out as `layout` says.
    pub fn new(layout: Layout) -> Self {
        CountPool(Arc::new(PoolState {
            places: Mutex::new(Places {
                layout,
                ..Places::default()
            }),
        }))
    }

    /// Told that `count` destinations are about to be placed: if they are the pool's first and
    /// more than [`SPREAD_UP_TO`], the pool becomes compact.
    pub fn expect(&self, count: usize) {
        let mut places = self.0.places.lock();
        if places.next == 0 && count > SPREAD_UP_TO {
            places.layout = Layout::Compact;
        }
    }

    /// The layout of its counts.
    #[cfg(test)]
    pub fn layout(&self) -> Layout {
        self.0.places.lock().layout
    }

    /// A place for a new destination's count, at 0.
    pub fn place(&self) -> InFlight {
        let mut places = self.0.places.lock();
        let layout = places.layout;
        let number = match places.free.pop_first() {
            Some(number) => number,
            None => {
                places.next += 1;
                layout.place(places.next - 1)
            }
        };
        let (position, index) = (number as usize / CHUNK, number as usize % CHUNK);
        while places.chunks.len() <= position {
            let chunk =
                CountChunk::new(places.chunks.len() as u32, layout, Arc::downgrade(&self.0));
            places.chunks.push(Arc::new(chunk));
        }
        let chunk = places.chunks[position].clone();
        // A place is free only once its destination is gone, with nothing in flight; start
        // from 0 all the same.
        chunk.count(index).store(0, Ordering::Relaxed);
        InFlight {
            chunk,
            index: index as u32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place_of(count: &InFlight) -> (u32, usize) {
        let (chunk, index) = count.place();
        assert_eq!(
            count.number() as usize,
            chunk.number as usize * CHUNK + index
        );
        (chunk.number, index)
    }

    #[test]
    fn places_are_handed_out_side_by_side_and_given_back_lowest_first() {
        let pool = CountPool::default();
        let counts: Vec<InFlight> = (0..CHUNK + 2).map(|_| pool.place()).collect();
        assert_eq!(place_of(&counts[0]), (0, 0));
        assert_eq!(place_of(&counts[CHUNK - 1]), (0, CHUNK - 1));
        assert_eq!(place_of(&counts[CHUNK]), (1, 0));
        counts[5].cell().fetch_add(3, Ordering::Relaxed);
        assert_eq!(counts[5].get(), 3);
        assert_eq!(counts[6].get(), 0);
        let mut counts = counts;
        let gone: Vec<InFlight> = vec![counts.remove(7), counts.remove(3)];
        drop(gone);
        let again: Vec<InFlight> = (0..3).map(|_| pool.place()).collect();
        let places: Vec<(u32, usize)> = again.iter().map(place_of).collect();
        assert_eq!(places, [(0, 3), (0, 7), (1, 2)]);
        // A pool dropped before its counts: they go on counting, and give nothing back.
        drop(pool);
        counts[0].cell().fetch_add(1, Ordering::Relaxed);
        assert_eq!(counts[0].get(), 1);
    }

    /// Every chunk's counts start half-way into a cache line, so a count's place in a line is
    /// the same in every chunk.
    #[test]
    fn every_chunk_starts_half_way_into_a_line() {
        let pool = CountPool::default();
        let counts: Vec<InFlight> = (0..3 * CHUNK).map(|_| pool.place()).collect();
        for k in 0..3 {
            let first = std::ptr::from_ref(counts[k * CHUNK].cell()) as usize;
            assert_eq!(first % 64, 32, "chunk {k}");
        }
        assert_eq!(
            std::ptr::from_ref(stand_in_chunk().count(0)) as usize % 64,
            32
        );
    }

    /// A spread pool: every place four cells after the one before (four to a line), chunk
    /// after chunk; a place given back comes back at the same cell.
    #[test]
    fn a_spread_pool_keeps_its_places_four_cells_apart() {
        let pool = CountPool::new(Layout::Spread);
        pool.expect(SPREAD_UP_TO);
        assert_eq!(pool.layout(), Layout::Spread);
        let per_chunk = CHUNK / SPREAD;
        let counts: Vec<InFlight> = (0..per_chunk + 2).map(|_| pool.place()).collect();
        for (k, count) in counts.iter().enumerate() {
            assert_eq!(count.number(), Layout::Spread.place(k as u32));
            assert_eq!(count.number() as usize, k * SPREAD);
        }
        assert_eq!(place_of(&counts[1]), (0, SPREAD));
        assert_eq!(place_of(&counts[per_chunk - 1]), (0, CHUNK - SPREAD));
        assert_eq!(place_of(&counts[per_chunk]), (1, 0));
        assert_eq!(place_of(&counts[per_chunk + 1]), (1, SPREAD));
        assert_eq!(counts[0].place().0.step(), SPREAD);
        let lines = |counts: &[InFlight]| {
            let lines: std::collections::BTreeSet<usize> = counts
                .iter()
                .map(|c| std::ptr::from_ref(c.cell()) as usize / 64)
                .collect();
            lines.len()
        };
        // 100 counts from half-way into a line: 1,632 bytes spread, 432 compact.
        let compact = CountPool::default();
        let side_by_side: Vec<InFlight> = (0..100).map(|_| compact.place()).collect();
        assert_eq!((lines(&counts[..100]), lines(&side_by_side)), (26, 7));
        assert_eq!(side_by_side[0].place().0.step(), 1);
        let mut counts = counts;
        let gone = counts.remove(9);
        drop(gone);
        let again = pool.place();
        assert_eq!(place_of(&again), (0, 9 * SPREAD));
    }

    /// Round robin's pool: two cells apart, eight counts to a line; a large first placement
    /// keeps it compact too.
    #[test]
    fn an_alternate_pool_keeps_its_places_two_cells_apart() {
        let pool = CountPool::new(Layout::Alternate);
        pool.expect(SPREAD_UP_TO);
        let per_chunk = CHUNK / ALTERNATE;
        let counts: Vec<InFlight> = (0..per_chunk + 2).map(|_| pool.place()).collect();
        for (k, count) in counts.iter().enumerate() {
            assert_eq!(count.number() as usize, k * ALTERNATE);
        }
        assert_eq!(place_of(&counts[per_chunk - 1]), (0, CHUNK - ALTERNATE));
        assert_eq!(place_of(&counts[per_chunk + 1]), (1, ALTERNATE));
        assert_eq!(counts[0].place().0.step(), ALTERNATE);
        // 100 counts from half-way into a line: cells 8 to 206, 13 lines (7 compact).
        let lines: std::collections::BTreeSet<usize> = counts[..100]
            .iter()
            .map(|c| std::ptr::from_ref(c.cell()) as usize / 64)
            .collect();
        assert_eq!(lines.len(), 13);
        let large = CountPool::new(Layout::Alternate);
        large.expect(SPREAD_UP_TO + 1);
        assert_eq!(large.layout(), Layout::Compact);
    }

    /// A spread pool whose first placement brings more than 256 destinations is compact; once
    /// a place is handed out the layout stays.
    #[test]
    fn a_large_first_placement_keeps_the_counts_side_by_side() {
        let large = CountPool::new(Layout::Spread);
        large.expect(SPREAD_UP_TO + 1);
        assert_eq!(large.layout(), Layout::Compact);
        let (a, b) = (large.place(), large.place());
        assert_eq!((place_of(&a), place_of(&b)), ((0, 0), (0, 1)));
        let small = CountPool::new(Layout::Spread);
        small.expect(3);
        let first = small.place();
        small.expect(10_000);
        assert_eq!(small.layout(), Layout::Spread);
        assert_eq!(
            (place_of(&first), place_of(&small.place())),
            ((0, 0), (0, SPREAD))
        );
    }
}
