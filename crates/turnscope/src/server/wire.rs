//! Records every `/mcp` HTTP exchange as one `Event::Mcp`: the request (method, the headers
//! that matter, the JSON-RPC body with handles masked), and the answer as it was written —
//! status, each JSON-RPC message of the JSON body or of the SSE stream with the time it left
//! (a chat's progress notifications as the first, the latest and a tally: each is also its own
//! `Event::Progress`), the time to the first byte of the body and to its end, and whether the
//! client stayed to the end.
//!
//! It sits around rmcp and the JSON-RPC checks (`jsonrpc::check`), so it sees what the client
//! saw, without touching the handlers. Nothing is done unless someone listens and the wire
//! limit is not 0; then the answer is cut into messages as it passes (each kept to the limit,
//! in time linear in its bytes), and each is kept as the JSON text it was written in
//! ([`JsonText`]: checked and its handles masked once, when the exchange ends, on the blocking
//! pool when that is much; never parsed into values here), so the hub writes it through to
//! `--events` and viewers as it is (a `GET` stream held open is published when it closes). No header value
//! but the protocol version, `Mcp-Method` and `Mcp-Name` (a task id in it masked as handles
//! are) is kept: never `Authorization`, and the session id only as its first 8 characters.

use std::borrow::Cow;
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, header};
use axum::middleware::Next;
use axum::response::Response;
use bytes::Bytes;
use http_body::Frame;

use crate::observe::event::now_us;
use crate::observe::wire::{
    JsonText, McpExchange, McpMessage, ProgressTally, cut_json, cut_json_total, cut_text,
    mask_handles_in,
};
use crate::observe::{Bus, Event};

/// Most bytes of one answer's stream copied for the record (the messages beyond are counted
/// in a last `{"turnscope/cut": …}` message).
const STREAM_KEPT: usize = 8 * 1024 * 1024;
/// Most MCP sessions whose client name is remembered; beyond, the table starts again.
const CLIENTS_KEPT: usize = 4096;
/// Most characters of a client's name remembered (it is the client's to choose).
const CLIENT_NAME_CHARS: usize = 128;

/// The recorder's state: the bus, and which client each MCP session belongs to.
#[derive(Clone)]
pub(crate) struct WireTap {
    bus: Bus,
    clients: Arc<Mutex<HashMap<String, String>>>,
}

impl WireTap {
    /// A recorder publishing on `bus`.
    pub(crate) fn new(bus: Bus) -> Self {
        Self {
            bus,
            clients: Arc::default(),
        }
    }

    fn client_of(&self, session: &str) -> Option<String> {
        self.clients
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(session)
            .cloned()
    }

    fn remember(&self, session: &str, client: &str) {
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if clients.len() >= CLIENTS_KEPT {
            clients.clear();
        }
        clients.insert(
            session.to_string(),
            client.chars().take(CLIENT_NAME_CHARS).collect(),
        );
    }

    fn forget(&self, session: &str) {
        self.clients
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(session);
    }
}

fn header_text(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// The first 8 characters of an MCP session id (the rest is a secret of the client's).
fn prefix(id: &str) -> String {
    id.chars().take(8).collect()
}

/// What the record reads of a request body: its method, the tool a `tools/call` names, and
/// the protocol version and client name a sessionless request's `_meta` (or `initialize`'s
/// `clientInfo`) gives. Read borrowed, the rest skipped: building the body's whole value for
/// four strings cost the turn path allocations for every key and string in it. `params` is
/// read apart, so params of an unexpected shape lose only what is read from them.
#[derive(serde::Deserialize, Default)]
struct RequestHead<'a> {
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(skip)]
    params: Option<ParamsHead<'a>>,
    #[serde(borrow, default, rename = "params")]
    raw_params: Option<&'a serde_json::value::RawValue>,
}

#[derive(serde::Deserialize, Default)]
struct ParamsHead<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "clientInfo")]
    client_info: Option<Named<'a>>,
    #[serde(borrow, default, rename = "_meta")]
    meta: Option<MetaHead<'a>>,
}

