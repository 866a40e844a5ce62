//! `turnscope replay FILE`: the console over a file written by `--events`, read-only.
//!
//! The whole file is folded into the state before the first frame, so every pane shows the
//! run as it ended; lines that cannot be read are counted and the first one is named.

use std::path::Path;

use tokio_util::sync::CancellationToken;

use super::app::Console;
use super::state::{ConsoleState, Header, Source};
use super::theme::Theme;
use turnscope::observe::recorder::read_events;

/// Builds the read-only console state of an events file's text.
pub fn console_of(text: &str, file: &str, theme: Theme) -> anyhow::Result<Console> {
    let (events, problems) = read_events(text);
    if events.is_empty() {
        match problems.first() {
            Some(first) => anyhow::bail!(
                "{file}: no event could be read ({} bad line{}; first: {first}); give a file written by `turnscope --events FILE`",
                problems.len(),
                if problems.len() == 1 { "" } else { "s" }
            ),
            None => anyhow::bail!(
                "{file}: the file holds no events; give a file written by `turnscope --events FILE` after a run"
            ),
        }
    }
    let mut state = ConsoleState::new(Header {
        mcp_url: None,
        model: String::new(),
        bridges: "not recorded".into(),
        source: Source::Replay {
            file: file.to_string(),
            problems,
        },
    });
    state.tools_note = Some("Tools are not recorded in an events file.".into());
    for event in &events {
        state.apply(event);
    }
    state.age_rows();
    let mut console = Console::new(state, theme, true);
    console.settle();
    Ok(console)
}

/// Opens the console over `path` until the person quits.
pub async fn run(path: &Path, theme: Theme) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        anyhow::anyhow!(
            "cannot read events file {}: {e}; give the file that `turnscope --events FILE` wrote",
            path.display()
        )
    })?;
    let mut console = console_of(&text, &path.display().to_string(), theme)?;
    let (mut terminal, guard) = super::terminal::enter()?;
    let input = crossterm::event::EventStream::new();
    let result = super::live::event_loop(
        &mut console,
        &mut terminal,
        None,
        input,
        CancellationToken::new(),
    )
    .await;
    drop(guard);
    result
}
