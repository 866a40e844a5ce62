//! The turnscope binary: the console by default, `--headless` for CI, and subcommands. It only
//! parses the command line, sets up logging and calls the library; errors reach the user here.

mod bench;
mod cli;
#[cfg(test)]
mod cli_reference;
mod log_format;
mod logging;
mod sessions_cmd;
mod test_run;
mod tools_cmd;

use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Parser;
use cli::{
    BridgeCommand, Cli, Command, ConfigAction, DevAction, ModelAction, ReplicasAction, ServeArgs,
};
use turnscope::app::hangup::Terminals;
use turnscope::app::{App, AppError, ConfigSource, ReloadCause};
use turnscope::bridge::openai::standalone::StandaloneOptions;
use turnscope::bridge::xiaozhi::command::RelayOptions;
use turnscope::bridge::xiaozhi::{BridgeSettings, XiaozhiBridges, command};
use turnscope::config::{Config, ConfigError, check_seconds};
use turnscope::model::{EmbeddedModel, ScriptSettings};
use turnscope::observe::Bus;
use turnscope::observe::recorder::Recording;
use turnscope::server::viewers::{open_pieces, retell_reopened};
use turnscope_console::Theme;

/// `turnscope config example`: the annotated example config of the repository, built in so an
/// installed binary has it.
const EXAMPLE_CONFIG: &str = include_str!("../examples/turnscope.toml");

/// mimalloc instead of the system allocator: the request and token paths allocate many small,
/// short-lived objects, where glibc's malloc showed up as the largest cost in profiles.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    let started = Instant::now();
    let cli = Cli::parse();
    if let Err(e) = cut_events_into_pieces(&cli) {
        note(format_args!("turnscope: {e}"));
        return std::process::ExitCode::from(2);
    }
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime starts");
    // `turnscope test` has exit codes of its own (0 passed, 1 failed, 2 could not run).
    if let Cli {
        command: Some(Command::Test(args)),
        config,
        serve,
    } = cli
    {
        logging::init(true);
        return runtime.block_on(test_run::main(args, config, serve));
    }
    // So does `turnscope tools` (0 ok, 1 the tool answered an error, 2 could not call).
    if let Cli {
        command: Some(Command::Tools { action }),
        config,
        serve,
    } = cli
    {
        // One run, no retry to wait for: a source's failures are said once, by the command
        // (which sources were down), not as the server's "retrying in …" lines.
        logging::init_at("warn,turnscope::tools::mcp_source=error");
        return runtime.block_on(tools_cmd::main(action, config, &serve));
    }
    match runtime.block_on(run(cli, started)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            note(format_args!("turnscope: {}", error_text(&e)));
            // A store that cannot be used (one that cannot be reached or opened, or a URL that
            // is none) is the operator's to fix before anything runs; bad arguments exit as
            // clap's do.
            if matches!(e.downcast_ref::<AppError>(), Some(AppError::Store(_)))
                || e.downcast_ref::<ConfigError>()
                    .is_some_and(ConfigError::is_store_url)
                || e.downcast_ref::<BadArguments>().is_some()
            {
                std::process::ExitCode::from(2)
            } else {
                std::process::ExitCode::FAILURE
            }
        }
    }
}

/// Arguments that parse but do not fit together (a replica named twice): exit 2, as clap's
/// own argument errors.
#[derive(Debug)]
struct BadArguments(String);

impl std::fmt::Display for BadArguments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadArguments {}

/// An error and its causes in one line, each said once and without Rust type names: `{e:#}`
/// would repeat a cause its message already quotes (`cannot read config file x: No such file or
/// directory (os error 2); check …: No such file or directory (os error 2)`).
pub(crate) fn error_text(e: &anyhow::Error) -> String {
    turnscope::mcp::connect::chain(e.as_ref())
}

