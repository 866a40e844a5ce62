//! `turnscope bridge xiaozhi` and `turnscope bridge openai`: the bridges run as commands of
//! their own.

use std::time::Instant;

use turnscope::bridge::openai::standalone::StandaloneOptions;
use turnscope::bridge::xiaozhi::command::RelayOptions;
use turnscope::bridge::xiaozhi::{BridgeSettings, XiaozhiBridges, command};
use turnscope::observe::Bus;
use turnscope::observe::recorder::Recording;

use crate::cli::ServeArgs;
use crate::serve::{Announce, headless};
use crate::signals::wait_for_signal;

/// `turnscope bridge xiaozhi`: relays on their own, or the main mode with bridges.
pub(crate) async fn bridge_xiaozhi(
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
pub(crate) async fn bridge_openai(
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
