//! What a destination carries from one change to the next: its health parts,
//! the policies' own per-destination data, and the bookkeeping the status view shows. Only the
//! engine's health updater writes health, under its cluster's update lock; everyone reads it
//! without locks.

use std::any::Any;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use crate::health::state::{DiscoveryHealth, HealthParts, HealthState, ReportedHealth};

/// Health, policy data and bookkeeping of one destination.
#[derive(Default)]
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
    /// Each policy's own data, one value per type (a policy keeps a type of its own).
    slots: StateSlots,
    /// What the status view shows; written on probes and health changes.
    pub record: Mutex<HealthRecord>,
}

const PROBE_SUCCEEDED: u8 = 1;
const PROBE_FAILED: u8 = 2;

/// Values of any type, one per type, behind a lock of their own: a policy's per-destination
/// (or per-cluster) data.
#[derive(Default)]
pub(crate) struct StateSlots(Mutex<Vec<Box<dyn Any + Send>>>);

impl StateSlots {
    /// Runs `f` on the value of type `T` (created with `T::default()` on first use).
    pub fn with<T: Default + Send + 'static, R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let mut slots = self.0.lock();
        if let Some(value) = slots.iter_mut().find_map(|slot| slot.downcast_mut::<T>()) {
            return f(value);
        }
        let mut value = T::default();
        let result = f(&mut value);
        slots.push(Box::new(value));
        result
    }

    /// Moves every value out (to a new object for the same instance).
    fn take(&self) -> StateSlots {
        StateSlots(Mutex::new(std::mem::take(&mut *self.0.lock())))
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

    /// The state of a new object for the same instance (its id was respelt): health, policy
    /// data and bookkeeping move over; `old` keeps none of its policy data.
    pub fn taking_over(old: &DestinationState) -> DestinationState {
        DestinationState {
            active: AtomicU8::new(old.active.load(Ordering::Acquire)),
            passive: AtomicU8::new(old.passive.load(Ordering::Acquire)),
            reported: AtomicU8::new(old.reported.load(Ordering::Acquire)),
            discovery: AtomicU8::new(old.discovery.load(Ordering::Acquire)),
            last_probe: AtomicU8::new(old.last_probe.load(Ordering::Acquire)),
            probing: AtomicBool::new(false),
            removed: AtomicBool::new(false),
            slots: old.slots.take(),
            record: Mutex::new(old.record.lock().clone()),
        }
    }

    pub fn is_removed(&self) -> bool {
        self.removed.load(Ordering::Acquire)
    }

    pub fn mark_removed(&self) {
        self.removed.store(true, Ordering::Release);
    }

    /// Runs `f` on this destination's value of type `T` (created with `T::default()` on first
    /// use), under a lock of this destination's own.
    pub fn with_slot<T: Default + Send + 'static, R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        self.slots.with(f)
    }
}
