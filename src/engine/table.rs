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

    /// Where a cluster sits in the table (config order).
    #[inline]
    pub fn position(&self, id: &str) -> Option<usize> {
        // Usual case: a handful of clusters, and the caller spells the id as its folded form
        // (lowercase ids, or the same constant on every call): comparing a few short ids costs
        // less than hashing one.
        if self.entries.len() <= SCAN_LIMIT {
            let found = self.entries.iter().position(|(key, _)| **key == *id);
            if found.is_some() {
                return found;
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

/// Where the table is published: shared with each thread's pick cache.
pub(crate) type TableCell = Arc<ArcSwap<ClusterTable>>;

/// The current snapshot of `cluster`, loaded without the pick cache (off the pick path).
pub(crate) fn load(cell: &TableCell, cluster: &str) -> Option<Guard<Arc<ClusterSnapshot>>> {
    cell.load().get(cluster).map(|runtime| runtime.cell.load())
}
