//! `turnscope bench bridge`: what the OpenAI bridge itself costs. A standalone bridge (`--http`)
//! fronts the fixture MCP server on loopback (`turnscope-dev fixture-server`, a child process); a direct MCP `tools/call`, the same call through
//! `POST /v1/execute`, and `GET /v1/tools` are timed one call each per iteration, so drift hits
//! them alike. Rows give p50/p95/p99 in ms and the bridge's overhead against a 0.3 ms target.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

use crate::bench::BenchClient;
use turnscope::bridge::openai::standalone;
use turnscope::bridge::openai::standalone::StandaloneOptions;
use turnscope::observe::Bus;

/// The overhead the bridge aims to stay under, in milliseconds.
pub const TARGET_OVERHEAD_MS: f64 = 0.3;

/// Calls made on each path before timing starts.
const WARMUP: usize = 200;

/// Runs the benchmark with `calls` timed calls per path and prints its rows.
///
/// # Errors
/// The fixture, the bridge or a call failed.
pub async fn run(calls: usize) -> anyhow::Result<()> {
    let (mut fixture, url) = fixture_child().await?;
    let direct = BenchClient::connect(&url)
        .await
        .context("connecting to the fixture")?;
    let args = StandaloneOptions {
        http: Some(url),
        port: 0,
        auth_token: Some("bench".into()),
        ..StandaloneOptions::default()
    };
    let bridge = standalone::start(&args, Bus::default()).await?;
    let base = bridge.base_url();
    let http = reqwest::Client::builder().tcp_nodelay(true).build()?;
    let execute_url = format!("{base}/v1/execute");
    let tools_url = format!("{base}/v1/tools");
    let body = json!({"name": "add", "arguments": {"a": 1, "b": 2}}).to_string();

    let mut samples = [Vec::new(), Vec::new(), Vec::new()];
    for i in 0..WARMUP + calls.max(1) {
        let started = Instant::now();
        let (text, is_error) = direct.call("add", json!({"a": 1, "b": 2})).await?;
        let direct_took = started.elapsed();
        anyhow::ensure!(!is_error && text == "3", "direct call failed: {text}");

        let started = Instant::now();
        let answer: Value = http
            .post(&execute_url)
            .bearer_auth("bench")
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await?
            .json()
            .await?;
        let execute_took = started.elapsed();
        anyhow::ensure!(
            answer["is_error"] == false && answer["text"] == "3",
            "bridge call failed: {answer}"
        );

        let started = Instant::now();
        let listed = http
            .get(&tools_url)
            .bearer_auth("bench")
            .send()
            .await?
            .bytes()
            .await?;
        let tools_took = started.elapsed();
        anyhow::ensure!(listed.len() > 2, "empty tool listing");

        if i >= WARMUP {
            samples[0].push(direct_took);
            samples[1].push(execute_took);
            samples[2].push(tools_took);
        }
    }
    let paths = [
        "mcp tools/call add (direct, rmcp streamable HTTP)",
        "POST /v1/execute add (bridge -> same upstream)",
        "GET /v1/tools (bridge, cached)",
    ];
    let mut p50s = Vec::new();
    for (path, mut taken) in paths.iter().zip(samples) {
        taken.sort();
        let ms = |q: f64| round3(percentile(&taken, q).as_secs_f64() * 1000.0);
        p50s.push(ms(0.5));
        println!(
            "{}",
            json!({
                "bench": "bridge",
                "path": path,
                "calls": taken.len(),
                "p50_ms": ms(0.5),
                "p95_ms": ms(0.95),
                "p99_ms": ms(0.99),
            })
        );
    }
    let overhead = round3(p50s[1] - p50s[0]);
    println!(
        "{}",
        json!({
            "bench": "bridge",
            "overhead_p50_ms": overhead,
            "target_ms": TARGET_OVERHEAD_MS,
            "under_target": overhead < TARGET_OVERHEAD_MS,
            "build": if cfg!(debug_assertions) { "debug" } else { "release" },
        })
    );
    direct.close().await;
    bridge.shutdown().await;
    let _ = fixture.kill().await;
    Ok(())
}

/// The fixture MCP server on a free loopback port, in a child process; its URL from the ready
/// line (`turnscope fixture ready: http://127.0.0.1:PORT/mcp`).
async fn fixture_child() -> anyhow::Result<(tokio::process::Child, String)> {
    let tool = super::child::dev_tool("bench bridge")?;
    let mut child = tokio::process::Command::new(&tool)
        .args(["fixture-server", "--http", "0"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {} fixture-server", tool.display()))?;
    let stdout = child.stdout.take().context("the fixture's stdout")?;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let ready = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .context("the fixture printed no ready line within 20 s")??
        .context("the fixture exited before its ready line")?;
    let url = ready
        .split_whitespace()
        .last()
        .filter(|u| u.starts_with("http://"))
        .with_context(|| format!("no URL in the fixture's ready line {ready:?}"))?
        .to_string();
    Ok((child, url))
}

fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}
