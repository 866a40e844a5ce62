//! `turnscope bench`: benchmarks as commands that print one JSON row per measurement. Each
//! [`run`] lists what each [`Shape`] measures; rows compare only on the same machine.

mod bridge;
mod child;
mod client;
mod console;
mod console_memory;
mod cpu;
mod lean;
mod load;
mod replicas;
pub mod soak;
mod store;
mod test_cases;
mod viewers;

pub use client::BenchClient;
pub(crate) use client::{Connections, chat_turns};
pub(crate) use load::{LoadClient, LoadRun, load_run};

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use async_trait::async_trait;
use clap::{Args, ValueEnum};
use serde_json::{Value, json};

use turnscope::app::App;
use turnscope::config::Config;
use turnscope::observe::Bus;
use turnscope::observe::line::write_line;
use turnscope::pipeline::{Frame, FrameBody, Link, Observer, Pipeline, Processor};
use turnscope::tools::{FnTool, Toolbox, Tools};

/// What to measure. The doc line of each is its entry in `turnscope bench --help`: the shapes
/// in [`DEFAULT_SHAPES`] say "default", the others "only when named" and about how long they
/// take with their default flags (estimated from the rates in docs/benchmarks.md, release
/// build, a 2-core machine).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Shape {
    /// Default. Frames per second through a 5-processor pipeline, and the time to write a frame event as its JSON line.
    Pipeline,
    /// Default. The cost table (1 turn, 5 turns, 1 turn with a tool call), paced and at zero pace.
    Turns,
    /// Default. Many sessions chatting at once, by a lean MCP client and by rmcp's, with
    /// kept-alive connections and with one per request, alternately (uses --sessions, --turns,
    /// --runs: default 1 here).
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
    /// `redis-server` the bench starts, once with `appendfsync always` and once with
    /// `everysec`, alternately; then the failover time).
    #[arg(long, value_enum, default_value = "memory")]
    pub store: replicas::BenchStore,
}

pub(crate) fn row(value: Value) {
    println!("{value}");
}

/// Runs the benchmarks `args` names.
///
/// - `pipeline`: frames per second through a 5-processor pipeline, with and without a bus
///   listener; and the time to write one frame crossing as its JSON line (`event_lines`);
/// - `turns`: the cost table (1 turn; 5 turns on one handle; 1 turn with 1 tool call) over
///   real MCP on loopback, paced like a stub model that streams 7 words at 0.03 s/word, and at
///   zero pace (pure overhead); median/min/max of the runs;
/// - `load`: N sessions × K turns at once, turns/s, p50/p99 and the CPU per turn of the server
///   and of all (`bench::load`);
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
                event_lines(args.frames);
            }
            Shape::Turns => {
                for (pace, words) in [(0.03, Some(7)), (0.0, Some(7))] {
                    cost_table(pace, words, runs).await?;
                }
            }
            Shape::Load => load::run(args.sessions, turns, args.runs.unwrap_or(1)).await?,
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

/// What a watcher (the `/events` hub, `--events`) spends writing one frame crossing as its
/// JSON line, on one thread with nothing else running: six crossings like a turn of the
/// embedded model's (the user line's first hop, the model's start, a text piece's three hops,
/// a response end) written in turn, `lines` lines in all.
fn event_lines(lines: u64) {
    use std::borrow::Cow;
    use turnscope::observe::{Event, FrameEvent};
    let hops: [(&str, &str, &str); 6] = [
        ("UserLine", "source", "input"),
        ("ResponseStart", "model", "output"),
        ("TextPiece", "model", "output"),
        ("TextPiece", "output", "assistant-aggregator"),
        ("TextPiece", "assistant-aggregator", "sink"),
        ("ResponseEnd", "output", "assistant-aggregator"),
    ];
    let events: Vec<Event> = hops
        .iter()
        .enumerate()
        .map(|(i, &(name, from, to))| {
            Event::Frame(FrameEvent {
                id: 1_000 + i as u64,
                session: 17,
                turn: 3,
                kind: Cow::Borrowed("data"),
                name: Cow::Borrowed(name),
                from: Cow::Borrowed(from),
                to: Cow::Borrowed(to),
                direction: Cow::Borrowed("down"),
                at_us: 1_796_351_233_613_305 + i as u64 * 17,
                detail: if name == "TextPiece" {
                    " number".into()
                } else {
                    String::new()
                },
                // Past the end of the pipeline no queue is joined.
                depth: u32::from(to != "sink"),
            })
        })
        .collect();
    let mut bytes = 0usize;
    let started = Instant::now();
    for n in 0..lines {
        // A line of its own each time, as the hub hands each one to the viewers.
        let mut line = Vec::with_capacity(256);
        write_line(&mut line, &events[n as usize % events.len()]);
        bytes += std::hint::black_box(line).len();
    }
    let secs = started.elapsed().as_secs_f64();
    row(json!({
        "bench": "event_lines",
        "lines": lines,
        "seconds": round(secs, 4),
        "ns_per_line": round(secs * 1e9 / lines.max(1) as f64, 1),
        "bytes_per_line": bytes / lines.max(1) as usize,
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
