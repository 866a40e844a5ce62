//! A turnscope server in a child process, for benches that watch a server from outside (the
//! soak and idle-memory shapes): headless, or with its console drawn into a 160×48
//! pseudo-terminal that this process reads and discards as a person's terminal would. The
//! server's own figures (memory, descriptors, tasks) come from its `/healthz`, so the
//! bench's clients never count against it.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde_json::Value;
use tokio::io::AsyncReadExt;
use tokio::process::Child;
use tokio::task::JoinHandle;

use turnscope::observe::process::ProcessStats;

/// How long the child may take to answer `/healthz` after it is spawned.
const START_BUDGET: Duration = Duration::from_secs(30);

/// A running server child; killed when dropped.
pub struct ServerChild {
    /// Its MCP endpoint.
    pub mcp_url: String,
    health_url: String,
    http: reqwest::Client,
    child: Child,
    drain: Option<JoinHandle<()>>,
    dir: PathBuf,
}

impl ServerChild {
    /// Starts `turnscope` on the embedded model at zero pace, with room for `sessions`
    /// sessions that never expire during the bench, headless or with its console.
    pub async fn start(sessions: usize, console: bool) -> anyhow::Result<Self> {
        let exe = std::env::current_exe().context("finding the turnscope binary")?;
        // A fresh directory, so a turnscope.toml or themes/ where the bench runs is not used.
        let dir = std::env::temp_dir().join(format!(
            "turnscope-bench-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let port = free_port()?;
        let mut args = vec![
            "--port".to_string(),
            port.to_string(),
            "--pace".into(),
            "0".into(),
            "--sessions".into(),
            (sessions + 8).to_string(),
            "--handle-seconds".into(),
            "86400".into(),
            // Benches keep sessions in memory unless a bench says otherwise.
            "--store".into(),
            "memory".into(),
        ];
        let (child, drain) = if console {
            let (pty, pts) = pty_process::open().context("opening a pseudo-terminal")?;
            pty.resize(pty_process::Size::new(48, 160))
                .context("sizing the pseudo-terminal")?;
            let child = pty_process::Command::new(&exe)
                .args(&args)
                .current_dir(&dir)
                .env("TERM", "xterm-256color")
                .env_remove("OPENAI_API_KEY")
                .env_remove("OPENAI_BASE_URL")
                .kill_on_drop(true)
                .spawn(pts)
                .context("starting turnscope in a pseudo-terminal")?;
            let (mut reader, writer) = pty.into_split();
            let drain = tokio::spawn(async move {
                let _writer = writer;
                let mut buf = vec![0u8; 64 * 1024];
                while matches!(reader.read(&mut buf).await, Ok(n) if n > 0) {}
            });
            (child, Some(drain))
        } else {
            args.push("--headless".into());
            let child = tokio::process::Command::new(&exe)
                .args(&args)
                .current_dir(&dir)
                .env_remove("OPENAI_API_KEY")
                .env_remove("OPENAI_BASE_URL")
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .context("starting turnscope --headless")?;
            (child, None)
        };
        let mut server = Self {
            mcp_url: format!("http://127.0.0.1:{port}/mcp"),
            health_url: format!("http://127.0.0.1:{port}/healthz"),
            http: reqwest::Client::new(),
            child,
            drain,
            dir,
        };
        server.wait_until_healthy().await?;
        Ok(server)
    }

    async fn wait_until_healthy(&mut self) -> anyhow::Result<()> {
        let started = Instant::now();
        loop {
            if self.health().await.is_ok() {
                return Ok(());
            }
            if let Some(status) = self.child.try_wait()? {
                bail!("the server child exited before it was ready ({status})");
            }
            if started.elapsed() > START_BUDGET {
                bail!(
                    "the server child did not answer {} within {:?}",
                    self.health_url,
                    START_BUDGET
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The child's `/healthz` answer.
    pub async fn health(&self) -> anyhow::Result<Value> {
        let answer = self.http.get(&self.health_url).send().await?;
        anyhow::ensure!(
            answer.status().is_success(),
            "/healthz: {}",
            answer.status()
        );
        Ok(answer.json().await?)
    }

    /// The child's open sessions and process figures, from `/healthz`.
    pub async fn sample(&self) -> anyhow::Result<(u64, ProcessStats)> {
        let health = self.health().await?;
        let sessions = health["sessions"].as_u64().unwrap_or(0);
        let p = &health["process"];
        let stats = ProcessStats {
            rss_bytes: p["rss_bytes"].as_u64(),
            open_fds: p["open_fds"].as_u64(),
            threads: p["threads"].as_u64(),
            tasks: p["tasks"].as_u64(),
        };
        Ok((sessions, stats))
    }

    /// Ends the child.
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
        if let Some(drain) = self.drain.take() {
            drain.abort();
        }
    }
}

impl Drop for ServerChild {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A loopback port free right now (the child binds it a moment later).
pub(super) fn free_port() -> anyhow::Result<u16> {
    let listener =
        std::net::TcpListener::bind("127.0.0.1:0").context("finding a free loopback port")?;
    Ok(listener.local_addr()?.port())
}
