//! [`PickGroup`]: the destinations a pick chooses from, with where each counts in flight
//! ([`GroupCounts`]), so that a pick reaches the count it writes without reading the
//! destination itself.

use std::hint::select_unpredictable;
use std::ops::Deref;
use std::sync::atomic::AtomicU32;
use std::sync::Arc;

use super::in_flight::{stand_in_chunk, CountChunk, Layout, ALTERNATE, CHUNK, SPREAD};
use super::Destination;

/// [`GroupCounts::run`], [`GroupCounts::alternate_run`] and [`GroupCounts::spread_run`] when
/// the places do not run on one after another (in the group's layout), and
/// [`GroupCounts::gap_run`] when they do not run on but for one gap.
const NO_RUN: u32 = u32::MAX;

/// A group of destinations (a cluster's best group, or a retry's) and where their in-flight
/// counts are. Built once per change of the group; it derefs to the destinations, in group
/// order.
pub(crate) struct PickGroup {
    destinations: Box<[Arc<Destination>]>,
    counts: GroupCounts,
}

/// Where a group's in-flight counts are in its cluster's pool: what a pick and a handle's drop
/// read to reach a count. Cheap to clone (three reference counts), so that each thread's ticket
/// keeps its own copy at hand.
#[derive(Clone)]
pub(crate) struct GroupCounts {
    /// The pool's first chunk (every place of a cluster of up to 1,024 destinations, 256 in a
    /// spread pool, 512 in an alternate one), or a stand-in when the group has no place in it.
    first: Arc<CountChunk>,
    /// The place number ([`InFlight::number`](super::in_flight::InFlight::number)) of each
    /// destination's count, in group order.
    places: Arc<[u32]>,
    /// The first place when the places run on one after another (`places[k] == run + k`), as
    /// they do for a cluster whose destinations were placed together and are all in the group
    /// (a healthy cluster of one tier, not reshuffled since): a pick then finds its count's
    /// place by arithmetic instead of reading `places`. [`NO_RUN`] otherwise.
    run: u32,
    /// The same for an alternate pool (`places[k] == alternate_run + 2 * k`, see [`Layout`]).
    alternate_run: u32,
    /// The same for a spread pool (`places[k] == spread_run + 4 * k`). Each layout's run is kept
    /// apart so that each case costs one addition: shifting by the layout's step instead would
    /// put a cycle more between a pick's index and its count.
    spread_run: u32,
    /// The first place when the places run on one after another but for one gap, in a compact
    /// pool: `places[k] == gap_run + k` below `gap_at`, `gap_run + gap_width + k` from it on, as
    /// they are when one destination of a cluster is left out of its best group (unhealthy, or
    /// in another tier). [`NO_RUN`] otherwise. Only the compact layout has it: a spread or an
    /// alternate pool holds at most 256 destinations at first, whose `places` a pick finds in
    /// its nearest cache, while a large group's (40 KiB at 10,000) a random pick mostly reads
    /// from farther away.
    gap_run: u32,
    /// The index of the first destination after the gap (with [`GroupCounts::gap_run`]).
    gap_at: u32,
    /// The places the gap skips (with [`GroupCounts::gap_run`]).
    gap_width: u32,
    /// The pool's chunks the places are in, by chunk number. A number no destination of the
    /// group uses holds another chunk of the group (never read), so that the lookup needs no
    /// `Option`.
    chunks: Arc<[Arc<CountChunk>]>,
}

impl PickGroup {
    /// The group of `destinations`, in that order.
    pub fn new(destinations: Vec<Arc<Destination>>) -> Self {
        let places: Arc<[u32]> = destinations.iter().map(|d| d.in_flight.number()).collect();
        // Every destination of a group counts in the same pool.
        let layout = destinations
            .first()
            .map_or(Layout::Compact, |d| d.in_flight.layout());
        // Places handed out one after another are `step` apart.
        let step = u64::from(layout.step());
        let runs_on = places.first().is_some_and(|&first| {
            places
                .iter()
                .enumerate()
                .all(|(k, &place)| u64::from(place) == u64::from(first) + k as u64 * step)
        });
        let first_place = places.first().copied().filter(|_| runs_on);
        let (gap_run, gap_at, gap_width) = (layout == Layout::Compact && !runs_on)
            .then(|| one_gap(&places))
            .flatten()
            .unwrap_or((NO_RUN, 0, 0));
        let (mut run, mut alternate_run, mut spread_run) = (NO_RUN, NO_RUN, NO_RUN);
        if let Some(first) = first_place {
            *match layout {
                Layout::Compact => &mut run,
                Layout::Alternate => &mut alternate_run,
                Layout::Spread => &mut spread_run,
            } = first;
        }
        let mut chunks: Vec<Option<Arc<CountChunk>>> = Vec::new();
        for d in &destinations {
            let (chunk, _) = d.in_flight.place();
            let number = chunk.number();
            if chunks.len() <= number {
                chunks.resize(number + 1, None);
            }
            chunks[number].get_or_insert_with(|| chunk.clone());
        }
        let first = match chunks.first() {
            Some(Some(first)) => first.clone(),
            _ => stand_in_chunk(),
        };
        let filler = chunks.iter().flatten().next().cloned();
        let chunks = chunks
            .into_iter()
            .filter_map(|chunk| chunk.or_else(|| filler.clone()))
            .collect();
        PickGroup {
            destinations: destinations.into_boxed_slice(),
            counts: GroupCounts {
                first,
                places,
                run,
                alternate_run,
                spread_run,
                gap_run,
                gap_at,
                gap_width,
                chunks,
            },
        }
    }

