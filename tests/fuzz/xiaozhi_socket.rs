//! The real Xiaozhi socket loop ([`socket::serve`]) fed fuzzed frames over a real WebSocket
//! on an in-memory pipe, with an upstream that answers at once. Slow per case (a runtime and
//! a socket each), so it runs an eighth of `PROPTEST_CASES`.
//!
//! Each frame's expected answers come from the bridge's rules applied to its parse: a
//! request is answered once with its id echoed byte for byte, with the code the rules give
//! (`-32600` invalid, `-32602` bad params, `-32000` blocked tool, `-32601` from the
//! upstream for unknown methods); notifications and responses get nothing; a frame that is
//! not JSON, or has no readable id, or binary that is not UTF-8 is dropped and counted.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::{SinkExt, StreamExt};
use proptest::prelude::*;
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_util::sync::CancellationToken;
use turnscope::bridge::xiaozhi::jsonrpc::{self, Incoming};
use turnscope::bridge::xiaozhi::progress::ProgressSink;
use turnscope::bridge::xiaozhi::socket::{self, Relay};
use turnscope::bridge::xiaozhi::state::BridgeState;
use turnscope::bridge::xiaozhi::upstream::{ServerFacts, UpstreamChange, UpstreamError};
use turnscope::bridge::xiaozhi::{Upstream, UpstreamStatus};
use turnscope::config::ToolFilter;
use turnscope::observe::Bus;

use super::corpus;
use super::xiaozhi::{CORPUS, JSON_TOKENS, parts};

/// The upstream's tools; `rm` is denied by the bridge's filter.
const TOOLS: &[&str] = &["echo", "add", "rm"];
/// How many of them the endpoint sees: a cursor up to this many is one the bridge can give.
const OFFERED: usize = 2;
const PAGE: usize = 2;
/// How long one case may wait for the loop; reached only if it hangs.
const WAIT: Duration = Duration::from_secs(20);

/// An upstream that answers at once: `tools/call` succeeds, anything else is unknown.
struct Instant(broadcast::Sender<UpstreamChange>);

#[async_trait]
impl Upstream for Instant {
    fn label(&self) -> String {
        "fuzz".into()
    }
    fn status(&self) -> UpstreamStatus {
        UpstreamStatus::Up { pid: None }
    }
    fn facts(&self) -> Option<ServerFacts> {
        None
    }
    async fn ready(&self, _limit: Duration) -> bool {
        true
    }
    async fn list_tools(&self) -> Result<Vec<Value>, UpstreamError> {
        Ok(TOOLS
            .iter()
            .map(|t| json!({"name": t, "inputSchema": {"type": "object"}}))
            .collect())
    }
    async fn request(
        &self,
        method: &str,
        params: Option<Value>,
        _cancel: &CancellationToken,
        _progress: Option<ProgressSink>,
    ) -> Result<Value, UpstreamError> {
        match method {
            "tools/call" => Ok(
                json!({"content": [{"type": "text", "text": params.unwrap_or_default().to_string()}]}),
            ),
            _ => Err(UpstreamError::Rpc {
                code: jsonrpc::METHOD_NOT_FOUND,
                message: format!("no method {method}"),
                data: None,
            }),
        }
    }
    fn changes(&self) -> broadcast::Receiver<UpstreamChange> {
        self.0.subscribe()
    }
    async fn shutdown(&self) {}
}

/// The code a request must be answered with (`None`: a result).
fn expected_code(method: &str, params: Option<&Value>) -> Option<i64> {
    match method {
        "initialize" | "ping" => None,
        "tools/call" => match params.and_then(|p| p.get("name")).and_then(Value::as_str) {
            None => Some(jsonrpc::INVALID_PARAMS),
            Some("rm") => Some(jsonrpc::TOOL_BLOCKED),
            Some(_) => None,
        },
        "tools/list" => match params.and_then(|p| p.get("cursor")) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if s.parse::<usize>().is_ok_and(|n| n <= OFFERED) => None,
            Some(_) => Some(jsonrpc::INVALID_PARAMS),
        },
        _ => Some(jsonrpc::METHOD_NOT_FOUND),
    }
}

/// Whether the socket runs `method` as a task (so its id is held in flight until it ends);
/// `code` is what [`expected_code`] says.
fn runs_as_task(method: &str, code: Option<i64>) -> bool {
    match method {
        "initialize" | "ping" => false,
        "tools/call" => code.is_none(),
        _ => true,
    }
}

/// An id as the socket compares them.
fn id_key(id: &str) -> String {
    serde_json::from_str::<Value>(id).map_or_else(|_| id.to_string(), |v| v.to_string())
}

/// One expected answer: id text, code, and whether a `-32600` (its id still in flight from
/// an earlier request, which depends on timing) is as good.
type Answer = (String, Option<i64>, bool);

/// What one frame must produce: answers, and whether it is dropped. `tasks` holds the ids of
/// requests run as tasks so far.
fn expect(bytes: &[u8], answers: &mut Vec<Answer>, tasks: &mut HashSet<String>) -> bool {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return true;
    };
    match jsonrpc::parse(text) {
        Err(_) => true,
        Ok(messages) => {
            for m in messages {
                match m {
                    Incoming::Request { id, method, params } => {
                        let code = expected_code(&method, params.as_ref());
                        let repeated =
                            runs_as_task(&method, code) && !tasks.insert(id_key(&id.to_string()));
                        answers.push((id.to_string(), code, repeated));
                    }
                    Incoming::Invalid { id, .. } => {
                        answers.push((id.to_string(), Some(jsonrpc::INVALID_REQUEST), false))
                    }
                    Incoming::Notification { .. } | Incoming::Response { .. } => {}
                }
            }
            false
        }
    }
}

