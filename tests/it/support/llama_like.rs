//! A model server that behaves like llama-server b11434 on the wire (captured, see
//! shared/reference/real-model-servers.md), on a real loopback socket, written on raw TCP
//! because hyper would never close a connection it announced as keep-alive:
//! - answers `Keep-Alive: timeout=5, max=100` and then closes the connection after every
//!   streamed response ([`Close::AfterResponse`]), or, to hit the race every time, keeps it
//!   open and drops it when the next request comes on it unanswered ([`Close::OnNextRequest`]);
//! - a first chunk `delta: {"role":"assistant","content":null}`, then content, then
//!   `finish_reason` with `delta: {}`, then (when asked) `choices: []` with usage and `timings`;
//! - HTTP 400 for a prompt over its context, with llama.cpp's message;
//! - a mid-stream `{"error":…}` event and no `[DONE]`; `reasoning_content` deltas.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// When the server closes a connection.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Close {
    /// Right after each streamed response (what llama-server does).
    AfterResponse,
    /// When the next request arrives on it, without answering (the race, every time).
    OnNextRequest,
    /// On every request, before answering (a server that crashes on each request).
    Unanswered,
}

/// What one request gets.
#[derive(Clone, Debug)]
pub enum Answer {
    /// Streamed text pieces, then this finish reason.
    Text(Vec<String>, &'static str),
    /// Reasoning pieces, then text pieces, finish `stop`.
    Reasoning(Vec<String>, Vec<String>),
    /// Text pieces, then an SSE error event, and the connection closes.
    ErrorAfter(Vec<String>, String),
    /// One call to `name` with `arguments`, sent in two fragments.
    Call(String, String),
}

impl Answer {
    /// Text pieces ending `stop`.
    pub fn text(pieces: &[&str]) -> Self {
        Answer::Text(pieces.iter().map(|p| p.to_string()).collect(), "stop")
    }
}

#[derive(Default)]
struct State {
    answers: Mutex<VecDeque<Answer>>,
    requests: Mutex<Vec<Value>>,
    dropped: AtomicU64,
    connections: AtomicU64,
}

/// A running llama-like server.
pub struct LlamaLike {
    /// Where it listens.
    pub addr: SocketAddr,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

/// Its context size, in its token count (one token per 4 bytes of message text).
pub const CONTEXT_TOKENS: usize = 4096;
/// Refuses `stream_options` with a 400, as some older servers do, when a request carries it.
pub const REFUSE_STREAM_OPTIONS_MODEL: &str = "old-server-model";

impl LlamaLike {
    /// Starts with `close` behaviour; requests get `answers` in order, then a default text.
    pub async fn start(close: Close, answers: Vec<Answer>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(State::default());
        state.answers.lock().unwrap().extend(answers);
        let shared = state.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                shared.connections.fetch_add(1, Ordering::Relaxed);
                let state = shared.clone();
                tokio::spawn(async move { serve(tcp, close, state).await });
            }
        });
        Self { addr, state, task }
    }

    /// Base URL ending in /v1.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Request bodies it answered (or refused with a status), in order.
    pub fn requests(&self) -> Vec<Value> {
        self.state.requests.lock().unwrap().clone()
    }

    /// Requests it dropped unanswered on a connection it had said it would keep.
    pub fn dropped(&self) -> u64 {
        self.state.dropped.load(Ordering::Relaxed)
    }

    /// Connections accepted.
    pub fn connections(&self) -> u64 {
        self.state.connections.load(Ordering::Relaxed)
    }
}

