//! Parsing and validation of `[[mcp_servers]]`, `[policy]` and the Claude-Desktop JSON shape.

use super::*;
use crate::config::Config;
use crate::config::mcp_servers::{Scope, TransportKind};
use crate::config::tool_filter::ToolFilter;

#[test]
fn toml_servers_parse_with_defaults_and_inference() {
    let c = Config::parse(
        r#"
[[mcp_servers]]
name = "files"
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
env = { LOG_LEVEL = "warn" }
tool_filter = ["read_file"]

[[mcp_servers]]
name = "crm-tools"
url = "https://mcp.example.com/mcp"
headers = { Authorization = "Bearer ${TOKEN}" }
timeout_seconds = 5
scope = "session"

[[mcp_servers]]
name = "legacy"
transport = "sse"
url = "http://127.0.0.1:9000/sse"
tool_filter = { allow = ["a", "b"], deny = ["b"] }

[policy]
allowed_url_patterns = ["https://*.example.com/*"]
stdio_enabled = false
"#,
    )
    .unwrap();
    let [files, crm, legacy] = &c.mcp_servers[..] else {
        panic!("three servers: {:?}", c.mcp_servers)
    };
    assert_eq!(files.transport_kind(), TransportKind::Stdio);
    assert_eq!(files.timeout_seconds, DEFAULT_CALL_TIMEOUT_SECONDS);
    assert_eq!(files.scope, Scope::Shared);
    assert_eq!(
        files.tool_filter,
        Some(ToolFilter {
            allow: vec!["read_file".into()],
            deny: vec![]
        })
    );
    assert_eq!(crm.transport_kind(), TransportKind::Http);
    assert_eq!(crm.scope, Scope::Session);
    assert_eq!(crm.timeout_seconds, 5.0);
    assert_eq!(legacy.transport_kind(), TransportKind::Sse);
    let filter = legacy.tool_filter.as_ref().unwrap();
    assert!(filter.admits("a") && !filter.admits("b") && !filter.admits("c"));
    assert_eq!(c.policy.stdio_enabled, Some(false));
    assert!(!c.policy.locked);
}

fn toml_error(text: &str) -> String {
    Config::parse(text).unwrap_err().to_string()
}

#[test]
fn bad_entries_name_the_entry_the_key_and_what_was_expected() {
    let e = toml_error("[[mcp_servers]]\nname = \"Files\"\ncommand = \"x\"\n");
    assert!(
        e.contains("mcp_servers[0].name") && e.contains("a-z, 0-9"),
        "{e}"
    );
    let e = toml_error(
        "[[mcp_servers]]\nname = \"a\"\ncommand = \"x\"\n[[mcp_servers]]\nname = \"a\"\ncommand = \"y\"\n",
    );
    assert!(
        e.contains("mcp_servers[1]") && e.contains("mcp_servers[0]"),
        "{e}"
    );
    let e = toml_error("[[mcp_servers]]\nname = \"web\"\n");
    assert!(e.contains("mcp_servers[0] (\"web\").url: missing"), "{e}");
    let e = toml_error("[[mcp_servers]]\nname = \"web\"\nurl = \"ftp://x/mcp\"\n");
    assert!(e.contains(".url:") && e.contains("http"), "{e}");
    let e = toml_error("[[mcp_servers]]\nname = \"s\"\ntransport = \"stdio\"\n");
    assert!(e.contains(".command: missing"), "{e}");
    let e = toml_error("[[mcp_servers]]\nname = \"s\"\ntransport = \"pigeon\"\ncommand = \"x\"\n");
    assert!(e.contains("pigeon") && e.contains("transport"), "{e}");
    let e = toml_error("[[mcp_servers]]\nname = \"s\"\ncommand = \"x\"\ncommandd = \"y\"\n");
    assert!(e.contains("commandd"), "{e}");
    let e = toml_error("[[mcp_servers]]\nname = \"s\"\ncommand = \"x\"\ntimeout_seconds = 0\n");
    assert!(
        e.contains(".timeout_seconds: expected a number of seconds > 0"),
        "{e}"
    );
    let e = toml_error(
        "[[mcp_servers]]\nname = \"s\"\nurl = \"http://h/mcp\"\nheaders = { Accept = \"x\" }\n",
    );
    assert!(
        e.contains(".headers.Accept") && e.contains("transport itself"),
        "{e}"
    );
    let e = toml_error(
        "[[mcp_servers]]\nname = \"s\"\nurl = \"http://h/mcp\"\nheaders = { Authorization = \"Bearer ${TOKEN\" }\n",
    );
    assert!(
        e.contains(".headers.Authorization") && e.contains("not closed"),
        "{e}"
    );
    let e = toml_error(
        "[[mcp_servers]]\nname = \"s\"\ncommand = \"x\"\ntool_filter = { only = [\"a\"] }\n",
    );
    assert!(e.contains("only") && e.contains("allow"), "{e}");
    let e = toml_error("[policy]\nstdio = true\n");
    assert!(e.contains("stdio"), "{e}");
}

