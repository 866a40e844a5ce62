//! The configuration, at the bottom of the library: every section of the TOML file
//! (`--config FILE`, or `./turnscope.toml` when present) and the `mcpServers` JSON shape, the
//! command-line values laid over them ([`Overrides`]), and the one validation of the result.
//! Unknown keys are errors, so a typo never passes silently; every error names the key (or the
//! flag that set it), the value and what was expected. Nothing here does I/O but reading the
//! file, and nothing reads the environment.

mod changes;
pub mod env;
mod locate;
pub(crate) mod mcp_json;
pub mod mcp_servers;
pub mod model_params;
mod model_url;
mod overrides;
pub mod seconds;
pub mod store;
pub mod tool_filter;
mod wording;
pub mod xiaozhi;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use changes::{ConfigChanges, LIVE_KEYS, is_live};
pub use locate::Spot;
pub use mcp_servers::{McpServerConfig, PolicySection, Scope, TransportKind};
pub use model_params::Stop;
pub use model_url::check_model_url;
pub use overrides::Overrides;
pub use seconds::{MAX_SECONDS, check_seconds};
pub use store::{StoreSection, StoreUrl};
pub use tool_filter::{FilterOverlap, ToolFilter};
pub use xiaozhi::XiaozhiEntry;

/// Connections open at once unless configured (`server.max_connections`): room for the load
/// bench's 1000 concurrent `chat` calls (one HTTP/1 connection each) several times over, and
/// well under the usual descriptor limit of a server process.
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Occurs when the config file cannot be read.
    #[error("cannot read config file {}: {source}; check the path given to --config", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// Occurs when the text is not TOML (or JSON), or a key is unknown or of the wrong type.
    #[error("{}", syntax_text(file.as_deref(), message, at.as_ref()))]
    Syntax {
        /// The file, when the text came from one.
        file: Option<PathBuf>,
        /// The parser's message, naming the key.
        message: String,
        /// Where in the file, and the parser's message without the quoted lines.
        at: Option<(Spot, String)>,
    },
    /// Occurs when a value breaks a rule: the message starts with the key, or with the flag
    /// that set it, and says what is expected; the file's line where the key is set, if found.
    #[error("{}{message}", in_file_at(file.as_deref(), at.as_ref()))]
    Invalid {
        /// The file, when the value came from one.
        file: Option<PathBuf>,
        /// `key: what is wrong and what is expected`.
        message: String,
        /// Where the key is set in the file, when it is.
        at: Option<Spot>,
    },
}

impl ConfigError {
    /// Whether it says the store URL (`[store] url`, or `--store`) is not one turnscope reads
    /// (an unknown scheme, a setting or a database that is not one): a store that cannot be
    /// used, which the binary exits 2 for, as for a bad argument.
    pub fn is_store_url(&self) -> bool {
        matches!(self, ConfigError::Invalid { message, .. }
            if message.starts_with("store.url:") || message.starts_with("--store (store.url):"))
    }
}

fn in_file(file: Option<&Path>) -> String {
    file.map(|f| format!("config file {}: ", f.display()))
        .unwrap_or_default()
}

/// A syntax error as the start says it: where the parser names a key, the line a reload
/// says (`config file f.toml:2:13: bot.round_cap: invalid type: …`), then the parser's lines
/// quoting the file with the caret; else the parser's message as it is.
fn syntax_text(file: Option<&Path>, message: &str, at: Option<&(Spot, String)>) -> String {
    let Some((spot @ Spot { key: Some(key), .. }, what)) = at else {
        return format!("{}{message}", in_file(file));
    };
    let column = spot.column.map(|c| format!(":{c}")).unwrap_or_default();
    let place = match file {
        Some(file) => format!("config file {}:{}{column}", file.display(), spot.line),
        None => format!("config line {}{column}", spot.line),
    };
    let mut out = format!("{place}: {key}: {}", locate::one_line(what));
    // The quoted lines (`  |`, `2 | round_cap = "many"`, the caret's), not the parser's first
    // line (the place again) nor its last (the message again).
    for line in message.lines() {
        let quoted = line
            .trim_start()
            .trim_start_matches(|c: char| c.is_ascii_digit())
            .trim_start()
            .starts_with('|');
        if quoted {
            out.push('\n');
            out.push_str(line);
        }
    }
    out
}

