//! The embedded model's HTTP server: `/v1/models` and `/v1/chat/completions` (streaming and
//! not) in the OpenAI wire format, on a loopback socket so bots use the real client path.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use futures::channel::mpsc;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::scripted::{Answer, ScriptSettings, answer, answer_tokens, call_id, prompt_tokens};

/// Name the scripted model reports.
pub(crate) const MODEL_NAME: &str = "turnscope-scripted";

/// A running embedded model server.
pub struct EmbeddedModel {
    /// Address it listens on.
    pub addr: SocketAddr,
    stop: CancellationToken,
}

impl EmbeddedModel {
    /// Starts the scripted model on `127.0.0.1:port` (0 = any free port).
    pub async fn start(port: u16, settings: ScriptSettings) -> std::io::Result<Self> {
        let listener = crate::net::listen("127.0.0.1", port).await?;
        let addr = listener.local_addr()?;
        let stop = CancellationToken::new();
        let token = stop.clone();
        tokio::spawn(async move {
            let app = router(settings);
            let _ = axum::serve(
                listener.tap_io(|tcp| {
                    // Small SSE writes must leave at once; Nagle would hold them ~40 ms.
                    let _ = tcp.set_nodelay(true);
                }),
                app,
            )
            .with_graceful_shutdown(token.cancelled_owned())
            .await;
        });
        Ok(Self { addr, stop })
    }

    /// Base URL for clients, ending in `/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }
}

impl Drop for EmbeddedModel {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Largest request body the scripted model reads. axum's default (2 MiB) is smaller than the
/// history of one conversation whose lines the MCP server accepts (each up to its 4 MiB body
/// limit), and a model that refuses the history refuses every later line of it; this one has
/// no context window to model, so it takes what a conversation of such lines sends.
pub const MAX_REQUEST_BYTES: usize = 64 * 1024 * 1024;

/// The scripted model's routes.
pub fn router(settings: ScriptSettings) -> Router {
    Router::new()
        .route("/v1/models", get(models))
        .route("/v1/chat/completions", post(completions))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_REQUEST_BYTES))
        .with_state(Arc::new(settings))
}

async fn models() -> impl IntoResponse {
    axum::Json(json!({
        "object": "list",
        "data": [{"id": MODEL_NAME, "object": "model", "created": 0, "owned_by": "turnscope"}]
    }))
}

fn bad_request(message: String) -> Response {
    (
        StatusCode::BAD_REQUEST,
        axum::Json(json!({"error": {"message": message, "type": "invalid_request_error"}})),
    )
        .into_response()
}

/// The roles a chat.completions message may have, as OpenAI takes them
/// (`developer` is OpenAI's newer name for `system`, `function` its older tool result); the
/// OpenAI bridge holds its clients' messages to the same list.
pub(crate) const ROLES: [&str; 6] = [
    "system",
    "developer",
    "user",
    "assistant",
    "tool",
    "function",
];

/// The first message that is no object or has a role OpenAI does not take, said as the 400
/// it answers with: the scripted model answered it, so a request edited by hand (`e` in the
/// turn view) with a typo in a role passed here unseen.
fn unknown_role(messages: &[Value]) -> Option<String> {
    messages.iter().enumerate().find_map(|(i, message)| {
        match message.get("role").and_then(Value::as_str) {
            Some(role) if ROLES.contains(&role) => None,
            Some(role) => Some(format!(
                "messages[{i}].role `{role}` is not a role; expected one of {}",
                ROLES.join(", ")
            )),
            None => Some(format!(
                "messages[{i}] has no `role`; each message is an object with a role ({})",
                ROLES.join(", ")
            )),
        }
    })
}

async fn completions(State(settings): State<Arc<ScriptSettings>>, body: Bytes) -> Response {
    let request: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return bad_request(format!(
                "request body is not JSON: {e}; send a chat.completions request object"
            ));
        }
    };
    let Some(messages) = request.get("messages").and_then(Value::as_array) else {
        return bad_request(
            "`messages` is missing or not an array; send at least one message".into(),
        );
    };
    if let Some(refusal) = unknown_role(messages) {
        return bad_request(refusal);
    }
    let tools = request
        .get("tools")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let model = request
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or(MODEL_NAME)
        .to_string();
    let stream = request
        .get("stream")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let limit = ["max_completion_tokens", "max_tokens"]
        .iter()
        .find_map(|k| request.get(*k).and_then(Value::as_u64));
    let include_usage = request
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let mut reply = answer(messages, &tools, &settings);
    let mut finish = match &reply {
        Answer::Text(_) => "stop",
        Answer::Calls(_) => "tool_calls",
    };
    // A text answer longer than the token limit is cut, as a real server cuts it; calls are
    // sent whole (a cut call would only be invalid JSON).
    if let (Answer::Text(pieces), Some(limit)) = (&mut reply, limit)
        && pieces.len() as u64 > limit
    {
        pieces.truncate(limit as usize);
        finish = "length";
    }
    let (prompt, completion) = (prompt_tokens(messages, &tools), answer_tokens(&reply));
    let usage = json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    });
    let ids: Vec<String> = match &reply {
        Answer::Calls(calls) => (0..calls.len()).map(|i| call_id(messages, i)).collect(),
        Answer::Text(_) => Vec::new(),
    };
    if stream {
        let usage = include_usage.then_some(usage);
        stream_answer(reply, ids, finish, usage, model, settings.pace)
    } else {
        axum::Json(whole_answer(reply, &ids, finish, usage, &model)).into_response()
    }
}

