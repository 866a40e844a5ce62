//! The refusals of the guard and the body rules (400, 401, 403, 408, 413, 421: plain text, as
//! `/mcp`'s clients read them) told as OpenAI's error envelope under `/v1/`, where the OpenAI
//! bridge's clients look for `{"error": {"message", "type", "param", "code"}}`: the OpenAI SDKs
//! show that message and map the status to their own error classes, but a plain-text body
//! reached them only as a raw string, or as "could not parse".
//!
//! A layer of its own, outside the guard, because the guard answers before any route runs:
//! no route of the bridge ever sees these requests.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use http_body_util::BodyExt;
use serde_json::json;

/// The prefix of the OpenAI-compatible routes (the bridge's `/v1/tools`, `/v1/execute`,
/// `/v1/chat/completions`, `/v1/models`).
const OPENAI_PREFIX: &str = "/v1/";

/// Most bytes of a plain-text refusal rewritten; the guard's and body rules' words are a few
/// hundred bytes, so anything longer is left as it came.
const MOST_REWRITTEN: usize = 16 * 1024;

/// Middleware: under `/v1/`, a plain-text error answer becomes the same message in OpenAI's
/// error envelope, with its status and headers kept (`WWW-Authenticate`, `Connection: close`).
pub(crate) async fn as_openai_json(request: Request, next: Next) -> Response {
    let openai = request.uri().path().starts_with(OPENAI_PREFIX);
    let response = next.run(request).await;
    if !openai || !is_plain_text_error(&response) {
        return response;
    }
    // Longer than any refusal of ours (or of unknown length): not one of them, left as it is.
    let short = http_body::Body::size_hint(response.body())
        .upper()
        .is_some_and(|n| n <= MOST_REWRITTEN as u64);
    if !short {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(collected) = body.collect().await else {
        // A body that failed to arrive: said by its status alone, nothing claimed of its size.
        parts.headers.remove(header::CONTENT_LENGTH);
        return Response::from_parts(parts, Body::empty());
    };
    let text = String::from_utf8_lossy(&collected.to_bytes())
        .trim_end()
        .to_string();
    let (kind, code) = kind_and_code(parts.status);
    let envelope = json!({"error": {"message": text, "type": kind, "param": null, "code": code}});
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(envelope.to_string()))
}

/// A 4xx or 5xx answer whose body is plain text (what the guard and body rules send).
fn is_plain_text_error(response: &Response) -> bool {
    let status = response.status();
    (status.is_client_error() || status.is_server_error())
        && response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/plain"))
}

/// OpenAI's `type` and `code` for a refusal's status.
fn kind_and_code(status: StatusCode) -> (&'static str, &'static str) {
    match status {
        StatusCode::UNAUTHORIZED => ("authentication_error", "invalid_api_key"),
        StatusCode::FORBIDDEN | StatusCode::MISDIRECTED_REQUEST => {
            ("permission_error", "host_or_origin_not_allowed")
        }
        StatusCode::PAYLOAD_TOO_LARGE => ("invalid_request_error", "request_too_large"),
        StatusCode::REQUEST_TIMEOUT => ("invalid_request_error", "request_timeout"),
        _ if status.is_server_error() => ("server_error", "server_error"),
        _ => ("invalid_request_error", "invalid_request"),
    }
}
