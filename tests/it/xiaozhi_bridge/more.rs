//! Params passed through untouched, three bridges side by side, and the bot as upstream.

use std::sync::Arc;
use std::time::Duration;

use rmcp::ServiceExt;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use turnscope::bridge::xiaozhi::clock::{self, ManualClock};
use turnscope::bridge::xiaozhi::mcp_upstream::{
    McpUpstream, Opened, Opener, RelayClient, UpstreamSettings,
};
use turnscope::bridge::xiaozhi::{ServerSpec, UpstreamStatus};
use turnscope::config::ToolFilter;
use turnscope::observe::{Bus, Event};

use super::{TOKEN, fixture_stdio, kill, spawn, upstream};
use crate::support::endpoint::FakeEndpoint;
use crate::support::fixture::{BUILT_IN_TOOLS, Kind, RunningFixture};

/// A hand-written MCP server on the far end of a pipe that answers `tools/call` with the
/// exact params it received, so nothing the bridge or rmcp might drop goes unnoticed.
fn recording_server() -> Opener {
    Arc::new(|handler: RelayClient| {
        Box::pin(async move {
            let (client_io, server_io) = tokio::io::duplex(64 * 1024);
            tokio::spawn(async move {
                let (read, mut write) = tokio::io::split(server_io);
                let mut lines = BufReader::new(read).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    let msg: Value = serde_json::from_str(&line).unwrap();
                    let Some(id) = msg.get("id").cloned() else {
                        continue;
                    };
                    let result = match msg["method"].as_str() {
                        Some("initialize") => json!({
                            "protocolVersion": msg["params"]["protocolVersion"],
                            "capabilities": {"tools": {}},
                            "serverInfo": {"name": "recorder", "version": "1"}
                        }),
                        Some("tools/list") => {
                            json!({"tools": [{"name": "record", "inputSchema": {"type": "object"}}]})
                        }
                        Some("tools/call") => json!({
                            "content": [{"type": "text", "text": msg["params"].to_string()}],
                            "isError": false
                        }),
                        _ => json!({}),
                    };
                    let reply = json!({"jsonrpc": "2.0", "id": id, "result": result});
                    write
                        .write_all(format!("{reply}\n").as_bytes())
                        .await
                        .unwrap();
                }
            });
            let service = handler.serve(client_io).await.map_err(|e| e.to_string())?;
            Ok(Opened {
                service,
                pid: None,
                stderr: None,
            })
        })
    })
}

