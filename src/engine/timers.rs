//! The engine's timers: passive reactivations, the end of a destination's success grant, the
//! confirmation of changes the update guard holds, the steps of slow start and the tier-spill
//! controller's looks. A heap of due times, fired by a tokio task on the system
//! clock, or by `Engine::fire_due_timers` with a custom clock.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::clock::Clock;
use crate::destination::Destination;

/// What a due timer calls: the cluster it belongs to.
pub(crate) trait TimerTarget: Send + Sync {
    /// The timer `what`, due at `due`, fired.
    fn fire(&self, due: Duration, what: &Due);
}

/// What a timer is for.
pub(crate) enum Due {
    /// A destination's passive reactivation.
    Reactivation(Weak<Destination>),
    /// The end of the successes a destination may count without its outcome window's lock.
    GrantEnds(Weak<Destination>),
    /// The confirmation delay of the change a source's update guard holds.
    HeldChange(Arc<str>),
    /// The next step of slow start: the weights of a warming group are recomputed.
    SlowStart,
    /// The tier-spill controller's next look at the preferred tier.
    SpillTick,
}

/// One pending timer.
pub(crate) struct Timer {
    due: Duration,
    seq: u64,
    cluster: Weak<dyn TimerTarget>,
    what: Due,
}

impl Timer {
    pub fn new(due: Duration, cluster: Weak<dyn TimerTarget>, what: Due) -> Self {
        Timer {
            due,
            seq: 0,
            cluster,
            what,
        }
    }
}

// Ordered by due time, then by scheduling order; what they point at takes no part.
impl PartialEq for Timer {
    fn eq(&self, other: &Self) -> bool {
        (self.due, self.seq) == (other.due, other.seq)
    }
}
impl Eq for Timer {}
impl PartialOrd for Timer {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Timer {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.due, self.seq).cmp(&(other.due, other.seq))
    }
}

/// The engine's timers.
pub(crate) struct Timers {
    heap: Mutex<BinaryHeap<Reverse<Timer>>>,
    seq: AtomicU64,
    wake: Arc<Notify>,
    driver_started: AtomicBool,
    /// Whether a tokio task fires timers (the system clock) or the user does.
    auto: bool,
    closed: AtomicBool,
    clock: Arc<dyn Clock>,
    me: Weak<Timers>,
}

impl Timers {
    /// Timers on `clock`; `auto`: a tokio task fires them (the system clock), otherwise the
    /// user does with `Engine::fire_due_timers`.
    pub fn new(clock: Arc<dyn Clock>, auto: bool) -> Arc<Self> {
        Arc::new_cyclic(|me| Timers {
            heap: Mutex::new(BinaryHeap::new()),
            seq: AtomicU64::new(0),
            wake: Arc::new(Notify::new()),
            driver_started: AtomicBool::new(false),
            auto,
            closed: AtomicBool::new(false),
            clock,
            me: me.clone(),
        })
    }

    pub fn schedule(&self, mut entry: Timer) {
        entry.seq = self.seq.fetch_add(1, AtomicOrdering::Relaxed);
        let earliest = {
            let mut heap = self.heap.lock();
            let earliest = heap.peek().is_none_or(|Reverse(head)| entry.due < head.due);
            heap.push(Reverse(entry));
            earliest
        };
        // The driver sleeps until the earliest due time: only a new earliest changes that.
        if earliest {
            self.wake.notify_one();
        }
        if self.auto && !self.closed.load(AtomicOrdering::Acquire) && !self.start() {
            tracing::warn!(target: "healthpick", "no tokio runtime: passive reactivation, held-change confirmation, slow-start steps and tier-spill decisions happen only when Engine::fire_due_timers is called");
        }
    }

    /// Starts the task that fires the timers on the system clock, if it does not run yet and a
    /// tokio runtime is at hand; whether it runs. Never with a custom clock: the user fires
    /// those timers, when they choose.
    pub fn start(&self) -> bool {
        self.auto
            && !self.closed.load(AtomicOrdering::Acquire)
            && (self.driver_started.load(AtomicOrdering::Acquire) || self.start_driver())
    }

    pub fn next_due(&self) -> Option<Duration> {
        self.heap.lock().peek().map(|Reverse(e)| e.due)
    }

    /// Fires every timer due at `now`; returns how many fired.
    pub fn fire_due(&self, now: Duration) -> usize {
        let mut fired = 0;
        loop {
            let entry = {
                let mut heap = self.heap.lock();
                match heap.peek() {
                    Some(Reverse(e)) if e.due <= now => heap.pop().map(|Reverse(e)| e),
                    _ => None,
                }
            };
            let Some(entry) = entry else {
                return fired;
            };
            fired += 1;
            if let Some(cluster) = entry.cluster.upgrade() {
                cluster.fire(entry.due, &entry.what);
            }
        }
    }

    /// Ends the driver task (the engine is gone).
    pub fn close(&self) {
        self.closed.store(true, AtomicOrdering::Release);
        self.wake.notify_one();
    }

    /// Starts the task that fires timers on time, if a tokio runtime is at hand; whether it
    /// runs.
    fn start_driver(&self) -> bool {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return false;
        };
        if self.driver_started.swap(true, AtomicOrdering::AcqRel) {
            return true;
        }
        let wake = self.wake.clone();
        let timers = self.me.clone();
        let running = DriverRunning(self.me.clone());
        handle.spawn(async move {
            let _running = running;
            loop {
                let delay = {
                    let Some(timers) = timers.upgrade() else {
                        return;
                    };
                    if timers.closed.load(AtomicOrdering::Acquire) {
                        return;
                    }
                    timers.fire_due(timers.clock.now());
                    timers
                        .next_due()
                        .map(|due| due.saturating_sub(timers.clock.now()))
                };
                match delay {
                    Some(delay) => {
                        let _ = tokio::time::timeout(delay, wake.notified()).await;
                    }
                    None => wake.notified().await,
                }
            }
        });
        true
    }
}

/// Held by the driver task: when the task ends (its runtime shut down), the timers no longer
/// count as fired, and the next one scheduled inside a runtime starts a new task.
struct DriverRunning(Weak<Timers>);

impl Drop for DriverRunning {
    fn drop(&mut self) {
        if let Some(timers) = self.0.upgrade() {
            timers.driver_started.store(false, AtomicOrdering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{ManualClock, SystemClock};

    fn current_thread() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
    }

    /// The task that fires timers runs only on the engine's own clock inside a runtime, is
    /// noticed when its runtime goes, and is not started again once the engine is gone.
    #[test]
    fn timers_are_fired_by_a_task_only_while_one_can_run() {
        let manual = Timers::new(Arc::new(ManualClock::new()), false);
        assert!(!manual.start(), "the user fires a custom clock's timers");
        let timers = Timers::new(Arc::new(SystemClock::new()), true);
        assert!(!timers.start(), "no runtime at hand");
        let runtime = current_thread();
        {
            let _inside = runtime.enter();
            assert!(timers.start());
        }
        drop(runtime);
        assert!(!timers.start(), "its runtime is gone");
        let runtime = current_thread();
        let _inside = runtime.enter();
        assert!(timers.start(), "a new runtime, a new task");
        timers.close();
        assert!(!timers.start(), "closed");
    }
}
