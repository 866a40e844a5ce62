//! The OpenAI-compatible chat-completions client: `stream: true`, SSE parsed by
//! `eventsource-stream`, lenient chunk parsing (`assemble`), the usage chunk asked for, one
//! retry on a fresh connection when a reused one died before answering (`connection`), one
//! retry after the wait a rate-limited (429) or overloaded (503) server's `Retry-After` asks
//! for when it fits the response's time bound. Every response is bounded: its body in bytes
//! and its time (`[model] max_response_kib`, `max_response_seconds`), an error body to
//! [`ERROR_BODY_BYTES`].
//!
//! Written on reqwest rather than async-openai because that crate rejects chunks missing
//! fields many servers omit (`id`, `created`, ...); see `reference/rust-stack.md`.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use eventsource_stream::{EventStreamError, Eventsource};
use futures::StreamExt;
use serde_json::{Map, Value, json};

use super::assemble::{Assembler, Step};
pub use super::completion::{Completion, ModelError, ResponseBound, preview};
use super::connection::Connections;
use crate::config::{DEFAULT_MAX_RESPONSE_KIB, DEFAULT_MAX_RESPONSE_SECONDS};
use crate::observe::ModelResponseInfo;
use crate::observe::redact::redact;
use crate::observe::wire::WireRequest;
use crate::tools::ToolSpec;

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
    /// Most bytes of one response's body, as streamed: beyond, the response is abandoned
    /// ([`ModelError::TooLong`]).
    pub max_response_bytes: usize,
    /// Longest one response may take from its request to its end, a `Retry-After` wait
    /// included; beyond, it is abandoned ([`ModelError::TooLong`]).
    pub max_response_time: Duration,
}

impl ModelConfig {
    /// A config for `base_url` with default timeouts (5 s connect, 60 s first byte, 30 s idle),
    /// the default response bounds (16 MiB, 600 s), no parameters, and usage asked for.
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
            max_response_bytes: DEFAULT_MAX_RESPONSE_KIB * 1024,
            max_response_time: Duration::from_secs_f64(DEFAULT_MAX_RESPONSE_SECONDS),
        }
    }

    fn chat_url(&self) -> String {
        format!("{}/chat/completions", self.base_url.trim_end_matches('/'))
    }
}

/// Most bytes of an error answer's body read (its message is cut to 300 characters anyway).
pub const ERROR_BODY_BYTES: usize = 64 * 1024;

/// A client for one OpenAI-compatible server.
#[derive(Clone)]
pub struct ModelClient {
    conns: Connections,
    config: ModelConfig,
    url: String,
    /// `url` as events and errors show it (`token=` and user-info masked): worked out once,
    /// not on every request recorded.
    shown_url: Arc<str>,
    /// Set once the server refused `stream_options`: later requests leave it out.
    usage_refused: Arc<AtomicBool>,
}

