//! The one timer of a call through the failover step, and the spares a thread keeps of it, so
//! that a call's deadline costs neither an allocation nor tokio's timer lock.

use std::cell::RefCell;
use std::pin::Pin;

use tokio::time::{Instant, Sleep};

/// The one timer of a call: set for the first attempt's deadline, reset for each retry, and
/// handed to the response for reading its body.
///
/// Registering a timer due before the runtime's next planned wake-up makes tokio wake its
/// driver: a write to an eventfd and one more turn of the event loop, two system calls a call
/// would pay whenever the runtime had gone to sleep with no earlier timer (strace on the client
/// bench shows one `write` and one `epoll_wait` per sequential call). And a new timer
/// takes tokio's timer lock twice, to enter the wheel on its first poll and to leave it when
/// dropped, besides its allocation. So a call keeps one timer for all its phases (boxed, to move
/// into the response), and when the call is over the timer is not cancelled but kept, still
/// registered, among this thread's spares (up to [`SPARES`]): a later call on the thread resets
/// one to its own deadline, which is later, and that is one compare-and-swap, with no lock and
/// nothing for tokio to wake. Spares belong to the runtime that made them and are only reused
/// there. A spare still holds the waker of the call that last polled it, until a later call's
/// first poll replaces it or the spare fires at its old deadline (tokio then wakes that task
/// once, a spurious wake a future must take, and lets the waker go): at most [`SPARES`]
/// finished tasks per thread stay allocated for at most one timeout after their last call.
/// Letting go at once, by polling the spare with a no-op waker when it is put back, would cost
/// every call that poll, which shows in the client bench's throughput.
#[derive(Debug)]
pub(crate) struct CallTimer {
    /// `Some` until dropped.
    sleep: Option<Pin<Box<Sleep>>>,
    runtime: tokio::runtime::Id,
}

/// How many spare timers a thread keeps: enough for the calls one thread has in flight at
/// once in a busy service (the client bench keeps 32); past that, a call's timer is cancelled
/// when it ends, as a plain `tokio::time::timeout` would be.
const SPARES: usize = 64;

/// This thread's spare timers, all of one runtime, each still registered for the deadline of
/// the call that last used it.
struct Spares {
    runtime: Option<tokio::runtime::Id>,
    timers: Vec<Pin<Box<Sleep>>>,
}

thread_local! {
    static SPARE: RefCell<Spares> = const {
        RefCell::new(Spares {
            runtime: None,
            timers: Vec::new(),
        })
    };
}

impl CallTimer {
    /// A timer set for `deadline`: one of this thread's spares if they belong to the current
    /// runtime, else a new one.
    pub fn new(deadline: Instant) -> CallTimer {
        let runtime = tokio::runtime::Handle::current().id();
        let spare = SPARE
            .try_with(|spares| {
                let mut spares = spares.try_borrow_mut().ok()?;
                if spares.runtime == Some(runtime) {
                    spares.timers.pop()
                } else {
                    None
                }
            })
            .ok()
            .flatten();
        let sleep = match spare {
            Some(mut sleep) => {
                sleep.as_mut().reset(deadline);
                sleep
            }
            None => Box::pin(tokio::time::sleep_until(deadline)),
        };
        CallTimer {
            sleep: Some(sleep),
            runtime,
        }
    }

    /// The timer, to poll or reset.
    pub fn sleep(&mut self) -> Pin<&mut Sleep> {
        self.sleep
            .as_mut()
            .expect("a call timer holds its timer until dropped")
            .as_mut()
    }
}

