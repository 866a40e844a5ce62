//! How to reach one MCP server. The client stack connects to a [`McpServerConfig`] (the
//! `[[mcp_servers]]` entry type); [`ServerSpec`] is the transport alone, as the Xiaozhi flags
//! (`--stdio/--http/--sse`) and `mcp_config.json` give it, and `ServerSpec::into_config`
//! makes it an entry. `--stdio` lines are split into words by POSIX shell quoting (quotes,
//! backslashes) but nothing is expanded (`$HOME` stays `$HOME`); no shell ever runs.

use std::collections::BTreeMap;

use crate::config::{McpServerConfig, TransportKind};
use crate::observe::redact::redact;

/// Why the server flags (`--stdio`, `--header`) cannot describe a server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// Occurs when the line has no words at all.
    #[error("--stdio: the command is empty; give the server's command line")]
    EmptyCommand,
    /// Occurs when a `'` or `"` quote is not closed before the line ends.
    #[error(
        "--stdio: a quote is not closed in the command {line:?}; close it or escape it with `\\`"
    )]
    UnterminatedQuote {
        /// The whole line.
        line: String,
    },
    /// Occurs when a `--header` value has no `:`.
    #[error("--header {0:?}: expected `Name: value`")]
    Header(String),
}

/// The transport of one MCP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerSpec {
    /// A child process speaking MCP on stdin/stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Extra environment, laid over the bridge's own.
        env: BTreeMap<String, String>,
    },
    /// A streamable HTTP server.
    Http {
        /// Its MCP URL.
        url: String,
        /// Extra request headers.
        headers: BTreeMap<String, String>,
    },
    /// A legacy (2024-11-05) HTTP+SSE server.
    Sse {
        /// Its SSE URL.
        url: String,
        /// Extra request headers.
        headers: BTreeMap<String, String>,
    },
}

impl ServerSpec {
    /// A stdio server from a command line such as `npx -y @scope/server "a b"`, split into
    /// words by POSIX shell quoting rules (`shell_words::split`): quotes and backslashes are
    /// removed, a word starting with `#` starts a comment, nothing is expanded.
    ///
    /// # Errors
    ///
    /// The line is empty or has an unterminated quote.
    pub(crate) fn stdio_line(line: &str) -> Result<Self, SpecError> {
        let words = shell_words::split(line)
            .map_err(|_| SpecError::UnterminatedQuote { line: line.into() })?;
        let mut words = words.into_iter();
        let command = words.next().ok_or(SpecError::EmptyCommand)?;
        Ok(Self::Stdio {
            command,
            args: words.collect(),
            env: BTreeMap::new(),
        })
    }

    /// The config entry `name` for this server (call timeout and filter at their defaults:
    /// the Xiaozhi bridge filters and times calls itself).
    pub(crate) fn into_config(self, name: &str) -> McpServerConfig {
        match self {
            Self::Stdio { command, args, env } => {
                let mut config = McpServerConfig::stdio(name, &command, &[]);
                config.args = args;
                config.env = env;
                config
            }
            Self::Http { url, headers } => {
                let mut config = McpServerConfig::http(name, &url);
                config.headers = headers;
                config
            }
            Self::Sse { url, headers } => {
                let mut config = McpServerConfig::sse(name, &url);
                config.headers = headers;
                config
            }
        }
    }

    /// A short description for logs: `stdio: cmd args`, `http: URL` or `sse: URL`, with
    /// secrets in URLs masked. Environment values and headers are never shown.
    pub fn label(&self) -> String {
        label(&self.clone().into_config(""))
    }
}

impl From<ServerSpec> for McpServerConfig {
    /// The entry for this server, its name left empty (the user names it).
    fn from(spec: ServerSpec) -> Self {
        spec.into_config("")
    }
}

