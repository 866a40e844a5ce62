//! The built-in `end_session`, driven over MCP: the bot ends the conversation after its
//! reply, and the session's slot is free again.

use crate::support::bot_client::{chat, connect, start, text};
use crate::support::servers::wait_until;
use turnscope::app::App;
use turnscope::config::Config;
use turnscope::observe::{Bus, Event};

#[tokio::test]
async fn end_session_closes_the_conversation_after_the_reply() {
    let mut config = Config::default();
    config.server.port = 0;
    config.server.sessions = 1;
    config.model.pace = 0.0;
    let bus = Bus::default();
    let mut events = bus.subscribe();
    let app = App::start(&config, bus).await.unwrap();
    let client = connect(&app.server.mcp_url()).await;
    let handle = start(&client).await;

    let result = chat(&client, &handle, "thanks, please end_session now").await;
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let reply = text(&result);
    assert_eq!(reply, "Goodbye.");
    let turn = crate::support::mcp::record_of(&result);
    assert_eq!(turn["end_reason"], "completed");
    assert_eq!(turn["tool_calls"][0]["name"], "end_session");

    wait_until("the session to close", || {
        let empty = app.sessions.is_empty();
        async move { empty }
    })
    .await;
    let after = chat(&client, &handle, "are you there?").await;
    assert_eq!(after.is_error, Some(true));
    // Told why: its bot ended it (tour M2: guesses at idle timeouts and restarts).
    assert!(
        text(&after).contains("this conversation has ended (ended by the bot")
            && text(&after).contains("Call start"),
        "{}",
        text(&after)
    );

    // The slot is free: with a cap of one, a new session opens.
    let again = start(&client).await;
    assert_eq!(again.len(), 36);
    assert_ne!(again, handle);

    let mut closed = None;
    while let Some(event) = events.try_recv() {
        if let Event::Session(s) = &*event
            && let Some(reason) = &s.closed
        {
            closed = Some(reason.clone());
        }
    }
    assert_eq!(
        closed.as_deref(),
        Some("ended by the bot: the bot ended the conversation")
    );
    client.cancel().await.unwrap();
    app.shutdown().await;
}
