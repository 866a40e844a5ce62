//! What crossed the wire, as events carry it: a model request (what is new in the session's
//! context since its previous request, a reference to the tool set offered, the parameters),
//! the model's answer (content, reasoning, tool calls as streamed; finish reason, usage,
//! status and times are `ModelResponseInfo`, beside it in the event), the tool sets
//! themselves (published once per change), and every `/mcp` HTTP exchange with the JSON-RPC
//! messages it carried.
//!
//! Bounded by [`WireLimit`] (`[wire] max_kib`, `--wire-kib`): a text longer than the limit is
//! cut with a marker saying how long it was, and 0 turns the recording of bodies off. Secrets
//! never get here: no header value is kept (only names), the API key is never read, MCP
//! session ids and session handles are masked to their first 8 characters.

use std::sync::atomic::{AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// The default bound on one recorded text: 64 KiB.
pub const DEFAULT_WIRE_BYTES: usize = 64 * 1024;

/// How much of each message is recorded (bytes; 0 = bodies are not recorded at all).
#[derive(Debug)]
pub struct WireLimit(AtomicUsize);

impl Default for WireLimit {
    fn default() -> Self {
        Self(AtomicUsize::new(DEFAULT_WIRE_BYTES))
    }
}

impl WireLimit {
    /// Most bytes of one text kept (0 = recording off).
    #[inline]
    pub fn bytes(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }

    /// Sets the bound (0 = recording off).
    pub fn set(&self, bytes: usize) {
        self.0.store(bytes, Ordering::Relaxed);
    }
}

/// A model request as sent, told as what changed since the session's previous request.
///
/// Messages are numbered per session: 0 is the system prompt, the history's messages follow
/// from 1 in the order they were written (numbers are never reused, also when the history
/// window forgets old ones). The whole request is the system prompt (when `system`), then
/// the messages numbered `first..end`, where `end = from + appended.len()`; the ones before
/// `from` were carried by earlier requests of the session (`observe::rebuild` puts them
/// together again).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WireRequest {
    /// The model name sent.
    pub model: String,
    /// The URL posted to (`token=` values masked).
    pub url: String,
    /// Names of the extra headers sent (their values are never kept).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<String>,
    /// Whether a bearer key was sent (a curl copy writes `$OPENAI_API_KEY` in its place).
    #[serde(default)]
    pub keyed: bool,
    /// The request's other top-level fields: `stream`, `max_tokens`, `temperature`,
    /// `tool_choice`…
    #[serde(default)]
    pub params: Map<String, Value>,
    /// The tool set offered ([`ToolSetEvent::id`]), none when no tools went out.
    #[serde(default)]
    pub tools: Option<String>,
    /// How many tools were offered.
    #[serde(default)]
    pub tool_count: usize,
    /// Whether the system prompt (message 0) went first.
    #[serde(default)]
    pub system: bool,
    /// Number of the first history message sent.
    pub first: u64,
    /// Number of `appended[0]`.
    pub from: u64,
    /// The messages not carried by an earlier event, as OpenAI message objects.
    pub appended: Vec<Value>,
    /// How many of `appended` had a text cut by the wire limit.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cut: u32,
    /// The system message sent, when it is not the one this session's events last carried
    /// (a reload changed the prompt): it holds from this request on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<Value>,
}

impl WireRequest {
    /// One past the number of the last message sent (numbers from a file are not trusted:
    /// it never overflows).
    pub fn end(&self) -> u64 {
        self.from.saturating_add(self.appended.len() as u64)
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// One function call of a response, its arguments exactly as streamed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WireCall {
    /// The call's id.
    pub id: String,
    /// The function's name.
    pub name: String,
    /// The arguments as the model streamed them (JSON text, not checked).
    pub arguments: String,
}

/// What a model response said (its status, finish reason, usage, model, id and first byte
/// are the event's [`ModelResponseInfo`](super::ModelResponseInfo)).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WireAnswer {
    /// The text content (cut by the wire limit).
    #[serde(default)]
    pub content: String,
    /// The reasoning the server streamed apart (`reasoning_content`), cut likewise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reasoning: String,
    /// The function calls asked for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<WireCall>,
}

