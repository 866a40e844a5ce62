//! `turnscope bench`: benchmarks as commands that print one JSON row per measurement. Each
//! [`run`] lists what each [`Shape`] measures; rows compare only on the same machine.

mod bridge;
mod child;
mod console;
mod console_memory;
mod cpu;
mod replicas;
pub mod soak;
mod store;
mod test_cases;
mod viewers;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use async_trait::async_trait;
use clap::{Args, ValueEnum};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use turnscope::app::App;
use turnscope::config::Config;
use turnscope::observe::Bus;
use turnscope::pipeline::{Frame, FrameBody, Link, Observer, Pipeline, Processor};
use turnscope::server::mcp_text::text_of;
use turnscope::tools::{FnTool, Toolbox, Tools};

/// What to measure. The doc line of each is its entry in `turnscope bench --help`: the shapes
/// in [`DEFAULT_SHAPES`] say "default", the others "only when named" and about how long they
/// take with their default flags (estimated from the rates in docs/benchmarks.md, release
/// build, a 2-core machine).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Shape {
    /// Default. Frames per second through a 5-processor pipeline.
    Pipeline,
    /// Default. The cost table (1 turn, 5 turns, 1 turn with a tool call), paced and at zero pace.
    Turns,
    /// Default. Many sessions chatting at once, with kept-alive connections and with one per
    /// request, alternately (uses --sessions, --turns, --runs: default 1 here).
    Load,
    /// Default. Memory per idle session (uses --idle-sessions, --console).
    Memory,
    /// Only when named; 10 min and more (--seconds). Sessions chatting for minutes, server
    /// resources sampled (uses --sessions, --seconds, --sample-seconds, --warmup-seconds,
    /// --console).
    Soak,
    /// Default. Time to the ready line.
    Ready,
    /// Only when named; about 1 min. Turns/s with and without a console attached (uses
    /// --sessions, --turns, --runs).
    Console,
    /// Only when named; a few minutes. The console's own memory and idle CPU: N turns of W-word replies with the console in
    /// a pseudo-terminal vs headless, then each pane idle (uses --turns, default 300;
    /// --words, default 300; --runs, default 1 here; --exchanges; --idle-seconds; --against).
    ConsoleMemory,
    /// Default. The OpenAI bridge's overhead over a direct MCP call (uses --calls).
    Bridge,
    /// Only when named; needs haproxy; about 15 s. Turns/s with 1 and 3 replicas, direct and
    /// through HAProxy (uses --clients, --turns, --runs, --store; `--store redis` also needs
    /// redis-server and measures the failover time).
    Replicas,
    /// Only when named; about 20 s. Cases/s of `turnscope test`: 100 one-turn cases, --jobs 8,
    /// at zero pace and paced (uses --runs).
    Test,
    /// Only when named; about 1 min. Turns/s of a headless server with nobody, three viewers
    /// (with the message bodies recorded, and with `[wire] max_kib = 0`), or one stalled viewer
    /// on its event stream (uses --sessions, --turns, --runs).
    Viewers,
    /// Only when named; about 1 min. The SQLite file store beside the memory store, measured
    /// alternately: load at zero pace and syncs per turn; ready time, memory and the first
    /// chat with many stored sessions (uses --sessions, --turns, --runs, --idle-sessions).
    Store,
}

/// What `turnscope bench` runs when no shape is named: the quick ones (about 20 s in all on a
/// release build); the long, the slow-to-set-up and the ones needing other programs run only
/// when named.
pub const DEFAULT_SHAPES: [Shape; 6] = [
    Shape::Pipeline,
    Shape::Turns,
    Shape::Load,
    Shape::Memory,
    Shape::Ready,
    Shape::Bridge,
];

