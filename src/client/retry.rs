//! Retries: how many attempts a call may make, which requests and which
//! statuses may be retried at all, and the per-cluster budgets that keep an outage from
//! multiplying load.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use arc_swap::ArcSwap;
use reqwest::Method;
use tokio::time::Instant;

use super::budget::{share_amount, Budget};
use super::error::ClientError;
use super::hedging::Latencies;
use crate::ids::{fold_case, with_folded};

/// How retries are limited: attempts per call, the statuses that are retried, and a
/// per-cluster budget.
///
/// A call is retried only when it is retryable at all (an idempotent method, or marked
/// [`retryable`](crate::RequestBuilder::retryable); a body that can be sent again), and only
/// after an attempt that failed before any response (a transport failure or a timeout) or that
/// was answered with one of [`retry_statuses`](Self::retry_statuses). Each retry goes to a
/// destination not yet tried in that call and takes one token from the cluster's budget; a call
/// stops at the first retry the budget refuses, when no untried destination is left, or at its
/// deadline ([`Timeouts`](crate::Timeouts)).
///
/// Where a retry goes depends on how the attempt failed:
///
/// - a **connect failure** (the connection could not be established, so nothing was sent:
///   refused, a connect timeout, a TLS handshake that failed) is *requeued*, as Finagle does
///   with requests that were never written: it does not use up one of `max_attempts`, because
///   trying another destination is always safe, and the retry goes to the next best destination
///   of the **same tier**. Its budget token is given back when the call is answered in the end:
///   stepping over a dead destination costs neither the destinations nor the budget anything,
///   so a tier that dies at any moment does not drain a young client's budget, while in an
///   outage of every destination those tokens stay spent and the budget bounds the extra load.
///   Turn requeueing off with `requeue_connect_failures: false` (the token is still given
///   back);
/// - a failure **after connecting** (reset, a connection closed before the response, a
///   timeout) counts as one of `max_attempts`, since the request may have reached the server,
///   and the call **leaves that tier** for the next one that has an available destination
///   (coming back only when no other tier has one). The failure may be a kept-alive connection
///   whose server had died with its whole tier, which looks exactly like a reset; or it may be
///   a request that crashes servers, which should not be tried on each of them in turn;
/// - a **retryable status** counts as an attempt and goes to the next best destination of the
///   same tier; if nothing is left to try, the caller gets the response. A response with a
///   `Retry-After` header is never retried: the server asked its callers to back off, and the
///   caller gets it to decide.
///
/// ```
/// use healthpick::{RetryPolicy, RetryStatuses};
///
/// // Every failure counts, connect failures included: at most 2 attempts per call; 503 only.
/// let strict = RetryPolicy::default()
///     .max_attempts(2)
///     .requeue_connect_failures(false)
///     .retry_statuses(RetryStatuses::new([503])?);
/// # drop(strict);
/// # Ok::<(), healthpick::ClientError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// Attempts per call, the first included, not counting requeued connect failures nor a
    /// hedge. Default 3.
    pub max_attempts: usize,
    /// Whether a connect failure of a retryable request is retried on another destination
    /// without counting against `max_attempts` (see above). Default true.
    pub requeue_connect_failures: bool,
    /// Response statuses after which a retryable request is tried on another destination.
    /// Default 502, 503 and 504 ([`RetryStatuses::GATEWAY`]); [`RetryStatuses::NONE`] turns
    /// status retries off.
    pub retry_statuses: RetryStatuses,
    /// Retries (and hedges) may add at most this fraction of the cluster's requests. Default
    /// 0.2.
    pub retry_ratio: f32,
    /// ... plus this many retries per second. Default 10.
    pub min_retries_per_second: u32,
    /// Window over which the budget counts (1 to 60 s; values outside are clamped). Default
    /// 10 s.
    pub budget_window: Duration,
}

impl RetryPolicy {
    /// This policy with at most `attempts` attempts per call (see [`max_attempts`](Self::max_attempts)).
    #[must_use]
    pub fn max_attempts(mut self, attempts: usize) -> Self {
        self.max_attempts = attempts;
        self
    }

    /// This policy with connect failures requeued or not.
    #[must_use]
    pub fn requeue_connect_failures(mut self, requeue: bool) -> Self {
        self.requeue_connect_failures = requeue;
        self
    }