fn created() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn tool_call_json(id: String, name: &str, args: &str) -> Value {
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}})
}

fn whole_answer(reply: Answer, ids: &[String], finish: &str, usage: Value, model: &str) -> Value {
    let message = match reply {
        Answer::Text(pieces) => json!({"role": "assistant", "content": pieces.concat()}),
        Answer::Calls(calls) => json!({
            "role": "assistant",
            "content": null,
            "tool_calls": calls.iter().zip(ids).map(|((n, a), id)| tool_call_json(id.clone(), n, a)).collect::<Vec<_>>(),
        }),
    };
    json!({
        "id": "chatcmpl-turnscope",
        "object": "chat.completion",
        "created": created(),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage
    })
}

/// The events of a streamed answer, in order, each marked when it is a step of the answer
/// that waits for the pace first (a word; the calls, together).
fn stream_events(
    reply: Answer,
    ids: &[String],
    finish: &'static str,
    usage: Option<Value>,
    model: &str,
) -> Vec<(bool, Bytes)> {
    // Every event is the same head and its `choices` (and, last, `usage`): written as text
    // around the one value that changes, rather than built and serialized as a JSON tree per
    // word.
    let head = format!(
        "data: {{\"id\":\"chatcmpl-turnscope\",\"object\":\"chat.completion.chunk\",\"created\":{},\"model\":{},\"choices\":",
        created(),
        Value::from(model)
    );
    let event = |choices: &str, usage: Option<Value>| {
        let mut text = String::with_capacity(head.len() + choices.len() + 8);
        text.push_str(&head);
        text.push_str(choices);
        if let Some(usage) = usage {
            // The final usage chunk OpenAI sends for `stream_options.include_usage`.
            text.push_str(",\"usage\":");
            text.push_str(&usage.to_string());
        }
        text.push_str("}\n\n");
        Bytes::from(text)
    };
    let chunk = |delta: Value, finish: Option<&str>| {
        let finish = finish.map_or(Value::Null, Value::from);
        event(
            &format!("[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}]"),
            None,
        )
    };
    let mut events = vec![(
        false,
        chunk(json!({"role": "assistant", "content": ""}), None),
    )];
    match reply {
        Answer::Text(pieces) => {
            events.extend(
                pieces
                    .iter()
                    .map(|piece| (true, chunk(json!({"content": piece}), None))),
            );
        }
        Answer::Calls(calls) => {
            for (i, ((name, args), id)) in calls.iter().zip(ids).enumerate() {
                let head = json!({"tool_calls": [{"index": i, "id": id, "type": "function",
                    "function": {"name": name, "arguments": ""}}]});
                let body = json!({"tool_calls": [{"index": i, "function": {"arguments": args}}]});
                // The calls come together, after one pace.
                events.push((i == 0, chunk(head, None)));
                events.push((false, chunk(body, None)));
            }
        }
    }
    events.push((false, chunk(json!({}), Some(finish))));
    if let Some(usage) = usage {
        events.push((false, event("[]", Some(usage))));
    }
    events.push((false, Bytes::from_static(b"data: [DONE]\n\n")));
    events
}

fn stream_answer(
    reply: Answer,
    ids: Vec<String>,
    finish: &'static str,
    usage: Option<Value>,
    model: String,
    pace: f64,
) -> Response {
    let events = stream_events(reply, &ids, finish, usage, &model);
    let response = Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache");
    let pace = Duration::from_secs_f64(pace.max(0.0));
    if pace.is_zero() {
        // Nothing to wait for: the whole stream in one body, one write (the same events a
        // client reads from a paced stream, without a task and a send per event).
        let mut body = Vec::with_capacity(events.iter().map(|(_, e)| e.len()).sum());
        for (_, event) in &events {
            body.extend_from_slice(event);
        }
        return response
            .body(Body::from(body))
            .expect("static response parts are valid");
    }
    let (mut tx, rx) = mpsc::channel::<Result<Bytes, Infallible>>(16);
    tokio::spawn(async move {
        use futures::SinkExt;
        // Words are due at fixed times from the start, so timer rounding never accumulates.
        let begun = tokio::time::Instant::now();
        let mut due = 0u32;
        for (paced, event) in events {
            if paced {
                due += 1;
                tokio::time::sleep_until(begun + pace * due).await;
            }
            if tx.send(Ok(event)).await.is_err() {
                return;
            }
        }
    });
    response
        .body(Body::from_stream(rx))
        .expect("static response parts are valid")
}
