//! The OpenAI-compatible chat-completions client: `stream: true`, SSE parsed by
//! `eventsource-stream`, lenient chunk parsing (`assemble`), the usage chunk asked for, one
//! retry on a fresh connection when a reused one died before answering (`connection`).
//!
//! Written on reqwest rather than async-openai because that crate rejects chunks missing
//! fields many servers omit (`id`, `created`, ...); see `reference/rust-stack.md`.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::{Map, Value, json};

use super::assemble::{Assembler, Step};
use super::connection::Connections;
use crate::observe::redact::redact;
use crate::observe::wire::WireRequest;
use crate::observe::{ModelResponseInfo, TokenUsage};
use crate::tools::{ToolCall, ToolSpec};

/// The request fields about tools: a request that offers none is sent (and recorded) without
/// any of them, since servers refuse `tool_choice` without `tools`.
const TOOL_SETTINGS: [&str; 3] = ["tools", "tool_choice", "parallel_tool_calls"];
/// Where the model lives, how patient to be with it, and what every request carries.
#[derive(Debug, Clone)]
pub struct ModelConfig {
    /// Base URL up to and including `/v1`, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    /// Bearer key, when the server needs one.
    pub(crate) api_key: Option<String>,
    /// Model name sent in each request.
    pub model: String,
    /// Extra headers sent with each request.
    pub headers: Vec<(String, String)>,
    /// How long to wait for a TCP/TLS connection.
    pub(crate) connect_timeout: Duration,
    /// How long to wait for the response headers and the first event.
    pub first_byte_timeout: Duration,
    /// How long the stream may stay silent between events.
    pub idle_timeout: Duration,
    /// Top-level request fields sent with every request (`max_tokens`, `temperature`, a
    /// server's own fields...), from `[model]`; a call's own fields win over them.
    pub params: Map<String, Value>,
    /// Whether to ask for the final usage chunk (`stream_options.include_usage`).
    pub include_usage: bool,
}

impl ModelConfig {
    /// A config for `base_url` with default timeouts (5 s connect, 60 s first byte, 30 s idle),
    /// no parameters, and usage asked for.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            model: model.into(),
            headers: Vec::new(),
            connect_timeout: Duration::from_secs(5),
            first_byte_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(30),
            params: Map::new(),
            include_usage: true,
        }
    }

    fn completions_url(&self) -> String {
        format!("{}/chat/completions", self.base_url.trim_end_matches('/'))
    }
}

/// One finished model response.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Completion {
    /// All reply text the response streamed.
    pub text: String,
    /// Function calls it asked for, in index order.
    pub tool_calls: Vec<ToolCall>,
    /// The finish reason the server gave, if any (tool calls present = a round, whatever it
    /// says; `length` = the reply was cut by the token limit).
    pub finish_reason: Option<String>,
    /// Reasoning text (`reasoning_content` / `reasoning` deltas): never part of `text`, never
    /// sent back to the model.
    pub reasoning: String,
    /// Token counts, when the server sent them.
    pub usage: Option<TokenUsage>,
    /// The model the server named in its chunks.
    pub model: Option<String>,
    /// The response id the server gave.
    pub response_id: Option<String>,
}

/// Why a model request failed. Each message says what happened and what to check.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelError {
    /// Could not connect at all.
    Connect(String),
    /// A connection was made (or reused) and closed before any byte of the answer came, and
    /// the same again on a fresh connection.
    Dropped(String),
    /// The server answered with an error status.
    Status {
        /// HTTP status code.
        code: u16,
        /// The server's message (from its JSON error body when it had one).
        message: String,
    },
    /// No response headers or first event within the first-byte timeout.
    FirstByteTimeout(Duration),
    /// The stream went silent for longer than the idle timeout.
    IdleTimeout(Duration),
    /// A chunk was not the JSON expected.
    Malformed(String),
    /// The stream ended before `[DONE]` or a finish reason.
    Cut(String),
    /// The server sent an error object inside the stream.
    Server(String),
}

