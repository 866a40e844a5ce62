//! Screens narrower and shorter than any pane wants (a tour's 40×12 and 20×5): the help
//! stacks each key above its text, what has the keys but cannot be drawn says so on one line
//! rather than taking keys unseen, the footer still ends with help and quit, and a Sessions
//! pane one row tall shows the selected session.

use crossterm::event::{Event as TermEvent, KeyCode, KeyEvent, KeyModifiers};
use insta::assert_snapshot;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

use crate::tests::fixture::console;
use crate::view::console::Console;
use crate::view::ids::PaneId;

fn screen(c: &mut Console, w: u16, h: u16) -> String {
    c.before_draw();
    let mut terminal = Terminal::new(TestBackend::new(w, h)).expect("test terminal");
    terminal.draw(|f| crate::draw::draw(f, c)).expect("draw");
    terminal.backend().to_string()
}

fn press(c: &mut Console, code: KeyCode) {
    c.handle(&TermEvent::Key(KeyEvent::new(code, KeyModifiers::NONE)));
}

/// The screen's rows, without the quotes the test backend puts round each.
fn rows(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.trim_matches('"').trim_end().to_string())
        .collect()
}

/// At 40×12 the keys' column (34 cells) took the whole box and every description was blank:
/// now each key stands above its text.
#[test]
fn a_narrow_help_stacks_each_key_above_its_text() {
    let mut c = console();
    c.focus_pane(PaneId::Sessions);
    press(&mut c, KeyCode::Char('?'));
    let text = screen(&mut c, 40, 12);
    assert!(text.contains("Tab / Shift+Tab"), "{text}");
    assert!(text.contains("next / previous pane"), "{text}");
    assert_snapshot!(text);
    // The lines themselves: no description is left without room.
    let lines = crate::draw::help::lines(&c, 32, &[crate::view::keys::Scope::Global]);
    let flat: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    let at = flat
        .iter()
        .position(|l| l.trim() == "1 … 9 / Alt+1 … 9")
        .expect("the key on its own line");
    assert!(
        flat[at + 1].trim_start().starts_with("jump to a pane"),
        "{flat:?}"
    );
    assert!(flat.iter().all(|l| crate::text::width(l) <= 32), "{flat:?}");
}

/// At 20×5 `?` opened a help drawn nowhere (only the footer changed), and the hand-call form
/// (6, Enter) took keys unseen: each now says, on one line, to make the terminal larger; Esc
/// still closes it.
#[test]
fn an_overlay_too_small_to_draw_says_so() {
    let mut c = console();
    c.focus_pane(PaneId::Sessions);
    press(&mut c, KeyCode::Char('?'));
    let text = screen(&mut c, 20, 5);
    assert!(text.contains("enlarge the terminal"), "{text}");
    assert_snapshot!("help_20x5", text);
    let wider = screen(&mut c, 60, 8);
    assert!(
        wider.contains("the help does not fit: make the terminal larger · Esc closes"),
        "{wider}"
    );
    press(&mut c, KeyCode::Esc);
    assert!(!c.help.open);

    press(&mut c, KeyCode::Char('6'));
    press(&mut c, KeyCode::Enter);
    assert!(
        matches!(c.tools.hand.mode, crate::view::hand_calls::Mode::Form(_)),
        "the form is open"
    );
    let text = screen(&mut c, 20, 5);
    assert!(text.contains("enlarge the terminal"), "{text}");
    let wider = screen(&mut c, 70, 6);
    assert!(
        wider.contains("the hand-call form does not fit: make the terminal larger"),
        "{wider}"
    );
    // Where it fits, it is drawn and nothing is said.
    let roomy = screen(&mut c, 120, 34);
    assert!(!roomy.contains("make the terminal larger"), "{roomy}");

    // The turn view over a body two rows tall (a terminal two rows tall: no header, no footer).
    press(&mut c, KeyCode::Esc);
    c.focus_pane(PaneId::Transcript);
    press(&mut c, KeyCode::Char('w'));
    assert!(c.turn_view.is_some());
    let text = screen(&mut c, 60, 2);
    assert!(
        text.contains("the turn view: make the terminal larger"),
        "{text}"
    );
    // Three rows hold its borders and a line: drawn.
    let text = screen(&mut c, 60, 5);
    assert!(text.contains("Turn 2 of #1"), "{text}");
}

/// The footer ends with help and quit at any width: at 20 columns it ended "Ctrl+C qu…".
#[test]
fn the_footer_ends_with_help_and_quit_when_narrow() {
    let mut c = console();
    assert_eq!(c.focus, PaneId::Input);
    for w in [18, 20] {
        let text = screen(&mut c, w, 5);
        let footer = rows(&text).last().cloned().unwrap_or_default();
        assert!(footer.ends_with("F1 help  ^C quit"), "{w}: {footer:?}");
    }
    for w in [21, 30, 40] {
        let text = screen(&mut c, w, 5);
        let footer = rows(&text).last().cloned().unwrap_or_default();
        assert!(footer.ends_with("F1 help  Ctrl+C quit"), "{w}: {footer:?}");
    }
    c.focus_pane(PaneId::Stats);
    let text = screen(&mut c, 20, 5);
    let footer = rows(&text).last().cloned().unwrap_or_default();
    assert!(footer.ends_with("? help  q quit"), "{footer:?}");
    // The help's own footer: how to close it, whole.
    press(&mut c, KeyCode::Char('?'));
    let text = screen(&mut c, 20, 5);
    let footer = rows(&text).last().cloned().unwrap_or_default();
    assert!(footer.ends_with("Esc close"), "{footer:?}");
}

/// A Sessions pane one row tall inside its borders showed its column heads alone: it shows
/// the selected session (and which of how many).
#[test]
fn a_sessions_pane_one_row_tall_shows_the_selected_session() {
    let mut c = console();
    c.focus_pane(PaneId::Sessions);
    c.selected = Some(2);
    c.settle();
    let text = screen(&mut c, 20, 5);
    assert!(text.contains("▶2"), "{text}");
    assert!(!text.contains("handle"), "{text}");
    assert_snapshot!(text);
}
