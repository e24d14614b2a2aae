//! What a destination carries from one change to the next: its health parts,
//! the policies' own per-destination data, and the bookkeeping the status view shows. Only the
//! engine's health updater writes health, under its cluster's update lock; everyone reads it
//! without locks.

use std::any::Any;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use super::outcome_window::OutcomeWindow;
use crate::health::state::{DiscoveryHealth, HealthParts, HealthState, ReportedHealth};

/// A destination's health and what an outcome judged under the window's lock reads and writes:
/// kept in the destination's warm part (see `Destination`), so that an outcome never visits
/// the cold part.
// `repr(C)`: the flags an outcome reads first (`removed`, `passive`) sit right before the
// window's lock, in the same cache line.
#[derive(Default)]
#[repr(C)]
pub(crate) struct DestinationState {
    active: AtomicU8,
    passive: AtomicU8,
    reported: AtomicU8,
    discovery: AtomicU8,
    /// What its most recent probe said: 0 before its first result, then [`PROBE_SUCCEEDED`] or
    /// [`PROBE_FAILED`] (suspect ranking and the first-pick warm-up read it).
    last_probe: AtomicU8,
    /// Set while a probe of it is in flight, so that it is never probed twice at once.
    probing: AtomicBool,
    /// Set once the destination left its cluster: it gets no picks and its outcomes count for
    /// nothing.
    removed: AtomicBool,
    /// Its recent outcomes, for passive policies that judge a failure rate (TransportFailureRate).
    window: Mutex<OutcomeWindow>,
}

/// The policies' own data and the bookkeeping of one destination: read on probes, health
/// changes and status views, so it lives in the destination's cold part.
#[derive(Default)]
pub(crate) struct DestinationRecords {
    /// Each policy's own data, one value per type (a policy keeps a type of its own).
    slots: StateSlots,
    /// What the status view shows; written on probes and health changes.
    pub record: Mutex<HealthRecord>,
}

impl DestinationRecords {
    /// The records of a new object for the same instance (its id was respelt): policy data and
    /// bookkeeping move over; `old` keeps none of its policy data.
    pub fn taking_over(old: &DestinationRecords) -> DestinationRecords {
        DestinationRecords {
            slots: old.slots.take(),
            record: Mutex::new(old.record.lock().clone()),
        }
    }

    /// Runs `f` on this destination's value of type `T` (created with `T::default()` on first
    /// use), under a lock of this destination's own.
    pub fn with_slot<T: Default + Send + 'static, R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        self.slots.with(f)
    }
}

const PROBE_SUCCEEDED: u8 = 1;
const PROBE_FAILED: u8 = 2;

/// Values of any type, one per type, behind a lock of their own: a policy's per-destination
/// (or per-cluster) data.
///
/// The first value sits in the slots themselves (one box away), so the common case of one
/// passive policy finds its data with one type check and no list to walk; further values go
/// to a list that is allocated only when a second policy keeps data. 32 bytes in all.
#[derive(Default)]
pub(crate) struct StateSlots(Mutex<Slots>);

#[derive(Default)]
struct Slots {
    first: Option<Box<dyn Any + Send>>,
    // Boxed so that the slots stay 24 bytes (a thin pointer) while there is no second value.
    #[allow(clippy::box_collection)]
    more: Option<Box<Vec<Box<dyn Any + Send>>>>,
}

impl StateSlots {
    /// Runs `f` on the value of type `T` (created with `T::default()` on first use).
    #[inline]
    pub fn with<T: Default + Send + 'static, R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let mut slots = self.0.lock();
        let slots = &mut *slots;
        if let Some(value) = slots
            .first
            .as_mut()
            .and_then(|slot| slot.downcast_mut::<T>())
        {
            return f(value);
        }
        slots.with_other(f)
    }

    /// Moves every value out (to a new object for the same instance).
    fn take(&self) -> StateSlots {
        StateSlots(Mutex::new(std::mem::take(&mut *self.0.lock())))
    }
}

impl Slots {
    /// The value of type `T` when it is not the first: found in the list, or created (first in
    /// line while that place is free).
    #[cold]
    fn with_other<T: Default + Send + 'static, R>(&mut self, f: impl FnOnce(&mut T) -> R) -> R {
        if let Some(value) = self
            .more
            .iter_mut()
            .flat_map(|more| more.iter_mut())
            .find_map(|slot| slot.downcast_mut::<T>())
        {
            return f(value);
        }
        let mut value = T::default();
        let result = f(&mut value);
        if self.first.is_none() {
            self.first = Some(Box::new(value));
        } else {
            self.more
                .get_or_insert_with(Box::default)
                .push(Box::new(value));
        }
        result
    }
}

/// Bookkeeping for the status view and reactivation.
#[derive(Debug, Default, Clone)]
pub(crate) struct HealthRecord {
    pub last_change: Option<Duration>,
    pub last_reason: Option<String>,
    pub last_probe: Option<Duration>,
    pub last_probe_result: Option<String>,
    pub last_error: Option<String>,
    pub reactivation_due: Option<Duration>,
    /// When the pending timer that ends its success grant is due.
    pub grant_ends: Option<Duration>,
    /// When it last became available while its cluster had others available: slow start
    /// ramps its weight from then.
    pub available_since: Option<Duration>,
    /// When its source last published it.
    pub last_seen: Option<Duration>,
}