impl Drop for CallTimer {
    fn drop(&mut self) {
        let Some(sleep) = self.sleep.take() else {
            return;
        };
        let runtime = self.runtime;
        // Kept as a spare if there is room; otherwise (or while the thread's spares are being
        // dropped) it goes out of scope with the closure, cancelled.
        let _ = SPARE.try_with(move |spares| {
            let Ok(mut spares) = spares.try_borrow_mut() else {
                return;
            };
            if spares.runtime != Some(runtime) {
                // The spares of another runtime are cancelled here.
                spares.timers.clear();
                spares.runtime = Some(runtime);
            }
            if spares.timers.len() < SPARES {
                spares.timers.push(sleep);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::{Context, Poll, Wake, Waker};
    use std::time::Duration;

    use super::*;

    /// How many of this thread's spares there are, and whether they belong to the current
    /// runtime.
    fn spares() -> (usize, bool) {
        let runtime = tokio::runtime::Handle::current().id();
        SPARE.with(|spares| {
            let spares = spares.borrow();
            (spares.timers.len(), spares.runtime == Some(runtime))
        })
    }

    fn clear_spares() {
        SPARE.with(|spares| spares.borrow_mut().timers.clear());
    }

    /// A waker that counts its wakes.
    struct Counting(AtomicUsize);

    impl Wake for Counting {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn poll_with(timer: &mut CallTimer, waker: &Waker) -> Poll<()> {
        timer.sleep().poll(&mut Context::from_waker(waker))
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("runtime")
    }

    #[test]
    fn a_spare_is_reused_and_fires_at_the_new_deadline_earlier_or_later() {
        runtime().block_on(async {
            clear_spares();
            let start = Instant::now();
            let waker = Waker::noop();
            let mut first = CallTimer::new(start + Duration::from_secs(30));
            assert!(poll_with(&mut first, waker).is_pending());
            drop(first);
            assert_eq!(spares(), (1, true));

            // Earlier than the spare's old deadline: tokio must move it in its wheel.
            let mut early = CallTimer::new(start + Duration::from_secs(1));
            assert_eq!(spares(), (0, true), "the spare was taken");
            assert!(poll_with(&mut early, waker).is_pending());
            tokio::time::sleep_until(start + Duration::from_millis(999)).await;
            assert!(poll_with(&mut early, waker).is_pending());
            tokio::time::sleep_until(start + Duration::from_secs(1)).await;
            assert!(poll_with(&mut early, waker).is_ready());
            drop(early);

            // Fired already, then reused for a later deadline: pending again until then.
            let mut late = CallTimer::new(start + Duration::from_secs(20));
            assert_eq!(spares(), (0, true));
            assert!(poll_with(&mut late, waker).is_pending());
            tokio::time::sleep_until(start + Duration::from_secs(19)).await;
            assert!(poll_with(&mut late, waker).is_pending());
            tokio::time::sleep_until(start + Duration::from_secs(20)).await;
            assert!(poll_with(&mut late, waker).is_ready());
        });
    }

    #[test]
    fn a_spare_lets_go_of_its_last_waker_by_its_old_deadline() {
        runtime().block_on(async {
            clear_spares();
            let start = Instant::now();
            let counting = Arc::new(Counting(AtomicUsize::new(0)));
            let waker = Waker::from(counting.clone());
            let mut timer = CallTimer::new(start + Duration::from_secs(1));
            assert!(poll_with(&mut timer, &waker).is_pending());
            drop(timer);
            drop(waker);
            assert_eq!(spares(), (1, true));
            assert_eq!(Arc::strong_count(&counting), 2, "the spare holds the waker");
            tokio::time::sleep(Duration::from_secs(5)).await;
            assert_eq!(
                counting.0.load(Ordering::SeqCst),
                1,
                "woken once, at the old deadline"
            );
            assert_eq!(Arc::strong_count(&counting), 1, "and let go");
        });
    }

    #[test]
    fn a_reused_spare_wakes_its_new_call_and_lets_go_of_the_old_one() {
        runtime().block_on(async {
            clear_spares();
            let start = Instant::now();
            let (old, new) = (
                Arc::new(Counting(AtomicUsize::new(0))),
                Arc::new(Counting(AtomicUsize::new(0))),
            );
            let mut timer = CallTimer::new(start + Duration::from_secs(1));
            assert!(poll_with(&mut timer, &Waker::from(old.clone())).is_pending());
            drop(timer);
            let mut timer = CallTimer::new(start + Duration::from_secs(2));
            assert_eq!(spares(), (0, true), "the spare was taken");
            assert!(poll_with(&mut timer, &Waker::from(new.clone())).is_pending());
            assert_eq!(
                Arc::strong_count(&old),
                1,
                "the new call's waker replaced it"
            );
            tokio::time::sleep(Duration::from_secs(5)).await;
            assert_eq!(old.0.load(Ordering::SeqCst), 0, "the old call is not woken");
            assert_eq!(new.0.load(Ordering::SeqCst), 1, "the new one is, once");
            assert!(poll_with(&mut timer, Waker::noop()).is_ready());
        });
    }

    #[test]
    fn a_thread_keeps_at_most_its_share_of_spares() {
        runtime().block_on(async {
            clear_spares();
            let deadline = Instant::now() + Duration::from_secs(15);
            let timers: Vec<CallTimer> =
                (0..SPARES + 6).map(|_| CallTimer::new(deadline)).collect();
            drop(timers);
            assert_eq!(spares(), (SPARES, true));
            let timers: Vec<CallTimer> = (0..10).map(|_| CallTimer::new(deadline)).collect();
            assert_eq!(spares(), (SPARES - 10, true));
            drop(timers);
            assert_eq!(spares(), (SPARES, true));
        });
    }

    #[test]
    fn spares_serve_only_the_runtime_that_made_them() {
        let deadline = Duration::from_secs(15);
        runtime().block_on(async {
            clear_spares();
            drop(CallTimer::new(Instant::now() + deadline));
            assert_eq!(spares(), (1, true));
        });
        runtime().block_on(async {
            assert_eq!(
                spares(),
                (1, false),
                "another runtime's spare is still here"
            );
            let mut timer = CallTimer::new(Instant::now() + deadline);
            assert_eq!(spares(), (1, false), "and was not taken");
            let start = Instant::now();
            assert!(poll_with(&mut timer, Waker::noop()).is_pending());
            tokio::time::sleep_until(start + deadline).await;
            assert!(poll_with(&mut timer, Waker::noop()).is_ready());
            drop(timer);
            assert_eq!(spares(), (1, true), "the other runtime's spares made way");
        });
    }
}
