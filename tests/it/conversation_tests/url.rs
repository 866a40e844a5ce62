//! `turnscope test --url`: turnscope in another process (the conversations recorded as the
//! client saw them), a text-only bot (tool and end-reason expectations not checkable) and a bot
//! putting its turn record in `_meta["turnscope/turn"]`.

use serde_json::Value;

use super::{code, example, json_lines, scratch, text, turnscope_test};
use crate::support::headless_bin::Headless;

#[tokio::test]
async fn url_runs_against_turnscope_in_another_process() {
    let mut server = Headless::start(
        "ct-url",
        "[bot]\ngreeting = \"Hi from the other process.\"\n[model]\npace = 0\n",
        &[],
    )
    .await;
    let dir = scratch("url");
    let out = turnscope_test(
        &[
            "--url",
            &server.url,
            "--jobs",
            "2",
            "--json",
            "--events",
            "client.jsonl",
            &example(),
        ],
        &dir,
    )
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out));
    let (cases, _) = json_lines(&out);
    assert_eq!(cases.len(), 8);
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("with --url, --events records the conversations as this client saw them"),
        "{}",
        text(&out)
    );
    let client = std::fs::read_to_string(dir.join("client.jsonl")).unwrap();
    assert!(
        client.matches("\"type\":\"turn_started\"").count() >= 10,
        "{client}"
    );
    assert!(
        client.contains("\"opener\":{\"mcp\":\"turnscope test\"}"),
        "{client}"
    );
    // Each opening carries the greeting the target's `start` gave.
    let openings = client.matches("\"closed\":null").count();
    let greeted = client
        .matches("\"greeting\":\"Hi from the other process.\"")
        .count();
    assert!(
        openings >= 8 && greeted == openings,
        "{greeted} of {openings}: {client}"
    );
    // A failure names the client-side session and turn in that file.
    std::fs::write(
        dir.join("f.test.toml"),
        "[[case]]\nname = \"wrong\"\n[[case.turn]]\nsay = \"a\"\n[[case.turn]]\nsay = \"echo b\"\nreply_contains = \"zzz\"\n",
    )
    .unwrap();
    let out = turnscope_test(
        &["--url", &server.url, "--events", "f.jsonl", "f.test.toml"],
        &dir,
    )
    .await;
    assert_eq!(code(&out), 1, "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("in the events: session 1, turn 2"),
        "{}",
        text(&out)
    );
    let failed = std::fs::read_to_string(dir.join("f.jsonl")).unwrap();
    assert!(
        failed.contains("\"name\":\"echo\"") && failed.contains("The echo tool says: b"),
        "{failed}"
    );
    // The target's figures of the turn are recorded, not zeros (tour M): the call's time and
    // result size, the rounds, the tokens.
    let events: Vec<serde_json::Value> = failed
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let call = events
        .iter()
        .find(|e| e["type"] == "tool_call" && e["name"] == "echo")
        .expect("the echo call");
    assert!(call["result_bytes"].as_u64() > Some(0), "{call}");
    let ended = events
        .iter()
        .find(|e| e["type"] == "turn_ended" && e["turn"] == 2)
        .expect("turn 2's end");
    assert_eq!(ended["rounds"], 1, "{ended}");
    assert!(
        ended["usage"]["prompt_tokens"].as_u64() > Some(0),
        "{ended}"
    );
    // The other process served the turns.
    server.terminate();
    server.exit().await;
    assert!(
        server
            .events_text()
            .matches("\"type\":\"turn_started\"")
            .count()
            >= 10
    );
}

#[tokio::test]
async fn url_follows_the_turns_a_target_serves_as_tasks() {
    // Every chat of a client declaring the tasks extension (as `turnscope test` does) is a task
    // at once, polled every 50 ms.
    let mut server = Headless::start(
        "ct-tasks",
        "[server]\ntask_after_seconds = 0\ntask_poll_seconds = 0.05\n[model]\npace = 0.01\n",
        &[],
    )
    .await;
    let dir = scratch("url-tasks");
    let out = turnscope_test(
        &["--url", &server.url, "--events", "client.jsonl", &example()],
        &dir,
    )
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out));
    // The client's record shows each task it followed, created and collected.
    let client = std::fs::read_to_string(dir.join("client.jsonl")).unwrap();
    let collected = client.matches("\"change\":\"collected\"").count();
    assert!(collected >= 10, "{collected} tasks collected: {client}");
    server.terminate();
    server.exit().await;
    let served = server.events_text();
    assert_eq!(
        served.matches("\"change\":\"created\"").count(),
        served.matches("\"change\":\"collected\"").count(),
        "every task the target created was polled to its result"
    );
    assert!(served.matches("\"change\":\"created\"").count() >= collected);
}