/// Whether the frame cancels something: left out, since what it cancels depends on timing.
fn cancels(bytes: &[u8]) -> bool {
    let text = String::from_utf8_lossy(bytes);
    jsonrpc::parse(&text).is_ok_and(|ms| {
        ms.iter()
            .any(|m| matches!(m, Incoming::Notification { method, .. } if method == "notifications/cancelled"))
    })
}

fn frame() -> impl Strategy<Value = (Vec<u8>, bool)> {
    let bytes = prop_oneof![
        3 => corpus::mutated(corpus::load(CORPUS), JSON_TOKENS, 4),
        2 => (parts(), Just(vec![0usize, 1, 2, 3, 4]).prop_shuffle())
            .prop_map(|(p, order)| p.render(&order, " ").into_bytes()),
        1 => prop::collection::vec(any::<u8>(), 0..64),
    ];
    (bytes, any::<bool>())
}

/// Runs one socket over `frames` (bytes, send as binary) and checks the answers.
async fn run(frames: Vec<(Vec<u8>, bool)>) -> Result<(), TestCaseError> {
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let bridge_ws = WebSocketStream::from_raw_socket(ours, Role::Client, None).await;
    let mut endpoint = WebSocketStream::from_raw_socket(theirs, Role::Server, None).await;
    let upstream: Arc<dyn Upstream> = Arc::new(Instant(broadcast::channel(1).0));
    let state = Arc::new(BridgeState::new(
        "fuzz".into(),
        "ws://fuzz".into(),
        upstream.clone(),
        Bus::default(),
    ));
    let filter = ToolFilter {
        allow: vec![],
        deny: vec!["rm".into()],
    };
    let relay = Arc::new(Relay::new(
        upstream,
        filter,
        state.clone(),
        PAGE,
        1 << 24,
        Duration::from_secs(600),
    ));
    let stop = CancellationToken::new();
    let serving = tokio::spawn({
        let stop = stop.clone();
        async move { socket::serve(bridge_ws, &relay, &stop).await }
    });

    let mut answers = Vec::new();
    let mut tasks = HashSet::new();
    let mut dropped = 0;
    for (bytes, binary) in frames.into_iter().filter(|(b, _)| !cancels(b)) {
        dropped += u64::from(expect(&bytes, &mut answers, &mut tasks));
        let message = match String::from_utf8(bytes) {
            Ok(text) if !binary => Message::text(text),
            Ok(text) => Message::binary(text.into_bytes()),
            Err(e) => Message::binary(e.into_bytes()),
        };
        endpoint.send(message).await.expect("send a frame");
    }
    // A last ping marks the end; everything before it is answered by the time all arrive.
    let sentinel = r#""fuzz-end""#;
    endpoint
        .send(Message::text(format!(
            r#"{{"jsonrpc":"2.0","id":{sentinel},"method":"ping"}}"#
        )))
        .await
        .unwrap();
    answers.push((sentinel.to_string(), None, false));

    let mut got = Vec::new();
    while got.len() < answers.len() {
        let message = tokio::time::timeout(WAIT, endpoint.next()).await;
        let text = match message {
            Ok(Some(Ok(Message::Text(t)))) => t.to_string(),
            Ok(Some(Ok(Message::Ping(_) | Message::Pong(_)))) => continue,
            other => {
                return Err(TestCaseError::fail(format!(
                    "expected {answers:?}, got {got:?} then {other:?}"
                )));
            }
        };
        let value: Value =
            serde_json::from_str(&text).map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
        prop_assert_eq!(&value["jsonrpc"], "2.0", "{}", text);
        let id = match jsonrpc::parse(&text).ok().as_deref() {
            Some([Incoming::Response { id }]) => id.to_string(),
            _ => return Err(TestCaseError::fail(format!("not a reply: {text}"))),
        };
        got.push((id, value["error"]["code"].as_i64()));
    }
    // Every answer matches one expectation: exactly, or as a refused repeat of an id in flight.
    let mut open = answers.clone();
    for (id, code) in &got {
        let exact = open
            .iter()
            .position(|(i, c, _)| i == id && c == code)
            .or_else(|| {
                open.iter().position(|(i, _, repeated)| {
                    i == id && *repeated && *code == Some(jsonrpc::INVALID_REQUEST)
                })
            });
        match exact {
            Some(at) => {
                open.swap_remove(at);
            }
            None => {
                return Err(TestCaseError::fail(format!(
                    "unexpected answer ({id}, {code:?}); expected {answers:?}, got {got:?}"
                )));
            }
        }
    }
    prop_assert_eq!(state.snapshot().malformed, dropped);

    stop.cancel();
    let ended = tokio::time::timeout(WAIT, serving).await;
    prop_assert!(
        matches!(ended, Ok(Ok(ref e)) if e.stopping),
        "the loop did not stop: {ended:?}"
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(super::scaled_cases(8)))]

    #[test]
    fn the_socket_loop_answers_fuzzed_frames_by_the_rules(frames in prop::collection::vec(frame(), 1..10)) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(run(frames))?;
    }
}
