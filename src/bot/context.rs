//! The conversation context: system prompt, history, tool calls and tool results.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::tools::{ToolCall, ToolCallRecord};

/// One message of the history.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A line the user sent.
    User(Arc<str>),
    /// What the bot said, with the function calls it asked for in that response.
    Assistant {
        /// Text of the response (may be empty).
        text: String,
        /// Calls the response asked for.
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one function call.
    Tool {
        /// The call's id.
        call_id: String,
        /// The result text the model reads.
        content: String,
    },
}

/// A bot's memory of one conversation.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// The system prompt, sent first on every request.
    pub system: Option<String>,
    /// The history, oldest first.
    pub messages: Vec<Message>,
}

impl Context {
    /// A context with this system prompt.
    pub fn new(system: Option<String>) -> Self {
        Self {
            system,
            messages: Vec::new(),
        }
    }

    /// Appends a user line.
    pub fn push_user(&mut self, line: Arc<str>) {
        self.messages.push(Message::User(line));
    }

    /// Appends an assistant reply with no calls.
    pub fn push_assistant(&mut self, text: String) {
        self.messages.push(Message::Assistant {
            text,
            tool_calls: Vec::new(),
        });
    }

    /// Appends one round: the response that asked for `calls`, then one tool message per call
    /// (every call gets a result, so no orphaned call is ever left).
    pub fn push_round(&mut self, text: String, calls: &[ToolCall], records: &[ToolCallRecord]) {
        self.messages.push(Message::Assistant {
            text,
            tool_calls: calls.to_vec(),
        });
        for call in calls {
            let content = records
                .iter()
                .find(|r| r.call.id == call.id)
                .map(|r| {
                    if r.outcome.is_error {
                        format!("ERROR: {}", r.outcome.text)
                    } else {
                        r.outcome.text.clone()
                    }
                })
                .unwrap_or_else(|| {
                    "CANCELLED: the user interrupted before this call finished".to_string()
                });
            self.messages.push(Message::Tool {
                call_id: call.id.clone(),
                content,
            });
        }
    }

    /// The context as OpenAI chat messages.
    pub fn to_openai(&self) -> Vec<Value> {
        let mut out = Vec::with_capacity(self.messages.len() + 1);
        if let Some(system) = &self.system {
            out.push(json!({"role": "system", "content": system}));
        }
        for m in &self.messages {
            out.push(match m {
                Message::User(line) => json!({"role": "user", "content": &**line}),
                Message::Assistant { text, tool_calls } if tool_calls.is_empty() => {
                    json!({"role": "assistant", "content": text})
                }
                Message::Assistant { text, tool_calls } => json!({
                    "role": "assistant",
                    "content": if text.is_empty() { Value::Null } else { Value::String(text.clone()) },
                    "tool_calls": tool_calls.iter().map(|c| json!({
                        "id": c.id, "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments},
                    })).collect::<Vec<_>>(),
                }),
                Message::Tool { call_id, content } => {
                    json!({"role": "tool", "tool_call_id": call_id, "content": content})
                }
            });
        }
        out
    }
}
