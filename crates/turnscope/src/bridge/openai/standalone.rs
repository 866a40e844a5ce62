//! `turnscope bridge openai`: one MCP server's tools as `GET /v1/tools` and `POST /v1/execute`,
//! with mcp-openai-bridge's command line (`--stdio "<command>"`, `--http <url>`, `--port`,
//! `--host`) plus `--sse`, headers, a tool filter, a call timeout and the main server's guard.
//! The server is a tool source like any `[[mcp_servers]]` entry; [`start`] says what follows.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::OpenAiBridge;
use crate::config::mcp_servers::validate_servers;
use crate::config::{McpServerConfig, ToolFilter};
use crate::mcp::ServerSpec;
use crate::mcp::spec::{SpecError, header_flags};
use crate::observe::Bus;
use crate::server::{BodyRules, GuardConfig, Server};
use crate::tools::limits::{ENV_MAX_TOOLS_PER_SERVER, ENV_MAX_TOOLS_TOTAL, LimitsError, McpLimits};
use crate::tools::mcp_source::SourceStatus;
use crate::tools::policy::Policy;
use crate::tools::registry::ToolRegistry;

/// The name the bridged server has in logs and events.
pub const SERVER_NAME: &str = "upstream";

/// How long a client has to send a request's head (the main server's default, see
/// `server.header_timeout_seconds`).
const HEADER_TIMEOUT: Duration = Duration::from_secs(100);

/// Extra time the bridge waits beyond the server's own call timeout, which fires first and
/// cancels the call upstream.
const TIMEOUT_MARGIN: Duration = Duration::from_secs(1);

/// What `turnscope bridge openai` is asked to do: the upstream server, where to listen, and
/// the guard. The binary fills it from its command line; [`Default`] gives the flags' defaults.
#[derive(Debug, Clone)]
pub struct StandaloneOptions {
    /// The stdio MCP server started by this command line (split like a shell would, without one).
    pub stdio: Option<String>,
    /// The streamable HTTP MCP server at this URL.
    pub http: Option<String>,
    /// The legacy SSE MCP server at this URL.
    pub sse: Option<String>,
    /// Port to serve on (0 = any free port; default 8800).
    pub port: u16,
    /// Interface to bind (default 127.0.0.1).
    pub host: String,
    /// Seconds one tool call may take before it is abandoned and cancelled upstream (default 60).
    pub timeout_seconds: f64,
    /// Extra request headers for HTTP and SSE servers, each `Name: value`.
    pub headers: Vec<String>,
    /// Offer only these tools (empty = all).
    pub allow: Vec<String>,
    /// Never offer nor call these tools (deny wins).
    pub deny: Vec<String>,
    /// Require `Authorization: Bearer TOKEN` on every request.
    pub auth_token: Option<String>,
    /// Extra allowed Host values (`name:*` = any port).
    pub allowed_hosts: Vec<String>,
    /// Extra allowed Origin values (`scheme://name:*` = any port).
    pub allowed_origins: Vec<String>,
    /// Allow a bind beyond loopback without a token (an authenticating proxy is in front).
    pub allow_open_bind: bool,
}

impl Default for StandaloneOptions {
    fn default() -> Self {
        Self {
            stdio: None,
            http: None,
            sse: None,
            port: 8800,
            host: "127.0.0.1".into(),
            timeout_seconds: 60.0,
            headers: Vec::new(),
            allow: Vec::new(),
            deny: Vec::new(),
            auth_token: None,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            allow_open_bind: false,
        }
    }
}

