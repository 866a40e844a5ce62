//! `turnscope-dev fixture-server`: the project's fixture MCP server (crate
//! `turnscope-fixture`) over stdio, streamable HTTP or legacy HTTP+SSE, for the tests that
//! need it in a process of its own and for `turnscope bench bridge`.

use clap::Args;
use tokio_util::sync::CancellationToken;

/// `turnscope-dev fixture-server` flags: exactly one transport.
#[derive(Debug, Args)]
pub struct FixtureArgs {
    /// Serve over stdio.
    #[arg(long, conflicts_with_all = ["http", "sse"])]
    stdio: bool,
    /// Serve streamable HTTP on 127.0.0.1:PORT at /mcp (0 = any free port).
    #[arg(long)]
    http: Option<u16>,
    /// Serve legacy HTTP+SSE on 127.0.0.1:PORT at /sse (0 = any free port).
    #[arg(long)]
    sse: Option<u16>,
}

/// Serves until stdin closes (stdio) or a signal comes (HTTP); HTTP prints a ready line
/// ending in the URL.
pub async fn run(args: FixtureArgs) -> anyhow::Result<()> {
    if args.stdio {
        return Ok(turnscope_fixture::serve_stdio().await?);
    }
    let (port, is_sse) = match (args.http, args.sse) {
        (Some(p), None) => (p, false),
        (None, Some(p)) => (p, true),
        _ => anyhow::bail!("fixture-server: give exactly one of --stdio, --http PORT, --sse PORT"),
    };
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let addr = listener.local_addr()?;
    println!(
        "turnscope fixture ready: http://{addr}{}",
        if is_sse { "/sse" } else { "/mcp" }
    );
    let stop = CancellationToken::new();
    let token = stop.clone();
    tokio::spawn(async move {
        super::wait_for_signal().await;
        token.cancel();
    });
    if is_sse {
        turnscope_fixture::serve_sse(listener, stop).await?;
    } else {
        turnscope_fixture::serve_http(listener, stop).await?;
    }
    Ok(())
}
