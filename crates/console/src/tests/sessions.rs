//! The Sessions pane's sort (`s`), filter (`/`) and the mark on a session whose MCP client
//! let go of it, without a terminal.

use crossterm::event::{Event as TermEvent, KeyCode, KeyEvent, KeyModifiers};

use crate::input::actions::Action;

use crate::view::console::Console;

use crate::tests::fixture::console;
use crate::view::ids::PaneId;
use crate::view::sessions::SessionSort;
use turnscope::observe::Event;

fn press(c: &mut Console, code: KeyCode) -> Option<Action> {
    c.handle(&TermEvent::Key(KeyEvent::new(code, KeyModifiers::NONE)))
}

fn listed(c: &Console) -> Vec<u64> {
    c.listed_sessions().iter().map(|r| r.number).collect()
}

fn gone(c: &mut Console, session: u64) {
    let at_us = c.state.now_us + 1_000;
    c.state.apply(&Event::ClientGone {
        session,
        client: "claude-code".into(),
        reason: "its MCP session ended (deleted, or closed after its idle timeout)".into(),
        at_us,
    });
}

#[test]
fn s_cycles_the_sort_and_keeps_the_selection() {
    let mut c = console();
    c.focus = PaneId::Sessions;
    assert_eq!(listed(&c), [1, 2, 3]);
    press(&mut c, KeyCode::Char('s'));
    assert_eq!(c.sessions_list.sort, SessionSort::Activity);
    let times: Vec<u64> = c
        .listed_sessions()
        .iter()
        .map(|r| c.state.last_activity(r))
        .collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "{times:?}");
    assert_eq!(listed(&c), [2, 1, 3], "#2's turn started last");
    press(&mut c, KeyCode::Char('s'));
    assert_eq!(c.sessions_list.sort, SessionSort::Errors);
    press(&mut c, KeyCode::Char('s'));
    assert_eq!(c.sessions_list.sort, SessionSort::Number);
    assert_eq!(c.selected, Some(1));
}

#[test]
fn slash_in_sessions_filters_the_list_and_esc_clears_it() {
    let mut c = console();
    c.focus = PaneId::Sessions;
    press(&mut c, KeyCode::Char('/'));
    assert_eq!(c.focus, PaneId::Sessions, "the filter is the list's own");
    for ch in "claude".chars() {
        press(&mut c, KeyCode::Char(ch));
    }
    assert_eq!(listed(&c), [2]);
    assert_eq!(c.selected, Some(2), "the selection follows the only match");
    press(&mut c, KeyCode::Enter);
    assert!(c.sessions_list.editing.is_none());
    assert_eq!(c.sessions_list.filter, "claude");
    // j moves within the filtered list; Esc clears the filter.
    press(&mut c, KeyCode::Char('j'));
    assert_eq!(c.selected, Some(2));
    press(&mut c, KeyCode::Esc);
    assert!(c.sessions_list.filter.is_empty());
    assert_eq!(listed(&c), [1, 2, 3]);
    // A number matches the session of that number.
    press(&mut c, KeyCode::Char('/'));
    press(&mut c, KeyCode::Char('#'));
    press(&mut c, KeyCode::Char('3'));
    assert_eq!(listed(&c), [3]);
}

#[test]
fn a_session_whose_client_went_is_marked_logged_and_not_held() {
    let mut c = console();
    gone(&mut c, 3); // closed already: nothing to mark
    assert!(c.state.client_gone(3).is_none());
    let warnings = c.state.journal.warnings;
    // #2 is in a turn in the fixture; let the turn end first so the row shows the mark.
    let rows: Vec<_> = c.state.session_rows().into_iter().cloned().collect();
    c.state.sync_sessions(
        rows.into_iter()
            .filter(|r| !r.is_closed())
            .map(|mut r| {
                r.activity = crate::state::Activity::Idle;
                r
            })
            .collect(),
    );
    gone(&mut c, 2);
    assert!(
        c.state
            .client_gone(2)
            .is_some_and(|w| w.contains("claude-code"))
    );
    assert_eq!(c.state.journal.warnings, warnings + 1);
    // q no longer asks: no MCP client holds a session.
    c.focus = PaneId::Sessions;
    assert_eq!(press(&mut c, KeyCode::Char('q')), Some(Action::Quit));
    // The filter finds it by its mark.
    press(&mut c, KeyCode::Char('/'));
    for ch in "gone".chars() {
        press(&mut c, KeyCode::Char(ch));
    }
    assert_eq!(listed(&c), [2]);
    // A turn on it (a client chatting on its handle again) takes the mark off.
    let at_us = c.state.now_us + 1_000;
    c.state.apply(&Event::TurnStarted {
        session: 2,
        turn: 9,
        line: "back again".into(),
        at_us,
    });
    assert!(c.state.client_gone(2).is_none());
}

