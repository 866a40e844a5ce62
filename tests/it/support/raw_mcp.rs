//! A raw MCP 2026-07-28 client over reqwest, as Claude Code speaks it: no session, the revision,
//! capabilities and name in every request's `_meta`, `Mcp-Method` / `Mcp-Name` headers, and,
//! when asked, the tasks extension declared in each request. It reads a JSON answer or an SSE
//! stream (keeping the progress notifications before the answer), and follows tasks with
//! `tasks/get` at the interval the server asks for.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

const REVISION: &str = "2026-07-28";
const TASKS: &str = "io.modelcontextprotocol/tasks";

/// What one request got back.
#[derive(Debug, Clone)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// The JSON-RPC message answering the request (`result` or `error`).
    pub message: Value,
    /// The `notifications/progress` messages that came before it.
    pub progress: Vec<Value>,
}

impl Answer {
    /// The `result`, failing the test on an error.
    pub fn result(&self) -> &Value {
        assert!(
            self.message.get("result").is_some(),
            "expected a result, got HTTP {} {}",
            self.status,
            self.message
        );
        &self.message["result"]
    }

    /// The error's code (`None` for a result).
    pub fn error_code(&self) -> Option<i64> {
        self.message["error"]["code"].as_i64()
    }
}

/// A sessionless client; `tasks` says whether it declares the extension.
pub struct RawMcp {
    url: String,
    http: reqwest::Client,
    name: String,
    tasks: bool,
    next_id: std::sync::atomic::AtomicU64,
    headers: Vec<(&'static str, String)>,
}

impl RawMcp {
    /// A client of `url` called `name`.
    pub fn new(url: &str, name: &str, tasks: bool) -> Self {
        Self {
            url: url.to_string(),
            http: reqwest::Client::new(),
            name: name.to_string(),
            tasks,
            next_id: 1.into(),
            headers: Vec::new(),
        }
    }

    /// The same client sending header `name: value` with every request.
    pub fn with_header(mut self, name: &'static str, value: &str) -> Self {
        self.headers.push((name, value.to_string()));
        self
    }

    /// The `_meta` every request of this client carries.
    pub fn meta(&self) -> Value {
        let capabilities = if self.tasks {
            json!({"extensions": {TASKS: {}}})
        } else {
            json!({})
        };
        json!({
            "io.modelcontextprotocol/protocolVersion": REVISION,
            "io.modelcontextprotocol/clientCapabilities": capabilities,
            "io.modelcontextprotocol/clientInfo": {"name": self.name, "version": "0"},
        })
    }

    /// One request: `method` with `params` (the `_meta` added), `Mcp-Name` set to `name`.
    pub async fn request(&self, method: &str, params: Value, name: Option<&str>) -> Answer {
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut params = params;
        let mut meta = self.meta();
        if let Some(extra) = params.get("_meta").and_then(Value::as_object) {
            for (k, v) in extra {
                meta[k] = v.clone();
            }
        }
        params["_meta"] = meta;
        let mut request = self
            .http
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", REVISION)
            .header("mcp-method", method);
        if let Some(name) = name {
            request = request.header("mcp-name", name);
        }
        for (header, value) in &self.headers {
            request = request.header(*header, value);
        }
        let response = request
            .json(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .send()
            .await
            .expect("the server answers");
        let status = response.status().as_u16();
        let sse = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let text = response.text().await.expect("the answer reads");
        let mut progress = Vec::new();
        let message = if sse {
            let mut answer = Value::Null;
            for event in text.split("\n\n") {
                let data: String = event
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                let Ok(message) = serde_json::from_str::<Value>(&data) else {
                    continue;
                };
                if message["method"] == "notifications/progress" {
                    progress.push(message);
                } else if message["id"] == id {
                    answer = message;
                }
            }
            answer
        } else {
            serde_json::from_str(&text).unwrap_or(json!({"unparsed": text}))
        };
        Answer {
            status,
            message,
            progress,
        }
    }

    /// `tools/call` of `tool` with `arguments` (and a progress token).
    pub async fn call(&self, tool: &str, arguments: Value) -> Answer {
        self.request(
            "tools/call",
            json!({"name": tool, "arguments": arguments, "_meta": {"progressToken": 1}}),
            Some(tool),
        )
        .await
    }

    /// `start`'s handle.
    pub async fn start(&self) -> String {
        let answer = self.call("start", json!({})).await;
        answer.result()["_meta"]["turnscope/start"]["handle"]
            .as_str()
            .expect("start gives a handle")
            .to_string()
    }

    /// `chat` on `handle`.
    pub async fn chat(&self, handle: &str, line: &str) -> Answer {
        self.call("chat", json!({"handle": handle, "line": line}))
            .await
    }

    /// `tasks/get`, with the id in `Mcp-Name` as the extension requires.
    pub async fn get_task(&self, id: &str) -> Answer {
        self.request("tasks/get", json!({"taskId": id}), Some(id))
            .await
    }

    /// `tasks/cancel`.
    pub async fn cancel_task(&self, id: &str) -> Answer {
        self.request("tasks/cancel", json!({"taskId": id}), Some(id))
            .await
    }

    /// Polls task `id` at its `pollIntervalMs` until it is no longer `working` (at most
    /// `bound`); every answer in order.
    pub async fn follow(&self, id: &str, bound: Duration) -> Vec<Value> {
        let deadline = Instant::now() + bound;
        let mut seen = Vec::new();
        loop {
            let answer = self.get_task(id).await;
            let result = answer.result().clone();
            let interval = result["pollIntervalMs"].as_u64().unwrap_or(1000);
            let working = result["status"] == "working";
            seen.push(result);
            if !working {
                return seen;
            }
            assert!(
                Instant::now() < deadline,
                "task still working after {bound:?}: {seen:?}"
            );
            tokio::time::sleep(Duration::from_millis(interval)).await;
        }
    }
}

/// The text of a `CallToolResult`.
pub fn text_of(result: &Value) -> String {
    result["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<String>()
        })
        .unwrap_or_default()
}