/// `turnscope bench` flags.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Which benchmarks. None named runs the quick ones (pipeline, turns, load, memory, ready,
    /// bridge: about 20 s); soak, console, console-memory, replicas, test, viewers and store run
    /// only when named.
    #[arg(value_enum)]
    pub shapes: Vec<Shape>,
    /// Runs per shape of the cost table, and of load, console, replicas, test and viewers
    /// (default 5; 1 for load and console-memory, 3 for store).
    #[arg(long)]
    pub runs: Option<usize>,
    /// Frames pushed per pipeline measurement.
    #[arg(long, default_value_t = 200_000)]
    pub frames: u64,
    /// Sessions of load, soak, console, viewers and store's load.
    #[arg(long, default_value_t = 1000)]
    pub sessions: usize,
    /// Turns per session of load, console, replicas, viewers and store (default 5; 300 for
    /// console-memory).
    #[arg(long)]
    pub turns: Option<usize>,
    /// Words of each reply of console-memory.
    #[arg(long, default_value_t = 300)]
    pub words: usize,
    /// MCP exchanges the console has seen before console-memory measures each pane idle.
    #[arg(long, default_value_t = 1000)]
    pub exchanges: usize,
    /// Seconds console-memory measures each pane idle (0: memory only).
    #[arg(long, default_value_t = 5.0)]
    pub idle_seconds: f64,
    /// Another turnscope binary console-memory measures alternately with this one (a
    /// before/after comparison in one run).
    #[arg(long, value_name = "PATH")]
    pub against: Option<std::path::PathBuf>,
    /// Idle sessions of the memory shape; stored sessions of the store shape.
    #[arg(long, default_value_t = 10_000)]
    pub idle_sessions: usize,
    /// How long the soak runs, in seconds.
    #[arg(long, default_value_t = 600.0)]
    pub seconds: f64,
    /// Seconds between the soak's samples.
    #[arg(long, default_value_t = 10.0)]
    pub sample_seconds: f64,
    /// Seconds of the soak before memory must stay flat.
    #[arg(long, default_value_t = 60.0)]
    pub warmup_seconds: f64,
    /// Attach the real console (in a pseudo-terminal) to the server of memory and soak.
    #[arg(long)]
    pub console: bool,
    /// Calls per path of the bridge shape.
    #[arg(long, default_value_t = 2000)]
    pub calls: usize,
    /// MCP clients of the replicas shape (each on its own handle).
    #[arg(long, default_value_t = 48)]
    pub clients: usize,
    /// Stores of the replicas shape: `memory`, or `redis` (the memory store and a shared
    /// `redis-server` the bench starts, alternately; then the failover time).
    #[arg(long, value_enum, default_value = "memory")]
    pub store: replicas::BenchStore,
}

pub(crate) fn row(value: Value) {
    println!("{value}");
}

/// Runs the benchmarks `args` names.
///
/// - `pipeline`: frames per second through a 5-processor pipeline, with and without a bus
///   listener;
/// - `turns`: the cost table (1 turn; 5 turns on one handle; 1 turn with 1 tool call) over
///   real MCP on loopback, paced like a stub model that streams 7 words at 0.03 s/word, and at
///   zero pace (pure overhead); median/min/max of the runs;
/// - `load`: N sessions × K turns at once, turns/s and p50/p99;
/// - `memory`: the server's resident memory per open idle session (server in a child
///   process, sessions opened over MCP; `--console` attaches the console);
/// - `soak`: sessions chatting for minutes while the server's memory, descriptors and tasks
///   are sampled (see [`soak`]);
/// - `ready`: time from process start to the headless ready line;
/// - `console`: turns/s with and without a console attached (`bench::console`);
/// - `bridge`: the OpenAI bridge's own cost: p50/p95 of `GET /v1/tools`, `POST /v1/execute`
///   and a direct MCP `tools/call` to the same upstream (the fixture over streamable HTTP),
///   calls interleaved so drift hits all three alike;
/// - `test`: cases per second of `turnscope test` (`bench::test_cases`).
pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    let runs = args.runs.unwrap_or(5);
    let turns = args.turns.unwrap_or(5);
    let shapes = if args.shapes.is_empty() {
        DEFAULT_SHAPES.to_vec()
    } else {
        args.shapes.clone()
    };
    for shape in shapes {
        match shape {
            Shape::Pipeline => {
                for listener in [false, true] {
                    pipeline_throughput(args.frames, listener).await;
                }
            }
            Shape::Turns => {
                for (pace, words) in [(0.03, Some(7)), (0.0, Some(7))] {
                    cost_table(pace, words, runs).await?;
                }
            }
            Shape::Load => load(args.sessions, turns, args.runs.unwrap_or(1)).await?,
            Shape::Store => {
                store::store(
                    args.sessions,
                    turns,
                    args.runs.unwrap_or(3),
                    args.idle_sessions,
                )
                .await?
            }
            Shape::Viewers => viewers::viewers(args.sessions, turns, runs).await?,
            Shape::Memory => soak::memory(args.idle_sessions, args.console).await?,
            Shape::Soak => {
                anyhow::ensure!(
                    args.seconds > 0.0 && args.sample_seconds > 0.0 && args.warmup_seconds >= 0.0,
                    "bench soak: --seconds and --sample-seconds must be above 0 and \
                     --warmup-seconds at least 0"
                );
                soak::soak(soak::SoakPlan {
                    sessions: args.sessions,
                    duration: Duration::from_secs_f64(args.seconds),
                    sample_every: Duration::from_secs_f64(args.sample_seconds),
                    warmup: Duration::from_secs_f64(args.warmup_seconds),
                    console: args.console,
                })
                .await?
            }
            Shape::Ready => ready().await?,
            Shape::Console => console::console(args.sessions, turns, runs).await?,
            Shape::ConsoleMemory => {
                anyhow::ensure!(
                    args.idle_seconds >= 0.0,
                    "bench console-memory: --idle-seconds must be at least 0"
                );
                console_memory::run(console_memory::Plan {
                    turns: args.turns.unwrap_or(300),
                    words: args.words,
                    runs: args.runs.unwrap_or(1),
                    exchanges: args.exchanges,
                    idle_seconds: args.idle_seconds,
                    against: args.against.clone(),
                })
                .await?
            }
            Shape::Bridge => bridge::run(args.calls).await?,
            Shape::Replicas => replicas::run(args.clients, turns, runs, args.store).await?,
            Shape::Test => test_cases::run(runs).await?,
        }
    }
    Ok(())
}