/// An attached console learns its new session's number from `start` before the event stream
/// brings the row: the selection waits for it instead of falling back to the first row.
#[test]
fn the_persons_own_session_stays_selected_until_its_row_arrives() {
    let mut c = console();
    let coming = 1 + listed(&c).into_iter().max().unwrap_or(0);
    c.own = Some(coming);
    c.selected = Some(coming);
    c.settle();
    assert_eq!(c.selected, Some(coming));
    // A session that is not the person's own and not listed is not kept selected.
    c.own = Some(1);
    c.selected = Some(coming);
    c.settle();
    assert_eq!(c.selected, Some(1));
}

#[test]
fn a_long_session_number_is_shown_whole() {
    // An attached console numbers the sessions it starts apart from the watched server's
    // (from 1,000,001); a long-lived server reaches four digits. The column was 4 wide:
    // `▶10…` and `1000` lost their digits.
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    let mut c = console();
    c.state
        .apply(&Event::Session(turnscope::observe::SessionEvent {
            session: 1_000_001,
            handle_prefix: "9adfec9c".into(),
            opener: turnscope::observe::SessionOpener::Console,
            closed: None,
            restored: false,
            began_us: None,
            taken_from: None,
            greeting: None,
            at_us: c.state.now_us + 1_000,
        }));
    c.focus = PaneId::Sessions;
    c.selected = Some(1_000_001);
    c.before_draw();
    let mut terminal = Terminal::new(TestBackend::new(160, 48)).expect("test terminal");
    terminal.draw(|f| crate::draw::draw(f, &c)).expect("draw");
    let screen = terminal.backend().to_string();
    assert!(screen.contains("▶1000001 9adfec9c"), "{screen}");
    assert!(
        screen.contains(" 1       1a2b3c4d"),
        "shorter numbers line up: {screen}"
    );
}

/// A session's own greeting (its opening line says it: a watched server, a replay, a stored
/// session) tops its transcript, and an opening that says none means none; this console's
/// bot's greeting only stands in for a session whose opening was not seen. Attached and
/// replayed transcripts began without the greeting (tour H); one that had none showed the
/// bot's greeting of today (tour U #4).
#[test]
fn a_sessions_own_greeting_tops_its_transcript() {
    let mut c = console();
    c.state.greeting = Some("Hello from this console's bot".into());
    let opened = |session: u64, greeting: Option<&str>, at_us: u64| {
        Event::Session(turnscope::observe::SessionEvent {
            session,
            handle_prefix: format!("{session:08}"),
            opener: turnscope::observe::SessionOpener::Api,
            closed: None,
            restored: false,
            began_us: None,
            taken_from: None,
            greeting: greeting.map(str::to_string),
            at_us,
        })
    };
    let at_us = c.state.now_us + 1_000;
    c.state
        .apply(&opened(41, Some("Hello, I am the watched bot."), at_us));
    c.state.apply(&opened(42, None, at_us));
    let first_line = |c: &mut Console, session: u64| {
        c.selected = Some(session);
        crate::draw::panes::transcript::lines(c, 100)
            .first()
            .map(ToString::to_string)
            .unwrap_or_default()
    };
    assert_eq!(first_line(&mut c, 41), "bot  Hello, I am the watched bot.");
    assert!(
        !first_line(&mut c, 42).contains("Hello"),
        "an opening without a greeting had none: {}",
        first_line(&mut c, 42)
    );
    // A live console's snapshot of its open sessions carries no greeting: the one the
    // opening said stays (the rows were rebuilt every tick, and it fell back to the bot's),
    // and so does "none".
    let mut snapshot = c.state.session(41).unwrap().clone();
    snapshot.greeting = crate::state::Greeting::Unknown;
    let mut without = c.state.session(42).unwrap().clone();
    without.greeting = crate::state::Greeting::Unknown;
    // One whose opening was not seen: the bot's greeting stands in.
    let mut unseen = without.clone();
    unseen.number = 43;
    unseen.handle_prefix = "00000043".into();
    c.state.sync_sessions(vec![snapshot, without, unseen]);
    assert_eq!(first_line(&mut c, 41), "bot  Hello, I am the watched bot.");
    assert!(!first_line(&mut c, 42).contains("Hello"));
    assert_eq!(first_line(&mut c, 43), "bot  Hello from this console's bot");
}

