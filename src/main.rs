//! The turnscope binary: the console by default, `--headless` for CI, and subcommands. It only
//! parses the command line, sets up logging and calls the library; errors reach the user here.

mod bench;
mod cli;
#[cfg(test)]
mod cli_reference;
mod sessions_cmd;
mod test_run;

use std::time::Instant;

use anyhow::Context as _;
use clap::Parser;
use cli::{
    BridgeCommand, Cli, Command, ConfigAction, DevAction, ModelAction, ReplicasAction, ServeArgs,
};
use tokio_util::sync::CancellationToken;
use turnscope::app::{App, AppError};
use turnscope::bridge::openai::standalone::StandaloneOptions;
use turnscope::bridge::xiaozhi::command::RelayOptions;
use turnscope::bridge::xiaozhi::{BridgeSettings, XiaozhiBridges, command, redact};
use turnscope::config::{Config, check_seconds};
use turnscope::model::{EmbeddedModel, ScriptSettings};
use turnscope::observe::Bus;
use turnscope::observe::recorder::Recording;
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
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime starts");
    // `turnscope test` has exit codes of its own (0 passed, 1 failed, 2 could not run).
    if let Cli {
        command: Some(Command::Test(args)),
        config,
        serve,
    } = cli
    {
        init_logging(true);
        return runtime.block_on(test_run::main(args, config, serve));
    }
    match runtime.block_on(run(cli, started)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("turnscope: {e:#}");
            // A store that cannot be used is the operator's to fix before anything runs.
            if matches!(e.downcast_ref::<AppError>(), Some(AppError::Store(_))) {
                std::process::ExitCode::from(2)
            } else {
                std::process::ExitCode::FAILURE
            }
        }
    }
}

fn init_logging(to_stderr: bool) {
    // rmcp's worker logs every failed connection attempt at error level; turnscope reports
    // those itself, once, with the server's name.
    init_logging_at(if to_stderr {
        "warn,rmcp::transport::worker=off"
    } else {
        "off"
    });
}

