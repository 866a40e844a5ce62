//! The OpenAI bridge: tools as OpenAI function calling (`GET /v1/tools`, `POST /v1/execute`)
//! and an OpenAI-compatible `POST /v1/chat/completions` that runs the tool loop. Embedded in
//! the main server it serves the bot's tools and model; standalone ([`standalone`]) it serves
//! one MCP server's tools. Session-control tools (`end_session`) are never offered: a bridge
//! call belongs to no conversation.

pub(crate) mod catalog;
pub mod chat;
pub mod execute;
pub(crate) mod held;
pub mod routes;
pub mod standalone;
pub mod wire;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;

pub use catalog::{Catalog, Entry, Listing};
pub use chat::ChatBackend;
pub use execute::Caller;

use crate::bot::Bot;
use crate::observe::Bus;
use crate::sessions::Sessions;
use crate::tools::Tools;

/// One OpenAI bridge over a tool set.
///
/// | route | what |
/// | --- | --- |
/// | `GET /v1/tools` | the OpenAI `tools` array: every tool, `$ref`s inlined, names valid for OpenAI |
/// | `POST /v1/execute` | `{name, arguments}` → `{content, is_error, text}`; tool failures are 200 + `is_error` |
/// | `POST /v1/chat/completions` | the tool loop against the model (whole or `stream: true`) |
/// | `GET /v1/models` | the model requests go to |
///
/// Two ways to run it:
/// - **embedded** in the main HTTP server (`OpenAiBridge::for_sessions`): the bot's tools
///   (every source: built-ins, Rust tools, `[[mcp_servers]]`), the bot's model, round cap and
///   tool timeout as they are at each request (a config reload applies from the next one); all
///   four routes, behind the server's guard;
/// - **standalone** ([`standalone`], `turnscope bridge openai --stdio|--http|--sse`): one MCP
///   server, `/v1/tools` and `/v1/execute`, command-line compatible with mcp-openai-bridge.
///
/// Modules: `catalog` (conversion and the name map, cached), [`execute`] (one call, the
/// `/v1/execute` shapes), [`chat`] (the loop), [`wire`] (OpenAI response shapes), [`routes`]
/// (axum handlers and `Served` events), [`standalone`] (the command).
pub struct OpenAiBridge {
    caller: Caller,
    chat: Option<ChatBackend>,
    /// The bot whose model, round cap and tool timeout the embedded bridge follows (a config
    /// reload applies from the next request).
    bot: Option<Bot>,
    bus: Bus,
    /// Bot calls of responses that also called client tools, kept for the clients' next
    /// requests ([`held`]).
    held: Arc<held::HeldRounds>,
}

impl OpenAiBridge {
    /// A bridge serving `tools` on `/v1/tools` and `/v1/execute`, each call given at most
    /// `call_timeout`.
    pub fn new(tools: Arc<dyn Tools>, call_timeout: Duration, bus: Bus) -> Self {
        let catalog = Arc::new(Catalog::new(tools, bus.clone()));
        Self {
            caller: Caller::new(catalog, call_timeout, bus.clone()),
            chat: None,
            bot: None,
            bus,
            held: Arc::default(),
        }
    }

    /// Also serves `/v1/chat/completions` and `/v1/models` with `backend`.
    pub(crate) fn with_chat(mut self, backend: ChatBackend) -> Self {
        self.chat = Some(backend);
        self
    }

    /// The embedded bridge of a bot: its shared tools, its model, its round cap and its tool
    /// timeout; events on the sessions' bus.
    pub(crate) fn for_sessions(sessions: &Sessions) -> Self {
        let bot = sessions.bot();
        let limits = bot.limits();
        Self::new(
            bot.tools().clone(),
            limits.tool_timeout,
            sessions.bus().clone(),
        )
        .with_chat(ChatBackend {
            model: bot.model(),
            round_cap: limits.round_cap,
        })
        .following(bot.clone())
    }

    fn following(mut self, bot: Bot) -> Self {
        self.bot = Some(bot);
        self
    }

    /// What `/v1/chat/completions` runs on now: the bot's model and round cap as they are
    /// (embedded), or the backend it was given.
    pub(crate) fn chat_backend(&self) -> Option<ChatBackend> {
        let given = self.chat.as_ref()?;
        Some(match &self.bot {
            Some(bot) => {
                let settings = bot.settings();
                ChatBackend {
                    model: settings.model.clone(),
                    round_cap: settings.limits.round_cap,
                }
            }
            None => given.clone(),
        })
    }

    /// The bot calls kept for clients' next requests.
    pub(crate) fn held(&self) -> Arc<held::HeldRounds> {
        self.held.clone()
    }

    /// What runs calls now: with the bot's tool timeout as it is (embedded).
    pub(crate) fn caller(&self) -> Caller {
        match &self.bot {
            Some(bot) => self.caller.with_timeout(bot.limits().tool_timeout),
            None => self.caller.clone(),
        }
    }

    /// The tools as offered now.
    pub fn listing(&self) -> Arc<Listing> {
        self.caller.catalog().listing()
    }

    /// The axum routes (no guard: merge them behind one).
    pub fn routes(self) -> Router {
        routes::routes(Arc::new(self))
    }
}
