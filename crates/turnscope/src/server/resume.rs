//! Resumable response streams: every SSE event the MCP endpoint sends is kept, bounded, in a
//! `ReplayStore`, so a client whose `chat` stream broke can `GET` with `Last-Event-ID` and
//! receive the rest of that stream, final result included.
//!
//! A `chat` whose stream broke before its reply was ready keeps that reply unread in its
//! session (so an empty line still reads it); its result carries which turn it is under
//! [`KEPT_FOR_RESUME`], which the store takes out and keeps, and a resumed stream that
//! receives the result tells the sessions the turn is read now (`Sessions::read_on_resume`).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{ServerJsonRpcMessage, ServerResult};
use rmcp::transport::streamable_http_server::session::{
    EventStore, EventStoreError, EventStream, ServerSseMessage, SessionId,
};
use tokio::sync::watch;

use crate::sessions::Sessions;

/// The `_meta` key a `chat` result kept unread for a resume carries (`{"session", "turn"}`);
/// the replay store takes it out, so no client sees it.
pub(crate) const KEPT_FOR_RESUME: &str = "turnscope/kept-for-resume";

/// How long a finished stream stays resumable (rmcp's own completed-cache TTL).
pub(crate) const COMPLETED_TTL: Duration = Duration::from_secs(60);
/// How long an unfinished stream with no new event stays resumable.
pub(crate) const IDLE_TTL: Duration = Duration::from_secs(30 * 60);
/// Events kept per stream; the oldest progress events go first, the final response is last
/// and so always kept.
pub(crate) const EVENTS_PER_STREAM: usize = 256;
/// Streams kept at once.
pub(crate) const MAX_STREAMS: usize = 4096;
/// Events kept in all streams together (a progress event is a few hundred bytes).
pub(crate) const MAX_EVENTS: usize = 65_536;

struct Log {
    events: VecDeque<(u64, ServerSseMessage)>,
    next: u64,
    /// Set when the stream's final response (or error) was stored.
    done: Option<Instant>,
    touched: Instant,
    /// Bumped on every event; dropped (closing followers) when the log is evicted.
    bell: watch::Sender<u64>,
    /// The session and turn of a final result kept unread for a resume.
    kept: Option<(u64, u64)>,
    /// The MCP session that opened the stream (`owners`), once its first event went out.
    owner: Option<SessionId>,
}

#[derive(Default)]
struct Logs {
    streams: HashMap<String, Log>,
    /// Events in all streams.
    events: usize,
    /// When expired streams were last dropped: the scan over every stream runs at most once
    /// per [`SWEEP_EVERY`], not for each new request stream.
    swept: Option<Instant>,
}

/// How often expired streams are looked for (a stream lives at most this much past its TTL).
const SWEEP_EVERY: Duration = Duration::from_secs(1);

impl Logs {
    /// Drops expired streams; then, while over a cap, finished streams before unfinished
    /// ones, least recently active first, down to 90 % of the cap (so this runs seldom).
    fn evict(&mut self, now: Instant) {
        if self
            .swept
            .is_none_or(|at| now.duration_since(at) >= SWEEP_EVERY)
        {
            self.swept = Some(now);
            let before = self.streams.len();
            self.streams.retain(|_, log| match log.done {
                Some(at) => now.duration_since(at) < COMPLETED_TTL,
                None => now.duration_since(log.touched) < IDLE_TTL,
            });
            if self.streams.len() != before {
                self.events = self.streams.values().map(|l| l.events.len()).sum();
            }
        }
        if self.streams.len() < MAX_STREAMS && self.events < MAX_EVENTS {
            return;
        }
        let mut order: Vec<(bool, Instant, String)> = self
            .streams
            .iter()
            .map(|(k, l)| (l.done.is_none(), l.touched, k.clone()))
            .collect();
        order.sort();
        for (_, _, key) in order {
            if self.streams.len() <= MAX_STREAMS * 9 / 10 && self.events <= MAX_EVENTS * 9 / 10 {
                break;
            }
            if let Some(log) = self.streams.remove(&key) {
                self.events -= log.events.len();
            }
        }
    }
}

/// An in-memory, bounded [`EventStore`].
///
/// rmcp 3.11's `LocalSessionManager` resumes request streams from its own cache, but drops a
/// request's cache the moment the final response is sent; when the client's stream is gone that
/// send goes nowhere, so a resume after a `chat` finished would find nothing (an empty 200).
/// Its cache also holds only `channel_capacity` events. rmcp's extension point is the
/// [`EventStore`] trait (`LocalSessionManager::with_event_store`): events are stored before they
/// are sent, and a `GET` with `Last-Event-ID` is answered from the store. Per stream this keeps
/// a bounded log until its final response has been stored and [`COMPLETED_TTL`] has passed,
/// within caps on streams and events in all ([`MAX_STREAMS`], [`MAX_EVENTS`]); a replay follows
/// the live stream until that final response.
///
/// Event ids are `<stream id>/<index>`; a request stream's id is a random UUID that only its own
/// client has seen, the standalone stream's starts with the (secret) session id.
#[derive(Default)]
pub(crate) struct ReplayStore {
    logs: Arc<Mutex<Logs>>,
    /// Told when a resumed stream receives a result kept unread for it.
    sessions: Option<Sessions>,
}

