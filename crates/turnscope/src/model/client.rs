//! The OpenAI-compatible chat-completions client: `stream: true`, SSE parsed by
//! `eventsource-stream`, lenient chunk parsing, tool calls assembled from deltas by index.
//!
//! Written on reqwest rather than async-openai because that crate rejects chunks missing
//! fields many servers omit (`id`, `created`, ...); see `reference/rust-stack.md`.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};

use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::observe::redact::redact;
use crate::observe::wire::{TokenUsage, WireRequest};
use crate::tools::{ToolCall, ToolSpec};

/// Where the model lives and how patient to be with it.
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
}

impl ModelConfig {
    /// A config for `base_url` with default timeouts (5 s connect, 60 s first byte, 30 s idle).
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            model: model.into(),
            headers: Vec::new(),
            connect_timeout: Duration::from_secs(5),
            first_byte_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(30),
        }
    }

    fn completions_url(&self) -> String {
        format!("{}/chat/completions", self.base_url.trim_end_matches('/'))
    }
}

/// One finished model response.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Completion {
    /// All text the response streamed.
    pub text: String,
    /// Function calls it asked for, in index order.
    pub tool_calls: Vec<ToolCall>,
    /// The finish reason the server gave, if any (informative only: tool calls present = a round).
    pub finish_reason: Option<String>,
    /// Reasoning the server streamed apart from the content (`reasoning_content` or
    /// `reasoning` deltas); never shown to the user as reply.
    pub reasoning: String,
    /// Token usage, when the server reported it (a final usage chunk or any chunk's `usage`).
    pub usage: Option<TokenUsage>,
    /// The model the server said answered (the chunks' `model`).
    pub model: Option<String>,
    /// The server's response id (the chunks' `id`).
    pub id: Option<String>,
    /// The HTTP status of the answer.
    pub status: u16,
    /// Time from sending the request to the first byte of the response body.
    pub first_byte: Option<Duration>,
}

/// Why a model request failed. Each message says what happened and what to check.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelError {
    /// Could not connect at all.
    Connect(String),
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

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelError::Connect(e) => write!(
                f,
                "model server unreachable: {e}; check --model-url / OPENAI_BASE_URL and that the server runs"
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
    http: reqwest::Client,
    config: ModelConfig,
    url: String,
}

impl ModelClient {
    /// A client with its own connection pool.
    pub fn new(config: ModelConfig) -> Self {
        let http = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .tcp_nodelay(true)
            .build()
            .expect("reqwest client builds with static settings");
        let url = config.completions_url();
        Self { http, config, url }
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

    /// What a request with these `extra` fields looks like on the wire, without its messages
    /// and tools: model, URL (`token=` masked), header names (never values), whether a key is
    /// sent, and the other top-level fields (`stream` and `extra`). Mirrors `stream_with`.
    pub(crate) fn describe(&self, extra: &Map<String, Value>) -> WireRequest {
        let mut params = extra.clone();
        for key in ["model", "messages", "tools"] {
            params.remove(key);
        }
        params.insert("stream".into(), Value::Bool(true));
        WireRequest {
            model: self.config.model.clone(),
            url: redact(&self.url).into_owned(),
            headers: self.config.headers.iter().map(|(n, _)| n.clone()).collect(),
            keyed: self.config.api_key.is_some(),
            params,
            ..WireRequest::default()
        }
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
        let mut body = extra.clone();
        body.insert("model".into(), Value::String(self.config.model.clone()));
        body.insert("messages".into(), Value::Array(messages));
        body.insert("stream".into(), Value::Bool(true));
        if tools.is_empty() {
            body.remove("tools");
        } else {
            body.insert("tools".into(), Value::Array(tools));
        }
        let mut request = self.http.post(&self.url).json(&Value::Object(body));
        if let Some(key) = &self.config.api_key {
            request = request.bearer_auth(key);
        }
        for (name, value) in &self.config.headers {
            request = request.header(name, value);
        }
        let first = self.config.first_byte_timeout;
        let sent = Instant::now();
        let response = match tokio::time::timeout(first, request.send()).await {
            Err(_) => return Err(ModelError::FirstByteTimeout(first)),
            Ok(Err(e)) => return Err(ModelError::Connect(error_chain(&e))),
            Ok(Ok(r)) => r,
        };
        let status = response.status();
        if !status.is_success() {
            let text = tokio::time::timeout(first, response.text())
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or_default();
            return Err(ModelError::Status {
                code: status.as_u16(),
                message: server_message(&text, status.canonical_reason().unwrap_or("error")),
            });
        }
        let mut events = response.bytes_stream().eventsource();
        let mut assembler = Assembler {
            status: status.as_u16(),
            ..Assembler::default()
        };
        let mut waited = first;
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
                    if !assembler.seen_any {
                        assembler.first_byte = Some(sent.elapsed());
                    }
                    assembler.seen_any = true;
                    if assembler.on_event(&event.data, on_piece)? == Step::Done {
                        return Ok(assembler.finish());
                    }
                }
            }
        }
    }
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