impl Drop for LlamaLike {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(mut tcp: TcpStream, close: Close, state: Arc<State>) {
    let mut answered = 0u32;
    loop {
        let Some(body) = read_request(&mut tcp).await else {
            return;
        };
        if close == Close::Unanswered || (close == Close::OnNextRequest && answered > 0) {
            state.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        state.requests.lock().unwrap().push(request.clone());
        answered += 1;
        let keep = respond(&mut tcp, &request, &state).await;
        if !keep || close == Close::AfterResponse {
            let _ = tcp.shutdown().await;
            return;
        }
    }
}

/// Reads one request's head and body (Content-Length only, as reqwest sends it).
async fn read_request(tcp: &mut TcpStream) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = tcp.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + length {
        let n = tcp.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Some(buf[head_end..head_end + length].to_vec())
}

fn prompt_tokens(request: &Value) -> usize {
    let bytes: usize = request["messages"]
        .as_array()
        .map(|m| m.iter().map(|m| m.to_string().len()).sum())
        .unwrap_or(0);
    bytes / 4
}

/// Writes the answer; returns whether the connection may stay open.
async fn respond(tcp: &mut TcpStream, request: &Value, state: &State) -> bool {
    let tokens = prompt_tokens(request);
    if tokens > CONTEXT_TOKENS {
        let body = json!({"error": {"code": 400, "message": format!(
            "request ({tokens} tokens) exceeds the available context size ({CONTEXT_TOKENS} tokens), try increasing it"),
            "type": "exceed_context_size_error"}})
        .to_string();
        return write_whole(tcp, 400, &body).await;
    }
    if request["model"] == REFUSE_STREAM_OPTIONS_MODEL && request.get("stream_options").is_some() {
        let body = json!({"error": {"code": 400, "message": "Unrecognized request argument supplied: stream_options"}}).to_string();
        return write_whole(tcp, 400, &body).await;
    }
    let answer = state
        .answers
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or_else(|| Answer::text(&["Hello", " there."]));
    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nKeep-Alive: timeout=5, max=100\r\n\
                Server: llama.cpp\r\nTransfer-Encoding: chunked\r\n\r\n";
    if tcp.write_all(head.as_bytes()).await.is_err() {
        return false;
    }
    let base = |choices: Value| {
        json!({"id": "chatcmpl-llama", "created": 1, "model": "/models/smollm2.gguf",
               "system_fingerprint": "b11434-unknown", "object": "chat.completion.chunk", "choices": choices})
    };
    let delta =
        |d: Value, finish: Value| base(json!([{"index": 0, "delta": d, "finish_reason": finish}]));
    let mut events = vec![delta(
        json!({"role": "assistant", "content": null}),
        Value::Null,
    )];
    let mut completion = 0usize;
    let (finish, error) = match answer {
        Answer::Text(pieces, finish) => {
            completion = pieces.len();
            events.extend(
                pieces
                    .iter()
                    .map(|p| delta(json!({"content": p}), Value::Null)),
            );
            (Some(finish), None)
        }
        Answer::Reasoning(thoughts, pieces) => {
            completion = thoughts.len() + pieces.len();
            events.extend(
                thoughts
                    .iter()
                    .map(|p| delta(json!({"reasoning_content": p}), Value::Null)),
            );
            events.extend(
                pieces
                    .iter()
                    .map(|p| delta(json!({"content": p}), Value::Null)),
            );
            (Some("stop"), None)
        }
        Answer::ErrorAfter(pieces, message) => {
            events.extend(
                pieces
                    .iter()
                    .map(|p| delta(json!({"content": p}), Value::Null)),
            );
            (None, Some(message))
        }
        Answer::Call(name, arguments) => {
            let (a, b) = arguments.split_at(arguments.len() / 2);
            events.push(delta(
                json!({"tool_calls": [{"index": 0, "id": "call_llama", "type": "function",
                    "function": {"name": name, "arguments": a}}]}),
                Value::Null,
            ));
            events.push(delta(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": b}}]}),
                Value::Null,
            ));
            (Some("tool_calls"), None)
        }
    };
    let mut out = Vec::new();
    for e in &events {
        out.push(format!("data: {e}\n\n"));
    }
    if let Some(message) = error {
        out.push(format!(
            "data: {}\n\n",
            json!({"error": {"code": 500, "message": message, "type": "server_error"}})
        ));
    }
    if let Some(finish) = finish {
        out.push(format!("data: {}\n\n", delta(json!({}), json!(finish))));
        if request.pointer("/stream_options/include_usage") == Some(&json!(true)) {
            let mut usage = base(json!([]));
            usage["usage"] = json!({"completion_tokens": completion, "prompt_tokens": tokens,
                "total_tokens": completion + tokens, "prompt_tokens_details": {"cached_tokens": tokens / 2}});
            usage["timings"] = json!({"prompt_n": tokens, "predicted_n": completion});
            out.push(format!("data: {usage}\n\n"));
        }
        out.push("data: [DONE]\n\n".to_string());
    }
    for data in out {
        let chunk = format!("{:x}\r\n{data}\r\n", data.len());
        if tcp.write_all(chunk.as_bytes()).await.is_err() {
            return false;
        }
    }
    if tcp.write_all(b"0\r\n\r\n").await.is_err() {
        return false;
    }
    let _ = tcp.flush().await;
    true
}

async fn write_whole(tcp: &mut TcpStream, code: u16, body: &str) -> bool {
    let head = format!(
        "HTTP/1.1 {code} Bad Request\r\nContent-Type: application/json; charset=utf-8\r\n\
         Keep-Alive: timeout=5, max=100\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    tcp.write_all(head.as_bytes()).await.is_ok() && tcp.write_all(body.as_bytes()).await.is_ok()
}
