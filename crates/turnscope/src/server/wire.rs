//! Records every `/mcp` HTTP exchange as one `Event::Mcp`: the request (method, the headers
//! that matter, the JSON-RPC body with handles masked), and the answer as it was written —
//! status, each JSON-RPC message of the JSON body or of the SSE stream (progress
//! notifications, the result or error) with the time it left, the time to the first byte and
//! to the end, and whether the client stayed to the end.
//!
//! It sits around rmcp and the JSON-RPC checks (`jsonrpc::check`), so it sees what the client
//! saw, without touching the handlers. Nothing is done unless someone listens and the wire
//! limit is not 0; then the body of the answer is copied as it passes (bounded) and parsed
//! once, when the exchange ends (a `GET` stream held open is published when it closes). No
//! header value but the protocol version, `Mcp-Method` and
//! `Mcp-Name` (a task id in it masked as handles are) is kept: never `Authorization`, and the
//! session id only as its first 8 characters.

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
use serde_json::Value;

use crate::observe::event::now_us;
use crate::observe::wire::{McpExchange, McpMessage, cut_json, cut_text, mask_handles_in};
use crate::observe::{Bus, Event};

/// Most bytes of one answer's stream copied for the record (the messages beyond are counted
/// in a last `{"turnscope/cut": …}` message).
const STREAM_KEPT: usize = 8 * 1024 * 1024;
/// Most MCP sessions whose client name is remembered; beyond, the table starts again.
const CLIENTS_KEPT: usize = 4096;

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
        clients.insert(session.to_string(), client.to_string());
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

/// The client's name a request body gives: `initialize`'s `clientInfo`, or a sessionless
/// request's `_meta`.
fn client_in(body: &Value) -> Option<String> {
    let params = &body["params"];
    params["clientInfo"]["name"]
        .as_str()
        .or_else(|| params["_meta"]["io.modelcontextprotocol/clientInfo"]["name"].as_str())
        .map(str::to_string)
}

/// The middleware (state: [`WireTap`]).
pub(crate) async fn record(State(tap): State<WireTap>, request: Request, next: Next) -> Response {
    if !tap.bus.records_wire() {
        return next.run(request).await;
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
    let parsed: Option<Value> = serde_json::from_slice(&bytes).ok();
    let mut exchange = McpExchange {
        http_method: parts.method.to_string(),
        path: parts.uri.path().to_string(),
        host: header_text(headers, "host"),
        protocol: header_text(headers, "mcp-protocol-version"),
        mcp_method: header_text(headers, "mcp-method"),
        // A task id (`tasks/*`) is a secret: masked as handles are.
        mcp_name: header_text(headers, "mcp-name").map(|mut name| {
            mask_handles_in(&mut name);
            name
        }),
        authorized: headers.contains_key(header::AUTHORIZATION),
        at_us,
        ..McpExchange::default()
    };
    if let Some(body) = &parsed {
        exchange.method = body["method"].as_str().map(str::to_string);
        if exchange.method.as_deref() == Some("tools/call") {
            exchange.tool = body["params"]["name"].as_str().map(str::to_string);
        }
        if exchange.protocol.is_none() {
            exchange.protocol = body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"]
                .as_str()
                .map(str::to_string);
        }
        exchange.client = client_in(body);
    }
    if !bytes.is_empty() {
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
        draft: Some(Draft {
            bus: tap.bus,
            exchange,
            started,
            limit,
            sse,
            kept: Vec::with_capacity(if sse { 4096 } else { 1024 }),
            // A chat's progress notifications: room for a few dozen before it grows.
            arrivals: Vec::with_capacity(32),
            dropped: 0,
            complete: false,
        }),
    };
    Response::from_parts(parts, Body::new(tapped))
}

/// An exchange being written: its record so far and the answer's bytes copied.
struct Draft {
    bus: Bus,
    exchange: McpExchange,
    started: Instant,
    limit: usize,
    sse: bool,
    /// The answer's bytes, up to `STREAM_KEPT`.
    kept: Vec<u8>,
    /// (end offset in `kept`, µs after the start) of each data frame written.
    arrivals: Vec<(usize, u64)>,
    /// Bytes not kept (beyond `STREAM_KEPT`).
    dropped: usize,
    complete: bool,
}

impl Draft {
    fn wrote(&mut self, data: &Bytes) {
        let after = self.started.elapsed().as_micros() as u64;
        self.exchange.first_byte_us.get_or_insert(after);
        // Keep-alive comments (`:` lines) carry no message: a stream held open for hours
        // keeps nothing for them.
        if self.sse && data.first() == Some(&b':') {
            return;
        }
        let room = STREAM_KEPT.saturating_sub(self.kept.len());
        let take = room.min(data.len());
        self.kept.extend_from_slice(&data[..take]);
        self.dropped += data.len() - take;
        if take > 0 {
            self.arrivals.push((self.kept.len(), after));
        }
    }

    /// The record, with the answer's messages parsed out of the bytes copied.
    fn finish(mut self) -> McpExchange {
        self.exchange.total_us = self.started.elapsed().as_micros() as u64;
        self.exchange.complete = self.complete;
        let when = |end: usize| {
            self.arrivals
                .iter()
                .find(|(e, _)| *e >= end)
                .or(self.arrivals.last())
                .map_or(0, |(_, t)| *t)
        };
        let mut messages = Vec::new();
        if self.sse {
            let mut start = 0;
            while let Some(pos) = find(&self.kept[start..], b"\n\n") {
                let event = &self.kept[start..start + pos];
                let data = sse_data(event);
                if !data.is_empty() {
                    messages.push(McpMessage {
                        after_us: when(start + pos),
                        message: cut_json(&data, self.limit),
                    });
                }
                start += pos + 2;
            }
        } else if !self.kept.is_empty() {
            match serde_json::from_slice::<Value>(&self.kept) {
                Ok(_) => messages.push(McpMessage {
                    after_us: when(self.kept.len()),
                    message: cut_json(&self.kept, self.limit),
                }),
                Err(_) => {
                    let mut text = String::from_utf8_lossy(&self.kept).into_owned();
                    cut_text(&mut text, self.limit);
                    self.exchange.text = Some(text);
                }
            }
        }
        if self.dropped > 0 {
            messages.push(McpMessage {
                after_us: self.exchange.total_us,
                message: serde_json::json!({"turnscope/cut": {"bytes": self.dropped, "head": ""}}),
            });
        }
        self.exchange.messages = messages;
        self.exchange
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
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
                let bus = draft.bus.clone();
                bus.publish(Event::Mcp(Box::new(draft.finish())));
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
}
