//! Waiting for a condition with a deadline instead of sleeping and hoping, and the durations
//! tests write.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

/// `n` milliseconds.
pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Polls `check` every 5 ms until it returns `Some`, or until `deadline` has passed (`None`).
async fn poll<T>(deadline: Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let end = Instant::now() + deadline;
    loop {
        if let Some(value) = check() {
            return Some(value);
        }
        if Instant::now() >= end {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Polls `check` until it returns `Some`, or panics after `deadline` naming `what`.
pub async fn eventually<T>(what: &str, deadline: Duration, check: impl FnMut() -> Option<T>) -> T {
    match poll(deadline, check).await {
        Some(value) => value,
        None => panic!("timed out after {deadline:?} waiting for {what}"),
    }
}

/// Polls `condition` until it holds, or panics after `limit` naming `what`; returns how long
/// it took.
pub async fn until_within(
    limit: Duration,
    what: &str,
    mut condition: impl FnMut() -> bool,
) -> Duration {
    let start = Instant::now();
    if poll(limit, || condition().then_some(())).await.is_none() {
        panic!("not within {limit:?}: {what}");
    }
    start.elapsed()
}

/// [`until_within`] 10 s.
pub async fn until(what: &str, condition: impl FnMut() -> bool) -> Duration {
    until_within(Duration::from_secs(10), what, condition).await
}

/// Polls `condition` until it holds or `within` has passed; returns whether it held (for a
/// test that asserts with a message of its own, or checks that something does not happen).
pub async fn wait_until(within: Duration, mut condition: impl FnMut() -> bool) -> bool {
    poll(within, || condition().then_some(())).await.is_some()
}

/// Awaits `future`, failing the test if it takes longer than `deadline`.
pub async fn within<F: Future>(what: &str, deadline: Duration, future: F) -> F::Output {
    match tokio::time::timeout(deadline, future).await {
        Ok(output) => output,
        Err(_) => panic!("{what} did not finish within {deadline:?}"),
    }
}
