//! Picks: the engine's ways to choose a destination. Every one goes through the pick path
//! (`fast_path.rs`): the best group of a cluster's current snapshot, then its load-balancing
//! policy. Only the first picks of a cluster with active checks may wait, for its first probes.

use std::sync::Arc;
use std::time::Duration;

use super::fast_path::{self, pick_from_group, with_pick, Miss, PickHandle, Picked, Picking};
use super::Engine;
use crate::cluster::snapshot::ClusterSnapshot;
use crate::config::affinity::SessionAffinityConfig;
use crate::destination::Destination;
use crate::error::PickError;
use crate::health::state::HealthClass;
use crate::selection::balancing::Group;
use crate::selection::group::best_group_excluding;

/// A call's first pick, as [`Engine::pick_for_call_if_ready`] found it.
pub(crate) struct CallPick<K> {
    /// The call's affinity key, as the caller read it; `None` for a request without one, and
    /// for an unknown cluster.
    pub key: Option<K>,
    /// The pick with the cluster's attempt timeout; `None` while the cluster's warm-up runs.
    pub picked: Option<Result<(PickHandle, Option<Duration>), PickError>>,
}

/// The best group of a cluster with its summary status.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BestEndpoints {
    /// The destinations of the best class and lowest tier, in member order.
    pub destinations: Vec<Arc<Destination>>,
    /// The best health class present: Healthy, Degraded, or Unhealthy (panic).
    pub status: HealthClass,
    /// Whether the cluster is in panic mode.
    pub panic: bool,
}

impl Miss {
    /// The error this miss of a pick from `cluster` reports.
    #[cold]
    #[inline(never)]
    pub fn error(self, cluster: &str) -> PickError {
        let cluster = cluster.to_string();
        match self {
            Miss::UnknownCluster => PickError::UnknownCluster { cluster },
            Miss::NoAvailableDestinations => PickError::NoAvailableDestinations { cluster },
            Miss::DiscoveryPending => PickError::DiscoveryPending { cluster },
            // Callers that ask not to pick while warming never make this an error.
            Miss::Warming => PickError::NoAvailableDestinations { cluster },
            Miss::AffinityUnavailable => PickError::AffinityUnavailable { cluster },
        }
    }
}

#[cold]
fn unknown(cluster: &str) -> PickError {
    Miss::UnknownCluster.error(cluster)
}

impl Engine {
    /// Picks a destination of `cluster` for one request: best health class, lowest
    /// tier, then the cluster's load-balancing policy. Lock-free; allocates nothing, except on a
    /// thread's first pick after the cluster's best group changed (that thread's ticket to the
    /// new group, one small allocation a thread and change).
    ///
    /// # Errors
    /// [`PickError::NoAvailableDestinations`] when nothing may receive traffic;
    /// [`PickError::UnknownCluster`] when no cluster has that id.
    #[inline]
    pub fn pick_endpoint(&self, cluster: &str) -> Result<PickHandle, PickError> {
        self.pick(cluster, None)
    }

    /// [`pick_endpoint`](Self::pick_endpoint) for a request that carries an affinity key: the
    /// cluster's policy reads it ([`PickView::key`](crate::selection::PickView::key)).
    ///
    /// # Errors
    /// As [`pick_endpoint`](Self::pick_endpoint).
    #[inline]
    pub fn pick_endpoint_for_key(
        &self,
        cluster: &str,
        key: impl AsRef<[u8]>,
    ) -> Result<PickHandle, PickError> {
        self.pick(cluster, Some(key.as_ref()))
    }

    /// Inlined into the caller, so that the pick cache's lookup hands its two words over in
    /// registers (`Picked`) and the caller builds the result in place: a result returned
    /// through memory and copied out with other widths than it was written stalls the copy.
    #[inline(always)]
    fn pick(&self, cluster: &str, key: Option<&[u8]>) -> Result<PickHandle, PickError> {
        fast_path::pick(&self.core, cluster, key, false)
            .into_result()
            .map_err(|miss| miss.error(cluster))
    }

