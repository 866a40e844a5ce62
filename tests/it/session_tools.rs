//! `scope = "session"` through the whole bot: each MCP session gets its own connection,
//! ready before its first turn, closed when the session ends.

use crate::support::bot_client::{chat, connect, start, text};
use crate::support::servers::{named, wait_until};
use turnscope::app::App;
use turnscope::config::Config;
use turnscope::config::{McpServerConfig, Scope};
use turnscope::observe::{Bus, Event, ToolSourceState};

#[tokio::test]
async fn a_session_scoped_server_lives_and_dies_with_its_session() {
    let own = named("own", &["private"]).await;
    let mut server = McpServerConfig::http("own", &own.url);
    server.scope = Scope::Session;
    let mut config = Config {
        mcp_servers: vec![server],
        ..Config::default()
    };
    config.server.port = 0;
    config.model.pace = 0.0;
    let bus = Bus::default();
    let mut events = bus.subscribe();
    let app = App::start(&config, bus).await.unwrap();
    // The shared tools do not include it.
    let shared = app.sessions.bot().tools().specs();
    assert!(shared.iter().all(|s| s.name != "private"));

    let client = connect(&app.server.mcp_url()).await;
    let handle = start(&client).await;
    // The first turn waits for the session's own connection.
    let result = chat(&client, &handle, "use private please").await;
    assert_eq!(text(&result), "The private tool says: own:private.");

    let session = app.sessions.list().pop().unwrap();
    app.sessions.close(&session, "test over").await;
    let mut seen = Vec::new();
    wait_until("the session's connection to close", || {
        while let Some(event) = events.try_recv() {
            if let Event::ToolSource(e) = &*event {
                seen.push((e.server.clone(), e.session, e.state));
            }
        }
        let closed = seen.contains(&("own".into(), Some(session.number), ToolSourceState::Closed));
        async move { closed }
    })
    .await;
    assert!(seen.contains(&(
        "own".into(),
        Some(session.number),
        ToolSourceState::Connected
    )));
    client.cancel().await.unwrap();
    app.shutdown().await;
}
