//! `turnscope bench console`: what an attached console costs the server. "Attached" means the
//! real event loop (its own bus subscription, the state folded from every event, a 160×48 screen
//! drawn to a sink); each scenario alternates its modes run by run so drift hits all alike, and
//! prints one JSON row per run plus a row of medians. [`console`] lists the scenarios.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use ratatui::backend::CrosstermBackend;
use ratatui::layout::Rect;
use ratatui::{Terminal, TerminalOptions, Viewport};
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::bench::cpu::cpu_seconds;
use crate::bench::{BenchClient, median, of_runs, round};
use turnscope::app::App;
use turnscope::config::Config;
use turnscope::observe::{Bus, Event, SessionOpener};
use turnscope_console::Theme;
use turnscope_console::run::live::{attach, event_loop};

/// MCP clients the load is spread over.
const CLIENTS: usize = 8;
/// Calls in flight per client in the flood scenario.
const CALLS_PER_CLIENT: usize = 4;
/// Bot sessions streaming in the flood scenario: at the embedded model's default pace
/// (0.03 s a word, 7 words) each streams about 140 frame crossings a second.
const FLOOD_SESSIONS: usize = 36;
/// How long the flood scenario measures, after a warm-up.
const FLOOD_SECONDS: f64 = 3.0;
const FLOOD_WARMUP: Duration = Duration::from_millis(700);

/// What listens to the bus during a measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Nobody: producers build no events at all.
    Unobserved,
    /// A bare subscription that drains every event: the cost of the bus itself.
    Drain,
    /// The console: its event loop, state and 30 fps drawing.
    Console,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Unobserved => "none",
            Mode::Drain => "bus drain",
            Mode::Console => "console",
        }
    }
}

/// What a listener saw.
#[derive(Debug, Default)]
struct Seen {
    events: u64,
    frames: u64,
    missed: u64,
}

/// Runs both scenarios, `runs` rounds each; the saturated one with `sessions` × `turns`.
///
///   pace) while MCP clients call `tools/call` as fast as the server answers; the figure is
///   calls/s with no listener and with the console;
/// - `saturated`: the turns themselves at zero pace over MCP, as fast as the server goes
///   (tens of thousands of frames/s, the worst case); turns/s with no listener, with a bare
///   subscription that only drains the bus (the cost of building the events, which
///   `--events` pays too), and with the console.
pub async fn console(sessions: usize, turns: usize, runs: usize) -> anyhow::Result<()> {
    flood(runs).await?;
    saturated(sessions, turns, runs).await
}

/// Starts what `mode` attaches to the app's bus; it runs until `stop`.
async fn listen(
    app: &App,
    mode: Mode,
    stop: &CancellationToken,
) -> Option<JoinHandle<anyhow::Result<Seen>>> {
    let stop = stop.clone();
    match mode {
        Mode::Unobserved => None,
        Mode::Drain => {
            let mut sub = app.bus.subscribe();
            Some(tokio::spawn(async move {
                let mut seen = Seen::default();
                loop {
                    tokio::select! {
                        _ = stop.cancelled() => break,
                        event = sub.recv() => match event {
                            Some(e) => {
                                seen.events += 1;
                                seen.frames += u64::from(matches!(&*e, Event::Frame(_)));
                            }
                            None => break,
                        },
                    }
                }
                seen.missed = sub.missed();
                Ok(seen)
            }))
        }
        Mode::Console => {
            let (mut console, mut feed) = attach(app, Theme::default()).await;
            Some(tokio::spawn(async move {
                // Real escape sequences, written to nowhere: what a terminal would be sent.
                let mut terminal = Terminal::with_options(
                    CrosstermBackend::new(std::io::sink()),
                    TerminalOptions {
                        viewport: Viewport::Fixed(Rect::new(0, 0, 160, 48)),
                    },
                )?;
                let input = futures::stream::pending();
                event_loop(&mut console, &mut terminal, Some(&mut feed), input, stop).await?;
                Ok(Seen {
                    events: console.state.events_seen,
                    frames: console.state.frames_seen,
                    missed: console.state.events_missed,
                })
            }))
        }
    }
}

async fn finish(
    listener: Option<JoinHandle<anyhow::Result<Seen>>>,
) -> anyhow::Result<Option<Seen>> {
    match listener {
        Some(task) => Ok(Some(task.await.context("the listener task panicked")??)),
        None => Ok(None),
    }
}

async fn clients(app: &App) -> anyhow::Result<Vec<Arc<BenchClient>>> {
    let url = app.server.mcp_url();
    let mut clients = Vec::with_capacity(CLIENTS);
    for _ in 0..CLIENTS {
        clients.push(Arc::new(BenchClient::connect(&url).await?));
    }
    Ok(clients)
}