async fn run(cli: Cli, started: Instant) -> anyhow::Result<()> {
    match cli.command {
        Some(Command::Model {
            action: ModelAction::Serve { port, pace, words },
        }) => {
            logging::init(true);
            check_seconds("--pace", pace, true).map_err(anyhow::Error::msg)?;
            let model = EmbeddedModel::start(port, ScriptSettings { pace, words })
                .await
                .with_context(|| {
                    format!("cannot listen on 127.0.0.1:{port}; pick another --port (0 = any)")
                })?;
            println!("turnscope scripted model ready: {}", model.base_url());
            wait_for_signal().await;
            Ok(())
        }
        Some(Command::Bench(args)) => {
            logging::init(true);
            // A signal ends the bench by dropping its future: that kills the servers, replicas,
            // Redis and HAProxy it started (each is `kill_on_drop`) and removes their scratch
            // directories, which a SIGTERM's default action (the process gone at once) skipped.
            // Caught from before the bench starts anything, so no signal finds it unhandled.
            let mut signals = Signals::new()?;
            tokio::select! {
                result = bench::run(args) => result,
                _ = signals.next() => anyhow::bail!(
                    "bench stopped by a signal: the servers it started are stopped and the rows \
                     printed so far stand; run it again for the rest"
                ),
            }
        }
        Some(Command::Bridge {
            kind: BridgeCommand::Xiaozhi(args),
        }) => {
            logging::init_at("warn,turnscope=info");
            bridge_xiaozhi(args.into(), &cli.serve, cli.config.as_deref(), started).await
        }
        Some(Command::Bridge {
            kind: BridgeCommand::Openai(args),
        }) => {
            logging::init_at("warn,turnscope=info");
            bridge_openai(args.into(), cli.serve.events.as_deref()).await
        }
        Some(Command::Config {
            action: ConfigAction::Example,
        }) => {
            print!("{EXAMPLE_CONFIG}");
            Ok(())
        }
        Some(Command::Replicas {
            action: ReplicasAction::Haproxy { replicas, whole },
        }) => {
            let lines = if whole {
                turnscope::sessions::haproxy::whole_config(&replicas)
            } else {
                turnscope::sessions::haproxy::backend_lines(&replicas)
            }
            .map_err(|e| anyhow::Error::new(BadArguments(e)))?;
            print!("{lines}");
            Ok(())
        }
        Some(Command::Dev {
            action: DevAction::McpClient { call, args, url },
        }) => {
            logging::init(true);
            mcp_client(&url, call.as_deref(), &args).await
        }
        None => {
            let overrides = cli.serve.overrides();
            let (config, path) = Config::load(cli.config.as_deref(), &overrides)?;
            let source = ConfigSource {
                path,
                overrides,
                default_store: Some(DEFAULT_STORE.into()),
            };
            if cli.serve.headless {
                logging::init(true);
                // A headless server draws nothing, but a theme its config names is checked
                // now: a typo showed only on the laptop of whoever next opened a console.
                if let Err(e) = Theme::resolve_chosen(
                    source.overrides.theme.as_deref(),
                    config.console.theme.as_deref(),
                    || {
                        source
                            .path
                            .as_deref()
                            .map(|p| Config::place_of(p, "console.theme"))
                    },
                    true,
                ) {
                    eprintln!("turnscope: warning: {e} (a console on this config would refuse it)");
                }
                headless(&config, Some(source), cli.serve.events.as_deref(), started).await
            } else {
                logging::init(false);
                let theme = chosen_theme(
                    source.overrides.theme.as_deref(),
                    &config,
                    source.path.as_deref(),
                )?;
                console(&config, theme, source, cli.serve.events.as_deref()).await
            }
        }
        Some(Command::Sessions(args)) => {
            logging::init(true);
            sessions_cmd::run(args, cli.config.as_deref(), &cli.serve).await
        }
        Some(Command::Test(_) | Command::Tools { .. }) => {
            unreachable!("main() runs `turnscope test` and `turnscope tools` before this")
        }
        Some(Command::Replay { file, theme }) => {
            logging::init(false);
            let (config, path) = Config::load(cli.config.as_deref(), &cli.serve.overrides())?;
            turnscope_console::state::budget::Budget::set_process_default(config.console.max_mib);
            // The main `--theme` (before the subcommand) is a flag too, not `[console] theme`.
            let flag = theme.as_deref().or(cli.serve.theme.as_deref());
            let theme = chosen_theme(flag, &config, path.as_deref())?;
            Ok(turnscope_console::run::replay::run(&file, theme).await?)
        }
        Some(Command::Attach {
            url,
            whisker,
            auth_token,
            events,
            theme,
            ..
        }) => {
            logging::init(false);
            anyhow::ensure!(
                url.is_some() || whisker.is_some(),
                "attach to what? Give the bot's MCP URL (turnscope attach http://127.0.0.1:7870/mcp), \
                 pipecat's whisker feed (--whisker ws://localhost:9090), or both"
            );
            // Read before the terminal is checked or anything connects: a mistyped address
            // is said as such, wherever the command runs.
            let url = url
                .as_deref()
                .map(turnscope::attach::address::mcp_url)
                .transpose()
                .map_err(anyhow::Error::msg)?;
            let whisker = whisker
                .as_deref()
                .map(turnscope::attach::address::whisker_url)
                .transpose()
                .map_err(anyhow::Error::msg)?;
            // Its `[console]` (memory, theme) as replay and the local console read it: a
            // viewer kept 16 MiB and the dark theme whatever the file said.
            let (config, path) = Config::load(cli.config.as_deref(), &cli.serve.overrides())?;
            turnscope_console::state::budget::Budget::set_process_default(config.console.max_mib);
            let flag = theme.as_deref().or(cli.serve.theme.as_deref());
            let theme = chosen_theme(flag, &config, path.as_deref())?;
            anyhow::ensure!(
                !events_on_stdout(events.as_deref()),
                "--events - writes the events to stdout, where the attached console draws; give \
                 --events a file (turnscope replay FILE opens it)"
            );
            turnscope_console::run::terminal::check()?;
            let options = turnscope::attach::AttachOptions {
                url,
                token: auth_token,
                whisker,
            };
            Ok(turnscope_console::run::attach::run(options, theme, events.as_deref()).await?)
        }
    }
}

