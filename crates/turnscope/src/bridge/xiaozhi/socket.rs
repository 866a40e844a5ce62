//! One open endpoint socket: read frames, answer what the bridge answers itself, hand the rest
//! to the upstream as tasks (bounded), write the replies back. A slow upstream never delays a
//! `ping`; [`serve`] says what is answered here.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_util::sync::CancellationToken;

use super::endpoint::classify_close;
use super::jsonrpc::{self, Incoming, RawId};
use super::listing;
use super::progress::{self, PROGRESS_QUEUE};
use super::state::BridgeState;
use super::upstream::{Upstream, UpstreamChange, UpstreamError};
use crate::config::ToolFilter;
use crate::mcp::backoff::SessionEnd;
use crate::observe::{Event, ToolCallEvent};

/// Replies waiting to be written; a task that finds it full waits (the endpoint is slow).
const OUT_QUEUE: usize = 256;

/// Requests one socket runs at once; one more is answered at once with a `-32603` error
/// saying so (a Xiaozhi endpoint waits for each reply, so only a misbehaving one gets there).
pub const MAX_IN_FLIGHT: usize = 64;

/// The protocol version answered when the endpoint's `initialize` names none.
pub(crate) const DEFAULT_PROTOCOL: &str = "2024-11-05";

/// What the socket loop needs from its bridge.
pub struct Relay {
    /// What requests go to.
    pub upstream: Arc<dyn Upstream>,
    /// Which tools the endpoint may see and call.
    pub filter: ToolFilter,
    /// Counters and logs.
    pub state: Arc<BridgeState>,
    /// Tools per `tools/list` page.
    pub page_size: usize,
    /// Largest frame written; a bigger reply becomes an error reply.
    pub max_frame: usize,
    /// Interval of WebSocket pings; three without any frame back end the socket.
    pub keepalive: Duration,
    warned: Mutex<HashSet<String>>,
}

impl Relay {
    /// A relay with every field given.
    pub fn new(
        upstream: Arc<dyn Upstream>,
        filter: ToolFilter,
        state: Arc<BridgeState>,
        page_size: usize,
        max_frame: usize,
        keepalive: Duration,
    ) -> Self {
        Self {
            upstream,
            filter,
            state,
            page_size,
            max_frame,
            keepalive,
            warned: Mutex::new(HashSet::new()),
        }
    }
}

/// How a socket ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    /// What the reconnect policy should make of it.
    pub end: SessionEnd,
    /// What happened (secrets masked).
    pub message: String,
    /// Whether the bridge is stopping (no reconnect).
    pub stopping: bool,
}

/// Requests in flight by id key, each with the sequence number of the task serving it.
type InFlight = Arc<Mutex<HashMap<String, (u64, CancellationToken)>>>;

/// The canonical text of an id, so `notifications/cancelled` finds it however it is written.
fn id_key(json: &str) -> String {
    serde_json::from_str::<Value>(json)
        .map(|v| v.to_string())
        .unwrap_or_else(|_| json.to_string())
}

struct Loop<'a> {
    relay: &'a Arc<Relay>,
    out: mpsc::Sender<String>,
    tasks: JoinSet<()>,
    in_flight: InFlight,
    next_task: u64,
    initialized: bool,
    /// Whether this connection's first malformed frame was logged (the rest are counted).
    said_malformed: bool,
}

