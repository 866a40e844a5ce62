//! How to reach one MCP server: a [`ServerSpec`] (stdio command, streamable HTTP URL or
//! legacy SSE URL) and the splitting of a `--stdio "<command>"` line into words.
//!
//! No shell is involved: the line is split like a POSIX shell would split it (quotes and
//! backslashes), but nothing is expanded, so `$HOME` stays `$HOME`.

use std::collections::BTreeMap;

use super::redact::redact;

/// One MCP server to relay to.
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
    /// The server an `[[mcp_servers]]` entry (or an `mcpServers` JSON entry) describes, its
    /// values as written (placeholders are not expanded).
    pub fn from_config(server: &crate::config::McpServerConfig) -> Self {
        use crate::config::TransportKind;
        match server.transport_kind() {
            TransportKind::Stdio => Self::Stdio {
                command: server.command.clone().unwrap_or_default(),
                args: server.args.clone(),
                env: server.env.clone(),
            },
            TransportKind::Http => Self::Http {
                url: server.url.clone().unwrap_or_default(),
                headers: server.headers.clone(),
            },
            TransportKind::Sse => Self::Sse {
                url: server.url.clone().unwrap_or_default(),
                headers: server.headers.clone(),
            },
        }
    }

    /// A stdio server from a command line such as `npx -y @scope/server "a b"`.
    ///
    /// # Errors
    ///
    /// The line is empty or has an unterminated quote.
    pub fn stdio_line(line: &str) -> Result<Self, String> {
        let mut words = split_command(line)?.into_iter();
        let command = words
            .next()
            .ok_or("--stdio: the command is empty; give the server's command line")?;
        Ok(Self::Stdio {
            command,
            args: words.collect(),
            env: BTreeMap::new(),
        })
    }

    /// A short description for logs: `stdio: cmd args`, `http: URL` or `sse: URL`, with
    /// secrets in URLs masked. Environment values and headers are never shown.
    pub fn label(&self) -> String {
        match self {
            Self::Stdio { command, args, .. } => {
                let mut s = format!("stdio: {command}");
                for a in args {
                    s.push(' ');
                    s.push_str(a);
                }
                redact(&s).into_owned()
            }
            Self::Http { url, .. } => format!("http: {}", redact(url)),
            Self::Sse { url, .. } => format!("sse: {}", redact(url)),
        }
    }
}

/// Splits a command line into words: whitespace separates words, `'…'` keeps its content
/// as is, `"…"` keeps its content with `\"`, `\\`, `\$` and `` \` `` unescaped, and a
/// backslash outside quotes keeps the next character.
///
/// # Errors
///
/// An unterminated quote or a trailing lone backslash.
pub fn split_command(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err(format!("unterminated ' quote in command {line:?}")),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => word.push(c),
                            Some(c) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => {
                                return Err(format!("unterminated \" quote in command {line:?}"));
                            }
                        },
                        Some(c) => word.push(c),
                        None => return Err(format!("unterminated \" quote in command {line:?}")),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some(c) => word.push(c),
                    None => return Err(format!("trailing backslash in command {line:?}")),
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_like_a_shell_without_expanding() {
        assert_eq!(
            split_command(r#"npx -y "@scope/server x" 'a  b' c\ d "q\"uote" $HOME ''"#).unwrap(),
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
            split_command("  python3   server.py  ").unwrap(),
            ["python3", "server.py"]
        );
        assert!(split_command("").unwrap().is_empty());
        assert!(split_command("a 'b").is_err());
        assert!(split_command("a \"b").is_err());
        assert!(split_command("a \\").is_err());
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
}
