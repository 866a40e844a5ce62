//! JSON-RPC errors as the spec says, checked in front of rmcp's streamable HTTP service at
//! `/mcp`: not JSON → 400 with -32700, an invalid request → 400 with -32600, bad `tools/call`
//! params → -32602, an `initialize` with bad params → 400 with -32602, a `chat` whose
//! `Mcp-Param-Handle` header is not its handle → 400 with -32020, `DELETE` of an unknown
//! session → 404 and of a live one → 204, a resume of a stream this replica does not keep →
//! 404. [`check`] states the rules and why rmcp cannot be configured to do this.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde_json::{Value, json};

use super::resume::ReplayStore;
use crate::observe::redact::id_prefix;

/// JSON-RPC error code: the body is not JSON.
pub(crate) const PARSE_ERROR: i64 = -32700;
/// JSON-RPC error code: the body is JSON but not a valid request.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC error code: a request (`tools/call`, `initialize`) whose params do not fit.
pub const INVALID_PARAMS: i64 = -32602;
/// MCP error code (2026-07-28): a standard header (`Mcp-Param-Handle`) that contradicts the
/// body.
pub(crate) const HEADER_MISMATCH: i64 = -32020;

const SESSION_HEADER: &str = "mcp-session-id";

fn error_body(id: Value, code: i64, message: String) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

fn answer(status: StatusCode, body: Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn is_json(request: &Request) -> bool {
    request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .eq_ignore_ascii_case("application/json")
        })
}

/// A usable JSON-RPC id for an error answer: a string or number, else `null`.
fn id_of(message: &serde_json::Map<String, Value>) -> Value {
    match message.get("id") {
        Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
        _ => Value::Null,
    }
}

/// What is wrong with one message, as (code, id, text); `None` when it may go on to rmcp.
fn check_message(value: &Value) -> Option<(i64, Value, String)> {
    let invalid = |id: Value, text: String| Some((INVALID_REQUEST, id, text));
    let message = match value {
        Value::Array(_) => {
            return invalid(
                Value::Null,
                "Invalid Request: JSON-RPC batches are not accepted (this server offers MCP \
                 2024-11-05, 2025-06-18, 2025-11-25 and 2026-07-28, which have none; not \
                 2025-03-26); send one message per POST"
                    .into(),
            );
        }
        Value::Object(message) => message,
        other => {
            return invalid(
                Value::Null,
                format!(
                    "Invalid Request: expected a JSON-RPC message object; received {}",
                    crate::json::json_kind(other)
                ),
            );
        }
    };
    let id = id_of(message);
    if message.get("jsonrpc") != Some(&Value::String("2.0".into())) {
        return invalid(
            id,
            format!(
                "Invalid Request: \"jsonrpc\" must be \"2.0\"; received {}",
                message
                    .get("jsonrpc")
                    .map_or("nothing".to_string(), |v| v.to_string())
            ),
        );
    }
    if message.get("id") == Some(&Value::Null) {
        return invalid(
            Value::Null,
            "Invalid Request: \"id\" must be a string or a number, not null (leave it out for a \
             notification)"
                .into(),
        );
    }
    if message.get("method") == Some(&Value::String("tools/call".into())) {
        let params = message.get("params");
        let problem = match params {
            Some(Value::Object(params)) => match (params.get("name"), params.get("arguments")) {
                (Some(Value::String(_)), None | Some(Value::Null | Value::Object(_))) => None,
                (Some(Value::String(_)), Some(other)) => Some(format!(
                    "params.arguments must be an object; received {}",
                    crate::json::json_kind(other)
                )),
                (None, _) => Some("params.name is missing".to_string()),
                (Some(other), _) => Some(format!(
                    "params.name must be a string; received {}",
                    crate::json::json_kind(other)
                )),
            },
            Some(other) => Some(format!(
                "params must be an object; received {}",
                crate::json::json_kind(other)
            )),
            None => Some("params is missing".to_string()),
        };
        if let Some(problem) = problem {
            return Some((
                INVALID_PARAMS,
                id,
                format!(
                    "Invalid params: {problem}. Expected {{\"name\": \"start\" | \"chat\", \"arguments\": {{...}}}}"
                ),
            ));
        }
    }
    None
}