/// The flood scenario: MCP calls/s while bot sessions stream about 5,000 frames/s.
async fn flood(runs: usize) -> anyhow::Result<()> {
    let modes = [Mode::Unobserved, Mode::Console];
    let mut rates: [Vec<f64>; 2] = Default::default();
    let mut fps = Vec::new();
    let mut missed = 0;
    for run in 0..runs.max(1) {
        for k in 0..modes.len() {
            let i = (k + run) % modes.len();
            let m = flood_once(modes[i]).await?;
            let rate = m.calls as f64 / m.seconds;
            rates[i].push(rate);
            let mut row = json!({
                "bench": "console",
                "scenario": "flood",
                "run": run + 1,
                "listener": modes[i].name(),
                "flood_sessions": FLOOD_SESSIONS,
                "flood_turns_per_second": round(m.turns as f64 / m.seconds, 1),
                "mcp_calls": m.calls,
                "seconds": round(m.seconds, 3),
                "mcp_calls_per_second": round(rate, 1),
            });
            if let Some(seen) = m.seen {
                let frames_per_second = seen.frames as f64 / m.listened;
                row["console_frames_per_second"] = round(frames_per_second, 0).into();
                row["console_events"] = seen.events.into();
                row["console_missed"] = seen.missed.into();
                fps.push(frames_per_second);
                missed += seen.missed;
            }
            println!("{row}");
        }
    }
    let [none, console] = rates.map(|r| median(&r));
    let runs = runs.max(1);
    let mut summary = json!({
        "bench": "console",
        "scenario": "flood",
        "summary": true,
        "runs": runs,
        "console_missed_total": missed,
        "change_percent_console": round((console - none) / none * 100.0, 2),
    });
    summary[of_runs(runs, "console_frames_per_second")] = json!(round(median(&fps), 0));
    summary[of_runs(runs, "mcp_calls_per_second")] =
        json!({"none": round(none, 1), "console": round(console, 1)});
    println!("{summary}");
    Ok(())
}