/// [`in_file`] with the line where the key is set: `config file f.toml:2: `.
fn in_file_at(file: Option<&Path>, at: Option<&Spot>) -> String {
    match (file, at) {
        (Some(f), Some(spot)) => format!("config file {}:{}: ", f.display(), spot.line),
        _ => in_file(file),
    }
}

/// Everything turnscope can be configured with.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// The HTTP server.
    pub server: ServerSection,
    /// The model.
    pub model: ModelSection,
    /// The bot.
    pub bot: BotSection,
    /// The console.
    pub console: ConsoleSection,
    /// Bridges (`[[bridges.xiaozhi]]`).
    pub bridges: BridgesSection,
    /// MCP servers the bot takes tools from (`[[mcp_servers]]`), in precedence order.
    pub mcp_servers: Vec<McpServerConfig>,
    /// Which tool sources may be reached (`[policy]`).
    pub policy: PolicySection,
    /// How much of each model request/response and MCP message events keep (`[wire]`).
    pub wire: WireSection,
    /// Where sessions are kept (`[store]`).
    pub store: StoreSection,
}

/// `[wire]`: what crossed the wire, as the console, `--events` and replay keep it.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct WireSection {
    /// Most KiB of one message (a model message, a response, an MCP message) an event keeps;
    /// longer ones are cut with a marker saying how long they were. 0 = no bodies recorded
    /// (timings only). Default 64.
    pub max_kib: usize,
}

/// The largest `wire.max_kib` accepted (1 GiB).
pub const WIRE_KIB_MAX: usize = 1024 * 1024;

impl Default for WireSection {
    fn default() -> Self {
        Self { max_kib: 64 }
    }
}

/// `[server]`
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerSection {
    /// Address to bind (default `127.0.0.1`).
    pub host: String,
    /// Port (default 7870; 0 = any free port).
    pub port: u16,
    /// Most open sessions (default 32).
    pub sessions: usize,
    /// Seconds a session lives with no call (default 300).
    pub handle_seconds: u64,
    /// Seconds between idle sweeps (default 30).
    pub sweep_seconds: f64,
    /// Extra allowed Host values (`name`, `name:port`, `name:*`).
    pub allowed_hosts: Vec<String>,
    /// Extra allowed Origin values.
    pub allowed_origins: Vec<String>,
    /// Whether the Host/Origin check runs (default true).
    pub host_check: bool,
    /// A bearer token every HTTP request must carry (`Authorization: Bearer ...`).
    pub auth_token: Option<String>,
    /// Allow binding beyond loopback without `auth_token` (only behind an authenticating proxy).
    pub allow_open_bind: bool,
    /// Largest request body accepted, in bytes (default 4 MiB).
    pub max_body_bytes: usize,
    /// Seconds a client has to send a request's head; also how long an idle keep-alive
    /// connection stays open (default 100: longer than common HTTP clients keep idle
    /// connections, reqwest's 90 s included, so a client never reuses one the server is
    /// closing at that very moment).
    pub header_timeout_seconds: f64,
    /// Seconds a client has to send a request's whole body (default 30).
    pub body_timeout_seconds: f64,
    /// Most HTTP connections open at once (default 4096); more get 503 and a log line.
    pub max_connections: usize,
    /// This process's name among replicas behind a load balancer: in `/healthz`, `start`'s
    /// structured content, events and errors (default: `host:port` as bound).
    pub replica_id: Option<String>,
    /// Seconds a SIGTERM waits for turns in flight before the process exits (default 30).
    pub drain_seconds: f64,
    /// Whether `chat` calls of clients that declare the MCP tasks extension may become tasks
    /// (default true; false: the extension is not offered).
    pub tasks: bool,
    /// Seconds a `chat` call of such a client waits for its turn before answering with a task
    /// (default 10; 0 = every such call is a task).
    pub task_after_seconds: f64,
    /// The poll interval a task asks its client to keep, in seconds (default 1).
    pub task_poll_seconds: f64,
    /// Seconds the live event stream (`/events`) keeps recording after its last viewer left,
    /// so a viewer that was dropped and reconnects finds what it missed (default 30; 0 lets
    /// go of the bus within a second, and recording costs nothing again).
    pub events_linger_seconds: f64,
    /// KiB of event lines `/events` keeps for its viewers to read (default 8192); a viewer
    /// that falls further behind is dropped (it reconnects).
    pub events_queue_kib: usize,
}