impl ModelClient {
    /// A client with its own connection pool.
    pub fn new(config: ModelConfig) -> Self {
        let conns = Connections::new(config.connect_timeout);
        let url = config.chat_url();
        Self {
            conns,
            config,
            shown_url: redact(&url).into(),
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
            url: self.shown_url.to_string(),
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
        self.exchange(body, on_piece, info).await
    }

    /// Sends `body` as it is (a recorded request, perhaps edited: its messages, tools, model and
    /// parameters), streamed (`"stream": true` is set) with the usage chunk asked for as every
    /// request asks it, and reads the answer: what [`ModelClient::stream_reporting`] does after
    /// building its body. Nothing is recorded and no session's history is touched.
    ///
    /// # Errors
    /// As [`ModelClient::stream_reporting`].
    pub async fn send_body(
        &self,
        mut body: Map<String, Value>,
        on_piece: &mut (dyn FnMut(String) + Send),
        info: &mut ModelResponseInfo,
    ) -> Result<Completion, ModelError> {
        body.insert("stream".into(), Value::Bool(true));
        self.exchange(body, on_piece, info).await
    }

    /// A client for the same model at another URL (a base ending in `/v1`, or the whole
    /// `…/chat/completions` address), with the same timeouts and usage setting. The API key and
    /// the configured headers go along only when the new URL has the same scheme, host and port
    /// as this one: a secret is never sent to another server.
    pub fn with_url(&self, url: &str) -> ModelClient {
        let url = url.trim();
        let base = url
            .strip_suffix("/chat/completions")
            .unwrap_or(url)
            .trim_end_matches('/');
        let mut config = self.config.clone();
        if origin(base) != origin(&self.config.base_url) {
            config.api_key = None;
            config.headers.clear();
        }
        config.base_url = base.to_string();
        ModelClient::new(config)
    }

    /// The full chat-completions URL requests go to (`token=` masked).
    pub fn completions_url(&self) -> String {
        self.shown_url.to_string()
    }

    async fn exchange(
        &self,
        body: Map<String, Value>,
        on_piece: &mut (dyn FnMut(String) + Send),
        info: &mut ModelResponseInfo,
    ) -> Result<Completion, ModelError> {
        let ask_usage = self.config.include_usage
            && !self.usage_refused.load(Ordering::Relaxed)
            && !body.contains_key("stream_options");
        let started = Instant::now();
        let mut response = self.send(encode(&body, ask_usage), info, started).await?;
        if ask_usage && usage_option_refused(&response) {
            // A server that rejects `stream_options` (older OpenAI-compatible servers): say so
            // once, and ask again without it, now and from now on.
            self.usage_refused.store(true, Ordering::Relaxed);
            info.usage_refused = true;
            tracing::info!(
                url = %self.shown_url,
                "the model server refused stream_options.include_usage; requests go on without it (no token counts)"
            );
            response = self.send(encode(&body, false), info, started).await?;
        }
        info.headers_us = Some(started.elapsed().as_micros() as u64);
        let response = match response {
            Answer::Ok(r) => r,
            Answer::Refused { code, message } => {
                return Err(ModelError::Status { code, message });
            }
            Answer::Busy {
                code,
                message,
                retry_after,
            } => {
                // `send` answers these as errors; kept whole here rather than trusted away.
                return Err(ModelError::Busy {
                    code,
                    message,
                    retry_after,
                    retried: false,
                    budget: self.config.max_response_time,
                });
            }
        };
        let result = self.read_stream(response, on_piece, started).await;
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

    /// Sends the request (see [`ModelClient::send_once`]); a rate-limited or overloaded
    /// server's answer is waited out once, as its `Retry-After` asks, when the wait fits the
    /// response's time bound counted from `started`, else it is [`ModelError::Busy`].
    async fn send(
        &self,
        body: Bytes,
        info: &mut ModelResponseInfo,
        started: Instant,
    ) -> Result<Answer, ModelError> {
        let (code, message, retry_after) = match self.send_once(body.clone(), info).await? {
            Answer::Busy {
                code,
                message,
                retry_after,
            } => (code, message, retry_after),
            answer => return Ok(answer),
        };
        let budget = self.config.max_response_time;
        let busy = |code, message, retry_after, retried| ModelError::Busy {
            code,
            message,
            retry_after,
            retried,
            budget,
        };
        let Some(wait) = retry_after.filter(|w| started.elapsed() + *w < budget) else {
            return Err(busy(code, message, retry_after, false));
        };
        info.waited_ms = Some(wait.as_millis() as u64);
        tokio::time::sleep(wait).await;
        match self.send_once(body, info).await? {
            Answer::Busy { code, message, .. } => Err(busy(code, message, Some(wait), true)),
            answer => Ok(answer),
        }
    }

    /// Sends the request, once more on a fresh connection when a reused one closed before any
    /// byte of the answer came (see `connection`); an error status is read (to
    /// [`ERROR_BODY_BYTES`]) into [`Answer::Refused`], or [`Answer::Busy`] for 429 and 503.
    async fn send_once(
        &self,
        body: Bytes,
        info: &mut ModelResponseInfo,
    ) -> Result<Answer, ModelError> {
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
        let code = status.as_u16();
        let retry_after = retry_after(response.headers());
        let text = error_body(response, first).await;
        let message = server_message(&text, status.canonical_reason().unwrap_or("error"));
        Ok(if matches!(code, 429 | 503) {
            Answer::Busy {
                code,
                message,
                retry_after,
            }
        } else {
            Answer::Refused { code, message }
        })
    }

    /// Reads the SSE stream of a successful answer into a completion, within the response's
    /// bounds: `max_response_bytes` of body, and `max_response_time` from `started`.
    async fn read_stream(
        &self,
        response: reqwest::Response,
        on_piece: &mut (dyn FnMut(String) + Send),
        started: Instant,
    ) -> Result<Completion, ModelError> {
        let limit = self.config.max_response_bytes;
        let mut read = 0usize;
        let body = response.bytes_stream().map(move |chunk| {
            let chunk = chunk.map_err(BodyError::Transport)?;
            read += chunk.len();
            if read > limit {
                return Err(BodyError::TooLarge);
            }
            Ok(chunk)
        });
        let mut events = body.eventsource();
        let mut assembler = Assembler::default();
        let mut waited = self.config.first_byte_timeout;
        let bound = self.config.max_response_time;
        let deadline = started + bound;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let next = match tokio::time::timeout(waited.min(left), events.next()).await {
                Err(_) if left <= waited => {
                    return Err(ModelError::TooLong(ResponseBound::Time(bound)));
                }
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
                Some(Err(EventStreamError::Transport(BodyError::TooLarge))) => {
                    return Err(ModelError::TooLong(ResponseBound::Bytes(limit)));
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

/// An answer with its headers read: a stream to read, a refusal with its message, or a
/// rate-limited or overloaded server's answer with the wait it asked for.
enum Answer {
    Ok(reqwest::Response),
    Refused {
        code: u16,
        message: String,
    },
    Busy {
        code: u16,
        message: String,
        retry_after: Option<Duration>,
    },
}

/// Why reading a response's body stopped.
#[derive(Debug)]
enum BodyError {
    /// The connection failed.
    Transport(reqwest::Error),
    /// The body passed `max_response_bytes`.
    TooLarge,
}

impl fmt::Display for BodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BodyError::Transport(e) => write!(f, "{}", error_chain(e)),
            BodyError::TooLarge => f.write_str("the response passed its size bound"),
        }
    }
}

/// The wait a 429 or 503 answer asks for: `retry-after-ms` (OpenAI's), else `Retry-After`
/// as seconds or as an HTTP date; at most a day.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    const MOST: f64 = 86_400.0;
    let text = |name| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    let seconds = |s: &str| s.parse::<f64>().ok().filter(|n| n.is_finite() && *n >= 0.0);
    if let Some(ms) = text("retry-after-ms").and_then(seconds) {
        return Some(Duration::from_secs_f64((ms / 1000.0).min(MOST)));
    }
    let value = text("retry-after")?;
    if let Some(secs) = seconds(value) {
        return Some(Duration::from_secs_f64(secs.min(MOST)));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    let wait = when.duration_since(SystemTime::now()).unwrap_or_default();
    Some(wait.min(Duration::from_secs_f64(MOST)))
}

/// An error answer's body, at most [`ERROR_BODY_BYTES`] of it and within `within`: a server
/// that streams an endless error page costs neither memory nor the turn.
async fn error_body(response: reqwest::Response, within: Duration) -> String {
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    let read = async {
        while let Some(Ok(chunk)) = chunks.next().await {
            let room = ERROR_BODY_BYTES - body.len();
            body.extend_from_slice(&chunk[..chunk.len().min(room)]);
            if body.len() == ERROR_BODY_BYTES {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(within, read).await;
    String::from_utf8_lossy(&body).into_owned()
}

/// `scheme://host:port` of a URL (lower-cased), to tell whether two URLs reach one server.
fn origin(url: &str) -> String {
    let lower = url.to_ascii_lowercase();
    let (scheme, rest) = lower.split_once("://").unwrap_or(("", &lower));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let authority = authority.rsplit('@').next().unwrap_or_default();
    let with_port = if authority.contains(':') && !authority.ends_with(']') {
        authority.to_string()
    } else {
        format!(
            "{authority}:{}",
            if scheme == "https" { "443" } else { "80" }
        )
    };
    format!("{scheme}://{with_port}")
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
/// and fuzzing of the stream parser and the tool-call assembler without a socket. Only with
/// the `testing` feature (the workspace's tests and fuzz targets): not part of the library's API.
#[cfg(feature = "testing")]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_url_gets_no_key_and_no_headers() {
        let mut config = ModelConfig::new("https://api.example.com/v1", "m");
        config.api_key = Some("sk-secret".into());
        config.headers = vec![("X-Org".into(), "o".into())];
        let client = ModelClient::new(config);
        let same = client.with_url("https://API.example.com:443/v1/chat/completions");
        assert_eq!(same.config().api_key.as_deref(), Some("sk-secret"));
        assert_eq!(
            same.completions_url(),
            "https://API.example.com:443/v1/chat/completions"
        );
        let other = client.with_url("http://127.0.0.1:9/v1");
        assert!(other.config().api_key.is_none() && other.config().headers.is_empty());
        assert_eq!(
            other.completions_url(),
            "http://127.0.0.1:9/v1/chat/completions"
        );
    }

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
