//! Where a cluster's health changes go beyond the cluster: subscribers and the observer (change
//! events) and the reactivation timers. Every cluster reaches it without reaching the rest of
//! the engine.

use std::sync::Arc;

use tokio::sync::broadcast;

use super::timers::Timers;
use crate::events::HealthEvent;
use crate::observer::Observer;

pub(crate) struct Hub {
    pub events: broadcast::Sender<HealthEvent>,
    pub observer: Option<Arc<dyn Observer>>,
    pub timers: Arc<Timers>,
}

impl Hub {
    pub fn emit(&self, event: HealthEvent) {
        #[cfg(feature = "metrics")]
        super::metrics::record_event(&event);
        if let Some(observer) = &self.observer {
            observer.event(&event);
        }
        // No subscriber is fine.
        let _ = self.events.send(event);
    }
}
