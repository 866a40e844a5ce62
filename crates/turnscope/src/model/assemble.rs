//! Builds a [`Completion`] from the chunks of one streamed response: reply text, tool calls
//! assembled from their deltas by index, reasoning kept apart, the finish reason, the final
//! `choices: []` usage chunk, and the server's model name and response id.
//!
//! Per chunk, nothing is allocated beyond what serde needs for the content itself: `id` and
//! `model` are borrowed from the chunk text and copied once, from the first chunk naming them.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::completion::{Completion, ModelError, preview};
use crate::observe::TokenUsage;
use crate::tools::ToolCall;

#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    error: Option<Value>,
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    model: Option<Cow<'a, str>>,
    #[serde(default)]
    usage: Option<UsageWire>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    /// llama.cpp (`--reasoning-format`), DeepSeek and vLLM's reasoning parsers.
    #[serde(default)]
    reasoning_content: Option<String>,
    /// vLLM's newer name, and OpenRouter's.
    #[serde(default)]
    reasoning: Option<String>,
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

#[derive(Deserialize)]
struct UsageWire {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
    #[serde(default)]
    completion_tokens_details: Option<CompletionDetails>,
}

#[derive(Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct CompletionDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

impl UsageWire {
    fn counts(&self) -> TokenUsage {
        TokenUsage {
            prompt_tokens: self.prompt_tokens.unwrap_or(0),
            completion_tokens: self.completion_tokens.unwrap_or(0),
            cached_tokens: self
                .prompt_tokens_details
                .as_ref()
                .and_then(|d| d.cached_tokens)
                .unwrap_or(0),
            reasoning_tokens: self
                .completion_tokens_details
                .as_ref()
                .and_then(|d| d.reasoning_tokens)
                .unwrap_or(0),
        }
    }
}

/// Whether the stream goes on after an event.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    Continue,
    Done,
}

/// Builds a [`Completion`] from stream chunks.
#[derive(Default)]
pub(crate) struct Assembler {
    text: String,
    reasoning: String,
    calls: BTreeMap<usize, ToolCall>,
    pub(crate) finish_reason: Option<String>,
    usage: Option<TokenUsage>,
    model: Option<String>,
    id: Option<String>,
    pub(crate) seen_any: bool,
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
        let chunk: Chunk<'_> = serde_json::from_str(data)
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
        if let Some(usage) = &chunk.usage {
            self.usage = Some(usage.counts());
        }
        for choice in chunk.choices {
            if let Some(delta) = choice.delta {
                if let Some(content) = delta.content
                    && !content.is_empty()
                {
                    self.text.push_str(&content);
                    on_piece(content);
                }
                for r in [delta.reasoning_content, delta.reasoning]
                    .into_iter()
                    .flatten()
                {
                    self.reasoning.push_str(&r);
                }
                for d in delta.tool_calls.unwrap_or_default() {
                    self.tool_call_delta(d);
                }
            }
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(reason);
            }
        }
        Ok(())
    }

    fn tool_call_delta(&mut self, d: ToolCallDelta) {
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
            response_id: self.id,
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

    /// The shape llama-server b11434 sends (captured): a role chunk with `content: null`, a
    /// finish chunk with `delta: {}`, then `choices: []` with usage and its own `timings`.
    #[test]
    fn usage_reasoning_model_and_id_are_kept_apart_from_the_reply() {
        let (c, pieces) = feed_all(&[
            r#"{"id":"chatcmpl-x1","model":"/m/smol\\lm.gguf","choices":[{"index":0,"delta":{"role":"assistant","content":null}}]}"#,
            r#"{"id":"chatcmpl-x1","model":"ignored","choices":[{"index":0,"delta":{"reasoning_content":"think "}}]}"#,
            r#"{"id":"chatcmpl-x1","choices":[{"index":0,"delta":{"reasoning":"more"}}]}"#,
            r#"{"id":"chatcmpl-x1","choices":[{"index":0,"delta":{"content":"Once upon"}}]}"#,
            r#"{"id":"chatcmpl-x1","choices":[{"index":0,"delta":{},"finish_reason":"length"}]}"#,
            r#"{"id":"chatcmpl-x1","choices":[],"usage":{"completion_tokens":10,"prompt_tokens":32,"total_tokens":42,"prompt_tokens_details":{"cached_tokens":25},"completion_tokens_details":{"reasoning_tokens":3}},"timings":{"prompt_n":7}}"#,
        ])
        .unwrap();
        assert_eq!(pieces, ["Once upon"]);
        assert_eq!(c.reasoning, "think more");
        assert_eq!(c.finish_reason.as_deref(), Some("length"));
        assert_eq!(c.model.as_deref(), Some("/m/smol\\lm.gguf"));
        assert_eq!(c.response_id.as_deref(), Some("chatcmpl-x1"));
        assert_eq!(
            c.usage,
            Some(TokenUsage {
                prompt_tokens: 32,
                completion_tokens: 10,
                cached_tokens: 25,
                reasoning_tokens: 3
            })
        );
    }
}
