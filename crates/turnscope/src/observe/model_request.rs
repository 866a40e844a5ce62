//! What one model request reported beyond its timing: the finish reason, token usage, the
//! model and response id the server named, the HTTP status, time to the response's headers, and how
//! the client got there (a retry on a fresh connection, the usage option refused). Carried by
//! [`Event::ModelRequest`](super::Event::ModelRequest), summed per turn by the bot.

use serde::{Deserialize, Serialize};

/// Token counts a server reported for one response (OpenAI `usage`, as llama.cpp, vLLM and
/// Ollama's OpenAI API send it in the final `choices: []` chunk when asked).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    /// Tokens of the prompt (`usage.prompt_tokens`).
    #[serde(default)]
    pub prompt_tokens: u64,
    /// Tokens generated (`usage.completion_tokens`, reasoning included where the server counts it).
    #[serde(default)]
    pub completion_tokens: u64,
    /// Prompt tokens the server served from its cache (`prompt_tokens_details.cached_tokens`).
    #[serde(default)]
    pub cached_tokens: u64,
    /// Generated tokens spent on reasoning (`completion_tokens_details.reasoning_tokens`).
    #[serde(default)]
    pub reasoning_tokens: u64,
}

impl TokenUsage {
    /// Adds `other`'s counts to these (a turn's requests summed; counts from a file are not
    /// trusted, so the sums stop at the largest count rather than overflow).
    pub fn add(&mut self, other: &TokenUsage) {
        self.prompt_tokens = self.prompt_tokens.saturating_add(other.prompt_tokens);
        self.completion_tokens = self
            .completion_tokens
            .saturating_add(other.completion_tokens);
        self.cached_tokens = self.cached_tokens.saturating_add(other.cached_tokens);
        self.reasoning_tokens = self.reasoning_tokens.saturating_add(other.reasoning_tokens);
    }
}

/// The facts of one model request that are not timing: every field is optional, since a
/// request can fail at any step and servers differ in what they send.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelResponseInfo {
    /// The finish reason of the response (`stop`, `length`, `tool_calls`, `content_filter`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// Token counts, when the server sent them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TokenUsage>,
    /// The model the server says answered (`model` of its chunks; llama.cpp sends the GGUF path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The response id the server gave (`id` of its chunks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_id: Option<String>,
    /// The HTTP status of the answer, when one came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Time from sending the request to the response's status and headers, µs: how long the
    /// server took to accept the request, before any byte of the body. (Files written before
    /// it was named apart call it `first_byte_us`; an MCP exchange's `first_byte_us` is its
    /// body's first byte, another moment.)
    #[serde(
        default,
        alias = "first_byte_us",
        skip_serializing_if = "Option::is_none"
    )]
    pub headers_us: Option<u64>,
    /// Bytes of reasoning text the response streamed (`reasoning_content` / `reasoning`
    /// deltas), kept apart from the reply.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning_bytes: u64,
    /// Whether the request was sent a second time on a fresh connection, because a reused
    /// one closed before any byte of the answer came.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retried: bool,
    /// Whether the server refused `stream_options.include_usage`, so the request went again
    /// without it (and later requests leave it out).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub usage_refused: bool,
    /// How long the request waited, as a rate-limited (429) or overloaded (503) server's
    /// `Retry-After` asked, before it was sent again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waited_ms: Option<u64>,
    /// Whether the turn was stopped (a newer line, an interruption, a cancel) before the
    /// answer ended: what it streamed until then is its answer, with no finish reason.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stopped: bool,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::Event;

    /// `first_byte` meant the response's headers for a model request and the body's first byte
    /// for an MCP exchange: the model's is `headers_us` now, and old files still read.
    #[test]
    fn the_headers_time_is_named_apart_from_a_first_byte_and_old_files_read() {
        let info = ModelResponseInfo {
            headers_us: Some(7),
            ..ModelResponseInfo::default()
        };
        let text = serde_json::to_string(&info).unwrap();
        assert_eq!(text, r#"{"headers_us":7}"#);
        let old: ModelResponseInfo = serde_json::from_str(r#"{"first_byte_us":9}"#).unwrap();
        assert_eq!(old.headers_us, Some(9));
    }

    #[test]
    fn a_model_request_line_recorded_before_these_fields_still_reads() {
        let old = r#"{"type":"model_request","session":1,"turn":2,"first_piece_us":null,"total_us":5,"error":null,"at_us":0}"#;
        match serde_json::from_str::<Event>(old).unwrap() {
            Event::ModelRequest { turn, response, .. } => {
                assert_eq!(turn, 2);
                assert_eq!(response, ModelResponseInfo::default());
            }
            other => panic!("{other:?}"),
        }
        let new = r#"{"type":"model_request","session":1,"turn":2,"first_piece_us":7,"total_us":5,"error":null,"at_us":0,"finish_reason":"length","usage":{"prompt_tokens":3,"completion_tokens":2},"retried":true}"#;
        match serde_json::from_str::<Event>(new).unwrap() {
            Event::ModelRequest { response, .. } => {
                assert_eq!(response.finish_reason.as_deref(), Some("length"));
                assert_eq!(response.usage.map(|u| u.completion_tokens), Some(2));
                assert!(response.retried && !response.usage_refused);
            }
            other => panic!("{other:?}"),
        }
    }
}
