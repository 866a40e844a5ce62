//! `turnscope bridge openai`: the binary with mcp-openai-bridge's command line (stdio and SSE
//! upstreams, the README flow, a killed child respawned), and in-process against a server
//! that pages its `tools/list`, changes it at run time, and offers names and schemas OpenAI
//! cannot take as they are (cases 31, 34, 35).

use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use turnscope::bridge::openai::standalone::{self, Standalone, StandaloneOptions};
use turnscope::observe::Bus;

use crate::support::binary::{ready_line, serving, terminate, url_in};
use crate::support::fixture::{BUILT_IN_TOOLS, Kind, RunningFixture, WAIT};
use crate::support::openai::function_names;
use crate::support::servers::{self, serve_mcp, wait_until};

/// The bridge binary, its base URL, and its child handle.
struct Binary {
    child: tokio::process::Child,
    base: String,
}

impl Binary {
    async fn start(args: &[&str]) -> Binary {
        let mut child = serving(&["bridge", "openai"])
            .args(args)
            .args(["--port", "0"])
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let ready = ready_line(&mut child).await;
        assert!(ready.contains("8 tools"), "{ready}");
        let tools_url = url_in(&ready, "/v1/tools");
        Binary {
            child,
            base: tools_url.trim_end_matches("/v1/tools").to_string(),
        }
    }

    async fn stop(mut self) {
        let status = terminate(&mut self.child).await;
        assert!(status.success(), "{status}");
    }
}