impl Default for ServerSection {
    fn default() -> Self {
        Self {
            host: "127.0.0.1".into(),
            port: 7870,
            sessions: 32,
            handle_seconds: 300,
            sweep_seconds: 30.0,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            host_check: true,
            auth_token: None,
            allow_open_bind: false,
            max_body_bytes: 4 * 1024 * 1024,
            header_timeout_seconds: 100.0,
            body_timeout_seconds: 30.0,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            replica_id: None,
            drain_seconds: 30.0,
            tasks: true,
            task_after_seconds: 10.0,
            task_poll_seconds: 1.0,
            events_linger_seconds: DEFAULT_EVENTS_LINGER_SECONDS as f64,
            events_queue_kib: DEFAULT_EVENTS_QUEUE_KIB,
        }
    }
}

/// `server.events_linger_seconds` unless set: how long `/events` records after its last viewer
/// left.
pub const DEFAULT_EVENTS_LINGER_SECONDS: u64 = 30;

/// `server.events_queue_kib` unless set: 8 MiB of event lines, some 900 turns of the embedded
/// model, for the viewers of `/events` to read at their own pace.
pub const DEFAULT_EVENTS_QUEUE_KIB: usize = 8 * 1024;
/// The range `server.events_queue_kib` may take: from one chunk of the stream to 1 GiB.
pub const EVENTS_QUEUE_KIB_RANGE: std::ops::RangeInclusive<usize> = 64..=1024 * 1024;

/// `model.max_response_kib` unless set: 16 MiB of streamed body, some 80,000 tokens of
/// events, more than any model's longest answer.
pub const DEFAULT_MAX_RESPONSE_KIB: usize = 16 * 1024;
/// `model.max_response_seconds` unless set.
pub const DEFAULT_MAX_RESPONSE_SECONDS: f64 = 600.0;

/// `[model]`
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelSection {
    /// Base URL of an OpenAI-compatible server (ending in `/v1`); none = `OPENAI_BASE_URL`,
    /// then OpenAI itself when `OPENAI_API_KEY` is set, else the embedded model.
    pub url: Option<String>,
    /// Model name (default `gpt-4o-mini` for remote servers).
    pub name: Option<String>,
    /// Extra request headers.
    pub headers: std::collections::BTreeMap<String, String>,
    /// Seconds between words of the embedded model (default 0.03).
    pub pace: f64,
    /// Exact words per plain answer of the embedded model.
    pub words: Option<usize>,
    /// Seconds to wait for the first byte of a response (default 60).
    pub first_byte_timeout_seconds: f64,
    /// Seconds a stream may stay silent (default 30).
    pub idle_timeout_seconds: f64,
    /// Most KiB of one response's body, as streamed (default 16384 = 16 MiB): a response still
    /// streaming beyond is ended, as a model repeating itself without end would be.
    pub max_response_kib: usize,
    /// Most seconds one response may take from its request to its end, a wait the server's
    /// `Retry-After` asked for included (default 600).
    pub max_response_seconds: f64,
    /// Most tokens per response (`max_tokens`; the server's default when unset, which for
    /// llama-server is unlimited).
    pub max_tokens: Option<u32>,
    /// `max_completion_tokens`, which newer OpenAI models take instead of `max_tokens`.
    pub max_completion_tokens: Option<u32>,
    /// Sampling temperature, 0 to 2.
    pub temperature: Option<f64>,
    /// Nucleus sampling, above 0 and at most 1.
    pub top_p: Option<f64>,
    /// One to four stop sequences.
    pub stop: Option<Stop>,
    /// Sampling seed.
    pub seed: Option<i64>,
    /// `auto`, `none`, `required`, or one tool's name (that tool is forced).
    pub tool_choice: Option<String>,
    /// Whether the model may ask for several calls in one response.
    pub parallel_tool_calls: Option<bool>,
    /// A server's own request fields, sent as they are (`[model.extra]`).
    pub extra: serde_json::Map<String, serde_json::Value>,
    /// Ask for the final usage chunk (`stream_options.include_usage`, default true); a server
    /// that refuses the option is asked again without it.
    pub include_usage: bool,
}

