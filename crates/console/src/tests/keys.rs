//! The console's input handling, without a terminal: keys and mouse events into focus,
//! selection, scrolls and actions.

use crossterm::event::{
    Event as TermEvent, KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

use crate::input::actions::Action;

use crate::view::console::{Console, Notice};

use crate::state::SessionRow;
use crate::state::variants::RequestKey;
use crate::tests::fixture::{console, crossing};
use crate::view::filter::FrameFilter;
use crate::view::ids::{ORDER, PaneId};
use turnscope::observe::{Event, FrameEvent};
use turnscope::sessions::ChatReply;

fn press(c: &mut Console, code: KeyCode) -> Option<Action> {
    c.handle(&TermEvent::Key(KeyEvent::new(code, KeyModifiers::NONE)))
}

fn press_with(c: &mut Console, code: KeyCode, modifiers: KeyModifiers) -> Option<Action> {
    c.handle(&TermEvent::Key(KeyEvent::new(code, modifiers)))
}

fn type_text(c: &mut Console, text: &str) {
    for ch in text.chars() {
        press(c, KeyCode::Char(ch));
    }
}

fn click(c: &mut Console, column: u16, row: u16) {
    c.handle(&TermEvent::Mouse(MouseEvent {
        kind: MouseEventKind::Down(MouseButton::Left),
        column,
        row,
        modifiers: KeyModifiers::NONE,
    }));
}

/// Draws once so the console knows where its panes are (as the event loop does).
fn draw(c: &Console, w: u16, h: u16) {
    let mut terminal = Terminal::new(TestBackend::new(w, h)).expect("terminal");
    terminal.draw(|f| crate::draw::draw(f, c)).expect("draw");
}

fn reply(turn: Option<u64>, text: &str, end: Option<&str>, error: Option<&str>) -> ChatReply {
    ChatReply {
        reply: text.into(),
        turn,
        end_reason: end.map(str::to_string),
        error: error.map(str::to_string),
        rounds: 0,
        tool_calls: Vec::new(),
        first_piece_ms: None,
        total_ms: None,
        unread: None,
        usage: None,
        finish_reason: None,
        config_version: None,
        line: None,
        turns: None,
        kept_unread: false,
    }
}

#[test]
fn enter_sends_the_line_to_the_selected_session_and_clears_it() {
    let mut c = console();
    assert_eq!(c.focus, PaneId::Input);
    type_text(&mut c, "hello q?");
    let action = press(&mut c, KeyCode::Enter);
    assert_eq!(
        action,
        Some(Action::Chat {
            session: 1,
            line: "hello q?".into()
        })
    );
    assert!(c.input.is_empty());
}

/// Attached (the first line opens the person's session): before they have one, Enter sends
/// the line as the start of their session, whichever session is selected; an empty line
/// starts nothing; once the session is theirs, lines chat in it as usual; a line whose
/// session could not open is given back to the empty input line.
#[test]
fn attached_the_first_line_starts_the_persons_session() {
    let mut c = console();
    c.own = None;
    c.selected = Some(2);
    c.start_on_first_line = true;
    assert_eq!(press(&mut c, KeyCode::Enter), None);
    assert!(
        c.notice
            .as_ref()
            .is_some_and(|n| n.text.contains("starts your session"))
    );
    type_text(&mut c, "hello there");
    assert_eq!(
        press(&mut c, KeyCode::Enter),
        Some(Action::StartWith {
            line: "hello there".into()
        })
    );
    assert!(c.input.is_empty());
    // While that session opens, another line waits in the input rather than opening a second.
    type_text(&mut c, "and another");
    assert_eq!(press(&mut c, KeyCode::Enter), None);
    assert_eq!(c.input.lines(), ["and another"]);
    assert!(
        c.notice
            .as_ref()
            .is_some_and(|n| n.text.contains("is starting"))
    );
    c.input = Default::default();
    assert!(c.give_back_line("hello there"));
    assert_eq!(c.input.lines(), ["hello there"]);
    // A line typed since is not overwritten.
    assert!(!c.give_back_line("older"));
    c.own = Some(3);
    c.selected = Some(3);
    assert_eq!(
        press(&mut c, KeyCode::Enter),
        Some(Action::Chat {
            session: 3,
            line: "hello there".into()
        })
    );
}

#[test]
fn alt_enter_shift_enter_and_ctrl_j_add_newlines() {
    let mut c = console();
    type_text(&mut c, "one");
    press_with(&mut c, KeyCode::Enter, KeyModifiers::ALT);
    type_text(&mut c, "two");
    press_with(&mut c, KeyCode::Enter, KeyModifiers::SHIFT);
    type_text(&mut c, "three");
    press_with(&mut c, KeyCode::Char('j'), KeyModifiers::CONTROL);
    type_text(&mut c, "four");
    assert_eq!(c.input.lines(), ["one", "two", "three", "four"]);
    assert_eq!(
        press(&mut c, KeyCode::Enter),
        Some(Action::Chat {
            session: 1,
            line: "one\ntwo\nthree\nfour".into()
        })
    );
}

#[test]
fn empty_enter_reads_the_turn_in_flight_and_reports_it() {
    let mut c = console();
    assert_eq!(
        press(&mut c, KeyCode::Enter),
        Some(Action::Chat {
            session: 1,
            line: String::new()
        })
    );
    c.chat_started(1);
    assert!(c.input_line.waiting.contains_key(&1));
    c.chat_done(
        1,
        "",
        Ok(reply(Some(2), "It is noon.", Some("completed"), None)),
    );
    assert!(!c.input_line.waiting.contains_key(&1));
    let notice = c.notice.clone().expect("a notice");
    assert!(!notice.error);
    assert!(
        notice
            .text
            .contains("read turn 2 of #1: completed (11 characters)"),
        "{notice:?}"
    );
    c.chat_done(1, "", Ok(reply(None, "", None, None)));
    assert!(c.notice.as_ref().unwrap().text.contains("no unread turn"));
}

/// An attached console's sessions reopened under other numbers by the restarted server it
/// watches (the new server numbers from 1): the person's own session, the selection, a chat
/// in flight and a confirmation follow their conversations, all moved at once (two may swap
/// numbers), and the end of the chat sent under the old number is told under the new one
/// (tour O F1: they stayed on the old number, which the new server did not list).
#[test]
fn conversations_renumbered_take_the_selection_and_the_chats_in_flight_along() {
    let mut c = console();
    c.own = Some(3);
    c.selected = Some(3);
    c.input_line.confirmed.insert(1);
    c.chat_started(3);
    c.renumbered(&[(3, 1), (1, 2)]);
    assert_eq!((c.own, c.selected), (Some(1), Some(1)));
    assert_eq!(c.input_line.confirmed.iter().collect::<Vec<_>>(), [&2]);
    assert_eq!(c.input_line.waiting.keys().collect::<Vec<_>>(), [&1]);
    c.chat_done(
        3,
        "what did I say",
        Ok(reply(
            Some(2),
            "You said: remember kiwi",
            Some("completed"),
            None,
        )),
    );
    assert!(c.input_line.waiting.is_empty(), "the reply came");
    assert!(c.input_line.moved.is_empty());
    // Nothing moved: nothing changes.
    c.renumbered(&[]);
    assert_eq!((c.own, c.selected), (Some(1), Some(1)));
}

/// `line` is back in the input line, and the notice says so.
fn assert_line_is_back(c: &Console, line: &str) {
    assert_eq!(c.input.lines(), [line]);
    assert!(
        c.notice.as_ref().is_some_and(|n| n
            .text
            .ends_with("your line is back in the input line (Enter sends it)")),
        "{:?}",
        c.notice
    );
}

#[test]
fn chat_errors_become_error_notices_and_replies_clear_them() {
    let mut c = console();
    c.chat_done(1, "hi", Err("handle: no live session.".into()));
    assert!(c.notice.as_ref().is_some_and(|n| n.error));
    // No turn took the line: it is back in the input line, not lost.
    assert_line_is_back(&c, "hi");
    // Typed over since: the notice repeats the line instead.
    c.chat_done(1, "ho", Err("the `chat` call failed".into()));
    assert_eq!(c.input.lines(), ["hi"]);
    assert_eq!(
        c.notice.as_ref().map(|n| n.text.as_str()),
        Some("the `chat` call failed · your line was: ho")
    );
    press(&mut c, KeyCode::Enter);
    assert!(c.input.is_empty());
    // A line a turn took is in the transcript already (here the fixture's last turn).
    let last = c
        .state
        .transcript(1)
        .last()
        .map(|t| t.line.clone())
        .unwrap_or_default();
    c.chat_done(1, &last, Err("saved nowhere".into()));
    assert!(c.input.is_empty());
    assert_eq!(
        c.notice.as_ref().map(|n| n.text.as_str()),
        Some("saved nowhere")
    );
    c.chat_done(
        1,
        "hi",
        Ok(reply(Some(3), "partial", Some("error"), Some("model down"))),
    );
    let n = c.notice.clone().unwrap();
    assert!(
        n.error && n.text.contains("turn 3 ended in error: model down"),
        "{n:?}"
    );
    // An error with no turn (a call the bot refused, as an attached console hears it): no
    // "turn 0".
    c.chat_done(
        1,
        "hi",
        Ok(reply(
            None,
            "",
            Some("error"),
            Some("store: the session store did not answer"),
        )),
    );
    let n = c.notice.clone().unwrap();
    assert!(
        n.error
            && n.text
                == "chat failed: store: the session store did not answer · your line is back in \
                    the input line (Enter sends it)",
        "{n:?}"
    );
    // A bot that no longer knows the handle says so in words meant for a model ("call
    // start"): the notice names the key that does it here.
    c.chat_done(
        1,
        "",
        Ok(reply(
            None,
            "",
            Some("error"),
            Some("handle: no live session. Call start for a new handle."),
        )),
    );
    let n = c.notice.clone().unwrap();
    assert!(
        n.text
            .ends_with(" · n in Sessions (1) starts a new session on the bot"),
        "{n:?}"
    );
    c.chat_done(1, "hi", Ok(reply(Some(4), "fine", Some("completed"), None)));
    assert_eq!(c.notice, None);
    // Any other notice (what sending a line told: the session it opened or reopened, even one
    // shown as an error) stays when the reply lands: it goes after a while or with the next line.
    for error in [false, true] {
        let told = Notice {
            text: "#1 is the session you started here last time, reopened".into(),
            error,
        };
        c.notice = Some(told.clone());
        c.chat_done(1, "hi", Ok(reply(Some(5), "fine", Some("completed"), None)));
        assert_eq!(c.notice, Some(told));
    }
}

/// The same line said again, its second call failing before any turn took it, comes back (the
/// last turn's line being the same says nothing of this call); a line a turn took after the
/// call was sent stays in the transcript.
#[test]
fn a_line_said_again_whose_call_failed_before_a_turn_comes_back() {
    let mut c = console();
    let (last_id, last_line) = c
        .state
        .transcript(1)
        .last()
        .map(|t| (t.id, t.line.clone()))
        .expect("the fixture's session has a turn");
    c.chat_started(1);
    c.chat_done(1, &last_line, Err("the `chat` call failed".into()));
    assert_line_is_back(&c, &last_line);
    press(&mut c, KeyCode::Enter);
    assert!(c.input.is_empty());

    c.chat_started(1);
    c.state.apply(&Event::TurnStarted {
        session: 1,
        turn: last_id + 1,
        line: "taken".into(),
        at_us: 0,
    });
    c.chat_done(1, "taken", Err("saved nowhere".into()));
    assert!(c.input.is_empty(), "{:?}", c.input.lines());
    assert_eq!(
        c.notice.as_ref().map(|n| n.text.as_str()),
        Some("saved nowhere")
    );

    // A turn an attached console timed itself whose call failed (a pipecat bot gone) took
    // nothing: its line comes back too.
    c.notice = None;
    let errors_before = c.state.journal.errors_of(1);
    c.chat_started(1);
    c.state.apply(&Event::TurnStarted {
        session: 1,
        turn: last_id + 2,
        line: "are you there".into(),
        at_us: 0,
    });
    c.state
        .apply(&Event::TurnEnded(turnscope::observe::TurnEndEvent {
            session: 1,
            turn: last_id + 2,
            reason: format!(
                "{}: Transport send error",
                turnscope::attach::target::NOT_ANSWERED
            ),
            clock: Some(turnscope::observe::TurnClock::Client),
            ..Default::default()
        }));
    c.chat_done(1, "are you there", Err("Transport send error".into()));
    assert_line_is_back(&c, "are you there");
    assert_eq!(
        c.state.journal.errors_of(1),
        errors_before + 1,
        "the failed call counts among the session's errors"
    );
}

#[test]
fn tab_and_shift_tab_cycle_every_pane_in_order() {
    let mut c = console();
    c.focus = PaneId::Sessions;
    let mut seen = vec![c.focus];
    for _ in 0..ORDER.len() {
        press(&mut c, KeyCode::Tab);
        seen.push(c.focus);
    }
    assert_eq!(&seen[..ORDER.len()], ORDER);
    assert_eq!(seen[ORDER.len()], PaneId::Sessions);
    press(&mut c, KeyCode::BackTab);
    assert_eq!(c.focus, PaneId::Mcp);
    assert_eq!(
        c.inspector,
        PaneId::Mcp,
        "an inspector pane becomes the visible tab"
    );
    // Tab leaves the input line too.
    c.focus = PaneId::Input;
    press(&mut c, KeyCode::Tab);
    assert_eq!(c.focus, PaneId::Frames);
}

#[test]
fn digits_jump_outside_the_input_and_alt_digits_inside_it() {
    let mut c = console();
    type_text(&mut c, "6");
    assert_eq!(c.focus, PaneId::Input, "a digit is text in the input line");
    assert_eq!(c.input.lines(), ["6"]);
    press_with(&mut c, KeyCode::Char('6'), KeyModifiers::ALT);
    assert_eq!((c.focus, c.inspector), (PaneId::Tools, PaneId::Tools));
    press(&mut c, KeyCode::Char('4'));
    assert_eq!((c.focus, c.inspector), (PaneId::Frames, PaneId::Frames));
    press(&mut c, KeyCode::Char('1'));
    assert_eq!((c.focus, c.inspector), (PaneId::Sessions, PaneId::Frames));
}

#[test]
fn n_opens_a_session_and_the_next_keys_are_its_line() {
    let mut c = console();
    c.focus = PaneId::Sessions;
    assert_eq!(press(&mut c, KeyCode::Char('n')), Some(Action::NewSession));
    assert_eq!(
        c.focus,
        PaneId::Input,
        "the new session is to be typed into"
    );
    type_text(&mut c, "remember banana");
    assert_eq!(
        c.input.lines(),
        ["remember banana"],
        "its letters are the line, not pane keys (each n opened a session)"
    );
}

/// `n` and `d` act on sessions only in the Sessions pane, where the help lists them: in the
/// Transcript `n` steps through a search's matches, and once Esc cleared the search it opened
/// a session ("opened #3 for you"); `d` in Stats asked "d again closes #3".
#[test]
fn n_and_d_act_on_sessions_only_in_the_sessions_pane() {
    let mut c = console();
    c.focus_pane(PaneId::Transcript);
    press(&mut c, KeyCode::Char('/'));
    type_text(&mut c, "clock");
    press(&mut c, KeyCode::Enter);
    assert_eq!(press(&mut c, KeyCode::Char('n')), None);
    assert_eq!(c.transcript.search_hit.get(), 1, "n: the next match");
    press(&mut c, KeyCode::Esc);
    assert!(c.transcript.search.is_empty());
    assert_eq!(press(&mut c, KeyCode::Char('n')), None, "no session opened");
    assert_eq!(c.focus, PaneId::Transcript);
    assert!(
        c.notice
            .as_ref()
            .is_some_and(|n| n.text.contains("n in Sessions (1) opens a session")),
        "{:?}",
        c.notice
    );
    for pane in [
        PaneId::Stats,
        PaneId::Transcript,
        PaneId::Frames,
        PaneId::Mcp,
    ] {
        c.focus_pane(pane);
        c.selected = Some(2);
        assert_eq!(press(&mut c, KeyCode::Char('d')), None);
        assert_eq!(press(&mut c, KeyCode::Char('d')), None, "{pane:?}");
        assert_eq!(c.close_asked, None, "{pane:?}: nothing asked");
        assert_ne!(press(&mut c, KeyCode::Char('n')), Some(Action::NewSession));
    }
    // In Sessions they still do.
    c.focus_pane(PaneId::Sessions);
    assert_eq!(press(&mut c, KeyCode::Char('d')), None);
    assert_eq!(c.close_asked, Some(2));
    assert_eq!(
        press(&mut c, KeyCode::Char('d')),
        Some(Action::Close { session: 2 })
    );
    assert_eq!(press(&mut c, KeyCode::Char('n')), Some(Action::NewSession));
}

#[test]
fn q_types_in_the_input_but_quits_elsewhere_and_ctrl_c_always_quits() {
    let mut c = console();
    assert_eq!(press(&mut c, KeyCode::Char('q')), None);
    assert_eq!(c.input.lines(), ["q"]);
    assert_eq!(
        press_with(&mut c, KeyCode::Char('c'), KeyModifiers::CONTROL),
        Some(Action::Quit)
    );
    press(&mut c, KeyCode::Esc);
    assert_eq!(c.focus, PaneId::Sessions, "Esc leaves the input line");
    assert_eq!(
        press(&mut c, KeyCode::Char('q')),
        None,
        "an MCP client holds #2: q asks first"
    );
    let asked = c.notice.clone().unwrap().text;
    assert!(
        asked.contains("q again quits and ends 1 MCP client session; Esc stays"),
        "{asked}"
    );
    press(&mut c, KeyCode::Esc);
    assert!(!c.quit_asked, "Esc stays");
    // With a store that outlives the process, the conversations go on after a restart.
    c.state.header.store = Some("sqlite:/tmp/s.db".into());
    press(&mut c, KeyCode::Char('q'));
    let asked = c.notice.clone().unwrap().text;
    assert!(
        asked.contains("q again quits (1 MCP client session stops; the store keeps its conversation for the next run)"),
        "{asked}"
    );
    press(&mut c, KeyCode::Esc);
    press(&mut c, KeyCode::Esc);
    assert_eq!(
        c.focus,
        PaneId::Sessions,
        "Esc in a pane is back/cancel: it never lands in the input line"
    );
    assert_eq!(press(&mut c, KeyCode::Char('q')), None);
    assert_eq!(
        press(&mut c, KeyCode::Char('q')),
        Some(Action::Quit),
        "Esc then q q quits"
    );
    for pane in [PaneId::Transcript, PaneId::Frames, PaneId::Log] {
        c.focus_pane(pane);
        press(&mut c, KeyCode::Esc);
        assert_eq!(c.focus, pane, "Esc keeps the focus on {pane:?}");
    }
}

#[test]
fn a_line_into_a_session_the_console_did_not_open_asks_once() {
    let mut c = console();
    c.focus = PaneId::Sessions;
    press(&mut c, KeyCode::Down);
    assert_eq!(c.selected, Some(2), "#2 belongs to an MCP client");
    press(&mut c, KeyCode::Enter);
    type_text(&mut c, "hi");
    assert_eq!(press(&mut c, KeyCode::Enter), None, "the first Enter asks");
    assert!(c.notice.as_ref().unwrap().text.contains("Enter again"));
    press(&mut c, KeyCode::Esc);
    assert_eq!(c.input_line.pending_send, None, "Esc cancels the question");
    assert_eq!(c.input.lines(), ["hi"], "the line stays");
    assert_eq!(c.focus, PaneId::Input);
    assert_eq!(press(&mut c, KeyCode::Enter), None, "asked again");
    assert_eq!(
        press(&mut c, KeyCode::Enter),
        Some(Action::Chat {
            session: 2,
            line: "hi".into()
        })
    );
    type_text(&mut c, "again");
    assert_eq!(
        press(&mut c, KeyCode::Enter),
        Some(Action::Chat {
            session: 2,
            line: "again".into()
        }),
        "asked once per session"
    );
}

#[test]
fn readline_keys_edit_the_input_line_and_the_filter() {
    let mut c = console();
    type_text(&mut c, "hello big world");
    press_with(&mut c, KeyCode::Char('w'), KeyModifiers::CONTROL);
    assert_eq!(c.input.lines(), ["hello big "]);
    press_with(&mut c, KeyCode::Char('u'), KeyModifiers::CONTROL);
    assert_eq!(c.input.lines(), [""], "Ctrl+U deletes to the start");
    c.focus = PaneId::Frames;
    press(&mut c, KeyCode::Char('/'));
    type_text(&mut c, "kind:data name:Text");
    press_with(&mut c, KeyCode::Char('a'), KeyModifiers::CONTROL);
    type_text(&mut c, "!");
    press_with(&mut c, KeyCode::Char('e'), KeyModifiers::CONTROL);
    press_with(&mut c, KeyCode::Char('w'), KeyModifiers::CONTROL);
    assert_eq!(
        c.frames.editing.as_ref().map(|e| e.text()).as_deref(),
        Some("!kind:data name:")
    );
    press_with(&mut c, KeyCode::Char('u'), KeyModifiers::CONTROL);
    assert_eq!(c.frames.filter.text(), "");
}

#[test]
fn help_opens_with_question_mark_or_f1_and_closes_with_esc() {
    let mut c = console();
    press(&mut c, KeyCode::F(1));
    assert!(c.help.open);
    assert_eq!(
        press(&mut c, KeyCode::Char('q')),
        None,
        "q closes the help, never quits"
    );
    assert!(!c.help.open);
    c.focus = PaneId::Transcript;
    press(&mut c, KeyCode::Char('?'));
    assert!(c.help.open);
    press(&mut c, KeyCode::Esc);
    assert!(!c.help.open);
    assert_eq!(c.focus, PaneId::Transcript);
}

#[test]
fn arrows_and_jk_select_sessions_and_drive_the_other_panes() {
    let mut c = console();
    c.focus = PaneId::Sessions;
    press(&mut c, KeyCode::Down);
    assert_eq!(c.selected, Some(2));
    press(&mut c, KeyCode::Char('j'));
    assert_eq!(c.selected, Some(3));
    press(&mut c, KeyCode::Char('j'));
    assert_eq!(c.selected, Some(3), "the cursor stops at the last row");
    press(&mut c, KeyCode::Char('k'));
    press(&mut c, KeyCode::Up);
    assert_eq!(c.selected, Some(1));
    press(&mut c, KeyCode::Down);
    press(&mut c, KeyCode::Enter);
    assert_eq!(
        c.focus,
        PaneId::Input,
        "Enter on a session goes to the input line"
    );
    type_text(&mut c, "hi");
    assert_eq!(
        press(&mut c, KeyCode::Enter),
        None,
        "#2 is an MCP client's: asked"
    );
    assert_eq!(
        press(&mut c, KeyCode::Enter),
        Some(Action::Chat {
            session: 2,
            line: "hi".into()
        })
    );
}

#[test]
fn a_closed_session_takes_no_line_and_i_interrupts_an_open_one() {
    let mut c = console();
    c.selected = Some(3);
    type_text(&mut c, "anyone?");
    assert_eq!(press(&mut c, KeyCode::Enter), None);
    assert!(c.notice.as_ref().unwrap().text.contains("#3 is closed"));
    c.selected = Some(2);
    c.focus = PaneId::Sessions;
    assert_eq!(
        press(&mut c, KeyCode::Char('i')),
        Some(Action::Interrupt { session: 2 })
    );
}

#[test]
fn transcript_scrolls_back_and_end_follows_again() {
    let mut c = console();
    c.focus = PaneId::Transcript;
    draw(&c, 80, 20);
    press(&mut c, KeyCode::Up);
    press(&mut c, KeyCode::Char('k'));
    assert_eq!(c.transcript.back.get(), 2);
    press(&mut c, KeyCode::End);
    assert_eq!(c.transcript.back.get(), 0);
    press(&mut c, KeyCode::Home);
    draw(&c, 80, 20);
    let top = c.transcript.back.get();
    assert!(
        top > 0 && top < 100,
        "Home is clamped to the top when drawn: {top}"
    );
}

#[test]
fn slash_filters_frames_as_typed_and_esc_clears() {
    let mut c = console();
    c.focus = PaneId::Log;
    let all = c.frame_lines().len();
    press(&mut c, KeyCode::Char('/'));
    assert_eq!(c.focus, PaneId::Frames);
    type_text(&mut c, "kind:system");
    assert_eq!(
        c.frames.editing.as_ref().map(|e| e.text()).as_deref(),
        Some("kind:system")
    );
    let filtered = c.frame_lines();
    assert!(filtered.len() < all);
    press(&mut c, KeyCode::Enter);
    assert_eq!(c.frames.editing, None);
    assert_eq!(c.frames.filter.text(), "kind:system");
    assert_eq!(c.frame_lines(), filtered, "Enter keeps the filter");
    press(&mut c, KeyCode::Char('/'));
    press(&mut c, KeyCode::Esc);
    assert!(c.frames.filter.is_empty());
    assert_eq!(c.frame_lines().len(), all);
}

fn piece(id: u64) -> Event {
    Event::Frame(FrameEvent {
        id,
        session: 1,
        turn: 9,
        kind: "data".into(),
        name: "TextPiece".into(),
        from: "model".into(),
        to: "output".into(),
        direction: "down".into(),
        at_us: crate::tests::fixture::T0 + 20_000_000,
        detail: "late".into(),
        depth: 0,
    })
}

#[test]
fn space_pauses_frames_and_new_ones_wait_until_resumed() {
    let mut c = console();
    press(&mut c, KeyCode::Char('4'));
    press(&mut c, KeyCode::Esc);
    c.focus = PaneId::Frames;
    let before = c.frame_lines().len();
    press(&mut c, KeyCode::Char(' '));
    assert!(c.frames.paused.is_some());
    c.state.apply(&piece(9000));
    assert_eq!(
        c.frame_lines().len(),
        before,
        "a paused list keeps what it showed"
    );
    press(&mut c, KeyCode::Char('p'));
    assert!(c.frames.paused.is_none());
    assert_eq!(
        c.frame_lines().len(),
        before + 2,
        "a boundary and the new frame"
    );
}

#[test]
fn frames_cursor_browses_then_follows_and_enter_opens_the_detail() {
    let mut c = console();
    c.focus_pane(PaneId::Frames);
    assert_eq!(c.frames.cursor, None, "following the newest frame");
    let newest = c.cursor_frame().expect("a frame").seq;
    press(&mut c, KeyCode::Up);
    let browsing = c.frames.cursor.expect("browsing");
    assert!(browsing < newest);
    c.state.apply(&piece(9001));
    assert_eq!(
        c.cursor_frame().unwrap().seq,
        browsing,
        "browsing stays put as frames arrive"
    );
    press(&mut c, KeyCode::Enter);
    assert!(c.frames.detail);
    press(&mut c, KeyCode::Down);
    assert!(
        c.cursor_frame().unwrap().seq > browsing,
        "↓ in the detail moves to the next frame"
    );
    press(&mut c, KeyCode::Esc);
    assert!(!c.frames.detail);
    press(&mut c, KeyCode::End);
    assert_eq!(c.frames.cursor, None);
    assert_eq!(c.cursor_frame().unwrap().frame().id, 9001);
}

#[test]
fn a_switches_frames_progress_and_stats_between_one_session_and_all() {
    let mut c = console();
    c.focus_pane(PaneId::Frames);
    let one = c.frame_lines().len();
    press(&mut c, KeyCode::Char('a'));
    assert!(c.frames.all);
    assert!(c.frame_lines().len() > one);
    c.focus_pane(PaneId::Stats);
    press(&mut c, KeyCode::Char('a'));
    assert!(!c.stats.all);
    c.focus_pane(PaneId::Progress);
    press(&mut c, KeyCode::Char('a'));
    assert!(!c.progress.all);
}

#[test]
fn mouse_clicks_focus_panes_select_rows_and_switch_tabs() {
    let mut c = console();
    draw(&c, 140, 36);
    let areas = c.areas.get();
    // The third session row (the header row comes first).
    click(&mut c, areas.sessions.x + 3, areas.sessions.y + 4);
    assert_eq!(c.focus, PaneId::Sessions);
    assert_eq!(c.selected, Some(3));
    click(&mut c, areas.tabs[3].x + 2, areas.tabs[3].y);
    assert_eq!((c.focus, c.inspector), (PaneId::Stats, PaneId::Stats));
    click(&mut c, areas.tabs[2].x + 2, areas.tabs[2].y);
    draw(&c, 140, 36);
    // Inside the border: the sources line, the list's heading, then the tools.
    click(&mut c, areas.inspector.x + 3, areas.inspector.y + 3 + 2);
    assert_eq!(c.tools.nav.cursor, 2);
    click(&mut c, areas.input.x + 3, areas.input.y + 1);
    assert_eq!(c.focus, PaneId::Input);
}

#[test]
fn mouse_wheel_scrolls_the_pane_under_the_pointer() {
    let mut c = console();
    draw(&c, 140, 36);
    let t = c.areas.get().transcript;
    c.handle(&TermEvent::Mouse(MouseEvent {
        kind: MouseEventKind::ScrollUp,
        column: t.x + 2,
        row: t.y + 2,
        modifiers: KeyModifiers::NONE,
    }));
    assert_eq!(c.transcript.back.get(), 3);
    assert_eq!(c.focus, PaneId::Input, "the wheel does not move the focus");
}

#[test]
fn a_replay_is_read_only() {
    let mut c = console();
    c.read_only = true;
    c.focus = PaneId::Sessions;
    for _ in 0..ORDER.len() {
        press(&mut c, KeyCode::Tab);
        assert_ne!(c.focus, PaneId::Input, "Tab skips the input line");
    }
    c.focus = PaneId::Sessions;
    assert_eq!(press(&mut c, KeyCode::Enter), None);
    assert_eq!(press(&mut c, KeyCode::Char('i')), None);
    assert_eq!(
        press(&mut c, KeyCode::Char('R')),
        None,
        "no config to reload"
    );
    press(&mut c, KeyCode::Char('3'));
    assert_ne!(c.focus, PaneId::Input);
}

#[test]
fn capital_r_reloads_the_config_from_the_panes_and_types_in_the_input_line() {
    let mut c = console();
    press(&mut c, KeyCode::Char('R'));
    assert_eq!(c.input.lines(), ["R"], "in the input line it is a letter");
    press(&mut c, KeyCode::Esc);
    assert_eq!(
        press(&mut c, KeyCode::Char('R')),
        Some(Action::ReloadConfig)
    );
    assert!(c.notice.as_ref().is_some_and(|n| !n.error));
}

#[test]
fn a_folded_reload_is_told_once_in_the_notice() {
    use turnscope::observe::ConfigReloadEvent;
    let mut c = console();
    let refused = ConfigReloadEvent {
        version: 1,
        outcome: "refused".into(),
        cause: "file".into(),
        error: Some("turnscope.toml:3:13: bot.round_cap: invalid value".into()),
        ..ConfigReloadEvent::default()
    };
    c.state.apply(&Event::ConfigReload(refused));
    c.notice_reloads();
    let notice = c.notice.clone().expect("a notice");
    assert!(notice.error);
    assert_eq!(
        notice.text,
        "config refused: turnscope.toml:3:13: bot.round_cap: invalid value"
    );
    c.notice = None;
    c.notice_reloads();
    assert!(c.notice.is_none(), "told once");
    let mark = c.state.header.config.clone().unwrap();
    assert_eq!((mark.version, mark.outcome.as_str()), (1, "refused"));
}

#[test]
fn paste_goes_into_the_input_line() {
    let mut c = console();
    c.handle(&TermEvent::Paste("pasted\ntext".into()));
    assert_eq!(c.input.lines(), ["pasted", "text"]);
}

#[test]
fn paste_goes_where_typed_text_would() {
    // The hand-call form's field being edited: one line, then the call goes out with it.
    let mut c = console();
    press(&mut c, KeyCode::Esc);
    press(&mut c, KeyCode::Char('6'));
    press(&mut c, KeyCode::Char('j'));
    press(&mut c, KeyCode::Enter);
    assert_eq!(c.key_owner(), crate::view::keys::KeyOwner::Form);
    c.handle(&TermEvent::Paste("pasted\nwords".into()));
    match press(&mut c, KeyCode::Enter) {
        Some(Action::HandCall { arguments, .. }) => {
            assert_eq!(arguments, r#"{"text":"pasted words"}"#);
        }
        other => panic!("{other:?}"),
    }
    // A filter being typed updates as it does for keys.
    let mut c = console();
    press(&mut c, KeyCode::Esc);
    press(&mut c, KeyCode::Char('4'));
    press(&mut c, KeyCode::Char('/'));
    assert!(c.frames.editing.is_some());
    c.handle(&TermEvent::Paste("name:TextPiece".into()));
    assert_eq!(c.frames.editing.as_ref().unwrap().text(), "name:TextPiece");
    assert_eq!(c.frames.filter, FrameFilter::parse("name:TextPiece"));
    // Nothing being edited: dropped, and no letter of it taken as a key.
    press(&mut c, KeyCode::Esc);
    let focus = c.focus;
    c.handle(&TermEvent::Paste("q3z".into()));
    assert_eq!(c.focus, focus);
    assert!(c.input.lines().iter().all(String::is_empty));
}

#[test]
fn the_request_editors_complaint_goes_once_the_body_is_json_again() {
    use crate::view::resend::RequestEditor;
    let mut c = console();
    let key = RequestKey {
        session: 1,
        turn: 1,
        index: 0,
    };
    c.editor = Some(RequestEditor::new(key, "{}", "http://127.0.0.1:9/v1"));
    press(&mut c, KeyCode::Char('x'));
    let refused = c.key(&KeyEvent::new(KeyCode::Char('s'), KeyModifiers::CONTROL));
    assert!(refused.is_none());
    let editor = c.editor.as_ref().unwrap();
    assert!(editor.error.as_ref().unwrap().contains("not JSON"));
    // The cursor is on what the parser stopped at: Delete takes it away.
    press(&mut c, KeyCode::Delete);
    assert_eq!(c.editor.as_ref().unwrap().text(), "{}");
    assert!(c.editor.as_ref().unwrap().error.is_none(), "JSON again");
    // Undone back to JSON, the complaint goes too (tour N: it stayed over a good body).
    press(&mut c, KeyCode::Char('x'));
    c.key(&KeyEvent::new(KeyCode::Char('s'), KeyModifiers::CONTROL));
    assert!(c.editor.as_ref().unwrap().error.is_some());
    c.key(&KeyEvent::new(KeyCode::Char('z'), KeyModifiers::CONTROL));
    assert_eq!(c.editor.as_ref().unwrap().text(), "{}");
    assert!(c.editor.as_ref().unwrap().error.is_none(), "undone to JSON");
}

/// The notice shown now (empty when none).
fn noticed(c: &Console) -> String {
    c.notice
        .as_ref()
        .map(|n| n.text.clone())
        .unwrap_or_default()
}

/// An edit of a model request closed unsent (Esc, or a first Ctrl+C) is kept and opens again
/// as it was left; Ctrl+R starts over, Ctrl+Z undoes (it does not suspend the console), and
/// Ctrl+C with nothing edited quits as anywhere (tour J: Esc threw the edit away).
#[test]
fn an_unsent_request_edit_is_kept_and_the_editor_keys_lose_nothing() {
    let ctrl = |c: &mut Console, ch: char| press_with(c, KeyCode::Char(ch), KeyModifiers::CONTROL);
    let mut c = console();
    c.selected = Some(1);
    c.open_turn_view();
    assert_eq!(c.edit_request(false), None);
    let recorded = c.editor.as_ref().expect("the editor opens").text();
    for ch in "zz".chars() {
        press(&mut c, KeyCode::Char(ch));
    }
    let edited = c.editor.as_ref().unwrap().text();
    assert_ne!(edited, recorded);
    assert_eq!(press(&mut c, KeyCode::Esc), None);
    assert!(c.editor.is_none());
    assert!(noticed(&c).contains("your edit is kept"));
    c.edit_request(false);
    assert_eq!(c.editor.as_ref().unwrap().text(), edited, "as it was left");
    // Undo takes the last letter back; the console is not suspended.
    assert_eq!(ctrl(&mut c, 'z'), None);
    assert_ne!(c.editor.as_ref().unwrap().text(), edited);
    assert_eq!(ctrl(&mut c, 'y'), None);
    assert_eq!(c.editor.as_ref().unwrap().text(), edited);
    // Under Help, or on the URL line, Ctrl+Z does not undo in the body unseen.
    c.help.open = true;
    assert_eq!(ctrl(&mut c, 'z'), None);
    assert_eq!(c.editor.as_ref().unwrap().text(), edited);
    c.help.open = false;
    press(&mut c, KeyCode::Tab);
    assert!(c.editor.as_ref().unwrap().on_url);
    assert_eq!(ctrl(&mut c, 'z'), None);
    assert_eq!(c.editor.as_ref().unwrap().text(), edited);
    assert!(noticed(&c).contains("the URL line keeps no history"));
    press(&mut c, KeyCode::Tab);
    // A first Ctrl+C over the edit keeps it and closes the editor; the next quits.
    assert_eq!(ctrl(&mut c, 'c'), None);
    assert!(c.editor.is_none());
    assert!(noticed(&c).contains("Ctrl+C again quits"));
    assert_eq!(ctrl(&mut c, 'c'), Some(Action::Quit));
    c.edit_request(false);
    assert_eq!(c.editor.as_ref().unwrap().text(), edited);
    ctrl(&mut c, 'r');
    assert_eq!(c.editor.as_ref().unwrap().text(), recorded, "started over");
    assert!(
        noticed(&c)
            .contains("started over from the recorded request; Ctrl+Z twice brings your edit back"),
        "{}",
        noticed(&c)
    );
    // Starting over is an edit like another: undone, the edit is back (tour N: lost to one key).
    let mut undos = 0;
    while c.editor.as_ref().unwrap().text() != edited && undos < 5 {
        ctrl(&mut c, 'z');
        undos += 1;
    }
    assert_eq!(
        c.editor.as_ref().unwrap().text(),
        edited,
        "after {undos} undos"
    );
    assert_eq!(undos, 2, "the start over's insertion, then its deletion");
    ctrl(&mut c, 'r');
    // Nothing edited: Esc keeps nothing, Ctrl+C quits at once.
    press(&mut c, KeyCode::Esc);
    assert!(c.edits_kept.is_empty());
    c.edit_request(false);
    assert_eq!(ctrl(&mut c, 'c'), Some(Action::Quit));
}

/// An unsent edit of a variant is kept apart from one of the recorded request (it replaced it),
/// each opens again from where it was opened, and Ctrl+R starts over from that: the variant's
/// body, as its notice says (tour L: the notice said "the recorded request").
#[test]
fn edits_of_the_recorded_request_and_of_a_variant_are_kept_apart() {
    use turnscope::model::resend::ResendAnswer;
    let ctrl = |c: &mut Console, ch: char| press_with(c, KeyCode::Char(ch), KeyModifiers::CONTROL);
    let type_in = |c: &mut Console, text: &str| {
        for ch in text.chars() {
            press(c, KeyCode::Char(ch));
        }
    };
    let mut c = console();
    c.selected = Some(1);
    c.open_turn_view();
    let pick = c.turn_view.as_ref().unwrap();
    let key = pick.request_key();
    c.edit_request(false);
    type_in(&mut c, "rr");
    let recorded_edit = c.editor.as_ref().unwrap().text();
    press(&mut c, KeyCode::Esc);
    // A variant came back; its editor is opened from the variants view.
    let body = serde_json::json!({"messages": [{"role": "user", "content": "hi"}]});
    c.resend_done(key, body, ResendAnswer::default());
    assert!(c.variants_view.is_some());
    press(&mut c, KeyCode::Char('e'));
    let variant_body = c.editor.as_ref().expect("the variant's editor").text();
    type_in(&mut c, "vv");
    let variant_edit = c.editor.as_ref().unwrap().text();
    press(&mut c, KeyCode::Esc);
    assert_eq!(c.edits_kept.len(), 2, "neither replaced the other");
    // Back in the variants view: e opens the variant's edit as it was left.
    assert!(c.variants_view.is_some());
    press(&mut c, KeyCode::Char('e'));
    assert_eq!(c.editor.as_ref().unwrap().text(), variant_edit);
    assert!(
        noticed(&c).contains("starts over from variant 1"),
        "{}",
        noticed(&c)
    );
    ctrl(&mut c, 'r');
    assert_eq!(c.editor.as_ref().unwrap().text(), variant_body);
    press(&mut c, KeyCode::Esc);
    // The recorded request's edit is still there.
    c.variants_view = None;
    c.edit_request(false);
    assert_eq!(c.editor.as_ref().unwrap().text(), recorded_edit);
    assert!(noticed(&c).contains("starts over from the recorded request"));
    // An answer that comes while the person edits does not open the variants over the editor.
    let body = serde_json::json!({"messages": [{"role": "user", "content": "again"}]});
    c.resend_done(key, body, ResendAnswer::default());
    assert!(c.variants_view.is_none() && c.editor.is_some());
    assert!(
        noticed(&c).contains("v in the turn view shows it"),
        "{}",
        noticed(&c)
    );
}

/// A variant answered by another model server (its URL edited) is saved as a test case that
/// says so: the case's expectations are that server's, not the bot's model's (tour J).
#[test]
fn a_variant_sent_elsewhere_becomes_a_case_that_names_where() {
    use turnscope::model::resend::ResendAnswer;
    let mut c = console();
    c.selected = Some(1);
    c.open_turn_view();
    let pick = c.turn_view.as_ref().unwrap();
    let key = pick.request_key();
    let recorded = c.state.wire.calls_of(key.session, key.turn)[key.index]
        .request()
        .unwrap()
        .url
        .clone();
    let body = serde_json::json!({"messages": [{"role": "user", "content": "hi"}]});
    let case_of = |c: &mut Console, url: &str| {
        let answer = ResendAnswer {
            text: "hello".into(),
            url: url.into(),
            ..ResendAnswer::default()
        };
        c.resend_done(key, body.clone(), answer);
        match press(c, KeyCode::Char('t')) {
            Some(Action::ExportTest { text, .. }) => text,
            other => panic!("{other:?}"),
        }
    };
    let elsewhere = case_of(&mut c, "http://127.0.0.1:47540/v1/chat/completions");
    assert!(
        elsewhere.contains("sent to http://127.0.0.1:47540/v1/chat/completions instead of"),
        "{elsewhere}"
    );
    let same = case_of(&mut c, &recorded);
    assert!(!same.contains("instead of the session's model"), "{same}");
    // The session's report carries both variants (they live only in the console's memory).
    let report = crate::draw::export::session_report(&c, key.session);
    for n in [1, 2] {
        let said = format!("variant {n} of model request {}", key.index + 1);
        assert!(report.contains(&said), "{said:?} missing:\n{report}");
    }
    assert!(
        report.contains("sent to     http://127.0.0.1:47540"),
        "{report}"
    );
}

#[test]
fn settle_keeps_a_listed_selection_and_falls_back_to_the_persons_session() {
    let mut c = console();
    c.selected = Some(2);
    c.settle();
    assert_eq!(c.selected, Some(2));
    assert_eq!(c.sessions_list.nav.cursor, 1);
    // Session 2 goes away without a close event: it is marked closed, still listed.
    let mine = c.state.session(1).cloned().expect("row 1");
    c.state.sync_sessions(vec![SessionRow { ..mine }]);
    c.settle();
    assert_eq!(c.selected, Some(2));
    assert!(c.state.session(2).unwrap().is_closed());
    c.selected = Some(77);
    c.settle();
    assert_eq!(c.selected, Some(1));
}

/// A viewer's preamble retells each finished turn's reply as one crossing of frame id 0: each
/// is its own line under its own turn's rule, never a second crossing of the first.
#[test]
fn retold_replies_are_a_line_each_under_their_turns() {
    use crate::view::frames::FrameLine;
    let mut c = console();
    c.selected = Some(9);
    for turn in 1..=3u64 {
        let reply = format!("reply {turn}");
        c.state
            .apply(&crossing(9, turn, 0, "TextPiece", &reply, turn * 10));
    }
    let lines = c.frame_lines();
    let drawn: Vec<String> = lines
        .iter()
        .map(|l| match l {
            FrameLine::Boundary { turn, .. } => format!("turn {turn}"),
            FrameLine::Frame(i) => {
                let hops = c.frame_hops(*i).len();
                format!("{} ({hops})", c.state.frames()[*i].frame().detail)
            }
        })
        .collect();
    assert_eq!(
        drawn,
        [
            "turn 1",
            "reply 1 (1)",
            "turn 2",
            "reply 2 (1)",
            "turn 3",
            "reply 3 (1)"
        ]
    );
}

/// A watched server that restarted numbers its sessions and frames from 1 again: once the
/// old session's frames are let go, the new session's frames are listed though their ids are
/// the old ones' (the pane had taken them for frames it had listed, and showed none).
#[test]
fn after_a_watched_restart_the_new_sessions_frames_are_listed() {
    use crate::view::frames::FrameLine;
    use turnscope::observe::{Event, SessionEvent, SessionOpener};
    let mut c = console();
    c.selected = Some(9);
    let session = |closed: Option<&str>| {
        Event::Session(SessionEvent {
            session: 9,
            handle_prefix: "abcdef01".into(),
            opener: SessionOpener::Api,
            closed: closed.map(str::to_string),
            at_us: 1,
            restored: false,
            began_us: None,
            taken_from: None,
            greeting: None,
        })
    };
    let frame = |id: u64, detail: &str| crossing(9, 1, id, "TextPiece", detail, 2);
    let shown = |c: &Console| -> Vec<String> {
        c.frame_lines()
            .iter()
            .filter_map(|l| match l {
                FrameLine::Frame(i) => Some(c.state.frames()[*i].frame().detail.clone()),
                FrameLine::Boundary { .. } => None,
            })
            .collect()
    };
    c.state.apply(&session(None));
    c.state.apply(&frame(1, "old"));
    c.state.apply(&frame(2, "old too"));
    assert_eq!(shown(&c), ["old", "old too"]);
    c.state
        .apply(&session(Some("the watched server restarted")));
    c.state.apply(&session(None));
    c.state.apply(&frame(1, "new"));
    c.state.apply(&frame(2, "new too"));
    assert_eq!(shown(&c), ["new", "new too"]);
}

#[test]
fn an_interrupts_flush_never_draws_the_turn_rule_twice() {
    use crate::view::frames::FrameLine;
    use turnscope::observe::{Event, FrameEvent};
    let mut c = console();
    c.selected = Some(9);
    for (id, turn) in [(1, 4), (2, 4), (3, 0), (4, 4), (5, 3), (6, 5)] {
        c.state.apply(&Event::Frame(FrameEvent {
            id,
            session: 9,
            turn,
            kind: "control".into(),
            name: "Flush".into(),
            from: "a".into(),
            to: "b".into(),
            direction: "down".into(),
            at_us: 1,
            detail: String::new(),
            depth: 0,
        }));
    }
    let rules = |c: &Console| -> Vec<u64> {
        c.frame_lines()
            .iter()
            .filter_map(|l| match l {
                FrameLine::Boundary { turn, .. } => Some(*turn),
                FrameLine::Frame(_) => None,
            })
            .collect()
    };
    assert_eq!(rules(&c), vec![4, 5]);
    // The session's pipeline starting again after its turns (reopened from the store) draws
    // an "opened again" rule (turn 0), once, also with every crossing listed: its Flush and
    // later turns go on as before.
    c.frames.per_link = true;
    for (id, turn, name) in [
        (7, 0, "Start"),
        (7, 0, "Start"),
        (8, 0, "Flush"),
        (9, 6, "UserLine"),
    ] {
        c.state.apply(&crossing(9, turn, id, name, "", 2));
    }
    assert_eq!(rules(&c), vec![4, 5, 0, 6]);
}

/// A frame's crossings reach the console when its way ends, so the line a processor held
/// while it answered (here `RunModel`, let go after `ResponseStart` reached the sink) comes
/// after frames it caused; the pane lists each turn's frames by their first crossing all the
/// same, and the cursor stays on the frame it was on. The oldest frames leaving the window
/// take their lines with them wherever those were put.
#[test]
fn frames_that_come_late_are_listed_where_they_crossed() {
    use crate::view::frames::FrameLine;
    use turnscope::observe::{Event, FrameEvent};
    let mut c = console();
    c.selected = Some(9);
    let crossing = |id: u64, name: &str, from: &str, to: &str, at_us: u64| {
        Event::Frame(FrameEvent {
            id,
            session: 9,
            turn: 1,
            kind: "data".into(),
            name: name.to_string().into(),
            from: from.to_string().into(),
            to: to.to_string().into(),
            direction: "down".into(),
            at_us,
            detail: String::new(),
            depth: 0,
        })
    };
    // As the bus hands them out: each frame's crossings together, where its way ended.
    for event in [
        crossing(3, "UserLine", "source", "input", 100),
        crossing(3, "UserLine", "input", "user-aggregator", 110),
        crossing(5, "ResponseStart", "model", "output", 300),
        crossing(5, "ResponseStart", "output", "sink", 310),
        crossing(4, "RunModel", "user-aggregator", "model", 200),
        crossing(6, "TextPiece", "model", "output", 400),
    ] {
        c.state.apply(&event);
    }
    let names = |c: &Console| -> Vec<String> {
        c.frame_lines()
            .iter()
            .filter_map(|l| match l {
                FrameLine::Frame(i) => Some(c.state.frames()[*i].frame().name.to_string()),
                FrameLine::Boundary { .. } => None,
            })
            .collect()
    };
    assert_eq!(
        names(&c),
        ["UserLine", "RunModel", "ResponseStart", "TextPiece"]
    );
    // The cursor on ResponseStart stays there, though RunModel arrived after it.
    let lines = c.frame_lines();
    let on = lines
        .iter()
        .position(|l| matches!(l, FrameLine::Frame(i) if c.state.frames()[*i].frame().id == 5))
        .unwrap();
    c.frames.set_cursor(&c.state, &lines, on, false);
    let cursor = c.frames.cursor_frame(&c.state, c.selected).unwrap();
    assert_eq!(cursor.frame().name, "ResponseStart");
    // The oldest crossings leave, up to ResponseStart's first: its line, put after
    // RunModel's, goes too.
    let mut n = 0;
    let kept = |c: &Console, id: u64, to: &str| {
        c.state
            .frames()
            .iter()
            .any(|r| r.frame().id == id && r.frame().to == to)
    };
    while kept(&c, 5, "output") {
        c.state
            .apply(&crossing(100 + n, "TextPiece", "model", "output", 500 + n));
        n += 1;
    }
    assert!(kept(&c, 4, "model"), "RunModel is still kept");
    assert_eq!(names(&c)[..3], ["RunModel", "TextPiece", "TextPiece"]);
}

#[test]
fn z_zooms_the_focused_pane_and_slash_searches_the_transcript() {
    let mut c = console();
    c.focus_pane(PaneId::Frames);
    press(&mut c, KeyCode::Char('z'));
    assert!(c.zoom);
    let mut terminal = Terminal::new(TestBackend::new(100, 30)).unwrap();
    terminal.draw(|f| crate::draw::draw(f, &c)).unwrap();
    let areas = c.areas.get();
    assert_eq!(areas.inspector.height, 27, "the inspector fills the body");
    assert_eq!(areas.sessions.height, 0);
    press(&mut c, KeyCode::Esc);
    assert!(!c.zoom, "Esc gives the other panes back");

    c.focus_pane(PaneId::Transcript);
    press(&mut c, KeyCode::Char('/'));
    type_text(&mut c, "CLOCK");
    assert_eq!(c.transcript.search, "CLOCK");
    assert_eq!(c.frames.editing, None, "the frame filter is left alone");
    press(&mut c, KeyCode::Enter);
    terminal.draw(|f| crate::draw::draw(f, &c)).unwrap();
    let screen = format!("{:?}", terminal.backend());
    assert!(screen.contains("search: CLOCK"), "{screen}");
    press(&mut c, KeyCode::Char('n'));
    assert_eq!(c.transcript.search_hit.get(), 1);
    press(&mut c, KeyCode::Esc);
    assert!(c.transcript.search.is_empty(), "Esc clears the search");
}

#[test]
fn e_exports_the_selected_session() {
    let mut c = console();
    c.focus = PaneId::Sessions;
    match press(&mut c, KeyCode::Char('e')) {
        Some(Action::Export { session, text }) => {
            assert_eq!(session, 1);
            assert!(text.contains("what does the clock say"), "{text}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_replay_steps_turn_end_by_turn_end() {
    let text: String = crate::tests::fixture::events()
        .iter()
        .map(|e| serde_json::to_string(e).expect("event serialises") + "\n")
        .collect();
    let mut c = crate::run::replay::console_of(&text, "run.jsonl", crate::theme::Theme::default())
        .expect("replay");
    c.selected = Some(1);
    assert_eq!(c.state.transcript(1).len(), 2, "the run as it ended");
    press(&mut c, KeyCode::Char('['));
    press(&mut c, KeyCode::Char('['));
    let turns = c.state.transcript(1);
    assert_eq!(turns.len(), 1, "back at the first turn's end");
    assert_eq!(turns[0].end.as_deref(), Some("completed"));
    press(&mut c, KeyCode::Char('['));
    assert_eq!(
        c.state.transcript(1).len(),
        1,
        "the first stop is the first turn end"
    );
    press(&mut c, KeyCode::Char(']'));
    press(&mut c, KeyCode::Char(']'));
    assert_eq!(c.state.transcript(1).len(), 2);
}

#[test]
fn a_replay_scrubs_inside_a_turn() {
    let text: String = crate::tests::fixture::events()
        .iter()
        .map(|e| serde_json::to_string(e).expect("event serialises") + "\n")
        .collect();
    let mut c = crate::run::replay::console_of(&text, "run.jsonl", crate::theme::Theme::default())
        .expect("replay");
    c.selected = Some(1);
    // Back to the first turn's end, then one step on: the second turn has started only.
    press(&mut c, KeyCode::Char('['));
    press(&mut c, KeyCode::Char('['));
    press(&mut c, KeyCode::Char('.'));
    let turns = c.state.transcript(1);
    assert_eq!(turns.len(), 2);
    assert_eq!(turns[1].end, None, "part way through turn 2");
    assert!(turns[1].tools.is_empty());
    let label = &c.tape.as_ref().expect("tape").label;
    assert!(label.contains("#1 turn 2 started"), "{label}");
    // On through the tool call: the transcript shows it before the turn ends.
    press(&mut c, KeyCode::Char('.'));
    let turns = c.state.transcript(1);
    assert_eq!(
        turns[1].tools.len(),
        1,
        "{:?}",
        c.tape.as_ref().map(|t| &t.label)
    );
    assert_eq!(turns[1].end, None);
    // , steps back inside the turn.
    press(&mut c, KeyCode::Char(','));
    assert!(c.state.transcript(1)[1].tools.is_empty());
}

#[test]
fn the_tools_pane_calls_a_tool_through_its_form_only_once_the_schema_passes() {
    let mut c = console();
    press(&mut c, KeyCode::Esc);
    press(&mut c, KeyCode::Char('6'));
    assert_eq!(c.focus, PaneId::Tools);
    // echo (the built-in) is second: its one field, `text`, is required.
    press(&mut c, KeyCode::Char('j'));
    assert_eq!(press(&mut c, KeyCode::Enter), None);
    assert_eq!(c.key_owner(), crate::view::keys::KeyOwner::Form);
    // Refused before sending: nothing to do for the loop, the reason in a notice.
    assert_eq!(press(&mut c, KeyCode::Enter), None);
    let notice = c.notice.clone().expect("a notice").text;
    assert!(notice.contains("not sent: text: required"), "{notice}");
    // Letters that are keys elsewhere (q quits, z zooms) are text here.
    type_text(&mut c, "qz");
    match press(&mut c, KeyCode::Enter) {
        Some(Action::HandCall {
            tool, arguments, ..
        }) => {
            assert_eq!(tool, "echo");
            assert_eq!(arguments, r#"{"text":"qz"}"#);
        }
        other => panic!("{other:?}"),
    }
    // The list keeps it; `s` saves it, which writes the project's file. (Its answer has not
    // come: the first Esc cancels it, the second closes the form.)
    press(&mut c, KeyCode::Esc);
    press(&mut c, KeyCode::Esc);
    press(&mut c, KeyCode::Char('h'));
    assert_eq!(c.key_owner(), crate::view::keys::KeyOwner::Calls);
    match press(&mut c, KeyCode::Char('s')) {
        Some(Action::SaveCalls { .. }) => {
            let text = c.tools.hand.saved_file();
            assert!(text.contains("\"qz\""), "{text}");
        }
        other => panic!("{other:?}"),
    }
    // Enter runs it again; `e` edits it in the form.
    assert!(matches!(
        press(&mut c, KeyCode::Enter),
        Some(Action::HandCall { .. })
    ));
    press(&mut c, KeyCode::Char('e'));
    assert_eq!(c.key_owner(), crate::view::keys::KeyOwner::Form);
}

#[test]
fn a_replay_neither_calls_tools_nor_resends() {
    let mut c = Console::new(crate::tests::fixture::state(), Default::default(), true);
    c.selected = Some(1);
    c.settle();
    // Its turn view's border offers copying, not editing and resending (tour J).
    c.open_turn_view();
    let mut t = Terminal::new(TestBackend::new(160, 48)).unwrap();
    t.draw(|f| crate::draw::draw(f, &c)).unwrap();
    let view = format!("{:?}", t.backend());
    assert!(
        view.contains("c copy as curl") && !view.contains("e/E edit"),
        "{view}"
    );
    press(&mut c, KeyCode::Esc);
    c.focus_pane(PaneId::Tools);
    press(&mut c, KeyCode::Char('j'));
    assert_eq!(press(&mut c, KeyCode::Enter), None);
    assert_eq!(
        c.key_owner(),
        crate::view::keys::KeyOwner::Pane(PaneId::Tools)
    );
}

#[test]
fn the_help_opens_at_its_top_each_time() {
    let mut c = console();
    press(&mut c, KeyCode::F(1));
    assert!(c.help.open);
    press(&mut c, KeyCode::Down);
    press(&mut c, KeyCode::Down);
    assert_eq!(c.help.scroll.get(), 2);
    press(&mut c, KeyCode::Esc);
    press(&mut c, KeyCode::F(1));
    assert_eq!(c.help.scroll.get(), 0, "not where it was left");
}

/// In a replay, `,` and `.` step inside the turn while the turn view shows it, and the view
/// follows the newest turn it showed (its waterfall part way through).
#[test]
fn a_replay_scrubs_inside_the_turn_the_turn_view_shows() {
    let text: String = crate::tests::fixture::events()
        .iter()
        .map(|e| serde_json::to_string(e).expect("event serialises") + "\n")
        .collect();
    let mut c = crate::run::replay::console_of(&text, "run.jsonl", crate::theme::Theme::default())
        .expect("replay");
    c.selected = Some(1);
    press(&mut c, KeyCode::Char('['));
    press(&mut c, KeyCode::Char('['));
    press(&mut c, KeyCode::Char('w'));
    assert_eq!(c.turn_view.as_ref().map(|p| p.turn), Some(1));
    press(&mut c, KeyCode::Char('.'));
    assert!(c.turn_view.is_some(), "the view stays open");
    let pick = c.turn_view.as_ref().expect("open");
    assert_eq!(
        pick.turn, 2,
        "it showed the newest turn, so it follows turn 2"
    );
    let tl = c.state.timelines.get(1, 2).expect("turn 2's timeline");
    assert_eq!(tl.end, None, "part way through");
    assert!(tl.in_flight().is_some(), "its model request has its bar");
    press(&mut c, KeyCode::Char(','));
    assert_eq!(
        c.turn_view.as_ref().map(|p| p.turn),
        Some(1),
        "back before turn 2 started, the newest is turn 1 again"
    );
}

/// pipecat's frame names run to 33 characters (`OutputTransportMessageUrgentFrame`): where the
/// pane has room (zoomed, a wide terminal) the name column grows to the longest name on
/// screen, so they are read whole; a pane the width of the usual split keeps 21 cells.
#[test]
fn long_frame_names_are_shown_whole_where_the_pane_has_room() {
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use turnscope::observe::{Event, FrameEvent};
    let mut c = console();
    c.selected = Some(9);
    for (id, name) in [
        (1, "OutputTransportMessageUrgentFrame"),
        (2, "LLMTextFrame"),
    ] {
        c.state.apply(&Event::Frame(FrameEvent {
            id,
            session: 9,
            turn: 1,
            kind: "system".into(),
            name: name.into(),
            from: "RTVIProcessor#0".into(),
            to: "Pipeline#0::Source".into(),
            direction: "down".into(),
            at_us: c.state.now_us + id,
            detail: "hi".into(),
            depth: 0,
        }));
    }
    c.focus = PaneId::Frames;
    let draw = |c: &mut Console, w: u16| {
        c.before_draw();
        let mut terminal = Terminal::new(TestBackend::new(w, 30)).expect("test terminal");
        terminal.draw(|f| crate::draw::draw(f, c)).expect("draw");
        terminal.backend().to_string()
    };
    c.zoom = true;
    let wide = draw(&mut c, 140);
    assert!(
        wide.contains("OutputTransportMessageUrgentFrame RTVIProcessor#0→Pipeline#0::Source"),
        "{wide}"
    );
    assert!(
        wide.contains("LLMTextFrame                      RTVIProcessor#0"),
        "the names line up: {wide}"
    );
    c.zoom = false;
    let split = draw(&mut c, 140);
    assert!(
        // Cut short with its gap kept before the route.
        split.contains("OutputTransportMess… RTVIProcessor#0"),
        "{split}"
    );
}

#[test]
fn a_hand_call_the_tool_never_answered_is_said_apart_from_its_error_and_counts_as_none() {
    use turnscope::observe::event::ToolCallEvent;
    use turnscope::tools::hand::HandResult;
    use turnscope::tools::{ToolOutcome, Unanswered};
    let mut c = console();
    let id = c
        .tools
        .hand
        .started("slow", serde_json::json!({"ms": 20000}));
    let why = Unanswered::timed_out(
        std::time::Duration::from_secs(5),
        "timeout_seconds of [[mcp_servers]] fixture",
    );
    c.hand_call_done(
        id,
        Ok(HandResult {
            tool: "slow".into(),
            source: "fixture".into(),
            arguments: serde_json::json!({"ms": 20000}),
            outcome: ToolOutcome::unanswered(why, "for the model: answer without it"),
            duration: std::time::Duration::from_secs(5),
            unchecked: None,
        }),
    );
    let notice = c.notice.clone().expect("a notice");
    assert!(notice.error, "{notice:?}");
    assert!(
        notice.text.starts_with(
            "slow did not answer: no answer within 5.0 s (timeout_seconds of [[mcp_servers]] fixture)"
        ),
        "{notice:?}"
    );
    c.tools.hand.mode = crate::view::hand_calls::Mode::Calls;
    // `z` zooms the list as any pane (tour N: it did nothing there).
    c.focus_pane(PaneId::Tools);
    let zoomed = c.zoom;
    press(&mut c, KeyCode::Char('z'));
    assert_ne!(c.zoom, zoomed);
    press(&mut c, KeyCode::Char('z'));
    assert_eq!(c.zoom, zoomed);
    let shown: Vec<String> = crate::draw::panes::hand_call::calls_lines(&c, 100)
        .lines
        .iter()
        .map(ToString::to_string)
        .collect();
    let shown = shown.join("\n");
    assert!(shown.contains("timed out"), "{shown}");
    assert!(shown.contains("slow did not answer · timed out"), "{shown}");
    assert!(
        shown.contains("what the model would have read instead:"),
        "{shown}"
    );
    assert!(!shown.contains("isError"), "{shown}");
    // In a narrow pane (the console at 100 columns) the keys wrap under the title, whole.
    let narrow: Vec<String> = crate::draw::panes::hand_call::calls_lines(&c, 40)
        .lines
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(
        narrow.iter().all(|l| l.chars().count() <= 40),
        "{narrow:#?}"
    );
    let narrow = narrow.join(" ");
    assert!(
        narrow.contains("x cancels") && narrow.contains("Esc back"),
        "{narrow}"
    );
    // Its event: news in the Log, marked a hand call, not a bot's error.
    let errors = c.state.journal.errors;
    c.state.apply(&Event::ToolCall(ToolCallEvent {
        name: "slow".into(),
        error: Some("for the model: answer without it".into()),
        by_hand: true,
        ..ToolCallEvent::default()
    }));
    assert_eq!(c.state.journal.errors, errors);
    let last = c.state.journal.entries().back().expect("an entry");
    assert_eq!(last.source, "hand call slow");
}

#[test]
fn a_form_closed_with_esc_opens_again_as_it_was_left() {
    let mut c = console();
    press(&mut c, KeyCode::Esc);
    press(&mut c, KeyCode::Char('6'));
    // echo (the built-in): type into its one field, close, open again.
    press(&mut c, KeyCode::Char('j'));
    press(&mut c, KeyCode::Enter);
    type_text(&mut c, "half typed");
    press(&mut c, KeyCode::Esc);
    assert!(matches!(
        c.tools.hand.mode,
        crate::view::hand_calls::Mode::Detail
    ));
    press(&mut c, KeyCode::Enter);
    let crate::view::hand_calls::Mode::Form(form) = &c.tools.hand.mode else {
        panic!("the form again")
    };
    assert_eq!(form.fields[0].text.text(), "half typed");
    // Sent from the draft, as it stands.
    type_text(&mut c, "!");
    match press(&mut c, KeyCode::Enter) {
        Some(Action::HandCall { arguments, .. }) => {
            assert_eq!(arguments, r#"{"text":"half typed!"}"#)
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_body_that_is_not_json_puts_the_cursor_where_the_parser_stopped() {
    let mut c = console();
    let key = RequestKey {
        session: 1,
        turn: 1,
        index: 0,
    };
    let saved = "{\n  \"model\": \"m\",\n  \"temperature\": 0.5,\n  bad: 1\n}";
    let sent = c.external_edit_done(key, "http://127.0.0.1:9/v1".into(), Ok(saved.into()));
    assert!(sent.is_none());
    let editor = c.editor.as_ref().expect("kept to fix");
    assert!(
        editor.error.as_ref().unwrap().contains("line 4 column 3"),
        "{:?}",
        editor.error
    );
    assert_eq!(editor.body.cursor(), (3, 2));
}

#[test]
fn esc_cancels_the_forms_call_in_flight_and_its_late_answer_is_dropped() {
    let mut c = console();
    press(&mut c, KeyCode::Esc);
    press(&mut c, KeyCode::Char('6'));
    press(&mut c, KeyCode::Char('j'));
    press(&mut c, KeyCode::Enter);
    type_text(&mut c, "slowly");
    let Some(Action::HandCall { id, .. }) = press(&mut c, KeyCode::Enter) else {
        panic!("a call")
    };
    // What the loop does when it starts the call.
    let stop = c.tools.hand.cancel_token(id);
    press(&mut c, KeyCode::Esc);
    assert!(stop.is_cancelled(), "the task is told to stop");
    assert!(
        matches!(c.tools.hand.mode, crate::view::hand_calls::Mode::Form(_)),
        "the first Esc cancels, the form stays"
    );
    let notice = c.notice.clone().unwrap().text;
    assert!(notice.starts_with("echo cancelled after"), "{notice}");
    c.hand_call_done(id, Err("late".into()));
    assert!(matches!(
        c.tools.hand.get(id).unwrap().outcome,
        Some(crate::view::hand_calls::Outcome::Cancelled(_))
    ));
    assert_eq!(c.notice.clone().unwrap().text, notice);
    press(&mut c, KeyCode::Esc);
    assert!(matches!(
        c.tools.hand.mode,
        crate::view::hand_calls::Mode::Detail
    ));
}

fn saved_calls_project(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "turnscope-saved-calls-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join(".turnscope")).unwrap();
    dir
}

#[test]
fn a_saved_calls_file_that_did_not_load_is_never_written_over() {
    let dir = saved_calls_project("refused");
    let file = dir.join(crate::view::hand_calls::SAVED_FILE);
    let hand_made = r#"{"calls": [{"tool": "add", "arguments": {"a": 1}},]}"#;
    std::fs::write(&file, hand_made).unwrap();
    let mut c = console();
    let why = crate::run::workbench::take_in_saved(&mut c, &dir).unwrap_err();
    assert!(why.contains("trailing comma"), "{why}");
    // A call made by hand, then saved: the file is left as it was and the mark taken back.
    let id = c.tools.hand.started("clock", serde_json::json!({}));
    let (toggled, saved) = c.tools.hand.toggle_saved().unwrap();
    assert!(saved && toggled == id);
    crate::run::workbench::save_calls(&mut c, &dir, toggled);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), hand_made);
    assert!(!c.tools.hand.get(id).unwrap().saved);
    let notice = c.notice.clone().unwrap();
    assert!(
        notice.error && notice.text.starts_with("not saved:"),
        "{notice:?}"
    );
    assert!(notice.text.contains("press s again"), "{notice:?}");
    // Fixed (a call without arguments is one of a tool that takes none): its calls join.
    std::fs::write(
        &file,
        r#"{"calls": [{"tool": "add", "arguments": {"a": 1}}, {"tool": "now"}]}"#,
    )
    .unwrap();
    let (toggled, _) = c.tools.hand.toggle_saved().unwrap();
    crate::run::workbench::save_calls(&mut c, &dir, toggled);
    let written: crate::view::hand_calls::SavedFile =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let tools: Vec<&str> = written.calls.iter().map(|c| c.tool.as_str()).collect();
    assert_eq!(tools, ["add", "now", "clock"]);
    assert_eq!(written.calls[1].arguments, serde_json::json!({}));
    assert!(c.tools.hand.file_refused.is_none());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Attached, `d` on another's session says who opened it and what ends it: the watched
/// server's own console keeps its session while it runs (it was told "the bot ends this one
/// when it is idle", which is false for it: tour F3).
#[test]
fn attached_d_on_anothers_session_says_who_opened_it_and_what_ends_it() {
    let mut c = console();
    c.state.header.source = crate::state::Source::Attached {
        target: "http://127.0.0.1:7870/mcp".into(),
        view: "watching".into(),
    };
    c.state.mark_yours(|_| false);
    c.own = None;
    c.settle();
    let said = |c: &mut Console, session: u64| {
        c.selected = Some(session);
        c.focus = PaneId::Sessions;
        assert_eq!(press(c, KeyCode::Char('d')), None);
        c.notice.take().expect("a notice").text
    };
    let console_own = said(&mut c, 1);
    assert!(
        console_own.contains("opened by the watched server's own console")
            && console_own.contains("it lives while that console runs")
            && !console_own.contains("idle"),
        "{console_own}"
    );
    let clients = said(&mut c, 2);
    assert!(
        clients.contains("opened by another client (mcp: claude-code)")
            && clients.contains("the bot ends it when it is idle"),
        "{clients}"
    );
}
