//! The OpenAI bridge over real HTTP on loopback (bridges.md section 12, cases 25–44):
//! `/v1/tools` and `/v1/execute` embedded in the main server with the fixture MCP server as
//! a tool source (this file), the chat-completions loop against a scripted fake model
//! (`openai_bridge/chat.rs`), and the standalone `turnscope bridge openai`
//! (`openai_bridge/standalone.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::support::fixture::{Kind, RunningFixture, WAIT};
use crate::support::openai::{Served, config, serve};
use crate::support::servers::named;
use async_trait::async_trait;
use serde_json::{Value, json};
use turnscope::app::App;
use turnscope::config::McpServerConfig;
use turnscope::observe::{Bus, Event};
use turnscope::tools::{CallContext, ToolOutcome, ToolSpec, Tools};
use turnscope_fixture::TINY_PNG_BASE64;

/// The fixture over streamable HTTP as the bot's only MCP server, `fx`.
async fn with_fixture(bus: Bus) -> (Served, RunningFixture) {
    let fixture = RunningFixture::start(Kind::Http).await;
    let served = serve(
        config(
            None,
            vec![McpServerConfig::http("fx", &fixture.url("/mcp"))],
        ),
        None,
        bus,
    )
    .await;
    (served, fixture)
}

/// Bridges.md cases 25, 26 and 32: results, tool errors and typed content.
#[tokio::test]
async fn execute_returns_results_tool_errors_and_typed_content() {
    let (served, _fixture) = with_fixture(Bus::default()).await;
    let names = served.tool_names().await;
    for name in [
        "clock", "echo", "add", "fail", "image", "slow", "big", "add_tool",
    ] {
        assert!(names.contains(&name.to_string()), "{name} in {names:?}");
    }
    assert!(!names.contains(&"end_session".to_string()), "{names:?}");

    let sum = served.execute("add", json!({"a": 1, "b": 2})).await;
    assert_eq!(sum["content"], json!([{"type": "text", "text": "3"}]));
    assert_eq!(sum["is_error"], false);
    assert_eq!(sum["text"], "3");

    let failed = served.execute("fail", json!({"message": "boom"})).await;
    assert_eq!(failed["is_error"], true);
    assert_eq!(failed["content"], json!([{"type": "text", "text": "boom"}]));

    let image = served.execute("image", json!({})).await;
    assert_eq!(image["is_error"], false);
    assert_eq!(
        image["content"][0],
        json!({"type": "image", "mimeType": "image/png", "data": TINY_PNG_BASE64})
    );
    assert_eq!(image["content"][1]["type"], "text");
    assert!(
        image["text"]
            .as_str()
            .unwrap()
            .starts_with("[image: image/png"),
        "{image}"
    );

    let clock = served.execute("clock", Value::Null).await;
    assert_eq!(
        clock["is_error"], false,
        "built-ins are served too: {clock}"
    );
    served.stop().await;
}

/// Counts the calls that reach the tool set.
struct Counting {
    inner: Arc<dyn Tools>,
    calls: AtomicUsize,
}

#[async_trait]
impl Tools for Counting {
    fn specs(&self) -> Arc<[ToolSpec]> {
        self.inner.specs()
    }
    async fn call(&self, name: &str, arguments: Value) -> ToolOutcome {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.call(name, arguments).await
    }
    async fn call_in(&self, name: &str, arguments: Value, cx: &CallContext) -> ToolOutcome {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.call_in(name, arguments, cx).await
    }
}

/// Bridges.md cases 27 and 28: unknown names and bad arguments are 200 + `is_error`, and
/// never reach the tool set; arguments may be the JSON string a model's call carries.
#[tokio::test]
async fn unknown_names_and_bad_arguments_are_tool_errors_that_call_nothing() {
    let fixture = RunningFixture::start(Kind::Http).await;
    let bus = Bus::default();
    let config = config(
        None,
        vec![McpServerConfig::http("fx", &fixture.url("/mcp"))],
    );
    let registry = App::tool_registry(&config, &bus, Vec::new()).await.unwrap();
    let counting = Arc::new(Counting {
        inner: registry.clone(),
        calls: AtomicUsize::new(0),
    });
    let served = serve(config, Some(counting.clone()), bus).await;

    let unknown = served.execute("no_such_tool", json!({})).await;
    assert_eq!(unknown["is_error"], true);
    let text = unknown["text"].as_str().unwrap();
    assert!(
        text.contains("`no_such_tool`") && text.contains("add"),
        "{text}"
    );

    let bad = served.execute("add", json!("{bad")).await;
    assert_eq!(bad["is_error"], true);
    assert!(
        bad["text"].as_str().unwrap().contains("not valid JSON"),
        "{bad}"
    );
    let not_object = served.execute("add", json!([1, 2])).await;
    assert_eq!(not_object["is_error"], true);
    assert_eq!(
        counting.calls.load(Ordering::SeqCst),
        0,
        "nothing was called"
    );

    let as_string = served.execute("add", json!("{\"a\":1,\"b\":2}")).await;
    assert_eq!(as_string["is_error"], false, "{as_string}");
    assert_eq!(as_string["text"], "3");
    assert_eq!(counting.calls.load(Ordering::SeqCst), 1);
    served.stop().await;
    registry.shutdown().await;
}

