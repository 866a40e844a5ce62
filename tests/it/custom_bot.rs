//! `examples/custom_bot.rs` driven over MCP: its own tool runs and its own processor
//! redacts the digits of the reply.

#[allow(dead_code)]
#[path = "../../examples/custom_bot.rs"]
mod example;

use crate::support::bot_client::{chat, connect, start, text};
use turnscope::config::Config;

#[tokio::test]
async fn the_custom_bot_uses_its_tool_and_its_processor() {
    let mut config = Config::default();
    config.server.port = 0;
    config.model.pace = 0.0;
    let app = example::serve(&config).await.unwrap();
    let client = connect(&app.server.mcp_url()).await;
    let handle = start(&client).await;
    let result = chat(&client, &handle, "check order_status 12345").await;
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert_eq!(
        text(&result),
        "The order_status tool says: order ##### shipped on ####-##-##."
    );
    let turn = crate::support::mcp::record_of(&result);
    assert_eq!(turn["tool_calls"][0]["name"], "order_status");
    assert_eq!(
        turn["tool_calls"][0]["arguments"],
        serde_json::json!({"order": "12345"}),
        "arguments as a JSON object, not a string"
    );
    client.cancel().await.unwrap();
    app.shutdown().await;
}
