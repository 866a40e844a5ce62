//! The bridge's HTTP routes: `GET /v1/tools`, `POST /v1/execute`, and with a model
//! `POST /v1/chat/completions` and `GET /v1/models`; each request is published as an
//! `Event::Served`. The routes carry no guard of their own: the embedded and the standalone
//! bridge are both wrapped like `/mcp` (Host/Origin, bearer token, body limit).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{RawQuery, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::Value;

use super::OpenAiBridge;
use super::chat::{self, ChatLoop};
use super::execute;
use super::wire::{self, AnswerId};
use crate::observe::Event;
use crate::observe::event::Name;

/// The routes of `bridge`.
pub fn routes(bridge: Arc<OpenAiBridge>) -> Router {
    let mut router = Router::new()
        .route("/v1/tools", get(list_tools))
        .route("/v1/execute", post(execute_call));
    if bridge.chat.is_some() {
        router = router
            .route("/v1/chat/completions", post(chat_completions))
            .route("/v1/models", get(models));
    } else {
        // An OpenAI client pointed here for chat got axum's bare 404 and nothing of why.
        router = router
            .route("/v1/chat/completions", post(no_model))
            .route("/v1/models", get(no_model));
    }
    router.with_state(bridge)
}

/// `/v1/chat/completions` and `/v1/models` of a bridge without a model (`turnscope bridge
/// openai`): a 404 in OpenAI's envelope saying what it serves and where chat is served.
async fn no_model() -> Response {
    json_response(
        StatusCode::NOT_FOUND,
        &wire::error_body(
            "this bridge has no model: it serves GET /v1/tools and POST /v1/execute only. \
             Chat completions with the bot's tools are served by the turnscope server itself \
             (`turnscope` or `turnscope --headless`) at its /v1/chat/completions",
            "invalid_request_error",
        ),
    )
}

impl OpenAiBridge {
    /// Publishes `Event::Served` for a request: a failed one (`failed`: what the client was
    /// told) with its time and reason, as the MCP server's are; a success carries neither.
    fn served(&self, route: &'static str, started: Instant, failed: Option<&str>) {
        self.bus.publish_with(|| Event::Served {
            route: Name::Borrowed(route),
            duration_us: started.elapsed().as_micros() as u64,
            ok: failed.is_none(),
            error: failed.map(str::to_string),
            session: None,
            at_us: if failed.is_some() {
                crate::observe::event::now_us()
            } else {
                0
            },
            probe: false,
        });
    }
}