impl ReplayStore {
    /// An empty store, shared by the session manager and whoever inspects it; a result kept
    /// unread for a resume is read in `sessions` once a resumed stream receives it.
    pub fn new(sessions: Option<Sessions>) -> Arc<Self> {
        Arc::new(Self {
            logs: Arc::default(),
            sessions,
        })
    }

    /// Whether `last_event_id` names a stream this store keeps (a resume can be answered).
    pub fn knows(&self, last_event_id: &str) -> bool {
        parse_id(last_event_id).is_some_and(|(stream, _)| {
            let logs = self.logs.lock().unwrap_or_else(|e| e.into_inner());
            logs.streams.contains_key(stream)
        })
    }

    /// Notes that the stream of `event_id` belongs to MCP session `session` (the first
    /// session to claim it keeps it).
    pub fn claim(&self, event_id: &str, session: &SessionId) {
        let Some((stream, _)) = parse_id(event_id) else {
            return;
        };
        let mut logs = self.logs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(log) = logs.streams.get_mut(stream)
            && log.owner.is_none()
        {
            log.owner = Some(session.clone());
        }
    }

    /// Whether the stream of `last_event_id` is kept and belongs to an MCP session other than
    /// `session` (a resume from `session` must be refused).
    pub fn owned_by_another(&self, last_event_id: &str, session: &str) -> bool {
        let Some((stream, _)) = parse_id(last_event_id) else {
            return false;
        };
        let logs = self.logs.lock().unwrap_or_else(|e| e.into_inner());
        let owner = logs.streams.get(stream).and_then(|log| {
            // The standalone stream's id is its session's.
            match stream.strip_suffix(":common") {
                Some(session) => Some(session),
                None => log.owner.as_deref(),
            }
        });
        owner.is_some_and(|owner| owner != session)
    }

    /// Streams and events currently kept.
    #[cfg(test)]
    fn kept(&self) -> (usize, usize) {
        let logs = self.logs.lock().unwrap_or_else(|e| e.into_inner());
        (logs.streams.len(), logs.events)
    }
}

fn is_final(event: &ServerSseMessage) -> bool {
    matches!(
        event.message.as_deref(),
        Some(ServerJsonRpcMessage::Response(_) | ServerJsonRpcMessage::Error(_))
    )
}