fn screen(c: &mut Console, w: u16, h: u16) -> String {
    c.before_draw();
    let mut terminal =
        ratatui::Terminal::new(ratatui::backend::TestBackend::new(w, h)).expect("test terminal");
    terminal.draw(|f| crate::draw::draw(f, c)).expect("draw");
    terminal.backend().to_string()
}

/// A turn served as an MCP task reads `● task` in the state column while it runs (it read
/// `● in turn`, and only the Transcript said it was a task); a turn not served as one keeps
/// `● in turn`, and the task's row is `idle` once the turn ended.
#[test]
fn a_turn_running_as_a_task_says_task_in_the_state_column() {
    let mut c = console();
    let events = crate::tests::fixture::task_events();
    let ends = events
        .iter()
        .position(|e| matches!(e, Event::TurnEnded(_)))
        .expect("the turn ends");
    for event in &events[..ends] {
        c.state.apply(event);
    }
    c.focus = PaneId::Sessions;
    c.settle();
    let text = screen(&mut c, 160, 48);
    let row = |n: &str| {
        text.lines()
            .find(|l| l.contains(&format!("{n}a2b3c4d")))
            .unwrap_or_default()
            .to_string()
    };
    assert!(row("4").contains("● task"), "{text}");
    assert!(row("2").contains("● in turn"), "{text}");
    for event in &events[ends..] {
        c.state.apply(event);
    }
    let text = screen(&mut c, 160, 48);
    let row = text
        .lines()
        .find(|l| l.contains("4a2b3c4d"))
        .unwrap_or_default();
    assert!(!row.contains("● task") && row.contains("idle"), "{text}");
}

/// At 120×34 the Sessions pane has no room for the `age` and `left` columns: its border says
/// they are left out (`z` gives the pane the screen, where they are shown); where they fit,
/// nothing is said.
#[test]
fn columns_left_out_of_a_narrow_sessions_pane_are_said() {
    let mut c = console();
    c.focus = PaneId::Sessions;
    let text = screen(&mut c, 120, 34);
    assert!(!text.contains(" age "), "{text}");
    assert!(text.contains("· z: +age, left"), "{text}");
    let zoomed = {
        c.zoom = true;
        screen(&mut c, 120, 34)
    };
    assert!(
        zoomed.contains(" age ") && zoomed.contains(" left "),
        "{zoomed}"
    );
    assert!(!zoomed.contains("z: +"), "{zoomed}");
    let narrow_zoomed = screen(&mut c, 50, 20);
    assert!(
        narrow_zoomed.contains("no room for age, left"),
        "{narrow_zoomed}"
    );
    c.zoom = false;
    let wide = screen(&mut c, 200, 48);
    assert!(wide.contains(" age ") && !wide.contains("z: +"), "{wide}");
}

/// PgDn and PgUp move a page of what the pane shows, not 10 rows whatever its height (tour
/// T: 8–10 rows in a zoomed pane of 26): the last row shown becomes the selected one, the
/// page after it below; PgUp comes back.
#[test]
fn page_keys_move_a_page_of_the_rows_shown() {
    let mut c = console();
    for number in 10..80 {
        c.state
            .apply(&Event::Session(turnscope::observe::SessionEvent {
                session: number,
                handle_prefix: format!("{number:08}"),
                opener: turnscope::observe::SessionOpener::Api,
                closed: None,
                at_us: c.state.now_us,
                restored: false,
                began_us: None,
                taken_from: None,
                greeting: None,
            }));
    }
    c.focus = PaneId::Sessions;
    c.zoom = true;
    let shown = |text: &str| -> Vec<u64> {
        text.lines()
            .filter_map(|l| {
                l.trim_start_matches(['"', '│', '┃'])
                    .trim_start_matches('▶')
                    .split_whitespace()
                    .next()?
                    .parse()
                    .ok()
            })
            .collect()
    };
    let before = shown(&screen(&mut c, 120, 34));
    assert!(before.len() > 20, "{before:?}");
    press(&mut c, KeyCode::PageDown);
    assert_eq!(c.selected, before.last().copied());
    screen(&mut c, 120, 34);
    press(&mut c, KeyCode::PageUp);
    assert_eq!(c.selected, before.first().copied());
}