/// Passes every frame on.
struct Pass(&'static str);

#[async_trait]
impl Processor for Pass {
    fn name(&self) -> &'static str {
        self.0
    }
    async fn process(&mut self, frame: Frame, link: &Link) {
        link.push(frame);
    }
}

async fn pipeline_throughput(frames: u64, listener: bool) {
    let bus = Bus::default();
    let mut sub = listener.then(|| bus.subscribe());
    let drained = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counter = drained.clone();
    let reader = sub.take().map(|mut sub| {
        tokio::spawn(async move {
            while sub.recv().await.is_some() {
                counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        })
    });
    let names = ["p1", "p2", "p3", "p4", "p5"];
    let processors: Vec<Box<dyn Processor>> = names
        .iter()
        .map(|n| Box::new(Pass(n)) as Box<dyn Processor>)
        .collect();
    let pipeline = Pipeline::start(processors, Observer::new(bus.clone(), 1));
    let started = Instant::now();
    for i in 0..frames {
        pipeline.push(Frame::new(
            1,
            FrameBody::TextPiece(if i % 2 == 0 { "a".into() } else { "b".into() }),
        ));
    }
    pipeline.drain(Duration::from_secs(600)).await;
    let secs = started.elapsed().as_secs_f64();
    if let Some(r) = reader {
        r.abort();
    }
    row(json!({
        "bench": "pipeline",
        "processors": 5,
        "frames": frames,
        "bus_listener": listener,
        "seconds": round(secs, 4),
        "frames_per_second": (frames as f64 / secs).round(),
        "events_published": bus.published(),
        "events_read": drained.load(std::sync::atomic::Ordering::Relaxed),
    }));
}

pub(crate) fn round(x: f64, places: i32) -> f64 {
    let f = 10f64.powi(places);
    (x * f).round() / f
}

/// A config for an in-process server on a free port with the embedded model at `pace`.
fn bench_config(pace: f64, words: Option<usize>, sessions: usize) -> Config {
    let mut config = Config::default();
    config.server.port = 0;
    config.server.sessions = sessions;
    config.model.pace = pace;
    config.model.words = words;
    config.bot.system_prompt = Some("answer in one short sentence".into());
    config
}

/// The cost table's one parameterless tool.
fn hours_tools() -> Arc<dyn Tools> {
    Arc::new(Toolbox::new().with(FnTool::new(
        "hours",
        "Opening hours.",
        json!({"type": "object", "properties": {}}),
        |_| async { Ok("We open at nine and close at five.".to_string()) },
    )))
}

/// How a bench client's HTTP requests reach the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Connections {
    /// Kept alive and reused, as the TypeScript SDK client and `turnscope attach` do: what a
    /// bench measures unless it says otherwise.
    KeptAlive,
    /// A new TCP connection for every request: rmcp's own default client
    /// (`pool_max_idle_per_host(0)`), which every bench used before `bench load` compared
    /// the two. The Python SDK client behaves so too (counted with `strace`, see
    /// docs/benchmarks.md).
    PerRequest,
}

impl Connections {
    /// The name a row gives it.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Connections::KeptAlive => "kept alive",
            Connections::PerRequest => "one per request",
        }
    }
}