impl Default for ModelSection {
    fn default() -> Self {
        Self {
            url: None,
            name: None,
            headers: Default::default(),
            pace: 0.03,
            words: None,
            first_byte_timeout_seconds: 60.0,
            idle_timeout_seconds: 30.0,
            max_response_kib: DEFAULT_MAX_RESPONSE_KIB,
            max_response_seconds: DEFAULT_MAX_RESPONSE_SECONDS,
            max_tokens: None,
            max_completion_tokens: None,
            temperature: None,
            top_p: None,
            stop: None,
            seed: None,
            tool_choice: None,
            parallel_tool_calls: None,
            extra: Default::default(),
            include_usage: true,
        }
    }
}

/// `[bot]`
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct BotSection {
    /// The system prompt.
    pub system_prompt: Option<String>,
    /// What the bot says first in each session.
    pub greeting: Option<String>,
    /// What MCP clients call the bot (in `start`/`chat` descriptions and the server's
    /// instructions), so two turnscope servers in one client are told apart.
    pub name: Option<String>,
    /// One line on what the bot is for, shown to MCP clients' models with its name.
    pub description: Option<String>,
    /// Most rounds of function calls per turn (default 8).
    pub round_cap: u32,
    /// Seconds a tool call may take (default 30).
    pub tool_timeout_seconds: f64,
    /// Whether the built-in tools (`clock`, `echo`) are offered (default true).
    pub builtin_tools: bool,
    /// Most history messages a session keeps; older whole turns are forgotten (default 200,
    /// 0 = keep everything).
    pub(crate) history_messages: usize,
    /// What a turn does when the model asks for a round beyond `round_cap` (default
    /// `answer`: one last request without tools).
    pub at_round_cap: AtRoundCap,
}

/// `bot.at_round_cap`: what happens when the model asks for one round too many.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AtRoundCap {
    /// The calls are not run (each gets a "not run" result) and the model gets one last
    /// request without tools, so the turn ends with an answer.
    #[default]
    Answer,
    /// The turn ends in a round-cap error.
    Error,
}

impl Default for BotSection {
    fn default() -> Self {
        Self {
            system_prompt: Some(
                "You are a helpful assistant. Answer in one short sentence.".into(),
            ),
            greeting: None,
            name: None,
            description: None,
            round_cap: 8,
            tool_timeout_seconds: 30.0,
            builtin_tools: true,
            history_messages: 200,
            at_round_cap: AtRoundCap::Answer,
        }
    }
}

/// `[console]`
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConsoleSection {
    /// Theme name (a file in `themes/`) or path.
    pub theme: Option<String>,
    /// Most MiB the console keeps of what it shows (MCP exchanges, model requests and their
    /// messages, frames, transcripts, timelines, progress, log), shared out between them;
    /// each drops its oldest first and says how many it dropped. Default 16.
    pub max_mib: usize,
}

/// The default `console.max_mib`.
pub const CONSOLE_MAX_MIB: usize = 16;
/// The largest `console.max_mib` accepted (64 GiB).
const CONSOLE_MIB_MAX: usize = 64 * 1024;

impl Default for ConsoleSection {
    fn default() -> Self {
        Self {
            theme: None,
            max_mib: CONSOLE_MAX_MIB,
        }
    }
}

/// `[bridges]`
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct BridgesSection {
    /// `[[bridges.xiaozhi]]`: relays to Xiaozhi MCP endpoints.
    pub xiaozhi: Vec<XiaozhiEntry>,
}

