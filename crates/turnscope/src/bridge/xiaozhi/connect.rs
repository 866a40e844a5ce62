//! Opening an MCP client session from a [`ServerSpec`]: rmcp's `TokioChildProcess` for
//! stdio, `StreamableHttpClientTransport` for streamable HTTP and the project's
//! `SseClientTransport` for legacy SSE. The streamable HTTP client resumes a broken
//! response stream only a few times (the tool sources' policy,
//! `tools::stream_resume_policy`), so a server that dies mid-call fails the call at once.
//!
//! A stdio child inherits the bridge's environment with the spec's `env` laid over it, is
//! killed if the bridge drops it, and has its stderr copied line by line to the log
//! (target `turnscope::bridge::xiaozhi::child`, secrets masked).

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::Arc;

use axum::http::{HeaderName, HeaderValue};
use rmcp::ServiceExt;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{ConfigureCommandExt, StreamableHttpClientTransport, TokioChildProcess};
use tokio::io::AsyncBufReadExt;

use super::mcp_upstream::{
    McpUpstream, OPEN_TIMEOUT, Opened, Opener, RelayClient, UpstreamSettings,
};
use super::redact::redact;
use super::spec::ServerSpec;
use crate::tools::sse_client::SseClientTransport;

/// An [`McpUpstream`] for `spec`, started now; `name` labels the child's log lines.
pub fn mcp_upstream(name: &str, spec: ServerSpec, settings: UpstreamSettings) -> McpUpstream {
    McpUpstream::start(spec.label(), opener(name, spec), settings)
}

/// The [`Opener`] for `spec`.
pub fn opener(name: &str, spec: ServerSpec) -> Opener {
    let name: Arc<str> = Arc::from(name);
    let spec = Arc::new(spec);
    Arc::new(move |handler: RelayClient| {
        let spec = spec.clone();
        let name = name.clone();
        Box::pin(async move { open(&name, &spec, handler).await })
    })
}

async fn open(name: &str, spec: &ServerSpec, handler: RelayClient) -> Result<Opened, String> {
    match spec {
        ServerSpec::Stdio { command, args, env } => {
            let cmd = tokio::process::Command::new(command).configure(|c| {
                c.args(args).envs(env).kill_on_drop(true);
            });
            let (transport, stderr) = TokioChildProcess::builder(cmd)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| format!("cannot run {command:?}: {e}; check the command and PATH"))?;
            let pid = transport.id();
            if let Some(stderr) = stderr {
                let name = name.to_string();
                tokio::spawn(async move {
                    let mut lines = tokio::io::BufReader::new(stderr).lines();
                    while let Ok(Some(line)) = lines.next_line().await {
                        let line = strip_ansi(&line);
                        tracing::info!(target: "turnscope::bridge::xiaozhi::child", bridge = %name, "{}", redact(&line));
                    }
                });
            }
            let service = handler
                .serve(transport)
                .await
                .map_err(|e| format!("MCP handshake failed: {e}"))?;
            Ok(Opened { service, pid })
        }
        ServerSpec::Http { url, headers } => {
            let mut custom = HashMap::new();
            for (k, v) in headers {
                let name = HeaderName::try_from(k.as_str())
                    .map_err(|e| format!("header name {k:?}: {e}"))?;
                let value = HeaderValue::try_from(v.as_str())
                    .map_err(|e| format!("header {k}: invalid value: {e}"))?;
                custom.insert(name, value);
            }
            let mut config =
                StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(custom);
            // Capped, so a call in flight to a server that died fails instead of waiting on
            // a stream rmcp would resume forever.
            config.retry_config = crate::tools::stream_resume_policy();
            let transport = StreamableHttpClientTransport::from_config(config);
            let service = handler
                .serve(transport)
                .await
                .map_err(|e| format!("MCP handshake with {} failed: {e}", redact(url)))?;
            Ok(Opened { service, pid: None })
        }
        ServerSpec::Sse { url, headers } => {
            let headers: Vec<(String, String)> = headers
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let transport = SseClientTransport::connect(url, &headers, OPEN_TIMEOUT)
                .await
                .map_err(|e| e.to_string())?;
            let service = handler
                .serve(transport)
                .await
                .map_err(|e| format!("MCP handshake with {} failed: {e}", redact(url)))?;
            Ok(Opened { service, pid: None })
        }
    }
}

/// `line` without ANSI escape sequences (`ESC [ … letter`): children often colour their logs
/// even into a pipe, and the log line should read as text.
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn ansi_sequences_are_stripped() {
        assert_eq!(
            super::strip_ansi("\u{1b}[2mtime\u{1b}[0m \u{1b}[33m WARN\u{1b}[0m text [x]"),
            "time  WARN text [x]"
        );
    }
}
