use std::collections::HashMap;

use super::*;

fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k| map.get(k).cloned()
}

fn entry(name: &str, servers: &[&str]) -> XiaozhiEntry {
    XiaozhiEntry {
        name: name.into(),
        endpoint: None,
        servers: servers.iter().map(|s| s.to_string()).collect(),
        tools: ToolRules::default(),
    }
}

#[test]
fn env_var_names_follow_the_baseline() {
    assert_eq!(env_var_for("my-server"), "MCP_ENDPOINT_MY_SERVER");
    assert_eq!(env_var_for("home.v2"), "MCP_ENDPOINT_HOME_V2");
}

#[test]
fn vars_expand_and_missing_ones_are_named() {
    let env = env_of(&[("XIAOZHI_TOKEN", "t0k")]);
    assert_eq!(
        expand_vars("wss://api.xiaozhi.me/mcp/?token=${XIAOZHI_TOKEN}", &env).unwrap(),
        "wss://api.xiaozhi.me/mcp/?token=t0k"
    );
    let e = expand_vars("wss://h/?token=${NOPE}", &env).unwrap_err();
    assert!(e.contains("NOPE"), "{e}");
    assert!(expand_vars("${OPEN", &env).is_err());
}

#[test]
fn endpoint_precedence_own_then_named_then_global() {
    let env = env_of(&[
        ("MCP_ENDPOINT_MY_SERVER", "ws://named/?token=n"),
        ("MCP_ENDPOINT", "ws://global/?token=g"),
    ]);
    let (placed, warnings) = place(
        vec![
            ("my-server".into(), Some("ws://own/?token=o".into()), ()),
            ("my-server".into(), None, ()),
            ("other".into(), None, ()),
        ],
        &env,
    );
    let shown: Vec<&str> = placed.iter().map(|p| p.endpoint.shown()).collect();
    assert_eq!(
        shown,
        [
            "ws://own/?token=***",
            "ws://named/?token=***",
            "ws://global/?token=***"
        ]
    );
    assert_eq!(
        placed[1].source,
        EndpointSource::Named("MCP_ENDPOINT_MY_SERVER".into())
    );
    assert_eq!(placed[2].source, EndpointSource::Global);
    assert!(warnings.is_empty(), "{warnings:?}");
}

#[test]
fn no_endpoint_skips_and_a_shared_global_warns() {
    let (placed, warnings) = place(
        vec![("a".into(), None, ()), ("b".into(), None, ())],
        &env_of(&[]),
    );
    assert!(placed.is_empty());
    assert_eq!(warnings.len(), 2);
    assert!(warnings[0].contains("MCP_ENDPOINT_A") && warnings[0].contains("skipped"));

    let env = env_of(&[("MCP_ENDPOINT", "wss://h/mcp/?token=secret")]);
    let (placed, warnings) = place(vec![("a".into(), None, ()), ("b".into(), None, ())], &env);
    assert_eq!(placed.len(), 2);
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].contains("a, b") && !warnings[0].contains("secret"));

    let (placed, warnings) = place(
        vec![("c".into(), Some("https://x/?token=zz".into()), ())],
        &env,
    );
    assert!(placed.is_empty());
    assert!(
        warnings[0].contains("ws://") && !warnings[0].contains("zz"),
        "{warnings:?}"
    );
}

#[test]
fn entries_are_validated() {
    assert!(validate_entries(&[entry("a", &["files"]), entry("b", &["@bot"])]).is_ok());
    let dup = validate_entries(&[entry("a", &["x"]), entry("a", &["y"])]).unwrap_err();
    assert!(dup.contains("bridges.xiaozhi[1].name"), "{dup}");
    assert!(
        validate_entries(&[entry("a", &[])])
            .unwrap_err()
            .contains("servers")
    );
    assert!(validate_entries(&[entry("a", &["@bot", "x"])]).is_err());
    let mut overlap = entry("a", &["x"]);
    overlap.tools = ToolRules {
        allow: vec!["rm".into()],
        deny: vec!["rm".into()],
    };
    let e = validate_entries(&[overlap]).unwrap_err();
    assert!(
        e.contains("bridges.xiaozhi[0].tools") && e.contains("rm"),
        "{e}"
    );
}

#[test]
fn mcp_config_json_in_the_baseline_shape() {
    let text = r#"{
      "mcpServers": {
        "calc": {"type": "stdio", "command": "python", "args": ["calc.py"], "env": {"A": "1"},
                 "tools": {"deny": ["rm"]}, "endpoint": "wss://h/mcp/?token=x", "timeout": 5},
        "remote": {"transportType": "Streamable-HTTP", "url": "http://h/mcp", "headers": {"X": "y"}},
        "legacy": {"url": "http://h/sse/"},
        "guess": {"url": "http://h/mcp"},
        "off": {"command": "nope", "disabled": true}
      }
    }"#;
    let servers = parse_mcp_config(text).unwrap();
    let names: Vec<&str> = servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["calc", "guess", "legacy", "remote"]);
    assert_eq!(
        servers[0].spec,
        ServerSpec::Stdio {
            command: "python".into(),
            args: vec!["calc.py".into()],
            env: BTreeMap::from([("A".into(), "1".into())]),
        }
    );
    assert_eq!(servers[0].tools.deny, ["rm"]);
    assert_eq!(servers[0].endpoint.as_deref(), Some("wss://h/mcp/?token=x"));
    assert!(matches!(servers[1].spec, ServerSpec::Http { .. }));
    assert!(matches!(servers[2].spec, ServerSpec::Sse { .. }));
    assert!(matches!(&servers[3].spec, ServerSpec::Http { headers, .. } if headers["X"] == "y"));
}

#[test]
fn mcp_config_errors_name_the_server() {
    let e = parse_mcp_config(r#"{"mcpServers": {"x": {"type": "stdio"}}}"#).unwrap_err();
    assert!(e.contains("mcpServers.x") && e.contains("command"), "{e}");
    let e = parse_mcp_config(r#"{"mcpServers": {"x": {"type": "ws", "url": "u"}}}"#).unwrap_err();
    assert!(e.contains("mcpServers.x.type"), "{e}");
    let e = parse_mcp_config(
        r#"{"mcpServers": {"x": {"command": "c", "tools": {"allow": ["a"], "deny": ["a"]}}}}"#,
    )
    .unwrap_err();
    assert!(e.contains("mcpServers.x.tools"), "{e}");
    assert!(parse_mcp_config("[server]\nport = 1").is_err());
}
