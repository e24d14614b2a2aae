//! A token budget over a sliding window (Finagle's `RetryBudget`, tower's `TpsBudget`), without
//! a lock: what the client's retry budgets and hedge caps are made of.
//!
//! Deposits add tokens, withdrawals take one; a withdrawal succeeds while the window's balance
//! (its deposits minus its withdrawals, plus a constant reserve) holds a whole token. The window
//! is ten slots; a slot older than the window no longer counts, so an outage spends at most what
//! the last window's requests bought plus the reserve, and a quiet period refills it.
//!
//! Unlike tower's budget it can give tokens back ([`Budget::refund`]): the failover step returns
//! the tokens of retries that cost the destinations nothing (a connection that was never made)
//! once the call is answered, so a dead tier that every call must step over does not drain the
//! budget, while an outage of every destination still does.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// Slots per window.
const SLOTS: usize = 10;
/// One token, in the budget's unit (thousandths of a token).
pub(crate) const TOKEN: i64 = 1000;

/// A windowed token budget; amounts are in thousandths of a token.
pub(crate) struct Budget {
    /// Constant part of the balance: what `min_per_second` allows over one window.
    reserve: i64,
    slot_millis: u64,
    origin: Instant,
    /// Per slot: the generation (slot number since `origin`, 32 bits) in the high half, the
    /// slot's signed amount in the low half. One word, so a slot moves to a new generation and
    /// takes its first amount in one compare-and-swap.
    slots: [AtomicU64; SLOTS],
}

impl std::fmt::Debug for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Budget")
            .field("balance", &self.balance())
            .finish_non_exhaustive()
    }
}

fn pack(generation: u32, amount: i32) -> u64 {
    (u64::from(generation) << 32) | u64::from(amount as u32)
}

fn unpack(word: u64) -> (u32, i32) {
    ((word >> 32) as u32, word as u32 as i32)
}

impl Budget {
    /// A budget whose balance counts what happened over the last `window` (clamped to 1..=60 s,
    /// as Finagle and tower require) plus a reserve of `min_per_second` tokens per second of it.
    pub fn new(window: Duration, min_per_second: u32) -> Self {
        let window = window.clamp(Duration::from_secs(1), Duration::from_secs(60));
        let window_millis = window.as_millis() as u64;
        Budget {
            reserve: i64::from(min_per_second)
                .saturating_mul(window_millis as i64)
                .saturating_mul(TOKEN)
                / 1000,
            slot_millis: (window_millis / SLOTS as u64).max(1),
            origin: Instant::now(),
            slots: Default::default(),
        }
    }

    fn generation(&self) -> u32 {
        self.generation_at(Instant::now())
    }

    /// The slot number of `now` since `origin` (0 for instants before it).
    fn generation_at(&self, now: Instant) -> u32 {
        (now.saturating_duration_since(self.origin).as_millis() as u64 / self.slot_millis) as u32
    }

    /// Adds `amount` (thousandths of a token; negative takes) to the current slot.
    fn add(&self, generation: u32, amount: i64) {
        let slot = &self.slots[generation as usize % SLOTS];
        let mut word = slot.load(Ordering::Relaxed);
        loop {
            let (at, held) = unpack(word);
            let base = if at == generation { i64::from(held) } else { 0 };
            let sum = (base + amount).clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32;
            match slot.compare_exchange_weak(
                word,
                pack(generation, sum),
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(now) => word = now,
            }
        }
    }

    fn balance_at(&self, generation: u32) -> i64 {
        let counted: i64 = self
            .slots
            .iter()
            .map(|slot| unpack(slot.load(Ordering::Acquire)))
            .filter(|(at, _)| generation.wrapping_sub(*at) < SLOTS as u32)
            .map(|(_, amount)| i64::from(amount))
            .sum();
        self.reserve + counted
    }

    /// The balance now, in thousandths of a token.
    pub fn balance(&self) -> i64 {
        self.balance_at(self.generation())
    }

    /// Adds `amount` thousandths of a token (what one request made at `now` buys; the caller
    /// has read the clock already).
    #[inline]
    pub fn deposit_at(&self, now: Instant, amount: i64) {
        if amount > 0 {
            self.add(self.generation_at(now), amount);
        }
    }

    /// Takes one token if the balance holds one; `false` when it does not. Two withdrawals
    /// racing for the last token may both succeed, as with tower's budget: a budget bounds
    /// load, it is not a ledger.
    pub fn withdraw(&self) -> bool {
        let generation = self.generation();
        if self.balance_at(generation) >= TOKEN {
            self.add(generation, -TOKEN);
            true
        } else {
            false
        }
    }

