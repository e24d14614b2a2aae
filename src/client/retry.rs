//! Retries (SPEC §8): how many attempts a call may make, which requests may be retried at all,
//! and the per-cluster retry budget that keeps an outage from multiplying load.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use reqwest::Method;
use tower::retry::budget::{Budget, TpsBudget};

use crate::ids::{fold_case, with_folded};

/// How retries are limited: attempts per call and a per-cluster budget.
///
/// A call is retried only when it is retryable at all (an idempotent method, or marked
/// [`retryable`](crate::RequestBuilder::retryable); a body that can be sent again) and failed before
/// any response. Each retry goes to a destination not yet tried in that call, first in the same
/// tier, then in the next, and takes one token from the cluster's budget; a call stops at the
/// first retry the budget refuses, or when no untried destination is left.
///
/// Two kinds of failure count differently:
///
/// - a **connect failure** (the connection could not be established, so nothing was sent:
///   [`reqwest::Error::is_connect`]) is *requeued*, as Finagle does with requests that were never
///   written: it does not use up one of `max_attempts`, because trying another destination is
///   always safe and cheap. It still takes a budget token, and since no destination is tried
///   twice, a call makes at most as many requeues as its cluster has destinations. This is what
///   lets a call get past a whole tier of dead servers to the next tier before health checks
///   have noticed them. Turn it off with `requeue_connect_failures: false`;
/// - any other failure before a response (reset, timeout, broken connection) counts as one of
///   `max_attempts`: the request may have reached the server.
///
/// ```
/// use healthpick::RetryPolicy;
///
/// // Every failure counts, connect failures included: at most 2 attempts per call.
/// let strict = RetryPolicy {
///     max_attempts: 2,
///     requeue_connect_failures: false,
///     ..RetryPolicy::default()
/// };
/// # drop(strict);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Attempts per call, the first included, not counting requeued connect failures. Default 3.
    pub max_attempts: usize,
    /// Whether a connect failure of a retryable request is retried on another destination
    /// without counting against `max_attempts` (see above). Default true.
    pub requeue_connect_failures: bool,
    /// Retries may add at most this fraction of the cluster's requests. Default 0.2.
    pub retry_ratio: f32,
    /// ... plus this many retries per second. Default 10.
    pub min_retries_per_second: u32,
    /// Window over which the budget counts (1 to 60 s; values outside are clamped). Default
    /// 10 s.
    pub budget_window: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 3,
            requeue_connect_failures: true,
            retry_ratio: 0.2,
            min_retries_per_second: 10,
            budget_window: Duration::from_secs(10),
        }
    }
}

/// The attempts of one call, as the [`RetryPolicy`] counts them (shared by the client and the
/// middleware).
#[derive(Debug)]
pub(crate) struct AttemptCount {
    retryable: bool,
    requeue_connect_failures: bool,
    max_attempts: usize,
    counted: usize,
}

impl AttemptCount {
    pub fn new(policy: &RetryPolicy, retryable: bool) -> Self {
        AttemptCount {
            retryable,
            requeue_connect_failures: policy.requeue_connect_failures,
            max_attempts: policy.max_attempts.max(1),
            counted: 0,
        }
    }

    /// Records an attempt that failed before any response (`connect`: it never connected);
    /// returns whether the call may go on to another destination, budget permitting.
    pub fn failed(&mut self, connect: bool) -> bool {
        if !self.retryable {
            return false;
        }
        if !(connect && self.requeue_connect_failures) {
            self.counted += 1;
        }
        self.counted < self.max_attempts
    }
}

/// Per-cluster retry budgets, shared by the client and the middleware.
#[derive(Debug)]
pub(crate) struct Retries {
    pub policy: RetryPolicy,
    /// Folded cluster id -> budget. Read on every call without a lock; a cluster's first call
    /// adds its entry (copy-on-write, once per cluster).
    budgets: ArcSwap<HashMap<String, Arc<TpsBudget>, foldhash::fast::RandomState>>,
}

impl Retries {
    pub fn new(policy: RetryPolicy) -> Self {
        Retries {
            policy,
            budgets: ArcSwap::from_pointee(HashMap::default()),
        }
    }