    /// Runs `f` on what a pick from `cluster` reads, through this thread's pick cache.
    #[inline]
    fn with_picking<R>(&self, cluster: &str, f: impl FnOnce(Option<Picking<'_>>) -> R) -> R {
        with_pick(&self.core.table, cluster, &self.core.rng, f)
    }

    /// A pick from what the pick cache found for the cluster (`None`: no such cluster).
    #[inline]
    fn pick_from(&self, picking: Option<Picking<'_>>, key: Option<&[u8]>) -> Picked {
        match picking {
            Some(picking) => picking.pick(key, &*self.core.clock),
            None => Picked::miss(Miss::UnknownCluster),
        }
    }

    /// Lets the cluster's load-balancing policy choose in `group`, a group computed for one
    /// pick (a retry's).
    fn choose_in_group(
        &self,
        snapshot: &ClusterSnapshot,
        group: Vec<Arc<Destination>>,
        key: Option<&[u8]>,
        cluster: &str,
    ) -> Result<PickHandle, PickError> {
        let mut group = Group::of(group, true, *snapshot.best.signal_rules());
        if snapshot.affinity.is_some() {
            group = group.counting_total(snapshot.counter.clone());
        }
        pick_from_group(snapshot, group, key, &self.core.rng, &*self.core.clock)
            .into_result()
            .map_err(|miss| miss.error(cluster))
    }

    /// Picks a destination of `cluster` other than those named in `exclude`: the next best of
    /// the same tier, then the next tier. Meant for retries, so it may
    /// allocate; the first attempt should use [`pick_endpoint`](Self::pick_endpoint).
    ///
    /// ```
    /// # use healthpick::Engine;
    /// let engine = Engine::from_json(r#"{"Clusters": {"c": {"Destinations": {
    ///     "local":  { "Address": "http://127.0.0.1:8001/" },
    ///     "remote": { "Address": "http://127.0.0.1:9001/", "Priority": 1 } } } } }"#)?;
    /// let first = engine.pick_endpoint("c")?;
    /// assert_eq!(first.destination().id(), "local");
    /// // The request to `local` failed before any response: retry elsewhere.
    /// let retry = engine.pick_endpoint_excluding("c", &["local"])?;
    /// assert_eq!(retry.destination().id(), "remote");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`pick_endpoint`](Self::pick_endpoint); `NoAvailableDestinations` also when every
    /// available destination is excluded.
    pub fn pick_endpoint_excluding<S: AsRef<str>>(
        &self,
        cluster: &str,
        exclude: &[S],
    ) -> Result<PickHandle, PickError> {
        let snapshot = self
            .core
            .snapshot(cluster)
            .ok_or_else(|| unknown(cluster))?;
        let group =
            best_group_excluding(&snapshot.available_context(), &snapshot.available, exclude);
        self.choose_in_group(&snapshot, group, None, cluster)
    }

    /// A retry's pick for the client's failover step: like
    /// [`pick_endpoint_excluding`](Self::pick_endpoint_excluding), but destinations in
    /// `leave_tiers` are passed over while any other tier has an available destination not
    /// excluded; only when none is left does the pick go back to those tiers. This is how a call
    /// leaves a tier whose destination failed after connecting (a dead tier's stale kept-alive
    /// connection, or a request that crashes servers), instead of spending its attempts there.
    /// A keyed call's retry goes to the key's next choice.
    pub(crate) fn pick_endpoint_for_retry<S: AsRef<str>>(
        &self,
        cluster: &str,
        key: Option<&[u8]>,
        exclude: &[S],
        leave_tiers: &[u32],
    ) -> Result<PickHandle, PickError> {
        let snapshot = self
            .core
            .snapshot(cluster)
            .ok_or_else(|| unknown(cluster))?;
        let ctx = snapshot.available_context();
        let mut group = Vec::new();
        if !leave_tiers.is_empty() {
            let elsewhere: Vec<Arc<Destination>> = snapshot
                .available
                .iter()
                .filter(|d| !leave_tiers.contains(&d.tier()))
                .cloned()
                .collect();
            group = best_group_excluding(&ctx, &elsewhere, exclude);
        }
        if group.is_empty() {
            group = best_group_excluding(&ctx, &snapshot.available, exclude);
        }
        self.choose_in_group(&snapshot, group, key, cluster)
    }

    /// [`pick_endpoint_if_ready`](Self::pick_endpoint_if_ready) for a call of the wrapped
    /// client, the middleware or the tower layer, with the cluster's attempt timeout
    /// (`HttpRequest:ActivityTimeout`) and its `SessionAffinity` read from the same snapshot, so
    /// the call's settings cost no second lookup. `key_of` reads the call's affinity key from
    /// its request, given the cluster's affinity (`None`: the cluster has none, and only a key
    /// the caller gave explicitly counts); the pick is keyed by what it returns, and the key
    /// comes back with the pick for the call's retries. It is not called for an unknown cluster.
    /// A call without a key costs what an unkeyed pick costs.
    #[inline]
    pub(crate) fn pick_for_call_if_ready<K: AsRef<[u8]>>(
        &self,
        cluster: &str,
        key_of: impl FnOnce(Option<&SessionAffinityConfig>) -> Option<K>,
    ) -> CallPick<K> {
        let (key, picked) = self.with_picking(cluster, |picking| match picking {
            Some(picking) => {
                let snapshot = picking.snapshot;
                let key = key_of(snapshot.settings.config.session_affinity_setting());
                if snapshot.warming {
                    return (key, None);
                }
                let timeout = snapshot.settings.activity_timeout;
                let picked = self
                    .pick_from(Some(picking), key.as_ref().map(AsRef::as_ref))
                    .into_result()
                    .map(|pick| (pick, timeout));
                (key, Some(picked))
            }
            None => (None, Some(Err(Miss::UnknownCluster))),
        });
        CallPick {
            key,
            picked: picked.map(|picked| picked.map_err(|miss| miss.error(cluster))),
        }
    }

    /// The first pick of a call whose cluster was warming up
    /// ([`pick_for_call_if_ready`](Self::pick_for_call_if_ready) found no pick): as
    /// [`pick_endpoint_ready_within`](Self::pick_endpoint_ready_within), keyed by the call's
    /// affinity key.
    pub(crate) async fn pick_for_call_ready_within(
        &self,
        cluster: &str,
        key: Option<&[u8]>,
        max_wait: Duration,
    ) -> Result<PickHandle, PickError> {
        self.wait_for_warm_up(cluster, max_wait).await;
        self.pick(cluster, key)
    }

    /// The attempt timeout `cluster` sets for requests (`HttpRequest:ActivityTimeout`), if any;
    /// `None` also for an unknown cluster.
    pub(crate) fn activity_timeout(&self, cluster: &str) -> Option<Duration> {
        self.core
            .snapshot(cluster)
            .and_then(|s| s.settings.activity_timeout)
    }

    /// Like [`pick_endpoint`](Self::pick_endpoint), but the first picks of a cluster with active
    /// checks wait for its warm-up instead of sending the first request blind,
    /// at most the probe timeout. The warm-up ends as soon as the best tier that can still
    /// answer has a destination with a successful probe (tiers whose every first probe failed
    /// are skipped), or every first probe finished; a probe that hangs does not hold it. Picks
    /// made before every first probe finished prefer destinations already probed successfully.
    /// Once the warm-up is over it never waits.
    ///
    /// # Errors
    /// As [`pick_endpoint`](Self::pick_endpoint).
    pub async fn pick_endpoint_ready(&self, cluster: &str) -> Result<PickHandle, PickError> {
        self.pick_endpoint_ready_within(cluster, Duration::MAX)
            .await
    }

    /// [`pick_endpoint_ready`](Self::pick_endpoint_ready) for a request with a timeout of its
    /// own: the warm-up wait lasts at most `max_wait` (and at most the probe timeout), so a
    /// request never waits for probes longer than it may take in all. With `max_wait` zero it
    /// never waits, and picks as well as the probes finished so far allow.
    ///
    /// ```
    /// # async fn run(engine: healthpick::Engine) -> Result<(), healthpick::PickError> {
    /// use std::time::Duration;
    ///
    /// // A request with a 2 s timeout: at most 2 s of it go to the warm-up.
    /// let pick = engine.pick_endpoint_ready_within("payments", Duration::from_secs(2)).await?;
    /// # drop(pick); Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`pick_endpoint`](Self::pick_endpoint).
    pub async fn pick_endpoint_ready_within(
        &self,
        cluster: &str,
        max_wait: Duration,
    ) -> Result<PickHandle, PickError> {
        // The usual case: one snapshot load, then the pick itself.
        if let Some(pick) = self.pick_endpoint_if_ready(cluster, None) {
            return pick;
        }
        self.wait_for_warm_up(cluster, max_wait).await;
        self.pick_endpoint(cluster)
    }

    /// Waits for the warm-up of `cluster` while it runs, at most the probe timeout and at most
    /// `max_wait`.
    pub(crate) async fn wait_for_warm_up(&self, cluster: &str, max_wait: Duration) {
        if let Some(runtime) = self.core.table().get(cluster).cloned() {
            let timeout = runtime.cell.load().settings.probing.map(|p| p.timeout);
            if let Some(timeout) = timeout {
                let mut warmed = runtime.warmed.subscribe();
                drop(runtime);
                let wait = timeout.min(max_wait);
                if !wait.is_zero() {
                    // `Duration::MAX` cannot be added to an instant: bound it by the timeout.
                    let _ = tokio::time::timeout(wait, warmed.wait_for(|done| *done)).await;
                }
            }
        }
    }

    /// [`pick_endpoint`](Self::pick_endpoint) when no warm-up wait is due (the usual case);
    /// `None` when the cluster's warm-up is still running and the caller should await
    /// [`pick_endpoint_ready`](Self::pick_endpoint_ready) or
    /// [`pick_endpoint_ready_within`](Self::pick_endpoint_ready_within). Lets callers keep the
    /// waiting future out of their own state.
    #[inline]
    pub(crate) fn pick_endpoint_if_ready(
        &self,
        cluster: &str,
        key: Option<&[u8]>,
    ) -> Option<Result<PickHandle, PickError>> {
        match fast_path::pick(&self.core, cluster, key, true).into_result() {
            Err(Miss::Warming) => None,
            picked => Some(picked.map_err(|miss| miss.error(cluster))),
        }
    }

    /// Resolves once every cluster with active checks has finished its first probes (every
    /// destination has had a result — success, failure or timeout — as the
    /// [`ActiveMonitor`](crate::monitor::ActiveMonitor) runs them, or a whole round was
    /// reported) and every registered discovery source has answered once or used up its
    /// first-answer wait. Clusters without active checks or sources are ready at once.
    pub async fn ready(&self) {
        let table = self.core.table();
        let rounds: Vec<_> = table
            .runtimes()
            .filter(|r| r.cell.load().settings.probing.is_some())
            .map(|r| r.first_round.subscribe())
            .collect();
        // Every source's wait starts now: waiting for them in turn takes the longest, not the sum.
        let start = tokio::time::Instant::now();
        let answers: Vec<_> = table
            .runtimes()
            .flat_map(|r| {
                let book = r.book.lock();
                book.sources
                    .iter()
                    .filter_map(|s| s.state.as_ref())
                    .map(|s| (s.first_answer.subscribe(), start + s.first_answer_within))
                    .collect::<Vec<_>>()
            })
            .collect();
        for (mut answered, deadline) in answers {
            let _ = tokio::time::timeout_at(deadline, answered.wait_for(|done| *done)).await;
        }
        for mut first_round in rounds {
            let _ = first_round.wait_for(|done| *done).await;
        }
    }

    /// Whether `cluster` has finished its first probes (see [`ready`](Self::ready); false for
    /// unknown clusters).
    pub fn first_round_done(&self, cluster: &str) -> bool {
        self.core
            .table()
            .get(cluster)
            .is_some_and(|r| *r.first_round.borrow())
    }

    /// The whole best group of `cluster` and its summary status, for callers that pick
    /// themselves.
    ///
    /// # Errors
    /// As [`pick_endpoint`](Self::pick_endpoint).
    pub fn best_endpoints(&self, cluster: &str) -> Result<BestEndpoints, PickError> {
        let snapshot = self
            .core
            .snapshot(cluster)
            .ok_or_else(|| unknown(cluster))?;
        match snapshot.best_class {
            Some(status) if !snapshot.best.is_empty() => Ok(BestEndpoints {
                destinations: snapshot.best.destinations().to_vec(),
                status,
                panic: snapshot.panic,
            }),
            _ => Err(super::fast_path::nothing_to_pick(&snapshot).error(cluster)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::CallPick;
    use crate::config::affinity::{AffinityPolicy, SessionAffinityConfig};
    use crate::config::model::{ClusterConfig, Config, DestinationConfig};
    use crate::engine::Engine;

    fn engine() -> Engine {
        Engine::from_json(
            r#"{"Clusters": {"c": {"LoadBalancingPolicy": "FirstAlphabetical", "Destinations": {
                "a0": { "Address": "http://127.0.0.1:8001/" },
                "b0": { "Address": "http://127.0.0.1:8002/" },
                "a1": { "Address": "http://127.0.0.1:9001/", "Priority": 1 },
                "a2": { "Address": "http://127.0.0.1:9101/", "Priority": 2 } } } } }"#,
        )
        .expect("config")
    }

