//! `turnscope-dev`: the tools turnscope's own tests, benches and interop suite run, kept out
//! of the `turnscope` binary users install (it links neither the fixture MCP server nor a
//! pseudo-terminal library): `fixture-server` serves the project's fixture MCP server, `pty`
//! runs a program in a pseudo-terminal of a given size and discards what it draws (how the
//! benches attach a real console to a server they measure).

mod fixture;
mod pty;

use clap::{Parser, Subcommand};

/// turnscope-dev: the fixture MCP server and the pseudo-terminal driver of turnscope's tests
/// and benches.
#[derive(Debug, Parser)]
#[command(name = "turnscope-dev", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The fixture MCP server (small deterministic tools), for tests and benches.
    FixtureServer(fixture::FixtureArgs),
    /// Run a program in a pseudo-terminal of ROWS×COLS, reading and discarding its output as
    /// a terminal would; exits with the program's status, and ends the program on SIGTERM.
    Pty(pty::PtyArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TURNSCOPE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime starts");
    let result = runtime.block_on(async {
        match cli.command {
            Command::FixtureServer(args) => fixture::run(args).await.map(|()| 0),
            Command::Pty(args) => pty::run(args).await,
        }
    });
    match result {
        Ok(code) => std::process::ExitCode::from(code),
        Err(e) => {
            eprintln!("turnscope-dev: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Waits for Ctrl-C or SIGTERM.
async fn wait_for_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM handler installs");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
