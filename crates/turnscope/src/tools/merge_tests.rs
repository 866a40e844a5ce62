//! Precedence, collisions, reserved names and both caps (bridges.md cases 65-67).

use serde_json::json;

use super::*;

fn local(name: &str, source: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: String::new(),
        input_schema: json!({"type": "object", "properties": {}}),
        source: source.into(),
    }
}

fn tools(names: &[&str]) -> Vec<SourceTool> {
    names
        .iter()
        .map(|n| SourceTool {
            name: (*n).into(),
            original: (*n).into(),
            description: format!("{n} tool"),
            parameters: json!({"type": "object", "properties": {}}),
        })
        .collect()
}

fn numbered(prefix: &str, n: usize) -> Vec<SourceTool> {
    let names: Vec<String> = (0..n).map(|i| format!("{prefix}{i}")).collect();
    tools(&names.iter().map(String::as_str).collect::<Vec<_>>())
}

fn names(m: &Merged) -> Vec<(String, String)> {
    m.specs
        .iter()
        .map(|s| (s.name.clone(), s.source.clone()))
        .collect()
}

#[test]
fn builtin_then_own_then_servers_in_order_and_duplicates_skipped() {
    let local = [local("hangup", "builtin"), local("lookup", "rust")];
    let s1 = tools(&["lookup", "ticket"]);
    let s2 = tools(&["ticket", "x"]);
    let m = merge(
        &local,
        &["hangup"],
        &[
            ServerTools {
                server: "server1",
                tools: &s1,
                unusable: &[],
            },
            ServerTools {
                server: "server2",
                tools: &s2,
                unusable: &[("remote_ref".into(), "a $ref to another document".into())],
            },
        ],
        &McpLimits::default(),
    );
    let expected: Vec<(String, String)> = [
        ("hangup", "builtin"),
        ("lookup", "rust"),
        ("ticket", "server1"),
        ("x", "server2"),
    ]
    .iter()
    .map(|(a, b)| ((*a).into(), (*b).into()))
    .collect();
    assert_eq!(names(&m), expected);
    assert_eq!(
        m.skipped,
        [
            Skip {
                tool: "lookup".into(),
                source: "server1".into(),
                reason: SkipReason::TakenBy("rust".into()),
            },
            Skip {
                tool: "ticket".into(),
                source: "server2".into(),
                reason: SkipReason::TakenBy("server1".into()),
            },
            Skip {
                tool: "remote_ref".into(),
                source: "server2".into(),
                reason: SkipReason::UnusableSchema("a $ref to another document".into()),
            },
        ]
    );
    let lines: Vec<String> = m.skipped.iter().map(ToString::to_string).collect();
    assert!(
        lines[2].contains("`remote_ref` of server2")
            && lines[2].contains("input schema cannot be used: a $ref to another document"),
        "{}",
        lines[2]
    );
    assert!(
        lines[1].contains("`ticket`")
            && lines[1].contains("server2")
            && lines[1].contains("server1")
    );
    assert_eq!(
        m.routes["ticket"],
        Route::Mcp {
            server: 0,
            original: "ticket".into()
        }
    );
    assert_eq!(m.routes["lookup"], Route::Local(1));
}

#[test]
fn a_reserved_name_is_skipped_even_when_its_builtin_is_off() {
    // `end_session` is reserved but not among the local tools (turned off for this bot).
    let server = tools(&["end_session", "search"]);
    let m = merge(
        &[],
        &["end_session"],
        &[ServerTools {
            server: "crm",
            tools: &server,
            unusable: &[],
        }],
        &McpLimits::default(),
    );
    assert_eq!(names(&m), [("search".to_string(), "crm".to_string())]);
    assert_eq!(m.skipped[0].reason, SkipReason::Reserved);
    assert!(m.skipped[0].to_string().contains("reserved"));
}

#[test]
fn a_local_duplicate_loses_to_the_builtin() {
    let m = merge(
        &[local("clock", "builtin"), local("clock", "rust")],
        &[],
        &[],
        &McpLimits::default(),
    );
    assert_eq!(m.specs.len(), 1);
    assert_eq!(m.specs[0].source, "builtin");
    assert_eq!(m.skipped[0].reason, SkipReason::TakenBy("builtin".into()));
}

#[test]
fn per_server_cap_keeps_the_first_in_listing_order() {
    let big = numbered("t", 60);
    let m = merge(
        &[],
        &[],
        &[ServerTools {
            server: "big",
            tools: &big,
            unusable: &[],
        }],
        &McpLimits::default(),
    );
    assert_eq!(m.specs.len(), 50);
    assert_eq!(m.specs[0].name, "t0");
    assert_eq!(m.specs[49].name, "t49");
    assert_eq!(m.skipped.len(), 10);
    assert!(
        m.skipped
            .iter()
            .all(|s| s.reason == SkipReason::PerServerCap(50))
    );
    assert_eq!(m.skipped[0].tool, "t50");
}

#[test]
fn total_cap_consumes_servers_in_config_order() {
    let a = numbered("a", 50);
    let b = numbered("b", 50);
    let c = numbered("c", 30);
    let m = merge(
        &[local("clock", "builtin")],
        &[],
        &[
            ServerTools {
                server: "a",
                tools: &a,
                unusable: &[],
            },
            ServerTools {
                server: "b",
                tools: &b,
                unusable: &[],
            },
            ServerTools {
                server: "c",
                tools: &c,
                unusable: &[],
            },
        ],
        &McpLimits::default(),
    );
    // Local tools do not count against the MCP total.
    assert_eq!(m.specs.len(), 101);
    assert!(m.specs.iter().all(|s| s.source != "c"));
    assert_eq!(m.specs.last().unwrap().name, "b49");
    assert_eq!(m.skipped.len(), 30);
    assert!(
        m.skipped
            .iter()
            .all(|s| s.source == "c" && s.reason == SkipReason::TotalCap(100))
    );
}

#[test]
fn a_skipped_duplicate_does_not_use_up_the_total() {
    let a = tools(&["x", "y"]);
    let b = tools(&["x", "z"]);
    let limits = McpLimits {
        total: 3,
        ..McpLimits::default()
    };
    let m = merge(
        &[],
        &[],
        &[
            ServerTools {
                server: "a",
                tools: &a,
                unusable: &[],
            },
            ServerTools {
                server: "b",
                tools: &b,
                unusable: &[],
            },
        ],
        &limits,
    );
    let got: Vec<&str> = m.specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(got, ["x", "y", "z"]);
}