/// A connected MCP client.
pub struct BenchClient {
    client: RunningService<rmcp::RoleClient, ()>,
}

impl BenchClient {
    /// Connects to `url`; its requests reuse kept-alive connections.
    pub async fn connect(url: &str) -> anyhow::Result<Self> {
        Self::connect_with(url, Connections::KeptAlive).await
    }

    /// Connects to `url` with its HTTP connections made as `connections` says.
    pub(crate) async fn connect_with(url: &str, connections: Connections) -> anyhow::Result<Self> {
        let config = StreamableHttpClientTransportConfig::with_uri(url.to_string());
        let transport = match connections {
            // Idle connections are let go after 4 s, well inside the server's header
            // deadline, which closes an idle keep-alive connection.
            Connections::KeptAlive => StreamableHttpClientTransport::with_client(
                reqwest::Client::builder()
                    .pool_idle_timeout(Duration::from_secs(4))
                    .build()
                    .context("building the bench's HTTP client")?,
                config,
            ),
            Connections::PerRequest => StreamableHttpClientTransport::from_config(config),
        };
        let client = ().serve(transport).await?;
        Ok(Self { client })
    }

    /// Ends the MCP session (so the server sees it go while it still runs). Every bench
    /// closes its clients before the server it measured: a client dropped instead deletes its
    /// MCP session later, from a task of its own, and logs an ERROR when the server is gone.
    pub async fn close(self) {
        let _ = self.client.cancel().await;
    }

    /// Closes every client of a bench that shared them (see [`BenchClient::close`]).
    pub async fn close_all(clients: Vec<Arc<BenchClient>>) {
        for client in clients {
            if let Ok(client) = Arc::try_unwrap(client) {
                client.close().await;
            }
        }
    }

    /// Calls a tool and returns its whole result.
    pub async fn call_result(&self, name: &str, args: Value) -> anyhow::Result<CallToolResult> {
        let mut params = CallToolRequestParams::new(name.to_string());
        if let Value::Object(map) = args {
            params = params.with_arguments(map);
        }
        Ok(self.client.call_tool(params).await?)
    }

    /// Calls a tool and returns (text, is_error).
    pub async fn call(&self, name: &str, args: Value) -> anyhow::Result<(String, bool)> {
        let result = self.call_result(name, args).await?;
        let text = text_of(&result);
        Ok((text, result.is_error == Some(true)))
    }

    /// `start` → handle (from the result's `_meta`, where programs read it).
    pub async fn start(&self) -> anyhow::Result<String> {
        let result = self.call_result("start", json!({})).await?;
        let handle = result
            .meta
            .as_ref()
            .and_then(|m| m.get(turnscope::server::mcp_text::START_META))
            .and_then(|s| s.get("handle"))
            .and_then(Value::as_str);
        match handle {
            Some(handle) if result.is_error != Some(true) => Ok(handle.to_string()),
            _ => anyhow::bail!("start failed: {:?}", result.content),
        }
    }

    /// `tools/list` → how many tools.
    pub async fn list_tools(&self) -> anyhow::Result<usize> {
        Ok(self.client.list_all_tools().await?.len())
    }

    /// `chat` asking for progress (a `progressToken`, as Claude Code and the Python SDK send):
    /// the server sends one notification per reply piece before the result.
    pub async fn chat_with_progress(&self, handle: &str, line: &str) -> anyhow::Result<String> {
        use rmcp::model::{NumberOrString, ProgressToken, RequestParamsMeta};
        let mut params = CallToolRequestParams::new("chat");
        if let Value::Object(map) = json!({"handle": handle, "line": line}) {
            params = params.with_arguments(map);
        }
        params.set_progress_token(ProgressToken(NumberOrString::String(
            uuid::Uuid::new_v4().to_string().into(),
        )));
        let result = self.client.call_tool(params).await?;
        let reply = text_of(&result);
        anyhow::ensure!(result.is_error != Some(true), "chat failed: {reply}");
        Ok(reply)
    }

    /// `chat` → reply (an error reply is an error).
    pub async fn chat(&self, handle: &str, line: &str) -> anyhow::Result<String> {
        let (reply, err) = self
            .call("chat", json!({"handle": handle, "line": line}))
            .await?;
        anyhow::ensure!(!err, "chat failed: {reply}");
        anyhow::ensure!(!reply.is_empty(), "chat gave an empty reply");
        Ok(reply)
    }
}