#[derive(serde::Deserialize, Default)]
struct MetaHead<'a> {
    #[serde(borrow, default, rename = "io.modelcontextprotocol/protocolVersion")]
    protocol: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "io.modelcontextprotocol/clientInfo")]
    client_info: Option<Named<'a>>,
}

#[derive(serde::Deserialize, Default)]
struct Named<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
}

/// The text of a field read, owned.
fn owned(text: &Option<Cow<'_, str>>) -> Option<String> {
    text.as_deref().map(str::to_string)
}

impl RequestHead<'_> {
    /// The head of `body`, or nothing when it is not a JSON object of the expected shape.
    fn of(body: &[u8]) -> RequestHead<'_> {
        let mut head: RequestHead = serde_json::from_slice(body).unwrap_or_default();
        head.params = head
            .raw_params
            .and_then(|raw| serde_json::from_str(raw.get()).ok());
        head
    }

    /// The client's name: `initialize`'s `clientInfo`, or a sessionless request's `_meta`.
    fn client(&self) -> Option<String> {
        let params = self.params.as_ref()?;
        let named = params
            .client_info
            .as_ref()
            .and_then(|c| c.name.as_ref())
            .or_else(|| {
                let meta = params.meta.as_ref()?;
                meta.client_info.as_ref()?.name.as_ref()
            })?;
        Some(named.to_string())
    }
}

/// The middleware (state: [`WireTap`]).
pub(crate) async fn record(State(tap): State<WireTap>, request: Request, next: Next) -> Response {
    if !tap.bus.records_wire() {
        return remember_only(&tap, request, next).await;
    }
    let started = Instant::now();
    let at_us = now_us();
    let limit = tap.bus.wire().bytes();
    let (parts, body) = request.into_parts();
    // The body was read whole (within its limit) by `body::read_whole`: this takes it again.
    let bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    let headers = &parts.headers;
    let session = header_text(headers, "mcp-session-id");
    let head = RequestHead::of(&bytes);
    let params = head.params.as_ref();
    let method = owned(&head.method);
    let tool = if method.as_deref() == Some("tools/call") {
        params.and_then(|p| owned(&p.name))
    } else {
        None
    };
    let exchange_protocol = header_text(headers, "mcp-protocol-version").or_else(|| {
        params
            .and_then(|p| p.meta.as_ref())
            .and_then(|m| owned(&m.protocol))
    });
    let mut exchange = McpExchange {
        http_method: parts.method.to_string(),
        path: parts.uri.path().to_string(),
        host: header_text(headers, "host"),
        protocol: exchange_protocol,
        mcp_method: header_text(headers, "mcp-method"),
        // A task id (`tasks/*`) is a secret: masked as handles are.
        mcp_name: header_text(headers, "mcp-name").map(|mut name| {
            mask_handles_in(&mut name);
            name
        }),
        authorized: headers.contains_key(header::AUTHORIZATION),
        at_us,
        method,
        tool,
        client: head.client(),
        ..McpExchange::default()
    };
    drop(head);
    if !bytes.is_empty() {
        // Kept as the text it came in (handles masked), not the value parsed above.
        exchange.request = Some(cut_json(&bytes, limit));
    }
    if exchange.client.is_none() {
        exchange.client = session.as_deref().and_then(|s| tap.client_of(s));
    }
    let deleting = parts.method == Method::DELETE;
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    let opened = header_text(response.headers(), "mcp-session-id");
    if let (Some(id), Some(client)) = (&opened, &exchange.client) {
        tap.remember(id, client);
    }
    if deleting && let Some(id) = &session {
        tap.forget(id);
    }
    exchange.mcp_session = session.or(opened).as_deref().map(prefix);
    exchange.status = response.status().as_u16();
    exchange.content_type = header_text(response.headers(), "content-type");
    let sse = exchange
        .content_type
        .as_deref()
        .is_some_and(|c| c.starts_with("text/event-stream"));
    let (parts, body) = response.into_parts();
    let tapped = TappedBody {
        inner: body,
        draft: Some(Draft::new(tap.bus, exchange, started, limit, sse)),
    };
    Response::from_parts(parts, Body::new(tapped))
}

