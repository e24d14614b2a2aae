//! The engine's random source: a fast generator of each thread's own by default, or one seeded
//! generator for reproducible runs (tests, the simulator).
//!
//! A thread's own generator is WyRand (`fastrand`'s): one word of state in a `Cell`, so a draw
//! takes no lock and writes nothing another thread reads. A seeded source is one `SmallRng`
//! behind a lock, shared by every thread: a seed then gives the same picks in every run.

use std::cell::Cell;

use parking_lot::Mutex;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

thread_local! {
    /// This thread's generator for draws off the pick path and for picks from inside a pick (a
    /// pick draws from the one its pick cache keeps beside it).
    static THREAD_RNG: LocalRng = LocalRng::new();
}

/// A generator owned by one thread: WyRand, seeded from the OS.
pub(crate) struct LocalRng(Cell<u64>);

impl LocalRng {
    pub fn new() -> Self {
        LocalRng(Cell::new(rand::random()))
    }

    /// 64 uniform random bits.
    #[inline(always)]
    pub fn next_u64(&self) -> u64 {
        let mut rng = fastrand::Rng::with_seed(self.0.get());
        let draw = rng.u64(..);
        self.0.set(rng.get_seed());
        draw
    }
}

/// Where random picks come from.
pub(crate) enum RandomSource {
    /// One generator per thread, seeded from the OS: no shared state on the pick path.
    PerThread,
    /// One seeded generator shared by all threads: reproducible, at the cost of a lock per draw.
    Seeded(Mutex<SmallRng>),
}

impl RandomSource {
    pub fn seeded(seed: u64) -> Self {
        RandomSource::Seeded(Mutex::new(SmallRng::seed_from_u64(seed)))
    }

    /// Uniform in `0..n`; 0 when `n` is 0 (as [`Draws::index`]).
    pub fn index(&self, n: usize) -> usize {
        with_thread_generator(|own| self.draws(own).index(n))
    }

    /// The draws of one pick made by a thread whose own generator is `own`.
    #[inline]
    pub fn draws<'a>(&'a self, own: &'a LocalRng) -> Draws<'a> {
        match self {
            RandomSource::PerThread => Draws::Own(own),
            RandomSource::Seeded(rng) => Draws::Seeded(rng),
        }
    }
}

/// Runs `f` with this thread's generator (the one a per-thread source draws from off the pick
/// path).
pub(crate) fn with_thread_generator<R>(f: impl FnOnce(&LocalRng) -> R) -> R {
    THREAD_RNG.with(f)
}

/// Where one pick's random draws come from.
#[derive(Clone, Copy)]
pub(crate) enum Draws<'a> {
    /// The picking thread's own generator.
    Own(&'a LocalRng),
    /// The engine's seeded generator.
    Seeded(&'a Mutex<SmallRng>),
}

impl Draws<'_> {
    /// 64 uniform random bits.
    #[inline(always)]
    pub fn next_u64(self) -> u64 {
        match self {
            Draws::Own(rng) => rng.next_u64(),
            Draws::Seeded(rng) => seeded_u64(rng),
        }
    }

    /// Uniform in `0..n`; 0 when `n` is 0. See [`scaled_index`].
    #[inline(always)]
    pub fn index(self, n: usize) -> usize {
        if n <= 1 {
            return 0;
        }
        scaled_index(self.next_u64(), n)
    }

    /// Two distinct uniform indices in `0..n`; `(0, 0)` when `n` < 2. See [`two_distinct_of`].
    #[inline(always)]
    pub fn two_distinct(self, n: usize) -> (usize, usize) {
        if n < 2 {
            return (0, 0);
        }
        match u32::try_from(n) {
            Ok(n) => two_distinct_of(self.next_u64(), n),
            Err(_) => self.two_distinct_wide(n),
        }
    }

    /// [`two_distinct`](Self::two_distinct) for groups of 2^32 destinations or more.
    #[cold]
    #[inline(never)]
    fn two_distinct_wide(self, n: usize) -> (usize, usize) {
        let i = self.index(n);
        let j = self.index(n - 1);
        (i, j + usize::from(j >= i))
    }
}

/// A draw of the engine's seeded generator: reproducible runs, not the fast path. Out of line,
/// so that the lock stays out of the picks that draw from their own thread's generator.
#[cold]
#[inline(never)]
fn seeded_u64(rng: &Mutex<SmallRng>) -> u64 {
    rng.lock().next_u64()
}

/// `draw` scaled to `0..n` by a multiply and a shift (Lemire's method without the rejection
/// step): no division and no second draw. The bias this leaves is below `n / 2^64` per index,
/// far below what any load balancer could notice.
#[inline]
fn scaled_index(draw: u64, n: usize) -> usize {
    ((u128::from(draw) * n as u128) >> 64) as usize
}

/// Two distinct indices in `0..n` (`n` >= 2) from one 64-bit draw: each 32-bit half is scaled
/// to its range by a multiply and a shift, `i` from the high half over `0..n`, `j` from the low
/// half over `0..n-1`, skipping `i`. The bias this leaves is below `n / 2^32` per index (under 3
/// parts per million at 10,000 destinations).
#[inline]
fn two_distinct_of(draw: u64, n: u32) -> (usize, usize) {
    let i = ((draw >> 32) * u64::from(n)) >> 32;
    let j = ((draw & 0xffff_ffff) * u64::from(n - 1)) >> 32;
    let j = j + u64::from(j >= i);
    (i as usize, j as usize)
}

#[cfg(test)]
mod tests {
    use super::{Draws, LocalRng, RandomSource};

    /// A thread's own generator, as picks use it: every index of a small group comes up about
    /// equally often, never one out of range, and two indices drawn together always differ.
    #[test]
    fn own_draws_cover_every_index_evenly() {
        let rng = LocalRng::new();
        let mut seen = [0u32; 5];
        for _ in 0..5000 {
            seen[Draws::Own(&rng).index(5)] += 1;
            let (i, j) = Draws::Own(&rng).two_distinct(5);
            assert!(i < 5 && j < 5 && i != j, "({i}, {j})");
        }
        for (i, &count) in seen.iter().enumerate() {
            assert!(
                (800..1200).contains(&count),
                "index {i} drawn {count} times of 5000"
            );
        }
    }

    #[test]
    fn two_distinct_covers_every_ordered_pair_and_never_repeats() {
        let source = RandomSource::seeded(7);
        let own = LocalRng::new();
        let mut seen = [[0u32; 4]; 4];
        for _ in 0..4000 {
            let (i, j) = source.draws(&own).two_distinct(4);
            assert_ne!(i, j);
            seen[i][j] += 1;
        }
        for (i, row) in seen.iter().enumerate() {
            for (j, &count) in row.iter().enumerate() {
                if i != j {
                    assert!(count > 200, "pair ({i},{j}) drawn {count} times");
                }
            }
        }
    }

    #[test]
    fn seeded_sources_repeat() {
        let a = RandomSource::seeded(42);
        let b = RandomSource::seeded(42);
        let xs: Vec<usize> = (0..20).map(|_| a.index(10)).collect();
        let ys: Vec<usize> = (0..20).map(|_| b.index(10)).collect();
        assert_eq!(xs, ys);
    }
}
