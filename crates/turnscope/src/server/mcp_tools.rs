//! How `start` and `chat` present themselves to MCP clients and their models: titles,
//! annotations, descriptions and the server's instructions.
//!
//! Claude Code defers MCP tools behind its tool search, so its model finds these by their
//! names and descriptions alone: each says what the bot is (`[bot] name`/`description`),
//! that `start` comes first, that an empty line reads a turn still running and that the
//! handle is a secret. Neither tool declares an output schema: the result is text for the
//! model (see `mcp_text`), and a client that sees an output schema expects structured content,
//! which Claude Code would hand its model instead of the text.
//!
//! `chat`'s `handle` is annotated `"x-mcp-header": "Handle"`: MCP 2026-07-28 clients then send
//! it as the `Mcp-Param-Handle` header too, so a balancer routes a `chat` to the replica holding
//! its session without reading the body (`examples/haproxy.cfg`). Every client tried still
//! lists and calls the tool (README, "Long turns as tasks"). The server does not require the
//! header (`BotMcp` leaves rmcp's `get_tool` unset, which is what turns rmcp's check on): a
//! client that does not mirror it is served as before, and the recipe falls back to the body.
//! A header that is not the body's handle is refused (`param_header`).

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

use crate::bot::Bot;

/// The bot as a model reads it: `the bot "Name" (what it is for)`, or `the bot` alone.
pub(crate) fn who(bot: &Bot) -> String {
    match (bot.name(), bot.description()) {
        (Some(name), Some(about)) => format!("the bot \"{name}\" ({about})"),
        (Some(name), None) => format!("the bot \"{name}\""),
        (None, Some(about)) => format!("the bot ({about})"),
        (None, None) => "the bot".to_string(),
    }
}

fn object(v: Value) -> Arc<JsonObject> {
    match v {
        Value::Object(map) => Arc::new(map),
        _ => unreachable!("schemas below are object literals"),
    }
}

/// Neither tool only reads (a line changes the conversation), neither destroys anything,
/// a repeated line is a new turn, and the bot is all they reach (its own tools are its
/// business).
fn annotations(title: &str) -> ToolAnnotations {
    ToolAnnotations::with_title(title)
        .read_only(false)
        .destructive(false)
        .idempotent(false)
        .open_world(false)
}

/// The `start` and `chat` tools of `bot`, whose conversations end after `handle_seconds`
/// without a call.
pub(crate) fn tool_list(bot: &Bot, handle_seconds: u64) -> Vec<Tool> {
    let who = who(bot);
    let name = bot.name().unwrap_or("the bot");
    let start_title = format!("Start a conversation with {name}");
    let start = Tool::new(
        "start",
        format!(
            "Opens a conversation with {who}, a conversational bot that keeps its own history, and \
             returns the conversation's handle. Call start first, once per conversation, then pass the \
             handle to every chat call. The handle is a secret: keep it to yourself, never show it to the \
             user or anyone. A conversation with no chat call for {handle_seconds} seconds ends; then call \
             start again."
        ),
        object(json!({"type": "object", "properties": {}})),
    )
    .with_title(start_title.clone())
    .with_annotations(annotations(&start_title));
    let chat_title = format!("Chat with {name}");
    let chat = Tool::new(
        "chat",
        format!(
            "Says one line to {who} in a conversation start opened (call start first for the handle) \
             and returns the bot's whole reply as text when its turn ends. The bot keeps the history, so \
             send only the new line. Calls on one handle run in order. If a call stops waiting before the \
             reply (a timeout or a cancel), call chat with an empty line to read the reply of the turn \
             still running; a new line instead interrupts it. A conversation with no chat call for \
             {handle_seconds} seconds ends."
        ),
        object(json!({
            "type": "object",
            "properties": {
                "handle": {"type": "string", "description": "The secret handle start returned.", "x-mcp-header": "Handle"},
                "line": {"type": "string", "default": "", "description": "What to say. Empty: read the reply of the turn still running."}
            },
            "required": ["handle"]
        })),
    )
    .with_title(chat_title.clone())
    .with_annotations(annotations(&chat_title));
    vec![start, chat]
}

/// The server's instructions (Claude Code puts them in its model's system prompt, 2 KB at
/// most): the same two steps in a few lines.
pub(crate) fn instructions(bot: &Bot, handle_seconds: u64) -> String {
    let who = who(bot);
    let mut who_upper = who.clone();
    if let Some(first) = who_upper.get_mut(..1) {
        first.make_ascii_uppercase();
    }
    format!(
        "{who_upper}: a conversational bot, served by turnscope. Talk to it in two steps: call start once \
         for a handle (a secret: never show it), then call chat with that handle and one line at a time; \
         each chat returns the bot's whole reply as text. If a chat call stops waiting before the reply, \
         call chat with an empty line to read it. A conversation with no chat call for {handle_seconds} \
         seconds ends; then call start again."
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ModelClient, ModelConfig};

    fn bot(name: Option<&str>, about: Option<&str>) -> Bot {
        Bot::builder(ModelClient::new(ModelConfig::new(
            "http://127.0.0.1:9/v1",
            "m",
        )))
        .identity(name.map(str::to_string), about.map(str::to_string))
        .build()
    }

    #[test]
    fn tools_carry_titles_annotations_and_no_output_schema() {
        let tools = tool_list(&bot(Some("Hours"), Some("opening hours of the shop")), 300);
        let names: Vec<_> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names, ["start", "chat"]);
        for tool in &tools {
            assert!(tool.output_schema.is_none(), "{}", tool.name);
            let a = tool.annotations.as_ref().unwrap();
            assert_eq!(
                (
                    a.read_only_hint,
                    a.destructive_hint,
                    a.idempotent_hint,
                    a.open_world_hint
                ),
                (Some(false), Some(false), Some(false), Some(false))
            );
            let description = tool.description.as_deref().unwrap();
            assert!(
                description.contains("\"Hours\" (opening hours of the shop)"),
                "{description}"
            );
            assert!(description.len() < 2048);
        }
        assert_eq!(
            tools[0].title.as_deref(),
            Some("Start a conversation with Hours")
        );
        assert_eq!(tools[1].title.as_deref(), Some("Chat with Hours"));
        assert!(tools[0].description.as_deref().unwrap().contains("secret"));
        assert!(
            tools[1]
                .description
                .as_deref()
                .unwrap()
                .contains("empty line")
        );
        assert!(
            tools[1]
                .description
                .as_deref()
                .unwrap()
                .contains("call start first")
        );
    }

    #[test]
    fn instructions_name_the_bot_and_fit_in_two_kilobytes() {
        let named = instructions(&bot(Some("Hours"), None), 300);
        assert!(named.starts_with("The bot \"Hours\": "), "{named}");
        let plain = instructions(&bot(None, None), 300);
        assert!(
            plain.starts_with("The bot: a conversational bot"),
            "{plain}"
        );
        assert!(plain.contains("empty line") && plain.contains("300 seconds"));
        assert!(named.len() < 2048 && plain.len() < 2048);
    }
}
