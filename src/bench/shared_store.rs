//! `bench replicas --store redis`: a `redis-server` child for the replicas to share, and the
//! failover time: from a replica's `kill -9` to the first answered chat of one of its handles
//! on another replica, through HAProxy running the shipped recipe and its checks.

use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use tokio::io::AsyncWriteExt as _;
use tokio::process::{Child, Command};

use super::BenchClient;
use super::replicas::{Scratch, balancer, replica};

/// How long one chat attempt after the kill may take before the next one.
const ATTEMPT: Duration = Duration::from_secs(5);

/// How long the failover may take in all before the bench gives up.
const GIVE_UP: Duration = Duration::from_secs(60);

/// A `redis-server` on a free loopback port, as docs/replicas.md starts it (every write in
/// its append-only log before it answers), its data in a scratch folder; killed on drop.
pub(super) struct RedisChild {
    /// `redis://127.0.0.1:PORT/0`.
    pub(super) url: String,
    _child: Child,
    _dir: Scratch,
}

impl RedisChild {
    /// Starts it and waits for its `PONG`.
    pub(super) async fn start() -> anyhow::Result<Self> {
        let port = super::child::free_port()?;
        let dir = Scratch::new("redis")?;
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .args(["--appendonly", "yes", "--appendfsync", "always"])
            .arg("--dir")
            .arg(&dir.0)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context(
                "starting redis-server; is it installed? (Debian: apt-get install redis-server)",
            )?;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if ping(port).await {
                break;
            }
            if Instant::now() > deadline {
                bail!("redis-server on port {port} never answered PING within 10 s");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(Self {
            url: format!("redis://127.0.0.1:{port}/0"),
            _child: child,
            _dir: dir,
        })
    }
}

async fn ping(port: u16) -> bool {
    use tokio::io::AsyncReadExt as _;
    let Ok(mut s) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        return false;
    };
    let mut buf = [0u8; 7];
    s.write_all(b"PING\r\n").await.is_ok()
        && s.read_exact(&mut buf).await.is_ok()
        && &buf == b"+PONG\r\n"
}

/// Three replicas sharing `redis_url` behind HAProxy: a handle started and chatted on through
/// the balancer, its replica killed with SIGKILL, then chats on the handle through the
/// balancer (a new MCP client per attempt, as a client whose connection broke makes) until
/// one is answered. Milliseconds from the kill to that answer.
pub(super) async fn failover(redis_url: &str) -> anyhow::Result<f64> {
    let mut replicas = Vec::new();
    for i in 1..=3 {
        replicas.push(replica(&format!("f{i}"), 16, Some(redis_url), 0).await?);
    }
    let lb = balancer(&replicas).await?;
    let client = BenchClient::connect(&lb.url).await?;
    let handle = client.start().await?;
    client.chat(&handle, "before the kill").await?;
    client.close().await;
    let owner = replicas
        .iter_mut()
        .find(|r| handle.ends_with(&turnscope::sessions::Replica::new(r.id.clone()).tag()))
        .context("no replica's tag ends the handle")?;
    let killed = Instant::now();
    owner
        .child
        .start_kill()
        .context("kill -9 of the handle's replica")?;
    loop {
        if killed.elapsed() > GIVE_UP {
            bail!("no chat on the killed replica's handle was answered within {GIVE_UP:?}");
        }
        let attempt = async {
            let client = BenchClient::connect(&lb.url).await?;
            let answered = client.chat(&handle, "after the kill").await;
            client.close().await;
            answered
        };
        if let Ok(Ok(_)) = tokio::time::timeout(ATTEMPT, attempt).await {
            return Ok(killed.elapsed().as_secs_f64() * 1000.0);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
