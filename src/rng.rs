//! The engine's random source: a fast generator of each thread's own by default, or one seeded
//! generator for reproducible runs (tests, the simulator).
//!
//! A thread's own generator is WyRand (`fastrand`'s): one word of state in a `Cell`, so a draw
//! takes no lock and writes nothing another thread reads. A seeded source is one `SmallRng`
//! behind a lock, shared by every thread: a seed then gives the same picks in every run.
//!
//! Beside the random draws, each source keeps a position in an evenly spread sequence (the R2
//! sequence, from a random start): the load-aware policies draw their first candidate with it,
//! so that over any run of picks each destination's share stays within a few picks of its
//! weight's, where independent draws wander by the square root of the run (about 1.3 points of
//! 1,000 picks at a share of 0.2).

use std::cell::Cell;

use parking_lot::Mutex;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

thread_local! {
    /// This thread's generator for draws off the pick path and for picks from inside a pick (a
    /// pick draws from the one its pick cache keeps beside it).
    static THREAD_RNG: LocalRng = LocalRng::new();
}

/// A generator owned by one thread: WyRand, seeded from the OS, and its spread sequence's
/// position.
pub(crate) struct LocalRng {
    state: Cell<u64>,
    spread: Cell<u64>,
}

impl LocalRng {
    pub fn new() -> Self {
        LocalRng {
            state: Cell::new(rand::random()),
            spread: Cell::new(rand::random()),
        }
    }

    /// 64 uniform random bits.
    #[inline(always)]
    pub fn next_u64(&self) -> u64 {
        let mut rng = fastrand::Rng::with_seed(self.state.get());
        let draw = rng.u64(..);
        self.state.set(rng.get_seed());
        draw
    }

    /// The next point of this thread's spread sequence (see [`spread_point`]).
    #[inline]
    pub fn next_spread(&self) -> u64 {
        let position = self.spread.get().wrapping_add(1);
        self.spread.set(position);
        spread_point(position)
    }
}

/// The engine's seeded generator and its spread sequence's position.
pub(crate) struct Seeded {
    rng: SmallRng,
    spread: u64,
}

/// Where random picks come from.
pub(crate) enum RandomSource {
    /// One generator per thread, seeded from the OS: no shared state on the pick path.
    PerThread,
    /// One seeded generator shared by all threads: reproducible, at the cost of a lock per draw.
    Seeded(Mutex<Seeded>),
}

impl RandomSource {
    pub fn seeded(seed: u64) -> Self {
        let mut rng = SmallRng::seed_from_u64(seed);
        let spread = rng.next_u64();
        RandomSource::Seeded(Mutex::new(Seeded { rng, spread }))
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
    Seeded(&'a Mutex<Seeded>),
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

    /// The next point of the source's spread sequence (see [`spread_point`]).
    #[inline]
    pub fn next_spread(self) -> u64 {
        match self {
            Draws::Own(rng) => rng.next_spread(),
            Draws::Seeded(rng) => seeded_spread(rng),
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
fn seeded_u64(rng: &Mutex<Seeded>) -> u64 {
    rng.lock().rng.next_u64()
}

/// The seeded source's next spread point, out of line as [`seeded_u64`].
#[cold]
#[inline(never)]
fn seeded_spread(rng: &Mutex<Seeded>) -> u64 {
    let mut seeded = rng.lock();
    seeded.spread = seeded.spread.wrapping_add(1);
    spread_point(seeded.spread)
}

/// 2^64 / p and 2^64 / p^2, p the plastic number (the real root of x^3 = x + 1).
const R2_HIGH: u64 = 0xc13f_a9a9_02a6_328f;
const R2_LOW: u64 = 0x91e1_0da5_c79e_7b1c;

/// Point `k` of the R2 sequence (Roberts' additive recurrence on the plastic number): the
/// fractions {k / p} and {k / p^2} as the high and low 32-bit halves. Consecutive points fill
/// the unit square evenly, as both halves of a draw are read together (a column and a coin of
/// an alias table): any rectangle gets its area's share of any run of points, give or take a
/// few points, where independent draws miss it by the square root of the run.
#[inline]
fn spread_point(k: u64) -> u64 {
    (k.wrapping_mul(R2_HIGH) & 0xffff_ffff_0000_0000) | (k.wrapping_mul(R2_LOW) >> 32)
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
    use super::{spread_point, Draws, LocalRng, RandomSource};

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

    /// Any run of 1,000 consecutive spread points fills the unit square evenly: a rectangle
    /// from the origin gets its area's share within 10 points (one point in a hundred), from
    /// wherever the run starts (the sequence wraps), where 1,000 independent draws miss an area
    /// of 0.2 by 13 points at one standard deviation.
    #[test]
    fn spread_points_fill_the_square_evenly() {
        let fraction = |half: u64| half as f64 / (1u64 << 32) as f64;
        let starts = [0, 1, 12_345, u64::MAX - 4_000, 0x9e37_79b9_7f4a_7c15];
        let boxes = [
            (0.2, 1.0),
            (1.0, 0.2),
            (0.5, 0.4),
            (0.9, 0.25),
            (0.33, 0.61),
        ];
        for start in starts {
            for run in 0..10u64 {
                let first = start.wrapping_add(run * 1_000);
                for (width, height) in boxes {
                    let inside = (0..1_000u64)
                        .map(|k| spread_point(first.wrapping_add(k)))
                        .filter(|&point| {
                            fraction(point >> 32) < width && fraction(point & 0xffff_ffff) < height
                        })
                        .count();
                    let expected = 1_000.0 * width * height;
                    assert!(
                        (inside as f64 - expected).abs() <= 10.0,
                        "{inside} in {width} x {height} from {first}"
                    );
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
