//! The bridge relaying a stdio server written with the Python `mcp` SDK
//! (`interop/servers/py_stdio_server.py`). Ignored by default because it needs that SDK:
//!
//! ```text
//! TURNSCOPE_PY_MCP=/path/to/python cargo test --test xiaozhi_bridge -- --ignored python
//! ```

use serde_json::json;
use turnscope::bridge::xiaozhi::ServerSpec;
use turnscope::bridge::xiaozhi::clock;
use turnscope::config::ToolFilter;

use super::{TOKEN, spawn, upstream};
use crate::support::endpoint::FakeEndpoint;

#[tokio::test]
#[ignore = "needs a Python with the `mcp` SDK; set TURNSCOPE_PY_MCP and run with --ignored"]
async fn a_python_sdk_stdio_server_through_the_bridge() {
    let python = std::env::var("TURNSCOPE_PY_MCP").unwrap_or_else(|_| "python3".into());
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/interop/servers/py_stdio_server.py"
    );
    let spec = ServerSpec::Stdio {
        command: python,
        args: vec![script.into()],
        env: Default::default(),
    };
    let mut endpoint = FakeEndpoint::start().await;
    let bridge = spawn(
        "py",
        &endpoint.url(TOKEN),
        upstream(spec, clock::system()),
        ToolFilter::default(),
        clock::system(),
    );
    let mut conn = endpoint.next().await;
    let (init, names) = conn.broker_handshake().await;
    assert!(
        init.starts_with(r#"{"jsonrpc":"2.0","id":0,"result":"#),
        "{init}"
    );
    assert!(init.contains(r#""name":"py-interop""#), "{init}");
    assert_eq!(names, ["add", "shout"]);

    let list = conn
        .ask_json(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}"#)
        .await;
    let shout = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "shout")
        .unwrap();
    let schema = shout["inputSchema"].to_string();
    assert!(
        !schema.contains("$ref") && !schema.contains("$defs"),
        "refs inlined: {schema}"
    );
    assert!(schema.contains("separator"), "{schema}");

    let sum = conn
        .call(json!("u_n_3"), "add", json!({"a": 2, "b": 3.5}))
        .await;
    assert_eq!(sum["id"], "u_n_3");
    assert_eq!(sum["result"]["content"][0]["text"], "5.5", "{sum}");
    let loud = conn
        .call(
            json!(4),
            "shout",
            json!({"text": "hi", "style": {"times": 2, "separator": "-"}}),
        )
        .await;
    assert_eq!(loud["result"]["content"][0]["text"], "HI-HI", "{loud}");
    let bad = conn.call(json!(5), "add", json!({"a": "x"})).await;
    assert!(
        bad["result"]["isError"] == true || bad.get("error").is_some(),
        "{bad}"
    );
    bridge.shutdown().await;
}