/// The median, min and max of several runs; one run's figure as `value` (one run has no
/// median to claim); `null` for none.
fn stats(mut secs: Vec<f64>) -> Value {
    secs.sort_by(f64::total_cmp);
    if secs.is_empty() {
        return Value::Null;
    }
    if secs.len() == 1 {
        return json!({"value": round(secs[0], 4)});
    }
    let median = secs[secs.len() / 2];
    json!({"median": round(median, 4), "min": round(secs[0], 4), "max": round(secs[secs.len() - 1], 4)})
}

/// The middle value of `values` (the upper one of an even count), 0 when empty.
pub(crate) fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(0.0)
}

/// A summary field's name: `median_NAME` over several runs, `NAME` for one.
pub(crate) fn of_runs(runs: usize, name: &str) -> String {
    if runs > 1 {
        format!("median_{name}")
    } else {
        name.to_string()
    }
}

async fn cost_table(pace: f64, words: Option<usize>, runs: usize) -> anyhow::Result<()> {
    let config = bench_config(pace, words, 64);
    let app = App::start_with_tools(&config, Bus::default(), hours_tools()).await?;
    let client = BenchClient::connect(&app.server.mcp_url()).await?;
    let mut shapes = serde_json::Map::new();
    for shape in ["turn", "turns5", "tool"] {
        let mut secs = Vec::with_capacity(runs);
        for _ in 0..runs.max(1) {
            let handle = client.start().await?;
            let started = Instant::now();
            match shape {
                "turn" => {
                    client.chat(&handle, "when do you open").await?;
                }
                "turns5" => {
                    for i in 0..5 {
                        client
                            .chat(&handle, &format!("question number {i}"))
                            .await?;
                    }
                }
                _ => {
                    client.chat(&handle, "what are your hours").await?;
                }
            }
            secs.push(started.elapsed().as_secs_f64());
        }
        shapes.insert(shape.into(), stats(secs));
    }
    row(json!({
        "bench": "turns",
        "pace_seconds": pace,
        "words": words,
        "runs": runs,
        "model": "embedded",
        "transport": "mcp streamable http (rmcp client, loopback)",
        "shapes": shapes,
    }));
    client.close().await;
    app.shutdown().await;
    Ok(())
}

/// Says `turns` lines on `handle` back to back: each turn's latency in ms, and the failures.
pub(crate) async fn chat_turns(
    client: &BenchClient,
    handle: &str,
    turns: usize,
) -> (Vec<f64>, usize) {
    let mut latencies = Vec::with_capacity(turns);
    let mut errors = 0;
    for t in 0..turns {
        let at = Instant::now();
        match client.chat(handle, &format!("line {t}")).await {
            Ok(_) => latencies.push(at.elapsed().as_secs_f64() * 1000.0),
            Err(_) => errors += 1,
        }
    }
    (latencies, errors)
}

/// One run of N sessions × K turns at once against an in-process server.
pub(crate) struct LoadRun {
    /// Each answered turn's latency in ms, sorted.
    pub latencies_ms: Vec<f64>,
    /// Turns that failed.
    pub errors: usize,
    /// Wall time of the run.
    pub seconds: f64,
    /// What the server's store counted (writes, syncs).
    pub store: turnscope::store::StoreStats,
    /// CPU seconds the whole process (server and clients) used in the run (Linux).
    pub cpu_seconds: Option<f64>,
    /// CPU seconds of the file store's writer thread, when the run had one (Linux).
    pub store_thread_cpu_seconds: Option<f64>,
}

impl LoadRun {
    /// Answered turns per second.
    pub fn turns_per_second(&self) -> f64 {
        self.latencies_ms.len() as f64 / self.seconds
    }

    /// Cores busy on average over the run (process CPU ÷ wall time): near the machine's
    /// core count, the run was bound by CPU; well under it, by waiting.
    pub fn cores_busy(&self) -> Option<f64> {
        self.cpu_seconds.map(|cpu| round(cpu / self.seconds, 2))
    }

    /// Process CPU per answered turn, in ms.
    pub fn cpu_ms_per_turn(&self) -> Option<f64> {
        self.cpu_seconds
            .map(|cpu| round(cpu * 1000.0 / self.latencies_ms.len().max(1) as f64, 3))
    }

    /// The `q` quantile of the latencies, in ms.
    pub fn latency(&self, q: f64) -> f64 {
        let all = &self.latencies_ms;
        all.get(((all.len() as f64 - 1.0) * q) as usize)
            .copied()
            .unwrap_or(0.0)
    }
}