/// The theme a console runs with: `--theme` (`flag`) when given, else `[console] theme` of
/// `config`, read from the file `file` (a theme it names that does not load says so, and where).
fn chosen_theme(
    flag: Option<&str>,
    config: &Config,
    file: Option<&std::path::Path>,
) -> Result<Theme, turnscope_console::theme::ThemeError> {
    Theme::resolve_chosen(
        flag,
        config.console.theme.as_deref(),
        || file.map(|p| Config::place_of(p, "console.theme")),
        turnscope_console::no_color(),
    )
}

/// Where the lines a person or a script reads at start (the ready line, the bridges) go:
/// stdout, unless `--events -` made stdout the event stream. Then every line on stdout is one
/// JSON event (so `| jq` works) and these lines go to stderr. Every reader of the ready line
/// (tests, the interop suite, scripts) reads stdout without `--events -`, so none changes; a
/// `ready` event instead would have added a type every events reader must know, for what the
/// `replica` event and `/healthz` already carry.
struct Announce {
    to_stderr: bool,
}

impl Announce {
    fn new(events: Option<&std::path::Path>) -> Self {
        Self {
            to_stderr: events_on_stdout(events),
        }
    }

    fn line(&self, text: &str) {
        if self.to_stderr {
            eprintln!("{text}");
        } else {
            println!("{text}");
        }
    }
}

/// `--events-max-mib` (the main mode's, or `attach`'s): every recording this process starts
/// is cut into pieces of that size. It needs `--events` with a file.
fn cut_events_into_pieces(cli: &Cli) -> Result<(), String> {
    let (events, mib) = match &cli.command {
        Some(Command::Attach {
            events,
            events_max_mib,
            ..
        }) => (events.as_deref(), *events_max_mib),
        _ => (cli.serve.events.as_deref(), cli.serve.events_max_mib),
    };
    let Some(mib) = mib else {
        return Ok(());
    };
    match events {
        None => Err(format!(
            "--events-max-mib {mib} cuts the --events file into pieces, and no --events FILE \
             was given: add one, or drop --events-max-mib"
        )),
        Some(path) if events_on_stdout(Some(path)) => Err(format!(
            "--events-max-mib {mib} cuts a file into pieces, and --events - writes to stdout: \
             cut it where it goes (| split -C {mib}M), or give --events a file"
        )),
        Some(_) => {
            Recording::cut_into_pieces_of(mib << 20);
            Ok(())
        }
    }
}

