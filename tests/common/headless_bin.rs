//! The real binary in `--headless` mode as a child process: its ready line, MCP URL, pid,
//! and a scratch directory for its config and `--events` file.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;

/// A hang guard for start-up and exit.
pub const WAIT: Duration = Duration::from_secs(20);

/// A running `turnscope --headless`.
pub struct Headless {
    /// The child (killed on drop).
    pub child: Child,
    /// The MCP endpoint from the ready line.
    pub url: String,
    /// The `--events` file.
    pub events: PathBuf,
    /// The scratch directory (config, events).
    pub dir: PathBuf,
}

impl Headless {
    /// Starts the binary with `config` (TOML) and `--events`, in a fresh scratch directory
    /// named after `name`, with `env` set; waits for the ready line.
    pub async fn start(name: &str, config: &str, env: &[(&str, &str)]) -> Self {
        let dir = std::env::temp_dir().join(format!("turnscope-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let config_path = dir.join("turnscope.toml");
        std::fs::write(&config_path, config).unwrap();
        let events = dir.join("events.jsonl");
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_turnscope"));
        command
            .args(["--headless", "--port", "0", "--config"])
            .arg(&config_path)
            .arg("--events")
            .arg(&events)
            .env_remove("OPENAI_API_KEY")
            .env_remove("OPENAI_BASE_URL")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        for (k, v) in env {
            command.env(k, v);
        }
        let mut child = command.spawn().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let ready = tokio::time::timeout(WAIT, lines.next_line())
            .await
            .expect("the ready line comes")
            .unwrap()
            .expect("the binary printed a ready line");
        let url = ready
            .split_whitespace()
            .find(|w| w.starts_with("http://127.0.0.1:") && w.ends_with("/mcp"))
            .unwrap_or_else(|| panic!("no MCP URL in {ready:?}"))
            .to_string();
        // Keep reading stdout so the child never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Self {
            child,
            url,
            events,
            dir,
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
        let status = std::process::Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -TERM");
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

impl Drop for Headless {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
