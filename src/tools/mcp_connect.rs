//! Opening one MCP client connection: the transport for each kind of server (a child process
//! for stdio, rmcp's streamable HTTP client, our legacy SSE client), the `initialize`
//! handshake, and the first `tools/list`, turned into [`SourceTool`]s.
//!
//! Only [`mcp_source`](super::mcp_source) uses this; it owns the retry and respawn loop.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion, Tool};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::{
    StreamableHttpClientTransport, TokioChildProcess,
    streamable_http_client::StreamableHttpClientTransportConfig,
};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::config::{McpServerConfig, ToolFilter, TransportKind};
use super::merge::SourceTool;
use super::policy::GuardedClient;
use super::sse_client::SseClientTransport;
use crate::bridge::names::NameMap;
use crate::bridge::schema;

/// Longest stderr line of a stdio server copied to the log.
const STDERR_LINE_CHARS: usize = 500;

/// How often a streamable HTTP response stream that broke mid-call is resumed before the
/// call fails: at once, then after 0.5 and 1 s, each wait stretched to the server's SSE
/// `retry:` hint if it gave one (rmcp servers say 3 s, so about 6 s in all). rmcp's default
/// retries forever, so a call in flight to a server that died waited for its whole timeout
/// (or forever, where there is none) instead of failing. Every rmcp streamable HTTP client
/// of the crate uses it (tool sources and Xiaozhi upstreams).
pub(crate) fn stream_resume_policy()
-> Arc<rmcp::transport::common::client_side_sse::ExponentialBackoff> {
    let mut policy = rmcp::transport::common::client_side_sse::ExponentialBackoff::default();
    policy.max_times = Some(3);
    policy.base_duration = Duration::from_millis(250);
    policy.max_delay = Some(Duration::from_secs(1));
    Arc::new(policy)
}

/// The rmcp client handler of a source: it wakes the supervisor on
/// `notifications/tools/list_changed`.
#[derive(Clone)]
pub(crate) struct SourceClient {
    pub(crate) server: Arc<str>,
    pub(crate) list_changed: Arc<Notify>,
}

/// What turnscope's MCP client says in `initialize` (tool sources and Xiaozhi upstreams):
/// the newest revision that has the handshake. rmcp's default, 2026-07-28, has none, and a
/// server that only knows the handshake revisions cannot answer it properly.
pub(crate) fn client_config(name: impl Into<String>) -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new(name.into(), env!("CARGO_PKG_VERSION")),
    )
    .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
}

impl ClientHandler for SourceClient {
    fn get_info(&self) -> ClientConfig {
        client_config("turnscope")
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.list_changed.notify_one();
    }
}

/// A live client connection.
pub(crate) struct Connection {
    pub(crate) service: RunningService<RoleClient, SourceClient>,
    /// The child's process id (stdio).
    pub(crate) pid: Option<u32>,
    pub(crate) tools: Vec<SourceTool>,
    /// Tools left out because their schema could not be converted (name and reason).
    pub(crate) rejected: Vec<String>,
}

/// Everything needed to open a connection to one server (placeholders already expanded).
pub(crate) struct Target {
    pub(crate) config: McpServerConfig,
    pub(crate) http: GuardedClient,
    pub(crate) handshake_timeout: Duration,
}

/// Opens a connection, completes the handshake and lists the tools. `ct` ends the
/// connection when cancelled.
pub(crate) async fn connect(
    target: &Target,
    client: SourceClient,
    ct: CancellationToken,
) -> Result<Connection, String> {
    connect_inner(target, client, ct).await.map_err(|error| {
        // A refused redirect hides behind a generic HTTP error; say what really happened.
        match target.http.take_refusal() {
            Some(refusal) => format!("{refusal} ({error})"),
            None => error,
        }
    })
}