/// Whether the stream goes on after an event.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    Continue,
    Done,
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

fn error_chain(e: &dyn std::error::Error) -> String {
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

/// One `chat.completion.chunk`; `id`, `model` and reasoning text are borrowed from the
/// event's data, so a chunk allocates nothing for them (they are copied once, at first sight).
#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    model: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    choices: Vec<Choice<'a>>,
    #[serde(default)]
    usage: Option<UsageChunk>,
    #[serde(default)]
    error: Option<Value>,
}

/// The `usage` object of a chunk (OpenAI, llama.cpp, vLLM, Ollama all send this shape).
#[derive(Deserialize)]
struct UsageChunk {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
    #[serde(default)]
    completion_tokens_details: Option<CompletionDetails>,
}

#[derive(Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: u64,
}

#[derive(Deserialize)]
struct CompletionDetails {
    #[serde(default)]
    reasoning_tokens: u64,
}

impl From<UsageChunk> for TokenUsage {
    fn from(u: UsageChunk) -> Self {
        TokenUsage {
            prompt: u.prompt_tokens,
            completion: u.completion_tokens,
            cached: u.prompt_tokens_details.map_or(0, |d| d.cached_tokens),
            reasoning: u
                .completion_tokens_details
                .map_or(0, |d| d.reasoning_tokens),
        }
    }
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct Delta<'a> {
    #[serde(default)]
    content: Option<String>,
    #[serde(default, borrow)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning: Option<Cow<'a, str>>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Deserialize)]
struct ToolCallDelta {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

/// Builds a [`Completion`] from stream chunks.
#[derive(Default)]
pub(crate) struct Assembler {
    text: String,
    reasoning: String,
    calls: BTreeMap<usize, ToolCall>,
    finish_reason: Option<String>,
    usage: Option<TokenUsage>,
    model: Option<String>,
    id: Option<String>,
    status: u16,
    first_byte: Option<Duration>,
    seen_any: bool,
}

impl Assembler {
    /// Handles one SSE event's data: `[DONE]` ends the stream, blank data is skipped.
    pub(crate) fn on_event(
        &mut self,
        data: &str,
        on_piece: &mut (dyn FnMut(String) + Send),
    ) -> Result<Step, ModelError> {
        let data = data.trim();
        if data == "[DONE]" {
            return Ok(Step::Done);
        }
        if !data.is_empty() {
            self.feed(data, on_piece)?;
        }
        Ok(Step::Continue)
    }