impl Config {
    /// Reads `path`, or `./turnscope.toml` when `path` is `None` and that file exists, or the
    /// defaults; lays `overrides` over it and validates the result once. Returns the config and
    /// the file it came from.
    ///
    /// # Errors
    /// The file cannot be read or parsed, or a value (from the file or a flag) breaks a rule.
    pub fn load(
        path: Option<&Path>,
        overrides: &Overrides,
    ) -> Result<(Self, Option<PathBuf>), ConfigError> {
        let path = match path {
            Some(p) => Some(p.to_path_buf()),
            None => Some(PathBuf::from("turnscope.toml")).filter(|p| p.exists()),
        };
        let Some(path) = path else {
            let mut config = Config::default();
            overrides.apply(&mut config);
            config.validate(overrides)?;
            return Ok((config, None));
        };
        let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Read {
            path: path.clone(),
            source,
        })?;
        Self::from_file_text(&path, &text, overrides).map(|config| (config, Some(path)))
    }

    /// Where the config file `path` sets `key` (dotted, as `console.theme`): `FILE:LINE`, or
    /// the file alone when the line is not found (a `.json` config, a key set inline), so a
    /// value checked after the load (a theme file it names) can say where it came from.
    pub fn place_of(path: &Path, key: &str) -> String {
        let line = std::fs::read_to_string(path)
            .ok()
            .and_then(|text| locate::find_key(&text, key))
            .map(|spot| format!(":{}", spot.line));
        format!("{}{}", path.display(), line.unwrap_or_default())
    }

    /// The config in `text`, read from the file `path` (TOML, or `mcpServers` JSON for a
    /// `.json` path), with `overrides` laid over it and validated once; errors name `path`
    /// and, where they can, the line.
    ///
    /// # Errors
    /// As [`Config::load`], but for reading the file.
    pub fn from_file_text(
        path: &Path,
        text: &str,
        overrides: &Overrides,
    ) -> Result<Self, ConfigError> {
        let is_json = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"));
        let in_file = |e: ConfigError| match e {
            ConfigError::Syntax { message, at, .. } => ConfigError::Syntax {
                file: Some(path.to_path_buf()),
                message,
                at,
            },
            ConfigError::Invalid { message, .. } if !message.starts_with("--") => {
                let key = message.split(": ").next().unwrap_or_default();
                ConfigError::Invalid {
                    file: Some(path.to_path_buf()),
                    at: (!is_json).then(|| locate::find_key(text, key)).flatten(),
                    message,
                }
            }
            other => other,
        };
        let mut config = if is_json {
            Self::read_json(text)
        } else {
            Self::read_toml(text)
        }
        .map_err(in_file)?;
        overrides.apply(&mut config);
        config.validate(overrides).map_err(in_file)?;
        // Relative paths of stdio servers mean the config file's folder, wherever turnscope
        // was started from.
        let dir = std::path::absolute(path)
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf))
            .unwrap_or_default();
        for server in &mut config.mcp_servers {
            server.anchor_cwd(&dir);
        }
        Ok(config)
    }

    /// Parses and validates TOML text.
    ///
    /// # Errors
    /// Text that is not a config, or a value that breaks a rule (the message names the key).
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let config = Self::read_toml(text)?;
        config.validate(&Overrides::default())?;
        Ok(config)
    }

    /// Parses and validates a Claude-Desktop style JSON config: its `mcpServers`, with every
    /// other setting at its default.
    ///
    /// # Errors
    /// As [`Config::parse`].
    pub fn parse_json(text: &str) -> Result<Self, ConfigError> {
        let config = Self::read_json(text)?;
        config.validate(&Overrides::default())?;
        Ok(config)
    }

    fn read_toml(text: &str) -> Result<Self, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Syntax {
            file: None,
            message: wording::plain(&e.to_string()),
            at: e.span().map(|span| {
                (
                    locate::spot_at(text, span.start),
                    wording::plain(e.message()),
                )
            }),
        })
    }

    fn read_json(text: &str) -> Result<Self, ConfigError> {
        let servers = mcp_json::parse_mcp_json(text).map_err(|message| ConfigError::Syntax {
            file: None,
            message,
            at: None,
        })?;
        Ok(Config {
            mcp_servers: servers.into_iter().map(|s| s.server).collect(),
            ..Config::default()
        })
    }

    /// Checks every rule once, after the flags were laid over the file; a broken rule whose
    /// value came from a flag is reported under the flag's name.
    fn validate(&self, overrides: &Overrides) -> Result<(), ConfigError> {
        self.check().map_err(|message| ConfigError::Invalid {
            file: None,
            message: overrides.name_flag(message),
            at: None,
        })
    }

    fn check(&self) -> Result<(), String> {
        let s = &self.server;
        if s.max_body_bytes == 0 {
            return Err("server.max_body_bytes: must be at least 1".into());
        }
        mcp_servers::validate_servers(&self.mcp_servers)?;
        if s.sessions == 0 {
            return Err("server.sessions: must be at least 1".into());
        }
        if s.handle_seconds == 0 {
            return Err("server.handle_seconds: must be at least 1".into());
        }
        if s.max_connections == 0 {
            return Err("server.max_connections: must be at least 1 (default 4096)".into());
        }
        check_seconds("server.sweep_seconds", s.sweep_seconds, true)?;
        check_seconds("server.drain_seconds", s.drain_seconds, true)?;
        check_seconds("server.task_after_seconds", s.task_after_seconds, true)?;
        check_seconds("server.task_poll_seconds", s.task_poll_seconds, false)?;
        check_seconds(
            "server.events_linger_seconds",
            s.events_linger_seconds,
            true,
        )?;
        if !EVENTS_QUEUE_KIB_RANGE.contains(&s.events_queue_kib) {
            return Err(format!(
                "server.events_queue_kib: {} is not between {} and {}; give the KiB of event lines \
                 /events keeps for its viewers (default {DEFAULT_EVENTS_QUEUE_KIB})",
                s.events_queue_kib,
                EVENTS_QUEUE_KIB_RANGE.start(),
                EVENTS_QUEUE_KIB_RANGE.end()
            ));
        }
        if let Some(id) = &s.replica_id {
            check_replica_id(id)?;
        }
        check_bot_identity(&self.bot)?;
        check_seconds("model.pace", self.model.pace, true)?;
        if !(1..=CONSOLE_MIB_MAX).contains(&self.console.max_mib) {
            return Err(format!(
                "console.max_mib: {} is not between 1 and {CONSOLE_MIB_MAX}; give the MiB the console may keep of what it shows (default {CONSOLE_MAX_MIB})",
                self.console.max_mib
            ));
        }
        if self.wire.max_kib > WIRE_KIB_MAX {
            return Err(format!(
                "wire.max_kib: {} is more than {WIRE_KIB_MAX} (1 GiB); give the KiB of one message to keep, or 0 to record no bodies",
                self.wire.max_kib
            ));
        }
        check_seconds(
            "server.header_timeout_seconds",
            s.header_timeout_seconds,
            false,
        )?;
        check_seconds("server.body_timeout_seconds", s.body_timeout_seconds, false)?;
        let m = &self.model;
        if let Some(url) = &m.url {
            check_model_url("model.url", url)?;
        }
        check_seconds(
            "model.first_byte_timeout_seconds",
            m.first_byte_timeout_seconds,
            false,
        )?;
        check_seconds("model.idle_timeout_seconds", m.idle_timeout_seconds, false)?;
        check_seconds("model.max_response_seconds", m.max_response_seconds, false)?;
        if m.max_response_kib == 0 || m.max_response_kib > WIRE_KIB_MAX {
            return Err(format!(
                "model.max_response_kib: {} is out of range; give the KiB one response may stream, from 1 to \
                 {WIRE_KIB_MAX} (default {DEFAULT_MAX_RESPONSE_KIB})",
                m.max_response_kib
            ));
        }
        model_params::check(m)?;
        check_seconds(
            "bot.tool_timeout_seconds",
            self.bot.tool_timeout_seconds,
            false,
        )?;
        xiaozhi::validate_entries(&self.bridges.xiaozhi)?;
        self.store.resolve(StoreUrl::Memory)?;
        Ok(())
    }
}