async fn connect_inner(
    target: &Target,
    client: SourceClient,
    ct: CancellationToken,
) -> Result<Connection, String> {
    let config = &target.config;
    let (service, pid) = match config.transport_kind() {
        TransportKind::Stdio => {
            let command = config.command.as_deref().unwrap_or_default();
            let mut cmd = tokio::process::Command::new(command);
            cmd.args(&config.args).envs(&config.env).kill_on_drop(true);
            // Its own process group: a Ctrl-C at the terminal reaches turnscope, which then
            // closes the server, instead of killing the server first (and causing a respawn).
            #[cfg(unix)]
            cmd.process_group(0);
            let (transport, stderr) = TokioChildProcess::builder(cmd)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| {
                    format!("cannot start `{command}`: {e}; check the command, its PATH and its arguments")
                })?;
            let pid = transport.id();
            if let Some(stderr) = stderr {
                tokio::spawn(copy_stderr(client.server.clone(), stderr));
            }
            let service = client.serve_with_ct(transport, ct).await.map_err(|e| {
                format!(
                    "`{command}` started but the MCP handshake failed: {}",
                    chain(&e)
                )
            })?;
            (service, pid)
        }
        TransportKind::Http => {
            let url = config.url.as_deref().unwrap_or_default();
            let mut headers = std::collections::HashMap::new();
            for (name, value) in &config.headers {
                let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                    .map_err(|e| format!("header {name:?}: {e}"))?;
                let value = reqwest::header::HeaderValue::from_str(value)
                    .map_err(|e| format!("header {name}: invalid value ({e})"))?;
                headers.insert(name, value);
            }
            let mut transport_config =
                StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers);
            transport_config.retry_config = stream_resume_policy();
            let transport = StreamableHttpClientTransport::with_client(
                target.http.client.clone(),
                transport_config,
            );
            let service = client
                .serve_with_ct(transport, ct)
                .await
                .map_err(|e| format!("MCP handshake with {url} failed: {}", chain(&e)))?;
            (service, None)
        }
        TransportKind::Sse => {
            let url = config.url.as_deref().unwrap_or_default();
            let headers: Vec<(String, String)> = config
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let transport = SseClientTransport::connect_with(
                target.http.client.clone(),
                url,
                &headers,
                target.handshake_timeout,
            )
            .await
            .map_err(|e| e.to_string())?;
            let service = client
                .serve_with_ct(transport, ct)
                .await
                .map_err(|e| format!("MCP handshake with {url} failed: {}", chain(&e)))?;
            (service, None)
        }
    };
    let listed = service
        .peer()
        .list_all_tools()
        .await
        .map_err(|e| format!("connected, but tools/list failed: {}", chain(&e)))?;
    let (tools, rejected) = prepare_tools(&listed, config.tool_filter.as_ref());
    Ok(Connection {
        service,
        pid,
        tools,
        rejected,
    })
}

/// A server's listing as the model will see it: through its `tool_filter`, names made valid
/// for OpenAI (mapped back on call), `$ref`s inlined. A tool whose schema cannot be converted
/// is left out (and named in the second list); the others stay.
pub(crate) fn prepare_tools(
    listed: &[Tool],
    filter: Option<&ToolFilter>,
) -> (Vec<SourceTool>, Vec<String>) {
    let admitted: Vec<&Tool> = listed
        .iter()
        .filter(|t| filter.is_none_or(|f| f.admits(&t.name)))
        .collect();
    let names = NameMap::new(admitted.iter().map(|t| t.name.as_ref()));
    let limits = schema::Limits::default();
    let mut tools = Vec::with_capacity(admitted.len());
    let mut rejected = Vec::new();
    for tool in admitted {
        let raw = Value::Object((*tool.input_schema).clone());
        match schema::to_openai_parameters(Some(&raw), &limits) {
            Ok(parameters) => tools.push(SourceTool {
                name: names
                    .openai_name(&tool.name)
                    .unwrap_or(&tool.name)
                    .to_string(),
                original: tool.name.to_string(),
                description: tool
                    .description
                    .as_deref()
                    .or(tool.title.as_deref())
                    .unwrap_or_default()
                    .to_string(),
                parameters,
            }),
            Err(e) => rejected.push(format!("{}: {e}", tool.name)),
        }
    }
    (tools, rejected)
}

