//! Weighted forms of the built-in policies, built once per change of a group (when a policy
//! prepares for it), never per pick. A group whose destinations all weigh the same is
//! unweighted and the policies keep their plain, cheapest form.
//!
//! - `Random` draws from Vose's alias table: one random index and one coin per pick, O(1).
//! - `RoundRobin` walks a precomputed cycle in which each destination appears as often as its
//!   weight (in whole units) in nginx's smooth order: {5, 1, 1} is `a a b a c a a`, not five `a`
//!   in a row. Groups too large for that order's quadratic construction use the earliest-deadline
//!   order of Envoy's and gRPC's weighted round robin, equally even over a cycle.
//! - `PowerOfTwoChoices` and `PeakEwma` draw their first candidate from the alias table (with
//!   a point of the evenly spread sequence, `PickView::spread_u64`) and compare load per unit
//!   of weight, as Envoy's weighted least-request balancer does.
//!
//! A weight of 0 means "only when nothing else is left": the best group leaves such a
//! destination out while it has one of positive weight (`group.rs`); a group that weighs nothing
//! at all is picked evenly.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Vose's alias table: pick index `i` uniformly, then keep it if a 32-bit coin is below
/// `keep[i]`, else take `alias[i]`.
#[derive(Debug)]
pub(crate) struct AliasTable {
    keep: Vec<u64>,
    alias: Vec<u32>,
}

impl AliasTable {
    pub fn new(weights: &[f64]) -> Self {
        let n = weights.len();
        let total: f64 = weights.iter().sum();
        // Scaled so the average is 1.
        let mut scaled: Vec<f64> = weights.iter().map(|w| w * n as f64 / total).collect();
        let mut keep = vec![1u64 << 32; n];
        let mut alias: Vec<u32> = (0..n as u32).collect();
        let (mut small, mut large): (Vec<usize>, Vec<usize>) =
            (0..n).partition(|&i| scaled[i] < 1.0);
        while let (Some(s), Some(&l)) = (small.pop(), large.last()) {
            keep[s] = (scaled[s] * (1u64 << 32) as f64) as u64;
            alias[s] = l as u32;
            scaled[l] -= 1.0 - scaled[s];
            if scaled[l] < 1.0 {
                large.pop();
                small.push(l);
            }
        }
        // What is left is 1 up to rounding: always kept.
        AliasTable { keep, alias }
    }

    /// The index for one 64-bit random draw: its high half picks the column, its low half is
    /// the coin.
    #[inline]
    pub fn index(&self, draw: u64) -> usize {
        let n = self.keep.len() as u64;
        let column = (((draw >> 32) * n) >> 32) as usize;
        if (draw & 0xffff_ffff) < self.keep[column] {
            column
        } else {
            self.alias[column] as usize
        }
    }
}

/// The longest round-robin cycle kept (entries of 4 bytes: 4 MiB).
const MAX_CYCLE: u64 = 1 << 20;

/// Above this much work (group size x cycle length) the smooth order is built by earliest
/// deadline instead.
const MAX_SMOOTH_WORK: u64 = 4_000_000;

/// One cycle of weighted round robin: destination indices, each as often as its weight in
/// whole units.
pub(crate) fn round_robin_cycle(weights: &[f64]) -> Vec<u32> {
    let units = whole_units(weights);
    let total: u64 = units.iter().sum();
    if (weights.len() as u64).saturating_mul(total) <= MAX_SMOOTH_WORK {
        smooth(&units, total)
    } else {
        earliest_deadline(&units, total)
    }
}