/// Whether `--events` names stdout.
fn events_on_stdout(events: Option<&std::path::Path>) -> bool {
    events == Some(std::path::Path::new("-"))
}

/// The console over a freshly started app (the default mode), reloading `source` when it
/// changes, on SIGHUP and on its `R` key.
async fn console(
    config: &Config,
    theme: Theme,
    source: ConfigSource,
    events: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    turnscope_console::state::budget::Budget::set_process_default(config.console.max_mib);
    let config = &with_default_store(config);
    anyhow::ensure!(
        !events_on_stdout(events),
        "--events - writes the events to stdout, where the console draws; add --headless, or give \
         --events a file (turnscope replay FILE opens it)"
    );
    turnscope_console::run::terminal::check()?;
    let bus = Bus::default();
    // Listening before the app starts keeps its start-up warnings (bridges) for the Log pane.
    let early = turnscope_console::listen_early(&bus);
    let recording = Recording::start(&bus, events).await?;
    let mut app = App::start(config, bus).await?;
    recording.retell_with(retell_reopened(app.sessions.clone()));
    recording.open_pieces_with(open_pieces(app.sessions.clone()));
    app.reload_from(source);
    if let Err(e) = app.watch_config() {
        app.bus.publish(turnscope::observe::Event::Log {
            at_ms: turnscope::observe::event::now_us() / 1000,
            level: "warn".into(),
            message: e.to_string(),
        });
    }
    let result = turnscope_console::run_with(app, theme, early).await;
    recording.finish().await;
    Ok(result?)
}