    /// Where its counts are.
    #[inline]
    pub fn counts(&self) -> &GroupCounts {
        &self.counts
    }
}

impl GroupCounts {
    /// The group's length.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.places.len()
    }

    /// The place number of the count of the destination at `index` (below the group's length).
    #[inline(always)]
    pub fn place(&self, index: usize) -> u32 {
        self.place_checking::<false>(index)
    }

    /// [`GroupCounts::place`] for a round-robin pick, which checks for the alternate layout's
    /// run first: each check a pick passes costs it, and the alternate layout is
    /// round robin's.
    #[inline(always)]
    pub fn round_robin_place(&self, index: usize) -> u32 {
        self.place_checking::<true>(index)
    }

    #[inline(always)]
    fn place_checking<const ALTERNATE_FIRST: bool>(&self, index: usize) -> u32 {
        // `index` is below the length, so any run gives `places[index]`.
        if ALTERNATE_FIRST && self.alternate_run != NO_RUN {
            self.alternate_run + index as u32 * ALTERNATE as u32
        } else if self.run != NO_RUN {
            self.run + index as u32
        } else if self.spread_run != NO_RUN {
            self.spread_run + index as u32 * SPREAD as u32
        } else if !ALTERNATE_FIRST && self.alternate_run != NO_RUN {
            self.alternate_run + index as u32 * ALTERNATE as u32
        } else if self.gap_run != NO_RUN {
            // A select rather than a branch (which the compiler makes of an `if`, and of a
            // mask): a random index falls either side of the gap.
            let index = index as u32;
            self.gap_run + index + select_unpredictable(index >= self.gap_at, self.gap_width, 0)
        } else {
            self.places[index]
        }
    }

    /// The count at `place`, one of the group's places.
    #[inline(always)]
    pub fn count(&self, place: u32) -> &AtomicU32 {
        let place = place as usize;
        if place < CHUNK {
            self.first.count(place)
        } else {
            self.chunks[place / CHUNK].count(place)
        }
    }
}

/// `(gap_run, gap_at, gap_width)` of [`GroupCounts`] when `places` run on one after another
/// (step 1) but for one gap, `None` otherwise.
fn one_gap(places: &[u32]) -> Option<(u32, u32, u32)> {
    let first = *places.first()?;
    // The first index off the run from `first`, and where the places go on from there.
    let at = places
        .iter()
        .enumerate()
        .position(|(k, &place)| u64::from(place) != u64::from(first) + k as u64)?;
    let width = places[at].checked_sub(first.checked_add(u32::try_from(at).ok()?)?)?;
    let on_after = places[at..]
        .iter()
        .enumerate()
        .all(|(k, &place)| u64::from(place) == u64::from(places[at]) + k as u64);
    (width > 0 && on_after).then_some((first, at as u32, width))
}

impl Deref for PickGroup {
    type Target = [Arc<Destination>];

    #[inline]
    fn deref(&self) -> &[Arc<Destination>] {
        &self.destinations
    }
}

impl Default for PickGroup {
    fn default() -> Self {
        PickGroup::new(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::one_gap;

    /// The gap's formula gives back every place of a list with one gap, of any width and
    /// anywhere but the ends; lists that run on, or have two gaps, or go back, have none.
    #[test]
    fn one_gap_describes_every_place_of_a_run_with_one_gap() {
        for n in 2..12u32 {
            for at in 1..n {
                for width in [1, 2, 5] {
                    let places: Vec<u32> = (0..n)
                        .map(|k| 40 + k + if k >= at { width } else { 0 })
                        .collect();
                    let (run, gap_at, gap_width) = one_gap(&places).expect("one gap");
                    assert_eq!((run, gap_at, gap_width), (40, at, width), "{places:?}");
                    for (k, &place) in places.iter().enumerate() {
                        let k = k as u32;
                        let skip = if k >= gap_at { gap_width } else { 0 };
                        assert_eq!(run + k + skip, place, "{places:?} at {k}");
                    }
                }
            }
        }
        assert_eq!(one_gap(&[]), None);
        assert_eq!(one_gap(&[7]), None);
        assert_eq!(one_gap(&[3, 4, 5]), None, "runs on: no gap");
        assert_eq!(one_gap(&[3, 5, 7]), None, "two gaps");
        assert_eq!(one_gap(&[3, 4, 9, 11]), None, "a gap, then another");
        assert_eq!(one_gap(&[3, 4, 1, 2]), None, "goes back");
        assert_eq!(one_gap(&[3, 4, 4, 5]), None, "repeats");
        assert_eq!(
            one_gap(&[u32::MAX - 1, u32::MAX]),
            None,
            "runs on at the top"
        );
    }
}
