//! The MCP client every bench drives a server with: an rmcp client over streamable HTTP,
//! with kept-alive connections or one per request, and the back-to-back turns of one handle
//! (of any [`TurnClient`]: this one, or `bench load`'s lean client, `bench::lean`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use turnscope::server::mcp_text::text_of;

/// How a bench client's HTTP requests reach the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Connections {
    /// Kept alive and reused, as the TypeScript SDK client and `turnscope attach` do: what a
    /// bench measures unless it says otherwise.
    KeptAlive,
    /// A new TCP connection for every request: rmcp's own default client
    /// (`pool_max_idle_per_host(0)`), which every bench used before `bench load` compared
    /// the two. The Python SDK client behaves so too (counted with `strace`, see
    /// docs/benchmarks.md).
    PerRequest,
}

impl Connections {
    /// The name a row gives it.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Connections::KeptAlive => "kept alive",
            Connections::PerRequest => "one per request",
        }
    }
}

/// A connected MCP client.
pub struct BenchClient {
    client: RunningService<rmcp::RoleClient, ()>,
}

impl BenchClient {
    /// Connects to `url`; its requests reuse kept-alive connections.
    pub async fn connect(url: &str) -> anyhow::Result<Self> {
        Self::connect_with(url, Connections::KeptAlive).await
    }

    /// Connects to `url` with its HTTP connections made as `connections` says.
    pub(crate) async fn connect_with(url: &str, connections: Connections) -> anyhow::Result<Self> {
        let config = StreamableHttpClientTransportConfig::with_uri(url.to_string());
        let transport = match connections {
            // Idle connections are let go after 4 s, well inside the server's header
            // deadline, which closes an idle keep-alive connection.
            Connections::KeptAlive => StreamableHttpClientTransport::with_client(
                reqwest::Client::builder()
                    .pool_idle_timeout(Duration::from_secs(4))
                    .build()
                    .context("building the bench's HTTP client")?,
                config,
            ),
            Connections::PerRequest => StreamableHttpClientTransport::from_config(config),
        };
        let client = ().serve(transport).await?;
        Ok(Self { client })
    }

    /// Ends the MCP session (so the server sees it go while it still runs). Every bench
    /// closes its clients before the server it measured: a client dropped instead deletes its
    /// MCP session later, from a task of its own, and logs an ERROR when the server is gone.
    pub async fn close(self) {
        let _ = self.client.cancel().await;
    }

    /// Closes every client of a bench that shared them (see [`BenchClient::close`]).
    pub async fn close_all(clients: Vec<Arc<BenchClient>>) {
        for client in clients {
            if let Ok(client) = Arc::try_unwrap(client) {
                client.close().await;
            }
        }
    }

    /// Calls a tool and returns its whole result.
    pub async fn call_result(&self, name: &str, args: Value) -> anyhow::Result<CallToolResult> {
        let mut params = CallToolRequestParams::new(name.to_string());
        if let Value::Object(map) = args {
            params = params.with_arguments(map);
        }
        Ok(self.client.call_tool(params).await?)
    }

    /// Calls a tool and returns (text, is_error).
    pub async fn call(&self, name: &str, args: Value) -> anyhow::Result<(String, bool)> {
        let result = self.call_result(name, args).await?;
        let text = text_of(&result);
        Ok((text, result.is_error == Some(true)))
    }

    /// `start` → handle (from the result's `_meta`, where programs read it).
    pub async fn start(&self) -> anyhow::Result<String> {
        let result = self.call_result("start", json!({})).await?;
        let handle = result
            .meta
            .as_ref()
            .and_then(|m| m.get(turnscope::server::mcp_text::START_META))
            .and_then(|s| s.get("handle"))
            .and_then(Value::as_str);
        match handle {
            Some(handle) if result.is_error != Some(true) => Ok(handle.to_string()),
            _ => anyhow::bail!("start failed: {:?}", result.content),
        }
    }

