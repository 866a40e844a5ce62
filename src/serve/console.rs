//! The default mode: the console over a freshly started app.

use turnscope::app::{App, ConfigSource};
use turnscope::config::Config;
use turnscope::observe::Bus;
use turnscope::observe::recorder::Recording;
use turnscope::server::viewers::{open_pieces, retell_reopened};
use turnscope_console::Theme;

use super::events::events_on_stdout;
use super::settings::with_default_store;

/// The console over a freshly started app (the default mode), reloading `source` when it
/// changes, on SIGHUP and on its `R` key.
pub(crate) async fn console(
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
