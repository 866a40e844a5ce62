//! Shared helpers for the fixture and SSE-client integration tests.
//!
//! When ported to turnscope, replace `turnscope::` with `turnscope::` (and
//! `turnscope::mcp::sse_client` with `turnscope::mcp::sse_client`).

#![allow(dead_code)]

use std::{net::SocketAddr, time::Duration};

use rmcp::{
    ClientHandler, RoleClient,
    model::{CallToolRequestParams, CallToolResult, ProgressNotificationParam},
    service::{NotificationContext, RunningService, ServiceError},
};
use serde_json::{Value, json};
use tokio::{net::TcpListener, sync::mpsc, task::JoinHandle};
use tokio_util::sync::CancellationToken;
use turnscope_fixture as fixture;

/// How long any single wait in these tests may take before failing.
pub const WAIT: Duration = Duration::from_secs(10);

/// Which fixture server to start.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Http,
    Sse,
}

/// A fixture server running on 127.0.0.1 with an OS-chosen port.
pub struct RunningFixture {
    pub addr: SocketAddr,
    pub shutdown: CancellationToken,
    pub task: JoinHandle<std::io::Result<()>>,
}

impl RunningFixture {
    pub async fn start(kind: Kind) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let shutdown = CancellationToken::new();
        let token = shutdown.clone();
        let task = tokio::spawn(async move {
            match kind {
                Kind::Http => fixture::serve_http(listener, token).await,
                Kind::Sse => fixture::serve_sse(listener, token).await,
            }
        });
        Self {
            addr,
            shutdown,
            task,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Cancels the server and checks that it returns promptly and cleanly.
    pub async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(WAIT, self.task)
            .await
            .expect("server did not stop after cancel")
            .expect("server task panicked")
            .expect("server returned an error");
    }
}

/// What the recording client saw, besides responses.
pub struct Seen {
    pub progress: mpsc::UnboundedReceiver<ProgressNotificationParam>,
    pub list_changed: mpsc::UnboundedReceiver<()>,
}

/// A client handler that forwards progress and tools/list_changed notifications to channels.
#[derive(Clone)]
pub struct Recorder {
    progress: mpsc::UnboundedSender<ProgressNotificationParam>,
    list_changed: mpsc::UnboundedSender<()>,
}

impl Recorder {
    pub fn new() -> (Self, Seen) {
        // Unbounded: one message per notification the test's own server sends, a handful.
        let (progress, progress_rx) = mpsc::unbounded_channel();
        let (list_changed, list_changed_rx) = mpsc::unbounded_channel();
        (
            Self {
                progress,
                list_changed,
            },
            Seen {
                progress: progress_rx,
                list_changed: list_changed_rx,
            },
        )
    }
}

impl ClientHandler for Recorder {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.progress.send(params);
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.list_changed.send(());
    }
}

pub type Client = RunningService<RoleClient, Recorder>;

pub async fn call(
    client: &Client,
    name: &'static str,
    arguments: Value,
) -> Result<CallToolResult, ServiceError> {
    let Value::Object(arguments) = arguments else {
        panic!("tool arguments must be a JSON object");
    };
    let params = CallToolRequestParams::new(name).with_arguments(arguments);
    tokio::time::timeout(WAIT, client.call_tool(params))
        .await
        .unwrap_or_else(|_| panic!("tools/call {name} timed out"))
}

/// The text of a result made of exactly one text block.
pub fn only_text(result: &CallToolResult) -> &str {
    assert_eq!(result.content.len(), 1, "expected one block: {result:?}");
    &result.content[0]
        .as_text()
        .unwrap_or_else(|| panic!("expected a text block: {result:?}"))
        .text
}

pub const BUILT_IN_TOOLS: [&str; 8] = [
    "add",
    "add_tool",
    "big",
    "echo",
    "fail",
    "image",
    "plan_trip",
    "slow",
];

async fn tool_names(client: &Client) -> Vec<String> {
    let tools = tokio::time::timeout(WAIT, client.list_all_tools())
        .await
        .expect("tools/list timed out")
        .expect("tools/list failed");
    let mut names: Vec<String> = tools
        .into_iter()
        .map(|tool| tool.name.into_owned())
        .collect();
    names.sort();
    names
}

