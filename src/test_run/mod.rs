//! `turnscope test FILE…`: conversation test files (`*.test.toml`, the file model is
//! `turnscope::conversation_test`) run against a bot, with a verdict for CI: exit 0 when every
//! case passed, 1 when one failed, 2 when they could not be run (a bad file, an unreachable
//! target, an expectation the target cannot answer).
//!
//! The target is the config's bot, started in-process on a free port (its events recorded
//! with `--events`), or `--url` any MCP server with `start` and `chat`. Modules: [`target`]
//! (the MCP client and turn records), [`expect`] (checks), [`run`] (workers and verdicts),
//! [`report`] (lines, bar, summary, JSON), [`junit`].

pub mod client_events;
pub mod expect;
pub mod junit;
pub mod report;
pub mod run;
pub mod target;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use turnscope::app::App;
use turnscope::attach::address::Asker;
use turnscope::config::Config;
use turnscope::observe::Bus;
use turnscope::observe::recorder::{Keep, Recording};

use crate::cli::{ServeArgs, TestArgs};
use run::{CaseResult, Env, Plan, PlannedFile, Status};

/// Runs `turnscope test`; `config` is the global `--config`, `before` the main-mode flags
/// written before `test` (refused: they belong after it, where they are read).
pub async fn main(args: TestArgs, config: Option<PathBuf>, before: ServeArgs) -> ExitCode {
    let before = ServeArgs {
        // Read from the environment on both levels; only the one after `test` is used.
        auth_token: None,
        ..before
    };
    if before != ServeArgs::default() {
        eprintln!(
            "turnscope test: the bot's flags go after `test` (e.g. `turnscope test --pace 0 FILE`); \
             nothing was run"
        );
        return ExitCode::from(2);
    }
    match run_all(args, config).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("turnscope test: {}", crate::error_text(&e));
            ExitCode::from(2)
        }
    }
}

/// What ends with the run: the in-process bot (none with --url) and the events recording.
struct Target {
    app: Option<App>,
    recording: Recording,
}

async fn run_all(args: TestArgs, config: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(args.jobs >= 1, "--jobs must be at least 1 (runs at once)");
    anyhow::ensure!(
        args.timeout.is_finite() && args.timeout > 0.0,
        "--timeout must be seconds above 0"
    );
    if args.url.is_some() {
        let bot_flags = ServeArgs {
            events: None,
            auth_token: None,
            ..args.serve.clone()
        };
        anyhow::ensure!(
            bot_flags == ServeArgs::default(),
            "--url tests a server that is already running; the bot's flags (--pace, --model-url, --port, …) \
             apply only to the in-process bot: drop them, or drop --url"
        );
    }
    let mut files = Vec::with_capacity(args.files.len());
    for path in &args.files {
        let file = turnscope::conversation_test::read(path)?;
        files.push(PlannedFile::new(path.display().to_string(), file));
    }
    let plan = Arc::new(Plan {
        files,
        timeout: Duration::from_secs_f64(args.timeout),
    });
    let events = args.serve.events.clone();
    let events_on_stdout = events.as_deref() == Some(std::path::Path::new("-"));
    anyhow::ensure!(
        !(args.json && events_on_stdout),
        "--json and --events - both write to stdout; give --events a file"
    );
    let (target, env) = start_target(&args, config.as_deref(), events.as_deref()).await?;
    let env = Arc::new(env);
    let probe = target::Client::connect(&env.url, env.token.as_deref()).await;
    let probe = match probe {
        Ok(p) => p,
        Err(e) => {
            stop(target).await;
            return Err(e);
        }
    };
    if let Err(e) = probe.check_tools().await {
        probe.close().await;
        stop(target).await;
        return Err(e);
    }
    probe.close().await;
    if args.url.is_some() && events.is_some() {
        eprintln!(
            "turnscope test: with --url, --events records the conversations as this client saw them (lines, \
             replies, reported tool calls and times) and the verdicts; the target's frames, model requests \
             and tool timings are in its own process: start it with --events for the whole waterfall"
        );
    }
    let started = Instant::now();
    let results = match drive(&plan, env, args.jobs, args.json, events_on_stdout).await {
        Ok(r) => r,
        Err(e) => {
            stop(target).await;
            return Err(e);
        }
    };
    let seconds = started.elapsed().as_secs_f64();
    stop(target).await;
    let reporter = report::Reporter::new(results.len(), args.json, events_on_stdout);
    let events_label = events.as_ref().map(|p| p.display().to_string());
    reporter.summary(&results, seconds, args.jobs, events_label.as_deref());
    if let Some(path) = &args.junit {
        let names: Vec<String> = plan.files.iter().map(|f| f.name.clone()).collect();
        let xml = junit::render(&names, &results, seconds);
        // It quotes the replies: readable by its owner only, as `--events` is.
        let written = turnscope::private_files::create(path)
            .and_then(|mut file| std::io::Write::write_all(&mut file, xml.as_bytes()));
        if let Err(e) = written {
            eprintln!(
                "turnscope test: cannot write the JUnit report {}: {e}; check the directory",
                path.display()
            );
            return Ok(ExitCode::from(2));
        }
    }
    Ok(verdict(&results))
}