/// The poll interval a task asks its client to keep (`pollIntervalMs`): `task_poll_seconds`,
/// but never more than half the handle's lifetime. A task lives as long as its conversation,
/// which ends `handle_seconds` after its last call (a poll is one), so a client polling at a
/// longer interval would find the task and the conversation gone.
pub fn task_poll(s: &ServerSection) -> std::time::Duration {
    let half_life = s.handle_seconds as f64 / 2.0;
    std::time::Duration::from_secs_f64(s.task_poll_seconds.min(half_life))
}

/// Says, when tasks are on and `task_poll_seconds` is not under half the handle's lifetime,
/// that tasks ask for a shorter interval than the one set ([`task_poll`]), why, and what to
/// set: a warning at start, not a refusal (`--handle-seconds 1` with the default poll is a
/// fine setup for a test).
pub fn task_poll_warning(s: &ServerSection) -> Option<String> {
    let asked = task_poll(s).as_secs_f64();
    if !s.tasks || asked >= s.task_poll_seconds {
        return None;
    }
    Some(format!(
        "server.task_poll_seconds {poll} s is not under half of server.handle_seconds ({life} s): \
         a task lives as long as its conversation, which ends {life} s after its last call (a \
         poll is one), so tasks ask their clients to poll every {asked} s instead. Set \
         task_poll_seconds below {asked} or raise handle_seconds to say so yourself",
        poll = s.task_poll_seconds,
        life = s.handle_seconds,
    ))
}

