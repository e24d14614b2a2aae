//! A destination's in-flight count (SPEC §6): picks whose handle is not dropped yet.
//!
//! Most destinations keep their count in their own hot block, next to the reference count a
//! pick writes anyway, so that two threads picking different destinations rarely write the same
//! cache line. A cluster whose load-balancing policy reads every count on every pick
//! (`LoadBalancingPolicy::reads_every_count`, as LeastRequests does) instead gives its new
//! destinations a place in a [`CountPool`]: 4-byte counts side by side in chunks of
//! [`CHUNK`], so that reading a group's counts is a walk over a compact array rather than a
//! visit to every destination. A place is given back when its destination is dropped, and handed
//! out again lowest first, so that destinations published together sit together.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

/// Counts per chunk of a pool (4 KiB).
pub(crate) const CHUNK: usize = 1024;

/// Where one destination's in-flight count lives.
pub(crate) enum InFlight {
    /// In the destination's own block.
    Own(AtomicU32),
    /// In its cluster's pool.
    Pooled(PooledCount),
}

impl InFlight {
    /// A count of the destination's own.
    pub fn own() -> Self {
        InFlight::Own(AtomicU32::new(0))
    }

    /// The counter itself.
    #[inline]
    pub fn cell(&self) -> &AtomicU32 {
        match self {
            InFlight::Own(count) => count,
            InFlight::Pooled(pooled) => pooled.cell(),
        }
    }

    #[inline]
    pub fn get(&self) -> usize {
        self.cell().load(Ordering::Relaxed) as usize
    }

    /// Its place in a pool, if it has one: the chunk and the index in it.
    #[inline]
    pub fn place(&self) -> Option<(&Arc<CountChunk>, usize)> {
        match self {
            InFlight::Own(_) => None,
            InFlight::Pooled(pooled) => Some((&pooled.chunk, pooled.index as usize)),
        }
    }
}

/// `CHUNK` counts side by side.
pub(crate) struct CountChunk {
    pub counts: [AtomicU32; CHUNK],
    /// Its position among its pool's chunks.
    number: u32,
    /// The pool places are given back to.
    pool: Weak<PoolState>,
}

/// One destination's place in a pool; given back when dropped.
pub(crate) struct PooledCount {
    chunk: Arc<CountChunk>,
    index: u32,
}

impl PooledCount {
    #[inline]
    fn cell(&self) -> &AtomicU32 {
        // The mask keeps the index in range without a bounds check (it is below CHUNK).
        &self.chunk.counts[self.index as usize & (CHUNK - 1)]
    }
}

impl Drop for PooledCount {
    fn drop(&mut self) {
        if let Some(pool) = self.chunk.pool.upgrade() {
            pool.places
                .lock()
                .free
                .insert((self.chunk.number, self.index));
        }
    }
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
    chunks: Vec<Arc<CountChunk>>,
    /// Places given back, by chunk and index: handed out again lowest first.
    free: BTreeSet<(u32, u32)>,
    /// Places of the last chunk never handed out yet start here.
    next: usize,
}

impl CountPool {
    /// A place for a new destination's count, at 0.
    pub fn place(&self) -> InFlight {
        let mut places = self.0.places.lock();
        let (chunk, index) = match places.free.pop_first() {
            Some((number, index)) => (places.chunks[number as usize].clone(), index),
            None => {
                if places.chunks.is_empty() || places.next == CHUNK {
                    let number = places.chunks.len() as u32;
                    places.chunks.push(Arc::new(CountChunk {
                        counts: std::array::from_fn(|_| AtomicU32::new(0)),
                        number,
                        pool: Arc::downgrade(&self.0),
                    }));
                    places.next = 0;
                }
                let index = places.next as u32;
                places.next += 1;
                let chunk = places.chunks.last().expect("a chunk was just made").clone();
                (chunk, index)
            }
        };
        // A place is free only once its destination is gone, with nothing in flight; start
        // from 0 all the same.
        chunk.counts[index as usize].store(0, Ordering::Relaxed);
        InFlight::Pooled(PooledCount { chunk, index })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place_of(count: &InFlight) -> (u32, usize) {
        let (chunk, index) = count.place().expect("pooled");
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
}
