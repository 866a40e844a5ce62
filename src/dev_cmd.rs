//! `turnscope dev`: helpers for testing turnscope against others (the MCP conformance suite's
//! client scenarios). Not `src/dev/`, which is the `turnscope-dev` binary's.

use anyhow::Context as _;
use turnscope::observe::Bus;

/// `turnscope dev mcp-client`: one tool source, connected, listed, maybe called, closed.
pub(crate) async fn mcp_client(url: &str, call: Option<&str>, args: &str) -> anyhow::Result<()> {
    use turnscope::config::{McpServerConfig, TransportKind};
    use turnscope::tools::mcp_source::{McpSource, SourceOptions, SourceStatus};
    use turnscope::tools::policy::Policy;
    let args: serde_json::Value = serde_json::from_str(args).with_context(|| {
        format!("--args {args:?} is not JSON; expected an object such as '{{\"a\": 1}}'")
    })?;
    anyhow::ensure!(
        args.is_object(),
        "--args must be a JSON object, e.g. '{{\"a\": 1}}'"
    );
    // As `[[mcp_servers]]` would say it, so every default of a tool source applies.
    let config: McpServerConfig =
        serde_json::from_value(serde_json::json!({"name": "server", "url": url}))?;
    anyhow::ensure!(
        config.transport_kind() == TransportKind::Http,
        "{url} is not a streamable HTTP URL; give the server's MCP endpoint (http://host:port/mcp)"
    );
    let source = McpSource::start(
        &config,
        &std::sync::Arc::new(Policy::open()),
        // Named apart from the bot's own tool sources, so a turnscope server it connects to
        // does not list its sessions as if the bot opened them.
        SourceOptions::default().with_client_name("turnscope-dev-mcp-client"),
        &Bus::default(),
    )
    .map_err(anyhow::Error::msg)?;
    source.first_attempt().await;
    let outcome = match source.status() {
        SourceStatus::Up { .. } => {
            let names: Vec<String> = source.tools().iter().map(|t| t.original.clone()).collect();
            println!("connected to {url}; tools: {}", names.join(", "));
            match call {
                Some(name) => {
                    let outcome = source.call(name, args).await;
                    println!("{name}: {}", outcome.text);
                    if outcome.is_error {
                        Err(anyhow::anyhow!(
                            "the call to {name} failed: {}",
                            outcome.text
                        ))
                    } else {
                        Ok(())
                    }
                }
                None => Ok(()),
            }
        }
        other => Err(anyhow::anyhow!(
            "could not connect to {url}: {other:?}; check the URL and that the server is up"
        )),
    };
    source.close().await;
    outcome
}