async fn get(url: &str) -> Value {
    tokio::time::timeout(WAIT, reqwest::get(url))
        .await
        .unwrap()
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn execute(base: &str, body: Value) -> Value {
    let response = tokio::time::timeout(
        WAIT,
        reqwest::Client::new()
            .post(format!("{base}/v1/execute"))
            .json(&body)
            .send(),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

fn fixture_line() -> String {
    format!(
        "{} fixture-server --stdio",
        env!("CARGO_BIN_EXE_turnscope-dev")
    )
}

/// The baseline's README flow, through the binary: list the tools, then execute a call with
/// the JSON *string* arguments a model gives (the baseline sends that string upstream and
/// fails); over stdio and legacy SSE.
#[tokio::test]
async fn the_readme_flow_works_over_stdio_and_sse() {
    let sse = RunningFixture::start(Kind::Sse).await;
    let line = fixture_line();
    let sse_url = sse.url("/sse");
    for upstream in [["--stdio", line.as_str()], ["--sse", sse_url.as_str()]] {
        let bridge = Binary::start(&upstream).await;
        let tools = get(&format!("{}/v1/tools", bridge.base)).await;
        let mut listed = function_names(&tools);
        listed.sort();
        assert_eq!(listed, BUILT_IN_TOOLS, "{upstream:?}");
        let add = tools
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["function"]["name"] == "add")
            .unwrap();
        assert_eq!(add["type"], "function");
        assert_eq!(add["function"]["parameters"]["type"], "object");
        assert_eq!(add["function"]["parameters"]["required"], json!(["a", "b"]));

        let model_arguments = "{\"a\": 2, \"b\": 40}";
        let result = execute(
            &bridge.base,
            json!({"name": "add", "arguments": model_arguments}),
        )
        .await;
        assert_eq!(
            result,
            json!({"content": [{"type": "text", "text": "42"}], "is_error": false, "text": "42"})
        );
        bridge.stop().await;
    }
}

/// Case 31 (pinned): after the stdio server is killed between calls, calls made while it is
/// respawned are errors saying so, and the next ones succeed on the new process.
#[tokio::test]
async fn a_killed_stdio_server_is_respawned_between_calls() {
    let line = fixture_line();
    let bridge = Binary::start(&["--stdio", line.as_str()]).await;
    let health = get(&format!("{}/healthz", bridge.base)).await;
    assert_eq!(health["upstream"]["state"], "up", "{health}");
    let pid = health["upstream"]["pid"].as_u64().unwrap();
    let status = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let base = bridge.base.clone();
    let errors = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = errors.clone();
    wait_until("a call succeeds after the respawn", || {
        let base = base.clone();
        let seen = seen.clone();
        async move {
            let result =
                execute(&base, json!({"name": "add", "arguments": {"a": 1, "b": 1}})).await;
            if result["is_error"] == true {
                seen.lock()
                    .unwrap()
                    .push(result["text"].as_str().unwrap().to_string());
                false
            } else {
                result["text"] == "2"
            }
        }
    })
    .await;
    for error in errors.lock().unwrap().iter() {
        assert!(
            [
                "reconnect",
                "connecting",
                "not connected",
                "between connections"
            ]
            .iter()
            .any(|w| error.contains(w)),
            "{error}"
        );
    }
    let health = get(&format!("{}/healthz", bridge.base)).await;
    assert_ne!(
        health["upstream"]["pid"].as_u64(),
        Some(pid),
        "a new process"
    );
    bridge.stop().await;
}

/// An upstream that never comes up: the health says the bridge is degraded, and a call is
/// told the server is not connected and retried, not only that no tool has its name (tour M:
/// "the tools offered are: no tools", under a health of "ok").
#[tokio::test]
async fn an_upstream_that_never_came_up_is_said_by_the_health_and_the_call() {
    let mut child = serving(&[
        "bridge",
        "openai",
        "--stdio",
        "sh -c 'exit 3'",
        "--port",
        "0",
    ])
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let ready = ready_line(&mut child).await;
    let base = url_in(&ready, "/v1/tools")
        .trim_end_matches("/v1/tools")
        .to_string();
    let health = get(&format!("{base}/healthz")).await;
    assert_eq!(health["status"], "degraded", "{health}");
    let result = execute(&base, json!({"name": "add", "arguments": {"a": 1}})).await;
    let text = result["text"].as_str().unwrap();
    // Down, or connecting again already (its retry): either way said.
    assert!(
        result["is_error"] == true
            && text.contains("unknown tool `add`")
            && (text.contains("MCP server `upstream` is not connected")
                || text.contains("MCP server `upstream` is still connecting")),
        "{result}"
    );
    let status = terminate(&mut child).await;
    assert!(status.success(), "{status}");
}

/// An MCP server that lists its tools two per page, counts `tools/list` calls, grows a tool
/// on `grow` (announcing it with `tools/list_changed`) and answers other calls with the
/// name it was called by.
#[derive(Clone)]
struct Paged {
    tools: Arc<RwLock<Vec<Tool>>>,
    lists: Arc<AtomicUsize>,
}

fn tool(name: &str, schema: Value) -> Tool {
    servers::tool(name, &format!("{name} tool"), schema)
}

impl ServerHandler for Paged {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("paged", "0.0.1"))
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.lists.fetch_add(1, Ordering::SeqCst);
        let from: usize = request
            .and_then(|r| r.cursor)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let tools = self.tools.read().unwrap();
        let page: Vec<Tool> = tools.iter().skip(from).take(2).cloned().collect();
        let mut result = ListToolsResult::with_all_items(page);
        if from + 2 < tools.len() {
            result.next_cursor = Some((from + 2).to_string());
        }
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name == "grow" {
            self.tools
                .write()
                .unwrap()
                .push(tool("grown", json!({"type": "object"})));
            let _ = context.peer.notify_tool_list_changed().await;
        }
        Ok(CallToolResult::success(vec![ContentBlock::text(request.name.to_string())]).into())
    }
}

/// The bridge in this process, for the HTTP server at `url`, on any free port.
async fn start_in_process(url: &str, auth_token: Option<&str>) -> Standalone {
    let options = StandaloneOptions {
        http: Some(url.into()),
        port: 0,
        auth_token: auth_token.map(Into::into),
        ..StandaloneOptions::default()
    };
    tokio::time::timeout(WAIT, standalone::start(&options, Bus::default()))
        .await
        .expect("the bridge starts within the wait")
        .expect("the bridge starts")
}

