//! The event bus: a bounded, lossy broadcast of [`Event`]s.
//!
//! Publishing never blocks and costs one atomic load when nobody listens: producers call
//! `Bus::is_listened` before they build an event. A listener that falls behind loses the
//! oldest events and learns how many it missed from [`Subscription::recv`].
//!
//! A model request names the tool set it offered by id, and the set itself goes out once as
//! `Event::ToolSet`. The bus keeps the sets it published, so a listener that subscribed later,
//! or missed that event while lagging, is handed the set just before the first request of its
//! own that names it: every listener can put every request it sees together whole.
//!
//! A frame's crossings travel as one [`Event::Journey`] (see `pipeline::journey`); a
//! subscription hands them out one by one as [`Event::Frame`]s, so listeners see crossings as
//! ever, unless it takes them whole ([`Bus::subscribe_whole`]).

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;

use super::event::Event;
use super::wire::{ToolSetEvent, WireLimit};

/// Tool sets kept for late listeners, newest last; beyond it the oldest is forgotten (a
/// listener that never saw it then meets a request whose tools it cannot name, and says so).
const TOOL_SETS_KEPT: usize = 64;

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
    tool_sets: Mutex<VecDeque<Arc<Event>>>,
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
                tool_sets: Mutex::new(VecDeque::new()),
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

    /// Publishes a tool set the first time its id is seen, and keeps it for listeners that
    /// come later (see the module's doc); a set seen before is neither published nor built.
    pub(crate) fn publish_tool_set(&self, id: &str, build: impl FnOnce() -> ToolSetEvent) {
        let event = {
            let mut kept = self
                .inner
                .tool_sets
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if kept.iter().any(|e| tool_set_id(e) == Some(id)) {
                return;
            }
            if kept.len() >= TOOL_SETS_KEPT {
                kept.pop_front();
            }
            let event = Arc::new(Event::ToolSet(build()));
            kept.push_back(event.clone());
            event
        };
        if self.is_listened() {
            self.inner.published.fetch_add(1, Ordering::Relaxed);
            let _ = self.inner.sender.send(event);
        }
    }

    /// The tool set `id` as published, while kept.
    pub fn tool_set(&self, id: &str) -> Option<Arc<Event>> {
        self.inner
            .tool_sets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .find(|e| tool_set_id(e) == Some(id))
            .cloned()
    }

    /// How many events were published since start (only those someone listened for).
    pub fn published(&self) -> u64 {
        self.inner.published.load(Ordering::Relaxed)
    }

    /// Starts listening. Events published before this call are not seen (but the tool sets
    /// the requests it sees name, which come just before them).
    pub fn subscribe(&self) -> Subscription {
        self.inner.listeners.fetch_add(1, Ordering::Relaxed);
        Subscription {
            receiver: self.inner.sender.subscribe(),
            bus: self.inner.clone(),
            missed: 0,
            sets_seen: HashSet::new(),
            held: None,
            whole: false,
            unfolding: None,
        }
    }

    /// Like [`Bus::subscribe`], but a frame's crossings come as the one
    /// [`Event::Journey`] they were published in: for a listener that writes them out (one
    /// line per crossing) and would only take them apart again.
    pub fn subscribe_whole(&self) -> Subscription {
        let mut sub = self.subscribe();
        sub.whole = true;
        sub
    }
}

/// The id of a `ToolSet` event.
fn tool_set_id(event: &Event) -> Option<&str> {
    match event {
        Event::ToolSet(set) => Some(&set.id),
        _ => None,
    }
}

/// Most tool-set ids a subscription remembers handing out; beyond, it starts again (a set is
/// then handed out once more, which costs one event).
const SETS_SEEN_KEPT: usize = 1024;

/// One listener on the bus. Dropping it stops the listening.
pub struct Subscription {
    receiver: broadcast::Receiver<Arc<Event>>,
    bus: Arc<BusInner>,
    missed: u64,
    /// The tool sets this listener has been given.
    sets_seen: HashSet<String>,
    /// A model request held back while the tool set it names goes first.
    held: Option<Arc<Event>>,
    /// Whether journeys are handed out whole ([`Bus::subscribe_whole`]).
    whole: bool,
    /// A journey being handed out crossing by crossing, and its next crossing's index.
    unfolding: Option<(Arc<Event>, usize)>,
}

