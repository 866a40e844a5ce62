//! The turnscope binary: the console by default, `--headless` for CI, and subcommands. It only
//! parses the command line, sets up logging and dispatches to the module of each command
//! (`serve` the main mode, `bridge_cmd`, `attach_cmd`, …); errors reach the user here.

mod attach_cmd;
mod bench;
mod bridge_cmd;
mod cli;
#[cfg(test)]
mod cli_reference;
mod dev_cmd;
mod log_format;
mod logging;
mod serve;
mod sessions_cmd;
mod signals;
mod test_run;
mod tools_cmd;

use std::time::Instant;

use anyhow::Context as _;
use clap::Parser;
use cli::{BridgeCommand, Cli, Command, ConfigAction, DevAction, ModelAction, ReplicasAction};
use signals::{Signals, note, wait_for_signal};
use turnscope::app::AppError;
use turnscope::config::{Config, ConfigError, check_seconds};
use turnscope::model::{EmbeddedModel, ScriptSettings};

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
    if let Err(e) = serve::cut_events_into_pieces(&cli) {
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
            bridge_cmd::bridge_xiaozhi(args.into(), &cli.serve, cli.config.as_deref(), started)
                .await
        }
        Some(Command::Bridge {
            kind: BridgeCommand::Openai(args),
        }) => {
            logging::init_at("warn,turnscope=info");
            bridge_cmd::bridge_openai(args.into(), cli.serve.events.as_deref()).await
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
            dev_cmd::mcp_client(&url, call.as_deref(), &args).await
        }
        None => serve::run(&cli.serve, cli.config.as_deref(), started).await,
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
            let theme = serve::chosen_theme(flag, &config, path.as_deref())?;
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
            let args = attach_cmd::AttachArgs {
                url,
                whisker,
                auth_token,
                events,
                theme,
            };
            attach_cmd::run(args, cli.config.as_deref(), &cli.serve).await
        }
    }
}