    /// Feeds one `data:` payload.
    pub(crate) fn feed(
        &mut self,
        data: &str,
        on_piece: &mut (dyn FnMut(String) + Send),
    ) -> Result<(), ModelError> {
        let chunk: Chunk = serde_json::from_str(data)
            .map_err(|e| ModelError::Malformed(format!("{e} in {}", preview(data, 120))))?;
        if let Some(error) = chunk.error {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| error.to_string());
            return Err(ModelError::Server(message));
        }
        if self.id.is_none()
            && let Some(id) = chunk.id
        {
            self.id = Some(id.into_owned());
        }
        if self.model.is_none()
            && let Some(model) = chunk.model
        {
            self.model = Some(model.into_owned());
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage.into());
        }
        for choice in chunk.choices {
            if let Some(delta) = choice.delta {
                if let Some(r) = delta.reasoning_content.or(delta.reasoning) {
                    self.reasoning.push_str(&r);
                }
                if let Some(content) = delta.content
                    && !content.is_empty()
                {
                    self.text.push_str(&content);
                    on_piece(content);
                }
                for d in delta.tool_calls.unwrap_or_default() {
                    let index = d
                        .index
                        .unwrap_or(self.calls.len().saturating_sub(usize::from(d.id.is_none())));
                    let call = self.calls.entry(index).or_insert_with(|| ToolCall {
                        id: String::new(),
                        name: String::new(),
                        arguments: String::new(),
                    });
                    if let Some(id) = d.id
                        && !id.is_empty()
                    {
                        call.id = id;
                    }
                    if let Some(f) = d.function {
                        if let Some(name) = f.name {
                            call.name.push_str(&name);
                        }
                        if let Some(args) = f.arguments {
                            call.arguments.push_str(&args);
                        }
                    }
                }
            }
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(reason);
            }
        }
        Ok(())
    }

    /// The completion so far; calls with no name are dropped, missing ids are made up.
    pub(crate) fn finish(self) -> Completion {
        let tool_calls = self
            .calls
            .into_values()
            .filter(|c| !c.name.is_empty())
            .enumerate()
            .map(|(i, mut c)| {
                if c.id.is_empty() {
                    c.id = format!("call_{i}");
                }
                c
            })
            .collect();
        Completion {
            text: self.text,
            tool_calls,
            finish_reason: self.finish_reason,
            reasoning: self.reasoning,
            usage: self.usage,
            model: self.model,
            id: self.id,
            status: self.status,
            first_byte: self.first_byte,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed_all(chunks: &[&str]) -> Result<(Completion, Vec<String>), ModelError> {
        let mut a = Assembler::default();
        let mut pieces = Vec::new();
        for c in chunks {
            a.feed(c, &mut |p| pieces.push(p))?;
        }
        Ok((a.finish(), pieces))
    }

    #[test]
    fn assembles_text_and_several_calls_by_index() {
        let (c, pieces) = feed_all(&[
            r#"{"choices":[{"delta":{"content":"Hi"}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"b","function":{"name":"echo","arguments":"{\"te"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"clock","arguments":""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"function":{"arguments":"xt\":1}"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#,
        ])
        .unwrap();
        assert_eq!(pieces, ["Hi"]);
        assert_eq!(c.text, "Hi");
        assert_eq!(c.tool_calls.len(), 2, "finish_reason is not trusted alone");
        assert_eq!(c.tool_calls[0].name, "clock");
        assert_eq!(c.tool_calls[1].id, "b");
        assert_eq!(c.tool_calls[1].arguments, "{\"text\":1}");
    }

    #[test]
    fn usage_model_id_and_reasoning_are_kept_apart_from_the_reply() {
        let (c, pieces) = feed_all(&[
            r#"{"id":"chatcmpl-7","model":"smol","choices":[{"delta":{"reasoning_content":"think "}}]}"#,
            r#"{"id":"chatcmpl-7","model":"smol","choices":[{"delta":{"reasoning_content":"more","content":"Hi"}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"length"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":8},"completion_tokens_details":{"reasoning_tokens":2}}}"#,
        ])
        .unwrap();
        assert_eq!(pieces, ["Hi"], "reasoning is never a reply piece");
        assert_eq!(c.reasoning, "think more");
        assert_eq!(c.id.as_deref(), Some("chatcmpl-7"));
        assert_eq!(c.model.as_deref(), Some("smol"));
        assert_eq!(c.finish_reason.as_deref(), Some("length"));
        assert_eq!(
            c.usage,
            Some(TokenUsage {
                prompt: 12,
                completion: 3,
                cached: 8,
                reasoning: 2
            })
        );
    }

    #[test]
    fn malformed_and_error_chunks_are_errors() {
        assert!(matches!(
            feed_all(&["{not json"]),
            Err(ModelError::Malformed(_))
        ));
        assert_eq!(
            feed_all(&[r#"{"error":{"message":"quota"}}"#]).unwrap_err(),
            ModelError::Server("quota".into())
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
