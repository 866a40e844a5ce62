//! `--headless`: the server with no console, its lines on stdout and stderr, and its drain on
//! a signal.

use std::time::Instant;

use turnscope::app::hangup::Terminals;
use turnscope::app::{App, ConfigSource, ReloadCause};
use turnscope::config::Config;
use turnscope::observe::Bus;
use turnscope::observe::recorder::Recording;
use turnscope::server::viewers::{open_pieces, retell_reopened};

use super::drain::DrainEnd;
use super::events::Announce;
use super::settings::with_default_store;
use crate::signals::{Signal, Signals, note};

/// The server with no console. With a `source`, the config is reloaded when its file changes
/// and on SIGHUP (one stderr line each); SIGHUP from a terminal that hung up ends the server
/// as SIGTERM does.
pub(crate) async fn headless(
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
    if let Some(line) = stopped.cut_line(end.cause(bound)) {
        note(format_args!("{line}"));
    }
    recording.finish().await;
    Ok(())
}
