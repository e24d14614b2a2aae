//! The cluster table: cluster id (case-insensitive) to cluster runtime. It changes only when the
//! set of clusters does (a reload adding or removing one); health and destination changes are
//! published in each cluster's own snapshot and never touch it.
//!
//! A pick reads the table through a per-thread [`arc_swap::Cache`]: while the table is
//! unchanged, finding it costs one pointer comparison, so the pick pays for a single atomic
//! load — its cluster's snapshot.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::cache::Cache;
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
        if id.is_ascii() && self.entries.len() <= SCAN_LIMIT {
            // A folded key is ASCII-lowercase when it matches an ASCII id at all, so an
            // ASCII-case-insensitive byte comparison is the fold comparison here.
            return self
                .entries
                .iter()
                .find(|(key, _)| key.as_bytes().eq_ignore_ascii_case(id.as_bytes()))
                .map(|(_, runtime)| runtime);
        }
        self.get_indexed(id)
    }

    /// The lookup of tables too big to scan (and of non-ASCII ids): out of line, so that the
    /// small-table scan inlined into every pick stays small.
    #[inline(never)]
    fn get_indexed(&self, id: &str) -> Option<&Arc<ClusterRuntime>> {
        with_folded(id, |folded| {
            self.index
                .get(folded)
                .map(|&position| &self.entries[position].1)
        })
    }

    /// Clusters in config order.
    pub fn runtimes(&self) -> impl Iterator<Item = &Arc<ClusterRuntime>> {
        self.entries.iter().map(|(_, runtime)| runtime)
    }
}

/// Where the table is published: shared with each thread's cache of it.
pub(crate) type TableCell = Arc<ArcSwap<ClusterTable>>;

thread_local! {
    /// The last table this thread picked from (one engine per thread is the usual case; a
    /// thread that alternates between engines replaces it each time, which stays correct).
    static TABLE: RefCell<Option<Cache<TableCell, Arc<ClusterTable>>>> = const { RefCell::new(None) };
}

/// The current snapshot of `cluster`, loaded with one atomic load while the table is unchanged.
#[inline]
pub(crate) fn load_snapshot(
    cell: &TableCell,
    cluster: &str,
) -> Option<Guard<Arc<ClusterSnapshot>>> {
    TABLE.with(|slot| match slot.try_borrow_mut() {
        Ok(mut slot) => {
            let cache = match &mut *slot {
                Some(cache) if std::ptr::eq(cache.arc_swap(), &**cell) => cache,
                other => other.insert(Cache::new(cell.clone())),
            };
            cache.load().get(cluster).map(|runtime| runtime.cell.load())
        }
        // A pick from inside a pick (a policy that picks): no cache, same answer.
        Err(_) => cell.load().get(cluster).map(|runtime| runtime.cell.load()),
    })
}