    /// This policy retrying `statuses` elsewhere.
    #[must_use]
    pub fn retry_statuses(mut self, statuses: RetryStatuses) -> Self {
        self.retry_statuses = statuses;
        self
    }

    /// This policy with a retry budget of `ratio` of the calls.
    #[must_use]
    pub fn retry_ratio(mut self, ratio: f32) -> Self {
        self.retry_ratio = ratio;
        self
    }

    /// This policy with `retries` retries per second always allowed.
    #[must_use]
    pub fn min_retries_per_second(mut self, retries: u32) -> Self {
        self.min_retries_per_second = retries;
        self
    }

    /// This policy with the budget counted over `window`.
    #[must_use]
    pub fn budget_window(mut self, window: Duration) -> Self {
        self.budget_window = window;
        self
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 3,
            requeue_connect_failures: true,
            retry_statuses: RetryStatuses::GATEWAY,
            retry_ratio: 0.2,
            min_retries_per_second: 10,
            budget_window: Duration::from_secs(10),
        }
    }
}

/// A set of error statuses (400 to 599) after which a retryable request is retried on another
/// destination.
///
/// ```
/// use healthpick::RetryStatuses;
///
/// assert!(RetryStatuses::GATEWAY.contains(503));
/// assert!(!RetryStatuses::GATEWAY.contains(500));
/// let with_429 = RetryStatuses::new([429, 502, 503, 504])?;
/// assert!(with_429.contains(429));
/// assert!(RetryStatuses::new([200]).is_err(), "a success is never retried");
/// # Ok::<(), healthpick::ClientError>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct RetryStatuses {
    /// Bit `s - 400` for each status `s`.
    bits: [u64; 4],
}

impl RetryStatuses {
    /// No status is retried.
    pub const NONE: RetryStatuses = RetryStatuses { bits: [0; 4] };
    /// The gateway statuses: 502 Bad Gateway, 503 Service Unavailable, 504 Gateway Timeout
    /// (the default; Envoy's `gateway-error` plus 503).
    pub const GATEWAY: RetryStatuses = RetryStatuses {
        bits: [0, 0b111 << (502 - 400 - 64), 0, 0],
    };

    /// The set of `statuses`.
    ///
    /// # Errors
    /// [`ClientError::Builder`](crate::ClientError::Builder) naming a status outside 400..=599:
    /// only errors are retried.
    pub fn new(statuses: impl IntoIterator<Item = u16>) -> Result<RetryStatuses, ClientError> {
        let mut set = RetryStatuses::NONE;
        for status in statuses {
            if !(400..=599).contains(&status) {
                return Err(ClientError::builder(format!(
                    "status {status} cannot be retried: only error statuses (400 to 599) can"
                )));
            }
            let bit = usize::from(status - 400);
            set.bits[bit / 64] |= 1 << (bit % 64);
        }
        Ok(set)
    }

    /// Whether `status` is in the set.
    #[inline]
    pub fn contains(&self, status: u16) -> bool {
        match status.checked_sub(400) {
            Some(bit) if bit < 256 => self.bits[usize::from(bit) / 64] & (1 << (bit % 64)) != 0,
            _ => false,
        }
    }

    /// Whether the set is empty (status retries are off).
    pub fn is_empty(&self) -> bool {
        self.bits == [0; 4]
    }

    fn iter(&self) -> impl Iterator<Item = u16> + '_ {
        (400..=599).filter(|s| self.contains(*s))
    }
}

impl Default for RetryStatuses {
    fn default() -> Self {
        RetryStatuses::GATEWAY
    }
}

impl std::fmt::Debug for RetryStatuses {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

/// How an attempt ended without an answer the caller gets, as the retry rules tell them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FailureKind {
    /// No connection was established: nothing was sent.
    Connect,
    /// The connection failed after it was established (reset, closed before the response).
    Transport,
    /// No response within the attempt's timeout.
    TimedOut,
    /// Answered with a retryable status.
    Status,
}

impl FailureKind {
    /// Whether the call leaves the failed destination's tier (see [`RetryPolicy`]).
    pub fn leaves_tier(self) -> bool {
        matches!(self, FailureKind::Transport | FailureKind::TimedOut)
    }
}

