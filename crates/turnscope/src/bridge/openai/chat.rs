//! `POST /v1/chat/completions`: the tool loop behind an OpenAI-compatible endpoint. The
//! client's messages go to the model with the bot's tools and the client's own; the bridge runs
//! the calls to bot tools and asks again, and hands calls to client tools back unexecuted.
//! `ChatLoop` states when the loop ends and the rules that keep the conversation well formed.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use futures::future::join_all;
use serde_json::{Map, Value, json};

use super::execute::{Caller, arguments_of};
use super::held::{HeldRounds, Round, bridge_call_id};
use super::wire::tool_call_json;
use crate::model::server::ROLES;
use crate::model::{ModelClient, ModelError};
use crate::observe::{Bus, Event, TokenUsage};
use crate::tools::ToolCall;

/// Request fields the bridge sets itself and never passes on.
const OWN_FIELDS: &[&str] = &[
    "model",
    "messages",
    "tools",
    "stream",
    "stream_options",
    "n",
    "tool_choice",
];

/// A parsed `chat/completions` request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ChatRequest {
    /// The conversation so far (OpenAI message objects).
    pub messages: Vec<Value>,
    /// The client's own tools (OpenAI `tools` entries), run by the client.
    pub(crate) client_tools: Vec<Value>,
    /// Whether to answer as server-sent events.
    pub stream: bool,
    /// `tool_choice`, for the first model request.
    pub tool_choice: Option<Value>,
    /// `stream_options.include_usage`: a streamed answer ends with a usage chunk.
    pub(crate) include_usage: bool,
    /// Every other field (`temperature`, `max_tokens`, ...), passed on to the model.
    pub extra: Map<String, Value>,
}

impl ChatRequest {
    /// Names of the client's tools.
    pub(crate) fn client_names(&self) -> HashSet<String> {
        self.client_tools
            .iter()
            .filter_map(|t| t.pointer("/function/name").and_then(Value::as_str))
            .map(str::to_string)
            .collect()
    }
}