/// 2 when a case could not be run or checked, else 1 when one failed, else 0.
fn verdict(results: &[CaseResult]) -> ExitCode {
    if results.iter().any(|r| r.status == Status::Error) {
        ExitCode::from(2)
    } else if results.iter().any(|r| r.status == Status::Failed) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

async fn start_target(
    args: &TestArgs,
    config: Option<&std::path::Path>,
    events: Option<&std::path::Path>,
) -> anyhow::Result<(Target, Env)> {
    if let Some(given) = &args.url {
        // The forms `turnscope attach` takes: a port, host:port, or a URL without /mcp.
        let url = &turnscope::attach::address::mcp_url_for(given, Asker::TestUrl)
            .map_err(anyhow::Error::msg)?;
        let bus = Bus::default();
        // A report of this run: a file an earlier run left is written over.
        let recording = Recording::start_keeping(&bus, events, Keep::Afresh).await?;
        let env = Env {
            url: url.clone(),
            token: args.serve.auth_token.clone(),
            sessions: None,
            bus,
            client_events: events.is_some().then(client_events::ClientEvents::default),
        };
        return Ok((
            Target {
                app: None,
                recording,
            },
            env,
        ));
    }
    let mut overrides = args.serve.overrides();
    // A free port unless one is asked for: CI runs may overlap.
    overrides.port = overrides.port.or(Some(0));
    let (config, _) = Config::load(config, &overrides)?;
    let config = with_room_for(config, args.jobs);
    let bus = Bus::default();
    let recording = Recording::start_keeping(&bus, events, Keep::Afresh).await?;
    let app = App::start(&config, bus.clone()).await?;
    recording.retell_with(turnscope::server::viewers::retell_reopened(
        app.sessions.clone(),
    ));
    recording.open_pieces_with(turnscope::server::viewers::open_pieces(
        app.sessions.clone(),
    ));
    let env = Env {
        url: app.server.mcp_url(),
        token: config.server.auth_token.clone(),
        sessions: Some(app.sessions.clone()),
        bus,
        client_events: None,
    };
    Ok((
        Target {
            app: Some(app),
            recording,
        },
        env,
    ))
}

/// The config with a session cap of at least `jobs` (each run holds one session; runs close
/// theirs when they end).
fn with_room_for(mut config: Config, jobs: usize) -> Config {
    config.server.sessions = config.server.sessions.max(jobs);
    config
}

async fn stop(target: Target) {
    if let Some(app) = target.app {
        app.shutdown().await;
    }
    target.recording.finish().await;
}

/// Runs the plan on `jobs` workers; a line per case as each is decided.
async fn drive(
    plan: &Arc<Plan>,
    env: Arc<Env>,
    jobs: usize,
    json: bool,
    events_on_stdout: bool,
) -> anyhow::Result<Vec<CaseResult>> {
    let work = Arc::new(run::work_of(plan));
    let cases: usize = plan.files.iter().map(|f| f.file.cases.len()).sum();
    let mut reporter = report::Reporter::new(cases, json, events_on_stdout);
    // Outcomes per case, in run order once complete.
    let mut pending: Vec<Vec<Vec<Option<run::RunOutcome>>>> = plan
        .files
        .iter()
        .map(|f| {
            f.file
                .cases
                .iter()
                .map(|c| vec![None; c.repeat as usize])
                .collect()
        })
        .collect();
    let mut decided: Vec<Vec<Option<CaseResult>>> = plan
        .files
        .iter()
        .map(|f| vec![None; f.file.cases.len()])
        .collect();
    let mut workers = run::start(plan.clone(), env, work.clone(), jobs).await?;
    let mut received = 0;
    while let Some((w, outcome)) = workers.outcomes.recv().await {
        received += 1;
        let slots = &mut pending[w.file][w.case];
        slots[w.run as usize] = Some(outcome);
        if slots.iter().all(Option::is_some) {
            let outcomes = slots
                .drain(..)
                .enumerate()
                .map(|(i, o)| (i as u32, o.expect("every run is in")))
                .collect();
            let file = &plan.files[w.file];
            let result = run::decide(&file.name, &file.file.cases[w.case], outcomes);
            reporter.case(&result);
            decided[w.file][w.case] = Some(result);
        }
        if received == work.len() {
            break;
        }
    }
    anyhow::ensure!(
        received == work.len(),
        "the test workers stopped after {received} of {} runs",
        work.len()
    );
    // Their MCP sessions close before the target stops.
    for task in workers.tasks {
        let _ = task.await;
    }
    Ok(decided.into_iter().flatten().flatten().collect())
}