/// Why `turnscope bridge openai` cannot start.
#[derive(Debug, thiserror::Error)]
pub enum StandaloneError {
    /// Occurs when the `--stdio` line or a `--header` cannot describe the server.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// Occurs when `--header` is given for a stdio server.
    #[error("--header applies to --http and --sse servers only")]
    HeaderWithoutHttp,
    /// Occurs when none or several of `--stdio`, `--http`, `--sse` are given.
    #[error("give exactly one of --stdio \"<command>\", --http <url>, --sse <url>")]
    NotOneServer,
    /// Occurs when a tool is both in `--allow` and in `--deny`.
    #[error("--allow and --deny name the same tool; name each tool in one of them only")]
    AllowedAndDenied,
    /// Occurs when a flag's value breaks a rule (the timeout, the server entry, an open
    /// bind); the text starts with the flag or key and says what is expected.
    #[error("{0}")]
    Invalid(String),
    /// Occurs when an `MCP_MAX_*` variable is not a valid limit.
    #[error("tool limits: {0}")]
    Limits(#[from] LimitsError),
    /// Occurs when the port cannot be bound.
    #[error("cannot listen on {host}:{port}: {source}; {}", crate::net::bind_advice(.source, "bridge"))]
    Bind {
        /// The interface.
        host: String,
        /// The port.
        port: u16,
        /// What the system said.
        source: std::io::Error,
    },
    /// Occurs when the bound socket cannot be served (its address cannot be read).
    #[error(transparent)]
    Serve(std::io::Error),
}

/// A running standalone bridge.
pub struct Standalone {
    /// Where it listens.
    pub addr: SocketAddr,
    /// What it bridges, for display (`stdio: cmd args`, `http: URL`).
    pub label: String,
    server: Server,
    registry: Arc<ToolRegistry>,
}

/// The `[[mcp_servers]]`-style entry the flags describe.
///
/// # Errors
/// None or several of `--stdio/--http/--sse`, a `--stdio` line that cannot be split, a
/// `--header` without `:`, headers on a stdio server, a timeout that is not positive, or a
/// tool both allowed and denied.
pub(crate) fn server_config(
    args: &StandaloneOptions,
) -> Result<(McpServerConfig, String), StandaloneError> {
    let headers = header_flags(&args.headers)?;
    let (mut config, label) = match (&args.stdio, &args.http, &args.sse) {
        (Some(line), None, None) => {
            if !headers.is_empty() {
                return Err(StandaloneError::HeaderWithoutHttp);
            }
            let spec = ServerSpec::stdio_line(line)?;
            let ServerSpec::Stdio { command, args, .. } = &spec else {
                unreachable!("stdio_line gives a stdio spec");
            };
            let words: Vec<&str> = args.iter().map(String::as_str).collect();
            (
                McpServerConfig::stdio(SERVER_NAME, command, &words),
                spec.label(),
            )
        }
        (None, Some(url), None) => (
            McpServerConfig::http(SERVER_NAME, url),
            ServerSpec::Http {
                url: url.clone(),
                headers: headers.clone(),
            }
            .label(),
        ),
        (None, None, Some(url)) => (
            McpServerConfig::sse(SERVER_NAME, url),
            ServerSpec::Sse {
                url: url.clone(),
                headers: headers.clone(),
            }
            .label(),
        ),
        _ => return Err(StandaloneError::NotOneServer),
    };
    config.headers = headers;
    config.timeout_seconds = args.timeout_seconds;
    if args.allow.iter().any(|a| args.deny.contains(a)) {
        return Err(StandaloneError::AllowedAndDenied);
    }
    if !args.allow.is_empty() || !args.deny.is_empty() {
        config.tool_filter = Some(ToolFilter {
            allow: args.allow.clone(),
            deny: args.deny.clone(),
        });
    }
    crate::config::check_seconds("--timeout-seconds", args.timeout_seconds, false)
        .map_err(StandaloneError::Invalid)?;
    validate_servers(std::slice::from_ref(&config))
        .map_err(|e| StandaloneError::Invalid(said_of_flags(&e, args)))?;
    Ok((config, label))
}

/// A config check's error about the server the flags made, worded by the flag that set the
/// key: the person wrote `--sse ws://…`, not `mcp_servers[0] ("upstream").url`.
fn said_of_flags(error: &str, args: &StandaloneOptions) -> String {
    let prefix = format!("mcp_servers[0] (\"{SERVER_NAME}\").");
    let Some(rest) = error.strip_prefix(&prefix) else {
        return error.to_string();
    };
    let key_end = rest.find([':', '.', '[']).unwrap_or(rest.len());
    let flag = match &rest[..key_end] {
        "url" if args.sse.is_some() => "--sse",
        "url" => "--http",
        "command" | "args" | "cwd" | "env" => "--stdio",
        "headers" => "--header",
        "timeout_seconds" => "--timeout-seconds",
        "tool_filter" | "tools" => "--allow/--deny",
        _ => return error.to_string(),
    };
    if flag == "--header" {
        // `headers.Accept: …`: the header's name stays.
        return format!("--header {}", rest[key_end..].trim_start_matches('.'));
    }
    let said = rest[key_end..].trim_start_matches(|c: char| c != ':');
    format!("{flag}{said}")
}

/// The guard the flags describe: loopback Host/Origin plus the ones allowed, and the token.
fn guard(args: &StandaloneOptions) -> GuardConfig {
    let mut guard = GuardConfig {
        auth_token: args.auth_token.clone(),
        ..GuardConfig::default()
    };
    guard.hosts.extend(args.allowed_hosts.iter().cloned());
    guard.origins.extend(args.allowed_origins.iter().cloned());
    guard
}

/// Refuses a non-loopback bind without a token (anyone reaching the port could run every
/// tool) unless `allow_open_bind`.
fn check_bind(args: &StandaloneOptions, guard: &GuardConfig) -> Result<(), StandaloneError> {
    crate::config::check_open_bind(&args.host, guard.auth_token.is_some(), args.allow_open_bind)
        .map_err(StandaloneError::Invalid)
}

/// The tool limits from the environment, with no tool caps unless `MCP_MAX_*` set them.
fn limits() -> Result<McpLimits, StandaloneError> {
    let mut limits = McpLimits::from_env()?;
    let unset = |name: &str| std::env::var(name).map_or(true, |v| v.trim().is_empty());
    if unset(ENV_MAX_TOOLS_PER_SERVER) {
        limits.per_server = usize::MAX;
    }
    if unset(ENV_MAX_TOOLS_TOTAL) {
        limits.total = usize::MAX;
    }
    Ok(limits)
}

/// Connects to the server (waiting at most the connect budget) and serves the bridge.
///
/// # Errors
/// Bad flags (see `server_config`), an open bind without a token, or a port that cannot be
/// bound.
///
/// The server is a tool source like any `[[mcp_servers]]` entry
/// ([`McpSource`](crate::tools::mcp_source::McpSource) inside a [`ToolRegistry`] with no
/// built-ins), so it gets what the bot's sources get: refresh on `tools/list_changed`, every page
/// of `tools/list`, respawn of a dead stdio child, reconnection, a per-call timeout that cancels
/// upstream. A server that is not up at start is retried in the background while the bridge
/// already serves (its tools join when it connects). The bot-oriented tool caps do not apply (a
/// bridge offers every tool) unless `MCP_MAX_TOOLS_PER_SERVER` / `MCP_MAX_TOOLS_TOTAL` are set.
pub async fn start(args: &StandaloneOptions, bus: Bus) -> Result<Standalone, StandaloneError> {
    let (config, label) = server_config(args)?;
    let guard = guard(args);
    check_bind(args, &guard)?;
    let listener = crate::net::listen(&args.host, args.port)
        .await
        .map_err(|source| StandaloneError::Bind {
            host: args.host.clone(),
            port: args.port,
            source,
        })?;
    let registry = ToolRegistry::builder(bus.clone())
        .policy(Policy::open())
        .limits(limits()?)
        .servers(std::slice::from_ref(&config))
        .start()
        .await;
    let timeout = Duration::from_secs_f64(config.timeout_seconds) + TIMEOUT_MARGIN;
    let bridge = OpenAiBridge::new(registry.clone(), timeout, bus);
    let health_registry = registry.clone();
    let app = Router::new()
        .route(
            "/healthz",
            get(move || {
                let registry = health_registry.clone();
                async move {
                    // The bridge serves nothing without its one upstream: "degraded" (with
                    // the upstream's state beside it) until it is up, as the main server's
                    // health says a lost store.
                    let upstream = upstream_health(&registry);
                    let status = if upstream["state"] == "up" {
                        "ok"
                    } else {
                        "degraded"
                    };
                    axum::Json(json!({"status": status, "upstream": upstream}))
                }
            }),
        )
        .merge(bridge.routes());
    let app = crate::server::protect(app, guard, BodyRules::default());
    let stop = CancellationToken::new();
    let server =
        Server::start(listener, app, stop, HEADER_TIMEOUT).map_err(StandaloneError::Serve)?;
    Ok(Standalone {
        addr: server.addr,
        label,
        server,
        registry,
    })
}

fn upstream_health(registry: &ToolRegistry) -> serde_json::Value {
    let Some(source) = registry.source(SERVER_NAME) else {
        return json!({"state": "skipped"});
    };
    let transport = source.transport().as_str();
    match source.status() {
        SourceStatus::Connecting => json!({"transport": transport, "state": "connecting"}),
        SourceStatus::Up { tools, pid } => {
            json!({"transport": transport, "state": "up", "tools": tools, "pid": pid})
        }
        SourceStatus::Down { error, attempts } => {
            json!({"transport": transport, "state": "down", "error": error, "attempts": attempts})
        }
        SourceStatus::Closed => json!({"transport": transport, "state": "closed"}),
    }
}

impl Standalone {
    /// `http://host:port`.
    pub fn base_url(&self) -> String {
        let base = self.server.mcp_url();
        base.trim_end_matches("/mcp").to_string()
    }

