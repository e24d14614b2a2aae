//! Successes a destination may count without its outcome window's lock: the lock-free lane of
//! the outcome path.
//!
//! Most outcomes of a healthy destination change nothing but two counts: a `Success` that falls
//! in the open bucket of the [`OutcomeWindow`](super::outcome_window::OutcomeWindow), while no
//! bucket closes or expires, and whose verdict is the health the destination already has. The
//! passive policy says, after an outcome it judged under the lock, how many such successes in a
//! row keep its verdict and until when the window would count them in the open bucket; the
//! engine grants that here. A success within the grant takes one (a compare-and-swap on a word in
//! the destination's block, which the pick has just touched) and is done; everything else takes
//! the lock as before.
//!
//! The successes taken are added to the open bucket the next time anyone holds the window's lock
//! ([`SuccessCredit::drain`], before the window is read or written), where they would have gone
//! one by one. A grant is withdrawn ([`SuccessCredit::revoke`]) whenever what it was computed
//! from may no longer hold: the destination's passive health changed, its settings changed, it
//! left its cluster.

use std::sync::atomic::{fence, AtomicU64, Ordering};

/// The deadline is kept in units of 2^24 ns (16.8 ms), rounded down, and compared with the time
/// rounded down the same way: `now >> 24 < deadline >> 24` implies `now < deadline`, so the
/// coarse deadline only ever sends a success to the lock a little early, never late. 32 bits of
/// it cover 2.28 years of the engine's clock; after that every outcome takes the lock.
const UNIT_SHIFT: u32 = 24;

const LIMIT_MASK: u64 = 0xFFFF;
const USED_ONE: u64 = 1 << 16;
const USED_MASK: u64 = 0xFFFF << 16;
const DEADLINE_SHIFT: u32 = 32;

/// One word: the deadline (high 32 bits), the successes taken (16 bits), the successes granted
/// (low 16 bits). Zero: nothing granted.
#[derive(Debug, Default)]
pub(crate) struct SuccessCredit(AtomicU64);

impl SuccessCredit {
    /// Whether anything may be granted right now (a cheap look before the clock is read).
    #[inline]
    pub fn is_granted(&self) -> bool {
        let word = self.0.load(Ordering::Relaxed);
        (word & LIMIT_MASK) > (word & USED_MASK) >> 16
    }

    /// Takes one success at `now_nanos` (the engine's clock, as the window counts it): true when
    /// it was within the grant and is counted.
    #[inline]
    pub fn take(&self, now_nanos: u64) -> bool {
        let unit = now_nanos >> UNIT_SHIFT;
        let mut word = self.0.load(Ordering::Relaxed);
        loop {
            let limit = word & LIMIT_MASK;
            let used = (word & USED_MASK) >> 16;
            if used >= limit || unit >= word >> DEADLINE_SHIFT {
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

    /// Grants `limit` successes before `deadline_nanos`. Only under the window's lock, right after
    /// [`drain`](Self::drain) (nothing is taken in between: the word is zero). The caller checks
    /// afterwards that what the grant rests on still holds (and revokes it if not): the fence
    /// orders this store before those reads, as [`revoke`](Self::revoke) orders a change before
    /// its withdrawal, so one of the two always sees the other.
    pub fn grant(&self, limit: u16, deadline_nanos: u64) {
        let deadline = (deadline_nanos >> UNIT_SHIFT).min(u64::from(u32::MAX));
        self.0.store(
            deadline << DEADLINE_SHIFT | u64::from(limit),
            Ordering::SeqCst,
        );
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

    const UNIT: u64 = 1 << UNIT_SHIFT;

    #[test]
    fn successes_are_taken_up_to_the_limit_and_before_the_deadline() {
        let credit = SuccessCredit::default();
        assert!(!credit.is_granted());
        assert!(!credit.take(0), "nothing granted");
        credit.grant(3, 10 * UNIT);
        assert!(credit.is_granted());
        assert!(credit.take(0));
        assert!(credit.take(5 * UNIT));
        assert!(credit.take(10 * UNIT - 1 - UNIT));
        assert!(!credit.take(0), "the limit is used up");
        assert!(!credit.is_granted());
        assert_eq!(credit.drain(), 3);
        assert_eq!(credit.drain(), 0, "drained once");
        assert!(!credit.take(0), "a drained grant is over");
    }

    #[test]
    fn the_deadline_is_never_passed_even_within_its_last_unit() {
        let credit = SuccessCredit::default();
        // A deadline in the middle of a unit: the whole unit counts as past.
        credit.grant(100, 10 * UNIT + UNIT / 2);
        assert!(credit.take(10 * UNIT - 1));
        assert!(
            !credit.take(10 * UNIT),
            "before the deadline, but in its unit"
        );
        assert!(!credit.take(10 * UNIT + UNIT / 2));
        assert!(!credit.take(11 * UNIT));
        assert_eq!(credit.drain(), 1);
    }

    #[test]
    fn a_revoked_grant_keeps_what_was_taken() {
        let credit = SuccessCredit::default();
        credit.grant(u16::MAX, u64::MAX);
        // The deadline saturates: the end of the clock's 32-bit units is past.
        assert!(!credit.take(u64::MAX - 1));
        assert!(credit.take(0));
        assert!(credit.take(UNIT));
        credit.revoke();
        assert!(!credit.take(0));
        assert!(!credit.is_granted());
        assert_eq!(credit.drain(), 2);
    }

    #[test]
    fn concurrent_takes_never_exceed_the_grant() {
        let credit = SuccessCredit::default();
        credit.grant(10_000, u64::MAX);
        let taken: u32 = std::thread::scope(|s| {
            let workers: Vec<_> = (0..4)
                .map(|_| s.spawn(|| (0..5_000).filter(|_| credit.take(1)).count() as u32))
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).sum()
        });
        assert_eq!(taken, 10_000);
        assert_eq!(credit.drain(), 10_000);
    }
}
