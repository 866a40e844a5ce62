//! What the bridge relays besides answers: progress reports of a call (under the endpoint's
//! own token, and only when it gave one), a later tool-list change of a multi-server bridge,
//! and a call in flight to a streamable HTTP server that dies answered with an error at once.

use serde_json::{Value, json};
use turnscope::bridge::xiaozhi::ServerSpec;
use turnscope::bridge::xiaozhi::clock;
use turnscope::config::ToolFilter;

use super::{TOKEN, fixture_stdio, spawn, upstream};

use crate::support::endpoint::{FakeEndpoint, tool_names};
use crate::support::fixture_child::fixture_http_child;

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
                "params": {"name": "slow", "arguments": {"ms": 600_000},
                           "_meta": {"progressToken": "k-progress"}}})
        .to_string(),
    )
    .await;
    // The server holds the call once it reports progress on it.
    let first = conn.recv_json().await;
    assert_eq!(first["method"], "notifications/progress", "{first}");
    assert_eq!(first["params"]["progressToken"], "k-progress", "{first}");
    child.start_kill().unwrap();
    child.wait().await.unwrap();

    // `recv` fails the test if nothing comes within the endpoint's hang guard.
    let reply = loop {
        let frame = conn.recv_json().await;
        if frame["method"] != "notifications/progress" {
            break frame;
        }
    };
    assert_eq!(reply["id"], "k-1", "{reply}");
    assert_eq!(reply["error"]["code"], -32603, "{reply}");
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(message.contains("in flight"), "{message}");
    bridge.shutdown().await;
}

/// The fixture's `slow` tool reports progress every 100 ms when its request carries a token
/// (rmcp always sets one upstream). The endpoint hears the reports only for its call that gave
/// a `_meta.progressToken`, under that very token (a string, then a number), all before the
/// reply, counting up to the total; its call without a token gets the bare reply.
#[tokio::test]
async fn progress_reaches_the_endpoint_under_its_own_token_only_when_it_asked() {
    let mut endpoint = FakeEndpoint::start().await;
    let bridge = spawn(
        "progress",
        &endpoint.url(TOKEN),
        upstream(fixture_stdio(), clock::system()),
        ToolFilter::default(),
        clock::system(),
    );
    let mut conn = endpoint.next().await;
    conn.broker_handshake().await;

    for (id, token) in [(json!("p-call"), json!("tok-é")), (json!(12), json!(0))] {
        conn.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": "slow", "arguments": {"ms": 350},
                               "_meta": {"progressToken": token, "clientId": "c-1"}}})
            .to_string(),
        )
        .await;
        let mut reports: Vec<Value> = Vec::new();
        let reply = loop {
            let frame = conn.recv_json().await;
            if frame["method"] == "notifications/progress" {
                reports.push(frame);
            } else {
                break frame;
            }
        };
        assert_eq!(reply["id"], id, "{reply}");
        assert_eq!(
            reply["result"]["content"][0]["text"], "slept 350 ms",
            "{reply}"
        );
        let progress: Vec<f64> = reports
            .iter()
            .map(|r| {
                assert_eq!(r["params"]["progressToken"], token, "{r}");
                assert_eq!(r["params"]["total"], 350.0, "{r}");
                assert!(r.get("id").is_none(), "a notification has no id: {r}");
                r["params"]["progress"].as_f64().unwrap()
            })
            .collect();
        assert_eq!(progress, [100.0, 200.0, 300.0], "{reports:?}");
        assert_eq!(reports[0]["params"]["message"], "100 of 350 ms");
    }

    // Without a token, only the reply comes back: the next frame after it is the ping's.
    let plain = conn
        .call(json!("no-token"), "slow", json!({"ms": 250}))
        .await;
    assert_eq!(plain["id"], "no-token", "{plain}");
    assert_eq!(plain["result"]["content"][0]["text"], "slept 250 ms");
    let pong = conn
        .ask(r#"{"jsonrpc":"2.0","id":"after","method":"ping"}"#)
        .await;
    assert_eq!(pong, r#"{"jsonrpc":"2.0","id":"after","result":{}}"#);
    bridge.shutdown().await;
}

/// A bridge relaying two `[[mcp_servers]]` from the bot's registry. The endpoint has the
/// fixture add a tool (`add_tool`, on server `one`): the server tells the registry its list
/// changed, the registry refreshes, and the endpoint is sent `notifications/tools/list_changed`
/// without asking; its next `tools/list` has the new tool, which it can call.
#[tokio::test]
async fn a_multi_server_bridge_pushes_later_tool_changes_to_the_endpoint() {
    let (one, two, mut endpoint, app) =
        super::two_servers_on_one_bridge(r#""add_tool", "shout""#, r#""echo""#).await;
    let mut conn = endpoint.next().await;
    let (_, names) = conn.broker_handshake().await;
    assert_eq!(names, ["add_tool", "echo"]);

    conn.send(
        &json!({"jsonrpc": "2.0", "id": "a-1", "method": "tools/call",
                "params": {"name": "add_tool", "arguments": {"name": "shout"}}})
        .to_string(),
    )
    .await;
    // The reply and the notification race; both must come (`recv` has a hang guard).
    let (mut replied, mut changed) = (false, false);
    while !(replied && changed) {
        let frame = conn.recv_json().await;
        if frame["method"] == "notifications/tools/list_changed" {
            assert!(frame.get("id").is_none(), "{frame}");
            changed = true;
        } else {
            assert_eq!(frame["id"], "a-1", "{frame}");
            assert_ne!(frame["result"]["isError"], true, "{frame}");
            replied = true;
        }
    }
    let list = conn
        .ask_json(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}"#)
        .await;
    assert_eq!(tool_names(&list), ["add_tool", "echo", "shout"]);
    let shouted = conn.call(json!(3), "shout", json!({"text": "hey"})).await;
    assert_eq!(shouted["result"]["content"][0]["text"], "hey", "{shouted}");
    app.shutdown().await;
    one.stop().await;
    two.stop().await;
}