/// The attempts of one call, as the [`RetryPolicy`] counts them (shared by the client and the
/// middleware).
#[derive(Debug)]
pub(crate) struct AttemptCount {
    retryable: bool,
    requeue_connect_failures: bool,
    max_attempts: u32,
    counted: u32,
}

impl AttemptCount {
    pub fn new(policy: &RetryPolicy, retryable: bool) -> Self {
        AttemptCount {
            retryable,
            requeue_connect_failures: policy.requeue_connect_failures,
            max_attempts: u32::try_from(policy.max_attempts.max(1)).unwrap_or(u32::MAX),
            counted: 0,
        }
    }

    /// Whether the call may be retried at all.
    #[inline]
    pub fn retryable(&self) -> bool {
        self.retryable
    }

    /// Records an attempt that failed; returns whether the call may go on to another
    /// destination, budget permitting.
    pub fn failed(&mut self, kind: FailureKind) -> bool {
        if !self.retryable {
            return false;
        }
        if !(kind == FailureKind::Connect && self.requeue_connect_failures) {
            self.counted += 1;
        }
        self.counted < self.max_attempts
    }
}

/// What a client keeps per cluster: its retry budget, its hedge cap, and (only once a call
/// hedges at a percentile) its recent latencies.
pub(crate) struct ClusterBudget {
    /// Retries and hedges spend it; every call deposits.
    pub retries: Budget,
    /// Hedges spend it; every call that may hedge deposits its share.
    pub hedges: Budget,
    /// Latencies of answered attempts of calls that hedge at a percentile.
    pub latencies: OnceLock<Box<Latencies>>,
}

impl std::fmt::Debug for ClusterBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterBudget")
            .field("retries", &self.retries)
            .field("hedges", &self.hedges)
            .finish_non_exhaustive()
    }
}

/// Clusters whose budgets are found by a scan of slots (the first ones called); a client
/// calling more clusters keeps the others in a copy-on-write map.
const BUDGET_SLOTS: usize = 8;

/// Per-cluster budgets, shared by the client and the middleware.
#[derive(Debug)]
pub(crate) struct Budgets {
    pub policy: RetryPolicy,
    /// What one request deposits in its cluster's retry budget.
    deposit: i64,
    /// The first clusters called, by folded id, filled in order and never emptied: a call finds
    /// its budget with one acquire load and one comparison per slot, with no reference count, no
    /// hash and no case folding when the id is spelt as its folded form.
    slots: [OnceLock<(Box<str>, Arc<ClusterBudget>)>; BUDGET_SLOTS],
    /// Folded cluster id -> budget, for the clusters called once every slot was taken; a
    /// cluster's first call adds its entry (copy-on-write, once per cluster).
    more: ArcSwap<HashMap<String, Arc<ClusterBudget>, foldhash::fast::RandomState>>,
}

impl Budgets {
    pub fn new(policy: RetryPolicy) -> Self {
        Budgets {
            deposit: share_amount(policy.retry_ratio),
            policy,
            slots: Default::default(),
            more: ArcSwap::from_pointee(HashMap::default()),
        }
    }

    /// Counts one request of `cluster` made at `now` in its budget (every call makes one
    /// deposit), and `hedge_share` of a hedge in its hedge cap (0 for a call that does not
    /// hedge).
    #[inline]
    pub fn deposit(&self, cluster: &str, now: Instant, hedge_share: i64) {
        // Usual case: a cluster already seen, spelt as its folded id; otherwise the cold lookup
        // that folds (and adds the cluster on its first call).
        let deposit = |budget: &ClusterBudget| {
            budget.retries.deposit_at(now, self.deposit);
            budget.hedges.deposit_at(now, hedge_share);
        };
        match self.slotted(|key| key == cluster) {
            Some(budget) => deposit(budget),
            None => deposit(&self.budget(cluster)),
        }
    }

    /// The budget in the first taken slot whose key `matches`, if any.
    #[inline]
    fn slotted(&self, matches: impl Fn(&str) -> bool) -> Option<&Arc<ClusterBudget>> {
        for slot in &self.slots {
            let (key, budget) = slot.get()?;
            if matches(key) {
                return Some(budget);
            }
        }
        None
    }

    /// Takes one retry of `cluster` from its budget; `false` when the budget refuses.
    pub fn withdraw(&self, cluster: &str) -> bool {
        self.budget(cluster).retries.withdraw()
    }

