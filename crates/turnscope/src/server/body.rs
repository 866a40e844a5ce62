//! Request bodies: each is read whole before any handler runs, within a size limit (413) and
//! a deadline (408). A client that sends too much, or trickles its body a byte at a time
//! (slow-loris), ends its own request without holding a handler, a session lock or memory
//! beyond the limit. Runs behind the guard, so an unauthenticated client cannot make the
//! server buffer anything.

use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, LengthLimitError, Limited};

/// Most bytes of a refused body read and thrown away before its 413 goes out. A server that
/// closes a connection with a body still arriving has the kernel reset it, and a client still
/// sending (the MCP Python SDK, any async HTTP client) then reads a reset instead of the
/// answer: `ReadError`, nothing of why. Past this much the connection is closed anyway.
const DRAINED_AT_MOST: u64 = 64 * 1024 * 1024;

/// How much and how slowly a request body may arrive.
#[derive(Debug, Clone, Copy)]
pub struct BodyRules {
    /// Largest body, in bytes.
    pub(crate) max_bytes: usize,
    /// Longest time from the request head to the body's last byte.
    pub timeout: Duration,
}

impl Default for BodyRules {
    /// 4 MiB within 30 s.
    fn default() -> Self {
        Self {
            max_bytes: 4 * 1024 * 1024,
            timeout: Duration::from_secs(30),
        }
    }
}

/// Middleware: buffers the body under [`BodyRules`], then hands the request on.
pub(crate) async fn read_whole(
    State(rules): State<BodyRules>,
    request: Request,
    next: Next,
) -> Response {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    // A client waiting for `100 Continue` has sent nothing yet: reading its body would make
    // hyper invite all of it. Told at once, and so is one declaring more than is drained.
    let waits_to_send = request
        .headers()
        .get(header::EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let started = tokio::time::Instant::now();
    let (parts, mut body) = request.into_parts();
    if let Some(declared) = declared.filter(|n| *n > rules.max_bytes as u64) {
        if waits_to_send || declared > DRAINED_AT_MOST {
            return refused_too_large(rules, true);
        }
        return too_large(rules, &mut body, started).await;
    }
    let read = Limited::new(&mut body, rules.max_bytes).collect();
    let bytes = match tokio::time::timeout(rules.timeout, read).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(err)) if err.is::<LengthLimitError>() => {
            return too_large(rules, &mut body, started).await;
        }
        Ok(Err(err)) => {
            return (
                StatusCode::BAD_REQUEST,
                format!(
                    "the request body could not be read ({err}); expected a complete body of at \
                     most {} bytes; send the request again",
                    rules.max_bytes
                ),
            )
                .into_response();
        }
        Err(_) => {
            return (
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the request body did not arrive within {:.0} s (server.body_timeout_seconds); \
                     send the whole body at once",
                    rules.timeout.as_secs_f64()
                ),
            )
                .into_response();
        }
    };
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// The 413, once what is still arriving of the refused `body` was read and thrown away (at
/// most [`DRAINED_AT_MOST`] bytes, within what is left of the body's deadline since
/// `started`), so the client reads it; one that sends more is told and cut off.
async fn too_large(rules: BodyRules, body: &mut Body, started: tokio::time::Instant) -> Response {
    let drain = async {
        let mut thrown = 0u64;
        while let Some(Ok(frame)) = body.frame().await {
            thrown += frame.data_ref().map_or(0, |d| d.len() as u64);
            if thrown > DRAINED_AT_MOST {
                return false;
            }
        }
        true
    };
    let drained = tokio::time::timeout_at(started + rules.timeout, drain)
        .await
        .unwrap_or(false);
    refused_too_large(rules, !drained)
}

/// The 413's words; `close`: the connection goes with it (a body not read to its end).
fn refused_too_large(rules: BodyRules, close: bool) -> Response {
    let mut response = (
        StatusCode::PAYLOAD_TOO_LARGE,
        format!(
            "the request body is larger than the server's limit of {} bytes \
             (server.max_body_bytes); send a smaller request or raise the limit",
            rules.max_bytes
        ),
    )
        .into_response();
    if close {
        response.headers_mut().insert(
            header::CONNECTION,
            header::HeaderValue::from_static("close"),
        );
    }
    response
}