/// With nothing recorded: only what a later record needs, the client's name of each MCP
/// session opened (its `initialize`'s `clientInfo`), so a viewer that connects later (an
/// attached console) sees who sent that session's requests. A request within a session passes
/// untouched; one outside a session is parsed only when its answer opened one.
async fn remember_only(tap: &WireTap, request: Request, next: Next) -> Response {
    let session = header_text(request.headers(), "mcp-session-id");
    if request.method() != Method::POST || session.is_some() {
        if request.method() == Method::DELETE
            && let Some(id) = &session
        {
            tap.forget(id);
        }
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    // Read whole already (`body::read_whole`): taken again without a copy.
    let bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes.clone())))
        .await;
    if let Some(id) = header_text(response.headers(), "mcp-session-id")
        && let Some(client) = RequestHead::of(&bytes).client()
    {
        tap.remember(&id, &client);
    }
    response
}

/// An exchange being written: its record so far and the answer's messages, cut apart as
/// they are written (in time linear in the bytes) and checked as JSON once, at the end.
struct Draft {
    bus: Bus,
    exchange: McpExchange,
    started: Instant,
    limit: usize,
    sse: bool,
    /// The SSE event (or the JSON body) being written: its first bytes, up to [`Draft::cap`].
    pending: Vec<u8>,
    /// Bytes of it beyond `pending` (counted, not kept).
    overflow: usize,
    /// Its last two bytes, wherever they were kept: a blank line may straddle two writes.
    tail: [u8; 2],
    /// Inside a comment event (`: keep-alive`), which is skipped to its end.
    comment: bool,
    /// When the latest write left, µs after the request arrived.
    last_write_us: u64,
    /// The answer's messages so far but the progress notifications, raw, with their times.
    kept: Vec<Raw>,
    /// Bytes in `kept`.
    kept_bytes: usize,
    /// The first and the latest progress notification, and the tally of all.
    progress: Progress,
    /// Bytes of messages not kept (beyond `STREAM_KEPT`).
    dropped: usize,
    complete: bool,
}

/// One message as written: its first bytes, how long it was in all, and when its last byte
/// left (µs after the request arrived).
struct Raw {
    bytes: Vec<u8>,
    total: usize,
    after_us: u64,
}

/// A chat answers with one progress notification per reply piece, each the reply so far:
/// kept whole are the first and the latest (each where it was written, as the number of
/// other messages kept before it), the others only counted: the result carries the whole
/// reply, and `Event::Progress` each notification.
#[derive(Default)]
struct Progress {
    first: Option<(Raw, usize)>,
    last: Option<(Raw, usize)>,
    count: u64,
    bytes: u64,
}

/// Bytes to check from which a finished exchange is checked on the blocking pool rather than
/// on the runtime thread that drops the answer's body.
const INLINE_FINISH: usize = 64 * 1024;

/// Bytes of an SSE event kept beyond the wire limit: room for its `id:` and `event:` lines.
const EVENT_HEAD_ROOM: usize = 4096;

impl Draft {
    fn new(bus: Bus, exchange: McpExchange, started: Instant, limit: usize, sse: bool) -> Self {
        Self {
            bus,
            exchange,
            started,
            limit,
            sse,
            pending: Vec::with_capacity(if sse { 512 } else { 1024 }),
            overflow: 0,
            tail: [0; 2],
            comment: false,
            last_write_us: 0,
            kept: Vec::new(),
            kept_bytes: 0,
            progress: Progress::default(),
            dropped: 0,
            complete: false,
        }
    }

    /// Most bytes of one message kept: the wire limit (and an event's head lines), within
    /// what a whole answer may keep.
    fn cap(&self) -> usize {
        self.limit.saturating_add(EVENT_HEAD_ROOM).min(STREAM_KEPT)
    }

    fn wrote(&mut self, data: &Bytes) {
        let after = self.started.elapsed().as_micros() as u64;
        self.wrote_at(data, after);
    }

    /// `data` was written `after` µs after the request arrived.
    fn wrote_at(&mut self, data: &[u8], after: u64) {
        self.exchange.first_byte_us.get_or_insert(after);
        self.last_write_us = after;
        if !self.sse {
            self.take(data);
            return;
        }
        let mut rest = data;
        while !rest.is_empty() {
            if self.pending.is_empty() && self.overflow == 0 && !self.comment && rest[0] == b':' {
                // Keep-alive comments carry no message: a stream held open for hours keeps
                // nothing for them.
                self.comment = true;
            }
            let Some(end) = event_end(self.tail, rest) else {
                self.take(rest);
                break;
            };
            self.take(&rest[..end]);
            rest = &rest[end..];
            self.end_event(after);
        }
    }

