//! `turnscope replay FILE`: the console over a file written by `--events`, read-only.
//!
//! The whole file is folded into the state before the first frame, so every pane shows the
//! run as it ended; lines that cannot be read are counted and the first one is named. The
//! [`Tape`] keeps the events so `[` and `]` step the whole console back and forth turn end by
//! turn end (each step folds the events again up to there).

use std::path::Path;

use tokio_util::sync::CancellationToken;

use super::app::Console;
use super::state::{ConsoleState, Header, Source};
use super::theme::Theme;
use turnscope::observe::Event;
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
        replica: None,
    });
    state.tools_note = Some("Tools are not recorded in an events file.".into());
    let tape = Tape::new(events, state);
    let state = tape.state();
    let mut console = Console::new(state, theme, true);
    console.tape = Some(tape);
    console.settle();
    Ok(console)
}

/// A replay's events and where the console stands in them.
pub struct Tape {
    events: Vec<Event>,
    /// Event counts at which a turn ended (the last one: the whole file).
    stops: Vec<usize>,
    /// The stop shown.
    pub at: usize,
    blank: ConsoleState,
}

impl Tape {
    fn new(events: Vec<Event>, blank: ConsoleState) -> Tape {
        let mut stops: Vec<usize> = events
            .iter()
            .enumerate()
            .filter(|(_, e)| matches!(e, Event::TurnEnded(_)))
            .map(|(i, _)| i + 1)
            .collect();
        if stops.last() != Some(&events.len()) {
            stops.push(events.len());
        }
        let at = stops.len() - 1;
        Tape {
            events,
            stops,
            at,
            blank,
        }
    }

    /// How many stops (turn ends, and the file's end).
    pub fn stops(&self) -> usize {
        self.stops.len()
    }

    /// Moves `delta` stops; `false` when it could not move.
    pub fn step(&mut self, delta: isize) -> bool {
        let next = (self.at as isize + delta).clamp(0, self.stops.len() as isize - 1) as usize;
        let moved = next != self.at;
        self.at = next;
        moved
    }

    /// The state folded up to the stop shown.
    pub fn state(&self) -> ConsoleState {
        let mut state = ConsoleState::new(self.blank.header.clone());
        state.tools_note = self.blank.tools_note.clone();
        for event in &self.events[..self.stops[self.at]] {
            state.apply(event);
        }
        state.age_rows();
        state
    }
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
