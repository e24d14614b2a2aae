//! Successes a destination may count without its outcome window's lock: the lock-free lane of
//! the outcome path.
//!
//! Most outcomes of a healthy destination change nothing but two counts: a `Success` that falls
//! in the open bucket of the [`OutcomeWindow`](super::outcome_window::OutcomeWindow), while no
//! bucket closes or expires, and whose verdict is the health the destination already has. The
//! passive policy says, after an outcome it judged under the lock, how many such successes in a
//! row keep its verdict and until when the window would count them in the open bucket; the
//! engine grants that many here and sets one of its timers to end the grant a little before that
//! time. A success within the grant takes one (a compare-and-swap on a word in the destination's
//! block, which the pick has just touched) and is done: no lock, and no clock read, which on
//! many virtual machines costs more than the rest of the report. Everything else takes the lock
//! as before.
//!
//! The successes taken are added to the open bucket the next time anyone holds the window's lock
//! ([`SuccessCredit::drain`], before the window is read or written), where they would have gone
//! one by one; the timer that ends a grant is such a holder. A grant is withdrawn
//! ([`SuccessCredit::revoke`]) whenever what it was computed from may no longer hold: the
//! destination's passive health changed, its settings changed, it left its cluster.

use std::sync::atomic::{fence, AtomicU64, Ordering};

const LIMIT_MASK: u64 = 0xFFFF;
const USED_ONE: u64 = 1 << 16;
const USED_MASK: u64 = 0xFFFF << 16;

/// One word: the successes taken (bits 16-31), the successes granted (low 16 bits). Zero:
/// nothing granted.
#[derive(Debug, Default)]
pub(crate) struct SuccessCredit(AtomicU64);

impl SuccessCredit {
    /// Whether anything may be taken right now.
    #[cfg(test)]
    pub fn is_granted(&self) -> bool {
        let word = self.0.load(Ordering::Relaxed);
        (word & LIMIT_MASK) > (word & USED_MASK) >> 16
    }

    /// Takes one success: true when it was within the grant and is counted.
    #[inline]
    pub fn take(&self) -> bool {
        let mut word = self.0.load(Ordering::Relaxed);
        loop {
            if (word & LIMIT_MASK) <= (word & USED_MASK) >> 16 {
                return false;
            }
            match self.0.compare_exchange_weak(
                word,
                word + USED_ONE,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => word = now,
            }
        }
    }

    /// Grants `limit` successes. Only under the window's lock, right after
    /// [`drain`](Self::drain) (nothing is taken in between: the word is zero), with a timer set
    /// to drain it again before the open bucket closes. The caller checks afterwards that what
    /// the grant rests on still holds (and revokes it if not): the fence orders this store
    /// before those reads, as [`revoke`](Self::revoke) orders a change before its withdrawal,
    /// so one of the two always sees the other.
    pub fn grant(&self, limit: u16) {
        self.0.store(u64::from(limit), Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }

    /// Withdraws what is left of the grant, from any thread, without the lock: what was taken
    /// stays to be drained.
    pub fn revoke(&self) {
        fence(Ordering::SeqCst);
        self.0.fetch_and(!LIMIT_MASK, Ordering::SeqCst);
    }

    /// Ends the grant and returns the successes taken under it, for the window. Only under the
    /// window's lock.
    #[inline]
    pub fn drain(&self) -> u32 {
        if self.0.load(Ordering::Relaxed) == 0 {
            return 0;
        }
        ((self.0.swap(0, Ordering::AcqRel) & USED_MASK) >> 16) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn successes_are_taken_up_to_the_limit() {
        let credit = SuccessCredit::default();
        assert!(!credit.is_granted());
        assert!(!credit.take(), "nothing granted");
        credit.grant(3);
        assert!(credit.is_granted());
        assert!(credit.take());
        assert!(credit.take());
        assert!(credit.take());
        assert!(!credit.take(), "the limit is used up");
        assert!(!credit.is_granted());
        assert_eq!(credit.drain(), 3);
        assert_eq!(credit.drain(), 0, "drained once");
        assert!(!credit.take(), "a drained grant is over");
    }

    #[test]
    fn a_revoked_grant_keeps_what_was_taken() {
        let credit = SuccessCredit::default();
        credit.grant(u16::MAX);
        assert!(credit.take());
        assert!(credit.take());
        credit.revoke();
        assert!(!credit.take());
        assert!(!credit.is_granted());
        assert_eq!(credit.drain(), 2);
    }

    #[test]
    fn concurrent_takes_never_exceed_the_grant() {
        let credit = SuccessCredit::default();
        credit.grant(10_000);
        let taken: u32 = std::thread::scope(|s| {
            let workers: Vec<_> = (0..4)
                .map(|_| s.spawn(|| (0..5_000).filter(|_| credit.take()).count() as u32))
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).sum()
        });
        assert_eq!(taken, 10_000);
        assert_eq!(credit.drain(), 10_000);
    }
}