/// Whether `host` names this machine only (`localhost`, `127.0.0.0/8`, `::1`).
pub(crate) fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host
            .trim_matches(|c| c == '[' || c == ']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Refuses to listen on `host` beyond loopback without a bearer token, unless an
/// authenticating proxy is said to be in front (`allow_open_bind`): handles are bearer secrets,
/// and anyone who can reach the port could open sessions and run tools.
///
/// # Errors
/// The refusal, with the two ways out.
pub(crate) fn check_open_bind(
    host: &str,
    has_token: bool,
    allow_open_bind: bool,
) -> Result<(), String> {
    if is_loopback(host) || has_token || allow_open_bind {
        return Ok(());
    }
    // Refused either way; a name that does not resolve is said so (a typo was sent off to
    // get a token first). The rule itself never rests on a lookup: a name is beyond loopback
    // whatever it resolves to now, since the bind looks it up again.
    if host
        .trim_matches(|c| c == '[' || c == ']')
        .parse::<std::net::IpAddr>()
        .is_err()
        && std::net::ToSocketAddrs::to_socket_addrs(&(host, 0)).is_err()
    {
        return Err(format!(
            "cannot listen on {host}: the name does not resolve; give --host an IP address or \
             a name this machine resolves (127.0.0.1, localhost)"
        ));
    }
    Err(format!(
        "refusing to listen on {host} without an auth token: anyone who can reach this port could \
         open sessions and use your model and tools. Pass --auth-token TOKEN (clients then send \
         `Authorization: Bearer TOKEN`), or --allow-open-bind if an authenticating proxy is in front"
    ))
}

/// `[bot] name` and `description` go into every MCP client's tool list and its model's
/// system prompt (Claude Code cuts descriptions at 2 KB): one line each, and short.
fn check_bot_identity(bot: &BotSection) -> Result<(), String> {
    for (key, value, most) in [
        ("bot.name", &bot.name, 64),
        ("bot.description", &bot.description, 400),
    ] {
        let Some(value) = value else { continue };
        let chars = value.chars().count();
        if value.trim().is_empty() || value.contains(['\n', '\r']) || chars > most {
            return Err(format!(
                "{key}: expected one non-empty line of at most {most} characters; received {chars} \
                 characters{}. It is shown to MCP clients' models: keep it short.",
                if value.contains(['\n', '\r']) {
                    " with a line break"
                } else {
                    ""
                }
            ));
        }
    }
    Ok(())
}

/// A replica id shows in headers, logs and error texts: 1–64 characters of ASCII letters,
/// digits and `.` `_` `-` `:`.
fn check_replica_id(id: &str) -> Result<(), String> {
    let ok = (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b':'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "server.replica_id: {id:?} is not a usable replica id; expected 1-64 characters of \
             ASCII letters, digits, '.', '_', '-' or ':' (e.g. \"r1\" or \"web-2\")"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        let c =
            Config::parse("[server]\nport = 0\nsessions = 4\n[bot]\ngreeting = \"hi\"\n").unwrap();
        assert_eq!(c.server.port, 0);
        assert_eq!(c.server.sessions, 4);
        assert_eq!(c.server.handle_seconds, 300);
        assert_eq!(c.bot.greeting.as_deref(), Some("hi"));
    }

    #[test]
    fn xiaozhi_bridges_parse_and_validate() {
        let c = Config::parse(
            "[[bridges.xiaozhi]]\nname = \"home\"\nendpoint = \"wss://h/mcp/?token=${T}\"\n\
             servers = [\"@bot\"]\ntools = { deny = [\"rm\"] }\n",
        )
        .unwrap();
        let b = &c.bridges.xiaozhi[0];
        assert_eq!(b.name, "home");
        assert_eq!(b.servers, ["@bot"]);
        assert_eq!(b.tools.deny, ["rm"]);
        let e = Config::parse(
            "[[bridges.xiaozhi]]\nname = \"a\"\nservers = [\"x\"]\ntools = { allow = [\"rm\"], deny = [\"rm\"] }\n",
        )
        .unwrap_err().to_string();
        assert!(e.contains("bridges.xiaozhi[0].tools"), "{e}");
        let e = Config::parse("[[bridges.xiaozhi]]\nname = \"a\"\nserver = [\"x\"]\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("server"), "{e}");
    }

    #[test]
    fn errors_name_the_key() {
        let e = Config::parse("[server]\nprot = 1\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("prot"), "{e}");
        let e = Config::parse("[server]\nport = \"x\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("port") || e.contains("server"), "{e}");
        let e = Config::parse("[server]\nsessions = 0\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("server.sessions"), "{e}");
        let e = Config::parse("[server]\nevents_queue_kib = 1\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("server.events_queue_kib") && e.contains("between 64 and"),
            "{e}"
        );
        let c = Config::parse("[server]\nevents_queue_kib = 64\n").unwrap();
        assert_eq!(c.server.events_queue_kib, 64);
    }

    /// Found by fuzzing: these parsed, then starting the app panicked turning them into a
    /// `Duration`.
    #[test]
    fn seconds_that_cannot_be_a_duration_are_refused() {
        for (key, value) in [
            ("[model]\nfirst_byte_timeout_seconds", "inf"),
            ("[model]\nidle_timeout_seconds", "-1.0"),
            ("[model]\nidle_timeout_seconds", "nan"),
            ("[bot]\ntool_timeout_seconds", "inf"),
            ("[server]\nsweep_seconds", "1e300"),
            (
                "[[mcp_servers]]\nname = \"a\"\nurl = \"http://h/mcp\"\ntimeout_seconds",
                "1e300",
            ),
        ] {
            let e = Config::parse(&format!("{key} = {value}\n"))
                .unwrap_err()
                .to_string();
            let name = key.rsplit('\n').next().unwrap();
            assert!(
                e.contains(name) && e.contains("expected a number of seconds"),
                "{e}"
            );
        }
        assert!(Config::parse("[model]\npace = 0.0\nidle_timeout_seconds = 1e9\n").is_ok());
    }

    /// A task poll interval past the handle's lifetime was advertised as set: the task asked
    /// its client to poll after the task and its conversation were gone. Tasks now ask for
    /// half the lifetime at most, and the start warns.
    #[test]
    fn a_task_poll_interval_past_half_the_handle_lifetime_is_shortened_with_a_warning() {
        let config = Config::parse("[server]\nhandle_seconds = 10\ntask_poll_seconds = 30\n")
            .expect("a long poll interval is no error");
        assert_eq!(task_poll(&config.server), std::time::Duration::from_secs(5));
        let warning = task_poll_warning(&config.server).expect("a warning");
        assert!(
            warning.contains("server.task_poll_seconds 30 s is not under half")
                && warning.contains("poll every 5 s instead"),
            "{warning}"
        );
        // The default poll with a one-second lifetime: half a second, said.
        let short = Config::parse("[server]\nhandle_seconds = 1\n").unwrap();
        assert_eq!(
            task_poll(&short.server),
            std::time::Duration::from_millis(500)
        );
        // Under half, or tasks off: as set, nothing said.
        let fine = Config::parse("[server]\nhandle_seconds = 10\ntask_poll_seconds = 2\n").unwrap();
        assert_eq!(task_poll(&fine.server), std::time::Duration::from_secs(2));
        assert_eq!(task_poll_warning(&fine.server), None);
        let off =
            Config::parse("[server]\nhandle_seconds = 10\ntask_poll_seconds = 30\ntasks = false\n")
                .unwrap();
        assert_eq!(task_poll_warning(&off.server), None);
    }

    /// A value a rule refuses, in a file, is said with its line, as docs/config.md promises
    /// (only parse errors had one; tour H).
    #[test]
    fn a_refused_value_in_a_file_names_its_line() {
        let path = Path::new("f.toml");
        let e = Config::from_file_text(
            path,
            "# mine\n[model]\ntemperature = 5\n",
            &Overrides::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("config file f.toml:3: model.temperature: 5 is out of range"),
            "{e}"
        );
        let e = Config::from_file_text(
            path,
            "[[mcp_servers]]\nname = \"Files\"\ncommand = \"node\"\n",
            &Overrides::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("config file f.toml:2: mcp_servers[0].name"),
            "{e}"
        );
        // Neither a url nor a command: both ways are named (the transport was only inferred).
        let e = Config::parse("[[mcp_servers]]\nname = \"files\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("url: missing") && e.contains("command = "),
            "{e}"
        );
    }
}