impl ModelError {
    /// Whether the server refused the request as a whole (an HTTP error status): nothing of
    /// it was generated.
    pub fn is_refusal(&self) -> bool {
        matches!(self, ModelError::Status { .. })
    }
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelError::Connect(e) => write!(
                f,
                "model server unreachable: {e}; check --model-url / OPENAI_BASE_URL and that the server runs"
            ),
            ModelError::Dropped(detail) => write!(
                f,
                "model server closed the connection before answering, twice (the second time on a fresh \
                 connection): {detail}; the server may be restarting or crashing on this request: check its log"
            ),
            ModelError::Status { code, message } => {
                write!(f, "model server answered HTTP {code}: {message}")
            }
            ModelError::FirstByteTimeout(t) => write!(
                f,
                "model server sent nothing within {:.1} s of the request; it may be overloaded or hung",
                t.as_secs_f64()
            ),
            ModelError::IdleTimeout(t) => write!(
                f,
                "model stream went silent for {:.1} s mid-response and was abandoned",
                t.as_secs_f64()
            ),
            ModelError::Malformed(e) => write!(
                f,
                "model stream sent a chunk that is not an OpenAI chat.completion.chunk: {e}"
            ),
            ModelError::Cut(e) => write!(
                f,
                "model stream broke before its end ([DONE] or a finish reason): {e}"
            ),
            ModelError::Server(e) => write!(f, "model server reported an error mid-stream: {e}"),
        }
    }
}

impl std::error::Error for ModelError {}

/// A client for one OpenAI-compatible server.
#[derive(Clone)]
pub struct ModelClient {
    conns: Connections,
    config: ModelConfig,
    url: String,
    /// Set once the server refused `stream_options`: later requests leave it out.
    usage_refused: Arc<AtomicBool>,
}