/// Bridges.md cases 29 and 30: an upstream JSON-RPC error and an upstream that is too slow
/// (cancelled upstream) are 200 + `is_error` with the code / the timeout in the text.
#[tokio::test]
async fn upstream_errors_and_timeouts_are_tool_errors() {
    let mut upstream = named("far", &["broken", "hang"]).await;
    let mut slow = McpServerConfig::http("far", &upstream.url);
    slow.timeout_seconds = 0.3;
    let served = serve(config(None, vec![slow]), None, Bus::default()).await;

    let broken = served.execute("broken", json!({})).await;
    assert_eq!(broken["is_error"], true);
    let text = broken["text"].as_str().unwrap();
    assert!(
        text.contains("-32602") && text.contains("broken on purpose"),
        "{text}"
    );

    let hung = served.execute("hang", json!({})).await;
    assert_eq!(hung["is_error"], true);
    assert!(
        hung["text"].as_str().unwrap().contains("longer than 0.3 s"),
        "{hung}"
    );
    let cancelled = tokio::time::timeout(WAIT, upstream.cancelled.recv())
        .await
        .expect("notifications/cancelled reaches the server");
    assert_eq!(cancelled.as_deref(), Some("far:hang"));
    served.stop().await;
}

/// Bridges.md case 33 (pinned): a body that is not a request is a 400 saying what shape is
/// expected; the route never answers 500.
#[tokio::test]
async fn a_body_that_is_not_a_request_is_a_400_naming_the_shape() {
    let (served, _fixture) = with_fixture(Bus::default()).await;
    for body in [
        "not json".to_string(),
        "[]".to_string(),
        json!({"arguments": {"a": 1}}).to_string(),
        json!({"name": 7}).to_string(),
    ] {
        let (status, answer) = served.post_raw("/v1/execute", body.clone()).await;
        assert_eq!(status, 400, "{body}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains("{\"name\""), "{body}: {message}");
        assert_eq!(answer["error"]["type"], "invalid_request_error");
    }
    let (status, _) = served.get("/v1/execute").await;
    assert_eq!(status, 405);
    served.stop().await;
}

/// The bridge's routes sit behind the server's Host/Origin guard (cases 36–37) and publish
/// `Served` and `ToolCall` events for the console.
#[tokio::test]
async fn bridge_routes_are_guarded_and_publish_served_events() {
    let bus = Bus::default();
    let mut events = bus.subscribe();
    let (served, _fixture) = with_fixture(bus).await;
    let port = served.base.rsplit(':').next().unwrap().to_string();
    for host in [format!("127.0.0.1:{port}"), format!("localhost:{port}")] {
        let status = served
            .http
            .get(served.url("/v1/tools"))
            .header("host", host.clone())
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status, 200, "{host}");
    }
    let foreign = served
        .http
        .get(served.url("/v1/tools"))
        .header("host", "evil.example")
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(foreign, 421);
    let origin = served
        .http
        .post(served.url("/v1/execute"))
        .header("origin", "http://evil.example")
        .body(json!({"name": "add", "arguments": {"a": 1, "b": 1}}).to_string())
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(origin, 403);

    served.execute("add", json!({"a": 1, "b": 1})).await;
    served.execute("fail", json!({"message": "x"})).await;
    let expected = [
        "GET /v1/tools true",
        "tool add true",
        "POST /v1/execute true",
        "tool fail false",
        "POST /v1/execute false",
    ];
    let mut seen: Vec<String> = Vec::new();
    while !expected.iter().all(|e| seen.iter().any(|s| s == e)) {
        let event = tokio::time::timeout(WAIT, events.recv())
            .await
            .unwrap_or_else(|_| panic!("events {expected:?}, saw {seen:?}"))
            .expect("the bus is open");
        match &*event {
            Event::Served {
                route,
                ok,
                error,
                at_us,
                ..
            } if route.contains(" /v1/") => {
                // A failure says when and what the client was told (tour M: neither).
                assert_eq!(!ok, error.is_some() && *at_us > 0, "{event:?}");
                seen.push(format!("{route} {ok}"));
            }
            Event::ToolCall(call) if call.session == 0 => {
                // Its arguments, result and start, as a turn's calls are recorded.
                assert!(call.started_us > 0 && !call.result.is_empty(), "{call:?}");
                if call.name == "add" {
                    assert_eq!(call.arguments, r#"{"a":1,"b":1}"#);
                }
                seen.push(format!("tool {} {}", call.name, call.error.is_none()));
            }
            _ => {}
        }
    }
    served.stop().await;
}

mod chat;

mod standalone;

/// `GET /v1/tools?strict=true`: the fixture's tools in their strict-mode versions, each sent
/// back as OpenAI strict mode wants it; the plain listing is unchanged.
#[tokio::test]
async fn the_strict_listing_serves_strict_mode_versions() {
    let (served, fixture) = with_fixture(Bus::default()).await;
    let (status, strict) = served.get("/v1/tools?strict=true").await;
    assert_eq!(status, 200, "{strict}");
    let trip = strict
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["function"])
        .find(|f| f["name"] == "plan_trip")
        .expect("plan_trip is served")
        .clone();
    assert_eq!(trip["strict"], true, "{trip}");
    let p = &trip["parameters"];
    assert_eq!(p["additionalProperties"], false);
    assert_eq!(p["properties"]["party"]["additionalProperties"], false);
    let required: Vec<&str> = p["required"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        required,
        ["breakfast", "city", "nights", "party", "tags", "units"]
    );
    assert_eq!(p["properties"]["tags"]["type"], json!(["array", "null"]));
    // oneOf becomes anyOf with a null choice; defaults move into the description.
    assert_eq!(
        p["properties"]["units"]["anyOf"][2],
        json!({"type": "null"})
    );
    assert!(
        p["properties"]["units"]["description"]
            .as_str()
            .unwrap()
            .contains("(default: metric)")
    );
    let (_, plain) = served.get("/v1/tools").await;
    let plain_trip = plain
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "plan_trip")
        .unwrap();
    assert!(plain_trip["function"].get("strict").is_none());
    served.stop().await;
    drop(fixture);
}