/// An error and its causes in one line, without the Rust type names rmcp puts in its
/// transport errors (`Transport [rmcp::...<...>] error:`).
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut parts: Vec<String> = vec![tidy(&error.to_string())];
    let mut source = error.source();
    while let Some(cause) = source {
        let text = tidy(&cause.to_string());
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = cause.source();
    }
    parts.join(": ")
}

fn tidy(text: &str) -> String {
    let mut out = text.to_string();
    while let Some(start) = out.find(" [rmcp::") {
        let Some(len) = out[start..].find("] ") else {
            break;
        };
        out.replace_range(start..start + len + 1, "");
    }
    out
}

/// Copies a stdio server's stderr to the log, line by line.
async fn copy_stderr(server: Arc<str>, stderr: tokio::process::ChildStderr) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let line: String = line.chars().take(STDERR_LINE_CHARS).collect();
        tracing::debug!(target: "turnscope::mcp_stderr", server = %server, "{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, schema: Value) -> Tool {
        let Value::Object(map) = schema else {
            panic!("object schema")
        };
        Tool::new(name.to_string(), format!("{name} tool"), Arc::new(map))
    }

    #[test]
    fn errors_lose_type_names_and_keep_their_causes() {
        #[derive(Debug)]
        struct Outer(std::io::Error);
        impl std::fmt::Display for Outer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("Send message error Transport [rmcp::transport::worker::WorkerTransport<X<Y>>] error: request failed")
            }
        }
        impl std::error::Error for Outer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let e = Outer(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "connection refused",
        ));
        assert_eq!(
            chain(&e),
            "Send message error Transport error: request failed: connection refused"
        );
    }

    #[test]
    fn filter_names_and_schemas() {
        let listed = [
            tool(
                "read_file",
                json!({"type": "object", "properties": {"path": {"type": "string"}}}),
            ),
            tool("self.audio.set_volume", json!({"type": "object"})),
            tool(
                "loop",
                json!({"$ref": "#/$defs/A", "$defs": {"A": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}}}}),
            ),
            tool("write_file", json!({"type": "object"})),
        ];
        let filter = ToolFilter {
            allow: vec![],
            deny: vec!["write_file".into()],
        };
        let (tools, rejected) = prepare_tools(&listed, Some(&filter));
        let names: Vec<(&str, &str)> = tools
            .iter()
            .map(|t| (t.name.as_str(), t.original.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("read_file", "read_file"),
                ("self_audio_set_volume", "self.audio.set_volume")
            ]
        );
        assert_eq!(rejected.len(), 1);
        assert!(rejected[0].starts_with("loop: "), "{rejected:?}");
        assert_eq!(tools[0].description, "read_file tool");
    }

    #[test]
    fn an_allow_list_hides_the_rest_and_deny_beats_allow() {
        let listed = [
            tool("a", json!({"type": "object"})),
            tool("b", json!({"type": "object"})),
        ];
        let only_a = ToolFilter {
            allow: vec!["a".into()],
            deny: vec![],
        };
        let (tools, _) = prepare_tools(&listed, Some(&only_a));
        assert_eq!(tools.len(), 1);
        assert_eq!(tools[0].name, "a");
        let both = ToolFilter {
            allow: vec!["a".into(), "b".into()],
            deny: vec!["a".into()],
        };
        let (tools, _) = prepare_tools(&listed, Some(&both));
        assert_eq!(tools.len(), 1);
        assert_eq!(tools[0].name, "b");
        let empty = ToolFilter::default();
        assert_eq!(prepare_tools(&listed, Some(&empty)).0.len(), 2);
    }
}
