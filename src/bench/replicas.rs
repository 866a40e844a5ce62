//! `bench replicas`: turns/s of MCP clients chatting with 1 and 3 replicas (child processes
//! on the zero-pace embedded model), directly (each client on one replica's URL) and through
//! HAProxy running `examples/haproxy.cfg` (each chat routed by its handle, with the backend
//! lines `turnscope replicas haproxy` prints), runs interleaved. With `--store redis` the
//! same runs alternate between replicas on the memory store and replicas sharing a
//! `redis-server`, two of them: one that syncs its append-only file before each answer
//! (`appendfsync always`, as the README starts it: every acknowledged turn on disk) and one
//! that syncs once a second (`everysec`, Redis's default with `appendonly yes`): rows carry
//! `store` and `fsync`, so the round trips' cost and what per-write durability adds to it
//! read apart. Then the failover time (on the `always` Redis): a
//! replica's SIGKILL to the first answered chat of one of its handles on another replica,
//! through HAProxy running the recipe and its checks. Needs `haproxy` on the PATH (Debian:
//! `apt-get install haproxy`), and `redis-server` for `--store redis`.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt as _, BufReader};
use tokio::process::{Child, Command};

use turnscope::sessions::haproxy::{ReplicaAddr, backend_lines};

use super::cpu::Groups;
use super::{BenchClient, round, row};

/// The recipe docs/replicas.md documents, run as shipped (frontend and servers moved).
const RECIPE: &str = include_str!("../../examples/haproxy.cfg");

/// Where the recipe's generated lines start (they run to its end).
const GENERATED: &str = "    # Printed by `turnscope replicas haproxy";

/// The recipe with its frontend on `port` and its backend's generated lines replaced by those
/// `turnscope replicas haproxy` prints for `replicas`.
fn recipe_for(port: u16, replicas: &[ReplicaAddr]) -> anyhow::Result<String> {
    let cut = RECIPE
        .find(GENERATED)
        .context("examples/haproxy.cfg lost its generated server lines")?;
    let lines = backend_lines(replicas).map_err(anyhow::Error::msg)?;
    Ok(RECIPE[..cut].replace("bind 127.0.0.1:7880", &format!("bind 127.0.0.1:{port}")) + &lines)
}

/// How long a replica or HAProxy may take to come up.
const START_BUDGET: Duration = Duration::from_secs(30);

/// A scratch directory removed on drop.
pub(super) struct Scratch(pub(super) PathBuf);