/// A short description of `config` for logs, as [`ServerSpec::label`].
pub fn label(config: &McpServerConfig) -> String {
    let url = config.url.as_deref().unwrap_or_default();
    match config.transport_kind() {
        TransportKind::Stdio => {
            let mut s = format!("stdio: {}", config.command.as_deref().unwrap_or_default());
            for a in &config.args {
                s.push(' ');
                s.push_str(a);
            }
            redact(&s).into_owned()
        }
        TransportKind::Http => format!("http: {}", redact(url)),
        TransportKind::Sse => format!("sse: {}", redact(url)),
    }
}

/// The `--header` flags (`Name: value` each) as a map, names and values trimmed.
///
/// # Errors
///
/// A header without `:`.
pub(crate) fn header_flags(raw: &[String]) -> Result<BTreeMap<String, String>, SpecError> {
    raw.iter()
        .map(|h| {
            let (k, v) = h
                .split_once(':')
                .ok_or_else(|| SpecError::Header(h.clone()))?;
            Ok((k.trim().to_string(), v.trim().to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Result<Vec<String>, SpecError> {
        match ServerSpec::stdio_line(line)? {
            ServerSpec::Stdio { command, args, .. } => {
                Ok(std::iter::once(command).chain(args).collect())
            }
            other => panic!("not stdio: {other:?}"),
        }
    }

    #[test]
    fn splits_like_a_shell_without_expanding() {
        assert_eq!(
            words(r#"npx -y "@scope/server x" 'a  b' c\ d "q\"uote" $HOME ''"#).unwrap(),
            [
                "npx",
                "-y",
                "@scope/server x",
                "a  b",
                "c d",
                "q\"uote",
                "$HOME",
                ""
            ]
        );
        assert_eq!(
            words("  python3   server.py  ").unwrap(),
            ["python3", "server.py"]
        );
        assert_eq!(words(""), Err(SpecError::EmptyCommand));
        assert_eq!(words("# only a comment"), Err(SpecError::EmptyCommand));
        assert_eq!(words("srv --x # note").unwrap(), ["srv", "--x"]);
        assert_eq!(words("a \\").unwrap(), ["a", "\\"]);
        let err = words("a 'b").unwrap_err();
        assert_eq!(
            err,
            SpecError::UnterminatedQuote {
                line: "a 'b".into()
            }
        );
        assert!(err.to_string().contains("\"a 'b\""), "{err}");
        assert!(words("a \"b").is_err());
    }

    #[test]
    fn stdio_line_and_labels() {
        let spec = ServerSpec::stdio_line("uvx mcp-server-time --local-timezone UTC").unwrap();
        assert_eq!(
            spec.label(),
            "stdio: uvx mcp-server-time --local-timezone UTC"
        );
        assert!(ServerSpec::stdio_line("   ").is_err());
        let http = ServerSpec::Http {
            url: "https://h/mcp?token=abc".into(),
            headers: BTreeMap::from([("Authorization".into(), "Bearer s".into())]),
        };
        assert_eq!(http.label(), "http: https://h/mcp?token=***");
    }

    #[test]
    fn a_spec_becomes_the_config_entry_the_stack_connects_to() {
        let stdio = ServerSpec::Stdio {
            command: "uvx".into(),
            args: vec!["srv".into()],
            env: BTreeMap::from([("K".into(), "v".into())]),
        };
        let config = stdio.clone().into_config("time");
        assert_eq!(config.name, "time");
        assert_eq!(config.transport_kind(), TransportKind::Stdio);
        assert_eq!(config.command.as_deref(), Some("uvx"));
        assert_eq!(config.args, ["srv"]);
        assert_eq!(config.env["K"], "v");
        assert_eq!(label(&config), stdio.label());
        let sse = ServerSpec::Sse {
            url: "http://h/sse".into(),
            headers: BTreeMap::from([("X".into(), "y".into())]),
        };
        let config = sse.into_config("s");
        assert_eq!(config.transport_kind(), TransportKind::Sse);
        assert_eq!(config.headers["X"], "y");
    }
}
