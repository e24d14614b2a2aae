//! What the engine knows about one registered discovery source of a cluster: what it
//! watches, when it last answered, whether it is stale and why, how many sets it published, and
//! the change its update guard holds.

use std::time::Duration;

use tokio::sync::watch;

use super::guard::Held;
use crate::config::discovery::GuardPolicy;

/// A registered source's bookkeeping, kept in its cluster's book.
pub(crate) struct SourceState {
    pub kind: String,
    pub target: String,
    pub guard: GuardPolicy,
    pub first_answer_within: Duration,
    /// Whether it answered at least once (a set, or "does not exist").
    pub answered: bool,
    /// Flipped once it answered, for `Engine::ready`.
    pub first_answer: watch::Sender<bool>,
    pub last_success: Option<Duration>,
    pub last_error: Option<(Duration, String)>,
    pub stale_since: Option<Duration>,
    /// Publications applied.
    pub generation: u64,
    pub held: Option<Held>,
}

impl SourceState {
    pub fn new(
        kind: String,
        target: String,
        guard: GuardPolicy,
        first_answer_within: Duration,
    ) -> Self {
        SourceState {
            kind,
            target,
            guard,
            first_answer_within,
            answered: false,
            first_answer: watch::Sender::new(false),
            last_success: None,
            last_error: None,
            stale_since: None,
            generation: 0,
            held: None,
        }
    }
}
