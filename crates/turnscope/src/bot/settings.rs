//! What a bot's turns run on that may change while it runs: [`BotSettings`], replaced whole
//! by a config reload ([`Bot::set_settings`](super::Bot::set_settings)). A turn reads them
//! once, when its line is said (an atomic load, never a lock), and runs to its end on what it
//! read, so a reload applies from the next turn of every session.

use std::sync::Arc;

use std::time::Duration;

use arc_swap::ArcSwap;

use crate::model::{EmbeddedModel, ModelClient};

/// Limits of a turn.
#[derive(Debug, Clone, Copy)]
pub struct TurnLimits {
    /// Most rounds of function calls in one turn.
    pub round_cap: u32,
    /// Longest a single tool call may run.
    pub tool_timeout: Duration,
    /// When the model asks for a round beyond the cap: `true` = those calls are not run and
    /// the model gets one last request without tools, so the turn ends with an answer;
    /// `false` = the turn ends in a round-cap error.
    pub answer_at_cap: bool,
}

impl Default for TurnLimits {
    fn default() -> Self {
        Self {
            round_cap: 8,
            tool_timeout: Duration::from_secs(30),
            answer_at_cap: true,
        }
    }
}

/// The system prompt, greeting, model client, limits and history window of a bot, with the
/// config version they came from.
#[derive(Clone)]
pub struct BotSettings {
    /// The config version (1 as the bot started, one more per reload that changed something);
    /// each turn record names the version it ran on.
    pub version: u64,
    /// The system prompt sent first on every request.
    pub system_prompt: Option<String>,
    /// What a new session opens with.
    pub greeting: Option<String>,
    /// The model client (its URL, name, headers, timeouts and `[model]` parameters).
    pub model: ModelClient,
    /// Round cap, tool timeout, what happens at the cap.
    pub limits: TurnLimits,
    /// Most history messages a session keeps (0 = all).
    pub history_window: usize,
    /// The embedded model `model` talks to, when it is one: kept running while a turn still
    /// uses these settings, after a reload moved to another model.
    pub(crate) embedded: Option<Arc<EmbeddedModel>>,
}

impl BotSettings {
    /// Settings for `model` with no prompt, no greeting, the default limits, the whole history
    /// kept, at version 1.
    pub fn new(model: ModelClient) -> Self {
        Self {
            version: 1,
            system_prompt: None,
            greeting: None,
            model,
            limits: TurnLimits::default(),
            history_window: 0,
            embedded: None,
        }
    }
}

/// Where a bot's current settings are, shared by the bot and every session it opened.
pub(crate) type SharedSettings = Arc<ArcSwap<BotSettings>>;

/// A cell holding `settings`.
pub(crate) fn shared(settings: BotSettings) -> SharedSettings {
    Arc::new(ArcSwap::from_pointee(settings))
}