#[test]
fn claude_desktop_json_keeps_file_order() {
    let c = Config::parse_json(
        r#"{
          "globalShortcut": "Ctrl+Space",
          "mcpServers": {
            "zeta": {"command": "npx", "args": ["-y", "server-z"], "env": {"K": "v"}},
            "alpha": {"type": "streamable-http", "url": "http://127.0.0.1:9000/mcp", "headers": {"Authorization": "Bearer x"}},
            "mid": {"url": "http://127.0.0.1:9001/sse", "transportType": "sse", "disabled": true, "autoApprove": []},
            "plain": {"url": "http://127.0.0.1:9002/mcp", "disabledTools": ["rm"], "timeout": 3}
          }
        }"#,
    )
    .unwrap();
    let names: Vec<&str> = c.mcp_servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["zeta", "alpha", "mid", "plain"]);
    assert_eq!(c.mcp_servers[0].transport_kind(), TransportKind::Stdio);
    assert_eq!(c.mcp_servers[1].transport_kind(), TransportKind::Http);
    assert_eq!(c.mcp_servers[2].transport_kind(), TransportKind::Sse);
    assert!(c.mcp_servers[2].disabled);
    assert_eq!(c.mcp_servers[3].transport_kind(), TransportKind::Http);
    assert_eq!(c.mcp_servers[3].timeout_seconds, 3.0);
    assert!(!c.mcp_servers[3].tool_filter.as_ref().unwrap().admits("rm"));
    // Everything else keeps its default.
    assert_eq!(c.server.port, 7870);
}

#[test]
fn claude_desktop_json_errors_name_the_key() {
    let e = Config::parse_json(r#"{"servers": {}}"#)
        .unwrap_err()
        .to_string();
    assert!(e.contains("mcpServers: missing"), "{e}");
    let e = Config::parse_json(r#"{"mcpServers": {"a": {"command": "x", "args": "-y"}}}"#)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("mcpServers.a.args: expected an array of strings, got a string"),
        "{e}"
    );
    let e = Config::parse_json(r#"{"mcpServers": {"a": {"command": "x", "workdir": "/"}}}"#)
        .unwrap_err()
        .to_string();
    assert!(e.contains("mcpServers.a.workdir: unknown key"), "{e}");
    let c = Config::parse_json(r#"{"mcpServers": {"a": {"command": "x", "cwd": "srv"}}}"#).unwrap();
    assert_eq!(
        c.mcp_servers[0].cwd.as_deref(),
        Some(std::path::Path::new("srv"))
    );
    let e = Config::parse_json(r#"{"mcpServers": {"a": {"url": "http://h/", "type": "ws"}}}"#)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("mcpServers.a.type") && e.contains("\"ws\""),
        "{e}"
    );
    // A Claude Desktop name is taken as turnscope writes names; one still not a name is
    // refused, named.
    let c = Config::parse_json(r#"{"mcpServers": {"My_Server": {"command": "x"}}}"#).unwrap();
    assert_eq!(c.mcp_servers[0].name, "my-server");
    let e = Config::parse_json(r#"{"mcpServers": {"my/server": {"command": "x"}}}"#)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("mcpServers.my/server") && e.contains("rename"),
        "{e}"
    );
    let e = Config::parse_json(r#"{"mcpServers": {"a": {"command": "x"}, "a": {"command": "y"}}}"#)
        .unwrap_err()
        .to_string();
    assert!(e.contains("listed twice"), "{e}");
    let e = Config::parse_json(r#"{"mcpServers": {"a": {}}}"#)
        .unwrap_err()
        .to_string();
    assert!(e.contains("mcp_servers[0] (\"a\").url: missing"), "{e}");
    let e = Config::parse_json("{not json").unwrap_err().to_string();
    assert!(e.contains("not a JSON config"), "{e}");
}

#[test]
fn a_json_file_is_loaded_by_extension() {
    let dir = std::env::temp_dir().join(format!("turnscope-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("claude.json");
    std::fs::write(
        &path,
        r#"{"mcpServers": {"a": {"command": "x", "args": 3}}}"#,
    )
    .unwrap();
    let e = Config::load(Some(&path), &Default::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("claude.json") && e.contains("mcpServers.a.args"),
        "{e}"
    );
    std::fs::write(&path, r#"{"mcpServers": {"a": {"command": "x"}}}"#).unwrap();
    let (c, found) = Config::load(Some(&path), &Default::default()).unwrap();
    assert_eq!(found.as_deref(), Some(path.as_path()));
    assert_eq!(c.mcp_servers.len(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}
