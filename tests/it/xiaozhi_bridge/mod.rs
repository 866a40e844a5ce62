//! The Xiaozhi bridge against a fake broker endpoint over real sockets, with the project's
//! fixture MCP server as the upstream (a real child process over stdio). Reconnect delays
//! are read from a manual clock, never slept through.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::support::endpoint::{FakeEndpoint, WAIT, tool_names};
use crate::support::fixture::BUILT_IN_TOOLS;
use serde_json::{Value, json};
use turnscope::bridge::xiaozhi::clock::{Clock, ManualClock};
use turnscope::bridge::xiaozhi::endpoint::Endpoint;
use turnscope::bridge::xiaozhi::mcp_upstream::UpstreamSettings;
use turnscope::bridge::xiaozhi::mcp_upstream::mcp_upstream;
use turnscope::bridge::xiaozhi::{
    BridgeSettings, RunningBridge, ServerSpec, Upstream, UpstreamStatus, XiaozhiBridge,
};
use turnscope::config::ToolFilter;
use turnscope::observe::Bus;

const TOKEN: &str = "eyJhbGciOiJFUzI1NiJ9.eyJhZ2VudElkIjo0Mn0.c2VjcmV0LXNpZ25hdHVyZQ";

fn fixture_stdio() -> ServerSpec {
    ServerSpec::Stdio {
        command: env!("CARGO_BIN_EXE_turnscope-dev").into(),
        args: vec!["fixture-server".into(), "--stdio".into()],
        env: BTreeMap::new(),
    }
}

/// The app (its built-in tools on) with two fixture servers as `[[mcp_servers]]` (`one` over
/// streamable HTTP with `one_tools`, `two` over SSE with `two_tools`) and one Xiaozhi bridge
/// relaying both to a fake endpoint. Returns the fixtures, the endpoint and the app, in the order to stop them.
async fn two_servers_on_one_bridge(
    one_tools: &str,
    two_tools: &str,
) -> (
    crate::support::fixture::RunningFixture,
    crate::support::fixture::RunningFixture,
    FakeEndpoint,
    turnscope::app::App,
) {
    use crate::support::fixture::{Kind, RunningFixture};
    let one = RunningFixture::start(Kind::Http).await;
    let two = RunningFixture::start(Kind::Sse).await;
    let endpoint = FakeEndpoint::start().await;
    let toml = format!(
        // The bot's built-ins on: its `echo` takes no name from the servers' own (tour M:
        // the server's `echo` was not relayed).
        "[server]\nport = 0\n[model]\npace = 0.0\n\
         [[mcp_servers]]\nname = \"one\"\nurl = \"{}\"\ntool_filter = [{one_tools}]\n\
         [[mcp_servers]]\nname = \"two\"\ntransport = \"sse\"\nurl = \"{}\"\ntool_filter = [{two_tools}]\n\
         [[bridges.xiaozhi]]\nname = \"both\"\nendpoint = \"{}\"\nservers = [\"one\", \"two\"]\n",
        one.url("/mcp"),
        two.url("/sse"),
        endpoint.url(TOKEN)
    );
    let config = turnscope::config::Config::parse(&toml).unwrap();
    let app = turnscope::app::App::start(&config, Bus::default())
        .await
        .unwrap();
    (one, two, endpoint, app)
}

fn upstream(spec: ServerSpec, clock: Arc<dyn Clock>) -> Arc<dyn Upstream> {
    let settings = UpstreamSettings {
        clock,
        ..UpstreamSettings::default()
    };
    Arc::new(mcp_upstream("test", spec, settings))
}

fn deny(tools: &[&str]) -> ToolFilter {
    ToolFilter {
        allow: vec![],
        deny: tools.iter().map(|s| s.to_string()).collect(),
    }
}

/// [`spawn_on`] a bus of its own.
fn spawn(
    name: &str,
    url: &str,
    upstream: Arc<dyn Upstream>,
    filter: ToolFilter,
    clock: Arc<dyn Clock>,
) -> RunningBridge {
    spawn_on(&Bus::default(), name, url, upstream, filter, clock)
}

