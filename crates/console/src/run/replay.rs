//! `turnscope replay FILE`: the console over a file written by `--events`, read-only. The
//! whole file is folded before the first frame, so every pane shows the run as it ended;
//! unreadable lines are counted and the first one named. The [`Tape`] keeps the events so
//! `[`/`]` step turn end by turn end and `,`/`.` step inside a turn, folding up to there.

use std::path::Path;

use tokio_util::sync::CancellationToken;

use crate::error::ConsoleError;
use crate::state::tape::Tape;
use crate::state::{ConsoleState, Header, Source};
use crate::theme::Theme;
use crate::view::console::Console;
use turnscope::observe::recorder::read_events;

/// Builds the read-only console state of an events file's text.
pub fn console_of(text: &str, file: &str, theme: Theme) -> Result<Console, ConsoleError> {
    let (events, problems) = read_events(text);
    if events.is_empty() {
        match problems.first() {
            Some(first) => {
                return Err(ConsoleError::NoEvents {
                    file: file.to_string(),
                    bad: problems.len(),
                    first: first.to_string(),
                });
            }
            None => {
                return Err(ConsoleError::Empty {
                    file: file.to_string(),
                });
            }
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
        replica: None,
        ..Header::default()
    });
    state.tools_note = Some("Tools are not recorded in an events file.".into());
    let (tape, state) = Tape::new(events, state);
    let mut console = Console::new(state, theme, true);
    console.tape = Some(tape);
    console.settle();
    Ok(console)
}

/// Opens the console over `path` until the person quits.
pub async fn run(path: &Path, theme: Theme) -> Result<(), ConsoleError> {
    let text = std::fs::read_to_string(path).map_err(|reason| ConsoleError::ReadEvents {
        file: path.display().to_string(),
        reason,
    })?;
    let mut console = console_of(&text, &path.display().to_string(), theme)?;
    let (mut terminal, guard) = crate::run::terminal::enter()?;
    let input = crossterm::event::EventStream::new();
    let result = crate::run::live::event_loop(
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