/// rmcp's answer to a JSON body it cannot read as a client message (HTTP 415 with its serde
/// error; the Content-Type was checked before), as the JSON-RPC answer: 400 with -32600. Any
/// other answer passes unchanged. Judged from rmcp's answer rather than by parsing the
/// message a second time here: rmcp's untagged message types cost tens of thousands of
/// instructions a parse, on every request of every turn.
async fn unreadable_as_invalid_request(response: Response, id: Value) -> Response {
    if response.status() != StatusCode::UNSUPPORTED_MEDIA_TYPE {
        return response;
    }
    let text = axum::body::to_bytes(response.into_body(), 64 * 1024)
        .await
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let detail = text
        .strip_prefix("fail to deserialize request body ")
        .unwrap_or(&text);
    answer(
        StatusCode::BAD_REQUEST,
        error_body(
            id,
            INVALID_REQUEST,
            format!("Invalid Request: not a JSON-RPC request, notification or response ({detail})"),
        ),
    )
}

fn session_of(headers: &axum::http::HeaderMap) -> Option<String> {
    headers
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// Whether a message names its revision in its own `_meta` (2026-07-28 on: no session).
fn speaks_per_request(value: &Value) -> bool {
    value["params"]["_meta"]
        .get("io.modelcontextprotocol/protocolVersion")
        .is_some()
}

async fn known(sessions: &LocalSessionManager, id: &str) -> bool {
    sessions
        .has_session(&id.to_string().into())
        .await
        .unwrap_or(false)
}

/// What this layer asks: the session manager rmcp's service uses and its replay store.
#[derive(Clone)]
pub(crate) struct Known {
    /// rmcp's sessions.
    pub(crate) sessions: Arc<LocalSessionManager>,
    /// The response-stream events kept for resumption.
    pub(crate) replay: Arc<ReplayStore>,
}

/// The middleware (state: [`Known`]).
///
/// rmcp 3.11 answers a body it cannot deserialize with HTTP 415 and a plain-text message,
/// turns a `tools/call` whose params do not fit its type into an unknown custom method
/// (-32601), and answers every `DELETE` with 202 — known or not. None of that is reachable
/// through its configuration, so this layer looks at the message first:
/// - not JSON → 400 with a -32700 parse error;
/// - a batch, a non-object, `jsonrpc` other than "2.0", a `null` id, or a message rmcp
///   cannot read → 400 with a -32600 invalid request;
/// - `tools/call` on a live session with no string `name`, or `arguments` that is not an
///   object → a -32602 invalid-params response (200, as every JSON-RPC answer on this route);
/// - a `chat` call whose `Mcp-Param-Handle` header is not its `handle` argument → 400 with
///   -32020 (`param_header`; rmcp's own check would require the header of every client);
/// - `initialize` whose params rmcp cannot read, which it answers "Session ID is required"
///   (or 415) → 400 with -32602 naming the field at fault;
/// - `tasks/get`, `tasks/update`, `tasks/cancel` refused by rmcp's own check (`-32601` with
///   the method's name alone when tasks are off, `-32021` "Missing required client
///   capability") → the same code and data, turnscope's message (`tasks_refusals`);
/// - `DELETE` of a session that does not exist → 404; a successful `DELETE` → 204;
/// - `GET` resuming a stream (`Last-Event-ID`) of a session or a stream this replica does
///   not know → 404 (rmcp would answer a sessionless one with an empty stream, which a
///   client retries forever when its replica died behind a load balancer); a stream another
///   MCP session opened (`owners`) → 404 (rmcp would replay it to anyone).
///
/// Batches: MCP 2025-03-26 is the only revision that requires receiving them (2025-06-18
/// removed them again). Rather than re-multiplex several requests' progress streams into one
/// batch answer, the server no longer offers 2025-03-26 (`BotMcp::supported_protocol_versions`):
/// a client asking for it is offered 2025-11-25, as the spec's version negotiation foresees.
pub(crate) async fn check(
    State(known_here): State<Known>,
    request: Request,
    next: Next,
) -> Response {
    let sessions = &known_here.sessions;
    if request.method() == Method::GET
        && let Some(last) = request
            .headers()
            .get("last-event-id")
            .and_then(|v| v.to_str().ok())
    {
        let unknown = match session_of(request.headers()) {
            Some(id) if known_here.replay.owned_by_another(last, &id) => {
                return (
                    StatusCode::NOT_FOUND,
                    format!(
                        "Not Found: event {} belongs to a stream another MCP session opened; a \
                         stream resumes only in the session whose request it answers. Resume it \
                         with that session's Mcp-Session-Id, or send the request again here.",
                        id_prefix(last)
                    ),
                )
                    .into_response();
            }
            Some(id) => {
                (!known(sessions, &id).await).then(|| format!("MCP session {}", id_prefix(&id)))
            }
            None => (!known_here.replay.knows(last))
                .then(|| format!("stream of event {}", id_prefix(last))),
        };
        if let Some(what) = unknown {
            return (
                StatusCode::NOT_FOUND,
                format!(
                    "Not Found: this replica keeps no {what}: it ended, or another replica served it \
                     (and may be gone). Send the request again on a new MCP session."
                ),
            )
                .into_response();
        }
    }
    if request.method() == Method::DELETE {
        if let Some(id) = session_of(request.headers())
            && !known(sessions, &id).await
        {
            return (
                StatusCode::NOT_FOUND,
                format!(
                    "Not Found: session {} does not exist (it ended, was deleted, or never \
                     existed); nothing to delete",
                    id_prefix(&id)
                ),
            )
                .into_response();
        }
        let mut response = next.run(request).await;
        if response.status() == StatusCode::ACCEPTED {
            *response.status_mut() = StatusCode::NO_CONTENT;
        }
        return response;
    }
    if request.method() != Method::POST || !is_json(&request) {
        let session = request.headers().get(SESSION_HEADER).cloned();
        return unknown_session_explained(next.run(request).await, session).await;
    }
    let (parts, body) = request.into_parts();
    // The body was read whole by `body::read_whole` (within its limit) before this layer.
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => bytes,
        Err(err) => {
            return (
                StatusCode::BAD_REQUEST,
                format!("the request body could not be read ({err}); send the request again"),
            )
                .into_response();
        }
    };
    let value: Value = match serde_json::from_slice(&bytes) {
        Ok(value) => value,
        Err(err) => {
            return answer(
                StatusCode::BAD_REQUEST,
                error_body(
                    Value::Null,
                    PARSE_ERROR,
                    format!(
                        "Parse error: the body is not JSON ({err}); expected one JSON-RPC message"
                    ),
                ),
            );
        }
    };
    let id = value.as_object().map(id_of).unwrap_or(Value::Null);
    if let Some(text) = super::param_header::mismatch(&parts.headers, &value) {
        return answer(
            StatusCode::BAD_REQUEST,
            error_body(id, HEADER_MISMATCH, text),
        );
    }
    if let Some((code, id, text)) = check_message(&value) {
        if code != INVALID_PARAMS {
            return answer(StatusCode::BAD_REQUEST, error_body(id, code, text));
        }
        // Invalid params is an ordinary answer to a request of a session that exists, or of a
        // sessionless 2026-07-28 request; anything else about the request (no or an unknown
        // session) is rmcp's to answer.
        let valid = match session_of(&parts.headers) {
            Some(session) => known(sessions, &session).await,
            None => speaks_per_request(&value),
        };
        if valid {
            return answer(StatusCode::OK, error_body(id, code, text));
        }
    }
    let session = parts.headers.get(SESSION_HEADER).cloned();
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    let response = if value.get("method").and_then(Value::as_str) == Some("initialize") {
        malformed_initialize_explained(response, &value, id).await
    } else {
        unreadable_as_invalid_request(response, id).await
    };
    let response = match super::tasks_refusals::task_method(&value) {
        Some(method) => {
            super::tasks_refusals::explain(response, method, speaks_per_request(&value))
        }
        None => response,
    };
    unknown_session_explained(response, session).await
}