/// Runs the same checks over any transport: handshake, tools/list, good and failing calls,
/// progress from `slow`, content from `big` and `image`, and list_changed after `add_tool`.
pub async fn exercise_fixture(client: Client, mut seen: Seen) {
    let info = client.peer_info().expect("initialized");
    let server_info = info.server_info.as_ref().expect("server info");
    assert_eq!(server_info.name, fixture::SERVER_NAME);
    let tools_capability = info.capabilities.tools.clone().expect("tools capability");
    assert_eq!(tools_capability.list_changed, Some(true));

    assert_eq!(tool_names(&client).await, BUILT_IN_TOOLS);

    let echo = call(&client, "echo", json!({"text": "héllo wörld"}))
        .await
        .unwrap();
    assert_ne!(echo.is_error, Some(true));
    assert_eq!(only_text(&echo), "héllo wörld");

    let sum = call(&client, "add", json!({"a": 2, "b": 3.5}))
        .await
        .unwrap();
    assert_eq!(only_text(&sum), "5.5");

    let failed = call(&client, "fail", json!({"message": "boom"}))
        .await
        .unwrap();
    assert_eq!(failed.is_error, Some(true));
    assert_eq!(only_text(&failed), "boom");

    // rmcp clients attach a progress token to every request, so `slow` reports progress.
    let slept = call(&client, "slow", json!({"ms": 350})).await.unwrap();
    assert_eq!(only_text(&slept), "slept 350 ms");
    let mut progress = Vec::new();
    for _ in 0..3 {
        let param = tokio::time::timeout(WAIT, seen.progress.recv())
            .await
            .expect("progress notification timed out")
            .expect("progress channel closed");
        progress.push(param);
    }
    let values: Vec<f64> = progress.iter().map(|p| p.progress).collect();
    assert_eq!(values, [100.0, 200.0, 300.0]);
    assert!(progress.iter().all(|p| p.total == Some(350.0)));
    assert_eq!(progress[0].message.as_deref(), Some("100 of 350 ms"));
    assert!(
        seen.progress.try_recv().is_err(),
        "no more than 3 notifications"
    );

    let big = call(&client, "big", json!({"bytes": 100_000}))
        .await
        .unwrap();
    let text = only_text(&big);
    assert_eq!(text.len(), 100_000);
    assert!(text.bytes().all(|b| b == b'x'));

    let image = call(&client, "image", json!({})).await.unwrap();
    assert_eq!(image.content.len(), 2);
    let png = image.content[0].as_image().expect("image block first");
    assert_eq!(png.mime_type, "image/png");
    assert_eq!(png.data, fixture::TINY_PNG_BASE64);
    assert!(image.content[1].as_text().is_some());

    let added = call(&client, "add_tool", json!({"name": "shout"}))
        .await
        .unwrap();
    assert_ne!(added.is_error, Some(true), "{added:?}");
    tokio::time::timeout(WAIT, seen.list_changed.recv())
        .await
        .expect("tools/list_changed timed out")
        .expect("list_changed channel closed");
    let mut expected: Vec<&str> = BUILT_IN_TOOLS.to_vec();
    expected.push("shout");
    expected.sort_unstable();
    assert_eq!(tool_names(&client).await, expected);
    let shouted = call(&client, "shout", json!({"text": "hi"})).await.unwrap();
    assert_eq!(only_text(&shouted), "hi");
    let again = call(&client, "add_tool", json!({"name": "shout"}))
        .await
        .unwrap();
    assert_eq!(again.is_error, Some(true));
    let bad_name = call(&client, "add_tool", json!({"name": "no spaces"}))
        .await
        .unwrap();
    assert_eq!(bad_name.is_error, Some(true));

    let unknown = call(&client, "nope", json!({})).await;
    assert!(
        unknown.is_err(),
        "unknown tool must be a protocol error: {unknown:?}"
    );

    tokio::time::timeout(WAIT, client.cancel())
        .await
        .expect("client close timed out")
        .expect("client task panicked");
}
