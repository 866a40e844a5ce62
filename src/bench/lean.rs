//! A lean MCP client for `bench load`: the streamable HTTP exchange spoken directly over one
//! shared reqwest client (`initialize`, `notifications/initialized`, `tools/call`, `DELETE`
//! at the end), each answer read from the response's SSE events with one small parse.
//!
//! Why not rmcp's client here (`bench::client`, which the other benches use): it runs a
//! service task, channels and a general message deserializer per request, and on two cores
//! it was about 40 % of a load run's CPU, so `bench load` measured its own clients nearly as
//! much as the server. A load generator should cost little beside what it loads (as wrk and
//! h2load do); no crate offers a minimal MCP client, so this one is written here. It still
//! checks what it reads: the answer must carry the request's id, and a JSON-RPC error or a
//! result marked `isError` counts as a failed turn.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use serde::Deserialize;
use serde_json::json;
use serde_json::value::RawValue;

use super::client::TurnClient;

/// The protocol version the client asks for (the server may answer another; its answer is
/// what later requests carry).
const PROTOCOL: &str = "2025-11-25";
const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
const ACCEPT_BOTH: &str = "application/json, text/event-stream";

/// The HTTP client the lean MCP clients of one run share: kept-alive connections, or a new
/// connection for every request (no idle connection kept).
pub(crate) fn http_client(kept_alive: bool) -> anyhow::Result<reqwest::Client> {
    let builder = reqwest::Client::builder().pool_idle_timeout(Duration::from_secs(4));
    let builder = if kept_alive {
        builder
    } else {
        builder.pool_max_idle_per_host(0)
    };
    builder
        .build()
        .context("building the lean bench client's HTTP client")
}

/// One MCP session spoken directly over HTTP.
pub(crate) struct LeanClient {
    http: reqwest::Client,
    url: String,
    session: HeaderValue,
    version: HeaderValue,
    next_id: AtomicU64,
}

/// What a `tools/call` answered.
struct ToolAnswer {
    text: String,
    is_error: bool,
    handle: Option<String>,
}

/// One JSON-RPC message of an answer, as far as the bench reads it.
#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(default)]
    result: Option<CallResult>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct CallResult {
    #[serde(default)]
    content: Vec<Content>,
    #[serde(default, rename = "isError")]
    is_error: bool,
    #[serde(default, rename = "_meta")]
    meta: Option<Meta>,
    #[serde(default, rename = "protocolVersion")]
    protocol_version: Option<String>,
}

#[derive(Deserialize)]
struct Content {
    #[serde(default)]
    text: String,
}

#[derive(Deserialize)]
struct Meta {
    #[serde(default, rename = "turnscope/start")]
    start: Option<StartMeta>,
}

#[derive(Deserialize)]
struct StartMeta {
    handle: String,
}

impl LeanClient {
    /// Opens an MCP session on `url` (initialize, then the initialized notification).
    pub(crate) async fn connect(http: &reqwest::Client, url: &str) -> anyhow::Result<Self> {
        let body = json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "turnscope-bench-lean", "version": env!("CARGO_PKG_VERSION")}
            }
        });
        let response = http
            .post(url)
            .header(ACCEPT, ACCEPT_BOTH)
            .header(CONTENT_TYPE, "application/json")
            .body(body.to_string())
            .send()
            .await
            .with_context(|| format!("initialize at {url}"))?;
        let status = response.status();
        let session = response
            .headers()
            .get(SESSION_HEADER)
            .cloned()
            .with_context(|| {
                format!("initialize at {url} answered {status} without an {SESSION_HEADER} header")
            })?;
        let body = response
            .bytes()
            .await
            .context("reading initialize's answer")?;
        let version = answer_to(&body, "0")?
            .result
            .and_then(|r| r.protocol_version)
            .unwrap_or_else(|| PROTOCOL.to_string());
        let client = Self {
            http: http.clone(),
            url: url.to_string(),
            session,
            version: HeaderValue::from_str(&version).context("the server's protocol version")?,
            next_id: AtomicU64::new(1),
        };
        let initialized = client
            .request(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_string())
            .send()
            .await
            .context("notifications/initialized")?;
        anyhow::ensure!(
            initialized.status().is_success(),
            "notifications/initialized answered {}",
            initialized.status()
        );
        Ok(client)
    }

    fn request(&self, body: String) -> reqwest::RequestBuilder {
        self.http
            .post(&self.url)
            .header(ACCEPT, ACCEPT_BOTH)
            .header(CONTENT_TYPE, "application/json")
            .header(SESSION_HEADER, self.session.clone())
            .header(VERSION_HEADER, self.version.clone())
            .body(body)
    }

    /// `tools/call` of `name` with `arguments` (a JSON object's text).
    async fn call(&self, name: &str, arguments: &str) -> anyhow::Result<ToolAnswer> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{name}","arguments":{arguments}}}}}"#
        );
        let response = self
            .request(body)
            .send()
            .await
            .with_context(|| format!("tools/call {name}"))?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .with_context(|| format!("reading tools/call {name}'s answer"))?;
        anyhow::ensure!(
            status.is_success(),
            "tools/call {name} answered {status}: {}",
            String::from_utf8_lossy(&body[..body.len().min(200)])
        );
        let result = answer_to(&body, &id.to_string())?
            .result
            .with_context(|| format!("tools/call {name}'s answer has no result"))?;
        Ok(ToolAnswer {
            text: result
                .content
                .into_iter()
                .map(|c| c.text)
                .next()
                .unwrap_or_default(),
            is_error: result.is_error,
            handle: result.meta.and_then(|m| m.start).map(|s| s.handle),
        })
    }

    /// Ends the MCP session (`DELETE`), so the server sees it go while it still runs.
    pub(crate) async fn close(self) {
        let _ = self
            .http
            .delete(&self.url)
            .header(SESSION_HEADER, self.session)
            .header(VERSION_HEADER, self.version)
            .send()
            .await;
    }
}