/// A bridge named `name` dialling `url`, relaying `upstream` through `filter`, its events
/// on `bus`.
fn spawn_on(
    bus: &Bus,
    name: &str,
    url: &str,
    upstream: Arc<dyn Upstream>,
    filter: ToolFilter,
    clock: Arc<dyn Clock>,
) -> RunningBridge {
    XiaozhiBridge {
        name: name.into(),
        endpoint: Endpoint::parse(url).unwrap(),
        upstream,
        filter,
        settings: BridgeSettings {
            clock,
            ..BridgeSettings::default()
        },
    }
    .spawn(bus)
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// Asserts `d` is `base` seconds plus at most 0.3 s of jitter.
fn assert_delay(d: Duration, base: f64) {
    assert!(
        secs(d) >= base && secs(d) <= base + 0.3 + 1e-9,
        "expected {base} s + up to 0.3 s jitter, got {d:?}"
    );
}

async fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    tokio::time::timeout(WAIT, async {
        while !ok() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("timed out waiting until {what}"));
}

#[tokio::test]
async fn a_broker_conversation_then_drops_closes_and_refusals() {
    let mut endpoint = FakeEndpoint::start().await;
    let clock = ManualClock::new();
    let bus = Bus::default();
    let mut log = bus.subscribe();
    let bridge = spawn_on(
        &bus,
        "home",
        &endpoint.url(TOKEN),
        upstream(fixture_stdio(), turnscope::bridge::xiaozhi::clock::system()),
        deny(&["fail"]),
        clock.clone(),
    );
    let mut conn = endpoint.next().await;
    assert_eq!(conn.path, format!("/mcp/?token={TOKEN}"));

    // Handshake: initialize id 0 is answered with id 0 (a number) and the server's info.
    let (init, names) = conn.broker_handshake().await;
    assert!(
        init.starts_with(r#"{"jsonrpc":"2.0","id":0,"result":{"#),
        "{init}"
    );
    let init: Value = serde_json::from_str(&init).unwrap();
    assert_eq!(init["result"]["protocolVersion"], "2024-11-05");
    assert_eq!(init["result"]["serverInfo"]["name"], "turnscope-fixture");
    assert_eq!(init["result"]["capabilities"]["tools"]["listChanged"], true);
    let expected: Vec<&str> = BUILT_IN_TOOLS
        .iter()
        .copied()
        .filter(|t| *t != "fail")
        .collect();
    assert_eq!(names, expected, "denied tools are stripped");

    // Ping is answered byte for byte.
    let pong = conn
        .ask(r#"{"jsonrpc":"2.0","id":8,"method":"ping","params":{}}"#)
        .await;
    assert_eq!(pong, r#"{"jsonrpc":"2.0","id":8,"result":{}}"#);

    // A call with the broker's string id and extra params.
    let id = "3f2c9a1e-77d0-4d5e-9a52-0c1b2f3e4d5a_n_7";
    let call = format!(
        r#"{{"jsonrpc":"2.0","id":"{id}","method":"tools/call","params":{{"name":"echo","arguments":{{"text":"héllo"}},"clientId":"c-1","serialNumber":"SN42","_meta":{{"clientId":"c-1","serialNumber":"SN42","agentId":42}}}}}}"#
    );
    let reply = conn.ask(&call).await;
    assert!(
        reply.starts_with(&format!(r#"{{"jsonrpc":"2.0","id":"{id}","result":"#)),
        "{reply}"
    );
    let reply: Value = serde_json::from_str(&reply).unwrap();
    assert_eq!(reply["result"]["content"][0]["text"], "héllo");

    // A denied tool is answered locally with -32000.
    let blocked = conn
        .ask(r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"fail","arguments":{"message":"x"}}}"#)
        .await;
    assert_eq!(
        blocked,
        r#"{"jsonrpc":"2.0","id":9,"error":{"code":-32000,"message":"tool `fail` is blocked by this bridge's tool filter"}}"#
    );

    // Odd ids come back unchanged; binary frames count as text.
    for id in ["0", "-1", "9007199254740993"] {
        let reply = conn
            .ask(&format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#))
            .await;
        assert_eq!(
            reply,
            format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#)
        );
    }
    conn.send_binary(br#"{"jsonrpc":"2.0","id":10,"method":"ping"}"#.to_vec())
        .await;
    assert_eq!(
        conn.recv().await,
        r#"{"jsonrpc":"2.0","id":10,"result":{}}"#
    );

    // Malformed frames are dropped and counted; the socket stays.
    conn.send("not json").await;
    conn.send_binary(vec![0xff, 0xfe, 0x00]).await;
    let after = conn
        .ask(r#"{"jsonrpc":"2.0","id":11,"method":"ping"}"#)
        .await;
    assert_eq!(
        after, r#"{"jsonrpc":"2.0","id":11,"result":{}}"#,
        "no reply to garbage"
    );
    assert_eq!(bridge.status().malformed, 2);
    // The first is said (a warning), the second only counted (tour M: neither showed).
    let mut said = 0;
    while let Some(e) = log.try_recv() {
        if let turnscope::observe::Event::Log { level, message, .. } = &*e
            && message.contains("no JSON-RPC message")
        {
            assert_eq!(level, "warn");
            said += 1;
        }
    }
    assert_eq!(said, 1);
    assert_eq!(bridge.status().blocked, 1);
    let invalid = conn.ask_json(r#"{"jsonrpc":"2.0","id":12}"#).await;
    assert_eq!(invalid["id"], 12);
    assert_eq!(invalid["error"]["code"], -32600);

    // A batch is split and each message answered on its own.
    conn.send(
        r#"[{"jsonrpc":"2.0","id":13,"method":"ping"},{"jsonrpc":"2.0","id":14,"method":"ping"}]"#,
    )
    .await;
    let mut ids = vec![
        conn.recv_json().await["id"].clone(),
        conn.recv_json().await["id"].clone(),
    ];
    ids.sort_by_key(|v| v.as_i64());
    assert_eq!(ids, [json!(13), json!(14)]);
    let status = bridge.status();
    assert!(status.connected);
    assert!(
        status.frames_in >= 14 && status.frames_out >= 13,
        "{status:?}"
    );
    assert_eq!(
        status.endpoint,
        format!("ws://127.0.0.1:{}/mcp/?token=***", conn_port(&endpoint))
    );

    // Abnormal drop: 1 s, then 2 s; every new socket gets a fresh handshake that works.
    conn.drop_abruptly();
    let d = clock.next_sleep().await;
    assert_delay(d, 1.0);
    assert!(!bridge.status().connected);
    clock.advance(d);
    let mut conn = endpoint.next().await;
    let (init, names) = conn.broker_handshake().await;
    assert!(init.starts_with(r#"{"jsonrpc":"2.0","id":0,"result":"#));
    assert_eq!(names, expected);
    conn.drop_abruptly();
    let d = clock.next_sleep().await;
    assert_delay(d, 2.0);
    clock.advance(d);

    // A session up a minute, then a clean close: about 5 s, and the doubling is reset.
    let conn = endpoint.next().await;
    wait_until("the bridge is connected", || bridge.status().connected).await;
    clock.advance(Duration::from_secs(60));
    conn.close(1000).await;
    let d = clock.next_sleep().await;
    assert_delay(d, 5.0);
    clock.advance(d);
    let conn = endpoint.next().await;
    conn.drop_abruptly();
    let d = clock.next_sleep().await;
    assert_delay(d, 1.0);

    // A refused token (HTTP 401) is reported as such and retried at the slowest rate.
    endpoint.refuse_with(Some(401));
    clock.advance(d);
    let d = clock.next_sleep().await;
    assert_delay(d, 600.0);
    let status = bridge.status();
    assert!(status.token_rejected, "{status:?}");
    let error = status.last_error.clone().unwrap();
    assert!(
        error.contains("bad token") && error.contains("401"),
        "{error}"
    );
    assert!(!format!("{status:?}").contains(TOKEN));

    // So is a close with 1008.
    endpoint.refuse_with(None);
    clock.advance(d);
    let conn = endpoint.next().await;
    conn.close(1008).await;
    let d = clock.next_sleep().await;
    assert_delay(d, 600.0);
    assert!(bridge.status().token_rejected);
    clock.advance(d);
    let mut conn = endpoint.next().await;
    assert_eq!(bridge.status().reconnects, 6);

    // Shutdown closes the socket with 1000.
    let stopping = tokio::spawn(bridge.shutdown());
    let frame = conn.closed_by_bridge().await.expect("a close frame");
    assert_eq!(u16::from(frame.code), 1000);
    tokio::time::timeout(WAIT, stopping).await.unwrap().unwrap();
}

fn conn_port(endpoint: &FakeEndpoint) -> u16 {
    let url = endpoint.url("x");
    url.split(':')
        .nth(2)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn a_dead_server_fails_calls_in_flight_at_once_and_comes_back() {
    let mut endpoint = FakeEndpoint::start().await;
    let restarts = ManualClock::new();
    let up = upstream(fixture_stdio(), restarts.clone());
    let bridge = spawn(
        "dies",
        &endpoint.url(TOKEN),
        up.clone(),
        ToolFilter::default(),
        ManualClock::new(),
    );
    let mut conn = endpoint.next().await;
    conn.broker_handshake().await;
    let UpstreamStatus::Up { pid: Some(pid) } = up.status() else {
        panic!("{:?}", up.status())
    };

    for id in [5, 6] {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                          "params": {"name": "slow", "arguments": {"ms": 60000}}});
        conn.send(&call.to_string()).await;
    }
    // Give the calls a moment to reach the server; they fail either way once it is gone.
    tokio::time::sleep(Duration::from_millis(300)).await;
    kill(pid);
    let mut failed = Vec::new();
    for _ in 0..2 {
        let reply = conn.recv_json().await;
        assert_eq!(reply["error"]["code"], -32603, "{reply}");
        failed.push(reply["id"].as_i64().unwrap());
    }
    failed.sort_unstable();
    assert_eq!(failed, [5, 6]);

    // While it is down (its restart waits on the manual clock) pings and tools/list are
    // still answered; a call fails at once saying why.
    wait_until("the server is restarting", || {
        matches!(up.status(), UpstreamStatus::Restarting { .. })
    })
    .await;
    let pong = conn
        .ask(r#"{"jsonrpc":"2.0","id":8,"method":"ping","params":{}}"#)
        .await;
    assert_eq!(pong, r#"{"jsonrpc":"2.0","id":8,"result":{}}"#);
    let list = conn
        .ask_json(r#"{"jsonrpc":"2.0","id":9,"method":"tools/list"}"#)
        .await;
    assert_eq!(tool_names(&list), BUILT_IN_TOOLS);
    let down = conn.call(json!(10), "echo", json!({"text": "x"})).await;
    assert_eq!(down["error"]["code"], -32603);
    assert!(
        down["error"]["message"]
            .as_str()
            .unwrap()
            .contains("restarting"),
        "{down}"
    );

    let d = restarts.next_sleep().await;
    assert!(secs(d) >= 0.5 && secs(d) <= 0.8 + 1e-9, "{d:?}");
    restarts.advance(d);
    let changed = conn.recv_json().await;
    assert_eq!(
        changed["method"], "notifications/tools/list_changed",
        "{changed}"
    );
    let UpstreamStatus::Up { pid: Some(new_pid) } = up.status() else {
        panic!("{:?}", up.status())
    };
    assert_ne!(new_pid, pid);
    let back = conn.call(json!(11), "echo", json!({"text": "back"})).await;
    assert_eq!(back["result"]["content"][0]["text"], "back", "{back}");
    assert!(bridge.status().connected);
    bridge.shutdown().await;
}

fn kill(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
}

mod more;

mod interop;

mod relay;

mod requests;