/// rmcp's whole answer to a request without `Mcp-Session-Id` that is not an `initialize` it
/// can read.
const RMCP_SESSION_REQUIRED: &[u8] = b"Bad Request: Session ID is required";

/// rmcp reads an `initialize` whose params do not fit its type as some other request, which
/// needs a session, and answers "Session ID is required" (or, for params that are no object,
/// as no message at all: its 415): those answers to an `initialize` are rewritten as the
/// JSON-RPC one, -32602 naming the field at fault and what a valid `initialize` carries
/// (still 400: no session was opened). Only those answers are rewritten, after the fact, as
/// for the 404 below.
async fn malformed_initialize_explained(response: Response, value: &Value, id: Value) -> Response {
    let refused = match response.status() {
        StatusCode::UNSUPPORTED_MEDIA_TYPE => true,
        StatusCode::BAD_REQUEST => false,
        _ => return response,
    };
    let (parts, body) = response.into_parts();
    // Read whole (a line; the same bound as the 415 rewrite above).
    let bytes = axum::body::to_bytes(body, 64 * 1024)
        .await
        .unwrap_or_default();
    if !refused && bytes.as_ref() != RMCP_SESSION_REQUIRED {
        return Response::from_parts(parts, Body::from(bytes));
    }
    let text = super::mcp_errors::initialize_invalid(value.get("params"));
    answer(
        StatusCode::BAD_REQUEST,
        error_body(id, INVALID_PARAMS, text),
    )
}