impl Subscription {
    /// The next event, or `None` when the bus is gone. Events this listener was too slow
    /// for are skipped and counted in [`Subscription::missed`].
    ///
    /// # Cancel safety
    /// Cancel safe: an event is either returned or left for the next call.
    pub async fn recv(&mut self) -> Option<Arc<Event>> {
        if let Some(crossing) = self.next_crossing() {
            return Some(crossing);
        }
        if let Some(held) = self.held.take() {
            return Some(held);
        }
        loop {
            match self.receiver.recv().await {
                Ok(event) => {
                    let event = self.pass(event);
                    if let Some(event) = self.unfold(event) {
                        return Some(event);
                    }
                }
                Err(broadcast::error::RecvError::Lagged(n)) => self.missed += n,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }

    /// The next event if one is ready, without waiting.
    pub fn try_recv(&mut self) -> Option<Arc<Event>> {
        if let Some(crossing) = self.next_crossing() {
            return Some(crossing);
        }
        if let Some(held) = self.held.take() {
            return Some(held);
        }
        loop {
            match self.receiver.try_recv() {
                Ok(event) => {
                    let event = self.pass(event);
                    if let Some(event) = self.unfold(event) {
                        return Some(event);
                    }
                }
                Err(broadcast::error::TryRecvError::Lagged(n)) => self.missed += n,
                Err(_) => return None,
            }
        }
    }

    /// `event`, or a journey's first crossing (the rest kept for the next calls) unless this
    /// listener takes journeys whole; `None` for a journey without crossings (none is
    /// published; it would be skipped).
    fn unfold(&mut self, event: Arc<Event>) -> Option<Arc<Event>> {
        if self.whole || !matches!(&*event, Event::Journey(_)) {
            return Some(event);
        }
        self.unfolding = Some((event, 0));
        self.next_crossing()
    }

    /// The next crossing of the journey being unfolded, if any.
    fn next_crossing(&mut self) -> Option<Arc<Event>> {
        let (event, next) = self.unfolding.as_mut()?;
        let Event::Journey(journey) = &**event else {
            self.unfolding = None;
            return None;
        };
        let crossing = journey.crossing(*next);
        *next += 1;
        if crossing.is_none() || *next >= journey.hops.len() {
            self.unfolding = None;
        }
        crossing.map(|c| Arc::new(Event::Frame(c)))
    }

    /// `event`, or first the tool set it names when this listener was never given that set
    /// (the event is then held for the next call).
    fn pass(&mut self, event: Arc<Event>) -> Arc<Event> {
        let named = match &*event {
            Event::ToolSet(set) => {
                self.saw_set(&set.id);
                return event;
            }
            Event::ModelRequest {
                request: Some(request),
                ..
            } => request.tools.as_deref(),
            _ => None,
        };
        let Some(id) = named.filter(|id| !self.sets_seen.contains(*id)) else {
            return event;
        };
        let id = id.to_string();
        let kept = self
            .bus
            .tool_sets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .find(|e| tool_set_id(e) == Some(&id))
            .cloned();
        self.saw_set(&id);
        match kept {
            Some(set) => {
                self.held = Some(event);
                set
            }
            None => event,
        }
    }

    fn saw_set(&mut self, id: &str) {
        if self.sets_seen.len() >= SETS_SEEN_KEPT {
            self.sets_seen.clear();
        }
        self.sets_seen.insert(id.to_string());
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

    fn tool_set(id: &str) -> ToolSetEvent {
        ToolSetEvent {
            id: id.into(),
            tools: vec![serde_json::json!({"type": "function", "function": {"name": id}})],
            at_us: 0,
        }
    }

    fn request_naming(set: &str) -> Event {
        Event::ModelRequest {
            session: 1,
            turn: 1,
            first_piece_us: None,
            total_us: 1,
            error: None,
            at_us: 0,
            response: Default::default(),
            request: Some(Box::new(crate::observe::wire::WireRequest {
                tools: Some(set.into()),
                ..Default::default()
            })),
            answer: None,
        }
    }

    fn kinds(sub: &mut Subscription) -> Vec<String> {
        let mut out = Vec::new();
        while let Some(e) = sub.try_recv() {
            out.push(match &*e {
                Event::ToolSet(s) => format!("set {}", s.id),
                Event::ModelRequest { .. } => "request".into(),
                _ => "other".into(),
            });
        }
        out
    }

    /// A listener that subscribes after a tool set went out (or lagged past it) is handed the
    /// set before the first request of its own that names it, once; a listener that saw it
    /// is not handed it again.
    #[tokio::test]
    async fn a_late_or_lagging_listener_is_given_the_tool_set_before_its_request() {
        let bus = Bus::new(16);
        let mut early = bus.subscribe();
        bus.publish_tool_set("t1", || tool_set("t1"));
        bus.publish_tool_set("t1", || panic!("a set seen before is not built again"));
        bus.publish(request_naming("t1"));
        let mut late = bus.subscribe();
        bus.publish(request_naming("t1"));
        bus.publish(request_naming("t1"));
        assert_eq!(
            kinds(&mut early),
            ["set t1", "request", "request", "request"]
        );
        assert_eq!(kinds(&mut late), ["set t1", "request", "request"]);
        // A lagging listener loses the set in the flood, and is given it again.
        let mut lagging = bus.subscribe();
        bus.publish_tool_set("t2", || tool_set("t2"));
        for n in 0..40 {
            bus.publish(log(n));
        }
        bus.publish(request_naming("t2"));
        let got = kinds(&mut lagging);
        assert!(lagging.missed() > 0);
        assert_eq!(got[got.len() - 2..], ["set t2", "request"], "{got:?}");
        assert_eq!(
            bus.tool_set("t1")
                .map(|e| tool_set_id(&e).map(str::to_string)),
            Some(Some("t1".into()))
        );
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
