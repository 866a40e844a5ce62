//! Sessions the store keeps that are not open here (a restart left them): listed as `stored`
//! after the open ones with their turns and last use, counted in the title when more are
//! stored than listed, their transcript and turn view opened from the turns the store gave,
//! and a line typed into one refused with what to do.

use insta::assert_snapshot;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use turnscope::observe::SessionOpener;

use crate::run::stored::STORED_NUMBER_BASE;
use crate::state::{Activity, SessionRow, TurnView};
use crate::tests::fixture::console;
use crate::view::console::Console;
use crate::view::ids::PaneId;

const STORED: u64 = STORED_NUMBER_BASE | 77;

fn screen(c: &mut Console, w: u16, h: u16) -> String {
    c.before_draw();
    let mut terminal = Terminal::new(TestBackend::new(w, h)).expect("test terminal");
    terminal.draw(|f| crate::draw::draw(f, c)).expect("draw");
    terminal.backend().to_string()
}

/// The fixture console with one stored session (two turns read from the store) and 1,234
/// more stored than listed.
fn with_stored() -> Console {
    let mut c = console();
    let row = SessionRow {
        number: STORED,
        handle_prefix: "5e5e5e5e".into(),
        opener: SessionOpener::Mcp("claude-code".into()),
        mine: false,
        turns: 2,
        activity: Activity::Stored { idle_s: 300 },
        opened_us: 0,
        age_s: 3_600,
        idle_left_s: Some(86_100),
        taken_from: None,
    };
    c.state.sync_stored(vec![row], 1_234);
    let turn = |id: u64, line: &str, reply: &str| TurnView {
        id,
        line: line.into(),
        reply: reply.into(),
        end: Some("completed".into()),
        total_us: Some(412_000),
        ..TurnView::default()
    };
    c.state.sync_turns(
        STORED,
        vec![
            turn(1, "remember the word teapot", "I will remember: teapot."),
            turn(2, "what was the word?", "The word was teapot."),
        ],
    );
    c.selected = Some(STORED);
    c.focus_pane(PaneId::Sessions);
    c.settle();
    c
}

#[test]
fn a_stored_session_is_listed_after_the_open_ones_and_not_counted_open() {
    let c = with_stored();
    let listed: Vec<u64> = c.listed_sessions().iter().map(|r| r.number).collect();
    assert_eq!(listed, [1, 2, STORED, 3], "open, stored, then closed");
    assert_eq!(c.state.stored_counts(), (1, 1_234));
    let row = c.state.session(STORED).expect("the stored row");
    assert!(row.is_stored() && !row.is_closed());
    assert_eq!(
        row.activity.label(),
        "stored",
        "the filter finds it by `stored`"
    );
}

#[test]
fn the_sessions_pane_and_transcript_of_a_stored_session() {
    let mut c = with_stored();
    for (w, h) in [(160, 48), (80, 24)] {
        let text = screen(&mut c, w, h);
        assert!(text.contains("2 open"), "{text}");
        assert!(text.contains("1,235 stored, 1,234 not listed"), "{text}");
        assert!(text.contains("stored 5m"), "{text}");
        assert!(text.contains("The word was teapot."), "{text}");
    }
    assert_snapshot!(format!(
        "160x48\n{}\n80x24\n{}",
        screen(&mut c, 160, 48),
        screen(&mut c, 80, 24)
    ));
}

#[test]
fn the_turn_view_of_a_stored_session_opens() {
    let mut c = with_stored();
    c.open_turn_view();
    let text = screen(&mut c, 160, 48);
    assert!(c.turn_view.is_some(), "{:?}", c.notice);
    assert!(text.contains("what was the word?"), "{text}");
    assert_snapshot!(text);
}

#[test]
fn a_line_into_a_stored_session_is_refused_with_what_to_do() {
    let mut c = with_stored();
    c.focus_pane(PaneId::Input);
    c.input.insert_str("hello");
    assert!(c.send().is_none());
    let notice = c.notice.as_ref().expect("a notice").text.clone();
    assert!(notice.contains("5e5e5e5e is stored, not open"), "{notice}");
    assert!(notice.contains("its next chat"), "{notice}");
    assert_eq!(c.input.lines().join(""), "hello", "the line is kept");
}

#[test]
fn d_on_a_stored_session_says_how_it_goes_away() {
    let mut c = with_stored();
    let key = crossterm::event::KeyEvent::new(
        crossterm::event::KeyCode::Char('d'),
        crossterm::event::KeyModifiers::NONE,
    );
    assert!(c.handle(&crossterm::event::Event::Key(key)).is_none());
    let notice = c.notice.as_ref().expect("a notice").text.clone();
    assert!(
        notice.contains("turnscope sessions delete 5e5e5e5e"),
        "{notice}"
    );
}