/// The server with no console. With a `source`, the config is reloaded when its file changes
/// and on SIGHUP (one stderr line each); SIGHUP from a terminal that hung up ends the server
/// as SIGTERM does.
async fn headless(
    config: &Config,
    source: Option<ConfigSource>,
    events: Option<&std::path::Path>,
    started: Instant,
) -> anyhow::Result<()> {
    let config = &with_default_store(config);
    let terminals = Terminals::now();
    let mut signals = Signals::new()?;
    let bus = Bus::default();
    let recording = Recording::start(&bus, events).await?;
    if let Some(note) = recording.kept_aside() {
        eprintln!("turnscope: {note}");
    }
    let mut app = App::start(config, bus).await?;
    recording.retell_with(retell_reopened(app.sessions.clone()));
    recording.open_pieces_with(open_pieces(app.sessions.clone()));
    let reloader = app.reloader();
    reloader.on_reload(std::sync::Arc::new(|event| {
        use std::io::Write;
        // One line, and never a panic when the terminal is gone.
        let _ = writeln!(std::io::stderr(), "turnscope: {}", event.summary());
    }));
    if let Some(source) = source {
        app.reload_from(source);
        match app.watch_config() {
            Ok(()) => {
                if let Some(file) = reloader.file() {
                    if file.exists() {
                        eprintln!(
                            "config: {} is watched; a change applies from the next turn (SIGHUP reloads too)",
                            file.display()
                        );
                    } else {
                        eprintln!(
                            "config: none yet; {} is watched, so creating it applies it from the next turn \
                             (turnscope config example > {} writes an annotated one)",
                            file.display(),
                            file.display()
                        );
                    }
                }
            }
            Err(e) => eprintln!("turnscope: {e}"),
        }
    }
    let url = app.server.mcp_url();
    let replica = app.sessions.replica();
    let announce = Announce::new(events);
    announce.line(&format!(
        "turnscope ready: MCP {url} · replica {} (handles end in {}) · model: {} · store: {} · ready in {:.1} ms",
        replica.id(),
        replica.tag(),
        app.model.describe(),
        app.sessions.store().describe(),
        started.elapsed().as_secs_f64() * 1000.0
    ));
    if !app.sessions.store().durable() {
        eprintln!(
            "store: memory{}: conversations end when turnscope stops",
            if config.server.port == 0 && config.store.url.as_deref() == Some("default") {
                " (--port 0 has no fixed address for the default file; --store sqlite:PATH keeps them)"
            } else {
                ""
            }
        );
    }
    if let Some(registry) = &app.tool_registry {
        for line in turnscope::tools::registry::describe_sources(registry) {
            eprintln!("tool source {line}");
        }
    }
    // `claude mcp add` writes Claude Code's `local` scope by default: this folder only. With a
    // token, the command carries its header (the token itself is not printed: stderr ends up
    // in CI logs).
    let token = config.server.auth_token.is_some();
    let header = if token {
        " --header \"Authorization: Bearer $TOKEN\""
    } else {
        ""
    };
    // `--header` takes several values: after the name and URL, or it swallows them.
    eprintln!(
        "connect Claude Code (this folder only): claude mcp add --transport http turnscope {url}{header}"
    );
    eprintln!(
        "  or for every folder (user scope): claude mcp add --scope user --transport http turnscope {url}{header}"
    );
    if app.sessions.store().shared() {
        // A replica of several: its own URL reaches it alone, not its conversations' failover.
        eprintln!(
            "  behind a load balancer (a store the replicas share): give the balancer's URL instead of this replica's"
        );
    }
    eprintln!(
        "watch it (any number of consoles): turnscope attach {url}{}",
        if token {
            " --auth-token \"$TOKEN\""
        } else {
            ""
        }
    );
    if token {
        eprintln!("  ($TOKEN: the --auth-token this server was given; it is not printed)");
    }
    eprintln!(
        "OpenAI-compatible: {}/v1 (GET /v1/tools, POST /v1/execute, POST /v1/chat/completions)",
        url.trim_end_matches("/mcp")
    );
    for b in app.bridges.bridges() {
        let s = b.status();
        announce.line(&format!(
            "turnscope xiaozhi bridge {}: {} -> {}",
            s.name, s.upstream, s.endpoint
        ));
    }
    loop {
        match signals.next().await {
            Signal::Stop => break,
            Signal::Hangup if terminals.hung_up() => {
                note(format_args!("turnscope: the terminal hung up"));
                break;
            }
            Signal::Hangup => {
                reloader.reload(ReloadCause::Signal).await;
            }
        }
    }
    // On a store the replicas share, a draining replica hands its conversations over: the
    // balancer stops sending it calls (503), and those that still reach it are served.
    let refused = if app.sessions.store().shared() {
        "/healthz answers 503 \"draining\" (the balancer sends calls to the other replicas, which go on \
         with its conversations from the shared store, and answer its MCP tasks' polls from their \
         records there), calls that still reach it are served, turns in flight finish"
    } else {
        "/healthz answers 404 \"draining\", start and new lines are refused, turns in flight finish \
         and results of MCP tasks wait for their client's poll"
    };
    note(format_args!(
        "turnscope: draining replica {}: {refused} (at most {} s; a second signal stops at once)",
        app.sessions.replica().id(),
        app.drain_bound().await.as_secs_f64()
    ));
    let bound = app.drain_bound().await;
    let end = tokio::select! {
        drained = app.drain() => if drained { DrainEnd::Drained } else { DrainEnd::Bound },
        _ = signals.next() => DrainEnd::Signal,
    };
    note(format_args!(
        "turnscope: shutting down: {}; ending every session",
        match end {
            DrainEnd::Drained =>
                "no turn in flight, no task result unread, every answer written out",
            DrainEnd::Bound => {
                "the drain bound passed (a turn still ran, a task's result was not polled, or \
                 an answer was not yet written out)"
            }
            DrainEnd::Signal => "a second signal came",
        }
    ));
    let stopped = match end {
        DrainEnd::Signal => app.shutdown_now().await,
        DrainEnd::Drained | DrainEnd::Bound => app.shutdown().await,
    };
    if let Some(line) = cut_line(stopped, end, bound) {
        note(format_args!("{line}"));
    }
    recording.finish().await;
    Ok(())
}

/// How a headless drain ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DrainEnd {
    /// Every turn finished and was read, every answer written out.
    Drained,
    /// `drain_seconds` passed first.
    Bound,
    /// A second signal came first.
    Signal,
}