/// A tool set offered to the model: its id and the OpenAI `tools` entries, published once
/// per process when first offered (a model request refers to it by id).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSetEvent {
    /// A hash of the entries (16 hex digits).
    pub id: String,
    /// The OpenAI `tools` entries, `parameters` whole.
    pub tools: Vec<Value>,
    /// When, in µs since the epoch.
    pub at_us: u64,
}

/// The id of a tool set: FNV-1a of its JSON text, 16 hex digits.
pub fn tool_set_id(tools: &[Value]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            hash ^= u64::from(*b);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for tool in tools {
        eat(tool.to_string().as_bytes());
        eat(b"\n");
    }
    format!("{hash:016x}")
}

/// One JSON value kept as the text it was written in, handles masked in that text.
///
/// The `/mcp` record keeps its bodies so: recording a message costs copying and checking its
/// bytes, and writing it to `--events` or a viewer costs copying them again, where a parsed
/// tree would be built, walked to mask handles, and serialized back with every string escaped
/// (two thirds of what watching a server cost, `docs/benchmarks.md`). Readers that need its
/// fields parse it ([`JsonText::value`]): the console, for what is on screen.
#[derive(Clone)]
pub struct JsonText(Box<RawValue>);

impl JsonText {
    /// The bytes of one JSON value, handles masked; `None` when they are not one.
    pub fn masked(bytes: &[u8]) -> Option<Self> {
        let mut text = std::str::from_utf8(bytes).ok()?.to_string();
        // A handle is a UUID, which needs no escape inside a JSON string: masking the text
        // masks every string holding one, as `mask_handles` does on a parsed value.
        mask_handles_in(&mut text);
        let raw = RawValue::from_string(text).ok()?;
        if raw.get().contains(['\n', '\r']) {
            // Written across lines (a client's pretty-printed body): made one line, as the
            // `--events` file and the viewers' stream carry one event per line. A JSON string
            // cannot hold a raw line break, so this is whitespace between tokens.
            let value: Value = serde_json::from_str(raw.get()).ok()?;
            return Some(Self::from_value(&value));
        }
        Some(Self(raw))
    }

    /// The text of `value` (as it is: not masked).
    pub fn from_value(value: &Value) -> Self {
        Self(serde_json::value::to_raw_value(value).unwrap_or_else(|_| RawValue::NULL.to_owned()))
    }

    /// The JSON text.
    pub fn as_str(&self) -> &str {
        self.0.get()
    }

    /// The value, parsed (`null` if it somehow is not JSON).
    pub fn value(&self) -> Value {
        serde_json::from_str(self.0.get()).unwrap_or(Value::Null)
    }

    /// About how many heap bytes it holds.
    pub fn heap_bytes(&self) -> usize {
        self.0.get().len() + 16
    }
}

impl std::fmt::Debug for JsonText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Display for JsonText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq for JsonText {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Serialize for JsonText {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for JsonText {
    /// Through a parsed value: an `Event` is an internally tagged enum, which hands its fields
    /// over buffered, and a `RawValue` cannot be read from such a buffer (serde-rs/json#599).
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(|v| Self::from_value(&v))
    }
}

/// One JSON-RPC message of an MCP exchange's response (the body, or one SSE event).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpMessage {
    /// When it was written, µs after the request arrived.
    pub after_us: u64,
    /// The message as written (a cut one is `{"turnscope/cut": …}`, see [`cut_json`]).
    pub message: JsonText,
}

