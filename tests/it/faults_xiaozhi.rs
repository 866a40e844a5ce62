//! A misbehaving Xiaozhi endpoint seen from the whole app (real clock, real sockets): garbage
//! frames, a dropped socket, a refused token. The bridge reconnects, `/healthz` reports each
//! state, and the MCP surface is never disturbed.

use std::time::Duration;

use crate::support::endpoint::FakeEndpoint;
use crate::support::mcp::Client;
use serde_json::{Value, json};

const TOKEN: &str = "eyJhbGciOiJFUzI1NiJ9.eyJhZ2VudElkIjo0Mn0.c2VjcmV0LXNpZ25hdHVyZQ";
/// A hang guard only (the first reconnect comes after about 1 s).
const WAIT: Duration = Duration::from_secs(20);

async fn bridge_health(addr: std::net::SocketAddr) -> Value {
    let health: Value = reqwest::get(format!("http://{addr}/healthz"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["status"], "ok");
    assert!(!health.to_string().contains(TOKEN), "no token in /healthz");
    health["bridges"]["xiaozhi"][0].clone()
}

async fn health_until(
    addr: std::net::SocketAddr,
    what: &str,
    ok: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let b = bridge_health(addr).await;
        if ok(&b) {
            return b;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting until {what}: {b}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn garbage_drops_and_a_refused_token_show_in_healthz_and_never_touch_mcp() {
    let mut endpoint = FakeEndpoint::start().await;
    let toml = format!(
        "[server]\nport = 0\n[model]\npace = 0.0\n\
         [[bridges.xiaozhi]]\nname = \"bot\"\nendpoint = \"{}\"\nservers = [\"@bot\"]\n",
        endpoint.url(TOKEN)
    );
    let config = turnscope::config::Config::parse(&toml).unwrap();
    let app = turnscope::app::App::start(&config, turnscope::observe::Bus::default())
        .await
        .unwrap();
    let addr = app.server.addr;
    let mcp = Client::connect(&app.server.mcp_url()).await;
    let handle = mcp.start().await;

    let mut conn = endpoint.next().await;
    conn.broker_handshake().await;
    // Garbage: dropped and counted, the socket stays, calls still work.
    conn.send("not json at all").await;
    conn.send_binary(vec![0xff, 0x00, 0xfe]).await;
    conn.send(r#"{"jsonrpc":"2.0","id":"x","method":"tools/call","params":"nope"}"#)
        .await;
    let wrong = conn.recv_json().await;
    assert_eq!(wrong["id"], "x");
    assert!(wrong["error"].is_object(), "{wrong}");
    let started = conn.call(json!(2), "start", json!({})).await;
    assert!(
        started["result"]["_meta"]["turnscope/start"]["handle"].is_string(),
        "{started}"
    );
    let b = bridge_health(addr).await;
    assert_eq!(
        (b["connected"].as_bool(), b["malformed"].as_u64()),
        (Some(true), Some(2)),
        "{b}"
    );
    assert_eq!(
        mcp.chat(&handle, "still fine").await.text,
        "You said: still fine"
    );

    // Dropped: reported as disconnected, then the bridge is back on a new socket.
    conn.drop_abruptly();
    health_until(addr, "the drop is reported", |b| b["connected"] == false).await;
    assert_eq!(
        mcp.chat(&handle, "during the drop").await.text,
        "You said: during the drop"
    );
    let mut conn = tokio::time::timeout(WAIT, endpoint.next())
        .await
        .expect("the bridge reconnects");
    conn.broker_handshake().await;
    let b = health_until(addr, "connected again", |b| b["connected"] == true).await;
    assert!(b["reconnects"].as_u64().unwrap() >= 1, "{b}");

    // Refused token at the upgrade (HTTP 401): reported as such, the token never shown.
    endpoint.refuse_with(Some(401));
    conn.drop_abruptly();
    let b = health_until(addr, "the refusal is reported", |b| {
        b["token_rejected"] == true
    })
    .await;
    assert_eq!(b["connected"], false);
    assert!(
        b["last_error"].as_str().unwrap_or_default().contains("401"),
        "{b}"
    );
    assert_eq!(
        mcp.chat(&handle, "after the refusal").await.text,
        "You said: after the refusal"
    );
    app.shutdown().await;
}
