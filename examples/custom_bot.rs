//! A bot written in Rust, served over MCP like the built-in one: the Rust counterpart of
//! `McpBotServer(bot).run()`.
//!
//! It has a processor of its own in the pipeline (it redacts digits from everything the bot
//! says) and a function tool of its own (`order_status`), next to the built-ins and any MCP
//! servers the config names. Run it and talk to it from any MCP client:
//!
//! ```sh
//! cargo run --example custom_bot            # serves http://127.0.0.1:7871/mcp
//! claude mcp add --transport http custom-bot http://127.0.0.1:7871/mcp
//! ```
//!
//! With no `OPENAI_BASE_URL`/`OPENAI_API_KEY` it runs on the embedded scripted model, which
//! calls a tool when a line names it: try "check order_status 12345".

use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use turnscope::app::App;
use turnscope::bot::Bot;
use turnscope::config::{Config, Overrides};
use turnscope::observe::Bus;
use turnscope::pipeline::{Frame, FrameBody, Link, Processor};
use turnscope::tools::FnTool;

/// Replaces every ASCII digit the bot says with `#`.
struct RedactDigits;

#[async_trait]
impl Processor for RedactDigits {
    fn name(&self) -> &'static str {
        "redact-digits"
    }

    async fn process(&mut self, mut frame: Frame, link: &Link) {
        if let FrameBody::TextPiece(piece) = &frame.body
            && piece.bytes().any(|b| b.is_ascii_digit())
        {
            let redacted: String = piece
                .chars()
                .map(|c| if c.is_ascii_digit() { '#' } else { c })
                .collect();
            frame.body = FrameBody::TextPiece(redacted.into_boxed_str());
        }
        link.push(frame);
    }
}

/// The bot's own tool: looks an order up (here, a fixed answer).
fn order_status() -> FnTool {
    FnTool::new(
        "order_status",
        "Tells where an order is.",
        json!({
            "type": "object",
            "properties": {"order": {"type": "string", "description": "The order number."}},
            "required": ["order"]
        }),
        |args| async move {
            let order = args
                .get("order")
                .and_then(|o| o.as_str())
                .ok_or("order_status: expected a string `order` argument")?;
            Ok(format!("order {order} shipped on 2026-11-28"))
        },
    )
}

/// Builds the bot and serves it as `config` says; the returned [`App`] runs until
/// [`App::shutdown`].
pub async fn serve(config: &Config) -> anyhow::Result<App> {
    let bus = Bus::default();
    // Built-ins, our own tool and the config's MCP servers, under TurnCall's rules.
    let tools = App::tool_registry(config, &bus, vec![order_status()]).await?;
    // The config's model, else OPENAI_BASE_URL / OPENAI_API_KEY, else the embedded model.
    let (model, embedded) = turnscope::app::pick_model(config).await?;
    let bot = Bot::builder(turnscope::app::model_client(config, &model))
        .system_prompt("You are the order desk. Answer in one short sentence.")
        .greeting("Order desk here. Which order?")
        .tools(tools.clone())
        .tools_factory(tools)
        .processor(|| Box::new(RedactDigits))
        .build();
    Ok(App::serve(config, bus, bot, model, embedded).await?)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let port = std::env::var("PORT").ok().and_then(|p| p.parse().ok());
    let overrides = Overrides {
        port: Some(port.unwrap_or(7871)),
        ..Overrides::default()
    };
    let (config, _) = Config::load(None, &overrides)?;
    let app = serve(&config).await?;
    println!(
        "custom bot ready: MCP {} · model: {}",
        app.server.mcp_url(),
        app.model.describe()
    );
    tokio::signal::ctrl_c().await?;
    tokio::time::timeout(Duration::from_secs(5), app.shutdown()).await?;
    Ok(())
}
