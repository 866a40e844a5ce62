//! `turnscope attach`: a console watching a bot this process does not run (a turnscope's MCP
//! URL, pipecat's whisker feed, or both).

use turnscope::config::Config;

use crate::cli::ServeArgs;
use crate::serve::{chosen_theme, events_on_stdout};

/// The command's own flags (`turnscope attach …`).
pub(crate) struct AttachArgs {
    /// The bot's MCP URL.
    pub(crate) url: Option<String>,
    /// pipecat's whisker feed.
    pub(crate) whisker: Option<String>,
    /// The bearer token of the bot's server.
    pub(crate) auth_token: Option<String>,
    /// `--events FILE`.
    pub(crate) events: Option<std::path::PathBuf>,
    /// `--theme` given after the subcommand.
    pub(crate) theme: Option<String>,
}

/// Runs the attached console until the person quits; `config_file` and `serve` are the global
/// `--config` and the main mode's flags (its `--theme`).
pub(crate) async fn run(
    args: AttachArgs,
    config_file: Option<&std::path::Path>,
    serve: &ServeArgs,
) -> anyhow::Result<()> {
    let AttachArgs {
        url,
        whisker,
        auth_token,
        events,
        theme,
    } = args;
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
    let (config, path) = Config::load(config_file, &serve.overrides())?;
    turnscope_console::state::budget::Budget::set_process_default(config.console.max_mib);
    let flag = theme.as_deref().or(serve.theme.as_deref());
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
