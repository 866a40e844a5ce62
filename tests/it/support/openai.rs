//! Helpers for the OpenAI bridge tests: an `App` serving the embedded bridge on loopback,
//! JSON requests, and a reader for streamed chat completions.

use std::sync::Arc;

use serde_json::Value;
use turnscope::app::App;
use turnscope::config::Config;
use turnscope::config::McpServerConfig;
use turnscope::observe::Bus;
use turnscope::tools::Tools;

use super::fixture::WAIT;

/// A running app and the base URL of its HTTP server (`http://127.0.0.1:PORT`).
pub struct Served {
    pub app: App,
    pub base: String,
    pub http: reqwest::Client,
}

impl Served {
    /// `base` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// GET `path` as JSON.
    pub async fn get(&self, path: &str) -> (u16, Value) {
        let response = tokio::time::timeout(WAIT, self.http.get(self.url(path)).send())
            .await
            .expect("GET answers within the wait")
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// POST `body` (raw bytes) to `path`; the answer as JSON.
    pub async fn post_raw(&self, path: &str, body: impl Into<reqwest::Body>) -> (u16, Value) {
        let request = self
            .http
            .post(self.url(path))
            .header("content-type", "application/json")
            .body(body);
        let response = tokio::time::timeout(WAIT, request.send())
            .await
            .expect("POST answers within the wait")
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// POST a JSON value to `path`.
    pub async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.post_raw(path, body.to_string()).await
    }

    /// `/v1/execute` with `name` and `arguments`; panics unless HTTP 200.
    pub async fn execute(&self, name: &str, arguments: Value) -> Value {
        let (status, answer) = self
            .post(
                "/v1/execute",
                &serde_json::json!({"name": name, "arguments": arguments}),
            )
            .await;
        assert_eq!(status, 200, "{answer}");
        answer
    }

    /// The names `/v1/tools` lists, in order.
    pub async fn tool_names(&self) -> Vec<String> {
        let (status, tools) = self.get("/v1/tools").await;
        assert_eq!(status, 200);
        function_names(&tools)
    }

    /// A streamed chat completion: every `data:` payload, `[DONE]` as a string.
    pub async fn stream(&self, body: &Value) -> Vec<Value> {
        let response = tokio::time::timeout(
            WAIT,
            self.http
                .post(self.url("/v1/chat/completions"))
                .json(body)
                .send(),
        )
        .await
        .unwrap()
        .unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(
            response.headers()["content-type"],
            "text/event-stream",
            "a stream is server-sent events"
        );
        let text = tokio::time::timeout(WAIT, response.text())
            .await
            .expect("the stream ends within the wait")
            .unwrap();
        text.split("\n\n")
            .filter(|e| !e.trim().is_empty())
            .map(|e| {
                let data = e.trim().strip_prefix("data: ").expect("data events only");
                serde_json::from_str(data).unwrap_or_else(|_| Value::String(data.to_string()))
            })
            .collect()
    }

    pub async fn stop(self) {
        self.app.shutdown().await;
    }
}

/// A config on a free port; the model at `model_url` (else the embedded one, no pacing),
/// and these MCP servers.
pub fn config(model_url: Option<String>, servers: Vec<McpServerConfig>) -> Config {
    let mut config = Config::default();
    config.server.port = 0;
    config.model.url = model_url;
    config.model.pace = 0.0;
    config.mcp_servers = servers;
    config
}

/// Starts an app from `config` (its registry from `config.mcp_servers`), or with `tools`.
pub async fn serve(config: Config, tools: Option<Arc<dyn Tools>>, bus: Bus) -> Served {
    let app = tokio::time::timeout(WAIT, async {
        match tools {
            Some(tools) => App::start_with_tools(&config, bus, tools).await,
            None => App::start(&config, bus).await,
        }
    })
    .await
    .expect("the app starts within the wait")
    .expect("the app starts");
    let base = app.server.mcp_url().trim_end_matches("/mcp").to_string();
    Served {
        app,
        base,
        http: reqwest::Client::new(),
    }
}

/// The text of a streamed answer and its last finish reason.
pub fn streamed_text(events: &[Value]) -> (String, Option<String>) {
    let mut text = String::new();
    let mut finish = None;
    for e in events {
        if let Some(piece) = e
            .pointer("/choices/0/delta/content")
            .and_then(Value::as_str)
        {
            text.push_str(piece);
        }
        if let Some(f) = e
            .pointer("/choices/0/finish_reason")
            .and_then(Value::as_str)
        {
            finish = Some(f.to_string());
        }
    }
    (text, finish)
}

/// The function names in a `/v1/tools` answer, in order.
pub fn function_names(tools: &Value) -> Vec<String> {
    tools
        .as_array()
        .unwrap_or_else(|| panic!("not a tools array: {tools}"))
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect()
}