    fn retry(engine: &Engine, exclude: &[&str], leave: &[u32]) -> String {
        engine
            .pick_endpoint_for_retry("c", None, exclude, leave)
            .map(|p| p.destination().id().to_string())
            .unwrap_or_else(|e| e.to_string())
    }

    /// Without tiers to leave, a retry goes to the next best of the same tier, as
    /// `pick_endpoint_excluding` does; a tier to leave is passed over for the next tier while
    /// one has an untried destination, and comes back when nothing else is left.
    #[test]
    fn a_retry_leaves_the_tiers_it_is_told_to_while_others_remain() {
        let engine = engine();
        assert_eq!(retry(&engine, &["a0"], &[]), "b0");
        assert_eq!(retry(&engine, &["a0"], &[0]), "a1");
        assert_eq!(retry(&engine, &["a0", "a1"], &[0, 1]), "a2");
        assert_eq!(retry(&engine, &["a0", "a1", "a2"], &[0, 1, 2]), "b0");
        assert_eq!(
            retry(&engine, &["a0", "b0", "a1", "a2"], &[0]),
            "no available destinations in cluster `c`"
        );
        assert_eq!(retry(&engine, &["a0"], &[7]), "b0", "a tier nobody has");
        assert!(engine
            .pick_endpoint_for_retry("nope", None, &["a0"], &[0])
            .is_err());
    }

