//! `turnscope bridge xiaozhi`: what the command line asks for, decided without side effects.
//!
//! The flags pick one of two shapes: plain relays to MCP servers (`--stdio/--http/--sse`,
//! or an `mcp_config.json`), which run on their own; or the main mode with bridges in its
//! config (`--bot`, or a turnscope TOML with `[[bridges.xiaozhi]]`), which needs the bot.
//! Starting anything is left to the caller.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::bot::BOT;
use super::bridge::{BridgeSettings, XiaozhiBridge};
use super::endpoint::Endpoint;
use super::mcp_upstream::UpstreamSettings;
use super::mcp_upstream::mcp_upstream;
use super::placement::place;
use crate::config::mcp_json::read_mcp_json;
use crate::config::mcp_servers::validate_servers;
use crate::config::{Config, ConfigError};
use crate::config::{FilterOverlap, McpServerConfig, Overrides, ToolFilter, XiaozhiEntry};
use crate::mcp::spec::{ServerSpec, SpecError, header_flags};

/// Why `turnscope bridge xiaozhi` cannot decide what to run.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// Occurs when more than one of `--stdio`, `--http`, `--sse`, `--bot` is given.
    #[error("give at most one of --stdio, --http, --sse, --bot: a bridge relays one server")]
    SeveralServers,
    /// Occurs when `--allow` and `--deny` do not form a valid tool filter.
    #[error("--allow/--deny: {0}")]
    Filter(#[from] FilterOverlap),
    /// Occurs when `--header` is given for a server that is not reached over HTTP.
    #[error("--header applies to --http and --sse servers only")]
    HeaderWithoutHttp,
    /// Occurs when the `--stdio` line or a `--header` cannot describe the server.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// Occurs when the turnscope config cannot be loaded.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Occurs when the one bridge asked for has no endpoint; the text is the placement's
    /// warnings (which variable to set).
    #[error("{0}")]
    NoEndpoint(String),
    /// Occurs when no server flag is given and no config file is found.
    #[error(
        "nothing to relay: give --stdio, --http, --sse or --bot, or a config file (--config FILE, \
         $MCP_CONFIG, ./mcp_config.json or ./turnscope.toml with [[bridges.xiaozhi]])"
    )]
    NothingToRelay,
    /// Occurs when an `mcp_config.json` cannot be read or parsed; the text names the file.
    #[error("{0}")]
    McpJson(String),
    /// Occurs when a server of an `mcp_config.json` breaks a rule.
    #[error("{}: {message}", path.display())]
    InvalidServer {
        /// The file.
        path: PathBuf,
        /// What is wrong, naming the server.
        message: String,
    },
    /// Occurs when `--endpoint` is given with an `mcp_config.json` listing several servers.
    #[error(
        "--endpoint applies to a single server, and {} lists {count}; set `endpoint` per server or \
         MCP_ENDPOINT_<NAME>",
        path.display()
    )]
    EndpointForSeveral {
        /// The file.
        path: PathBuf,
        /// How many servers it lists.
        count: usize,
    },
    /// Occurs when no server of an `mcp_config.json` has an endpoint.
    #[error("{}: no server could be bridged: {warnings}", path.display())]
    NothingBridged {
        /// The file.
        path: PathBuf,
        /// The placement's warnings, joined.
        warnings: String,
    },
    /// Occurs when a turnscope TOML has no `[[bridges.xiaozhi]]` entry.
    #[error(
        "{}: no [[bridges.xiaozhi]] entry; add one (name, endpoint, servers) or use --stdio/--http/--sse/--bot",
        path.display()
    )]
    NoBridges {
        /// The file.
        path: PathBuf,
    },
    /// Occurs when `--endpoint` is given with a turnscope TOML (its bridges name their own).
    #[error(
        "--endpoint applies to --stdio/--http/--sse/--bot or a one-server mcp_config.json; set `endpoint` in {}",
        path.display()
    )]
    EndpointWithToml {
        /// The file.
        path: PathBuf,
    },
}