/// Cases 34 and 35, and the name/schema rules: every page of `tools/list` is merged; a
/// hundred listings cost no `tools/list`; `tools/list_changed` shows in the next listings;
/// a dotted name is made valid and mapped back; a tool with a cyclic schema is left out
/// while the others are served.
#[tokio::test]
async fn pages_are_merged_listings_are_cached_and_changes_are_seen() {
    let handler = Paged {
        tools: Arc::new(RwLock::new(vec![
            tool("one", json!({"type": "object"})),
            tool(
                "self.audio.set_volume",
                json!({"type": "object", "properties": {"level": {"$ref": "#/$defs/L"}}, "$defs": {"L": {"type": "integer"}}}),
            ),
            tool(
                "loop",
                json!({"type": "object", "properties": {"a": {"$ref": "#"}}}),
            ),
            tool("grow", json!({"type": "object"})),
            tool("five", json!({"type": "object"})),
        ])),
        lists: Arc::new(AtomicUsize::new(0)),
    };
    let (url, stop) = serve_mcp(handler.clone()).await;
    let bridge = start_in_process(&url, None).await;
    let base = bridge.base_url();
    let tools = get(&format!("{base}/v1/tools")).await;
    assert_eq!(
        function_names(&tools),
        ["one", "self_audio_set_volume", "grow", "five"],
        "three pages merged, the cyclic tool left out"
    );
    let volume = &tools[1]["function"]["parameters"];
    assert_eq!(volume["properties"]["level"], json!({"type": "integer"}));
    let lists_after_start = handler.lists.load(Ordering::SeqCst);
    assert_eq!(lists_after_start, 3, "one listing, three pages");

    for _ in 0..100 {
        get(&format!("{base}/v1/tools")).await;
    }
    assert_eq!(handler.lists.load(Ordering::SeqCst), lists_after_start);

    let renamed = execute(
        &base,
        json!({"name": "self_audio_set_volume", "arguments": {"level": 3}}),
    )
    .await;
    assert_eq!(
        renamed["text"], "self.audio.set_volume",
        "called by its own name upstream"
    );

    execute(&base, json!({"name": "grow"})).await;
    let listing = format!("{base}/v1/tools");
    wait_until("the grown tool is listed", || {
        let listing = listing.clone();
        async move { function_names(&get(&listing).await).contains(&"grown".to_string()) }
    })
    .await;
    assert_eq!(
        execute(&base, json!({"name": "grown"})).await["text"],
        "grown"
    );
    bridge.shutdown().await;
    stop.cancel();
}

/// The standalone bridge has the main server's guard: a token when given, the Host check,
/// and it does not offer chat completions.
#[tokio::test]
async fn the_standalone_bridge_is_guarded_and_serves_tools_only() {
    let fixture = RunningFixture::start(Kind::Http).await;
    let url = fixture.url("/mcp");
    let bridge = start_in_process(&url, Some("s3cret")).await;
    let base = bridge.base_url();
    let client = reqwest::Client::new();
    let without = client.get(format!("{base}/v1/tools")).send().await.unwrap();
    assert_eq!(without.status(), 401);
    let refusal = openai_error(without).await;
    assert_eq!(refusal["type"], "authentication_error", "{refusal}");
    assert!(
        refusal["message"].as_str().unwrap().contains("Bearer"),
        "the guard's words, in OpenAI's envelope: {refusal}"
    );
    let health = client.get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 401);
    assert!(
        health.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain"),
        "outside /v1/ the refusal stays text"
    );
    let too_large = client
        .post(format!("{base}/v1/execute"))
        .bearer_auth("s3cret")
        .body(vec![b' '; 5 * 1024 * 1024])
        .send()
        .await
        .unwrap();
    assert_eq!(too_large.status(), 413);
    let refusal = openai_error(too_large).await;
    assert_eq!(refusal["code"], "request_too_large", "{refusal}");
    assert!(
        refusal["message"]
            .as_str()
            .unwrap()
            .contains("server.max_body_bytes"),
        "{refusal}"
    );
    let with = client
        .get(format!("{base}/v1/tools"))
        .bearer_auth("s3cret")
        .send()
        .await
        .unwrap();
    assert_eq!(with.status(), 200);
    let foreign = client
        .get(format!("{base}/v1/tools"))
        .bearer_auth("s3cret")
        .header("host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), 421);
    assert_eq!(openai_error(foreign).await["type"], "permission_error");
    let chat = client
        .post(format!("{base}/v1/chat/completions"))
        .bearer_auth("s3cret")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(chat.status(), 404);
    let refusal = openai_error(chat).await;
    assert!(
        refusal["message"]
            .as_str()
            .unwrap()
            .contains("serves GET /v1/tools and POST /v1/execute only"),
        "{refusal}"
    );
    bridge.shutdown().await;
}

/// The `error` object of an answer in OpenAI's error envelope (JSON, as its SDKs read it).
async fn openai_error(response: reqwest::Response) -> Value {
    assert_eq!(
        response.headers()["content-type"],
        "application/json",
        "an OpenAI client reads errors as JSON"
    );
    let mut body: Value = response.json().await.unwrap();
    body["error"].take()
}