    /// `tools/list` → how many tools.
    pub async fn list_tools(&self) -> anyhow::Result<usize> {
        Ok(self.client.list_all_tools().await?.len())
    }

    /// `chat` asking for progress (a `progressToken`, as Claude Code and the Python SDK send):
    /// the server sends one notification per reply piece before the result.
    pub async fn chat_with_progress(&self, handle: &str, line: &str) -> anyhow::Result<String> {
        use rmcp::model::{NumberOrString, ProgressToken, RequestParamsMeta};
        let mut params = CallToolRequestParams::new("chat");
        if let Value::Object(map) = json!({"handle": handle, "line": line}) {
            params = params.with_arguments(map);
        }
        params.set_progress_token(ProgressToken(NumberOrString::String(
            uuid::Uuid::new_v4().to_string().into(),
        )));
        let result = self.client.call_tool(params).await?;
        let reply = text_of(&result);
        anyhow::ensure!(result.is_error != Some(true), "chat failed: {reply}");
        Ok(reply)
    }

    /// `chat` → reply (an error reply is an error).
    pub async fn chat(&self, handle: &str, line: &str) -> anyhow::Result<String> {
        let (reply, err) = self
            .call("chat", json!({"handle": handle, "line": line}))
            .await?;
        anyhow::ensure!(!err, "chat failed: {reply}");
        anyhow::ensure!(!reply.is_empty(), "chat gave an empty reply");
        Ok(reply)
    }
}

/// What the load of a bench needs of an MCP client: start a session, say a line in it.
pub(crate) trait TurnClient: Send + Sync + 'static {
    /// `start` → the new session's handle.
    fn start(&self) -> impl Future<Output = anyhow::Result<String>> + Send;
    /// `chat` → the reply (an error reply, or an empty one, is an error).
    fn chat(&self, handle: &str, line: &str)
    -> impl Future<Output = anyhow::Result<String>> + Send;
}

impl TurnClient for BenchClient {
    async fn start(&self) -> anyhow::Result<String> {
        BenchClient::start(self).await
    }

    async fn chat(&self, handle: &str, line: &str) -> anyhow::Result<String> {
        BenchClient::chat(self, handle, line).await
    }
}

/// Says `turns` lines on `handle` back to back: each turn's latency in ms, and the failures.
pub(crate) async fn chat_turns(
    client: &impl TurnClient,
    handle: &str,
    turns: usize,
) -> (Vec<f64>, usize) {
    let mut latencies = Vec::with_capacity(turns);
    let mut errors = 0;
    for t in 0..turns {
        let at = Instant::now();
        match client.chat(handle, &format!("line {t}")).await {
            Ok(_) => latencies.push(at.elapsed().as_secs_f64() * 1000.0),
            Err(_) => errors += 1,
        }
    }
    (latencies, errors)
}

/// `sessions` sessions at once, session `i` started on `clients[i % len]`, each saying `turns`
/// lines back to back: every answered turn's latency in ms (in no order), and the failures
/// (a session that could not start counts all its turns failed).
pub(crate) async fn sessions_chatting<C: TurnClient>(
    clients: &[Arc<C>],
    sessions: usize,
    turns: usize,
) -> anyhow::Result<(Vec<f64>, usize)> {
    let mut tasks = Vec::with_capacity(sessions);
    for i in 0..sessions {
        let client = clients[i % clients.len()].clone();
        tasks.push(tokio::spawn(async move {
            match client.start().await {
                Ok(handle) => chat_turns(&*client, &handle, turns).await,
                Err(_) => (Vec::new(), turns),
            }
        }));
    }
    let mut all = Vec::with_capacity(sessions * turns);
    let mut errors = 0;
    for task in tasks {
        let (latencies, failed) = task.await.context("a session's load task panicked")?;
        all.extend(latencies);
        errors += failed;
    }
    Ok((all, errors))
}
