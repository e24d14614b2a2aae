//! A cluster's best group as a `tower::discover` stream: what tonic's `balance_channel` and
//! tower's `Balance` take to know which endpoints to balance over.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_core::Stream;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::broadcast::Receiver;
use tokio_util::sync::ReusableBoxFuture;
use tower::discover::Change;

use crate::destination::Destination;
use crate::engine::Engine;
use crate::events::HealthEvent;
use crate::ids::eq_ignore_case;

/// The destinations of one cluster's best group — the healthiest class, the most preferred tier
/// with such destinations, exactly what [`Engine::pick_endpoint`] chooses among — as a stream
/// of [`Change`]s keyed by destination id: an `Insert` for each destination that joins the
/// group, a `Remove` for each that leaves it, an `Insert` again for a key whose destination was
/// replaced (a new address under the same id: tower's balancer replaces the service it had).
///
/// The first poll inserts the current group; after that the stream recomputes the group on
/// every change event of the cluster ([`Engine::subscribe`]: health, availability, discovered
/// or reloaded destinations) and yields the difference. A cluster with nothing to pick (no
/// destination available, or the cluster unknown or removed) is an empty group: everything is
/// removed, and a balancer over the stream waits (tower's `Balance` is not ready) until a
/// destination comes back. The stream ends when the engine is dropped.
///
/// It follows the best group rather than the available set so that a tower or tonic balancer
/// sends only to the destinations healthpick itself would pick: when the local tier dies, the
/// stream removes it and inserts the next tier; when it recovers, the reverse. Under
/// `HealthyOrPanic`'s panic, the group is every destination (the balancer keeps trying).
///
/// ```
/// use futures::TryStreamExt;
/// use healthpick::tower::Discovered;
/// use healthpick::Engine;
/// use tower::discover::Change;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let engine = Engine::from_json(r#"{"Clusters": {"payments": {"Destinations": {
///     "eu-1": { "Address": "http://127.0.0.1:8001/" } } } } }"#)?;
/// let mut changes = Discovered::new(&engine, "payments");
/// match changes.try_next().await? {
///     Some(Change::Insert(id, destination)) => {
///         assert_eq!(id, "eu-1");
///         assert_eq!(destination.address().as_str(), "http://127.0.0.1:8001/");
///     }
///     other => panic!("{other:?}"),
/// }
/// # Ok(())
/// # }
/// ```
pub struct Discovered {
    engine: Engine,
    cluster: Arc<str>,
    /// The next event of the engine, with the receiver it came from.
    next: ReusableBoxFuture<'static, (Result<HealthEvent, RecvError>, Receiver<HealthEvent>)>,
    /// What the stream has inserted and not removed, by destination id.
    current: HashMap<Arc<str>, Arc<Destination>>,
    /// Changes computed and not yet yielded.
    pending: VecDeque<Change<String, Arc<Destination>>>,
    /// Whether the group must be compared again before waiting for the next event: at the
    /// start, and after an event of the cluster or a lag.
    stale: bool,
    /// Whether the engine is gone.
    closed: bool,
}

impl std::fmt::Debug for Discovered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Discovered")
            .field("cluster", &self.cluster)
            .field("current", &self.current.keys().collect::<Vec<_>>())
            .field("pending", &self.pending.len())
            .finish()
    }
}

async fn next_event(
    mut receiver: Receiver<HealthEvent>,
) -> (Result<HealthEvent, RecvError>, Receiver<HealthEvent>) {
    let event = receiver.recv().await;
    (event, receiver)
}

impl Discovered {
    /// The best group of `cluster` in `engine`, as a stream of changes. It subscribes to the
    /// engine's change events now, so nothing that changes after this call is missed.
    pub fn new(engine: &Engine, cluster: &str) -> Self {
        let receiver = engine.subscribe();
        Discovered {
            engine: engine.clone(),
            cluster: Arc::from(cluster),
            next: ReusableBoxFuture::new(next_event(receiver)),
            current: HashMap::new(),
            pending: VecDeque::new(),
            stale: true,
            closed: false,
        }
    }

    /// The changes with each destination made into a service by `make` (called once per
    /// inserted destination): the stream tower's `Balance` takes directly.
    pub fn into_services<S, F>(self, make: F) -> DiscoveredServices<F>
    where
        F: FnMut(&Arc<Destination>) -> S,
    {
        DiscoveredServices {
            changes: self,
            make,
        }
    }

    /// Compares the cluster's best group with what was inserted, queueing the difference.
    fn compare(&mut self) {
        let group = match self.engine.best_endpoints(&self.cluster) {
            Ok(best) => best.destinations,
            Err(_) => Vec::new(),
        };
        let mut left: HashMap<Arc<str>, Arc<Destination>> = std::mem::take(&mut self.current);
        for destination in group {
            let id: Arc<str> = Arc::from(destination.id());
            match left.remove(&id) {
                Some(had) if Arc::ptr_eq(&had, &destination) => {}
                _ => self
                    .pending
                    .push_back(Change::Insert(id.to_string(), destination.clone())),
            }
            self.current.insert(id, destination);
        }
        let mut removed: Vec<Arc<str>> = left.into_keys().collect();
        removed.sort();
        self.pending
            .extend(removed.into_iter().map(|id| Change::Remove(id.to_string())));
    }
}

impl Stream for Discovered {
    type Item = Result<Change<String, Arc<Destination>>, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if let Some(change) = this.pending.pop_front() {
                return Poll::Ready(Some(Ok(change)));
            }
            if this.closed {
                return Poll::Ready(None);
            }
            if this.stale {
                this.stale = false;
                this.compare();
                continue;
            }
            let (event, receiver) = std::task::ready!(this.next.poll(cx));
            this.next.set(next_event(receiver));
            match event {
                Ok(event) => this.stale = eq_ignore_case(&event.cluster, &this.cluster),
                // Events were missed: compare, whatever they were.
                Err(RecvError::Lagged(_)) => this.stale = true,
                Err(RecvError::Closed) => {
                    // The engine is gone: nothing can be picked any more.
                    this.closed = true;
                    this.engine_gone();
                }
            }
        }
    }
}

impl Discovered {
    /// Removes everything when the engine's events end.
    fn engine_gone(&mut self) {
        let mut removed: Vec<Arc<str>> = self.current.drain().map(|(id, _)| id).collect();
        removed.sort();
        self.pending
            .extend(removed.into_iter().map(|id| Change::Remove(id.to_string())));
    }
}

/// [`Discovered`] with each destination made into a service: see
/// [`Discovered::into_services`].
pub struct DiscoveredServices<F> {
    changes: Discovered,
    make: F,
}

impl<F> std::fmt::Debug for DiscoveredServices<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscoveredServices")
            .field("changes", &self.changes)
            .finish()
    }
}

impl<S, F> Stream for DiscoveredServices<F>
where
    F: FnMut(&Arc<Destination>) -> S + Unpin,
{
    type Item = Result<Change<String, S>, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let change = std::task::ready!(Pin::new(&mut this.changes).poll_next(cx));
        Poll::Ready(change.map(|change| {
            Ok(match change {
                Ok(Change::Insert(id, destination)) => {
                    Change::Insert(id, (this.make)(&destination))
                }
                Ok(Change::Remove(id)) => Change::Remove(id),
                Err(never) => match never {},
            })
        }))
    }
}