    /// Takes `bytes` of the message being written: kept up to [`Draft::cap`], counted beyond.
    fn take(&mut self, bytes: &[u8]) {
        for b in bytes.iter().rev().take(2).rev() {
            self.tail = [self.tail[1], *b];
        }
        if self.comment {
            return;
        }
        let room = self.cap().saturating_sub(self.pending.len());
        let keep = room.min(bytes.len());
        self.pending.extend_from_slice(&bytes[..keep]);
        self.overflow += bytes.len() - keep;
    }

    /// The SSE event taken is whole: a message, a progress notification tallied, or nothing.
    fn end_event(&mut self, after: u64) {
        let data = sse_data(&self.pending);
        // Bytes beyond those kept are data but for the line end and blank line closing it.
        let closing = if self.tail == *b"\n\n" { 2 } else { 4 };
        let total = data.len() + self.overflow.saturating_sub(closing);
        self.pending.clear();
        self.overflow = 0;
        self.tail = [0; 2];
        self.comment = false;
        if data.is_empty() {
            return;
        }
        let raw = Raw {
            bytes: data,
            total,
            after_us: after,
        };
        if is_progress(&raw.bytes) {
            let p = &mut self.progress;
            p.count += 1;
            p.bytes += raw.total as u64;
            let slot = if p.first.is_none() {
                &mut p.first
            } else {
                &mut p.last
            };
            *slot = Some((raw, self.kept.len()));
            return;
        }
        if self.kept_bytes + raw.bytes.len() > STREAM_KEPT {
            self.dropped += raw.total;
            return;
        }
        self.kept_bytes += raw.bytes.len();
        self.kept.push(raw);
    }

    /// Bytes [`Draft::finish`] checks.
    fn to_check(&self) -> usize {
        let kept = |p: &Option<(Raw, usize)>| p.as_ref().map_or(0, |(r, _)| r.bytes.len());
        self.kept_bytes
            + kept(&self.progress.first)
            + kept(&self.progress.last)
            + self.pending.len()
    }

    /// The record, with the answer's messages checked as JSON and their handles masked.
    fn finish(mut self) -> McpExchange {
        self.exchange.total_us = self.started.elapsed().as_micros() as u64;
        self.exchange.complete = self.complete;
        let limit = self.limit;
        let message = |raw: Raw| McpMessage {
            after_us: raw.after_us,
            message: cut_json_total(&raw.bytes, raw.total, limit),
        };
        let mut messages = Vec::with_capacity(self.kept.len() + 3);
        if self.sse {
            let Progress {
                first,
                last,
                count,
                bytes,
            } = std::mem::take(&mut self.progress);
            let mut placed = [first, last].into_iter().flatten().peekable();
            for (i, raw) in std::mem::take(&mut self.kept).into_iter().enumerate() {
                while let Some((p, _)) = placed.next_if(|(_, at)| *at <= i) {
                    messages.push(message(p));
                }
                messages.push(message(raw));
            }
            messages.extend(placed.map(|(p, _)| message(p)));
            if count > 0 {
                self.exchange.progress = Some(ProgressTally {
                    count,
                    bytes,
                    left_out: count.saturating_sub(2),
                });
            }
        } else if !self.pending.is_empty() {
            let total = self.pending.len() + self.overflow;
            let whole = self.overflow == 0 && total <= limit;
            let json = if whole {
                JsonText::masked(&self.pending)
            } else if matches!(self.pending.first(), Some(b'{' | b'[')) {
                // Longer than the limit: it is cut either way; its first byte tells JSON.
                Some(cut_json_total(&self.pending, total, limit))
            } else {
                None
            };
            if let Some(message) = json {
                messages.push(McpMessage {
                    after_us: self.last_write_us,
                    message,
                });
            } else {
                let mut text = String::from_utf8_lossy(&self.pending).into_owned();
                cut_text(&mut text, limit);
                self.exchange.text = Some(text);
            }
        }
        if self.dropped > 0 {
            messages.push(McpMessage {
                after_us: self.exchange.total_us,
                message: JsonText::from_value(
                    &serde_json::json!({"turnscope/cut": {"bytes": self.dropped, "head": ""}}),
                ),
            });
        }
        self.exchange.messages = messages;
        self.exchange
    }

