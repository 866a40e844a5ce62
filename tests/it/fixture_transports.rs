//! The fixture MCP server, served over each transport, driven by real rmcp clients.

use std::{process::Stdio, time::Duration};

use crate::support::fixture::{Kind, Recorder, RunningFixture, WAIT, exercise_fixture};
use rmcp::{
    RoleClient, ServiceExt,
    transport::{
        ConfigureCommandExt, IntoTransport, StreamableHttpClientTransport, TokioChildProcess,
    },
};
use turnscope::mcp::sse_client::SseClientTransport;

/// A recording client over `transport` (initialized within the wait) runs the fixture's
/// whole exercise.
async fn exercise_over<T, E, A>(transport: T)
where
    T: IntoTransport<RoleClient, E, A> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    let (recorder, seen) = Recorder::new();
    let client = tokio::time::timeout(WAIT, recorder.serve(transport))
        .await
        .expect("initialize timed out")
        .expect("initialize failed");
    exercise_fixture(client, seen).await;
}

/// A legacy SSE client transport to `server`.
async fn sse(server: &RunningFixture) -> SseClientTransport {
    SseClientTransport::connect(&server.url("/sse"), &[], WAIT)
        .await
        .expect("connect")
}

#[tokio::test]
async fn fixture_over_streamable_http() {
    let server = RunningFixture::start(Kind::Http).await;
    exercise_over(StreamableHttpClientTransport::from_uri(server.url("/mcp"))).await;
    server.stop().await;
}

#[tokio::test]
async fn fixture_over_legacy_sse() {
    let server = RunningFixture::start(Kind::Sse).await;
    let transport = sse(&server).await;
    assert!(
        transport
            .endpoint()
            .as_str()
            .starts_with(&server.url("/messages?session=")),
        "{}",
        transport.endpoint()
    );
    exercise_over(transport).await;
    server.stop().await;
}

#[tokio::test]
async fn fixture_over_stdio_child_process() {
    let command =
        tokio::process::Command::new(env!("CARGO_BIN_EXE_turnscope-dev")).configure(|cmd| {
            cmd.args(["fixture-server", "--stdio"]).kill_on_drop(true);
        });
    let (transport, _stderr) = TokioChildProcess::builder(command)
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn turnscope-dev fixture-server --stdio");
    exercise_over(transport).await;
}

/// Stopping the SSE server ends open sessions: the client sees its transport close.
#[tokio::test]
async fn sse_server_shutdown_closes_client_sessions() {
    let server = RunningFixture::start(Kind::Sse).await;
    let client = ().serve(sse(&server).await).await.expect("initialize");
    server.stop().await;
    let reason = tokio::time::timeout(WAIT, client.waiting())
        .await
        .expect("client did not notice the closed stream")
        .expect("client task panicked");
    assert!(
        matches!(reason, rmcp::service::QuitReason::Closed),
        "{reason:?}"
    );
}

/// Two SSE sessions are independent: a tool added in one is not visible in the other.
#[tokio::test]
async fn sse_sessions_are_isolated() {
    let server = RunningFixture::start(Kind::Sse).await;
    let connect = || async {
        let (recorder, seen) = Recorder::new();
        (
            recorder
                .serve(sse(&server).await)
                .await
                .expect("initialize"),
            seen,
        )
    };
    let (first, _first_seen) = connect().await;
    let (second, _second_seen) = connect().await;
    let added =
        crate::support::fixture::call(&first, "add_tool", serde_json::json!({"name": "only_here"}))
            .await
            .unwrap();
    assert_ne!(added.is_error, Some(true));
    tokio::time::sleep(Duration::from_millis(50)).await;
    let names: Vec<_> = second
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|tool| tool.name)
        .collect();
    assert!(!names.iter().any(|name| name == "only_here"), "{names:?}");
    first.cancel().await.unwrap();
    second.cancel().await.unwrap();
    server.stop().await;
}

/// Stopping the streamable HTTP server returns promptly even with a session still open.
#[tokio::test]
async fn http_server_stops_with_an_open_session() {
    let server = RunningFixture::start(Kind::Http).await;
    let transport = StreamableHttpClientTransport::from_uri(server.url("/mcp"));
    let client = ().serve(transport).await.expect("initialize");
    client.list_all_tools().await.expect("tools/list");
    server.stop().await;
    drop(client);
}
