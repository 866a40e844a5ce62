//! The legacy SSE client transport against small hand-made servers: handshake errors,
//! header forwarding, lenient parsing and the end of the stream.

use std::{
    convert::Infallible,
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use crate::support::fixture::{Kind, RunningFixture};
use axum::{
    Json, Router,
    extract::State,
    http::{HeaderMap, StatusCode},
    response::{
        IntoResponse, Response,
        sse::{Event, KeepAlive, Sse},
    },
    routing::{get, post},
};
use futures::{StreamExt, channel::mpsc, stream::BoxStream};
use rmcp::{ServiceExt, model::ClientJsonRpcMessage, service::QuitReason, transport::Transport};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use turnscope::mcp::sse_client::{SseClientTransport, SseConnectError, SseSendError};

const SHORT: Duration = Duration::from_millis(400);
const TOKEN: &str = "Bearer sesame";

/// What the mock's `GET /sse` does.
#[derive(Clone, Copy)]
enum Behaviour {
    /// Streams keep-alives and an unrelated event but never an `endpoint` event.
    NoEndpoint,
    /// Ends the stream right away.
    EndAtOnce,
    /// Announces this endpoint, then relays whatever the POST handler pushes.
    Endpoint(&'static str),
    /// Answers 200 with a JSON body instead of an event stream.
    Json,
}

#[derive(Clone)]
struct Mock {
    behaviour: Behaviour,
    /// Sender feeding the open SSE stream; taking it out ends the stream.
    events: Arc<Mutex<Option<mpsc::UnboundedSender<Event>>>>,
    posts: Arc<Mutex<Vec<Value>>>,
}

impl Mock {
    fn push(&self, event: Event) {
        if let Some(sender) = self.events.lock().unwrap().as_ref() {
            let _ = sender.unbounded_send(event);
        }
    }

    fn end_stream(&self) {
        self.events.lock().unwrap().take();
    }
}

fn authorized(headers: &HeaderMap) -> bool {
    headers.get("authorization").is_some_and(|v| v == TOKEN)
}

async fn mock_sse(State(mock): State<Mock>, headers: HeaderMap) -> Response {
    if !authorized(&headers) {
        return (StatusCode::UNAUTHORIZED, "missing token").into_response();
    }
    let stream: BoxStream<'static, Result<Event, Infallible>> = match mock.behaviour {
        Behaviour::Json => return Json(json!({"error": "not sse"})).into_response(),
        Behaviour::EndAtOnce => futures::stream::empty().boxed(),
        Behaviour::NoEndpoint => {
            futures::stream::once(async { Ok(Event::default().event("hello").data("hi")) })
                .chain(futures::stream::pending())
                .boxed()
        }
        Behaviour::Endpoint(endpoint) => {
            // Unbounded: the test pushes each event itself, a handful.
            let (sender, receiver) = mpsc::unbounded();
            *mock.events.lock().unwrap() = Some(sender);
            futures::stream::once(async move { Event::default().event("endpoint").data(endpoint) })
                .chain(receiver)
                .map(Ok)
                .boxed()
        }
    };
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_millis(50)))
        .into_response()
}

async fn mock_post(
    State(mock): State<Mock>,
    headers: HeaderMap,
    Json(message): Json<Value>,
) -> StatusCode {
    if !authorized(&headers) {
        return StatusCode::UNAUTHORIZED;
    }
    mock.posts.lock().unwrap().push(message.clone());
    match message["method"].as_str() {
        Some("initialize") => {
            // A malformed event first: the client must skip it, not give up.
            mock.push(Event::default().event("message").data("{not json"));
            mock.push(
                Event::default().event("message").data(
                    json!({
                        "jsonrpc": "2.0",
                        "id": message["id"],
                        "result": {
                            "protocolVersion": "2024-11-05",
                            "capabilities": {},
                            "serverInfo": {"name": "mock-legacy", "version": "0.0.1"},
                        },
                    })
                    .to_string(),
                ),
            );
            StatusCode::ACCEPTED
        }
        Some("test/reject") => StatusCode::INTERNAL_SERVER_ERROR,
        _ => StatusCode::ACCEPTED,
    }
}

async fn start_mock(behaviour: Behaviour) -> (SocketAddr, Mock) {
    let mock = Mock {
        behaviour,
        events: Arc::default(),
        posts: Arc::default(),
    };
    let app = Router::new()
        .route("/sse", get(mock_sse))
        .route("/messages", post(mock_post))
        .with_state(mock.clone());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, mock)
}

fn auth() -> Vec<(String, String)> {
    vec![("Authorization".to_owned(), TOKEN.to_owned())]
}

async fn connect_err(url: &str, headers: &[(String, String)]) -> SseConnectError {
    match SseClientTransport::connect(url, headers, SHORT).await {
        Ok(transport) => panic!("expected an error, got {transport:?}"),
        Err(error) => error,
    }
}

