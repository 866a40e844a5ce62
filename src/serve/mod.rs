//! The main mode (`turnscope` with no subcommand): the console, or `--headless`. One file per
//! runner, what they share beside them.

mod console;
mod drain;
mod events;
mod headless;
mod settings;

use std::time::Instant;

use turnscope::app::ConfigSource;
use turnscope::config::Config;
use turnscope_console::Theme;

use crate::cli::ServeArgs;
use crate::logging;

pub(crate) use events::{Announce, cut_events_into_pieces, events_on_stdout};
pub(crate) use headless::headless;
pub(crate) use settings::chosen_theme;

/// Runs the main mode with the flags `serve` over the config file `config_file` (the global
/// `--config`) until a signal or the person stops it.
pub(crate) async fn run(
    serve: &ServeArgs,
    config_file: Option<&std::path::Path>,
    started: Instant,
) -> anyhow::Result<()> {
    let overrides = serve.overrides();
    let (config, path) = Config::load(config_file, &overrides)?;
    let source = ConfigSource {
        path,
        overrides,
        default_store: Some(settings::DEFAULT_STORE.into()),
    };
    if serve.headless {
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
        headless(&config, Some(source), serve.events.as_deref(), started).await
    } else {
        logging::init(false);
        let theme = chosen_theme(
            source.overrides.theme.as_deref(),
            &config,
            source.path.as_deref(),
        )?;
        console::console(&config, theme, source, serve.events.as_deref()).await
    }
}
