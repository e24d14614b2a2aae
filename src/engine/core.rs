//! What every clone of an [`Engine`](super::Engine) shares: the cluster table, the policies,
//! the clock and random source, the hub of events and timers, and the configuration lock.
//!
//! Lock order (a thread holding one may take only those after it): the configuration lock
//! (`config_lock`, one reload at a time) -> a cluster's book (`ClusterRuntime::book`, one change
//! of that cluster at a time; during a reload, clusters in config order) -> a destination's
//! record and policy slots (`DestinationState`) -> the cluster's passive-policy slots
//! (`ClusterRuntime::policy_state`, taken by a policy only on rare paths such as an ejection)
//! -> the timer heap (`Timers::heap`). The record of loads (`config_record`) is taken alone or
//! last, after the configuration lock. Picks take none of them: they load snapshots. The status
//! view takes the configuration lock (so that it never shows half a reload), then each cluster's
//! book in turn, then the record.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::Guard;
use parking_lot::Mutex;
use tokio::sync::watch;

use super::hub::Hub;
use super::status::ConfigRejection;
use super::table::{load, ClusterTable, TableCell};
use crate::clock::Clock;
use crate::cluster::snapshot::ClusterSnapshot;
use crate::config::model::HealthPolicyOptions;
use crate::policy::registry::PolicyRegistry;
use crate::rng::RandomSource;

pub(crate) struct EngineCore {
    pub table: TableCell,
    pub registry: PolicyRegistry,
    pub options: HealthPolicyOptions,
    pub clock: Arc<dyn Clock>,
    pub rng: RandomSource,
    /// Events and timers; clusters hold it weakly, so subscribers see the channel close when
    /// the engine is gone.
    pub hub: Arc<Hub>,
    pub config_lock: Mutex<()>,
    pub strict: bool,
    /// Bumped after every applied configuration; the active monitor follows it.
    pub config_generation: watch::Sender<u64>,
    /// The last accepted load and the last rejection since (the status's `config`).
    pub config_record: Mutex<ConfigRecord>,
}

/// What the engine remembers of its configuration loads.
#[derive(Debug, Default)]
pub(crate) struct ConfigRecord {
    /// Engine-clock time the configuration in force was applied.
    pub loaded_at: Option<Duration>,
    /// Where it came from, when its loader said.
    pub origin: Option<Arc<str>>,
    /// The last refused load since it was applied.
    pub last_error: Option<ConfigRejection>,
}

impl EngineCore {
    /// The table as of now (off the pick path).
    pub fn table(&self) -> Arc<ClusterTable> {
        self.table.load_full()
    }

    /// The current snapshot of `cluster` (off the pick path).
    pub fn snapshot(&self, cluster: &str) -> Option<Guard<Arc<ClusterSnapshot>>> {
        load(&self.table, cluster)
    }
}

impl Drop for EngineCore {
    fn drop(&mut self) {
        self.hub.timers.close();
        // A destination reports to its cluster, which holds it in its snapshot: emptying every
        // snapshot lets them all go.
        for runtime in self.table.load().runtimes() {
            runtime.retire();
        }
    }
}