#[tokio::test]
async fn no_endpoint_event_before_timeout() {
    let (addr, _mock) = start_mock(Behaviour::NoEndpoint).await;
    let started = Instant::now();
    let error = connect_err(&format!("http://{addr}/sse"), &auth()).await;
    let waited = started.elapsed();
    assert!(
        matches!(error, SseConnectError::NoEndpointEvent { .. }),
        "{error:?}"
    );
    assert!(waited >= SHORT && waited < SHORT * 5, "{waited:?}");
    let text = error.to_string();
    assert!(text.contains("no `endpoint` event"), "{text}");
    assert!(text.contains("raise the timeout"), "{text}");
}

#[tokio::test]
async fn not_found_url_is_reported_with_a_hint() {
    let server = RunningFixture::start(Kind::Sse).await;
    let error = connect_err(&server.url("/nope"), &[]).await;
    assert!(
        matches!(error, SseConnectError::HttpStatus { status, .. } if status == 404),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(text.contains("404"), "{text}");
    assert!(text.contains("/sse"), "{text}");
    server.stop().await;
}

#[tokio::test]
async fn missing_token_is_reported_as_unauthorized() {
    let (addr, _mock) = start_mock(Behaviour::Endpoint("/messages")).await;
    let error = connect_err(&format!("http://{addr}/sse"), &[]).await;
    let text = error.to_string();
    assert!(
        text.contains("401") && text.contains("Authorization"),
        "{text}"
    );
    assert!(text.contains("missing token"), "body is quoted: {text}");
}

#[tokio::test]
async fn endpoint_on_another_origin_is_refused() {
    let (addr, _mock) = start_mock(Behaviour::Endpoint("http://evil.example/messages")).await;
    let error = connect_err(&format!("http://{addr}/sse"), &auth()).await;
    assert!(
        matches!(error, SseConnectError::CrossOrigin { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("different origin"), "{error}");
}

#[tokio::test]
async fn json_instead_of_event_stream_is_refused() {
    let (addr, _mock) = start_mock(Behaviour::Json).await;
    let error = connect_err(&format!("http://{addr}/sse"), &auth()).await;
    assert!(
        matches!(error, SseConnectError::NotEventStream { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("transport \"http\""), "{error}");
}

#[tokio::test]
async fn stream_ending_before_endpoint_is_reported() {
    let (addr, _mock) = start_mock(Behaviour::EndAtOnce).await;
    let error = connect_err(&format!("http://{addr}/sse"), &auth()).await;
    assert!(
        matches!(error, SseConnectError::StreamEnded { .. }),
        "{error:?}"
    );
}

#[tokio::test]
async fn unreachable_and_silent_servers_are_reported() {
    // A port nobody listens on.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = listener.local_addr().unwrap();
    drop(listener);
    let error = connect_err(&format!("http://{closed}/sse"), &[]).await;
    assert!(
        matches!(error, SseConnectError::Unreachable { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("could not reach"), "{error}");

    // A server that accepts the connection but never answers.
    let silent = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = silent.local_addr().unwrap();
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            held.push(socket);
        }
    });
    let error = connect_err(&format!("http://{addr}/sse"), &[]).await;
    assert!(
        matches!(error, SseConnectError::ResponseTimeout { .. }),
        "{error:?}"
    );
    holder.abort();
}

#[tokio::test]
async fn handshake_skips_malformed_events_and_stream_end_closes() {
    let (addr, mock) = start_mock(Behaviour::Endpoint("/messages?session=s1")).await;
    let transport = SseClientTransport::connect(&format!("http://{addr}/sse"), &auth(), SHORT)
        .await
        .expect("connect");
    assert_eq!(
        transport.endpoint().as_str(),
        format!("http://{addr}/messages?session=s1")
    );
    let client = tokio::time::timeout(crate::support::fixture::WAIT, ().serve(transport))
        .await
        .expect("initialize timed out")
        .expect("initialize failed despite one malformed event");
    let info = client.peer_info().expect("initialized");
    assert_eq!(info.server_info.as_ref().unwrap().name, "mock-legacy");

    // The POSTs carried the Authorization header (the mock answers 401 otherwise) and
    // the initialized notification followed the initialize request.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let methods: Vec<String> = mock
        .posts
        .lock()
        .unwrap()
        .iter()
        .map(|m| m["method"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(methods, ["initialize", "notifications/initialized"]);

    mock.end_stream();
    let reason = tokio::time::timeout(crate::support::fixture::WAIT, client.waiting())
        .await
        .expect("the end of the SSE stream did not close the client")
        .expect("client task panicked");
    assert!(matches!(reason, QuitReason::Closed), "{reason:?}");
}

#[tokio::test]
async fn rejected_post_is_a_send_error() {
    let (addr, _mock) = start_mock(Behaviour::Endpoint("/messages")).await;
    let mut transport = SseClientTransport::connect(&format!("http://{addr}/sse"), &auth(), SHORT)
        .await
        .expect("connect");
    let message: ClientJsonRpcMessage = serde_json::from_value(json!({
        "jsonrpc": "2.0", "method": "test/reject", "params": {}
    }))
    .expect("a custom notification");
    let error = Transport::send(&mut transport, message)
        .await
        .expect_err("500 must fail the send");
    assert!(
        matches!(error, SseSendError::HttpStatus { status, .. } if status == 500),
        "{error:?}"
    );
    assert!(error.to_string().contains("expected 202"), "{error}");
}