/// A bot server of its own: `start` and `chat` answering "You said: LINE" as text only (as
/// pipecat-mcp-transport does), or, with `meta`, a model-facing text and the turn record in
/// `_meta["turnscope/turn"]` (the record's place from turnscope's MCP face on).
#[derive(Clone)]
struct OtherBot {
    meta: bool,
}

impl rmcp::ServerHandler for OtherBot {
    fn get_info(&self) -> rmcp::model::ServerConfig {
        rmcp::model::ServerConfig::new(
            rmcp::model::ServerCapabilities::builder()
                .enable_tools()
                .build(),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<rmcp::model::PaginatedRequestParams>,
        _context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::ListToolsResult, rmcp::ErrorData> {
        let schema = serde_json::json!({"type": "object", "properties": {}});
        Ok(rmcp::model::ListToolsResult::with_all_items(vec![
            crate::support::servers::tool("start", "opens", schema.clone()),
            crate::support::servers::tool("chat", "says", schema),
        ]))
    }

    async fn call_tool(
        &self,
        request: rmcp::model::CallToolRequestParams,
        _context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, rmcp::ErrorData> {
        use rmcp::model::{CallToolResult, ContentBlock, MetaObject};
        if request.name == "start" {
            return Ok(CallToolResult::success(vec![ContentBlock::text("a-handle")]).into());
        }
        let line = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("line"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if !self.meta {
            return Ok(CallToolResult::success(vec![ContentBlock::text(format!(
                "You said: {line}"
            ))])
            .into());
        }
        let mut result = CallToolResult::success(vec![ContentBlock::text("text for the model")]);
        let mut meta = serde_json::Map::new();
        meta.insert(
            "turnscope/turn".into(),
            serde_json::json!({
                "turn": 1, "reply": format!("You said: {line}"), "end_reason": "length",
                "error": null, "rounds": 1, "first_piece_ms": 1.5, "total_ms": 3.0,
                "tool_calls": [{"name": "echo", "arguments": "{\"text\":\"x\"}", "is_error": false}],
            }),
        );
        result.meta = Some(MetaObject(meta));
        Ok(result.into())
    }
}

#[tokio::test]
async fn a_text_only_target_makes_tool_and_end_reason_expectations_not_checkable() {
    let (url, stop) = crate::support::servers::serve_mcp(OtherBot { meta: false }).await;
    let dir = scratch("text-only");
    std::fs::write(
        dir.join("t.test.toml"),
        r#"
[[case]]
name = "reply and budgets"
[[case.turn]]
say = "hi"
reply_contains = "You said: hi"
total_ms = 10000
no_error = true

[[case]]
name = "tools"
[[case.turn]]
say = "hi"
tools = []

[[case]]
name = "end reason"
[[case.turn]]
say = "hi"
end_reason = "completed"

[[case]]
name = "first piece with no progress"
[[case.turn]]
say = "hi"
first_piece_ms = 10000
"#,
    )
    .unwrap();
    let out = turnscope_test(
        &["--url", &url, "--json", "--junit", "r.xml", "t.test.toml"],
        &dir,
    )
    .await;
    stop.cancel();
    assert_eq!(code(&out), 2, "{}", text(&out));
    let (cases, summary) = json_lines(&out);
    assert_eq!(
        (summary["passed"].as_u64(), summary["errors"].as_u64()),
        (Some(1), Some(3))
    );
    for (name, key) in [
        ("tools", "`tools`"),
        ("end reason", "`end_reason`"),
        ("first piece with no progress", "`first_piece_ms`"),
    ] {
        let c = cases.iter().find(|c| c["case"] == name).unwrap();
        assert_eq!(c["status"], "error", "{c}");
        let error = c["not_passed"][0]["error"].as_str().unwrap();
        assert!(
            error.starts_with(&format!("{key} is not checkable against this target")),
            "{error}"
        );
    }
    let xml = std::fs::read_to_string(dir.join("r.xml")).unwrap();
    assert_eq!(xml.matches("<error message=\"`").count(), 3, "{xml}");
}

#[tokio::test]
async fn the_turn_record_is_read_from_meta_before_the_text() {
    let (url, stop) = crate::support::servers::serve_mcp(OtherBot { meta: true }).await;
    let dir = scratch("meta");
    std::fs::write(
        dir.join("m.test.toml"),
        r#"
[[case]]
name = "record in _meta"
[[case.turn]]
say = "hi"
reply_contains = "You said: hi"
reply_not_contains = "text for the model"
tools = [{ name = "echo", args = { text = "x" } }]
end_reason = "length"
first_piece_ms = 2
total_ms = 4
"#,
    )
    .unwrap();
    let out = turnscope_test(&["--url", &url, "m.test.toml"], &dir).await;
    stop.cancel();
    assert_eq!(code(&out), 0, "{}", text(&out));
}
