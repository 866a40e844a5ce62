//! The typed configuration: a TOML file (`--config FILE`, or `./turnscope.toml` when present)
//! overlaid by command-line flags. Unknown keys are errors, so a typo never passes silently.
//! A `.json` file is read as a Claude-Desktop style `mcpServers` object instead (see
//! [`crate::tools::config`]).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::tools::config::{McpServerConfig, PolicySection};

/// Everything turnscope can be configured with.
#[derive(Debug, Clone, Default, Deserialize)]
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
}

/// `[server]`
#[derive(Debug, Clone, Deserialize)]
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
    /// Most HTTP connections open at once (default 512); more get 503 and a log line.
    pub max_connections: usize,
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
            max_connections: crate::server::DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// `[model]`
#[derive(Debug, Clone, Deserialize)]
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
        }
    }
}

/// `[bot]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BotSection {
    /// The system prompt.
    pub system_prompt: Option<String>,
    /// What the bot says first in each session.
    pub greeting: Option<String>,
    /// Most rounds of function calls per turn (default 8).
    pub round_cap: u32,
    /// Seconds a tool call may take (default 30).
    pub tool_timeout_seconds: f64,
    /// Whether the built-in tools (`clock`, `echo`) are offered (default true).
    pub builtin_tools: bool,
    /// Most history messages a session keeps; older whole turns are forgotten (default 200,
    /// 0 = keep everything).
    pub history_messages: usize,
}

impl Default for BotSection {
    fn default() -> Self {
        Self {
            system_prompt: Some(
                "You are a helpful assistant. Answer in one short sentence.".into(),
            ),
            greeting: None,
            round_cap: 8,
            tool_timeout_seconds: 30.0,
            builtin_tools: true,
            history_messages: 200,
        }
    }
}

/// `[console]`
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConsoleSection {
    /// Theme name (a file in `themes/`) or path.
    pub theme: Option<String>,
}

/// `[bridges]`
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BridgesSection {
    /// `[[bridges.xiaozhi]]`: relays to Xiaozhi MCP endpoints.
    pub xiaozhi: Vec<crate::bridge::xiaozhi::XiaozhiEntry>,
}

impl Config {
    /// Reads `path`, or `./turnscope.toml` when `path` is `None` and that file exists, or the
    /// defaults. Errors name the file, the key and what was expected.
    pub fn load(path: Option<&Path>) -> anyhow::Result<(Self, Option<PathBuf>)> {
        let path = match path {
            Some(p) => Some(p.to_path_buf()),
            None => Some(PathBuf::from("turnscope.toml")).filter(|p| p.exists()),
        };
        let Some(path) = path else {
            return Ok((Config::default(), None));
        };
        let text = std::fs::read_to_string(&path).map_err(|e| {
            anyhow::anyhow!(
                "cannot read config file {}: {e}; check the path given to --config",
                path.display()
            )
        })?;
        let is_json = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"));
        let parsed = if is_json {
            Self::parse_json(&text)
        } else {
            Self::parse(&text)
        };
        let config = parsed.map_err(|e| anyhow::anyhow!("config file {}: {e}", path.display()))?;
        Ok((config, Some(path)))
    }

    /// Parses TOML text.
    pub fn parse(text: &str) -> Result<Self, String> {
        let config: Config = toml::from_str(text).map_err(|e| e.to_string())?;
        config.validate()?;
        Ok(config)
    }

    /// Parses a Claude-Desktop style JSON config: its `mcpServers`, with every other setting
    /// at its default.
    pub fn parse_json(text: &str) -> Result<Self, String> {
        let config = Config {
            mcp_servers: crate::tools::config::parse_claude_json(text)?,
            ..Config::default()
        };
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), String> {
        if self.server.max_body_bytes == 0 {
            return Err("server.max_body_bytes: must be at least 1".into());
        }
        crate::tools::config::validate_servers(&self.mcp_servers)?;
        if self.server.sessions == 0 {
            return Err("server.sessions: must be at least 1".into());
        }
        if self.server.handle_seconds == 0 {
            return Err("server.handle_seconds: must be at least 1".into());
        }
        if self.server.max_connections == 0 {
            return Err("server.max_connections: must be at least 1 (default 512)".into());
        }
        check_seconds("server.sweep_seconds", self.server.sweep_seconds, true)?;
        check_seconds("model.pace", self.model.pace, true)?;
        check_seconds(
            "server.header_timeout_seconds",
            self.server.header_timeout_seconds,
            false,
        )?;
        check_seconds(
            "server.body_timeout_seconds",
            self.server.body_timeout_seconds,
            false,
        )?;
        check_seconds(
            "model.first_byte_timeout_seconds",
            self.model.first_byte_timeout_seconds,
            false,
        )?;
        check_seconds(
            "model.idle_timeout_seconds",
            self.model.idle_timeout_seconds,
            false,
        )?;
        check_seconds(
            "bot.tool_timeout_seconds",
            self.bot.tool_timeout_seconds,
            false,
        )?;
        crate::bridge::xiaozhi::config::validate_entries(&self.bridges.xiaozhi)?;
        Ok(())
    }
}

/// The largest seconds setting accepted: 10^9 s, about 31 years. Larger values could not be
/// added to a clock reading without overflow.
pub const MAX_SECONDS: f64 = 1e9;

/// Checks a seconds setting named `key`: a number (not NaN) `> 0`, or `>= 0` when `zero_ok`,
/// and at most [`MAX_SECONDS`], so it becomes a [`std::time::Duration`] that any clock
/// reading can be moved by. The error names the key, the value and what is expected.
pub fn check_seconds(key: &str, value: f64, zero_ok: bool) -> Result<(), String> {
    let above = if zero_ok { value >= 0.0 } else { value > 0.0 };
    if above && value <= MAX_SECONDS {
        return Ok(());
    }
    let bound = if zero_ok { ">= 0" } else { "> 0" };
    Err(format!(
        "{key}: expected a number of seconds {bound} and at most {MAX_SECONDS:e}, got {value}"
    ))
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
        .unwrap_err();
        assert!(e.contains("bridges.xiaozhi[0].tools"), "{e}");
        let e = Config::parse("[[bridges.xiaozhi]]\nname = \"a\"\nserver = [\"x\"]\n").unwrap_err();
        assert!(e.contains("server"), "{e}");
    }

    #[test]
    fn errors_name_the_key() {
        let e = Config::parse("[server]\nprot = 1\n").unwrap_err();
        assert!(e.contains("prot"), "{e}");
        let e = Config::parse("[server]\nport = \"x\"\n").unwrap_err();
        assert!(e.contains("port") || e.contains("server"), "{e}");
        let e = Config::parse("[server]\nsessions = 0\n").unwrap_err();
        assert!(e.contains("server.sessions"), "{e}");
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
            let e = Config::parse(&format!("{key} = {value}\n")).unwrap_err();
            let name = key.rsplit('\n').next().unwrap();
            assert!(
                e.contains(name) && e.contains("expected a number of seconds"),
                "{e}"
            );
        }
        assert!(Config::parse("[model]\npace = 0.0\nidle_timeout_seconds = 1e9\n").is_ok());
    }
}