/// One HTTP exchange on `/mcp`: what the client sent and what it was answered, as written.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct McpExchange {
    /// The client's name from its `initialize` (or its request's `_meta`), when known.
    #[serde(default)]
    pub client: Option<String>,
    /// The first 8 characters of the MCP session id (`Mcp-Session-Id`; the session the
    /// answer opened, for `initialize`), none for sessionless requests.
    #[serde(default)]
    pub mcp_session: Option<String>,
    /// `POST`, `GET` or `DELETE`.
    pub http_method: String,
    /// The path (`/mcp`).
    pub path: String,
    /// The `Host` the request named (for a curl copy).
    #[serde(default)]
    pub host: Option<String>,
    /// `MCP-Protocol-Version` (or the revision the message names in its `_meta`).
    #[serde(default)]
    pub protocol: Option<String>,
    /// The `Mcp-Method` header.
    #[serde(default)]
    pub mcp_method: Option<String>,
    /// The `Mcp-Name` header.
    #[serde(default)]
    pub mcp_name: Option<String>,
    /// Whether an `Authorization` header came (its value is never kept).
    #[serde(default)]
    pub authorized: bool,
    /// The JSON-RPC method of the request body (`initialize`, `tools/call`…), when it had one.
    #[serde(default)]
    pub method: Option<String>,
    /// The tool a `tools/call` named.
    #[serde(default)]
    pub tool: Option<String>,
    /// The request body as JSON (handles masked, cut by the wire limit).
    #[serde(default)]
    pub request: Option<JsonText>,
    /// The HTTP status answered.
    pub status: u16,
    /// The answer's `Content-Type`.
    #[serde(default)]
    pub content_type: Option<String>,
    /// The JSON-RPC messages written back, in order (progress notifications, the result).
    #[serde(default)]
    pub messages: Vec<McpMessage>,
    /// The progress notifications of the answer: `messages` keeps the first and the latest
    /// whole, the others are counted here (each was the reply so far; the result holds the
    /// whole reply, and each one is its own `Event::Progress`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<ProgressTally>,
    /// A body that was not JSON-RPC (an HTTP error's text), cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Time to the first byte of the answer's body (its status and headers went before), µs.
    /// A model request's `headers_us` is the time to its headers instead.
    #[serde(default)]
    pub first_byte_us: Option<u64>,
    /// Time to the end of the body (or until the client went away), µs.
    pub total_us: u64,
    /// Whether the body was written to its end (false: the client went away first).
    pub complete: bool,
    /// When the request arrived, in µs since the epoch.
    pub at_us: u64,
}

/// The progress notifications an MCP exchange's answer carried.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgressTally {
    /// How many were written.
    pub count: u64,
    /// Their bytes together.
    pub bytes: u64,
    /// How many of them the exchange's `messages` leave out (all but the first and latest).
    pub left_out: u64,
}

/// The marker a cut text ends with.
pub fn cut_marker(total: usize) -> String {
    format!("…[cut by turnscope: {total} bytes in all; raise [wire] max_kib to keep more]")
}

/// `text` within `limit` bytes (cut on a character boundary, with [`cut_marker`]); true when cut.
pub fn cut_text(text: &mut String, limit: usize) -> bool {
    if limit == 0 || text.len() <= limit {
        return false;
    }
    let total = text.len();
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(&cut_marker(total));
    true
}

/// Every string inside `value` within `limit` bytes; true when any was cut.
pub fn cut_strings(value: &mut Value, limit: usize) -> bool {
    match value {
        Value::String(s) => cut_text(s, limit),
        Value::Array(items) => items
            .iter_mut()
            .fold(false, |cut, v| cut_strings(v, limit) | cut),
        Value::Object(map) => map
            .values_mut()
            .fold(false, |cut, v| cut_strings(v, limit) | cut),
        _ => false,
    }
}

/// A JSON message from raw bytes, handles masked: as written, or when longer than `limit` (or
/// not JSON) a `{"turnscope/cut": {"bytes": n, "head": "…"}}` marker with its first `limit`
/// bytes as text.
pub fn cut_json(bytes: &[u8], limit: usize) -> JsonText {
    cut_json_total(bytes, bytes.len(), limit)
}

/// [`cut_json`] of a message of which only the first bytes were kept, `total` in all.
pub fn cut_json_total(bytes: &[u8], total: usize, limit: usize) -> JsonText {
    if total == bytes.len()
        && bytes.len() <= limit
        && let Some(text) = JsonText::masked(bytes)
    {
        return text;
    }
    let mut head = String::from_utf8_lossy(&bytes[..bytes.len().min(limit)]).into_owned();
    mask_handles_in(&mut head);
    JsonText::from_value(
        &serde_json::json!({"turnscope/cut": {"bytes": total.max(bytes.len()), "head": head}}),
    )
}

