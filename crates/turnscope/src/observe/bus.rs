//! The event bus: a bounded, lossy broadcast of [`Event`]s.
//!
//! Publishing never blocks and costs one atomic load when nobody listens: producers call
//! `Bus::is_listened` before they build an event. A listener that falls behind loses the
//! oldest events and learns how many it missed from [`Subscription::recv`].

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;

use super::event::Event;
use super::wire::WireLimit;

/// Most tool-set ids remembered as published; beyond it the set starts again (a tool set is
/// then published once more, which costs one event).
const TOOL_SETS_REMEMBERED: usize = 1024;

/// How many events a listener may fall behind before it starts to miss some.
pub(crate) const DEFAULT_CAPACITY: usize = 8192;

/// A cheap, cloneable handle to the shared event bus.
#[derive(Clone)]
pub struct Bus {
    inner: Arc<BusInner>,
}

struct BusInner {
    sender: broadcast::Sender<Arc<Event>>,
    listeners: AtomicUsize,
    published: AtomicU64,
    wire: WireLimit,
    tool_sets: Mutex<HashSet<String>>,
}

impl Default for Bus {
    fn default() -> Self {
        Self::new(DEFAULT_CAPACITY)
    }
}

impl Bus {
    /// A bus whose listeners may each lag `capacity` events behind.
    pub fn new(capacity: usize) -> Self {
        let (sender, _) = broadcast::channel(capacity.max(16));
        Self {
            inner: Arc::new(BusInner {
                sender,
                listeners: AtomicUsize::new(0),
                published: AtomicU64::new(0),
                wire: WireLimit::default(),
                tool_sets: Mutex::new(HashSet::new()),
            }),
        }
    }

    /// Whether anyone listens; producers skip building events when not.
    #[inline]
    pub(crate) fn is_listened(&self) -> bool {
        self.inner.listeners.load(Ordering::Relaxed) > 0
    }

    /// Publishes an event to every listener; never blocks, never fails.
    pub fn publish(&self, event: Event) {
        if self.is_listened() {
            self.inner.published.fetch_add(1, Ordering::Relaxed);
            let _ = self.inner.sender.send(Arc::new(event));
        }
    }

    /// Publishes an event built lazily, only when someone listens.
    #[inline]
    pub(crate) fn publish_with(&self, build: impl FnOnce() -> Event) {
        if self.is_listened() {
            self.publish(build());
        }
    }

    /// How much of each model or MCP message is recorded in events (`[wire] max_kib`).
    pub fn wire(&self) -> &WireLimit {
        &self.inner.wire
    }

    /// Whether bodies are recorded now: someone listens and the wire limit is not 0.
    #[inline]
    pub(crate) fn records_wire(&self) -> bool {
        self.is_listened() && self.inner.wire.bytes() > 0
    }

    /// True the first time a tool set `id` is seen (so its entries are published once).
    pub(crate) fn first_sight_of_tool_set(&self, id: &str) -> bool {
        let mut seen = self
            .inner
            .tool_sets
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if seen.contains(id) {
            return false;
        }
        if seen.len() >= TOOL_SETS_REMEMBERED {
            seen.clear();
        }
        seen.insert(id.to_string());
        true
    }

    /// How many events were published since start (only those someone listened for).
    pub fn published(&self) -> u64 {
        self.inner.published.load(Ordering::Relaxed)
    }

    /// Starts listening. Events published before this call are not seen.
    pub fn subscribe(&self) -> Subscription {
        self.inner.listeners.fetch_add(1, Ordering::Relaxed);
        Subscription {
            receiver: self.inner.sender.subscribe(),
            bus: self.inner.clone(),
            missed: 0,
        }
    }
}

/// One listener on the bus. Dropping it stops the listening.
pub struct Subscription {
    receiver: broadcast::Receiver<Arc<Event>>,
    bus: Arc<BusInner>,
    missed: u64,
}

impl Subscription {
    /// The next event, or `None` when the bus is gone. Events this listener was too slow
    /// for are skipped and counted in [`Subscription::missed`].
    pub async fn recv(&mut self) -> Option<Arc<Event>> {
        loop {
            match self.receiver.recv().await {
                Ok(event) => return Some(event),
                Err(broadcast::error::RecvError::Lagged(n)) => self.missed += n,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }

    /// The next event if one is ready, without waiting.
    pub fn try_recv(&mut self) -> Option<Arc<Event>> {
        loop {
            match self.receiver.try_recv() {
                Ok(event) => return Some(event),
                Err(broadcast::error::TryRecvError::Lagged(n)) => self.missed += n,
                Err(_) => return None,
            }
        }
    }

    /// How many events this listener missed because it fell behind.
    pub fn missed(&self) -> u64 {
        self.missed
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.bus.listeners.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::event::Event;

    fn log(n: usize) -> Event {
        Event::Log {
            at_ms: 0,
            level: "info".into(),
            message: n.to_string(),
        }
    }

    #[tokio::test]
    async fn unlistened_bus_builds_nothing() {
        let bus = Bus::new(16);
        let mut built = false;
        bus.publish_with(|| {
            built = true;
            log(0)
        });
        assert!(!built);
        assert_eq!(bus.published(), 0);
    }

    #[tokio::test]
    async fn slow_listener_loses_oldest_and_counts_them() {
        let bus = Bus::new(16);
        let mut sub = bus.subscribe();
        for n in 0..40 {
            bus.publish(log(n));
        }
        let first = sub.recv().await.unwrap();
        assert_eq!(sub.missed(), 24);
        match &*first {
            Event::Log { message, .. } => assert_eq!(message, "24"),
            other => panic!("unexpected {other:?}"),
        }
        drop(sub);
        assert!(!bus.is_listened());
    }
}