/// What `turnscope bridge xiaozhi` is asked to do. The binary fills it from its command line.
#[derive(Debug, Clone, Default)]
pub struct RelayOptions {
    /// The endpoint URL, `wss://…/mcp/?token=…` (default: `$MCP_ENDPOINT_<NAME>`, then
    /// `$MCP_ENDPOINT`). Applies to a single bridge only.
    pub endpoint: Option<String>,
    /// Relay the stdio MCP server started by this command line.
    pub stdio: Option<String>,
    /// Relay the streamable HTTP MCP server at this URL.
    pub http: Option<String>,
    /// Relay the legacy SSE MCP server at this URL.
    pub sse: Option<String>,
    /// Relay the bot itself (its `start`/`chat` tools), in the main mode.
    pub bot: bool,
    /// The bridge's name (in logs, and for `$MCP_ENDPOINT_<NAME>`).
    pub name: String,
    /// Offer only these tools (empty = all).
    pub allow: Vec<String>,
    /// Never offer nor call these tools (deny wins).
    pub deny: Vec<String>,
    /// Extra request headers for HTTP and SSE servers, each `Name: value`.
    pub headers: Vec<String>,
}

/// One relay to an MCP server, ready to start.
#[derive(Debug, Clone, PartialEq)]
pub struct Relay {
    /// The bridge's name.
    pub name: String,
    /// Its endpoint.
    pub endpoint: Endpoint,
    /// The server.
    pub server: McpServerConfig,
    /// The tool filter.
    pub filter: ToolFilter,
}

impl Relay {
    /// Starts its upstream and returns the bridge, ready to spawn.
    pub fn build(self, settings: &BridgeSettings) -> XiaozhiBridge {
        let upstream = mcp_upstream(&self.name, self.server, UpstreamSettings::default());
        XiaozhiBridge {
            name: self.name,
            endpoint: self.endpoint,
            upstream: Arc::new(upstream),
            filter: self.filter,
            settings: settings.clone(),
        }
    }
}

/// What to run.
#[derive(Debug)]
pub enum Plan {
    /// Relays to MCP servers.
    Relays(Vec<Relay>),
    /// The main mode (bot + HTTP server) with these bridges in its config.
    App(Box<Config>),
}

