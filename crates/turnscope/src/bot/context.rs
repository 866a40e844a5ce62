//! The conversation context: system prompt, history, tool calls and tool results, and how they
//! render as OpenAI chat messages for the next model request.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::tools::{ToolCall, ToolCallRecord};

/// One message of the history (stored as `{"user": "..."}`, `{"assistant": {...}}`,
/// `{"tool": {...}}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Message {
    /// A line the user sent.
    User(#[serde(with = "arc_str")] Arc<str>),
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

/// `Arc<str>` as a JSON string (serde's own impl needs its `rc` feature, which would rebuild
/// every crate that uses serde).
mod arc_str {
    use std::sync::Arc;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(text: &Arc<str>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(text)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Arc<str>, D::Error> {
        String::deserialize(d).map(Arc::from)
    }
}

/// A bot's memory of one conversation.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// The system prompt, sent first on every request.
    pub system: Option<String>,
    /// The history, oldest first.
    pub messages: Vec<Message>,
    /// Most history messages kept (0 = all): older whole turns are forgotten when a new line
    /// arrives, so a long conversation costs bounded memory and request size.
    pub window: usize,
    /// How many history messages the window has forgotten so far: `messages[i]` is the
    /// session's history message number `forgotten + i + 1` (0 is the system prompt), the
    /// numbering `observe::wire::WireRequest` tells what is new by.
    pub(crate) forgotten: u64,
    /// Where the latest turn begins in `messages` (its user line).
    turn_start: usize,
    /// Set when the latest turn was rolled back, until the next user line: what that turn
    /// would still write (a partial reply the assistant aggregator commits on the turn's
    /// error) is dropped, so the rollback stays whole.
    rolled_back: bool,
    /// The number of the first message a rollback removed since the model processor last
    /// recorded a request (its numbers are then taken by other messages, which the next
    /// recorded request carries again).
    pub(crate) rewound: Option<u64>,
}

impl Context {
    /// A context with this system prompt that keeps its whole history.
    pub fn new(system: Option<String>) -> Self {
        Self {
            system,
            messages: Vec::new(),
            window: 0,
            forgotten: 0,
            turn_start: 0,
            rolled_back: false,
            rewound: None,
        }
    }

    /// Puts back a stored history: `messages` numbered from `forgotten + 1` on.
    pub(crate) fn restore(&mut self, messages: Vec<Message>, forgotten: u64) {
        self.turn_start = messages.len();
        self.messages = messages;
        self.forgotten = forgotten;
    }

    /// How many history messages the window forgot so far.
    pub fn forgotten(&self) -> u64 {
        self.forgotten
    }

    /// The number of the last history message (the window's forgotten ones counted).
    pub fn last_number(&self) -> u64 {
        self.forgotten + self.messages.len() as u64
    }

    /// The messages numbered above `after`, with the number of the first (what a store has
    /// not been given yet).
    pub fn messages_after(&self, after: u64) -> (u64, Vec<Message>) {
        let skip = after.saturating_sub(self.forgotten) as usize;
        let first = self.forgotten + skip as u64 + 1;
        (
            first,
            self.messages
                .get(skip..)
                .map(<[_]>::to_vec)
                .unwrap_or_default(),
        )
    }

    /// Keeps at most `messages` history messages (0 = all); see [`Context::window`].
    pub(crate) fn with_window(mut self, messages: usize) -> Self {
        self.window = messages;
        self
    }

    /// Appends a user line, first forgetting the oldest turns beyond the window.
    pub(crate) fn push_user(&mut self, line: Arc<str>) {
        self.messages.push(Message::User(line));
        self.forget_beyond_window();
        self.turn_start = self.messages.len() - 1;
        self.rolled_back = false;
    }

    /// Forgets the latest turn: its user line and every round it wrote. For a turn the model
    /// refused, so the next line starts from the history before it.
    pub(crate) fn roll_back_turn(&mut self) {
        if self.turn_start < self.messages.len() {
            let number = self.forgotten + self.turn_start as u64 + 1;
            self.rewound = Some(self.rewound.map_or(number, |r| r.min(number)));
        }
        self.messages.truncate(self.turn_start);
        self.rolled_back = true;
    }

    /// Drops the oldest messages so at most `window` remain, cutting only just before a user
    /// line: a tool result never loses the call it answers, and the line just added (the turn
    /// about to run) is always kept, even when it alone would exceed the window.
    fn forget_beyond_window(&mut self) {
        if self.window == 0 || self.messages.len() <= self.window {
            return;
        }
        let earliest = self.messages.len() - self.window;
        if let Some(cut) = self.messages[earliest..]
            .iter()
            .position(|m| matches!(m, Message::User(_)))
        {
            self.messages.drain(..earliest + cut);
            self.forgotten += (earliest + cut) as u64;
        }
    }

    /// Appends an assistant reply with no calls.
    pub(crate) fn push_assistant(&mut self, text: String) {
        if self.rolled_back {
            return;
        }
        self.messages.push(Message::Assistant {
            text,
            tool_calls: Vec::new(),
        });
    }

    /// Appends one round: the response that asked for `calls`, then one tool message per call
    /// (every call gets a result, so no orphaned call is ever left).
    pub(crate) fn push_round(
        &mut self,
        text: String,
        calls: &[ToolCall],
        records: &[ToolCallRecord],
    ) {
        if self.rolled_back {
            return;
        }
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

    /// The number of `messages[0]` (see [`Context::forgotten`]).
    pub(crate) fn first_number(&self) -> u64 {
        self.forgotten + 1
    }

    /// The context as OpenAI chat messages.
    pub(crate) fn to_openai(&self) -> Vec<Value> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "echo".into(),
            arguments: "{}".into(),
        }
    }

    #[test]
    fn the_window_forgets_whole_turns_from_the_front() {
        let mut c = Context::new(None).with_window(4);
        for i in 0..5 {
            c.push_user(format!("line {i}").into());
            c.push_assistant(format!("reply {i}"));
        }
        c.push_user("line 5".into());
        // 11 messages written; the window keeps the last 4, cut before a user line.
        assert_eq!(c.messages.len(), 3);
        assert_eq!(c.messages[0], Message::User("line 4".into()));
        assert_eq!(c.messages[2], Message::User("line 5".into()));
        assert_eq!(c.first_number(), 9, "8 forgotten: the next is number 9");
    }

    /// What config.md says of `history_messages`: the window counts the new line, so 2 keeps
    /// no earlier turn and 3 is the smallest that keeps the last exchange (tour U #9).
    #[test]
    fn the_window_counts_the_new_line() {
        let after_two_lines = |window: usize| {
            let mut c = Context::new(None).with_window(window);
            c.push_user("first".into());
            c.push_assistant("reply".into());
            c.push_user("what did I say?".into());
            c.messages
        };
        assert_eq!(
            after_two_lines(2),
            vec![Message::User("what did I say?".into())]
        );
        assert_eq!(after_two_lines(3).len(), 3);
        assert_eq!(after_two_lines(3)[0], Message::User("first".into()));
    }

    #[test]
    fn a_tool_result_never_loses_its_call() {
        let mut c = Context::new(None).with_window(3);
        c.push_user("a".into());
        c.push_round(String::new(), &[call("1"), call("2")], &[]);
        c.push_assistant("done".into());
        c.push_user("b".into());
        // The window would start at a tool message; the cut moves on to the next user line.
        assert_eq!(c.messages, vec![Message::User("b".into())]);
        // A turn longer than the window is kept whole while it runs.
        c.push_round(String::new(), &[call("3"), call("4"), call("5")], &[]);
        assert_eq!(c.messages.len(), 5);
    }

    #[test]
    fn a_rolled_back_turn_leaves_the_history_before_it() {
        let mut c = Context::new(None).with_window(4);
        for i in 0..3 {
            c.push_user(format!("line {i}").into());
            c.push_assistant(format!("reply {i}"));
        }
        let before = {
            c.push_user("too long".into());
            c.messages[..c.messages.len() - 1].to_vec()
        };
        c.push_round(String::new(), &[call("1")], &[]);
        c.roll_back_turn();
        assert_eq!(c.messages, before);
        // What the rolled-back turn still writes (its partial reply, on its error) is dropped.
        c.push_assistant("looping looping".into());
        assert_eq!(c.messages, before);
        assert_eq!(
            c.messages.last(),
            Some(&Message::Assistant {
                text: "reply 2".into(),
                tool_calls: vec![]
            })
        );
        // The next line writes again.
        c.push_user("next".into());
        c.push_assistant("ok".into());
        assert_eq!(c.messages.len(), before.len() + 2);
    }

    #[test]
    fn no_window_keeps_everything() {
        let mut c = Context::new(None);
        for i in 0..100 {
            c.push_user(format!("{i}").into());
        }
        assert_eq!(c.messages.len(), 100);
    }
}