    /// Publishes the record: finished here when small, else on the blocking pool, so a runtime
    /// thread never checks megabytes while it drops an answer's body. True when handed to
    /// the blocking pool.
    fn publish(self) -> bool {
        let bus = self.bus.clone();
        if self.to_check() > INLINE_FINISH
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn_blocking(move || bus.publish(Event::Mcp(Box::new(self.finish()))));
            return true;
        }
        bus.publish(Event::Mcp(Box::new(self.finish())));
        false
    }
}

/// How rmcp writes a progress notification's start; one that starts so is one without a parse.
const PROGRESS_START: &[u8] = br#"{"jsonrpc":"2.0","method":"notifications/progress","#;

/// Whether `message` is a `notifications/progress` (read without building its value): at
/// once when it starts as rmcp writes one (a chat sends one per reply piece), else parsed.
fn is_progress(message: &[u8]) -> bool {
    if message.starts_with(PROGRESS_START) {
        return true;
    }
    #[derive(serde::Deserialize)]
    struct Head<'a> {
        #[serde(borrow, default)]
        method: Option<std::borrow::Cow<'a, str>>,
    }
    serde_json::from_slice::<Head>(message)
        .is_ok_and(|h| h.method.as_deref() == Some("notifications/progress"))
}

/// How many bytes of `next` end the SSE event whose last two bytes so far were `tail` (one
/// past its blank line: `\n\n` or `\n\r\n`, also across the seam); `None` when it goes on.
fn event_end(tail: [u8; 2], next: &[u8]) -> Option<usize> {
    let at = |i: usize| next.get(i).copied();
    match (tail, at(0), at(1)) {
        ([_, b'\n'], Some(b'\n'), _) => return Some(1),
        ([_, b'\n'], Some(b'\r'), Some(b'\n')) => return Some(2),
        ([b'\n', b'\r'], Some(b'\n'), _) => return Some(1),
        _ => {}
    }
    let mut from = 0;
    while let Some(found) = next[from..].iter().position(|b| *b == b'\n') {
        let nl = from + found;
        match (at(nl + 1), at(nl + 2)) {
            (Some(b'\n'), _) => return Some(nl + 2),
            (Some(b'\r'), Some(b'\n')) => return Some(nl + 3),
            _ => from = nl + 1,
        }
    }
    None
}

/// The `data:` lines of one SSE event, joined by newlines (comments and other fields skipped).
fn sse_data(event: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for line in event.split(|b| *b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if let Some(rest) = line.strip_prefix(b"data:") {
            if !out.is_empty() {
                out.push(b'\n');
            }
            out.extend_from_slice(rest.strip_prefix(b" ").unwrap_or(rest));
        }
    }
    out
}

pin_project_lite::pin_project! {
    /// The answer's body, copied as it is written; the record goes out when it is dropped
    /// (written to the end, or abandoned by the client).
    struct TappedBody {
        #[pin]
        inner: Body,
        draft: Option<Draft>,
    }

    impl PinnedDrop for TappedBody {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            if let Some(mut draft) = this.draft.take() {
                // A body hyper knew was whole (an empty 202, a JSON answer) is not polled to
                // its end: it was written all the same.
                draft.complete |= http_body::Body::is_end_stream(&*this.inner);
                let _ = draft.publish();
            }
        }
    }
}