impl Scratch {
    pub(super) fn new(what: &str) -> anyhow::Result<Self> {
        let dir = std::env::temp_dir().join(format!(
            "turnscope-bench-{what}-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(Self(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One replica: a headless child and its port.
pub(super) struct Replica {
    pub(super) id: String,
    pub(super) port: u16,
    pub(super) child: Child,
    _dir: Scratch,
}

/// The replica `id` as a headless child on the zero-pace embedded model, with room for
/// `sessions`, on `port` (0: any free one), sessions in `store` (`None`: memory).
pub(super) async fn replica(
    id: &str,
    sessions: usize,
    store: Option<&str>,
    port: u16,
) -> anyhow::Result<Replica> {
    let exe = std::env::current_exe().context("finding the turnscope binary")?;
    let dir = Scratch::new("replica")?;
    let config = dir.0.join("turnscope.toml");
    std::fs::write(&config, "[model]\nwords = 7\n")?;
    let mut child = Command::new(exe)
        .args([
            "--headless",
            "--port",
            &port.to_string(),
            "--pace",
            "0",
            "--replica-id",
            id,
        ])
        .args(["--sessions", &(sessions + 8).to_string()])
        .args(store.map(|url| ["--store", url]).into_iter().flatten())
        .arg("--config")
        .arg(&config)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("starting a replica")?;
    let mut lines = BufReader::new(child.stdout.take().context("replica stdout")?).lines();
    let line = tokio::time::timeout(START_BUDGET, lines.next_line())
        .await
        .context("replica ready line")??
        .context("the replica exited before its ready line")?;
    let port = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("http://127.0.0.1:"))
        .and_then(|rest| rest.split('/').next())
        .and_then(|p| p.parse().ok())
        .with_context(|| format!("no MCP URL in the ready line {line:?}"))?;
    Ok(Replica {
        id: id.to_string(),
        port,
        child,
        _dir: dir,
    })
}

/// HAProxy over `replicas`, from the shipped recipe.
pub(super) struct Balancer {
    pub(super) url: String,
    child: Child,
    _dir: Scratch,
}

pub(super) async fn balancer(replicas: &[Replica]) -> anyhow::Result<Balancer> {
    let port = super::child::free_port()?;
    let listed: Vec<ReplicaAddr> = replicas
        .iter()
        .map(|r| ReplicaAddr {
            id: r.id.clone(),
            addr: format!("127.0.0.1:{}", r.port),
        })
        .collect();
    let config = recipe_for(port, &listed)?;
    let dir = Scratch::new("haproxy")?;
    let path = dir.0.join("haproxy.cfg");
    std::fs::write(&path, config)?;
    let child = Command::new("haproxy")
        .arg("-db")
        .arg("-f")
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context(
            "starting haproxy; is it installed? (Debian: apt-get install haproxy; see docs/replicas.md)",
        )?;
    // Up when /healthz through it has answered from every replica.
    let http = reqwest::Client::new();
    let health = format!("http://127.0.0.1:{port}/healthz");
    let mut seen = std::collections::HashSet::new();
    let deadline = Instant::now() + START_BUDGET;
    while seen.len() < replicas.len() {
        if Instant::now() > deadline {
            bail!("haproxy did not reach every replica within {START_BUDGET:?} (saw {seen:?})");
        }
        if let Ok(r) = http.get(&health).send().await
            && let Ok(body) = r.json::<serde_json::Value>().await
            && let Some(id) = body["replica"]["id"].as_str()
        {
            seen.insert(id.to_string());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(Balancer {
        url: format!("http://127.0.0.1:{port}/mcp"),
        child,
        _dir: dir,
    })
}

/// `clients` MCP clients (client i on `urls[i % len]`), each saying `turns` lines on its own
/// handle back to back; (turns done, errors, seconds, latencies in ms).
async fn load(
    urls: &[String],
    clients: usize,
    turns: usize,
) -> anyhow::Result<(usize, usize, f64, Vec<f64>)> {
    let mut connected = Vec::with_capacity(clients);
    for i in 0..clients {
        let client = BenchClient::connect(&urls[i % urls.len()]).await?;
        let handle = client.start().await?;
        connected.push((Arc::new(client), handle));
    }
    let started = Instant::now();
    let tasks: Vec<_> = connected
        .iter()
        .map(|(client, handle)| {
            let (client, handle) = (client.clone(), handle.clone());
            tokio::spawn(async move { super::chat_turns(&*client, &handle, turns).await })
        })
        .collect();
    let mut all = Vec::new();
    let mut errors = 0;
    for task in tasks {
        let (latencies, e) = task.await.context("a client task panicked")?;
        all.extend(latencies);
        errors += e;
    }
    let seconds = started.elapsed().as_secs_f64();
    for (client, _) in connected {
        if let Ok(client) = Arc::try_unwrap(client) {
            client.close().await;
        }
    }
    Ok((all.len(), errors, seconds, all))
}

/// Which stores `bench replicas` compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchStore {
    /// Each replica keeps its sessions in memory (the default).
    Memory,
    /// The memory store and a shared `redis-server` (started by the bench on a free loopback
    /// port), with `appendfsync always` and with `everysec`, alternately in the same run;
    /// then the failover time.
    Redis,
}

/// Replicas of one store and the balancer over them, with the URLs clients use.
struct Cluster {
    /// The shared Redis's URL and `appendfsync`; none for the memory store.
    redis: Option<(String, Fsync)>,
    direct: Vec<String>,
    through: Vec<String>,
    /// The processes a turn runs in: the bench's clients, the replicas, HAProxy, and Redis
    /// for the shared store.
    cpu: Groups,
    _replicas: Vec<Replica>,
    _lb: Balancer,
}

async fn cluster(
    count: usize,
    sessions: usize,
    redis: Option<(&RedisChild, Fsync)>,
) -> anyhow::Result<Cluster> {
    let url = redis.map(|(r, _)| r.url.as_str());
    let mut replicas = Vec::new();
    for i in 1..=count {
        replicas.push(replica(&format!("r{i}"), sessions, url, 0).await?);
    }
    let lb = balancer(&replicas).await?;
    let mut cpu = Groups::default()
        .with("clients", [Some(std::process::id())])
        .with("replicas", replicas.iter().map(|r| r.child.id()))
        .with("haproxy", [lb.child.id()]);
    if let Some((redis, _)) = redis {
        cpu = cpu.with("redis", [redis.child.id()]);
    }
    Ok(Cluster {
        redis: redis.map(|(child, fsync)| (child.url.clone(), fsync)),
        cpu,
        direct: replicas
            .iter()
            .map(|r| format!("http://127.0.0.1:{}/mcp", r.port))
            .collect(),
        through: vec![lb.url.clone()],
        _replicas: replicas,
        _lb: lb,
    })
}

/// Rows: one per run, store and path, then one summary per replica count, store and path
/// (median turns/s); with the Redis store, each Redis's turns/s as a share of memory's per
/// replica count and path, and one failover row per run and their summary.
pub async fn run(
    clients: usize,
    turns: usize,
    runs: usize,
    store: BenchStore,
) -> anyhow::Result<()> {
    let mut redis = Vec::new();
    if store == BenchStore::Redis {
        for fsync in [Fsync::Always, Fsync::EverySec] {
            redis.push((RedisChild::start(fsync).await?, fsync));
        }
    }
    for count in [1usize, 3] {
        // Every run opens fresh sessions on both paths: room for all of them.
        let room = clients * 2 * runs.max(1);
        let mut clusters = vec![cluster(count, room, None).await?];
        for (child, fsync) in &redis {
            clusters.push(cluster(count, room, Some((child, *fsync))).await?);
        }
        let mut rates = vec![Vec::new(); clusters.len() * 2];
        for run in 0..runs.max(1) {
            // Which store goes first swaps run by run, so a machine that speeds up or slows
            // down in the middle of a run favours neither.
            let mut order: Vec<usize> = (0..clusters.len()).collect();
            if run % 2 == 1 {
                order.reverse();
            }
            let paths = order.into_iter().flat_map(|c| {
                let cluster = &clusters[c];
                [("direct", &cluster.direct), ("haproxy", &cluster.through)]
                    .into_iter()
                    .enumerate()
                    .map(move |(p, (path, urls))| (c * 2 + p, cluster, path, urls))
            });
            for (k, cluster, path, urls) in paths {
                // Redis's count is read outside the CPU window: the reading is not the load's.
                let rewrites_before = aof_rewrites(cluster.redis_url()).await;
                let cpu_before = cluster.cpu.read();
                let (done, errors, seconds, mut latencies) = load(urls, clients, turns).await?;
                let cpu = cluster
                    .cpu
                    .per_turn_ms(&cpu_before, &cluster.cpu.read(), done);
                let rewrites = aof_rewrites(cluster.redis_url())
                    .await
                    .zip(rewrites_before)
                    .map(|(after, before)| after.saturating_sub(before));
                latencies.sort_by(f64::total_cmp);
                let pct = |q: f64| {
                    latencies
                        .get(((latencies.len() as f64 - 1.0) * q) as usize)
                        .copied()
                        .unwrap_or(0.0)
                };
                let rate = done as f64 / seconds;
                rates[k].push(rate);
                let mut run_row = json!({
                    "bench": "replicas",
                    "replicas": count,
                    "store": cluster.store(),
                    "path": path,
                    "run": run + 1,
                    "clients": clients,
                    "turns": done,
                    "errors": errors,
                    "seconds": round(seconds, 3),
                    "turns_per_second": round(rate, 1),
                    "p50_ms": round(pct(0.5), 3),
                    "p99_ms": round(pct(0.99), 3),
                    "cpu_ms_per_turn": cpu,
                });
                cluster.name_fsync(&mut run_row);
                if let Some(rewrites) = rewrites {
                    // Each rewrite forks Redis and writes the whole data set: a cost that
                    // lands in the run it happens in, and explains a slow one.
                    run_row["aof_rewrites"] = json!(rewrites);
                }
                row(run_row);
            }
        }
        let paths = clusters
            .iter()
            .flat_map(|c| ["direct", "haproxy"].map(|path| (c, path)));
        for (k, (cluster, path)) in paths.enumerate() {
            let mut r = rates[k].clone();
            r.sort_by(f64::total_cmp);
            let mut summary = json!({
                "bench": "replicas_summary",
                "replicas": count,
                "store": cluster.store(),
                "path": path,
                "runs": r.len(),
            });
            cluster.name_fsync(&mut summary);
            summary[super::of_runs(r.len(), "turns_per_second")] = json!(round(r[r.len() / 2], 1));
            if r.len() > 1 {
                summary["min"] = json!(round(r[0], 1));
                summary["max"] = json!(round(r[r.len() - 1], 1));
            }
            row(summary);
        }
        for (c, cluster) in clusters.iter().enumerate().skip(1) {
            for (p, path) in ["direct", "haproxy"].into_iter().enumerate() {
                let mut share = share_row(count, path, &rates[p], &rates[c * 2 + p]);
                cluster.name_fsync(&mut share);
                row(share);
            }
        }
    }
    if let Some((redis, fsync)) = redis.first() {
        let mut times = Vec::new();
        for run in 0..runs.max(1) {
            let ms = failover(&redis.url).await?;
            row(
                json!({"bench": "replicas_failover", "store": "redis", "fsync": fsync.name(), "run": run + 1, "failover_ms": round(ms, 1)}),
            );
            times.push(ms);
        }
        times.sort_by(f64::total_cmp);
        let mut summary = json!({"bench": "replicas_failover_summary", "store": "redis", "fsync": fsync.name(), "runs": times.len()});
        summary[super::of_runs(times.len(), "failover_ms")] =
            json!(round(times[times.len() / 2], 1));
        summary["max_ms"] = json!(round(times[times.len() - 1], 1));
        row(summary);
    }
    Ok(())
}

/// How many times the Redis at `url` rewrote its append-only file so far (`INFO
/// persistence`); none for no Redis, or when it does not say.
async fn aof_rewrites(url: Option<&str>) -> Option<u64> {
    let client = redis::Client::open(url?).ok()?;
    let mut conn = client.get_multiplexed_async_connection().await.ok()?;
    let info: String = redis::cmd("INFO")
        .arg("persistence")
        .query_async(&mut conn)
        .await
        .ok()?;
    info.lines()
        .find_map(|line| line.strip_prefix("aof_rewrites:"))
        .and_then(|n| n.trim().parse().ok())
}

impl Cluster {
    /// `memory` or `redis`, as rows name the store.
    fn store(&self) -> &'static str {
        if self.redis.is_some() {
            "redis"
        } else {
            "memory"
        }
    }

    /// The shared Redis's URL, if there is one.
    fn redis_url(&self) -> Option<&str> {
        self.redis.as_ref().map(|(url, _)| url.as_str())
    }

    /// Adds the Redis's `fsync` to a row (nothing for the memory store).
    fn name_fsync(&self, row: &mut serde_json::Value) {
        if let Some((_, fsync)) = &self.redis {
            row["fsync"] = json!(fsync.name());
        }
    }
}

/// `replicas_share`: Redis's turns/s over memory's, paired run by run (the two stores' runs of
/// one round, measured back to back): the median and range of the pairs.
fn share_row(count: usize, path: &str, memory: &[f64], redis: &[f64]) -> serde_json::Value {
    let mut shares: Vec<f64> = memory
        .iter()
        .zip(redis)
        .filter(|(m, _)| **m > 0.0)
        .map(|(m, r)| r / m)
        .collect();
    shares.sort_by(f64::total_cmp);
    let mut share = json!({
        "bench": "replicas_share",
        "replicas": count,
        "path": path,
        "runs": shares.len(),
    });
    if let (Some(min), Some(max)) = (shares.first(), shares.last()) {
        share[super::of_runs(shares.len(), "redis_over_memory")] =
            json!(round(super::median(&shares), 3));
        if shares.len() > 1 {
            share["min"] = json!(round(*min, 3));
            share["max"] = json!(round(*max, 3));
        }
    }
    share
}

/// How long one chat attempt after the kill may take before the next one.
const ATTEMPT: Duration = Duration::from_secs(5);

/// How long the failover may take in all before the bench gives up.
const GIVE_UP: Duration = Duration::from_secs(60);

/// How a benched Redis syncs its append-only file (`appendfsync`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fsync {
    /// Before it answers a write: every acknowledged turn is on disk (docs/replicas.md).
    Always,
    /// Once a second: a Redis crash may lose the last second of acknowledged turns.
    EverySec,
}

impl Fsync {
    /// The `appendfsync` value.
    pub(super) fn name(self) -> &'static str {
        match self {
            Fsync::Always => "always",
            Fsync::EverySec => "everysec",
        }
    }
}

/// A `redis-server` on a free loopback port, as docs/replicas.md starts it (`appendonly yes`,
/// with `fsync` as given), its data in a scratch folder; killed on drop.
pub(super) struct RedisChild {
    /// `redis://127.0.0.1:PORT/0`.
    pub(super) url: String,
    child: Child,
    _dir: Scratch,
}

impl RedisChild {
    /// Starts it and waits for its `PONG`.
    pub(super) async fn start(fsync: Fsync) -> anyhow::Result<Self> {
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
            .args(["--appendonly", "yes", "--appendfsync", fsync.name()])
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
            child,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_share_pairs_each_run_with_the_memory_run_of_its_round() {
        // Pairs 0.5, 1.0 and 0.9: a ratio of medians (190 / 200) would say 0.95.
        let share = share_row(1, "direct", &[200.0, 100.0, 300.0], &[100.0, 100.0, 270.0]);
        assert_eq!(share["median_redis_over_memory"], json!(0.9));
        assert_eq!(
            (share["min"].clone(), share["max"].clone()),
            (json!(0.5), json!(1.0))
        );
        let one = share_row(3, "haproxy", &[100.0], &[80.0]);
        assert_eq!(one["redis_over_memory"], json!(0.8));
        assert!(one.get("min").is_none());
    }

    #[test]
    fn the_recipe_ends_with_what_the_command_prints_for_its_replicas() {
        let shipped: Vec<ReplicaAddr> = [
            "r1=127.0.0.1:7871",
            "r2=127.0.0.1:7872",
            "r3=127.0.0.1:7873",
        ]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
        let cut = RECIPE.find(GENERATED).expect("generated lines");
        assert_eq!(RECIPE[cut..], backend_lines(&shipped).unwrap());
        let moved = recipe_for(9999, &shipped[..2]).unwrap();
        assert!(moved.contains("bind 127.0.0.1:9999") && !moved.contains(":7873"));
        assert!(moved.ends_with(&backend_lines(&shipped[..2]).unwrap()));
    }
}