    /// Gives back `tokens` withdrawn earlier.
    pub fn refund(&self, tokens: u32) {
        if tokens > 0 {
            self.add(self.generation(), i64::from(tokens) * TOKEN);
        }
    }
}

/// What one request deposits, in thousandths of a token, for a share of requests that may be
/// retried (or hedged): 0.2 is 200. Out-of-range shares are clamped (0 to 1000, as tower
/// accepts), NaN is 0.
pub(crate) fn share_amount(share: f32) -> i64 {
    if share.is_finite() {
        (f64::from(share.clamp(0.0, 1000.0)) * TOKEN as f64).round() as i64
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::time::Instant;

    use super::{share_amount, Budget, TOKEN};

    /// Deposits buy tokens at their share, the reserve allows `min_per_second` per second of the
    /// window, and a withdrawal never takes the balance below zero.
    #[tokio::test(start_paused = true)]
    async fn deposits_and_the_reserve_buy_withdrawals() {
        let budget = Budget::new(Duration::from_secs(10), 1);
        for _ in 0..10 {
            assert!(budget.withdraw(), "the reserve: 1/s over 10 s");
        }
        assert!(!budget.withdraw());
        for _ in 0..4 {
            budget.deposit_at(Instant::now(), share_amount(0.2));
        }
        assert!(!budget.withdraw(), "four requests at 20% buy 0.8 tokens");
        budget.deposit_at(Instant::now(), share_amount(0.2));
        assert!(budget.withdraw(), "five buy one");
        assert!(!budget.withdraw());
        for _ in 0..10 {
            budget.deposit_at(Instant::now(), share_amount(0.2));
        }
        assert!(budget.withdraw());
        assert!(budget.withdraw());
        assert!(!budget.withdraw());
        assert!(budget.balance() >= 0);
    }

    /// What a window spent comes back once it has passed: an outage is throttled, not ended
    /// for good.
    #[tokio::test(start_paused = true)]
    async fn spending_leaves_the_window() {
        let budget = Budget::new(Duration::from_secs(10), 1);
        while budget.withdraw() {}
        tokio::time::advance(Duration::from_secs(5)).await;
        assert!(!budget.withdraw(), "still inside the window");
        tokio::time::advance(Duration::from_millis(5_100)).await;
        assert_eq!(budget.balance(), 10 * TOKEN, "the window passed");
        // Deposits leave too.
        let budget = Budget::new(Duration::from_secs(1), 0);
        budget.deposit_at(Instant::now(), 5 * TOKEN);
        assert_eq!(budget.balance(), 5 * TOKEN);
        tokio::time::advance(Duration::from_millis(1_100)).await;
        assert_eq!(budget.balance(), 0);
    }

    /// Refunds give tokens back; windows outside 1..=60 s are clamped; odd shares do not panic.
    #[tokio::test(start_paused = true)]
    async fn refunds_and_clamping() {
        let budget = Budget::new(Duration::from_millis(1), 2);
        assert!(
            budget.withdraw() && budget.withdraw(),
            "window clamped to 1 s: 2 tokens"
        );
        assert!(!budget.withdraw());
        budget.refund(1);
        assert!(budget.withdraw());
        assert!(!budget.withdraw());
        assert_eq!(
            Budget::new(Duration::from_secs(3600), 1).balance(),
            60 * TOKEN
        );
        assert_eq!(share_amount(f32::NAN), 0);
        assert_eq!(share_amount(-1.0), 0);
        assert_eq!(share_amount(f32::INFINITY), 0);
        assert_eq!(share_amount(5000.0), 1000 * TOKEN);
        assert_eq!(share_amount(0.05), 50);
        let huge = Budget::new(Duration::from_secs(60), u32::MAX);
        assert!(
            huge.withdraw(),
            "a reserve that large saturates, it does not overflow"
        );
        for _ in 0..10 {
            huge.deposit_at(Instant::now(), i64::MAX / 4);
        }
        assert!(huge.withdraw());
    }

    /// Threads depositing and withdrawing at once lose nothing: every deposit is counted.
    #[test]
    fn concurrent_deposits_are_all_counted() {
        let budget = Budget::new(Duration::from_secs(60), 0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..10_000 {
                        budget.deposit_at(Instant::now(), 1);
                    }
                });
            }
        });
        assert_eq!(budget.balance(), 40_000);
    }
}
