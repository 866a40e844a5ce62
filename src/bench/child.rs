//! A turnscope server in a child process, for benches that watch a server from outside (the
//! soak and idle-memory shapes): headless, or with its console drawn into a 160×48
//! pseudo-terminal that `turnscope-dev pty` reads and discards as a person's terminal would
//! (the `turnscope` binary links no pseudo-terminal library). The server's own figures
//! (memory, descriptors, tasks) come from its `/healthz`, so the bench's clients never count
//! against it. [`dev_tool`] finds `turnscope-dev` for this and for the bridge bench's fixture.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde_json::Value;
use tokio::process::Child;

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
    /// The console's keyboard: the pseudo-terminal driver's stdin, which it types into the
    /// terminal (none when headless).
    keys: Option<tokio::process::ChildStdin>,
    /// Whether the server runs under the pseudo-terminal driver (its child) or is the child.
    console: bool,
    dir: PathBuf,
}

/// How a [`ServerChild`] is started beyond its session room and console.
#[derive(Debug, Clone, Default)]
pub struct ChildOptions {
    /// The binary to run (default: this one), for a bench comparing two builds.
    pub exe: Option<PathBuf>,
    /// Exact words per plain answer of the embedded model (`[model] words`).
    pub words: Option<usize>,
    /// How much of each model or MCP message events record (`--wire-kib`; 0: none).
    pub wire_kib: Option<u64>,
}

impl ServerChild {
    /// Starts `turnscope` on the embedded model at zero pace, with room for `sessions`
    /// sessions that never expire during the bench, headless or with its console.
    pub async fn start(sessions: usize, console: bool) -> anyhow::Result<Self> {
        Self::start_with(sessions, console, &ChildOptions::default()).await
    }

    /// [`ServerChild::start`] with `options`: another binary, a reply length, the wire limit.
    pub async fn start_with(
        sessions: usize,
        console: bool,
        options: &ChildOptions,
    ) -> anyhow::Result<Self> {
        let exe = match &options.exe {
            Some(exe) => exe.clone(),
            None => std::env::current_exe().context("finding the turnscope binary")?,
        };
        // A fresh directory, so a turnscope.toml or themes/ where the bench runs is not used.
        let dir = std::env::temp_dir().join(format!(
            "turnscope-bench-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        if let Some(words) = options.words {
            // Read as ./turnscope.toml from the child's working directory.
            std::fs::write(
                dir.join("turnscope.toml"),
                format!("[model]\nwords = {words}\n"),
            )
            .context("writing the child's turnscope.toml")?;
        }
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
        if let Some(kib) = options.wire_kib {
            args.extend(["--wire-kib".into(), kib.to_string()]);
        }
        let mut child = if console {
            let driver = dev_tool("--console")?;
            tokio::process::Command::new(&driver)
                .args(["pty", "--rows", "48", "--cols", "160", "--"])
                .arg(&exe)
                .args(&args)
                .current_dir(&dir)
                .env("TERM", "xterm-256color")
                .env_remove("OPENAI_API_KEY")
                .env_remove("OPENAI_BASE_URL")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .context("starting turnscope-dev pty with turnscope in it")?
        } else {
            args.push("--headless".into());
            tokio::process::Command::new(&exe)
                .args(&args)
                .current_dir(&dir)
                .env_remove("OPENAI_API_KEY")
                .env_remove("OPENAI_BASE_URL")
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .context("starting turnscope --headless")?
        };
        let keys = child.stdin.take();
        let mut server = Self {
            mcp_url: format!("http://127.0.0.1:{port}/mcp"),
            health_url: format!("http://127.0.0.1:{port}/healthz"),
            http: reqwest::Client::new(),
            child,
            keys,
            console,
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

    /// The server's process id: the child's, or with a console the driver's one child (read
    /// from `/proc/PID/task/*/children`, Linux only).
    pub fn pid(&self) -> Option<u32> {
        let own = self.child.id()?;
        if !self.console {
            return Some(own);
        }
        let tasks = std::fs::read_dir(format!("/proc/{own}/task")).ok()?;
        tasks.flatten().find_map(|task| {
            std::fs::read_to_string(task.path().join("children"))
                .ok()?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
    }

    /// Types `bytes` into the console's terminal (an error when the child is headless).
    pub async fn type_keys(&mut self, bytes: &[u8]) -> anyhow::Result<()> {
        use tokio::io::AsyncWriteExt;
        let keys = self
            .keys
            .as_mut()
            .context("the server child runs headless: it has no terminal to type into")?;
        keys.write_all(bytes).await?;
        keys.flush().await?;
        Ok(())
    }

    /// Ends the child (with a console: the pseudo-terminal driver, which ends the server in it).
    pub async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            // SIGTERM lets the driver end the server in its terminal; SIGKILL if it does not.
            let _ = std::process::Command::new("kill")
                .arg(pid.to_string())
                .status();
            if tokio::time::timeout(Duration::from_secs(5), self.child.wait())
                .await
                .is_ok()
            {
                return;
            }
        }
        let _ = self.child.kill().await;
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

/// The `turnscope-dev` binary next to this one (`cargo build` builds both), which holds what
/// `turnscope` does not ship: the pseudo-terminal driver and the fixture MCP server. `need`
/// names what asked for it, for the error.
pub(super) fn dev_tool(need: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("finding the turnscope binary")?;
    let tool = exe.with_file_name(format!("turnscope-dev{}", std::env::consts::EXE_SUFFIX));
    if !tool.is_file() {
        bail!(
            "{need} needs turnscope-dev, the repository's tool binary, next to this one ({}); \
             build it with `cargo build --release --bin turnscope-dev` (a plain `cargo build --release` \
             in the repository builds both)",
            tool.display()
        );
    }
    Ok(tool)
}