/// Logs to stderr at `default` unless `TURNSCOPE_LOG` says otherwise; endpoint tokens
/// (`token=…`) are masked in every line, third-party ones included.
fn init_logging_at(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("TURNSCOPE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(redact::RedactingWriter::new(std::io::stderr))
        .try_init();
}

async fn run(cli: Cli, started: Instant) -> anyhow::Result<()> {
    match cli.command {
        Some(Command::Model {
            action: ModelAction::Serve { port, pace, words },
        }) => {
            init_logging(true);
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
            init_logging(true);
            bench::run(args).await
        }
        Some(Command::Bridge {
            kind: BridgeCommand::Xiaozhi(args),
        }) => {
            init_logging_at("warn,turnscope=info");
            bridge_xiaozhi(args.into(), &cli.serve, cli.config.as_deref(), started).await
        }
        Some(Command::Bridge {
            kind: BridgeCommand::Openai(args),
        }) => {
            init_logging_at("warn,turnscope=info");
            bridge_openai(args.into(), cli.serve.events.as_deref()).await
        }
        Some(Command::Config {
            action: ConfigAction::Example,
        }) => {
            print!("{EXAMPLE_CONFIG}");
            Ok(())
        }
        Some(Command::Replicas {
            action: ReplicasAction::Haproxy { replicas },
        }) => {
            let lines = turnscope::sessions::haproxy::backend_lines(&replicas)
                .map_err(anyhow::Error::msg)?;
            print!("{lines}");
            Ok(())
        }
        Some(Command::Dev {
            action: DevAction::FixtureServer { stdio, http, sse },
        }) => {
            init_logging(true);
            fixture(stdio, http, sse).await
        }
        Some(Command::Dev {
            action: DevAction::McpClient { call, args, url },
        }) => {
            init_logging(true);
            mcp_client(&url, call.as_deref(), &args).await
        }
        None => {
            let (config, _) = Config::load(cli.config.as_deref(), &cli.serve.overrides())?;
            if cli.serve.headless {
                init_logging(true);
                headless(&config, cli.serve.events.as_deref(), started).await
            } else {
                init_logging(false);
                console(&config, cli.serve.events.as_deref()).await
            }
        }
        Some(Command::Sessions(args)) => {
            init_logging(true);
            sessions_cmd::run(args, cli.config.as_deref(), &cli.serve).await
        }
        Some(Command::Test(_)) => unreachable!("main() runs `turnscope test` before this"),
        Some(Command::Replay { file, theme }) => {
            init_logging(false);
            let (config, _) = Config::load(cli.config.as_deref(), &cli.serve.overrides())?;
            let choice = theme.or(config.console.theme);
            let theme = Theme::resolve(choice.as_deref(), turnscope_console::no_color())?;
            Ok(turnscope_console::run::replay::run(&file, theme).await?)
        }
        Some(Command::Attach {
            url,
            whisker,
            auth_token,
            events,
            theme,
        }) => {
            init_logging(false);
            anyhow::ensure!(
                url.is_some() || whisker.is_some(),
                "attach to what? Give the bot's MCP URL (turnscope attach http://127.0.0.1:7870/mcp), \
                 pipecat's whisker feed (--whisker ws://localhost:9090), or both"
            );
            let theme = Theme::resolve(theme.as_deref(), turnscope_console::no_color())?;
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

/// The console over a freshly started app (the default mode).
async fn console(config: &Config, events: Option<&std::path::Path>) -> anyhow::Result<()> {
    let config = &with_default_store(config);
    let theme = Theme::resolve(
        config.console.theme.as_deref(),
        turnscope_console::no_color(),
    )?;
    turnscope_console::run::terminal::check()?;
    let bus = Bus::default();
    // Listening before the app starts keeps its start-up warnings (bridges) for the Log pane.
    let early = turnscope_console::listen_early(&bus);
    let recording = Recording::start(&bus, events).await?;
    let app = App::start(config, bus).await?;
    let result = turnscope_console::run_with(app, theme, early).await;
    recording.finish().await;
    Ok(result?)
}

async fn headless(
    config: &Config,
    events: Option<&std::path::Path>,
    started: Instant,
) -> anyhow::Result<()> {
    let config = &with_default_store(config);
    let bus = Bus::default();
    let recording = Recording::start(&bus, events).await?;
    let app = App::start(config, bus).await?;
    let url = app.server.mcp_url();
    let replica = app.sessions.replica();
    println!(
        "turnscope ready: MCP {url} · replica {} (handles end in {}) · model: {} · store: {} · ready in {:.1} ms",
        replica.id(),
        replica.tag(),
        app.model.describe(),
        app.sessions.store().describe(),
        started.elapsed().as_secs_f64() * 1000.0
    );
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
    // `claude mcp add` writes Claude Code's `local` scope by default: this folder only.
    eprintln!(
        "connect Claude Code (this folder only): claude mcp add --transport http turnscope {url}"
    );
    eprintln!(
        "  or for every folder (user scope): claude mcp add --scope user --transport http turnscope {url}"
    );
    eprintln!(
        "OpenAI-compatible: {}/v1 (GET /v1/tools, POST /v1/execute, POST /v1/chat/completions)",
        url.trim_end_matches("/mcp")
    );
    for b in app.bridges.bridges() {
        let s = b.status();
        println!(
            "turnscope xiaozhi bridge {}: {} -> {}",
            s.name, s.upstream, s.endpoint
        );
    }
    wait_for_signal().await;
    eprintln!(
        "turnscope: draining replica {}: /healthz answers 404 \"draining\", start and new lines are refused, \
         turns in flight finish (at most {} s; a second signal stops at once)",
        app.sessions.replica().id(),
        config.server.drain_seconds
    );
    let drained = tokio::select! {
        drained = app.drain() => drained,
        () = wait_for_signal() => false,
    };
    eprintln!(
        "turnscope: shutting down: {}; ending every session",
        if drained {
            "no turn in flight"
        } else {
            "the drain bound passed or a second signal came"
        }
    );
    app.shutdown().await;
    recording.finish().await;
    Ok(())
}

/// The console and `--headless` keep conversations in the default file unless `--store` or
/// `[store] url` says otherwise.
fn with_default_store(config: &Config) -> Config {
    let mut config = config.clone();
    if config.store.url.is_none() {
        config.store.url = Some("default".into());
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
        command::Plan::App(config) => {
            return headless(&config, events, started).await;
        }
        command::Plan::Relays(relays) => relays,
    };
    let bus = Bus::default();
    let recording = Recording::start(&bus, events).await?;
    let settings = BridgeSettings::default();
    for r in &relays {
        println!(
            "turnscope xiaozhi bridge {}: {} -> {}",
            r.name,
            turnscope::mcp::spec::label(&r.server),
            r.endpoint.shown()
        );
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
    let bridge = standalone::start(&args, bus).await?;
    println!("{}", bridge.ready_line());
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
        SourceOptions::default(),
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

async fn fixture(stdio: bool, http: Option<u16>, sse: Option<u16>) -> anyhow::Result<()> {
    use turnscope_fixture as fixture;
    let stop = CancellationToken::new();
    if stdio {
        return Ok(fixture::serve_stdio().await?);
    }
    let (port, is_sse) = match (http, sse) {
        (Some(p), None) => (p, false),
        (None, Some(p)) => (p, true),
        _ => anyhow::bail!(
            "dev fixture-server: give exactly one of --stdio, --http PORT, --sse PORT"
        ),
    };
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let addr = listener.local_addr()?;
    println!(
        "turnscope fixture ready: http://{addr}{}",
        if is_sse { "/sse" } else { "/mcp" }
    );
    let token = stop.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        token.cancel();
    });
    if is_sse {
        fixture::serve_sse(listener, stop).await?;
    } else {
        fixture::serve_http(listener, stop).await?;
    }
    Ok(())
}

/// Waits for Ctrl-C or SIGTERM.
async fn wait_for_signal() {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("SIGTERM handler installs");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}