    /// Gives `tokens` retries of `cluster` back.
    pub fn refund(&self, cluster: &str, tokens: u32) {
        self.budget(cluster).retries.refund(tokens);
    }

    /// The budget of `cluster`, added on first use.
    #[cold]
    pub fn budget(&self, cluster: &str) -> Arc<ClusterBudget> {
        let found = with_folded(cluster, |folded| {
            self.slotted(|key| key == folded)
                .cloned()
                .or_else(|| self.more.load().get(folded).cloned())
        });
        if let Some(budget) = found {
            return budget;
        }
        let folded = fold_case(cluster);
        let fresh = Arc::new(ClusterBudget {
            retries: Budget::new(
                self.policy.budget_window,
                self.policy.min_retries_per_second,
            ),
            // No reserve: a cap on hedges is a share of requests, from the first request on.
            hedges: Budget::new(self.policy.budget_window, 0),
            latencies: OnceLock::new(),
        });
        // Two first calls racing: the first to take a slot (or to insert in the map) wins and
        // both use its budget. A slot is taken only after every slot before it, so a key cannot
        // end up in two slots: whoever loses a slot reads the winner's key before going on.
        for slot in &self.slots {
            let (key, budget) = slot.get_or_init(|| (folded.clone().into(), fresh.clone()));
            if **key == *folded {
                return budget.clone();
            }
        }
        self.more.rcu(|table| {
            let mut table = HashMap::clone(table);
            table.entry(folded.clone()).or_insert_with(|| fresh.clone());
            table
        });
        self.more.load().get(&folded).cloned().unwrap_or(fresh)
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

    use tokio::time::Instant;

    use super::{AttemptCount, Budgets, FailureKind, RetryPolicy, RetryStatuses, BUDGET_SLOTS};

    /// One budget per cluster: ids that differ only in case share it, other clusters do not.
    #[test]
    fn one_budget_per_cluster_whatever_the_case() {
        let budgets = Budgets::new(RetryPolicy::default());
        let a = budgets.budget("payments");
        let b = budgets.budget("Payments");
        let c = budgets.budget("PAYMENTS");
        let other = budgets.budget("orders");
        assert!(Arc::ptr_eq(&a, &b) && Arc::ptr_eq(&a, &c));
        assert!(!Arc::ptr_eq(&a, &other));
        // A non-ASCII id folds like config ids do.
        assert!(Arc::ptr_eq(
            &budgets.budget("Übercluster"),
            &budgets.budget("übercluster")
        ));
    }

    /// Deposits land in the cluster's one budget whichever way its id is spelt (the lower-case
    /// fast path and the folding slow path), and buy retries at the policy's ratio.
    #[test]
    fn deposits_buy_retries_at_the_ratio_whatever_the_case() {
        let budgets = Budgets::new(RetryPolicy {
            retry_ratio: 0.5,
            min_retries_per_second: 0,
            ..RetryPolicy::default()
        });
        assert!(!budgets.withdraw("payments"), "nothing deposited yet");
        for id in ["payments", "Payments", "payments", "PAYMENTS"] {
            budgets.deposit(id, Instant::now(), 0);
        }
        budgets.deposit("orders", Instant::now(), 0);
        // Four requests at 50%: two retries, then none.
        assert!(budgets.withdraw("PAYMENTS"));
        assert!(budgets.withdraw("payments"));
        assert!(!budgets.withdraw("Payments"));
        assert!(
            !budgets.withdraw("orders"),
            "one request buys no whole retry"
        );
        // A refund gives one back.
        budgets.refund("payments", 1);
        assert!(budgets.withdraw("payments"));
        assert!(!budgets.withdraw("payments"));
    }

    /// Threads making a cluster's first calls at once all end up with the same budget.
    #[test]
    fn racing_first_calls_share_one_budget() {
        for _ in 0..20 {
            let budgets = Budgets::new(RetryPolicy::default());
            let barrier = std::sync::Barrier::new(4);
            let found: Vec<_> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..4)
                    .map(|i| {
                        let (budgets, barrier) = (&budgets, &barrier);
                        s.spawn(move || {
                            barrier.wait();
                            let id = if i % 2 == 0 { "c" } else { "C" };
                            budgets.deposit(id, Instant::now(), 0);
                            (budgets.budget(id), budgets.budget("d"))
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            for (c, d) in &found {
                assert!(Arc::ptr_eq(c, &found[0].0));
                assert!(Arc::ptr_eq(d, &found[0].1));
            }
            assert!(!Arc::ptr_eq(&found[0].0, &found[0].1));
        }
    }

    /// A client calling more clusters than there are slots keeps one budget per cluster past
    /// them too (the overflow map), found whichever way the id is spelt, and racing first calls
    /// of many clusters at once give each cluster exactly one budget.
    #[test]
    fn clusters_past_the_slots_keep_one_budget_each() {
        let ids: Vec<String> = (0..BUDGET_SLOTS + 5)
            .map(|i| format!("cluster-{i}"))
            .collect();
        for _ in 0..20 {
            let budgets = Budgets::new(RetryPolicy::default());
            let barrier = std::sync::Barrier::new(3);
            let found: Vec<Vec<Arc<super::ClusterBudget>>> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..3)
                    .map(|t| {
                        let (budgets, barrier, ids) = (&budgets, &barrier, &ids);
                        s.spawn(move || {
                            barrier.wait();
                            // Each thread first calls the clusters in its own order.
                            let mut order: Vec<usize> = (0..ids.len()).collect();
                            order.rotate_left(t * 4);
                            for &i in &order {
                                budgets.deposit(&ids[i], Instant::now(), 0);
                            }
                            ids.iter()
                                .map(|id| budgets.budget(&id.to_uppercase()))
                                .collect()
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            for (i, id) in ids.iter().enumerate() {
                let one = budgets.budget(id);
                for seen in &found {
                    assert!(Arc::ptr_eq(&seen[i], &one), "{id}: two budgets");
                }
                for (j, other) in ids.iter().enumerate().filter(|&(j, _)| j != i) {
                    assert!(
                        !Arc::ptr_eq(&one, &budgets.budget(other)),
                        "{id} and {other} share a budget (slots {i} and {j})"
                    );
                }
            }
        }
    }

    /// Connect failures are requeued, everything else counts; nothing goes on for a request
    /// that is not retryable.
    #[test]
    fn attempts_count_by_kind() {
        let policy = RetryPolicy::default();
        let mut count = AttemptCount::new(&policy, true);
        for _ in 0..10 {
            assert!(count.failed(FailureKind::Connect), "requeued");
        }
        assert!(count.failed(FailureKind::Transport));
        assert!(count.failed(FailureKind::Status));
        assert!(!count.failed(FailureKind::TimedOut), "the third attempt");
        let strict = RetryPolicy {
            requeue_connect_failures: false,
            max_attempts: 2,
            ..policy
        };
        let mut count = AttemptCount::new(&strict, true);
        assert!(count.failed(FailureKind::Connect));
        assert!(!count.failed(FailureKind::Connect));
        let mut once = AttemptCount::new(&policy, false);
        assert!(!once.failed(FailureKind::Connect));
        assert!(FailureKind::Transport.leaves_tier() && FailureKind::TimedOut.leaves_tier());
        assert!(!FailureKind::Connect.leaves_tier() && !FailureKind::Status.leaves_tier());
    }

    /// The status sets: the gateway default, custom ones, refusals of non-errors.
    #[test]
    fn status_sets() {
        let gateway = RetryStatuses::GATEWAY;
        assert_eq!(format!("{gateway:?}"), "{502, 503, 504}");
        assert_eq!(RetryStatuses::new([502, 503, 504]).unwrap(), gateway);
        for s in [0, 200, 399, 500, 501, 505, 599, 600, 655, 656, u16::MAX] {
            assert!(!gateway.contains(s), "{s}");
        }
        let custom = RetryStatuses::new([400, 429, 599]).unwrap();
        assert!(custom.contains(400) && custom.contains(429) && custom.contains(599));
        assert!(!custom.contains(503));
        assert!(RetryStatuses::NONE.is_empty() && !gateway.is_empty());
        for bad in [200, 302, 600, 1000, 0] {
            let e = RetryStatuses::new([503, bad]).unwrap_err();
            assert!(e.to_string().contains(&bad.to_string()), "{e}");
        }
    }
}