/// N sessions × K turns at once at zero pace on a server made from `config`.
pub(crate) async fn load_run(
    config: &Config,
    sessions: usize,
    turns: usize,
    connections: Connections,
) -> anyhow::Result<LoadRun> {
    let app = App::start_with_tools(config, Bus::default(), hours_tools()).await?;
    let url = app.server.mcp_url();
    // Several MCP clients share the sessions (one per 25 sessions), as many agents would.
    let clients: Vec<Arc<BenchClient>> = {
        let mut v = Vec::new();
        for _ in 0..sessions.div_ceil(25).clamp(1, 64) {
            v.push(Arc::new(
                BenchClient::connect_with(&url, connections).await?,
            ));
        }
        v
    };
    let started = Instant::now();
    let cpu_before = cpu::cpu_seconds();
    let store_before = cpu::thread_cpu_seconds(turnscope::store::sqlite::WRITER_THREAD);
    let mut tasks = Vec::with_capacity(sessions);
    for i in 0..sessions {
        let client = clients[i % clients.len()].clone();
        tasks.push(tokio::spawn(async move {
            match client.start().await {
                Ok(handle) => chat_turns(&client, &handle, turns).await,
                Err(_) => (Vec::new(), turns),
            }
        }));
    }
    let mut all = Vec::new();
    let mut errors = 0;
    for t in tasks {
        let (lat, err) = t.await.context("load task panicked")?;
        all.extend(lat);
        errors += err;
    }
    let seconds = started.elapsed().as_secs_f64();
    let cpu_seconds = cpu_before.zip(cpu::cpu_seconds()).map(|(a, b)| b - a);
    let store_thread_cpu_seconds = store_before
        .zip(cpu::thread_cpu_seconds(
            turnscope::store::sqlite::WRITER_THREAD,
        ))
        .map(|(a, b)| b - a);
    all.sort_by(f64::total_cmp);
    let store = app.sessions.store().stats();
    BenchClient::close_all(clients).await;
    app.shutdown().await;
    Ok(LoadRun {
        latencies_ms: all,
        errors,
        seconds,
        store,
        cpu_seconds,
        store_thread_cpu_seconds,
    })
}

/// `runs` rounds of N sessions × K turns, each round with kept-alive connections and then with
/// a connection per request (what every bench client did before): a row per run, then a
/// summary row per mode with its medians and its turns/s as a share of kept-alive's.
async fn load(sessions: usize, turns: usize, runs: usize) -> anyhow::Result<()> {
    let modes = [Connections::KeptAlive, Connections::PerRequest];
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    for run in 0..runs.max(1) {
        for (m, connections) in modes.into_iter().enumerate() {
            let config = bench_config(0.0, Some(7), sessions + 8);
            let done = load_run(&config, sessions, turns, connections).await?;
            rates[m].push(done.turns_per_second());
            row(json!({
                "bench": "load",
                "run": run + 1,
                "connections": connections.label(),
                "sessions": sessions,
                "turns_per_session": turns,
                "pace_seconds": 0.0,
                "turns": done.latencies_ms.len(),
                "errors": done.errors,
                "seconds": round(done.seconds, 3),
                "turns_per_second": round(done.turns_per_second(), 1),
                "p50_ms": round(done.latency(0.5), 3),
                "p99_ms": round(done.latency(0.99), 3),
                "cores_busy": done.cores_busy(),
                "cpu_ms_per_turn": done.cpu_ms_per_turn(),
            }));
        }
    }
    let medians: Vec<f64> = rates.iter().map(|r| median(r)).collect();
    for (m, connections) in modes.into_iter().enumerate() {
        row(json!({
            "bench": "load",
            "summary": connections.label(),
            "runs": runs.max(1),
            "median_turns_per_second": round(medians[m], 1),
            "share_of_kept_alive": round(medians[m] / medians[0].max(f64::MIN_POSITIVE), 3),
        }));
    }
    Ok(())
}

async fn ready() -> anyhow::Result<()> {
    use tokio::io::AsyncBufReadExt;
    let exe = std::env::current_exe()?;
    let mut times = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let mut child = tokio::process::Command::new(&exe)
            .args(["--headless", "--port", "0"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child.stdout.take().context("child stdout")?;
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        while let Some(line) = lines.next_line().await? {
            if line.contains("/mcp") {
                break;
            }
        }
        times.push(started.elapsed().as_secs_f64());
        child.kill().await.ok();
    }
    row(json!({"bench": "ready", "runs": times.len(), "seconds": stats(times)}));
    Ok(())
}