    /// The call's pick carries the cluster's `HttpRequest:ActivityTimeout`.
    #[test]
    fn a_call_pick_carries_the_cluster_activity_timeout() {
        let engine = Engine::from_json(
            r#"{"Clusters": {
                "slow": { "HttpRequest": { "ActivityTimeout": "00:00:02.5" },
                          "Destinations": { "d": { "Address": "http://127.0.0.1:8001/" } } },
                "plain": { "Destinations": { "d": { "Address": "http://127.0.0.1:8002/" } } } } }"#,
        )
        .expect("config");
        let (_, timeout) = call_pick(&engine, "SLOW").picked.unwrap().unwrap();
        assert_eq!(timeout, Some(std::time::Duration::from_millis(2500)));
        let (_, timeout) = call_pick(&engine, "plain").picked.unwrap().unwrap();
        assert_eq!(timeout, None);
        assert_eq!(
            engine.activity_timeout("slow"),
            Some(std::time::Duration::from_millis(2500))
        );
        assert_eq!(engine.activity_timeout("nope"), None);
        assert!(call_pick(&engine, "nope").picked.unwrap().is_err());
    }

    fn call_pick(engine: &Engine, cluster: &str) -> CallPick<&'static [u8]> {
        engine.pick_for_call_if_ready(cluster, |_| None)
    }

    /// A call's pick hands the cluster's affinity to the caller's key reader, picks with the
    /// key it returns, and gives the key back; without affinity the reader sees none, and an
    /// unknown cluster never asks it.
    #[test]
    fn a_call_pick_is_keyed_by_what_the_caller_reads_for_the_clusters_affinity() {
        let mut cluster = ClusterConfig::new("c")
            .session_affinity(SessionAffinityConfig::new(AffinityPolicy::CustomHeader));
        for i in 0..8 {
            let address = format!("http://127.0.0.1:{}/", 8000 + i);
            cluster = cluster.destination(DestinationConfig::new(format!("d{i}"), address));
        }
        let plain = ClusterConfig::new("plain")
            .destination(DestinationConfig::new("p", "http://127.0.0.1:9000/"));
        let engine = Engine::builder()
            .build_with(Config::new().cluster(cluster).cluster(plain))
            .unwrap();
        for key in ["k1", "k2", "k3", "k4"] {
            // Picked and dropped: nothing in flight, so the load bound never refuses the home.
            let keyed = engine.pick_endpoint_for_key("c", key).unwrap();
            let home = keyed.destination().id().to_string();
            drop(keyed);
            let call = engine.pick_for_call_if_ready("c", |affinity| {
                assert_eq!(
                    affinity.map(|a| a.policy_setting()),
                    Some(AffinityPolicy::CustomHeader)
                );
                Some(key.as_bytes())
            });
            assert_eq!(call.key, Some(key.as_bytes()));
            let (pick, _) = call.picked.unwrap().unwrap();
            assert_eq!(pick.destination().id(), home, "{key}");
        }
        let call = engine.pick_for_call_if_ready("plain", |affinity| {
            assert!(affinity.is_none());
            None::<&[u8]>
        });
        assert!(call.key.is_none() && call.picked.unwrap().is_ok());
        let call = engine.pick_for_call_if_ready("nope", |_| -> Option<&[u8]> {
            unreachable!("no cluster, no key")
        });
        assert!(call.key.is_none());
        assert!(call.picked.unwrap().unwrap_err().is_unknown_cluster());
    }
}