/// Serves one open socket until it closes, fails, or `stop` is cancelled (then it closes
/// with 1000).
///
/// Answered here, never waiting on the upstream: `initialize` (with the upstream's
/// `serverInfo` when known, echoing the requested protocol version), `ping`,
/// `notifications/*`, malformed frames (dropped and counted) and calls to filtered tools
/// (`-32000`). `tools/list`, `tools/call` and every other request run as tasks (at most
/// [`MAX_IN_FLIGHT`]; an id already in flight is refused, never overwritten), so a slow
/// upstream never delays a ping. Replies go through a bounded queue; when the socket ends its
/// tasks are cancelled. Progress reports reach the endpoint only for requests carrying its
/// `_meta.progressToken` (see [`progress`](super::progress)).
pub async fn serve<S>(
    mut ws: WebSocketStream<S>,
    relay: &Arc<Relay>,
    stop: &CancellationToken,
) -> Ended
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
{
    let (out, mut replies) = mpsc::channel::<String>(OUT_QUEUE);
    let mut lp = Loop {
        relay,
        out,
        tasks: JoinSet::new(),
        in_flight: Arc::default(),
        next_task: 0,
        initialized: false,
        said_malformed: false,
    };
    let mut changes = relay.upstream.changes();
    let mut changes_open = true;
    let mut keepalive = tokio::time::interval(relay.keepalive);
    keepalive.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    keepalive.tick().await;
    let mut heard = Instant::now();
    let ended = loop {
        // Frames to write this turn: bounded by one incoming frame's batch (2 MiB at most).
        let mut now: Vec<String> = Vec::new();
        tokio::select! {
            _ = stop.cancelled() => {
                let frame = CloseFrame { code: CloseCode::Normal, reason: "turnscope is shutting down".into() };
                let _ = tokio::time::timeout(Duration::from_secs(1), ws.close(Some(frame))).await;
                break Ended { end: SessionEnd::Clean, message: "bridge stopped".into(), stopping: true };
            }
            incoming = ws.next() => {
                heard = Instant::now();
                match incoming {
                    None => break abnormal("the endpoint dropped the connection"),
                    Some(Err(tungstenite::Error::Capacity(e))) => {
                        relay.state.malformed();
                        let frame = CloseFrame { code: CloseCode::Size, reason: "frame too large".into() };
                        let _ = tokio::time::timeout(Duration::from_secs(1), ws.close(Some(frame))).await;
                        break abnormal(&format!("the endpoint sent an oversize frame ({e}); closed with 1009"));
                    }
                    Some(Err(tungstenite::Error::ConnectionClosed)) => {
                        break Ended { end: SessionEnd::Clean, message: "the endpoint closed the socket".into(), stopping: false };
                    }
                    Some(Err(e)) => break abnormal(&format!("socket error: {e}")),
                    Some(Ok(Message::Text(text))) => {
                        relay.state.frame_in();
                        lp.frame(text.as_str(), &mut now);
                    }
                    Some(Ok(Message::Binary(bytes))) => {
                        relay.state.frame_in();
                        match std::str::from_utf8(&bytes) {
                            Ok(text) => lp.frame(text, &mut now),
                            Err(_) => lp.malformed("a binary frame that is not UTF-8"),
                        }
                    }
                    Some(Ok(Message::Close(frame))) => {
                        let (end, message) = classify_close(frame.as_ref());
                        // Finish the close handshake so the endpoint sees a clean close.
                        let _ = tokio::time::timeout(Duration::from_secs(1), ws.close(None)).await;
                        break Ended { end, message, stopping: false };
                    }
                    Some(Ok(_)) => {}
                }
            }
            Some(reply) = replies.recv() => now.push(reply),
            change = changes.recv(), if changes_open => match change {
                Ok(UpstreamChange::ToolsChanged) if lp.initialized => {
                    now.push(jsonrpc::notification_frame("notifications/tools/list_changed", None));
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => changes_open = false,
                _ => {}
            },
            _ = keepalive.tick() => {
                if heard.elapsed() > relay.keepalive * 3 {
                    break abnormal(&format!("the endpoint was silent for {} s", heard.elapsed().as_secs()));
                }
                if let Err(e) = ws.send(Message::Ping(Default::default())).await {
                    break abnormal(&format!("socket error: {e}"));
                }
            }
            Some(_) = lp.tasks.join_next(), if !lp.tasks.is_empty() => {}
        }
        let mut failed = None;
        for text in now {
            let text = lp.fit(text);
            match ws.send(Message::text(text)).await {
                Ok(()) => relay.state.frame_out(),
                Err(e) => {
                    failed = Some(abnormal(&format!("socket error: {e}")));
                    break;
                }
            }
        }
        if let Some(ended) = failed {
            break ended;
        }
    };
    for (_, token) in lp
        .in_flight
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .values()
    {
        token.cancel();
    }
    lp.tasks.abort_all();
    ended
}

fn abnormal(message: &str) -> Ended {
    Ended {
        end: SessionEnd::Abnormal,
        message: message.to_string(),
        stopping: false,
    }
}

impl Loop<'_> {
    /// A frame that is no JSON-RPC message: dropped (no id to answer) and counted; the first
    /// of each connection is logged as a warning, so a device's bug shows somewhere (tour M:
    /// it showed nowhere).
    fn malformed(&mut self, why: &str) {
        self.relay.state.malformed();
        if self.said_malformed {
            tracing::debug!(bridge = %self.relay.state.name(), "dropped a malformed frame: {why}");
            return;
        }
        self.said_malformed = true;
        self.relay.state.log(
            tracing::Level::WARN,
            &format!(
                "the endpoint sent a frame that is no JSON-RPC message ({why}); dropped, as later \
                 ones on this connection will be (counted as `malformed` in /healthz)"
            ),
        );
    }

    /// A reply larger than the frame limit becomes an error reply with the same id.
    fn fit(&self, text: String) -> String {
        if text.len() <= self.relay.max_frame {
            return text;
        }
        let id = jsonrpc::parse(&text)
            .ok()
            .and_then(|mut v| v.pop())
            .and_then(|m| match m {
                Incoming::Response { id } => Some(id),
                _ => None,
            })
            .unwrap_or_else(RawId::null);
        let message = format!(
            "the reply is {} bytes, more than the {} bytes the endpoint accepts in one frame",
            text.len(),
            self.relay.max_frame
        );
        self.relay.state.log(tracing::Level::WARN, &message);
        jsonrpc::error_frame(&id, jsonrpc::INTERNAL_ERROR, &message, None)
    }

    fn frame(&mut self, text: &str, now: &mut Vec<String>) {
        match jsonrpc::parse(text) {
            Ok(messages) => {
                for m in messages {
                    self.message(m, now);
                }
            }
            Err(e) => self.malformed(&e.0),
        }
    }

    fn message(&mut self, message: Incoming, now: &mut Vec<String>) {
        match message {
            Incoming::Request { id, method, params } => match method.as_str() {
                "initialize" => {
                    self.initialized = true;
                    now.push(jsonrpc::result_frame(
                        &id,
                        &self.initialize(params.as_ref()),
                    ));
                }
                "ping" => now.push(jsonrpc::result_frame(&id, &json!({}))),
                "tools/list" => self.spawn_list(id, params, now),
                "tools/call" => self.call(id, params, now),
                _ => self.spawn_forward(id, method, params, now),
            },
            Incoming::Notification { method, params } => {
                if method == "notifications/cancelled"
                    && let Some(request) = params.as_ref().and_then(|p| p.get("requestId"))
                {
                    let key = request.to_string();
                    if let Some((_, token)) = self
                        .in_flight
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .remove(&key)
                    {
                        token.cancel();
                    }
                }
            }
            Incoming::Response { .. } => {}
            Incoming::Invalid { id, reason } => now.push(jsonrpc::error_frame(
                &id,
                jsonrpc::INVALID_REQUEST,
                &format!("invalid request: {reason}"),
                None,
            )),
        }
    }

    fn initialize(&self, params: Option<&Value>) -> Value {
        let version = params
            .and_then(|p| p.get("protocolVersion"))
            .and_then(Value::as_str)
            .unwrap_or(DEFAULT_PROTOCOL);
        let facts = self.relay.upstream.facts();
        let mut capabilities = facts
            .as_ref()
            .and_then(|f| f.capabilities.as_object().cloned())
            .unwrap_or_default();
        let tools = capabilities.entry("tools").or_insert_with(|| json!({}));
        if let Some(tools) = tools.as_object_mut() {
            tools.insert("listChanged".into(), Value::Bool(true));
        } else {
            *tools = json!({"listChanged": true});
        }
        let server_info = facts
            .as_ref()
            .map(|f| f.server_info.clone())
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({"name": "turnscope-xiaozhi-bridge", "version": env!("CARGO_PKG_VERSION")}));
        let mut result = json!({
            "protocolVersion": version,
            "capabilities": capabilities,
            "serverInfo": server_info,
        });
        if let Some(instructions) = facts.and_then(|f| f.instructions) {
            result["instructions"] = Value::String(instructions);
        }
        result
    }

    fn call(&mut self, id: RawId, params: Option<Value>, now: &mut Vec<String>) {
        let name = params
            .as_ref()
            .and_then(|p| p.get("name"))
            .and_then(Value::as_str)
            .map(str::to_string);
        let Some(name) = name else {
            now.push(jsonrpc::error_frame(
                &id,
                jsonrpc::INVALID_PARAMS,
                "tools/call: params.name must be the tool's name (a string)",
                None,
            ));
            return;
        };
        if !self.relay.filter.admits(&name) {
            self.relay.state.blocked();
            let message = format!("tool `{name}` is blocked by this bridge's tool filter");
            self.relay.state.log(tracing::Level::INFO, &message);
            now.push(jsonrpc::error_frame(
                &id,
                jsonrpc::TOOL_BLOCKED,
                &message,
                None,
            ));
            return;
        }
        let bus = self.relay.state.bus().clone();
        let out = self.out.clone();
        self.spawn(id, now, move |relay, id, cancel| async move {
            let started = Instant::now();
            let result = relay_request(&relay, "tools/call", params, &cancel, &out).await;
            let frame = reply(&id, &result);
            bus.publish_with(|| {
                Event::ToolCall(ToolCallEvent {
                    session: 0,
                    turn: 0,
                    name: format!("xiaozhi:{} {name}", relay.state.name()),
                    duration_us: started.elapsed().as_micros() as u64,
                    result_bytes: frame.as_ref().map_or(0, String::len),
                    error: match &result {
                        Ok(v) if v.get("isError") == Some(&Value::Bool(true)) => {
                            Some("the tool reported an error".into())
                        }
                        Ok(_) => None,
                        Err(e) => Some(e.to_string()),
                    },
                    ..ToolCallEvent::default()
                })
            });
            frame
        });
    }

    fn spawn_list(&mut self, id: RawId, params: Option<Value>, now: &mut Vec<String>) {
        self.spawn(id, now, move |relay, id, _cancel| async move {
            let tools = match relay.upstream.list_tools().await {
                Ok(tools) => tools,
                Err(e) => return reply(&id, &Err(e)),
            };
            let cursor = params.as_ref().and_then(|p| p.get("cursor"));
            let page =
                listing::tools_page(tools, &relay.filter, cursor, relay.page_size, |tool, e| {
                    let first = relay
                        .warned
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .insert(tool.to_string());
                    if first {
                        relay.state.log(
                            tracing::Level::WARN,
                            &format!(
                                "tool `{tool}`: {e}; its schema is sent as the server wrote it"
                            ),
                        );
                    }
                });
            Some(match page {
                Ok(result) => jsonrpc::result_frame(&id, &result),
                Err(message) => jsonrpc::error_frame(&id, jsonrpc::INVALID_PARAMS, &message, None),
            })
        });
    }

    fn spawn_forward(
        &mut self,
        id: RawId,
        method: String,
        params: Option<Value>,
        now: &mut Vec<String>,
    ) {
        let out = self.out.clone();
        self.spawn(id, now, move |relay, id, cancel| async move {
            let result = relay_request(&relay, &method, params, &cancel, &out).await;
            reply(&id, &result)
        });
    }

    /// Runs `work` as a task registered in flight under `id`; its frame (if any) is queued.
    /// An id already in flight, or one request more than [`MAX_IN_FLIGHT`], is answered at
    /// once with an error in `now` instead.
    fn spawn<F, Fut>(&mut self, id: RawId, now: &mut Vec<String>, work: F)
    where
        F: FnOnce(Arc<Relay>, RawId, CancellationToken) -> Fut,
        Fut: Future<Output = Option<String>> + Send + 'static,
    {
        let key = id_key(id.as_json());
        let cancel = CancellationToken::new();
        let refused = {
            let mut table = self
                .in_flight
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if table.contains_key(&key) {
                Some((
                    jsonrpc::INVALID_REQUEST,
                    format!(
                        "request id {} is already in flight; give every request its own id",
                        id.as_json()
                    ),
                ))
            } else if self.tasks.len() >= MAX_IN_FLIGHT {
                Some((
                    jsonrpc::INTERNAL_ERROR,
                    format!(
                        "{MAX_IN_FLIGHT} requests are already in flight on this socket; \
                         wait for their replies, then send this one again"
                    ),
                ))
            } else {
                self.next_task += 1;
                table.insert(key.clone(), (self.next_task, cancel.clone()));
                None
            }
        };
        if let Some((code, message)) = refused {
            self.relay.state.log(tracing::Level::WARN, &message);
            now.push(jsonrpc::error_frame(&id, code, &message, None));
            return;
        }
        let seq = self.next_task;
        let in_flight = self.in_flight.clone();
        let out = self.out.clone();
        let job = work(self.relay.clone(), id, cancel.clone());
        self.tasks.spawn(async move {
            let frame = job.await;
            {
                let mut table = in_flight.lock().unwrap_or_else(PoisonError::into_inner);
                if table.get(&key).is_some_and(|(n, _)| *n == seq) {
                    table.remove(&key);
                }
            }
            if let Some(frame) = frame.filter(|_| !cancel.is_cancelled()) {
                let _ = out.send(frame).await;
            }
        });
    }
}