/// About how many bytes `value` holds: the value itself, its strings with their allocation,
/// and each object entry's key. Cheap (one walk), for bounds kept in bytes.
pub fn json_bytes(value: &Value) -> usize {
    /// What an allocation costs beyond its bytes (the allocator's header and rounding).
    const ALLOCATION: usize = 16;
    const NODE: usize = std::mem::size_of::<Value>();
    const KEY: usize = std::mem::size_of::<String>() + ALLOCATION;
    NODE + match value {
        Value::String(s) => s.len() + ALLOCATION,
        Value::Array(items) => ALLOCATION + items.iter().map(json_bytes).sum::<usize>(),
        Value::Object(map) => {
            ALLOCATION
                + map
                    .iter()
                    .map(|(k, v)| KEY + k.len() + json_bytes(v))
                    .sum::<usize>()
        }
        _ => 0,
    }
}

fn text_bytes(text: &Option<String>) -> usize {
    text.as_ref().map_or(0, String::len)
}

impl WireRequest {
    /// About how many heap bytes it holds (see [`json_bytes`]).
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.model.len()
            + self.url.len()
            + self.headers.iter().map(String::len).sum::<usize>()
            + self
                .params
                .iter()
                .map(|(k, v)| k.len() + json_bytes(v))
                .sum::<usize>()
            + text_bytes(&self.tools)
            + self.appended.iter().map(json_bytes).sum::<usize>()
    }
}

impl WireAnswer {
    /// About how many heap bytes it holds.
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.content.len()
            + self.reasoning.len()
            + self
                .tool_calls
                .iter()
                .map(|c| 72 + c.id.len() + c.name.len() + c.arguments.len())
                .sum::<usize>()
    }
}

impl McpExchange {
    /// About how many heap bytes it holds.
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + text_bytes(&self.client)
            + text_bytes(&self.mcp_session)
            + self.http_method.len()
            + self.path.len()
            + text_bytes(&self.host)
            + text_bytes(&self.protocol)
            + text_bytes(&self.mcp_method)
            + text_bytes(&self.mcp_name)
            + text_bytes(&self.method)
            + text_bytes(&self.tool)
            + self.request.as_ref().map_or(0, JsonText::heap_bytes)
            + text_bytes(&self.content_type)
            + self
                .messages
                .iter()
                .map(|m| 8 + m.message.heap_bytes())
                .sum::<usize>()
            + text_bytes(&self.text)
    }
}

/// Whether `s` (36 bytes) has the shape of a UUID, which handles are.
fn is_uuid(s: &[u8]) -> bool {
    s.len() == 36
        && s.iter().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => *b == b'-',
            _ => b.is_ascii_hexdigit(),
        })
}

/// Masks every UUID in `text` to its first 8 characters and `…` (handles are secrets: only
/// their prefix may reach an event).
///
/// Every recorded body passes here, so it looks only where a UUID can start: 8 bytes before
/// each `-` (found with `memchr`), not at every byte.
pub fn mask_handles_in(text: &mut String) {
    if text.len() < 36 {
        return;
    }
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    // Each dash is looked at once, as a UUID's first. Two found cannot overlap: inside one,
    // a byte after a dash starts no other (its 9th byte would be no dash), and every other
    // byte follows a hex digit, so it is not fenced.
    let mut from = 8;
    while from < bytes.len()
        && let Some(offset) = memchr::memchr(b'-', &bytes[from..])
    {
        let dash = from + offset;
        let start = dash - 8;
        let fenced = start == 0 || !bytes[start - 1].is_ascii_hexdigit();
        if fenced && bytes.get(start..start + 36).is_some_and(is_uuid) {
            found.push(start);
        }
        from = dash + 1;
    }
    for at in found.into_iter().rev() {
        text.replace_range(at + 8..at + 36, "…");
    }
}