    /// Counts one request of `cluster` in its budget (every call makes one deposit).
    pub fn deposit(&self, cluster: &str) {
        // Usual case: a cluster already seen, found without a lock, an allocation or a reference
        // count.
        let found = with_folded(cluster, |folded| match self.budgets.load().get(folded) {
            Some(budget) => {
                budget.deposit();
                true
            }
            None => false,
        });
        if !found {
            self.budget(cluster).deposit();
        }
    }

    /// Takes one retry of `cluster` from its budget; `false` when the budget refuses.
    pub fn withdraw(&self, cluster: &str) -> bool {
        self.budget(cluster).withdraw()
    }

    /// The budget of `cluster`, added on first use.
    #[cold]
    fn budget(&self, cluster: &str) -> Arc<TpsBudget> {
        let folded = fold_case(cluster);
        if let Some(budget) = self.budgets.load().get(&folded) {
            return budget.clone();
        }
        let fresh = Arc::new(self.new_budget());
        // Two first calls racing: the first insert wins and both use its budget.
        self.budgets.rcu(|table| {
            let mut table = HashMap::clone(table);
            table.entry(folded.clone()).or_insert_with(|| fresh.clone());
            table
        });
        self.budgets.load().get(&folded).cloned().unwrap_or(fresh)
    }

    fn new_budget(&self) -> TpsBudget {
        // tower's budget asserts these ranges (from Finagle); clamp instead of panicking.
        TpsBudget::new(
            self.policy
                .budget_window
                .clamp(Duration::from_secs(1), Duration::from_secs(60)),
            self.policy.min_retries_per_second.min(i32::MAX as u32 - 1),
            if self.policy.retry_ratio.is_finite() {
                self.policy.retry_ratio.clamp(0.0, 1000.0)
            } else {
                0.0
            },
        )
    }
}

/// Whether `method` may be retried without being marked: GET, HEAD, OPTIONS, PUT, DELETE, TRACE.
pub(crate) fn is_idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::PUT | Method::DELETE | Method::TRACE
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{Retries, RetryPolicy};

    /// One budget per cluster: ids that differ only in case share it, other clusters do not.
    #[test]
    fn one_budget_per_cluster_whatever_the_case() {
        let retries = Retries::new(RetryPolicy::default());
        let a = retries.budget("payments");
        let b = retries.budget("Payments");
        let c = retries.budget("PAYMENTS");
        let other = retries.budget("orders");
        assert!(Arc::ptr_eq(&a, &b) && Arc::ptr_eq(&a, &c));
        assert!(!Arc::ptr_eq(&a, &other));
        // A non-ASCII id folds like config ids do.
        assert!(Arc::ptr_eq(
            &retries.budget("Übercluster"),
            &retries.budget("übercluster")
        ));
    }

    /// Deposits land in the cluster's one budget whichever way its id is spelt (the lower-case
    /// fast path and the folding slow path), and buy retries at the policy's ratio.
    #[test]
    fn deposits_buy_retries_at_the_ratio_whatever_the_case() {
        let retries = Retries::new(RetryPolicy {
            retry_ratio: 0.5,
            min_retries_per_second: 0,
            ..RetryPolicy::default()
        });
        assert!(!retries.withdraw("payments"), "nothing deposited yet");
        for id in ["payments", "Payments", "payments", "PAYMENTS"] {
            retries.deposit(id);
        }
        retries.deposit("orders");
        // Four requests at 50%: two retries, then none.
        assert!(retries.withdraw("PAYMENTS"));
        assert!(retries.withdraw("payments"));
        assert!(!retries.withdraw("Payments"));
        assert!(
            !retries.withdraw("orders"),
            "one request buys no whole retry"
        );
    }

    /// Threads making a cluster's first calls at once all end up with the same budget.
    #[test]
    fn racing_first_calls_share_one_budget() {
        for _ in 0..20 {
            let retries = Retries::new(RetryPolicy::default());
            let barrier = std::sync::Barrier::new(4);
            let budgets: Vec<_> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..4)
                    .map(|i| {
                        let (retries, barrier) = (&retries, &barrier);
                        s.spawn(move || {
                            barrier.wait();
                            let id = if i % 2 == 0 { "c" } else { "C" };
                            retries.deposit(id);
                            (retries.budget(id), retries.budget("d"))
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            for (c, d) in &budgets {
                assert!(Arc::ptr_eq(c, &budgets[0].0));
                assert!(Arc::ptr_eq(d, &budgets[0].1));
            }
            assert!(!Arc::ptr_eq(&budgets[0].0, &budgets[0].1));
        }
    }
}
