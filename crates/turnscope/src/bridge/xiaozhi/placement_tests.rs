use std::collections::HashMap;

use super::*;

fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k| map.get(k).cloned()
}

#[test]
fn env_var_names_follow_the_baseline() {
    assert_eq!(env_var_for("my-server"), "MCP_ENDPOINT_MY_SERVER");
    assert_eq!(env_var_for("home.v2"), "MCP_ENDPOINT_HOME_V2");
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