impl ModelClient {
    /// A client with its own connection pool.
    pub fn new(config: ModelConfig) -> Self {
        let conns = Connections::new(config.connect_timeout);
        let url = config.completions_url();
        Self {
            conns,
            config,
            url,
            usage_refused: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The config in use.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// Streams one completion of `messages` (OpenAI message objects) offering `tools`;
    /// `on_piece` gets each piece of text as it arrives.
    pub async fn stream(
        &self,
        messages: Vec<Value>,
        tools: &[ToolSpec],
        on_piece: &mut (dyn FnMut(String) + Send),
    ) -> Result<Completion, ModelError> {
        let tools: Vec<Value> = tools.iter().map(openai_tool).collect();
        self.stream_with(messages, tools, &Map::new(), on_piece)
            .await
    }

    /// Like [`ModelClient::stream`], with the tools given as OpenAI `tools` entries and
    /// `extra` top-level request fields (`temperature`, `tool_choice`, ...) sent along;
    /// `model`, `messages`, `stream` and `tools` are always this client's.
    pub(crate) async fn stream_with(
        &self,
        messages: Vec<Value>,
        tools: Vec<Value>,
        extra: &Map<String, Value>,
        on_piece: &mut (dyn FnMut(String) + Send),
    ) -> Result<Completion, ModelError> {
        let mut info = ModelResponseInfo::default();
        self.stream_reporting(messages, tools, extra, on_piece, &mut info)
            .await
    }

    /// What a request with these `extra` fields looks like on the wire, without its messages
    /// and tools: model, URL (`token=` masked), header names (never values), whether a key is
    /// sent, and the other top-level fields (`[model]` parameters, `extra`, `stream`,
    /// `stream_options`; no tool settings when it `offers_tools` not). Mirrors
    /// `stream_reporting`.
    pub(crate) fn describe(&self, extra: &Map<String, Value>, offers_tools: bool) -> WireRequest {
        let mut params = self.config.params.clone();
        for (k, v) in extra {
            params.insert(k.clone(), v.clone());
        }
        for key in ["model", "messages"] {
            params.remove(key);
        }
        for key in TOOL_SETTINGS {
            if key == "tools" || !offers_tools {
                params.remove(key);
            }
        }
        params.insert("stream".into(), Value::Bool(true));
        if self.config.include_usage
            && !self.usage_refused.load(Ordering::Relaxed)
            && !params.contains_key("stream_options")
        {
            params.insert("stream_options".into(), json!({"include_usage": true}));
        }
        WireRequest {
            model: self.config.model.clone(),
            url: redact(&self.url).into_owned(),
            headers: self.config.headers.iter().map(|(n, _)| n.clone()).collect(),
            keyed: self.config.api_key.is_some(),
            params,
            ..WireRequest::default()
        }
    }

    /// Like [`ModelClient::stream_with`], filling `info` with what the request reported (status,
    /// time to the headers, finish reason, usage, model, id, retries) whether it failed or not.
    pub async fn stream_reporting(
        &self,
        messages: Vec<Value>,
        tools: Vec<Value>,
        extra: &Map<String, Value>,
        on_piece: &mut (dyn FnMut(String) + Send),
        info: &mut ModelResponseInfo,
    ) -> Result<Completion, ModelError> {
        let mut body = self.config.params.clone();
        for (k, v) in extra {
            body.insert(k.clone(), v.clone());
        }
        body.insert("model".into(), Value::String(self.config.model.clone()));
        body.insert("messages".into(), Value::Array(messages));
        body.insert("stream".into(), Value::Bool(true));
        if tools.is_empty() {
            // Servers refuse tool settings in a request that offers no tools (a turn's last
            // request at the round cap offers none).
            for key in TOOL_SETTINGS {
                body.remove(key);
            }
        } else {
            body.insert("tools".into(), Value::Array(tools));
        }
        let ask_usage = self.config.include_usage
            && !self.usage_refused.load(Ordering::Relaxed)
            && !body.contains_key("stream_options");
        let started = Instant::now();
        let mut response = self.send(encode(&body, ask_usage), info).await?;
        if ask_usage && usage_option_refused(&response) {
            // A server that rejects `stream_options` (older OpenAI-compatible servers): say so
            // once, and ask again without it, now and from now on.
            self.usage_refused.store(true, Ordering::Relaxed);
            info.usage_refused = true;
            tracing::info!(
                url = %self.url,
                "the model server refused stream_options.include_usage; requests go on without it (no token counts)"
            );
            response = self.send(encode(&body, false), info).await?;
        }
        info.headers_us = Some(started.elapsed().as_micros() as u64);
        let response = match response {
            Answer::Ok(r) => r,
            Answer::Refused { code, message } => {
                return Err(ModelError::Status { code, message });
            }
        };
        let result = self.read_stream(response, on_piece).await;
        if let Ok(c) = &result {
            info.finish_reason.clone_from(&c.finish_reason);
            info.usage = c.usage;
            info.model.clone_from(&c.model);
            info.response_id.clone_from(&c.response_id);
            info.reasoning_bytes = c.reasoning.len() as u64;
        }
        result
    }

    /// `GET url` with the key and headers every request carries, on a connection that is not
    /// kept (the start-up check, `probe`).
    pub(crate) fn models_request(&self, url: &str) -> reqwest::RequestBuilder {
        let mut request = self.conns.fresh.get(url);
        if let Some(key) = &self.config.api_key {
            request = request.bearer_auth(key);
        }
        for (name, value) in &self.config.headers {
            request = request.header(name, value);
        }
        request
    }

    fn request(&self, http: &reqwest::Client, body: Bytes) -> reqwest::RequestBuilder {
        let mut request = http
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        if let Some(key) = &self.config.api_key {
            request = request.bearer_auth(key);
        }
        for (name, value) in &self.config.headers {
            request = request.header(name, value);
        }
        request
    }

    /// Sends the request, once more on a fresh connection when a reused one closed before any
    /// byte of the answer came (see `connection`); an error status is read into
    /// [`Answer::Refused`].
    async fn send(&self, body: Bytes, info: &mut ModelResponseInfo) -> Result<Answer, ModelError> {
        let first = self.config.first_byte_timeout;
        let sent =
            tokio::time::timeout(first, self.request(&self.conns.pooled, body.clone()).send());
        let response = match sent.await {
            Err(_) => return Err(ModelError::FirstByteTimeout(first)),
            Ok(Ok(r)) => r,
            Ok(Err(e)) if e.is_connect() => return Err(ModelError::Connect(error_chain(&e))),
            Ok(Err(e)) => {
                // Connected, then closed before any byte of the answer (see `connection`).
                info.retried = true;
                tracing::debug!(error = %error_chain(&e), "model request closed before any answer; sending it again on a fresh connection");
                let again =
                    tokio::time::timeout(first, self.request(&self.conns.fresh, body).send());
                match again.await {
                    Err(_) => return Err(ModelError::FirstByteTimeout(first)),
                    Ok(Ok(r)) => r,
                    Ok(Err(e)) if e.is_connect() => {
                        return Err(ModelError::Connect(error_chain(&e)));
                    }
                    Ok(Err(e)) => return Err(ModelError::Dropped(error_chain(&e))),
                }
            }
        };
        let status = response.status();
        info.status = Some(status.as_u16());
        if status.is_success() {
            return Ok(Answer::Ok(response));
        }
        let text = tokio::time::timeout(first, response.text())
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        Ok(Answer::Refused {
            code: status.as_u16(),
            message: server_message(&text, status.canonical_reason().unwrap_or("error")),
        })
    }

    /// Reads the SSE stream of a successful answer into a completion.
    async fn read_stream(
        &self,
        response: reqwest::Response,
        on_piece: &mut (dyn FnMut(String) + Send),
    ) -> Result<Completion, ModelError> {
        let mut events = response.bytes_stream().eventsource();
        let mut assembler = Assembler::default();
        let mut waited = self.config.first_byte_timeout;
        loop {
            let next = match tokio::time::timeout(waited, events.next()).await {
                Err(_) if assembler.seen_any => return Err(ModelError::IdleTimeout(waited)),
                Err(_) => return Err(ModelError::FirstByteTimeout(waited)),
                Ok(next) => next,
            };
            waited = self.config.idle_timeout;
            match next {
                None => {
                    return if assembler.finish_reason.is_some() {
                        Ok(assembler.finish())
                    } else {
                        Err(ModelError::Cut(
                            "the connection closed with no [DONE] and no finish reason".into(),
                        ))
                    };
                }
                Some(Err(e)) => return Err(ModelError::Cut(e.to_string())),
                Some(Ok(event)) => {
                    assembler.seen_any = true;
                    if assembler.on_event(&event.data, on_piece)? == Step::Done {
                        return Ok(assembler.finish());
                    }
                }
            }
        }
    }
}

/// An answer with its headers read: a stream to read, or a refusal with its message.
enum Answer {
    Ok(reqwest::Response),
    Refused { code: u16, message: String },
}

/// Whether a refusal is about `stream_options` (a server that does not know the option).
fn usage_option_refused(answer: &Answer) -> bool {
    match answer {
        Answer::Refused { code, message } if (400..500).contains(code) => {
            let m = message.to_ascii_lowercase();
            m.contains("stream_options") || m.contains("include_usage")
        }
        _ => false,
    }
}

/// The request body as JSON bytes, with `stream_options.include_usage` when `ask_usage`.
fn encode(body: &Map<String, Value>, ask_usage: bool) -> Bytes {
    let mut body = body.clone();
    if ask_usage {
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    Bytes::from(serde_json::to_vec(&Value::Object(body)).expect("a JSON map always encodes"))
}

/// Parses a whole SSE body, delivered in `chunks`, as [`ModelClient::stream`] would: for tests
/// and fuzzing of the stream parser and the tool-call assembler without a socket.
pub fn parse_sse_body(
    chunks: Vec<Vec<u8>>,
    on_piece: &mut (dyn FnMut(String) + Send),
) -> Result<Completion, ModelError> {
    futures::executor::block_on(async {
        let body = futures::stream::iter(
            chunks
                .into_iter()
                .map(|c| Ok::<_, std::io::Error>(bytes::Bytes::from(c))),
        );
        let mut events = body.eventsource();
        let mut assembler = Assembler::default();
        while let Some(event) = events.next().await {
            let event = event.map_err(|e| ModelError::Cut(e.to_string()))?;
            if assembler.on_event(&event.data, on_piece)? == Step::Done {
                return Ok(assembler.finish());
            }
        }
        if assembler.finish_reason.is_some() {
            Ok(assembler.finish())
        } else {
            Err(ModelError::Cut(
                "the body ended with no [DONE] and no finish reason".into(),
            ))
        }
    })
}

/// Tool spec in the OpenAI `tools` array shape.
pub(crate) fn openai_tool(spec: &ToolSpec) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.input_schema,
        }
    })
}

pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// The message of an OpenAI-style error body, or the body itself (cut), or the reason phrase.
fn server_message(body: &str, reason: &str) -> String {
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        if let Some(m) = v.pointer("/error/message").and_then(Value::as_str) {
            return m.to_string();
        }
        if let Some(m) = v.get("error").and_then(Value::as_str) {
            return m.to_string();
        }
    }
    let body = body.trim();
    if body.is_empty() {
        reason.to_string()
    } else {
        preview(body, 300)
    }
}

/// At most `max` bytes of `text`, cut on a character boundary.
pub fn preview(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_message_prefers_the_json_error() {
        assert_eq!(
            server_message(r#"{"error":{"message":"bad key"}}"#, "Unauthorized"),
            "bad key"
        );
        assert_eq!(server_message("", "Unauthorized"), "Unauthorized");
        assert_eq!(preview("héllo", 2), "h…");
    }
}