impl http_body::Body for TappedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.project();
        let polled = this.inner.poll_frame(cx);
        if let Some(draft) = this.draft.as_mut() {
            match &polled {
                Poll::Ready(Some(Ok(frame))) => {
                    if let Some(data) = frame.data_ref() {
                        draft.wrote(data);
                    }
                }
                Poll::Ready(None) => draft.complete = true,
                _ => {}
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_events_become_messages_and_comments_do_not() {
        assert_eq!(sse_data(b"id: 1\nretry: 500\ndata:"), b"");
        assert_eq!(sse_data(b": keep-alive"), b"");
        assert_eq!(
            sse_data(b"event: message\r\nid: 0/1\r\ndata: {\"a\":1}\r"),
            b"{\"a\":1}"
        );
    }

    /// The head read of a request: the method, a call's tool and the client by either route;
    /// params of an unexpected shape, or escapes in a string, lose nothing else.
    #[test]
    fn a_requests_method_tool_and_client_are_read_from_its_head() {
        let chat = br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"chat","arguments":{"line":"x"}}}"#;
        let head = RequestHead::of(chat);
        assert_eq!(owned(&head.method).as_deref(), Some("tools/call"));
        assert_eq!(
            head.params.as_ref().and_then(|p| owned(&p.name)).as_deref(),
            Some("chat")
        );
        assert_eq!(head.client(), None);
        let init = br#"{"method":"initialize","params":{"clientInfo":{"name":"claude-code","version":"2"}}}"#;
        assert_eq!(
            RequestHead::of(init).client().as_deref(),
            Some("claude-code")
        );
        let sessionless = br#"{"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"py\u0041"}}}}"#;
        let head = RequestHead::of(sessionless);
        assert_eq!(head.client().as_deref(), Some("pyA"));
        let protocol = head.params.as_ref().and_then(|p| p.meta.as_ref());
        assert_eq!(
            protocol.and_then(|m| owned(&m.protocol)).as_deref(),
            Some("2026-07-28")
        );
        let positional = br#"{"method":"tools/call","params":["chat",1]}"#;
        let head = RequestHead::of(positional);
        assert_eq!(owned(&head.method).as_deref(), Some("tools/call"));
        assert!(head.params.is_none());
        assert!(RequestHead::of(b"not json").method.is_none());
    }

    fn draft(limit: usize) -> Draft {
        Draft::new(
            Bus::default(),
            McpExchange::default(),
            Instant::now(),
            limit,
            true,
        )
    }

    /// A draft of a JSON (not SSE) answer, 1 KiB kept per message.
    fn json_draft() -> Draft {
        Draft::new(
            Bus::default(),
            McpExchange::default(),
            Instant::now(),
            1024,
            false,
        )
    }

    /// A progress notification is known by its top-level method, however its keys are
    /// ordered; the same words deeper in a message (a tool's result quoting one) are not one.
    #[test]
    fn a_progress_notification_is_told_by_its_top_level_method_in_any_key_order() {
        let rmcp = br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1.0,"progressToken":7}}"#;
        let reordered = br#"{"params":{"progress":1,"progressToken":7},"method":"notifications/progress","jsonrpc":"2.0"}"#;
        let nested = br#"{"jsonrpc":"2.0","id":3,"result":{"structuredContent":{"method":"notifications/progress"}}}"#;
        let other = br#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#;
        assert!(is_progress(rmcp));
        assert!(is_progress(reordered));
        assert!(!is_progress(nested));
        assert!(!is_progress(other));
        assert!(!is_progress(b"not json"));
    }

    fn progress(n: u64) -> String {
        format!(
            "id: 0/{n}\r\ndata: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{{\"progressToken\":1,\"progress\":{n},\"message\":\"so far {n}\"}}}}\r\n\r\n"
        )
    }

    /// A chat's answer as rmcp writes it: a priming event, one progress notification per
    /// piece, keep-alive comments, the result; written in pieces cut anywhere (also inside a
    /// blank line), so the parser sees every seam.
    #[test]
    fn a_chats_progress_is_kept_as_first_latest_and_a_tally_each_message_timed_by_its_write() {
        let mut stream = String::from("id: 0\nretry: 500\ndata:\n\n");
        for n in 1..=500 {
            stream.push_str(&progress(n));
            if n % 100 == 0 {
                stream.push_str(": keep-alive\n\n");
            }
        }
        let result = r#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"the whole reply"}]}}"#;
        stream.push_str(&format!("id: 0/501\ndata: {result}\n\n"));
        let bytes = stream.as_bytes();
        let mut d = draft(64 * 1024);
        // Writes of 7 bytes, each at its own time: a message's time is its last byte's.
        let mut ends = Vec::new();
        for (t, chunk) in bytes.chunks(7).enumerate() {
            d.wrote_at(chunk, t as u64 + 1);
            ends.push(t as u64 + 1);
        }
        let x = d.finish();
        assert_eq!(x.messages.len(), 3, "{:?}", x.messages);
        let (first, last, res) = (&x.messages[0], &x.messages[1], &x.messages[2]);
        assert_eq!(first.message.value()["params"]["progress"], 1);
        assert_eq!(last.message.value()["params"]["progress"], 500);
        assert_eq!(
            res.message.value()["result"]["content"][0]["text"],
            "the whole reply"
        );
        assert_eq!(
            res.after_us,
            *ends.last().unwrap(),
            "the result's last write"
        );
        let first_end = stream.find("so far 1\"}}\r\n\r\n").unwrap() + 14;
        assert_eq!(first.after_us, first_end.div_ceil(7) as u64);
        let tally = x.progress.expect("a tally");
        assert_eq!((tally.count, tally.left_out), (500, 498));
        let one = progress(1);
        let data_len = one.len() - "id: 0/1\r\ndata: ".len() - 4;
        assert!(tally.bytes >= 500 * data_len as u64, "{tally:?}");
        assert_eq!(x.first_byte_us, Some(1));
    }

    #[test]
    fn a_message_beyond_the_limit_is_cut_with_its_real_length_and_nothing_big_is_kept() {
        let mut d = draft(16);
        let long = format!(
            r#"{{"jsonrpc":"2.0","id":1,"result":{{"t":"{}"}}}}"#,
            "x".repeat(100_000)
        );
        d.wrote_at(format!("data: {long}").as_bytes(), 1);
        assert!(
            d.pending.len() <= 16 + EVENT_HEAD_ROOM,
            "kept {}",
            d.pending.len()
        );
        d.wrote_at(b"\n\n", 2);
        let x = d.finish();
        assert_eq!(x.messages.len(), 1);
        let cut = &x.messages[0].message.value()["turnscope/cut"];
        assert_eq!(cut["bytes"], long.len());
        assert_eq!(cut["head"].as_str().unwrap().len(), 16);
        assert!(x.progress.is_none());
    }

    #[test]
    fn a_json_answer_is_one_message_and_text_is_kept_as_text() {
        let mut d = json_draft();
        d.wrote_at(br#"{"jsonrpc":"2.0","id":1,"#, 3);
        d.wrote_at(br#""result":{}}"#, 5);
        let x = d.finish();
        assert_eq!(x.messages.len(), 1);
        assert_eq!(x.messages[0].after_us, 5);
        assert_eq!(x.first_byte_us, Some(3));
        let mut d = json_draft();
        d.wrote_at(b"Bad Request: no session", 1);
        let x = d.finish();
        assert!(x.messages.is_empty());
        assert_eq!(x.text.as_deref(), Some("Bad Request: no session"));
    }

    /// A big answer is parsed on the blocking pool, not in the runtime thread's `Drop`, and
    /// still published whole; a small one is parsed in place.
    #[tokio::test(flavor = "current_thread")]
    async fn a_big_answer_is_parsed_off_the_runtime_thread() {
        let bus = Bus::default();
        let mut sub = bus.subscribe();
        let mut big = Draft::new(
            bus.clone(),
            McpExchange::default(),
            Instant::now(),
            1 << 20,
            true,
        );
        let text = "y".repeat(200_000);
        let body = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"t":"{text}"}}}}"#);
        big.wrote_at(format!("data: {body}\n\n").as_bytes(), 1);
        assert!(big.publish(), "parsed on the blocking pool");
        let event = sub.recv().await.expect("published");
        match &*event {
            Event::Mcp(x) => assert_eq!(x.messages[0].message.value()["result"]["t"], text),
            other => panic!("{other:?}"),
        }
        let mut small = Draft::new(bus, McpExchange::default(), Instant::now(), 1 << 20, true);
        small.wrote_at(b"data: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n\n", 1);
        assert!(!small.publish(), "parsed in place");
        assert!(sub.try_recv().is_some());
    }
}