fn json_response(status: StatusCode, value: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

fn bad_request(message: &str) -> Response {
    json_response(
        StatusCode::BAD_REQUEST,
        &wire::error_body(message, "invalid_request_error"),
    )
}

/// `GET /v1/tools`: the OpenAI `tools` array; with `?strict=true`, each tool's strict-mode
/// version (`"strict": true`) where one exists, the others with `"strict": false`, named in
/// the `x-turnscope-not-strict` header.
async fn list_tools(
    State(bridge): State<Arc<OpenAiBridge>>,
    RawQuery(query): RawQuery,
) -> Response {
    let started = Instant::now();
    let listing = bridge.caller.catalog().listing();
    let strict = query.as_deref().is_some_and(|q| {
        q.split('&')
            .any(|pair| matches!(pair, "strict" | "strict=true" | "strict=1"))
    });
    bridge.served("GET /v1/tools", started, None);
    if !strict {
        return ([(header::CONTENT_TYPE, "application/json")], listing.body()).into_response();
    }
    let (body, not_strict) = bridge.caller.catalog().strict(&listing);
    let mut response = ([(header::CONTENT_TYPE, "application/json")], body).into_response();
    if !not_strict.is_empty()
        && let Ok(names) = header::HeaderValue::from_str(&not_strict.join(", "))
    {
        response
            .headers_mut()
            .insert("x-turnscope-not-strict", names);
    }
    response
}

async fn execute_call(State(bridge): State<Arc<OpenAiBridge>>, body: Bytes) -> Response {
    const ROUTE: &str = "POST /v1/execute";
    let started = Instant::now();
    let request = match execute::parse_request(&body) {
        Ok(request) => request,
        Err(message) => {
            bridge.served(ROUTE, started, Some(&message));
            return bad_request(&message);
        }
    };
    let caller = bridge.caller();
    let listing = caller.catalog().listing();
    let outcome = caller
        .call(&listing, &request.name, request.arguments)
        .await;
    bridge.served(
        ROUTE,
        started,
        outcome.is_error.then_some(outcome.text.as_str()),
    );
    json_response(StatusCode::OK, &execute::answer(&outcome))
}

async fn models(State(bridge): State<Arc<OpenAiBridge>>) -> Response {
    let started = Instant::now();
    let name = bridge
        .chat_backend()
        .map(|c| c.model.config().model.clone())
        .unwrap_or_default();
    bridge.served("GET /v1/models", started, None);
    json_response(StatusCode::OK, &wire::models(&name))
}

async fn chat_completions(State(bridge): State<Arc<OpenAiBridge>>, body: Bytes) -> Response {
    const ROUTE: &str = "POST /v1/chat/completions";
    let started = Instant::now();
    let Some(backend) = bridge.chat_backend() else {
        return no_model().await;
    };
    let request = match chat::parse_request(&body) {
        Ok(request) => request,
        Err(message) => {
            bridge.served(ROUTE, started, Some(&message));
            return bad_request(&message);
        }
    };
    let chat_loop = ChatLoop::new(backend, bridge.caller(), bridge.bus.clone(), bridge.held());
    let id = AnswerId::new(chat_loop.model_name());
    if request.stream {
        return stream(bridge, chat_loop, id, request, started);
    }
    let mut text = String::new();
    let result = chat_loop
        .run(request, &mut |piece| text.push_str(&piece))
        .await;
    let failed = result.as_ref().err().map(ToString::to_string);
    bridge.served(ROUTE, started, failed.as_deref());
    match result {
        Ok(finish) => json_response(
            StatusCode::OK,
            &id.completion(
                &text,
                &finish.client_calls,
                &finish.finish_reason,
                finish.usage.as_ref(),
            ),
        ),
        Err(e) => json_response(
            StatusCode::BAD_GATEWAY,
            &wire::error_body(&e.to_string(), "upstream_error"),
        ),
    }
}

/// Aborts the loop's task when the response body is dropped (the client went away).
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Publishes a streamed answer's `Served` event once, when its task ends: `failed` as set
/// (none once it answered), or failed when the task is aborted (the client went away
/// mid-answer).
struct ServedOnDrop {
    bridge: Arc<OpenAiBridge>,
    started: Instant,
    failed: Option<String>,
}

impl Drop for ServedOnDrop {
    fn drop(&mut self) {
        self.bridge.served(
            "POST /v1/chat/completions",
            self.started,
            self.failed.as_deref(),
        );
    }
}

/// Runs the loop in its own task, streaming each piece as a chunk as it comes.
fn stream(
    bridge: Arc<OpenAiBridge>,
    chat_loop: ChatLoop,
    id: AnswerId,
    request: chat::ChatRequest,
    started: Instant,
) -> Response {
    // Unbounded on purpose: the loop hands pieces over synchronously, so the model's stream
    // never waits on a slow HTTP client; what queues is bounded by one answer (at most
    // `round_cap` model responses), and the task is aborted when the client goes away.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Bytes>();
    let _ = tx.send(id.role_chunk());
    let mut served = ServedOnDrop {
        bridge,
        started,
        failed: Some("the client went away before the answer ended".into()),
    };
    let include_usage = request.include_usage;
    let task = tokio::spawn(async move {
        let pieces = tx.clone();
        let piece_id = id.clone();
        let result = chat_loop
            .run(request, &mut |piece| {
                let _ = pieces.send(piece_id.text_chunk(&piece));
            })
            .await;
        served.failed = match result {
            Ok(finish) => {
                if !finish.client_calls.is_empty() {
                    let _ = tx.send(id.calls_chunk(&finish.client_calls));
                }
                let _ = tx.send(id.finish_chunk(&finish.finish_reason));
                // OpenAI's shape: the usage chunk after the finish, before [DONE]. None when
                // the model reported no usage: zeros would be a count nobody made.
                if include_usage && let Some(usage) = &finish.usage {
                    let _ = tx.send(id.usage_chunk(usage));
                }
                None
            }
            Err(e) => {
                let _ = tx.send(wire::error_event(&e.to_string(), "upstream_error"));
                Some(e.to_string())
            }
        };
        let _ = tx.send(wire::done_event());
        drop(served);
    });
    let guard = AbortOnDrop(task.abort_handle());
    let body = futures::stream::poll_fn(move |cx| {
        let _alive = &guard;
        rx.poll_recv(cx)
            .map(|next| next.map(Ok::<Bytes, Infallible>))
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(body))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}