/// [`mask_handles_in`] on every string inside `value`.
pub fn mask_handles(value: &mut Value) {
    match value {
        Value::String(s) => mask_handles_in(s),
        Value::Array(items) => items.iter_mut().for_each(mask_handles),
        Value::Object(map) => map.values_mut().for_each(mask_handles),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn long_texts_are_cut_with_their_length() {
        let mut s = "é".repeat(100);
        assert!(cut_text(&mut s, 51));
        assert!(s.starts_with(&"é".repeat(25)));
        assert!(s.contains("200 bytes in all"), "{s}");
        let mut short = "abc".to_string();
        assert!(!cut_text(&mut short, 0), "0 means off, never cut");
        let cut = cut_json(br#"{"a": "0123456789"}"#, 8);
        assert_eq!(cut.value()["turnscope/cut"]["bytes"], 19);
        assert_eq!(cut.value()["turnscope/cut"]["head"], "{\"a\": \"0");
    }

    #[test]
    fn handles_are_masked_wherever_they_appear() {
        let h = "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9";
        let mut v = json!({"handle": h, "text": format!("your handle is {h}."), "n": 1});
        mask_handles(&mut v);
        assert_eq!(v["handle"], "0f1e2d3c…");
        assert_eq!(v["text"], "your handle is 0f1e2d3c….");
        let mut not = "a0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9".to_string();
        mask_handles_in(&mut not);
        assert!(not.ends_with("e0f9"), "a longer hex run is not a handle");
    }

    /// The scan from dash to dash masks what a look at every byte masks: strings drawn from
    /// hex digits, dashes and a few other bytes, with UUIDs planted at random places.
    #[test]
    fn masking_by_dashes_agrees_with_a_look_at_every_byte() {
        fn every_byte(text: &str) -> String {
            let bytes = text.as_bytes();
            let mut out = String::new();
            let mut i = 0;
            while i < bytes.len() {
                let fenced = i == 0 || !bytes[i - 1].is_ascii_hexdigit();
                if fenced && i + 36 <= bytes.len() && is_uuid(&bytes[i..i + 36]) {
                    out.push_str(&text[i..i + 8]);
                    out.push('…');
                    i += 36;
                } else {
                    out.push(bytes[i] as char);
                    i += 1;
                }
            }
            out
        }
        let h = "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9";
        let alphabet = b"0123456789abcdef-x \"";
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..5_000 {
            let mut text = String::new();
            for _ in 0..next() % 120 {
                if next() % 16 == 0 {
                    text.push_str(h);
                } else {
                    text.push(alphabet[(next() % alphabet.len() as u64) as usize] as char);
                }
            }
            let mut masked = text.clone();
            mask_handles_in(&mut masked);
            assert_eq!(masked, every_byte(&text), "in {text:?}");
        }
    }

    #[test]
    fn json_text_is_kept_as_written_on_one_line_with_handles_masked() {
        let h = "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9";
        let written = format!(r#"{{"jsonrpc":"2.0","id":7,"params":{{"handle":"{h}"}}}}"#);
        let text = JsonText::masked(written.as_bytes()).unwrap();
        assert_eq!(
            text.as_str(),
            r#"{"jsonrpc":"2.0","id":7,"params":{"handle":"0f1e2d3c…"}}"#,
            "the writer's order and spacing, the handle masked"
        );
        let pretty = JsonText::masked(b"{\n  \"a\": \"x\\ny\",\r\n  \"b\": [1, 2]\n}").unwrap();
        assert_eq!(pretty.as_str(), r#"{"a":"x\ny","b":[1,2]}"#);
        assert!(JsonText::masked(b"{\"a\": ").is_none(), "not JSON");
        assert!(JsonText::masked(b"\xff").is_none(), "not UTF-8");
        // Inside an event (an internally tagged enum) it is written as is and read back.
        let event = crate::observe::Event::Mcp(Box::new(McpExchange {
            request: Some(pretty.clone()),
            messages: vec![McpMessage {
                after_us: 1,
                message: text.clone(),
            }],
            ..McpExchange::default()
        }));
        let line = serde_json::to_string(&event).unwrap();
        assert!(
            line.contains(r#""message":{"jsonrpc":"2.0","id":7,"#),
            "{line}"
        );
        match serde_json::from_str(&line).unwrap() {
            crate::observe::Event::Mcp(x) => {
                assert_eq!(x.request, Some(pretty));
                assert_eq!(
                    x.messages[0].message.value()["params"]["handle"],
                    "0f1e2d3c…"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn tool_set_ids_follow_the_content() {
        let a = vec![json!({"type": "function", "function": {"name": "echo"}})];
        let b = vec![json!({"type": "function", "function": {"name": "clock"}})];
        assert_eq!(tool_set_id(&a), tool_set_id(&a.clone()));
        assert_ne!(tool_set_id(&a), tool_set_id(&b));
        assert_eq!(tool_set_id(&a).len(), 16);
    }
}