/// Reads a `chat/completions` body.
///
/// # Errors
/// Not JSON, no `messages` array, a message that is not an object, a malformed `tools`
/// entry, or `n` other than 1; the message says what is expected.
pub(crate) fn parse_request(body: &[u8]) -> Result<ChatRequest, String> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        format!("the request body is not JSON ({e}); send a chat.completions request object")
    })?;
    let Value::Object(mut map) = value else {
        return Err("the request body is not a JSON object; send a chat.completions request object with `messages`".into());
    };
    let messages = match map.remove("messages") {
        Some(Value::Array(messages)) if !messages.is_empty() => messages,
        Some(Value::Array(_)) => {
            return Err("`messages` is empty; send at least one message".into());
        }
        _ => {
            return Err(
                "`messages` is missing or not an array; send the conversation as a list of {role, content} objects"
                    .into(),
            );
        }
    };
    for (i, m) in messages.iter().enumerate() {
        check_message(i, m)?;
    }
    let client_tools = match map.remove("tools") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(tools)) => tools,
        Some(_) => return Err("`tools` must be an array of {type: \"function\", function: {name, description, parameters}}".into()),
    };
    for (i, tool) in client_tools.iter().enumerate() {
        let name = tool.pointer("/function/name").and_then(Value::as_str);
        if tool.get("type").and_then(Value::as_str) != Some("function") || name.is_none() {
            return Err(format!(
                "tools[{i}] is not a function tool; each entry must be {{type: \"function\", function: {{name, description, parameters}}}}"
            ));
        }
    }
    match map.get("n") {
        None | Some(Value::Null) => {}
        Some(n) if n.as_u64() == Some(1) => {}
        Some(n) => {
            return Err(format!(
                "`n` is {n}; this endpoint answers with one choice, so leave `n` out or set it to 1"
            ));
        }
    }
    let stream = match map.get("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            return Err(format!(
                "`stream` is {}; it must be true or false",
                crate::json::json_kind(other)
            ));
        }
    };
    let include_usage = map
        .get("stream_options")
        .and_then(|o| o.get("include_usage"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let tool_choice = map.remove("tool_choice").filter(|c| !c.is_null());
    for field in OWN_FIELDS {
        map.remove(*field);
    }
    Ok(ChatRequest {
        messages,
        client_tools,
        stream,
        tool_choice,
        include_usage,
        extra: map,
    })
}

/// Checks message `i`: a known role, and a content that is text, a list of parts, or absent
/// (an assistant's calls): anything else was passed on or dropped unseen (tour M: a number's
/// message vanished, an unknown role was answered as another).
fn check_message(i: usize, m: &Value) -> Result<(), String> {
    let Some(role) = m.get("role").and_then(Value::as_str) else {
        return Err(format!(
            "messages[{i}] has no `role`; every message is an object with a role (system, user, assistant, tool)"
        ));
    };
    if !ROLES.contains(&role) {
        return Err(format!(
            "messages[{i}].role is `{role}`; it must be one of {}",
            ROLES.join(", ")
        ));
    }
    match m.get("content") {
        // Only an assistant's message (its calls say it all) and the old `function` result may
        // go without text.
        None | Some(Value::Null) if role == "assistant" || role == "function" => Ok(()),
        None | Some(Value::Null) => Err(format!(
            "messages[{i}] ({role}) has no content; send its text as a string or a list of \
             content parts"
        )),
        Some(Value::String(_)) => Ok(()),
        Some(Value::Array(parts)) => check_parts(i, parts),
        Some(other) => Err(format!(
            "messages[{i}].content is {}; send a string or a list of content parts",
            crate::json::json_kind(other)
        )),
    }?;
    if role == "tool" && m.get("tool_call_id").and_then(Value::as_str).is_none() {
        return Err(format!(
            "messages[{i}] (tool) has no `tool_call_id`; a tool message answers the call with that id"
        ));
    }
    Ok(())
}

/// Checks the content parts of message `i`: each an object with a `type`, a text part with
/// its `text`.
fn check_parts(i: usize, parts: &[Value]) -> Result<(), String> {
    for (j, part) in parts.iter().enumerate() {
        let Some(kind) = part.get("type").and_then(Value::as_str) else {
            return Err(format!(
                "messages[{i}].content[{j}] is {}; each part is an object with a `type` (text, \
                 image_url, …)",
                if part.is_object() {
                    "an object with no `type`".to_string()
                } else {
                    crate::json::json_kind(part).to_string()
                }
            ));
        };
        if kind == "text" && part.get("text").and_then(Value::as_str).is_none() {
            return Err(format!(
                "messages[{i}].content[{j}] is a text part with no `text` string"
            ));
        }
    }
    Ok(())
}

/// Adds a `tool` message for every call in `messages` that has none (a client history cut
/// short), right after that call's other results. Returns how many were added.
pub(crate) fn close_orphans(messages: &mut Vec<Value>) -> usize {
    let mut added = 0;
    let mut i = 0;
    while i < messages.len() {
        let ids: Vec<String> = messages[i]
            .get("tool_calls")
            .and_then(Value::as_array)
            .map(|calls| {
                calls
                    .iter()
                    .filter_map(|c| c.get("id").and_then(Value::as_str).map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        i += 1;
        if ids.is_empty() {
            continue;
        }
        let mut answered = HashSet::new();
        while i < messages.len() && messages[i].get("role").and_then(Value::as_str) == Some("tool")
        {
            if let Some(id) = messages[i].get("tool_call_id").and_then(Value::as_str) {
                answered.insert(id.to_string());
            }
            i += 1;
        }
        for id in ids.into_iter().filter(|id| !answered.contains(id)) {
            messages.insert(
                i,
                json!({
                    "role": "tool",
                    "tool_call_id": id,
                    "content": "no result: this call was never answered, so it did not run",
                }),
            );
            i += 1;
            added += 1;
        }
    }
    added
}

/// How a loop ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Finish {
    /// Client-tool calls to hand back unexecuted (empty = a plain answer).
    pub(crate) client_calls: Vec<ToolCall>,
    /// `stop`, `length`, `tool_calls`, ... as the answer should say.
    pub finish_reason: String,
    /// Rounds of bot-tool calls run.
    pub rounds: u32,
    /// The tokens of every model request of the loop, summed; `None` when the model reported
    /// none.
    pub usage: Option<TokenUsage>,
}

/// The model side of the bridge: where `chat/completions` requests go.
#[derive(Clone)]
pub struct ChatBackend {
    /// The model client (the bot's).
    pub model: ModelClient,
    /// Most rounds of bot-tool calls per request.
    pub round_cap: u32,
}

/// One request's loop.
///
/// The client's messages go to the configured model with the bot's tools (and the client's
/// own `tools`, merged). While the model answers with calls to the bot's tools, the bridge
/// runs them — all calls of one response concurrently — appends the assistant message and
/// one `tool` message per call (in the response's order), and asks the model again. The loop
/// ends when:
/// - a response asks for no calls: its text is the answer;
/// - a response calls a **client** tool: the answer is an assistant message with those
///   calls, unexecuted (`finish_reason: "tool_calls"`), for the client to run. Bot-tool calls
///   in that same response are run first; they and the bot rounds before are kept
///   ([`HeldRounds`]): when the client's next request brings its calls back, they go back
///   around them with their results, so the model sees everything it was given;
/// - the round cap is reached: the answer is the text so far plus a sentence saying the
///   loop was stopped and why.
///
/// Rules that keep the conversation well formed:
/// - every call the bridge runs gets a `tool` message, also when its arguments are not JSON or
///   its tool does not exist (the message says so), so no call is ever left orphaned; calls
///   in the client's own history left without a result get one too before the model sees it;
/// - the presence of `tool_calls` decides whether a round happened, never `finish_reason`
///   alone (some servers say `stop` next to calls);
/// - a client tool whose name equals a bot tool's wins: the bot's is not offered for that
///   request;
/// - the client's `tool_choice` applies to the first model request only (forcing a tool on
///   every round would loop until the cap).
///
/// The text of every round is the answer's text (a blank line between rounds), streamed as
/// it arrives when the client asked for `stream: true`.
pub(crate) struct ChatLoop {
    backend: ChatBackend,
    caller: Caller,
    bus: Bus,
    held: Arc<HeldRounds>,
}

impl ChatLoop {
    /// A loop over `backend` running bot tools through `caller`, keeping the bot calls of
    /// mixed responses in `held`.
    pub fn new(backend: ChatBackend, caller: Caller, bus: Bus, held: Arc<HeldRounds>) -> Self {
        Self {
            backend,
            caller,
            bus,
            held,
        }
    }

    /// The model name answers carry.
    pub(crate) fn model_name(&self) -> &str {
        &self.backend.model.config().model
    }

    /// Runs the loop for `request`; `on_text` gets every piece of answer text as it comes.
    ///
    /// # Errors
    /// The model request failed (the answer's text so far was already given to `on_text`).
    pub async fn run(
        &self,
        request: ChatRequest,
        on_text: &mut (dyn FnMut(String) + Send),
    ) -> Result<Finish, ModelError> {
        let listing = self.caller.catalog().listing();
        let client_names = request.client_names();
        let mut tools = request.client_tools.clone();
        tools.extend(
            listing
                .entries()
                .iter()
                .filter(|e| !client_names.contains(&e.openai_name))
                .map(|e| e.function.clone()),
        );
        let mut messages = request.messages;
        let restored = self.held.restore(&mut messages);
        if restored > 0 {
            tracing::debug!(
                restored,
                "chat/completions: put back the bot calls of a round that also called client tools"
            );
        }
        let closed = close_orphans(&mut messages);
        if closed > 0 {
            tracing::debug!(
                closed,
                "chat/completions: gave unanswered tool calls in the history a result"
            );
        }
        let mut extra = request.extra;
        if let Some(choice) = request.tool_choice {
            extra.insert("tool_choice".into(), choice);
        }
        // What the client sent ends here: the loop's bot rounds come after.
        let asked_len = messages.len();
        let mut rounds = 0u32;
        let mut wrote_text = false;
        let mut usage: Option<TokenUsage> = None;
        loop {
            let mut round_started = false;
            let started = Instant::now();
            let mut first_piece = None;
            let mut info = crate::observe::ModelResponseInfo::default();
            let result = self
                .backend
                .model
                .stream_reporting(
                    messages.clone(),
                    tools.clone(),
                    &extra,
                    &mut |piece| {
                        if piece.is_empty() {
                            return;
                        }
                        first_piece.get_or_insert_with(|| started.elapsed());
                        if wrote_text && !round_started {
                            on_text("\n\n".to_string());
                        }
                        round_started = true;
                        on_text(piece);
                    },
                    &mut info,
                )
                .await;
            wrote_text |= round_started;
            extra.remove("tool_choice");
            if let Some(reported) = &info.usage {
                usage.get_or_insert_with(TokenUsage::default).add(reported);
            }
            self.bus.publish_with(|| Event::ModelRequest {
                session: 0,
                turn: 0,
                first_piece_us: first_piece.map(|d| d.as_micros() as u64),
                total_us: started.elapsed().as_micros() as u64,
                error: result.as_ref().err().map(|e| e.to_string()),
                at_us: crate::observe::event::now_us()
                    .saturating_sub(started.elapsed().as_micros() as u64),
                response: info.clone(),
                // The bridge's requests belong to no session; their bodies are not recorded.
                request: None,
                answer: None,
            });
            let completion = result?;
            if completion.tool_calls.is_empty() {
                let finish_reason = match completion.finish_reason.as_deref() {
                    None | Some("tool_calls") | Some("function_call") => "stop".to_string(),
                    Some(other) => other.to_string(),
                };
                return Ok(Finish {
                    client_calls: Vec::new(),
                    finish_reason,
                    rounds,
                    usage,
                });
            }
            let (client, own): (Vec<ToolCall>, Vec<ToolCall>) = completion
                .tool_calls
                .into_iter()
                .partition(|c| client_names.contains(&c.name));
            if !client.is_empty() {
                // The bot's calls of the same response run now (a round, within the cap). They
                // and the bot rounds before wait for the client's calls to come back: those go
                // out under ids of the bridge's own, so only this answer's history brings them.
                let mut client = client;
                let mut ran = Vec::new();
                if !own.is_empty() && rounds < self.backend.round_cap {
                    rounds += 1;
                    let listing = &listing;
                    let outcomes = join_all(own.iter().map(|call| {
                        let arguments =
                            arguments_of(&call.name, Value::String(call.arguments.clone()));
                        self.caller.call(listing, &call.name, arguments)
                    }))
                    .await;
                    ran = own
                        .into_iter()
                        .zip(outcomes.into_iter().map(|o| o.text))
                        .collect();
                }
                let earlier = &messages[asked_len..];
                if !ran.is_empty() || !earlier.is_empty() {
                    for call in &mut client {
                        call.id = bridge_call_id();
                    }
                    self.held.hold(Round {
                        asked: &messages[..asked_len],
                        earlier,
                        client: &client,
                        own: ran,
                    });
                }
                return Ok(Finish {
                    client_calls: client,
                    finish_reason: "tool_calls".into(),
                    rounds,
                    usage,
                });
            }
            if rounds >= self.backend.round_cap {
                let note = format!(
                    "[stopped: the model asked for round {} of tool calls and this endpoint allows {} per request \
                     (the bot's round_cap); the last calls ({}) were not run. Ask again, more narrowly, or raise round_cap]",
                    rounds + 1,
                    self.backend.round_cap,
                    own.iter()
                        .map(|c| c.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                on_text(if wrote_text {
                    format!("\n\n{note}")
                } else {
                    note
                });
                return Ok(Finish {
                    client_calls: Vec::new(),
                    finish_reason: "stop".into(),
                    rounds,
                    usage,
                });
            }
            rounds += 1;
            let outcomes = join_all(own.iter().map(|call| {
                let arguments = arguments_of(&call.name, Value::String(call.arguments.clone()));
                self.caller.call(&listing, &call.name, arguments)
            }))
            .await;
            messages.push(json!({
                "role": "assistant",
                "content": if completion.text.is_empty() { Value::Null } else { Value::String(completion.text) },
                "tool_calls": own.iter().map(tool_call_json).collect::<Vec<_>>(),
            }));
            for (call, outcome) in own.iter().zip(outcomes) {
                messages.push(json!({
                    "role": "tool",
                    "tool_call_id": call.id,
                    "content": outcome.text,
                }));
            }
        }
    }
}

#[cfg(test)]
#[path = "chat_tests.rs"]
mod tests;
