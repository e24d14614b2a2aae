//! An engine's status as the tests read it: one destination, the first cluster's ids and
//! source, and the next probe round's result.

use std::time::Duration;

use healthpick::{DestinationStatus, Engine, SourceStatus};

use super::waits::eventually;

/// The status of one destination now.
pub fn destination(engine: &Engine, cluster: &str, id: &str) -> DestinationStatus {
    engine
        .status()
        .cluster(cluster)
        .unwrap_or_else(|| panic!("no cluster `{cluster}`"))
        .destination(id)
        .unwrap_or_else(|| panic!("no destination `{id}` in `{cluster}`"))
        .clone()
}

/// The ids of the engine's first cluster's destinations, sorted.
pub fn ids(engine: &Engine) -> Vec<String> {
    let mut ids: Vec<String> = engine.status().clusters[0]
        .destinations
        .iter()
        .map(|d| d.id.clone())
        .collect();
    ids.sort();
    ids
}

/// The status of the engine's first cluster's first source.
pub fn source(engine: &Engine) -> SourceStatus {
    engine.status().clusters[0].sources[0].clone()
}

/// Waits until a probe round of `cluster` newer than `after` (an engine-clock `last_probe`) has
/// been applied to destination `id`, and returns its status once it is settled (two reads 5 ms
/// apart agree, so the probe record and the health parts are from the same round).
pub async fn next_round(
    engine: &Engine,
    cluster: &str,
    id: &str,
    after: Option<Duration>,
) -> DestinationStatus {
    loop {
        let first = eventually("the next probe round", Duration::from_secs(5), || {
            let s = destination(engine, cluster, id);
            (s.last_probe.is_some() && s.last_probe != after).then_some(s)
        })
        .await;
        tokio::time::sleep(Duration::from_millis(5)).await;
        let second = destination(engine, cluster, id);
        if second.last_probe == first.last_probe
            && second.active == first.active
            && second.reported == first.reported
        {
            return second;
        }
    }
}