#[tokio::test]
async fn extra_params_reach_the_server_untouched() {
    let mut endpoint = FakeEndpoint::start().await;
    let up = Arc::new(McpUpstream::start(
        "recorder".into(),
        recording_server(),
        UpstreamSettings::default(),
    ));
    let bridge = spawn(
        "rec",
        &endpoint.url(TOKEN),
        up,
        ToolFilter::default(),
        clock::system(),
    );
    let mut conn = endpoint.next().await;
    let (init, names) = conn.broker_handshake().await;
    assert!(
        init.contains(r#""serverInfo":{"name":"recorder","version":"1"}"#),
        "{init}"
    );
    assert_eq!(names, ["record"]);
    let params = json!({
        "name": "record",
        "arguments": {"a": [1, 2.5, "x"], "n": null},
        "clientId": "c-1",
        "serialNumber": "SN42",
        "_meta": {"clientId": "c-1", "serialNumber": "SN42", "agentId": 42}
    });
    let call = json!({"jsonrpc": "2.0", "id": "u_s_x", "method": "tools/call", "params": params});
    let reply = conn.ask_json(&call.to_string()).await;
    assert_eq!(reply["id"], "u_s_x");
    let seen: Value =
        serde_json::from_str(reply["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    for key in ["name", "arguments", "clientId", "serialNumber"] {
        assert_eq!(seen[key], params[key], "{key}: {seen}");
    }
    for key in ["clientId", "serialNumber", "agentId"] {
        assert_eq!(
            seen["_meta"][key], params["_meta"][key],
            "_meta.{key}: {seen}"
        );
    }
    bridge.shutdown().await;
}

#[tokio::test]
async fn three_bridges_one_server_killed_one_oversize_frame_the_third_untouched() {
    let http = RunningFixture::start(Kind::Http).await;
    let sse = RunningFixture::start(Kind::Sse).await;
    let (mut ea, mut eb, mut ec) = (
        FakeEndpoint::start().await,
        FakeEndpoint::start().await,
        FakeEndpoint::start().await,
    );
    let up_b = upstream(fixture_stdio(), clock::system());
    let clock_c = ManualClock::new();
    let a = spawn(
        "a",
        &ea.url("ta"),
        upstream(
            ServerSpec::Http {
                url: http.url("/mcp"),
                headers: Default::default(),
            },
            clock::system(),
        ),
        ToolFilter::default(),
        clock::system(),
    );
    let b = spawn(
        "b",
        &eb.url("tb"),
        up_b.clone(),
        ToolFilter::default(),
        clock::system(),
    );
    let c = spawn(
        "c",
        &ec.url("tc"),
        upstream(
            ServerSpec::Sse {
                url: sse.url("/sse"),
                headers: Default::default(),
            },
            clock::system(),
        ),
        ToolFilter::default(),
        clock_c.clone(),
    );
    let (mut ca, mut cb, mut cc) = (ea.next().await, eb.next().await, ec.next().await);
    for conn in [&mut ca, &mut cb, &mut cc] {
        let (_, names) = conn.broker_handshake().await;
        assert_eq!(names, BUILT_IN_TOOLS);
    }

    let UpstreamStatus::Up { pid: Some(pid) } = up_b.status() else {
        panic!("{:?}", up_b.status())
    };
    kill(pid);
    let frame = vec![b'x'; 3 * 1024 * 1024];
    cc.send(std::str::from_utf8(&frame).unwrap()).await;
    let closed = cc.closed_by_bridge().await.expect("a close frame");
    assert_eq!(u16::from(closed.code), 1009);

    let before = a.status().frames_in;
    for n in 0..5 {
        let r = ca
            .call(json!(100 + n), "add", json!({"a": n, "b": 1}))
            .await;
        assert_eq!(
            r["result"]["content"][0]["text"],
            (n + 1).to_string(),
            "{r}"
        );
    }
    assert_eq!(a.status().frames_in, before + 5);
    assert!(a.status().connected);

    // B's server comes back by itself (real clock) and B's socket never dropped.
    super::wait_until(
        "b's server is back with a new pid",
        || matches!(up_b.status(), UpstreamStatus::Up { pid: Some(p) } if p != pid),
    )
    .await;
    let r = cb.call(json!(7), "echo", json!({"text": "b"})).await;
    let r = if r.get("method").is_some() {
        cb.recv_json().await
    } else {
        r
    };
    assert_eq!(r["result"]["content"][0]["text"], "b", "{r}");
    assert_eq!(b.status().reconnects, 0);

    // C reconnects after the oversize frame and still works.
    let d = clock_c.next_sleep().await;
    assert!(
        d >= Duration::from_secs(1) && d <= Duration::from_millis(1300),
        "{d:?}"
    );
    assert!(c.status().malformed >= 1);
    clock_c.advance(d);
    let mut cc = ec.next().await;
    cc.broker_handshake().await;
    let r = cc.call(json!("c1"), "echo", json!({"text": "c"})).await;
    assert_eq!(r["result"]["content"][0]["text"], "c");

    futures::future::join_all([a.shutdown(), b.shutdown(), c.shutdown()]).await;
    http.stop().await;
    sse.stop().await;
}

#[tokio::test]
async fn the_bot_itself_on_an_endpoint() {
    let mut endpoint = FakeEndpoint::start().await;
    let toml = format!(
        "[server]\nport = 0\n[model]\npace = 0.0\n\
         [[bridges.xiaozhi]]\nname = \"bot\"\nendpoint = \"{}\"\nservers = [\"@bot\"]\n",
        endpoint.url(TOKEN)
    );
    let config = turnscope::config::Config::parse(&toml).unwrap();
    let bus = Bus::default();
    let mut events = bus.subscribe();
    let app = turnscope::app::App::start(&config, bus).await.unwrap();
    let mut conn = endpoint.next().await;
    let (_, names) = conn.broker_handshake().await;
    assert_eq!(names, ["chat", "start"]);

    let started = conn.call(json!(2), "start", json!({})).await;
    let handle = started["result"]["_meta"]["turnscope/start"]["handle"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(handle.len(), 36);
    let chat = conn
        .call(
            json!(3),
            "chat",
            json!({"handle": handle, "line": "hello there"}),
        )
        .await;
    assert_eq!(
        chat["result"]["content"][0]["text"], "You said: hello there",
        "{chat}"
    );
    assert_eq!(app.sessions.len(), 1);

    let health: Value = reqwest::get(format!("http://{}/healthz", app.server.addr))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let bridge = &health["bridges"]["xiaozhi"][0];
    assert_eq!(bridge["name"], "bot");
    assert_eq!(bridge["connected"], true);
    assert_eq!(bridge["upstream_state"], "up");
    assert!(
        bridge["endpoint"].as_str().unwrap().ends_with("token=***"),
        "{bridge}"
    );
    assert!(!health.to_string().contains(TOKEN));

    let stopping = tokio::spawn(app.shutdown());
    let frame = conn.closed_by_bridge().await.expect("a close frame");
    assert_eq!(u16::from(frame.code), 1000);
    stopping.await.unwrap();
    let mut saw_bridge = false;
    while let Some(e) = events.try_recv() {
        let text = serde_json::to_string(&*e).unwrap();
        assert!(!text.contains(TOKEN), "token in event {text}");
        saw_bridge |= matches!(&*e, Event::Bridge(b) if b.name == "bot");
    }
    assert!(saw_bridge, "bridge state was published");
}

#[tokio::test]
async fn tools_list_pages_follow_the_cursor() {
    let http = RunningFixture::start(Kind::Http).await;
    let mut endpoint = FakeEndpoint::start().await;
    let bridge = turnscope::bridge::xiaozhi::XiaozhiBridge {
        name: "pages".into(),
        endpoint: turnscope::bridge::xiaozhi::endpoint::Endpoint::parse(&endpoint.url(TOKEN))
            .unwrap(),
        upstream: upstream(
            ServerSpec::Http {
                url: http.url("/mcp"),
                headers: Default::default(),
            },
            clock::system(),
        ),
        filter: ToolFilter::default(),
        settings: turnscope::bridge::xiaozhi::BridgeSettings {
            page_size: 3,
            ..Default::default()
        },
    }
    .spawn(&Bus::default());
    let mut conn = endpoint.next().await;
    conn.ask(crate::support::endpoint::BROKER_INITIALIZE).await;
    let mut names = Vec::new();
    let mut cursor = Value::Null;
    let mut pages = 0;
    loop {
        let params = if cursor.is_null() {
            json!({})
        } else {
            json!({"cursor": cursor})
        };
        let req =
            json!({"jsonrpc": "2.0", "id": 100 + pages, "method": "tools/list", "params": params});
        let page = conn.ask_json(&req.to_string()).await;
        let tools = page["result"]["tools"].as_array().unwrap();
        assert!(tools.len() <= 3, "{page}");
        names.extend(
            tools
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_string()),
        );
        pages += 1;
        cursor = page["result"]
            .get("nextCursor")
            .cloned()
            .unwrap_or(Value::Null);
        if cursor.is_null() {
            break;
        }
    }
    names.sort();
    assert_eq!(names, BUILT_IN_TOOLS);
    assert_eq!(pages, 3);
    let bad = conn
        .ask_json(r#"{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{"cursor":"nope"}}"#)
        .await;
    assert_eq!(bad["error"]["code"], -32602);
    bridge.shutdown().await;
    http.stop().await;
}

#[tokio::test]
async fn several_configured_servers_on_one_endpoint() {
    let (one, two, mut endpoint, app) =
        super::two_servers_on_one_bridge(r#""add""#, r#""echo", "fail""#).await;
    let mut conn = endpoint.next().await;
    let (_, names) = conn.broker_handshake().await;
    assert_eq!(
        names,
        ["add", "echo", "fail"],
        "the union of both servers' tools"
    );
    let sum = conn.call(json!("s1"), "add", json!({"a": 2, "b": 3})).await;
    assert_eq!(sum["id"], "s1");
    assert_eq!(sum["result"]["content"][0]["text"], "5", "{sum}");
    let echoed = conn
        .call(json!(7), "echo", json!({"text": "from two"}))
        .await;
    assert_eq!(
        echoed["result"]["content"][0]["text"], "from two",
        "{echoed}"
    );
    let failed = conn
        .call(json!(8), "fail", json!({"message": "nope"}))
        .await;
    assert_eq!(failed["result"]["isError"], true, "{failed}");
    let unknown = conn.call(json!(9), "slow", json!({"ms": 1})).await;
    assert_eq!(
        unknown["result"]["isError"], true,
        "a filtered-out tool is not offered: {unknown}"
    );
    app.shutdown().await;
    one.stop().await;
    two.stop().await;
}