    /// The tool set it serves.
    pub fn registry(&self) -> &Arc<ToolRegistry> {
        &self.registry
    }

    /// One line for the terminal: both routes and the server's state.
    pub fn ready_line(&self) -> String {
        let base = self.base_url();
        let state = match self.registry.source(SERVER_NAME).map(|s| s.status()) {
            Some(SourceStatus::Up { tools, .. }) => format!("{tools} tools"),
            Some(SourceStatus::Down { error, .. }) => {
                format!("not connected yet ({error}); retrying in the background")
            }
            Some(SourceStatus::Connecting) => "still connecting".into(),
            Some(SourceStatus::Closed) | None => "not connected".into(),
        };
        format!(
            "turnscope openai bridge ready: GET {base}/v1/tools · POST {base}/v1/execute · {} ({state})",
            self.label
        )
    }

    /// Stops serving and closes the server (a stdio child is ended).
    pub async fn shutdown(self) {
        self.server.shutdown(Duration::from_secs(2)).await;
        self.registry.shutdown().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TransportKind;

    fn stdio(line: &str) -> StandaloneOptions {
        StandaloneOptions {
            stdio: Some(line.into()),
            ..StandaloneOptions::default()
        }
    }

    #[test]
    fn the_baseline_command_line_is_accepted() {
        let a = StandaloneOptions {
            port: 8801,
            ..stdio("npx -y @modelcontextprotocol/server-filesystem '/tmp/a b'")
        };
        let (config, label) = server_config(&a).unwrap();
        assert_eq!(config.transport_kind(), TransportKind::Stdio);
        assert_eq!(config.command.as_deref(), Some("npx"));
        assert_eq!(
            config.args,
            ["-y", "@modelcontextprotocol/server-filesystem", "/tmp/a b"]
        );
        assert!(label.starts_with("stdio: npx"), "{label}");
        let http = StandaloneOptions {
            http: Some("http://localhost:1234/mcp".into()),
            host: "::1".into(),
            ..StandaloneOptions::default()
        };
        let (config, _) = server_config(&http).unwrap();
        assert_eq!(config.url.as_deref(), Some("http://localhost:1234/mcp"));
    }

    /// A URL the config's checks refuse is said by the flag that gave it, not by the config
    /// entry the flags made (`mcp_servers[0] ("upstream").url`; tour H).
    #[test]
    fn a_bad_upstream_url_is_said_by_its_flag() {
        let sse = StandaloneOptions {
            sse: Some("ws://127.0.0.1:1/sse".into()),
            ..StandaloneOptions::default()
        };
        let message = server_config(&sse).unwrap_err().to_string();
        assert!(
            message.starts_with("--sse: expected an http:// or https:// URL"),
            "{message}"
        );
        assert!(!message.contains("mcp_servers"), "{message}");
    }

    #[test]
    fn options_that_do_not_fit_are_refused_with_the_reason() {
        let none = StandaloneOptions::default();
        assert!(server_config(&none).is_err(), "one upstream is required");
        let two = StandaloneOptions {
            http: Some("http://h/mcp".into()),
            ..stdio("x")
        };
        assert!(server_config(&two).is_err(), "upstreams are exclusive");
        let header = StandaloneOptions {
            headers: vec!["A: b".into()],
            ..stdio("x")
        };
        assert!(
            server_config(&header)
                .unwrap_err()
                .to_string()
                .contains("--header")
        );
        let timeout = StandaloneOptions {
            timeout_seconds: 0.0,
            ..stdio("x")
        };
        let message = server_config(&timeout).unwrap_err().to_string();
        assert!(message.contains("--timeout-seconds"), "{message}");
        let overlap = StandaloneOptions {
            allow: vec!["a".into()],
            deny: vec!["a".into()],
            ..stdio("x")
        };
        assert!(server_config(&overlap).is_err());
        let open = StandaloneOptions {
            host: "0.0.0.0".into(),
            ..stdio("x")
        };
        assert!(check_bind(&open, &GuardConfig::default()).is_err());
        let with_token = GuardConfig {
            auth_token: Some("t".into()),
            ..GuardConfig::default()
        };
        assert!(check_bind(&open, &with_token).is_ok());
    }
}