/// One flood measurement.
async fn flood_once(mode: Mode) -> anyhow::Result<Flood> {
    let mut config = Config::default();
    config.server.port = 0;
    config.server.sessions = FLOOD_SESSIONS + 8;
    config.model.words = Some(7);
    let app = App::start(&config, Bus::default()).await?;
    let stop = CancellationToken::new();
    let listening = Instant::now();
    let listener = listen(&app, mode, &stop).await;
    // The flood: sessions chatting back to back, in process.
    let flood_turns = Arc::new(AtomicU64::new(0));
    let mut flood = Vec::with_capacity(FLOOD_SESSIONS);
    for _ in 0..FLOOD_SESSIONS {
        let session = app
            .sessions
            .open(SessionOpener::Api)
            .await
            .map_err(anyhow::Error::msg)?;
        let sessions = app.sessions.clone();
        let stop = stop.clone();
        let counter = flood_turns.clone();
        flood.push(tokio::spawn(async move {
            while !stop.is_cancelled() {
                if sessions
                    .chat_on(&session, "tell me something", None, &stop)
                    .await
                    .is_ok()
                {
                    counter.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    let clients = clients(&app).await?;
    tokio::time::sleep(FLOOD_WARMUP).await;
    let turns_before = flood_turns.load(Ordering::Relaxed);
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(FLOOD_SECONDS);
    let mut callers = Vec::new();
    for client in &clients {
        for _ in 0..CALLS_PER_CLIENT {
            let client = client.clone();
            callers.push(tokio::spawn(async move {
                let mut calls = 0usize;
                let args = json!({"handle": "not-a-handle", "line": "hi"});
                while Instant::now() < deadline {
                    if client.call("chat", args.clone()).await.is_ok() {
                        calls += 1;
                    }
                }
                calls
            }));
        }
    }
    let mut calls = 0;
    for caller in callers {
        calls += caller.await.context("a caller task panicked")?;
    }
    let seconds = started.elapsed().as_secs_f64();
    let turns = flood_turns.load(Ordering::Relaxed) - turns_before;
    let listened = listening.elapsed().as_secs_f64();
    stop.cancel();
    for task in flood {
        let _ = task.await;
    }
    let seen = finish(listener).await?;
    BenchClient::close_all(clients).await;
    app.shutdown().await;
    Ok(Flood {
        calls,
        seconds,
        turns,
        listened,
        seen,
    })
}

/// One flood measurement.
struct Flood {
    calls: usize,
    seconds: f64,
    /// Flood turns finished in the window.
    turns: u64,
    /// Seconds the listener ran (warm-up included).
    listened: f64,
    seen: Option<Seen>,
}

/// The saturated scenario: turns/s at zero pace with each of the three listeners.
async fn saturated(sessions: usize, turns: usize, runs: usize) -> anyhow::Result<()> {
    let modes = [Mode::Unobserved, Mode::Drain, Mode::Console];
    let mut tps: [Vec<f64>; 3] = Default::default();
    let mut cpu_per_turn: [Vec<f64>; 3] = Default::default();
    let mut fps = Vec::new();
    let mut missed = 0;
    for run in 0..runs.max(1) {
        for k in 0..modes.len() {
            let i = (k + run) % modes.len();
            let mode = modes[i];
            let Saturated {
                done,
                errors,
                seconds,
                cpu,
                seen,
            } = saturated_once(sessions, turns, mode).await?;
            let rate = done as f64 / seconds;
            tps[i].push(rate);
            let cpu_ms = cpu.map(|c| c * 1000.0 / done.max(1) as f64);
            if let Some(ms) = cpu_ms {
                cpu_per_turn[i].push(ms);
            }
            let mut row = json!({
                "bench": "console",
                "scenario": "saturated",
                "run": run + 1,
                "listener": mode.name(),
                "sessions": sessions,
                "turns_per_session": turns,
                "turns": done,
                "errors": errors,
                "seconds": round(seconds, 3),
                "turns_per_second": round(rate, 1),
                "cpu_ms_per_turn": cpu_ms.map(|ms| round(ms, 3)),
            });
            if let Some(seen) = seen {
                let frames_per_second = seen.frames as f64 / seconds;
                row["events"] = seen.events.into();
                row["frames_per_second"] = round(frames_per_second, 0).into();
                row["missed"] = seen.missed.into();
                if mode == Mode::Console {
                    fps.push(frames_per_second);
                    missed += seen.missed;
                }
            }
            println!("{row}");
        }
    }
    let [none, drain, console] = tps.map(|r| median(&r));
    let change = |x: f64| round((x - none) / none * 100.0, 2);
    let [cpu_none, cpu_drain, cpu_console] = cpu_per_turn.map(|c| median(&c));
    let runs = runs.max(1);
    let mut summary: Value = json!({
        "bench": "console",
        "scenario": "saturated",
        "summary": true,
        "runs": runs,
        "console_missed_total": missed,
        "change_percent_bus_drain": change(drain),
        "change_percent_console": change(console),
    });
    summary[of_runs(runs, "turns_per_second")] = json!({
        "none": round(none, 1),
        "bus drain": round(drain, 1),
        "console": round(console, 1),
    });
    summary[of_runs(runs, "console_frames_per_second")] = json!(round(median(&fps), 0));
    summary[of_runs(runs, "cpu_ms_per_turn")] = json!({
        "none": round(cpu_none, 3),
        "bus drain": round(cpu_drain, 3),
        "console": round(cpu_console, 3),
    });
    println!("{summary}");
    Ok(())
}

/// One saturated measurement.
struct Saturated {
    done: usize,
    errors: usize,
    seconds: f64,
    /// CPU seconds the whole process used meanwhile (Linux).
    cpu: Option<f64>,
    seen: Option<Seen>,
}

/// One saturated measurement.
async fn saturated_once(sessions: usize, turns: usize, mode: Mode) -> anyhow::Result<Saturated> {
    let mut config = Config::default();
    config.server.port = 0;
    config.server.sessions = sessions + 8;
    config.model.pace = 0.0;
    config.model.words = Some(7);
    let app = App::start(&config, Bus::default()).await?;
    let stop = CancellationToken::new();
    let listener = listen(&app, mode, &stop).await;
    let clients = clients(&app).await?;
    let cpu_before = cpu_seconds();
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(sessions);
    for i in 0..sessions {
        let client = clients[i % CLIENTS].clone();
        tasks.push(tokio::spawn(async move {
            let Ok(handle) = client.start().await else {
                return (0, turns);
            };
            let mut done = 0;
            for t in 0..turns {
                if client.chat(&handle, &format!("line {t}")).await.is_ok() {
                    done += 1;
                }
            }
            (done, turns - done)
        }));
    }
    let (mut done, mut errors) = (0, 0);
    for task in tasks {
        let (ok, failed) = task.await.context("a load task panicked")?;
        done += ok;
        errors += failed;
    }
    let seconds = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds()
        .zip(cpu_before)
        .map(|(after, before)| after - before);
    stop.cancel();
    let seen = finish(listener).await?;
    BenchClient::close_all(clients).await;
    app.shutdown().await;
    Ok(Saturated {
        done,
        errors,
        seconds,
        cpu,
        seen,
    })
}
