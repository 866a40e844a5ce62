//! Requests the socket refuses instead of running: an id already in flight (never
//! overwritten, so the first request still gets its own reply) and one request more than
//! `socket::MAX_IN_FLIGHT` (answered at once, while pings still are).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use turnscope::bridge::xiaozhi::clock;
use turnscope::bridge::xiaozhi::progress::ProgressSink;
use turnscope::bridge::xiaozhi::socket::MAX_IN_FLIGHT;
use turnscope::bridge::xiaozhi::upstream::{ServerFacts, UpstreamChange, UpstreamError};
use turnscope::bridge::xiaozhi::{RunningBridge, Upstream, UpstreamStatus};
use turnscope::config::ToolFilter;

use super::{TOKEN, spawn, wait_until};
use crate::support::endpoint::{Conn, FakeEndpoint};

/// An upstream whose `tools/call` with `{"hold": true}` waits until cancelled (counted while
/// it waits); any other call is answered at once with its arguments.
struct Holding {
    held: AtomicUsize,
    changes: broadcast::Sender<UpstreamChange>,
}

#[async_trait]
impl Upstream for Holding {
    fn label(&self) -> String {
        "holding".into()
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
        Ok(vec![
            json!({"name": "hold", "inputSchema": {"type": "object"}}),
        ])
    }
    async fn request(
        &self,
        _method: &str,
        params: Option<Value>,
        cancel: &CancellationToken,
        _progress: Option<ProgressSink>,
    ) -> Result<Value, UpstreamError> {
        let args = params.unwrap_or_default()["arguments"].clone();
        if args["hold"] == true {
            self.held.fetch_add(1, Ordering::SeqCst);
            cancel.cancelled().await;
            self.held.fetch_sub(1, Ordering::SeqCst);
            return Err(UpstreamError::Cancelled);
        }
        Ok(json!({"content": [{"type": "text", "text": args.to_string()}]}))
    }
    fn changes(&self) -> broadcast::Receiver<UpstreamChange> {
        self.changes.subscribe()
    }
    async fn shutdown(&self) {}
}

fn holding() -> Arc<Holding> {
    Arc::new(Holding {
        held: AtomicUsize::new(0),
        changes: broadcast::channel(4).0,
    })
}

/// A bridge called `name` relaying a [`Holding`] upstream, its endpoint connected and past
/// the handshake.
async fn holding_bridge(name: &str) -> (FakeEndpoint, Arc<Holding>, RunningBridge, Conn) {
    let mut endpoint = FakeEndpoint::start().await;
    let up = holding();
    let bridge = spawn(
        name,
        &endpoint.url(TOKEN),
        up.clone(),
        ToolFilter::default(),
        clock::system(),
    );
    let mut conn = endpoint.next().await;
    conn.broker_handshake().await;
    (endpoint, up, bridge, conn)
}

fn call(id: Value, args: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "hold", "arguments": args}})
    .to_string()
}

fn cancel(id: Value) -> String {
    json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}})
        .to_string()
}

#[tokio::test]
async fn a_repeated_id_in_flight_is_refused_and_the_first_request_keeps_its_reply() {
    let (_endpoint, up, bridge, mut conn) = holding_bridge("dup").await;

    conn.send(&call(json!(7), json!({"hold": true}))).await;
    wait_until("the first call is held", || {
        up.held.load(Ordering::SeqCst) == 1
    })
    .await;
    // The repeat is answered at once with an error under its id.
    let dup = conn.ask_json(&call(json!(7), json!({"x": 1}))).await;
    assert_eq!(dup["id"], 7, "{dup}");
    assert_eq!(dup["error"]["code"], -32600, "{dup}");
    let message = dup["error"]["message"].as_str().unwrap();
    assert!(message.contains("already in flight"), "{message}");
    // The first request was not overwritten: it is still held, and cancelling id 7 reaches it.
    assert_eq!(up.held.load(Ordering::SeqCst), 1);
    conn.send(&cancel(json!(7))).await;
    wait_until("the first call is cancelled", || {
        up.held.load(Ordering::SeqCst) == 0
    })
    .await;
    // Once it is gone the id is free again.
    let again = conn.ask_json(&call(json!(7), json!({"x": 2}))).await;
    assert_eq!(again["id"], 7, "{again}");
    assert_eq!(
        again["result"]["content"][0]["text"], r#"{"x":2}"#,
        "{again}"
    );
    bridge.shutdown().await;
}

#[tokio::test]
async fn one_request_beyond_the_in_flight_bound_is_answered_with_an_error() {
    let (_endpoint, up, bridge, mut conn) = holding_bridge("bound").await;

    for id in 0..MAX_IN_FLIGHT {
        conn.send(&call(json!(id), json!({"hold": true}))).await;
    }
    wait_until("every call is held", || {
        up.held.load(Ordering::SeqCst) == MAX_IN_FLIGHT
    })
    .await;
    let over = conn
        .ask_json(&call(json!("one-more"), json!({"x": 1})))
        .await;
    assert_eq!(over["id"], "one-more", "{over}");
    assert_eq!(over["error"]["code"], -32603, "{over}");
    let message = over["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("{MAX_IN_FLIGHT} requests are already in flight")),
        "{message}"
    );
    assert_eq!(up.held.load(Ordering::SeqCst), MAX_IN_FLIGHT);
    // The socket itself is fine: a ping is answered, and a freed slot takes a new request.
    let pong = conn
        .ask(r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#)
        .await;
    assert_eq!(pong, r#"{"jsonrpc":"2.0","id":"p","result":{}}"#);
    conn.send(&cancel(json!(0))).await;
    wait_until("one call is cancelled", || {
        up.held.load(Ordering::SeqCst) == MAX_IN_FLIGHT - 1
    })
    .await;
    let mut reply = Value::Null;
    for _ in 0..50 {
        // The cancelled task may take a moment to finish and free its slot.
        reply = conn.ask_json(&call(json!("after"), json!({"x": 3}))).await;
        if reply.get("result").is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        reply["result"]["content"][0]["text"], r#"{"x":3}"#,
        "{reply}"
    );
    bridge.shutdown().await;
}