/// Takes [`KEPT_FOR_RESUME`] out of a final `chat` result: the session and turn it names, and
/// the result without it (`None`: the event carries no such mark).
fn take_kept(event: &ServerSseMessage) -> Option<((u64, u64), ServerSseMessage)> {
    let Some(ServerJsonRpcMessage::Response(response)) = event.message.as_deref() else {
        return None;
    };
    let ServerResult::CallToolResult(result) = &response.result else {
        return None;
    };
    let mark = result.meta.as_ref()?.get(KEPT_FOR_RESUME)?;
    let number = |key: &str| mark.get(key).and_then(serde_json::Value::as_u64);
    let kept = (number("session")?, number("turn")?);
    let mut result = result.clone();
    if let Some(meta) = result.meta.as_mut() {
        meta.remove(KEPT_FOR_RESUME);
    }
    let mut response = response.clone();
    response.result = ServerResult::CallToolResult(result);
    let mut event = event.clone();
    event.message = Some(Arc::new(ServerJsonRpcMessage::Response(response)));
    Some((kept, event))
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
        if !logs.streams.contains_key(stream_id) {
            logs.evict(now);
            logs.streams.insert(
                stream_id.to_string(),
                Log {
                    events: VecDeque::new(),
                    next: 0,
                    done: None,
                    touched: now,
                    bell: watch::Sender::new(0),
                    kept: None,
                    owner: None,
                },
            );
        }
        let Logs {
            streams, events, ..
        } = &mut *logs;
        // The key is owned only when a stream starts: later events of it allocate no key.
        let Some(log) = streams.get_mut(stream_id) else {
            unreachable!("the stream was inserted above under the same lock")
        };
        let index = log.next;
        log.next += 1;
        log.touched = now;
        let id = format!("{stream_id}/{index}");
        let mut kept = match take_kept(event) {
            Some((turn, without)) => {
                log.kept = Some(turn);
                without
            }
            None => event.clone(),
        };
        kept.event_id = Some(id.clone());
        if is_final(&kept) {
            log.done = Some(now);
        }
        if log.events.len() >= EVENTS_PER_STREAM {
            log.events.pop_front();
            *events -= 1;
        }
        log.events.push_back((index, kept));
        *events += 1;
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
            match guard.streams.get(stream) {
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
            sessions: self.sessions.clone(),
            kept: None,
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
    logs: Arc<Mutex<Logs>>,
    /// Told when this follower hands on a result kept unread for a resume.
    sessions: Option<Sessions>,
    /// The session and turn of such a result, once its log holds it.
    kept: Option<(u64, u64)>,
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
        let log = logs.streams.get(&self.stream)?;
        for (index, event) in &log.events {
            if *index >= self.cursor {
                self.pending.push_back(event.clone());
            }
        }
        self.cursor = log.next;
        self.kept = log.kept;
        Some(log.done.is_some())
    }

    async fn next(mut self) -> Option<(ServerSseMessage, Self)> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                if is_final(&event) {
                    self.finished = true;
                    if let (Some(sessions), Some((session, turn))) = (&self.sessions, self.kept) {
                        sessions.read_on_resume(session, turn);
                    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use rmcp::model::{JsonRpcResponse, RequestId, ServerResult};

    fn progress() -> ServerSseMessage {
        ServerSseMessage::retry(Duration::from_secs(1))
    }

    fn result() -> ServerSseMessage {
        ServerSseMessage::from_message(ServerJsonRpcMessage::Response(JsonRpcResponse {
            jsonrpc: Default::default(),
            id: RequestId::Number(1),
            result: ServerResult::empty(()),
        }))
    }

    #[tokio::test]
    async fn a_replay_gives_what_followed_and_follows_live_to_the_result() {
        let store = ReplayStore::new(None);
        let first = store.store_event("s", &progress()).await.unwrap();
        store.store_event("s", &progress()).await.unwrap();
        let mut replay = store.replay_events_after(&first).await.unwrap();
        assert_eq!(
            replay.next().await.unwrap().event_id.as_deref(),
            Some("s/1")
        );
        let live = tokio::spawn(async move {
            let rest: Vec<_> = replay.collect().await;
            rest.into_iter()
                .map(|e| e.event_id.unwrap())
                .collect::<Vec<_>>()
        });
        store.store_event("s", &progress()).await.unwrap();
        store.store_event("s", &result()).await.unwrap();
        assert_eq!(live.await.unwrap(), ["s/2", "s/3"]);
        // After the result, a replay from it is empty and ends.
        let done = store.replay_events_after("s/3").await.unwrap();
        assert_eq!(done.count().await, 0);
        assert!(store.replay_events_after("other/0").await.is_err());
        assert!(store.replay_events_after("no id").await.is_err());
    }

    #[tokio::test]
    async fn a_stream_belongs_to_the_session_that_claimed_it_first() {
        let store = ReplayStore::new(None);
        let first = store.store_event("s", &progress()).await.unwrap();
        assert!(
            !store.owned_by_another(&first, "a"),
            "unclaimed: not refused"
        );
        store.claim(&first, &SessionId::from("a"));
        store.claim(&first, &SessionId::from("b"));
        assert!(!store.owned_by_another(&first, "a"));
        assert!(store.owned_by_another(&first, "b"));
        let common = store.store_event("a:common", &progress()).await.unwrap();
        assert!(store.owned_by_another(&common, "b"));
        assert!(!store.owned_by_another(&common, "a"));
        assert!(
            !store.owned_by_another("gone/3", "b"),
            "not kept: rmcp answers"
        );
    }

    #[tokio::test]
    async fn a_stream_keeps_its_last_events_and_always_its_result() {
        let store = ReplayStore::new(None);
        for _ in 0..EVENTS_PER_STREAM + 10 {
            store.store_event("s", &progress()).await.unwrap();
        }
        store.store_event("s", &result()).await.unwrap();
        assert_eq!(store.kept(), (1, EVENTS_PER_STREAM));
        let replay: Vec<_> = store
            .replay_events_after("s/0")
            .await
            .unwrap()
            .collect()
            .await;
        assert_eq!(replay.len(), EVENTS_PER_STREAM);
        assert!(is_final(replay.last().unwrap()));
    }

    #[tokio::test]
    async fn past_the_stream_cap_finished_streams_go_first() {
        let store = ReplayStore::new(None);
        store.store_event("live", &progress()).await.unwrap();
        for n in 0..MAX_STREAMS {
            store
                .store_event(&format!("done{n}"), &result())
                .await
                .unwrap();
        }
        let (streams, events) = store.kept();
        assert!(streams <= MAX_STREAMS, "{streams}");
        assert_eq!(events, streams);
        assert!(
            store.replay_events_after("live/0").await.is_ok(),
            "the unfinished stream stays"
        );
        assert!(
            store.replay_events_after("done0/0").await.is_err(),
            "the oldest finished went"
        );
    }
}