/// Weights in whole units, at most [`MAX_CYCLE`] in all: a weight in thousandths, reduced by
/// the greatest common divisor; a positive weight keeps at least one unit, and when every weight
/// is 0 each gets one.
fn whole_units(weights: &[f64]) -> Vec<u64> {
    let mut units: Vec<u64> = weights
        .iter()
        .map(|w| (w * 1000.0).round().max(0.0) as u64)
        .collect();
    if units.iter().all(|u| *u == 0) {
        return vec![1; weights.len()];
    }
    let divisor = units.iter().fold(0, |g, &u| gcd(g, u));
    for u in &mut units {
        *u /= divisor;
    }
    let total: u64 = units.iter().sum();
    if total > MAX_CYCLE {
        for (u, w) in units.iter_mut().zip(weights) {
            let scaled = (*u as f64 * MAX_CYCLE as f64 / total as f64).round() as u64;
            *u = if *w > 0.0 { scaled.max(1) } else { 0 };
        }
    }
    units
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// nginx's smooth weighted round robin over one cycle: every step adds each weight to its
/// destination's current value, takes the largest (the first of equals) and takes the total off
/// it.
fn smooth(units: &[u64], total: u64) -> Vec<u32> {
    let mut current = vec![0i64; units.len()];
    let mut cycle = Vec::with_capacity(total as usize);
    for _ in 0..total {
        let mut best = 0;
        for i in 0..units.len() {
            current[i] += units[i] as i64;
            if current[i] > current[best] {
                best = i;
            }
        }
        current[best] -= total as i64;
        cycle.push(best as u32);
    }
    cycle
}

/// Earliest deadline first: destination `i`'s k-th turn is due at `(k + 1/2) / w_i`; turns in
/// order of due time, equal ones by index.
fn earliest_deadline(units: &[u64], total: u64) -> Vec<u32> {
    #[derive(PartialEq)]
    struct Turn {
        due: f64,
        index: usize,
        k: u64,
    }
    impl Eq for Turn {}
    impl PartialOrd for Turn {
        fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
            Some(self.cmp(other))
        }
    }
    impl Ord for Turn {
        // A max-heap: the earliest due time (then the lowest index) is the greatest.
        fn cmp(&self, other: &Self) -> Ordering {
            other
                .due
                .total_cmp(&self.due)
                .then(other.index.cmp(&self.index))
        }
    }
    let mut turns: BinaryHeap<Turn> = units
        .iter()
        .enumerate()
        .filter(|(_, u)| **u > 0)
        .map(|(index, u)| Turn {
            due: 0.5 / *u as f64,
            index,
            k: 0,
        })
        .collect();
    let mut cycle = Vec::with_capacity(total as usize);
    while let Some(turn) = turns.pop() {
        cycle.push(turn.index as u32);
        let k = turn.k + 1;
        if k < units[turn.index] {
            turns.push(Turn {
                due: (k as f64 + 0.5) / units[turn.index] as f64,
                index: turn.index,
                k,
            });
        }
    }
    cycle
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smooth_round_robin_interleaves_as_nginx_does() {
        assert_eq!(round_robin_cycle(&[5.0, 1.0, 1.0]), [0, 0, 1, 0, 2, 0, 0]);
        assert_eq!(
            round_robin_cycle(&[1.5, 1.0]),
            [0, 1, 0, 1, 0],
            "3:2 in thousandths"
        );
        assert_eq!(
            round_robin_cycle(&[2.0, 0.0, 1.0]),
            [0, 2, 0],
            "weight 0: never"
        );
    }

    #[test]
    fn earliest_deadline_gives_each_its_share_evenly() {
        let cycle = earliest_deadline(&[3, 1], 4);
        assert_eq!(cycle, [0, 0, 1, 0]);
        let units = vec![1u64; 10];
        assert_eq!(earliest_deadline(&units, 10), (0..10).collect::<Vec<u32>>());
        // Large groups take this path and still count right.
        let weights: Vec<f64> = (0..3000).map(|i| (i % 3 + 1) as f64).collect();
        let cycle = round_robin_cycle(&weights);
        assert_eq!(cycle.len(), 6000);
        let heavy = cycle.iter().filter(|&&i| i % 3 == 2).count();
        assert_eq!(heavy, 3000);
    }

    #[test]
    fn the_alias_table_draws_in_proportion_to_the_weights() {
        let table = AliasTable::new(&[3.0, 1.0, 0.0, 4.0]);
        let mut counts = [0u32; 4];
        // A deterministic sweep of draws: columns and coins evenly spread.
        let steps = 1u64 << 16;
        for k in 0..steps {
            let column = (k % 256) << 56;
            let coin = (k / 256) << 24;
            counts[table.index(column | coin)] += 1;
        }
        let share = |c: u32| f64::from(c) / steps as f64;
        assert!((share(counts[0]) - 3.0 / 8.0).abs() < 0.01, "{counts:?}");
        assert!((share(counts[1]) - 1.0 / 8.0).abs() < 0.01, "{counts:?}");
        assert_eq!(counts[2], 0, "weight 0 is never drawn");
        assert!((share(counts[3]) - 4.0 / 8.0).abs() < 0.01, "{counts:?}");
    }

    #[test]
    fn whole_units_scale_decimals_and_cap_the_cycle() {
        assert_eq!(whole_units(&[0.5, 0.25]), [2, 1]);
        assert_eq!(whole_units(&[0.0, 0.0]), [1, 1]);
        let big = whole_units(&[1e9, 1.0]);
        assert!(big.iter().sum::<u64>() <= MAX_CYCLE + 1);
        assert_eq!(big[1], 1, "a positive weight keeps a unit");
    }
}
