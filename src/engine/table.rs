//! The cluster table: cluster id (case-insensitive) to cluster runtime. It changes only when the
//! set of clusters does (a reload adding or removing one); health and destination changes are
//! published in each cluster's own snapshot and never touch it. Picks read it through their
//! thread's pick cache (`fast_path.rs`).

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::{ArcSwap, Guard};

use super::runtime::ClusterRuntime;
use crate::cluster::snapshot::ClusterSnapshot;
use crate::ids::with_folded;

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

    /// Where a cluster sits in the table (config order). Inlined into the pick path, which
    /// calls it once a pick.
    #[inline(always)]
    pub fn position(&self, id: &str) -> Option<usize> {
        // Usual case: a handful of clusters, and the caller spells the id as its folded form
        // (lowercase ids, or the same constant on every call): comparing a few short ids costs
        // less than hashing one.
        if self.entries.len() <= SCAN_LIMIT {
            for (position, (key, _)) in self.entries.iter().enumerate() {
                if same_bytes(key.as_bytes(), id.as_bytes()) {
                    return Some(position);
                }
            }
        }
        self.position_folded(id)
    }

    /// The lookup of large tables and of ids spelt other than their folded form.
    #[inline(never)]
    fn position_folded(&self, id: &str) -> Option<usize> {
        with_folded(id, |folded| self.index.get(folded).copied())
    }

    /// The cluster at `position` (below the table's length).
    pub fn runtime(&self, position: usize) -> &Arc<ClusterRuntime> {
        &self.entries[position].1
    }

    /// Clusters in config order.
    pub fn runtimes(&self) -> impl Iterator<Item = &Arc<ClusterRuntime>> {
        self.entries.iter().map(|(_, runtime)| runtime)
    }
}

/// Whether `a` and `b` hold the same bytes, compared in place: cluster ids are short, and a
/// call to `memcmp` per table entry costs more than the comparison. Up to 16 bytes, two
/// overlapping words from each end (three bytes below four) cover every byte without a loop,
/// as `memcmp` implementations do; longer ids use the library comparison.
#[inline]
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

/// Where the table is published: shared with each thread's pick cache.
pub(crate) type TableCell = Arc<ArcSwap<ClusterTable>>;

/// The current snapshot of `cluster`, loaded without the pick cache (off the pick path).
pub(crate) fn load(cell: &TableCell, cluster: &str) -> Option<Guard<Arc<ClusterSnapshot>>> {
    cell.load().get(cluster).map(|runtime| runtime.cell.load())
}

#[cfg(test)]
mod tests {
    use super::same_bytes;

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