impl TurnClient for LeanClient {
    async fn start(&self) -> anyhow::Result<String> {
        let answer = self.call("start", "{}").await?;
        match answer.handle {
            Some(handle) if !answer.is_error => Ok(handle),
            _ => anyhow::bail!("start failed: {}", answer.text),
        }
    }

    async fn chat(&self, handle: &str, line: &str) -> anyhow::Result<String> {
        let arguments = json!({"handle": handle, "line": line}).to_string();
        let answer = self.call("chat", &arguments).await?;
        anyhow::ensure!(!answer.is_error, "chat failed: {}", answer.text);
        anyhow::ensure!(!answer.text.is_empty(), "chat gave an empty reply");
        Ok(answer.text)
    }
}

/// The message answering request `id` in a response body: a JSON body, or the `data:` lines
/// of an SSE stream (notifications and other messages before it are passed over). A JSON-RPC
/// error is an error.
fn answer_to<'a>(body: &'a [u8], id: &str) -> anyhow::Result<Message<'a>> {
    let text = std::str::from_utf8(body).context("the answer is not UTF-8")?;
    let trimmed = text.trim_start();
    let mut messages: Box<dyn Iterator<Item = &str>> = if trimmed.starts_with('{') {
        Box::new(std::iter::once(trimmed))
    } else {
        Box::new(text.lines().filter_map(|line| {
            line.strip_prefix("data:")
                .map(str::trim_start)
                .filter(|data| !data.is_empty())
        }))
    };
    messages
        .find_map(|data| {
            let message: Message = serde_json::from_str(data).ok()?;
            (message.id.map(RawValue::get) == Some(id)).then_some(message)
        })
        .with_context(|| {
            let shown: String = text.chars().take(200).collect();
            format!("no answer to request {id} in: {shown}")
        })
        .and_then(|message| match message.error {
            Some(error) => anyhow::bail!("request {id} failed: {}", error.get()),
            None => Ok(message),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_is_found_among_sse_events_by_its_id() {
        let body: &[u8] =
            b"id: 0\nretry: 3000\ndata:\n\n\
              data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n\
              data: {\"jsonrpc\":\"2.0\",\"id\":6,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"six\"}]}}\n\n\
              data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"hi\"}],\"isError\":true}}\n\n";
        let message = answer_to(body, "7").unwrap();
        let result = message.result.unwrap();
        assert_eq!(result.content[0].text, "hi");
        assert!(result.is_error);
        assert!(answer_to(body, "8").is_err());
    }

    #[test]
    fn a_json_rpc_error_is_an_error_and_a_json_body_is_read_whole() {
        let error: &[u8] =
            br#"{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"no such tool"}}"#;
        let failed = answer_to(error, "3").err().unwrap().to_string();
        assert!(failed.contains("no such tool"), "{failed}");
        let json: &[u8] = br#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18"}}"#;
        let result = answer_to(json, "0").unwrap().result.unwrap();
        assert_eq!(result.protocol_version.as_deref(), Some("2025-06-18"));
    }
}