/// Sends one request upstream; when the endpoint gave a progress token, the server's progress
/// reports are queued for the endpoint under that token while it runs (all of them before
/// the reply, none after a cancel).
async fn relay_request(
    relay: &Relay,
    method: &str,
    params: Option<Value>,
    cancel: &CancellationToken,
    out: &mpsc::Sender<String>,
) -> Result<Value, UpstreamError> {
    let Some(token) = progress::endpoint_token(params.as_ref()) else {
        return relay.upstream.request(method, params, cancel, None).await;
    };
    let (sink, mut reports) = mpsc::channel(PROGRESS_QUEUE);
    let request = relay.upstream.request(method, params, cancel, Some(sink));
    tokio::pin!(request);
    let forward = |report: Value| {
        let frame = progress::progress_frame(&token, report);
        async move {
            if !cancel.is_cancelled() {
                let _ = out.send(frame).await;
            }
        }
    };
    loop {
        tokio::select! {
            biased;
            Some(report) = reports.recv() => forward(report).await,
            result = &mut request => {
                while let Ok(report) = reports.try_recv() {
                    forward(report).await;
                }
                return result;
            }
        }
    }
}

/// The reply frame for an upstream outcome; `None` for a cancelled request (MCP says a
/// cancelled request gets no answer).
fn reply(id: &RawId, result: &Result<Value, UpstreamError>) -> Option<String> {
    Some(match result {
        Ok(value) => jsonrpc::result_frame(id, value),
        Err(UpstreamError::Rpc {
            code,
            message,
            data,
        }) => jsonrpc::error_frame(id, *code, message, data.as_ref()),
        Err(UpstreamError::Died(message) | UpstreamError::Unavailable(message)) => {
            jsonrpc::error_frame(id, jsonrpc::INTERNAL_ERROR, message, None)
        }
        Err(UpstreamError::Cancelled) => return None,
    })
}