/// Decides what `turnscope bridge xiaozhi` runs. Returns the plan and warnings (skipped
/// bridges, shared endpoints) to show.
///
/// # Errors
///
/// Conflicting or missing flags, an unreadable or invalid config, or no bridge left to run.
pub fn plan(
    args: &RelayOptions,
    config_flag: Option<&Path>,
    overrides: &Overrides,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(Plan, Vec<String>), RelayError> {
    let servers = [
        args.stdio.is_some(),
        args.http.is_some(),
        args.sse.is_some(),
        args.bot,
    ];
    if servers.iter().filter(|given| **given).count() > 1 {
        return Err(RelayError::SeveralServers);
    }
    let filter = ToolFilter {
        allow: args.allow.clone(),
        deny: args.deny.clone(),
    };
    filter.check()?;
    let headers = header_flags(&args.headers)?;
    if !headers.is_empty() && args.http.is_none() && args.sse.is_none() {
        return Err(RelayError::HeaderWithoutHttp);
    }
    let spec = if let Some(line) = &args.stdio {
        Some(ServerSpec::stdio_line(line)?)
    } else if let Some(url) = &args.http {
        Some(ServerSpec::Http {
            url: url.clone(),
            headers: headers.clone(),
        })
    } else {
        args.sse.as_ref().map(|url| ServerSpec::Sse {
            url: url.clone(),
            headers: headers.clone(),
        })
    };
    if let Some(spec) = spec {
        let server = spec.into_config(&args.name);
        let (placed, warnings) = place(
            vec![(args.name.clone(), args.endpoint.clone(), server)],
            env,
        );
        let relays: Vec<Relay> = placed
            .into_iter()
            .map(|p| Relay {
                name: p.name,
                endpoint: p.endpoint,
                server: p.item,
                filter: filter.clone(),
            })
            .collect();
        if relays.is_empty() {
            return Err(RelayError::NoEndpoint(warnings.join("; ")));
        }
        return Ok((Plan::Relays(relays), Vec::new()));
    }
    if args.bot {
        let mut config = Config::load(config_flag, overrides)?.0;
        config.bridges.xiaozhi = vec![XiaozhiEntry {
            name: args.name.clone(),
            endpoint: args.endpoint.clone(),
            servers: vec![BOT.to_string()],
            tools: filter,
        }];
        let (placed, warnings) = place(vec![(args.name.clone(), args.endpoint.clone(), ())], env);
        if placed.is_empty() {
            return Err(RelayError::NoEndpoint(warnings.join("; ")));
        }
        return Ok((Plan::App(Box::new(config)), warnings));
    }
    let path = config_path(config_flag, env).ok_or(RelayError::NothingToRelay)?;
    if is_json(&path) {
        let servers: Vec<_> = read_mcp_json(&path)
            .map_err(RelayError::McpJson)?
            .into_iter()
            .filter(|s| !s.server.disabled)
            .collect();
        let configs: Vec<_> = servers.iter().map(|s| s.server.clone()).collect();
        validate_servers(&configs).map_err(|message| RelayError::InvalidServer {
            path: path.clone(),
            message,
        })?;
        if args.endpoint.is_some() && servers.len() != 1 {
            return Err(RelayError::EndpointForSeveral {
                path,
                count: servers.len(),
            });
        }
        let wanted = servers
            .into_iter()
            .map(|s| {
                let endpoint = args.endpoint.clone().or(s.endpoint.clone());
                (s.server.name.clone(), endpoint, s.server)
            })
            .collect();
        let (placed, warnings) = place(wanted, env);
        let relays: Vec<Relay> = placed
            .into_iter()
            .map(|p| Relay {
                name: p.name,
                endpoint: p.endpoint,
                filter: p.item.tool_filter.clone().unwrap_or_default(),
                server: p.item,
            })
            .collect();
        if relays.is_empty() {
            return Err(RelayError::NothingBridged {
                path,
                warnings: warnings.join("; "),
            });
        }
        return Ok((Plan::Relays(relays), warnings));
    }
    let (config, _) = Config::load(Some(&path), overrides)?;
    if config.bridges.xiaozhi.is_empty() {
        return Err(RelayError::NoBridges { path });
    }
    if args.endpoint.is_some() {
        return Err(RelayError::EndpointWithToml { path });
    }
    Ok((Plan::App(Box::new(config)), Vec::new()))
}

fn is_json(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
        || std::fs::read_to_string(path).is_ok_and(|t| t.trim_start().starts_with('{'))
}

fn config_path(flag: Option<&Path>, env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(p) = flag {
        return Some(p.to_path_buf());
    }
    if let Some(p) = env("MCP_CONFIG").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    ["mcp_config.json", "turnscope.toml"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The options of `turnscope bridge xiaozhi LINE…` (the flags this module's tests use).
    fn args(line: &[&str]) -> (RelayOptions, Option<PathBuf>) {
        let mut a = RelayOptions {
            name: "xiaozhi".into(),
            ..RelayOptions::default()
        };
        let mut words = line.iter().skip(2).copied();
        while let Some(flag) = words.next() {
            let mut value = || words.next().expect("a value after the flag").to_string();
            match flag {
                "--endpoint" => a.endpoint = Some(value()),
                "--stdio" => a.stdio = Some(value()),
                "--http" => a.http = Some(value()),
                "--sse" => a.sse = Some(value()),
                "--bot" => a.bot = true,
                "--name" => a.name = value(),
                "--deny" => a.deny.push(value()),
                "--header" => a.headers.push(value()),
                other => panic!("no such flag in these tests: {other}"),
            }
        }
        (a, None)
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn a_stdio_relay_from_flags() {
        let (a, cfg) = args(&[
            "bridge",
            "xiaozhi",
            "--endpoint",
            "ws://h/mcp/?token=s",
            "--stdio",
            "python3 'my server.py'",
            "--deny",
            "rm",
        ]);
        let (plan, _) = plan(&a, cfg.as_deref(), &Overrides::default(), &no_env).unwrap();
        let Plan::Relays(relays) = plan else { panic!() };
        assert_eq!(relays.len(), 1);
        assert_eq!(
            crate::mcp::spec::label(&relays[0].server),
            "stdio: python3 my server.py"
        );
        assert!(!relays[0].filter.admits("rm"));
        assert_eq!(relays[0].endpoint.shown(), "ws://h/mcp/?token=***");
    }

    #[test]
    fn server_flags_exclude_each_other_and_need_an_endpoint() {
        let (two, _) = args(&[
            "bridge",
            "xiaozhi",
            "--stdio",
            "a",
            "--http",
            "http://h/mcp",
        ]);
        assert!(
            plan(&two, None, &Overrides::default(), &no_env).is_err(),
            "one server at a time"
        );
        let (a, cfg) = args(&["bridge", "xiaozhi", "--http", "http://h/mcp"]);
        let e = plan(&a, cfg.as_deref(), &Overrides::default(), &no_env)
            .unwrap_err()
            .to_string();
        assert!(e.contains("MCP_ENDPOINT_XIAOZHI"), "{e}");
        let env = |k: &str| (k == "MCP_ENDPOINT").then(|| "wss://h/mcp/?token=t".to_string());
        assert!(matches!(
            plan(&a, None, &Overrides::default(), &env).unwrap().0,
            Plan::Relays(_)
        ));
        let (a, _) = args(&["bridge", "xiaozhi", "--stdio", "x", "--header", "A: b"]);
        assert!(plan(&a, None, &Overrides::default(), &env).is_err());
    }

    #[test]
    fn bot_mode_runs_the_app_with_one_bridge() {
        let (a, cfg) = args(&[
            "bridge",
            "xiaozhi",
            "--bot",
            "--endpoint",
            "ws://h/?token=t",
            "--name",
            "home",
        ]);
        let (plan, _) = plan(&a, cfg.as_deref(), &Overrides::default(), &no_env).unwrap();
        let Plan::App(config) = plan else { panic!() };
        assert_eq!(config.bridges.xiaozhi[0].name, "home");
        assert_eq!(config.bridges.xiaozhi[0].servers, [BOT]);
    }

    #[test]
    fn config_files_json_and_toml() {
        let dir = std::env::temp_dir().join(format!("turnscope-xz-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let json = dir.join("mcp_config.json");
        std::fs::write(
            &json,
            r#"{"mcpServers": {"a": {"command": "x", "endpoint": "ws://h/?token=1"}, "b": {"url": "http://h/mcp"}}}"#,
        )
        .unwrap();
        let (a, _) = args(&["bridge", "xiaozhi"]);
        let (plan1, warnings) = plan(&a, Some(&json), &Overrides::default(), &no_env).unwrap();
        let Plan::Relays(relays) = plan1 else {
            panic!()
        };
        assert_eq!(relays.len(), 1);
        assert_eq!(relays[0].name, "a");
        assert!(warnings[0].contains("MCP_ENDPOINT_B"), "{warnings:?}");
        let (with_endpoint, _) = args(&["bridge", "xiaozhi", "--endpoint", "ws://h/"]);
        assert!(plan(&with_endpoint, Some(&json), &Overrides::default(), &no_env).is_err());

        let toml = dir.join("turnscope.toml");
        std::fs::write(
            &toml,
            "[[bridges.xiaozhi]]\nname = \"b\"\nservers = [\"@bot\"]\n",
        )
        .unwrap();
        assert!(matches!(
            plan(&a, Some(&toml), &Overrides::default(), &no_env)
                .unwrap()
                .0,
            Plan::App(_)
        ));
        std::fs::write(&toml, "[server]\nport = 0\n").unwrap();
        assert!(plan(&a, Some(&toml), &Overrides::default(), &no_env).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
