//! Resumable response streams: every SSE event the MCP endpoint sends is kept (bounded) so a
//! client whose `chat` stream broke can `GET` with `Last-Event-ID` and receive the rest of
//! that stream, final result included.
//!
//! rmcp 3.11's `LocalSessionManager` already resumes request streams from its own cache, but
//! it drops a request's cache the moment the final response is sent — and when the client's
//! stream is gone, that send goes nowhere, so a resume after a `chat` finished finds nothing
//! and rmcp answers an empty 200 (the lost reply of issue 12 B). Its cache also holds only
//! `channel_capacity` events. rmcp's extension point for this is the [`EventStore`] trait
//! (`LocalSessionManager::with_event_store`): events are stored before they are sent, and a
//! `GET` with `Last-Event-ID` is answered from the store. rmcp ships no in-memory store, so
//! this is ours: per stream a bounded log, kept until its final response has been stored and
//! [`COMPLETED_TTL`] has passed; a replay follows the live stream until that final response.
//!
//! Event ids are `<stream id>/<index>`; a request stream's id is a random UUID that only its
//! own client has seen, the standalone stream's starts with the (secret) session id.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::ServerJsonRpcMessage;
use rmcp::transport::streamable_http_server::session::{
    EventStore, EventStoreError, EventStream, ServerSseMessage,
};
use tokio::sync::watch;

/// How long a finished stream stays resumable (rmcp's own completed-cache TTL).
pub const COMPLETED_TTL: Duration = Duration::from_secs(60);
/// How long an unfinished stream with no new event stays resumable.
pub const IDLE_TTL: Duration = Duration::from_secs(30 * 60);
/// Events kept per stream; the oldest progress events go first, the final response is last
/// and so always kept.
pub const EVENTS_PER_STREAM: usize = 256;
/// Streams kept at once; beyond it the least recently active go first.
pub const MAX_STREAMS: usize = 4096;

struct Log {
    events: VecDeque<(u64, ServerSseMessage)>,
    next: u64,
    /// Set when the stream's final response (or error) was stored.
    done: Option<Instant>,
    touched: Instant,
    /// Bumped on every event; dropped (closing followers) when the log is evicted.
    bell: watch::Sender<u64>,
}

/// An in-memory, bounded [`EventStore`].
#[derive(Default)]
pub struct ReplayStore {
    logs: Arc<Mutex<HashMap<String, Log>>>,
}

impl ReplayStore {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Streams currently kept (for tests and health figures).
    pub fn streams(&self) -> usize {
        self.logs.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    fn evict(logs: &mut HashMap<String, Log>, now: Instant) {
        logs.retain(|_, log| match log.done {
            Some(at) => now.duration_since(at) < COMPLETED_TTL,
            None => now.duration_since(log.touched) < IDLE_TTL,
        });
        if logs.len() > MAX_STREAMS {
            let mut by_age: Vec<(Instant, String)> =
                logs.iter().map(|(k, l)| (l.touched, k.clone())).collect();
            by_age.sort();
            for (_, key) in by_age.into_iter().take(logs.len() - MAX_STREAMS) {
                logs.remove(&key);
            }
        }
    }
}

fn is_final(event: &ServerSseMessage) -> bool {
    matches!(
        event.message.as_deref(),
        Some(ServerJsonRpcMessage::Response(_) | ServerJsonRpcMessage::Error(_))
    )
}

fn parse_id(id: &str) -> Option<(&str, u64)> {
    let (stream, index) = id.rsplit_once('/')?;
    Some((stream, index.parse().ok()?))
}

#[derive(Debug)]
struct UnknownEvent(String);

impl std::fmt::Display for UnknownEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Last-Event-ID {:?} names no stream this server keeps (finished streams are kept {} s); \
             send the request again",
            self.0,
            COMPLETED_TTL.as_secs()
        )
    }
}

impl std::error::Error for UnknownEvent {}

#[async_trait::async_trait]
impl EventStore for ReplayStore {
    async fn store_event(
        &self,
        stream_id: &str,
        event: &ServerSseMessage,
    ) -> Result<String, EventStoreError> {
        let now = Instant::now();
        let mut logs = self.logs.lock().unwrap_or_else(|e| e.into_inner());
        if !logs.contains_key(stream_id) {
            Self::evict(&mut logs, now);
        }
        let log = logs.entry(stream_id.to_string()).or_insert_with(|| Log {
            events: VecDeque::new(),
            next: 0,
            done: None,
            touched: now,
            bell: watch::Sender::new(0),
        });
        let index = log.next;
        log.next += 1;
        log.touched = now;
        let id = format!("{stream_id}/{index}");
        let mut kept = event.clone();
        kept.event_id = Some(id.clone());
        if is_final(&kept) {
            log.done = Some(now);
        }
        if log.events.len() >= EVENTS_PER_STREAM {
            log.events.pop_front();
        }
        log.events.push_back((index, kept));
        log.bell.send_replace(log.next);
        Ok(id)
    }

    async fn replay_events_after(
        &self,
        last_event_id: &str,
    ) -> Result<EventStream, EventStoreError> {
        let Some((stream, after)) = parse_id(last_event_id) else {
            return Err(Box::new(UnknownEvent(last_event_id.to_string())));
        };
        let logs = self.logs.clone();
        let bell = {
            let guard = logs.lock().unwrap_or_else(|e| e.into_inner());
            match guard.get(stream) {
                Some(log) => log.bell.subscribe(),
                None => return Err(Box::new(UnknownEvent(last_event_id.to_string()))),
            }
        };
        // The standalone (GET) stream has no final message: replay what was missed and end,
        // and the client polls again after `retry`. A request stream is followed live until
        // its final response.
        let follow = !stream.ends_with(":common");
        let state = Follow {
            logs,
            stream: stream.to_string(),
            cursor: after + 1,
            bell,
            follow,
            pending: VecDeque::new(),
            finished: false,
        };
        Ok(Box::pin(futures::stream::unfold(state, Follow::next)))
    }
}

/// A follower's position in one stream.
struct Follow {
    logs: Arc<Mutex<HashMap<String, Log>>>,
    stream: String,
    cursor: u64,
    bell: watch::Receiver<u64>,
    follow: bool,
    pending: VecDeque<ServerSseMessage>,
    finished: bool,
}

impl Follow {
    /// Reads what the log holds from the cursor on; `None` when the log was evicted.
    fn fill(&mut self) -> Option<bool> {
        let logs = self.logs.lock().unwrap_or_else(|e| e.into_inner());
        let log = logs.get(&self.stream)?;
        for (index, event) in &log.events {
            if *index >= self.cursor {
                self.pending.push_back(event.clone());
            }
        }
        self.cursor = log.next;
        Some(log.done.is_some())
    }

    async fn next(mut self) -> Option<(ServerSseMessage, Self)> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                if is_final(&event) {
                    self.finished = true;
                }
                return Some((event, self));
            }
            if self.finished {
                return None;
            }
            self.bell.borrow_and_update();
            let done = self.fill()?;
            if !self.pending.is_empty() {
                continue;
            }
            if done || !self.follow {
                return None;
            }
            // Wait for the next event; a closed bell means the log was evicted.
            self.bell.changed().await.ok()?;
        }
    }
}
