//! What the bridge relays besides answers: a call in flight to a streamable HTTP server that
//! dies is answered with an error at once.

use serde_json::json;
use turnscope::bridge::xiaozhi::clock;
use turnscope::bridge::xiaozhi::{ServerSpec, ToolFilter};

use super::{TOKEN, spawn, upstream};
use crate::common::endpoint::FakeEndpoint;
use crate::common::fixture_child::fixture_http_child;

/// The fixture server on streamable HTTP (a child process) is killed while a `tools/call`
/// of the endpoint is in flight: the endpoint gets a JSON-RPC error with its id inside the
/// hang guard, though the call itself would run for ten minutes and the bridge sets no call
/// timeout (rmcp's default policy resumed the broken response stream forever, so the reply
/// never came).
#[tokio::test]
async fn an_http_server_dying_mid_call_answers_the_endpoint_at_once() {
    let (mut child, url) = fixture_http_child(0).await;
    let mut endpoint = FakeEndpoint::start().await;
    let bridge = spawn(
        "dies",
        &endpoint.url(TOKEN),
        upstream(
            ServerSpec::Http {
                url,
                headers: Default::default(),
            },
            clock::system(),
        ),
        ToolFilter::default(),
        clock::system(),
    );
    let mut conn = endpoint.next().await;
    let (_, names) = conn.broker_handshake().await;
    assert!(names.iter().any(|n| n == "slow"), "{names:?}");

    conn.send(
        &json!({"jsonrpc": "2.0", "id": "k-1", "method": "tools/call",
                "params": {"name": "slow", "arguments": {"ms": 600_000}}})
        .to_string(),
    )
    .await;
    // The call is in flight once the server holds it; give it a moment to get there.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    child.start_kill().unwrap();
    child.wait().await.unwrap();

    // `recv` fails the test if nothing comes within the endpoint's hang guard.
    let reply = conn.recv_json().await;
    assert_eq!(reply["id"], "k-1", "{reply}");
    assert_eq!(reply["error"]["code"], -32603, "{reply}");
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(message.contains("in flight"), "{message}");
    bridge.shutdown().await;
}