impl DestinationState {
    pub fn health(&self) -> HealthParts {
        HealthParts {
            active: self.active(),
            passive: self.passive(),
            reported: self.reported(),
            discovery: self.discovery(),
        }
    }

    pub fn active(&self) -> HealthState {
        HealthState::from_u8(self.active.load(Ordering::Acquire))
    }

    pub fn passive(&self) -> HealthState {
        HealthState::from_u8(self.passive.load(Ordering::Acquire))
    }

    pub fn reported(&self) -> Option<ReportedHealth> {
        ReportedHealth::from_u8(self.reported.load(Ordering::Acquire))
    }

    pub fn discovery(&self) -> DiscoveryHealth {
        DiscoveryHealth::from_u8(self.discovery.load(Ordering::Acquire))
    }

    pub fn set_discovery(&self, h: DiscoveryHealth) {
        self.discovery.store(h.to_u8(), Ordering::Release);
    }

    pub fn set_active(&self, h: HealthState) {
        self.active.store(h.to_u8(), Ordering::Release);
    }

    pub fn set_passive(&self, h: HealthState) {
        self.passive.store(h.to_u8(), Ordering::Release);
    }

    pub fn set_reported(&self, h: Option<ReportedHealth>) {
        self.reported
            .store(ReportedHealth::to_u8(h), Ordering::Release);
    }

    /// Whether its most recent probe succeeded; `None` before its first probe result.
    pub fn last_probe_succeeded(&self) -> Option<bool> {
        match self.last_probe.load(Ordering::Acquire) {
            PROBE_SUCCEEDED => Some(true),
            PROBE_FAILED => Some(false),
            _ => None,
        }
    }

    /// Records what its most recent probe said; returns what the one before said (`None`: this
    /// is its first result).
    pub fn set_last_probe(&self, succeeded: bool) -> Option<bool> {
        let value = if succeeded {
            PROBE_SUCCEEDED
        } else {
            PROBE_FAILED
        };
        match self.last_probe.swap(value, Ordering::AcqRel) {
            PROBE_SUCCEEDED => Some(true),
            PROBE_FAILED => Some(false),
            _ => None,
        }
    }

    /// Marks a probe of it in flight; false when one already is (it is not probed twice at
    /// once).
    pub fn start_probe(&self) -> bool {
        !self.probing.swap(true, Ordering::AcqRel)
    }

    /// Its probe in flight ended.
    pub fn end_probe(&self) {
        self.probing.store(false, Ordering::Release);
    }

    /// The state of a new object for the same instance (its id was respelt): health and the
    /// outcome window move over.
    pub fn taking_over(old: &DestinationState) -> DestinationState {
        DestinationState {
            active: AtomicU8::new(old.active.load(Ordering::Acquire)),
            passive: AtomicU8::new(old.passive.load(Ordering::Acquire)),
            reported: AtomicU8::new(old.reported.load(Ordering::Acquire)),
            discovery: AtomicU8::new(old.discovery.load(Ordering::Acquire)),
            last_probe: AtomicU8::new(old.last_probe.load(Ordering::Acquire)),
            probing: AtomicBool::new(false),
            removed: AtomicBool::new(false),
            window: Mutex::new(std::mem::take(&mut *old.window.lock())),
        }
    }

    pub fn is_removed(&self) -> bool {
        self.removed.load(Ordering::Acquire)
    }

    pub fn mark_removed(&self) {
        self.removed.store(true, Ordering::Release);
    }

    /// Runs `f` on this destination's outcome window, under a lock of its own.
    #[inline]
    pub fn with_outcome_window<R>(&self, f: impl FnOnce(&mut OutcomeWindow) -> R) -> R {
        f(&mut self.window.lock())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default, Debug, PartialEq)]
    struct First(u32);
    #[derive(Default, Debug, PartialEq)]
    struct Second(&'static str);
    #[derive(Default, Debug, PartialEq)]
    struct Third(Vec<u8>);

    /// Each type keeps its own value, whichever was used first and however many there are, and
    /// a respelt destination's new object takes them all over.
    #[test]
    fn every_type_keeps_its_own_value() {
        let slots = StateSlots::default();
        slots.with(|s: &mut Second| s.0 = "second");
        slots.with(|f: &mut First| f.0 += 1);
        slots.with(|t: &mut Third| t.0.push(3));
        slots.with(|f: &mut First| f.0 += 1);
        assert_eq!(slots.with(|f: &mut First| f.0), 2);
        assert_eq!(slots.with(|s: &mut Second| s.0), "second");
        assert_eq!(slots.with(|t: &mut Third| t.0.clone()), [3]);
        let moved = slots.take();
        assert_eq!(moved.with(|f: &mut First| f.0), 2);
        assert_eq!(moved.with(|t: &mut Third| t.0.len()), 1);
        assert_eq!(
            slots.with(|f: &mut First| f.0),
            0,
            "the old object starts over"
        );
    }
}
