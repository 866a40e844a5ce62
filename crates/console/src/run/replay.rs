//! `turnscope replay FILE`: the console over a file written by `--events`, read-only. The
//! whole file is folded before the first frame, so every pane shows the run as it ended;
//! unreadable lines are counted and the first one named. The file is read line by line and
//! not held: its events are read again when a step needs them. The [`Tape`] keeps the events so
//! `[`/`]` step turn end by turn end and `,`/`.` step inside a turn, folding up to there.

use std::path::Path;

use tokio_util::sync::CancellationToken;

use crate::error::ConsoleError;
use crate::state::tape::Tape;
use crate::state::{ConsoleState, Header, Source, Unreadable};
use crate::theme::Theme;
use crate::view::console::Console;
use turnscope::observe::recorder::read_events;

/// Builds the read-only console state of an events file's text (held whole: tests, the
/// fuzzer; a file is read with [`console_of_file`]).
pub fn console_of(text: &str, file: &str, theme: Theme) -> Result<Console, ConsoleError> {
    let (events, problems) = read_events(text);
    let mut unreadable = Unreadable {
        count: problems.len(),
        first: problems.into_iter().next(),
    };
    if events.is_empty() {
        return Err(nothing_read(file, &mut unreadable));
    }
    let (tape, state) = Tape::new(events, blank(file, unreadable));
    Ok(console_over(tape, state, theme))
}

/// Builds the read-only console state of `events` already read (a stored session's, as
/// `turnscope sessions show` prints it), `origin` naming where they came from.
///
/// # Errors
/// [`ConsoleError::Empty`] when there is no event.
pub fn console_of_events(
    events: Vec<turnscope::observe::Event>,
    origin: &str,
    theme: Theme,
) -> Result<Console, ConsoleError> {
    if events.is_empty() {
        return Err(ConsoleError::Empty {
            file: origin.to_string(),
        });
    }
    let (tape, state) = Tape::new(events, blank(origin, Unreadable::default()));
    Ok(console_over(tape, state, theme))
}

/// The stored session `head` of `store` as plain text, for `turnscope sessions show`: the
/// report the console's `e` writes (its greeting, then each turn's line, waterfall, tool
/// calls whole, reply and end) of the session `turnscope replay` shows from its export, and
/// the turn a stop cut off, as its transcript here says it. The store keeps no frames but
/// the reply pieces, so the report's Frames part is left out.
///
/// # Errors
/// The store's own words when its turns cannot be read.
pub async fn stored_report(
    store: &dyn turnscope::store::SessionStore,
    head: &turnscope::store::Head,
) -> Result<String, String> {
    use turnscope::observe::Event;
    use turnscope::observe::event::TurnEndEvent;
    use turnscope::store::export::{self, SESSION};

    let turns = store.turns(&head.id, 0).await.map_err(|e| e.to_string())?;
    let origin = store.describe();
    let mut events = export::events(head, &turns, &origin);
    let mut told = turns.len() as u64;
    if let Some(flight) = head.in_flight.as_ref().filter(|f| f.turn > head.turns) {
        told += 1;
        events.push(Event::TurnStarted {
            session: SESSION,
            turn: flight.turn,
            line: flight.line.clone(),
            at_us: flight.started_ms.saturating_mul(1000),
        });
        events.push(Event::TurnEnded(TurnEndEvent {
            session: SESSION,
            turn: flight.turn,
            reason: if store.shared() {
                crate::run::stored::IN_FLIGHT
            } else {
                crate::run::stored::CUT_OFF
            }
            .into(),
            config_version: flight.config_version,
            ..TurnEndEvent::default()
        }));
    }
    let console = console_of_events(events, &origin, crate::theme::Theme::default())
        .map_err(|e| e.to_string())?;
    let who = console
        .state
        .session(SESSION)
        .map(|r| r.opener_label())
        .unwrap_or_default();
    let mut out = format!(
        "turnscope session {} ({origin}) · {who} · {}\n\n",
        head.prefix,
        crate::text::plural(told, "turn")
    );
    out.push_str(&crate::draw::export::turns_body(&console, SESSION));
    Ok(out)
}

/// Builds the read-only console state of the events file at `path`, read line by line and
/// not held ([`Tape::of_file`]): memory does not grow with the file.
pub fn console_of_file(path: &Path, theme: Theme) -> Result<Console, ConsoleError> {
    let file = path.display().to_string();
    let read_error = |reason| ConsoleError::ReadEvents {
        file: file.clone(),
        reason,
    };
    // The unreadable lines are told in every state the tape keeps (`Tape::of_file`).
    let (tape, state, mut unreadable) =
        Tape::of_file(path, blank(&file, Unreadable::default())).map_err(read_error)?;
    if state.events_seen == 0 {
        return Err(nothing_read(&file, &mut unreadable));
    }
    Ok(console_over(tape, state, theme))
}

/// Why a file gave no event: all its lines were unreadable, or it had none.
fn nothing_read(file: &str, unreadable: &mut Unreadable) -> ConsoleError {
    match unreadable.first.take() {
        Some(first) => ConsoleError::NoEvents {
            file: file.to_string(),
            bad: unreadable.count,
            first,
        },
        None => ConsoleError::Empty {
            file: file.to_string(),
        },
    }
}

/// The state a replay of `file` starts from.
fn blank(file: &str, unreadable: Unreadable) -> ConsoleState {
    let mut state = ConsoleState::new(Header {
        mcp_url: None,
        model: String::new(),
        // Said only from the file's bridge events, when it has some.
        bridges: String::new(),
        source: Source::Replay {
            file: file.to_string(),
            unreadable,
        },
        replica: None,
        ..Header::default()
    });
    state.tools_note = Some("Tools are not recorded in an events file.".into());
    state
}

fn console_over(tape: Tape, state: ConsoleState, theme: Theme) -> Console {
    let mut console = Console::new(state, theme, true);
    console.tape = Some(tape);
    console.settle();
    console
}

/// Opens the console over `path` until the person quits.
pub async fn run(path: &Path, theme: Theme) -> Result<(), ConsoleError> {
    let mut console = console_of_file(path, theme)?;
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