/// rmcp's whole answer to a request on an MCP session it does not know.
const RMCP_UNKNOWN_SESSION: &[u8] = b"Not Found: Session not found";

/// rmcp's 404 for an unknown `Mcp-Session-Id` says only "Session not found": this one says
/// which (by its prefix), the likely reasons, and what to do. Only that answer is rewritten,
/// after the fact, so a request on a live session pays one status check.
async fn unknown_session_explained(
    response: Response,
    session: Option<axum::http::HeaderValue>,
) -> Response {
    let Some(session) = session else {
        return response;
    };
    if response.status() != StatusCode::NOT_FOUND {
        return response;
    }
    let (parts, body) = response.into_parts();
    // Read whole (rmcp's 404 bodies are a line; the same bound as the 415 rewrite above).
    let bytes = axum::body::to_bytes(body, 64 * 1024)
        .await
        .unwrap_or_default();
    if bytes.as_ref() != RMCP_UNKNOWN_SESSION {
        return Response::from_parts(parts, Body::from(bytes));
    }
    let text = format!(
        "Not Found: Session not found: this server keeps no MCP session {} (it was deleted, \
         it was idle too long, or the server restarted since). Send initialize for a new MCP \
         session; handles are not tied to MCP sessions, so a live conversation's handle still \
         works there.",
        id_prefix(session.to_str().unwrap_or("?"))
    );
    let mut response = Response::from_parts(parts, Body::from(text));
    response.headers_mut().remove(header::CONTENT_LENGTH);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(v: Value) -> Option<i64> {
        check_message(&v).map(|(c, _, _)| c)
    }

    #[test]
    fn shapes_are_judged_as_the_spec_says() {
        assert_eq!(
            code(json!([{"jsonrpc": "2.0", "id": 1, "method": "ping"}])),
            Some(INVALID_REQUEST)
        );
        assert_eq!(code(json!(3)), Some(INVALID_REQUEST));
        assert_eq!(
            code(json!({"jsonrpc": "1.0", "id": 1, "method": "ping"})),
            Some(INVALID_REQUEST)
        );
        assert_eq!(
            code(json!({"jsonrpc": "2.0", "id": null, "method": "ping"})),
            Some(INVALID_REQUEST)
        );
        assert_eq!(
            code(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {}})),
            Some(INVALID_PARAMS)
        );
        assert_eq!(
            code(
                json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "chat", "arguments": "x"}})
            ),
            Some(INVALID_PARAMS)
        );
        assert_eq!(
            code(
                json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "chat"}})
            ),
            None
        );
        assert_eq!(
            code(json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})),
            None
        );
        assert_eq!(
            code(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})),
            None
        );
    }
}