/// The stderr line saying how many turns in flight the stop cut (none when it cut none): one
/// line of its own, starting `turnscope: cut N turn`, so a script or CI can tell a drain that
/// lost a turn's reply from one that did not (the exit status stays 0: the server did what
/// the signal asked).
fn cut_line(stopped: turnscope::app::Stopped, end: DrainEnd, bound: Duration) -> Option<String> {
    let n = stopped.cut;
    if n == 0 {
        return None;
    }
    let turns = if n == 1 { "turn" } else { "turns" };
    let why = match end {
        DrainEnd::Signal => "a second signal".to_string(),
        DrainEnd::Bound | DrainEnd::Drained => {
            format!("the drain bound ({} s)", bound.as_secs_f64())
        }
    };
    let fate = if stopped.kept {
        if n == 1 {
            "its line got no reply; the store keeps the conversation, and the next chat on its \
             handle (an empty line too) tells its client so, once"
        } else {
            "their lines got no reply; the store keeps the conversations, and the next chat on \
             each handle (an empty line too) tells its client so, once"
        }
    } else if n == 1 {
        "its conversation ends with this process (the store is memory; --store sqlite:PATH \
         keeps conversations across a restart)"
    } else {
        "their conversations end with this process (the store is memory; --store sqlite:PATH \
         keeps conversations across a restart)"
    };
    let advice = match end {
        DrainEnd::Signal => "",
        DrainEnd::Bound | DrainEnd::Drained => {
            ". Raise --drain-seconds ([server] drain_seconds) to let turns this long finish"
        }
    };
    Some(format!(
        "turnscope: cut {n} {turns} in flight at {why}: {fate}{advice}"
    ))
}

/// The `[store] url` of the file per listening address (see `turnscope::store::url`).
const DEFAULT_STORE: &str = "default";

/// The console and `--headless` keep conversations in the default file unless `--store` or
/// `[store] url` says otherwise.
fn with_default_store(config: &Config) -> Config {
    let mut config = config.clone();
    if config.store.url.is_none() {
        config.store.url = Some(DEFAULT_STORE.into());
    }
    config
}

/// `turnscope bridge xiaozhi`: relays on their own, or the main mode with bridges.
async fn bridge_xiaozhi(
    args: RelayOptions,
    serve: &ServeArgs,
    config: Option<&std::path::Path>,
    started: Instant,
) -> anyhow::Result<()> {
    let events = serve.events.as_deref();
    let overrides = serve.overrides();
    let env = |name: &str| std::env::var(name).ok();
    let (plan, warnings) = command::plan(&args, config, &overrides, &env)?;
    for w in &warnings {
        tracing::warn!("{w}");
    }
    let relays = match plan {
        // A bridge given on the command line is not in the file: no reload from it.
        command::Plan::App(config) => {
            return headless(&config, None, events, started).await;
        }
        command::Plan::Relays(relays) => relays,
    };
    let bus = Bus::default();
    let recording = Recording::start(&bus, events).await?;
    if let Some(note) = recording.kept_aside() {
        eprintln!("turnscope: {note}");
    }
    let settings = BridgeSettings::default();
    let announce = Announce::new(events);
    for r in &relays {
        announce.line(&format!(
            "turnscope xiaozhi bridge {}: {} -> {}",
            r.name,
            turnscope::mcp::spec::label(&r.server),
            r.endpoint.shown()
        ));
    }
    let bridges = XiaozhiBridges::start(
        relays.into_iter().map(|r| r.build(&settings)).collect(),
        &bus,
    );
    wait_for_signal().await;
    eprintln!(
        "turnscope: shutting down: closing {} endpoint socket(s) and stopping their servers",
        bridges.len()
    );
    bridges.shutdown().await;
    recording.finish().await;
    Ok(())
}

/// `turnscope bridge openai`: one MCP server as `/v1/tools` + `/v1/execute`.
async fn bridge_openai(
    args: StandaloneOptions,
    events: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    use turnscope::bridge::openai::standalone;
    let bus = Bus::default();
    let recording = Recording::start(&bus, events).await?;
    if let Some(note) = recording.kept_aside() {
        eprintln!("turnscope: {note}");
    }
    let bridge = standalone::start(&args, bus).await?;
    Announce::new(events).line(&bridge.ready_line());
    wait_for_signal().await;
    eprintln!("turnscope: shutting down the openai bridge and its server");
    bridge.shutdown().await;
    recording.finish().await;
    Ok(())
}

