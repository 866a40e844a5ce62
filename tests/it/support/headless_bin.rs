//! The real binary in `--headless` mode with a config file and `--events`, in a scratch
//! directory of its own (started, read and signalled through [`super::binary`]).

use std::path::PathBuf;
use std::process::Stdio;

use tokio::process::Child;

pub use super::binary::WAIT;
use super::binary::{ready_line, serving, signal, url_in};
use super::scratch::Scratch;

/// A running `turnscope --headless`.
pub struct Headless {
    /// The child (killed on drop).
    pub child: Child,
    /// The MCP endpoint from the ready line.
    pub url: String,
    /// The ready line.
    pub ready: String,
    /// The `--events` file.
    pub events: PathBuf,
    /// The scratch directory (config, events), removed when this is dropped (after the child,
    /// which is declared first, is killed).
    _dir: Scratch,
}

impl Headless {
    /// Starts the binary with `config` (TOML) and `--events`, in a fresh scratch directory
    /// named after `name`, with `env` set; waits for the ready line.
    pub async fn start(name: &str, config: &str, env: &[(&str, &str)]) -> Self {
        let dir = Scratch::new(name);
        let config_path = dir.file("turnscope.toml", config);
        let events = dir.join("events.jsonl");
        let mut command = serving(&["--headless", "--port", "0", "--config"]);
        command
            .arg(&config_path)
            .arg("--events")
            .arg(&events)
            .env_remove("OPENAI_API_KEY")
            .env_remove("OPENAI_BASE_URL")
            .stderr(Stdio::null());
        for (k, v) in env {
            command.env(k, v);
        }
        let mut child = command.spawn().unwrap();
        let ready = ready_line(&mut child).await;
        let url = url_in(&ready, "/mcp");
        Self {
            child,
            url,
            ready,
            events,
            _dir: dir,
        }
    }

    /// The child's pid.
    pub fn pid(&self) -> u32 {
        self.child.id().expect("the child runs")
    }

    /// `/healthz` of the child.
    pub fn health_url(&self) -> String {
        self.url.replace("/mcp", "/healthz")
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        signal(&self.child, "TERM");
    }

    /// Waits (up to [`WAIT`]) for the exit.
    pub async fn exit(&mut self) -> std::process::ExitStatus {
        tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("the process exits")
            .unwrap()
    }

    /// The `--events` file's text so far.
    pub fn events_text(&self) -> String {
        std::fs::read_to_string(&self.events).unwrap_or_default()
    }
}
