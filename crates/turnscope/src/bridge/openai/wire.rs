//! The OpenAI wire shapes the bridge answers with: a whole `chat.completion`, the
//! `chat.completion.chunk` server-sent events of a streamed one, the model list and error
//! bodies.

use bytes::Bytes;
use serde_json::{Value, json};

use crate::observe::TokenUsage;
use crate::tools::ToolCall;

/// The identity every chunk of one answer shares.
#[derive(Debug, Clone)]
pub(crate) struct AnswerId {
    /// `chatcmpl-...`
    pub id: String,
    /// Seconds since the epoch.
    pub(crate) created: u64,
    /// The model name.
    pub model: String,
}

impl AnswerId {
    /// A fresh id for an answer from `model`.
    pub fn new(model: &str) -> Self {
        Self {
            id: format!("chatcmpl-{}", uuid::Uuid::new_v4().simple()),
            created: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            model: model.to_string(),
        }
    }

    /// A whole `chat.completion`: one choice with the text and the calls handed back, and the
    /// usage of every model request it took when the model reported it.
    pub fn completion(
        &self,
        text: &str,
        calls: &[ToolCall],
        finish_reason: &str,
        usage: Option<&TokenUsage>,
    ) -> Value {
        let mut message = json!({
            "role": "assistant",
            "content": if text.is_empty() && !calls.is_empty() { Value::Null } else { Value::String(text.to_string()) },
        });
        if !calls.is_empty() {
            message["tool_calls"] = Value::Array(calls.iter().map(tool_call_json).collect());
        }
        let mut body = json!({
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        });
        if let Some(usage) = usage {
            body["usage"] = usage_json(usage);
        }
        body
    }

    /// The usage chunk OpenAI sends last when `stream_options.include_usage` asks: no
    /// choices, the usage of the whole answer.
    pub(crate) fn usage_chunk(&self, usage: &TokenUsage) -> Bytes {
        event(&json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": usage_json(usage),
        }))
    }

    /// One `chat.completion.chunk` event (`data: ...` and the blank line).
    pub fn chunk(&self, delta: Value, finish_reason: Option<&str>) -> Bytes {
        let chunk = json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        });
        event(&chunk)
    }

    /// The first chunk: the assistant role.
    pub(crate) fn role_chunk(&self) -> Bytes {
        self.chunk(json!({"role": "assistant", "content": ""}), None)
    }

    /// A piece of text.
    pub(crate) fn text_chunk(&self, piece: &str) -> Bytes {
        self.chunk(json!({"content": piece}), None)
    }

    /// The calls handed back, each whole, at its index.
    pub(crate) fn calls_chunk(&self, calls: &[ToolCall]) -> Bytes {
        let deltas: Vec<Value> = calls
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let mut d = tool_call_json(c);
                d["index"] = json!(i);
                d
            })
            .collect();
        self.chunk(json!({"tool_calls": deltas}), None)
    }

    /// The last chunk before `[DONE]`.
    pub(crate) fn finish_chunk(&self, finish_reason: &str) -> Bytes {
        self.chunk(json!({}), Some(finish_reason))
    }
}

/// `usage` as OpenAI writes it: the three totals, and the details servers give.
fn usage_json(usage: &TokenUsage) -> Value {
    json!({
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
    })
}

/// An error inside a stream (the OpenAI SDKs raise it as an API error).
pub(crate) fn error_event(message: &str, kind: &str) -> Bytes {
    event(&error_body(message, kind))
}

/// The end of a stream.
pub(crate) fn done_event() -> Bytes {
    Bytes::from_static(b"data: [DONE]\n\n")
}

/// `{"error": {"message", "type", "param", "code"}}`.
pub(crate) fn error_body(message: &str, kind: &str) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": null}})
}

/// `GET /v1/models`: the one model requests go to.
pub fn models(model: &str) -> Value {
    json!({
        "object": "list",
        "data": [{"id": model, "object": "model", "created": 0, "owned_by": "turnscope"}],
    })
}

/// A call in the OpenAI `tool_calls` shape.
pub(crate) fn tool_call_json(call: &ToolCall) -> Value {
    json!({
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    })
}

fn event(value: &Value) -> Bytes {
    Bytes::from(format!("data: {value}\n\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str, name: &str) -> ToolCall {
        ToolCall::bare(id, name)
    }

    #[test]
    fn a_completion_with_calls_has_null_content_and_the_calls() {
        let id = AnswerId::new("m");
        assert!(id.id.starts_with("chatcmpl-"));
        let body = id.completion("", &[call("c1", "lookup")], "tool_calls", None);
        let message = &body["choices"][0]["message"];
        assert_eq!(message["content"], Value::Null);
        assert_eq!(message["tool_calls"][0]["function"]["name"], "lookup");
        assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
        assert!(
            body.get("usage").is_none(),
            "no usage reported, none claimed"
        );
        let usage = TokenUsage {
            prompt_tokens: 10,
            completion_tokens: 4,
            cached_tokens: 2,
            reasoning_tokens: 0,
        };
        let plain = id.completion("", &[], "stop", Some(&usage));
        assert_eq!(plain["choices"][0]["message"]["content"], "");
        assert!(plain["choices"][0]["message"].get("tool_calls").is_none());
        assert_eq!(plain["usage"]["total_tokens"], 14);
        assert_eq!(plain["usage"]["prompt_tokens_details"]["cached_tokens"], 2);
        let chunk = id.usage_chunk(&usage);
        let text = std::str::from_utf8(&chunk).unwrap();
        let v: Value = serde_json::from_str(text.trim_start_matches("data: ").trim()).unwrap();
        assert_eq!(v["choices"], json!([]));
        assert_eq!(v["usage"]["completion_tokens"], 4);
    }

    #[test]
    fn chunks_are_sse_events_with_indexed_calls() {
        let id = AnswerId::new("m");
        let chunk = id.calls_chunk(&[call("a", "x"), call("b", "y")]);
        let text = std::str::from_utf8(&chunk).unwrap();
        assert!(text.starts_with("data: ") && text.ends_with("\n\n"));
        let v: Value = serde_json::from_str(text.trim_start_matches("data: ").trim()).unwrap();
        assert_eq!(v["object"], "chat.completion.chunk");
        assert_eq!(v["choices"][0]["delta"]["tool_calls"][1]["index"], 1);
        assert_eq!(v["choices"][0]["delta"]["tool_calls"][1]["id"], "b");
        assert_eq!(&done_event()[..], b"data: [DONE]\n\n");
    }
}