/// `turnscope dev mcp-client`: one tool source, connected, listed, maybe called, closed.
async fn mcp_client(url: &str, call: Option<&str>, args: &str) -> anyhow::Result<()> {
    use turnscope::config::{McpServerConfig, TransportKind};
    use turnscope::tools::mcp_source::{McpSource, SourceOptions, SourceStatus};
    use turnscope::tools::policy::Policy;
    let args: serde_json::Value = serde_json::from_str(args).with_context(|| {
        format!("--args {args:?} is not JSON; expected an object such as '{{\"a\": 1}}'")
    })?;
    anyhow::ensure!(
        args.is_object(),
        "--args must be a JSON object, e.g. '{{\"a\": 1}}'"
    );
    // As `[[mcp_servers]]` would say it, so every default of a tool source applies.
    let config: McpServerConfig =
        serde_json::from_value(serde_json::json!({"name": "server", "url": url}))?;
    anyhow::ensure!(
        config.transport_kind() == TransportKind::Http,
        "{url} is not a streamable HTTP URL; give the server's MCP endpoint (http://host:port/mcp)"
    );
    let source = McpSource::start(
        &config,
        &std::sync::Arc::new(Policy::open()),
        // Named apart from the bot's own tool sources, so a turnscope server it connects to
        // does not list its sessions as if the bot opened them.
        SourceOptions::default().with_client_name("turnscope-dev-mcp-client"),
        &Bus::default(),
    )
    .map_err(anyhow::Error::msg)?;
    source.first_attempt().await;
    let outcome = match source.status() {
        SourceStatus::Up { .. } => {
            let names: Vec<String> = source.tools().iter().map(|t| t.original.clone()).collect();
            println!("connected to {url}; tools: {}", names.join(", "));
            match call {
                Some(name) => {
                    let outcome = source.call(name, args).await;
                    println!("{name}: {}", outcome.text);
                    if outcome.is_error {
                        Err(anyhow::anyhow!(
                            "the call to {name} failed: {}",
                            outcome.text
                        ))
                    } else {
                        Ok(())
                    }
                }
                None => Ok(()),
            }
        }
        other => Err(anyhow::anyhow!(
            "could not connect to {url}: {other:?}; check the URL and that the server is up"
        )),
    };
    source.close().await;
    outcome
}

/// Writes one line to stderr. A stderr that is gone (the terminal hung up) loses the line
/// rather than panicking, as `eprintln!` would.
fn note(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// What a signal asks of a headless server.
enum Signal {
    /// Ctrl-C or SIGTERM: drain and stop.
    Stop,
    /// SIGHUP: reload the config, unless the terminal hung up.
    Hangup,
}

/// The signals a headless server acts on: Ctrl-C, SIGTERM and SIGHUP, caught from the moment
/// this is made. Made before a ready line, so a signal that follows the line at once is a clean
/// stop, not the default action (which kills the process before it drains; a test that stopped
/// the server right after start saw that).
struct Signals {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> anyhow::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Self {
                term: signal(SignalKind::terminate()).context("install the SIGTERM handler")?,
                interrupt: signal(SignalKind::interrupt()).context("install the SIGINT handler")?,
                hup: signal(SignalKind::hangup()).context("install the SIGHUP handler")?,
            })
        }
        #[cfg(not(unix))]
        Ok(Self {})
    }

    async fn next(&mut self) -> Signal {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.interrupt.recv() => Signal::Stop,
                _ = self.term.recv() => Signal::Stop,
                _ = self.hup.recv() => Signal::Hangup,
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            Signal::Stop
        }
    }
}

/// Waits for Ctrl-C, SIGTERM or SIGHUP (nothing a caller of this reloads).
async fn wait_for_signal() {
    match Signals::new() {
        Ok(mut signals) => {
            signals.next().await;
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
