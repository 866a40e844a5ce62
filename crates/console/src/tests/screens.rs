//! The screens a new user meets first, at the two sizes that matter (80×24, the smallest
//! terminal; 160×48, a large one), as insta snapshots: nothing that matters is cut mid-word,
//! what does not fit is shortened or left out whole. Also the notice over an overlay, the help
//! with every pane, and the empty panes' texts wrapped.

use insta::assert_snapshot;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use turnscope::observe::Event;

use crate::state::{ConsoleState, Header, Source};
use crate::tests::fixture::console;
use crate::theme::Theme;
use crate::view::console::{Console, Notice};
use crate::view::ids::PaneId;

/// The two sizes every screen here is drawn at.
const SIZES: [(u16, u16); 2] = [(80, 24), (160, 48)];

/// The whole screen of `c` at `w`×`h`, as text.
fn screen(c: &mut Console, w: u16, h: u16) -> String {
    c.before_draw();
    let mut terminal = Terminal::new(TestBackend::new(w, h)).expect("test terminal");
    terminal.draw(|f| crate::draw::draw(f, c)).expect("draw");
    terminal.backend().to_string()
}

/// Both sizes of `c`, one after the other, for one snapshot.
fn both(c: &mut Console) -> String {
    SIZES
        .iter()
        .map(|(w, h)| format!("{w}x{h}\n{}", screen(c, *w, *h)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A console just started, with nothing in it yet but its own session.
fn fresh() -> Console {
    let mut state = ConsoleState::new(Header {
        mcp_url: Some("http://127.0.0.1:7870/mcp".into()),
        model: "embedded scripted model (http://127.0.0.1:7861/v1)".into(),
        model_short: Some("scripted".into()),
        bridges: "none".into(),
        source: Source::Live,
        replica: Some(("127.0.0.1:7870".into(), "serving".into())),
        ..Header::default()
    });
    state.apply(&Event::Session(turnscope::observe::SessionEvent {
        session: 1,
        handle_prefix: "1a2b3c4d".into(),
        opener: turnscope::observe::SessionOpener::Console,
        closed: None,
        restored: false,
        began_us: None,
        taken_from: None,
        greeting: None,
        at_us: 1_000_000,
    }));
    let mut c = Console::new(state, Theme::default(), false);
    c.own = Some(1);
    c.selected = Some(1);
    c.settle();
    c
}

/// On the embedded scripted model, the person's empty transcript says what it answers and
/// names one of the bot's tools to try; a real model's does not.
#[test]
fn on_the_scripted_model_the_first_transcript_says_how_to_see_a_tool_call() {
    let mut c = fresh();
    c.state.set_tools(&super::fixture::tools());
    // The header names the embedded model, as a live console on it does.
    assert!(turnscope::app::describes_embedded(&c.state.header.model));
    c.focus_pane(PaneId::Input);
    let shown = both(&mut c);
    assert!(
        shown.contains("The embedded scripted model echoes"),
        "{shown}"
    );
    assert_snapshot!(shown);
    // A reload that points the bot at a real model takes the hint away.
    c.state.apply(&Event::ConfigReload(
        turnscope::observe::ConfigReloadEvent {
            version: 2,
            outcome: "applied".into(),
            model: "llama3.2 at http://127.0.0.1:11434/v1".into(),
            ..Default::default()
        },
    ));
    assert!(!turnscope::app::describes_embedded(&c.state.header.model));
    assert!(!screen(&mut c, 160, 48).contains("You said"));
}

/// Every empty transcript a line can go into says what the scripted model answers, not the
/// first session's alone: one opened with `n` said only "No turns yet."; an MCP client's says
/// it too; a closed one, which takes no line, does not.
#[test]
fn every_empty_transcript_on_the_scripted_model_says_how_to_see_a_tool_call() {
    let mut c = fresh();
    c.state.set_tools(&super::fixture::tools());
    let opened = |session: u64, prefix: &str, opener| {
        Event::Session(turnscope::observe::SessionEvent {
            session,
            handle_prefix: prefix.into(),
            opener,
            closed: None,
            restored: false,
            began_us: None,
            taken_from: None,
            greeting: None,
            at_us: 2_000_000,
        })
    };
    c.state.apply(&opened(
        2,
        "2a2b3c4d",
        turnscope::observe::SessionOpener::Console,
    ));
    c.state.apply(&opened(
        3,
        "3a2b3c4d",
        turnscope::observe::SessionOpener::Mcp("claude-code".into()),
    ));
    let flat = |text: &str| {
        text.replace(['│', '┃', '"'], " ")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    for session in [2, 3] {
        c.selected = Some(session);
        c.settle();
        let text = flat(&screen(&mut c, 160, 48));
        assert!(
            text.contains("The embedded scripted model echoes a line and calls a tool it names (try: use the clock)"),
            "#{session}: {text}"
        );
    }
    c.selected = Some(2);
    let text = flat(&screen(&mut c, 160, 48));
    assert!(text.contains("No turns yet. Type a line below"), "{text}");
    let mut closed = opened(3, "3a2b3c4d", turnscope::observe::SessionOpener::Api);
    if let Event::Session(s) = &mut closed {
        s.closed = Some("closed from the console".into());
    }
    c.state.apply(&closed);
    c.selected = Some(3);
    let text = flat(&screen(&mut c, 160, 48));
    assert!(!text.contains("The embedded scripted model"), "{text}");
}

/// A line into a closed session is refused: the Input pane says so before anything is typed
/// (it read "to #3" over "Type a line; Enter sends"), and the refusal says `n` starts one.
/// Attached, another client's session says it is not the person's.
#[test]
fn the_input_says_a_closed_or_anothers_session_takes_no_line_before_typing() {
    let mut c = console();
    c.selected = Some(3);
    c.focus_pane(PaneId::Input);
    let text = screen(&mut c, 160, 48);
    assert!(text.contains("3 Input · to #3 · closed"), "{text}");
    assert!(
        text.contains("#3 is closed: Esc, then n opens a new session"),
        "{text}"
    );
    assert!(!text.contains("Type a line; Enter sends"), "{text}");
    // The narrowest input pane (two columns at 110) has it whole.
    let narrow = screen(&mut c, 110, 30);
    assert!(
        narrow.contains("#3 is closed: Esc, then n opens a new session"),
        "{narrow}"
    );
    c.input.insert_str("anyone?");
    let typed = screen(&mut c, 160, 48);
    assert!(typed.contains("anyone?"), "what is typed shows: {typed}");
    assert!(c.send().is_none());
    let notice = c.notice.as_ref().expect("a notice").text.clone();
    assert!(
        notice.contains("#3 is closed") && notice.contains("press n there to start a new one"),
        "{notice}"
    );
    // An open session of the person's says nothing of the kind.
    c.input = Default::default();
    c.selected = Some(1);
    let text = screen(&mut c, 160, 48);
    assert!(!text.contains("· closed"), "{text}");

    let mut c = attached_to("http://127.0.0.1:7870/mcp");
    c.state.header.bot_url = Some("http://127.0.0.1:7870/mcp".into());
    c.own = Some(1);
    c.state.mark_yours(|n| n == 1);
    c.selected = Some(2);
    c.focus_pane(PaneId::Input);
    let text = screen(&mut c, 160, 48);
    assert!(text.contains("to #2 · another client's"), "{text}");
    assert!(
        text.contains("#2 is another client's: Esc, then n opens yours"),
        "{text}"
    );
}

/// Each pane's keys are under its own heading: the Transcript's search, the turn view's keys,
/// the Tools pane's hand calls and the MCP pane's were all listed under "Sessions".
#[test]
fn the_help_lists_each_panes_keys_under_its_heading() {
    let c = console();
    let lines: Vec<String> = crate::draw::help::lines(&c, 100, crate::draw::help::ALL)
        .iter()
        .map(|l| l.to_string())
        .collect();
    let heading_of = |what: &str| -> String {
        let at = lines
            .iter()
            .position(|l| l.contains(what))
            .unwrap_or_else(|| panic!("{what} is not in the help: {lines:#?}"));
        lines[..at]
            .iter()
            .rev()
            .find(|l| !l.is_empty() && !l.starts_with(' '))
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(heading_of("search the transcript"), "Transcript (2)");
    assert_eq!(heading_of("older / newer match"), "Transcript (2)");
    assert_eq!(heading_of("open the model requests whole"), "Turn view (w)");
    assert_eq!(heading_of("edit the picked model request"), "Turn view (w)");
    assert_eq!(heading_of("call the selected tool by hand"), "Tools (6)");
    assert_eq!(heading_of("list the hand calls"), "Tools (6)");
    assert_eq!(heading_of("pick an exchange"), "MCP (9)");
    assert_eq!(heading_of("open a new session for you"), "Sessions (1)");
    assert_eq!(heading_of("close the selected session"), "Sessions (1)");
    // No key says its pane in brackets any more: its heading does.
    for b in crate::view::keys::BINDINGS {
        assert!(!b.keys.contains(" ("), "{}", b.keys);
    }
}

/// Attached, the header names the target's server as a server (its `serverInfo`), and the
/// model only once the target's model requests name it; a replay's header keeps its model.
#[test]
fn attached_the_header_names_the_server_and_learns_the_model_from_requests() {
    let request = |model: &str| Event::ModelRequest {
        session: 1,
        turn: 1,
        first_piece_us: Some(10),
        total_us: 20,
        error: None,
        at_us: 1_000_000,
        response: turnscope::observe::ModelResponseInfo {
            model: Some(model.into()),
            ..Default::default()
        },
        request: None,
        answer: None,
    };
    let mut state = ConsoleState::new(Header {
        server: Some("turnscope 0.1.0".into()),
        bridges: "not visible from here".into(),
        source: Source::Attached {
            target: "http://127.0.0.1:7870/mcp".into(),
            view: Default::default(),
        },
        ..Header::default()
    });
    state.apply(&request("qwen2.5-0.5b-instruct"));
    assert_eq!(state.header.model, "qwen2.5-0.5b-instruct");
    let mut c = Console::new(state, Theme::default(), true);
    let top = screen(&mut c, 160, 48);
    let header = top.lines().next().unwrap_or_default();
    assert!(header.contains("server turnscope 0.1.0"), "{header}");
    assert!(header.contains("model qwen2.5-0.5b-instruct"), "{header}");
    // The watched bot's other clients may not show: the empty list says what will.
    c.start_on_first_line = true;
    let empty = screen(&mut c, 160, 48);
    assert!(
        empty.contains("no sessions yet: a line below starts yours"),
        "{empty}"
    );

    let mut replay = ConsoleState::new(Header {
        model: "llama3.2 at http://127.0.0.1:11434/v1".into(),
        source: Source::Replay {
            file: "run.jsonl".into(),
            unreadable: Default::default(),
        },
        ..Header::default()
    });
    replay.apply(&request("llama3.2:latest"));
    assert_eq!(replay.header.model, "llama3.2 at http://127.0.0.1:11434/v1");
}

/// A replay of a damaged file says its skipped lines at the README's 120x35, where the Input
/// pane is two rows: the note under the file's name was cut away (tour M).
#[test]
fn a_replay_of_a_damaged_file_says_its_skipped_lines_on_a_small_screen() {
    let state = ConsoleState::new(Header {
        source: Source::Replay {
            file: "/tmp/a/rather/long/path/to/the/recorded/corrupt.jsonl".into(),
            unreadable: crate::state::records::Unreadable {
                count: 2,
                first: Some("line 101: expected value at line 1 column 1".into()),
            },
        },
        ..Header::default()
    });
    let mut c = Console::new(state, Theme::default(), true);
    let shown = screen(&mut c, 120, 35);
    assert!(shown.contains("2 unreadable lines skipped"), "{shown}");
}

/// Session `number` opened (with a handle of `prefix`, or none: a whisker worker's) by the MCP
/// client named `client`.
fn opened_by_mcp(number: u64, prefix: &str, client: &str) -> Event {
    Event::Session(turnscope::observe::SessionEvent {
        session: number,
        handle_prefix: prefix.into(),
        opener: turnscope::observe::SessionOpener::Mcp(client.into()),
        closed: None,
        restored: false,
        began_us: None,
        taken_from: None,
        greeting: None,
        at_us: number * 1_000_000,
    })
}

/// A model request still out is listed with how long it has run, not as "none recorded": its
/// record comes when it ends, and a hung server's can take a minute (tour J).
#[test]
fn a_model_request_in_flight_is_listed_with_its_time() {
    use crate::draw::panes::model_request::{Shown, lines};
    let mut c = fresh();
    c.state.apply(&opened_by_mcp(2, "ab12cd34", "claude-code"));
    let at = 2_000_000;
    c.state.apply(&Event::TurnStarted {
        session: 2,
        turn: 1,
        line: "tell me a long story".into(),
        at_us: at,
    });
    c.state.apply(&crate::tests::fixture::crossing(
        2,
        1,
        1,
        "TextPiece",
        "Once",
        at + 300_000,
    ));
    c.state.now_us = at + 6_200_000;
    let text: Vec<String> = lines(&c, 2, 1, 120, Shown::default())
        .iter()
        .map(ToString::to_string)
        .collect();
    let text = text.join("\n");
    assert!(
        text.contains("model 1 · in flight for 6.20 s (first piece after 300 ms, streaming)")
            && !text.contains("none recorded"),
        "{text}"
    );
}

/// A pipecat worker's session whose turns the console has not seen (whisker hands what passed
/// before a client connected only to its first client) says why it may show none, wrapped
/// whole at both sizes; the console's own empty session still asks for a line.
#[test]
fn a_whisker_workers_empty_transcript_says_turns_from_before_may_be_missing() {
    let mut c = fresh();
    c.state.apply(&opened_by_mcp(2, "", "pipecat 7f3a"));
    c.selected = Some(2);
    c.settle();
    for (w, h) in SIZES {
        let text = screen(&mut c, w, h);
        // The words in order, the pane's borders left out.
        let flat: String = text
            .replace(['│', '"'], " ")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let said = "may be missing, and a worker that ended before then is still listed as open.";
        assert!(
            flat.contains("No turns seen yet.") && flat.contains(said),
            "{text}"
        );
    }
    c.selected = Some(1);
    c.settle();
    let own = screen(&mut c, 160, 48);
    assert!(own.contains("No turns yet. Type a line below"), "{own}");
    // An MCP client that names itself `pipecat …` opened a session with a handle: not a
    // worker.
    c.state
        .apply(&opened_by_mcp(3, "3c3c3c3c", "pipecat my-client"));
    c.selected = Some(3);
    c.settle();
    let client = screen(&mut c, 160, 48);
    assert!(client.contains("No turns yet."), "{client}");
    assert!(!client.contains("seen yet"), "{client}");
}

/// The first screen: focus in the input line (typing goes there, and the line says how to
/// leave it), the model named, `quit` in the footer, the transcript given the room.
#[test]
fn the_first_screen() {
    let mut c = console();
    c.focus_pane(PaneId::Input);
    assert_snapshot!(both(&mut c));
}

/// The empty input line's text is drawn whole at every width from the narrowest two-column
/// screen up (seen cut to "Esc: panes' key" at 150 columns before it was shortened).
#[test]
fn the_input_lines_text_is_never_cut() {
    let mut c = console();
    c.focus_pane(PaneId::Input);
    for w in crate::view::layout::WIDE..=200 {
        let text = screen(&mut c, w, 40);
        assert!(
            text.contains(crate::view::console::PLACEHOLDER),
            "at {w}x40 the input line's text is cut:\n{text}"
        );
    }
    assert!(screen(&mut c, 80, 24).contains(crate::view::console::PLACEHOLDER));
}

/// A fresh console's empty Log and MCP panes: their texts wrapped, not cut.
#[test]
fn empty_log_and_mcp_panes() {
    let mut c = fresh();
    c.focus_pane(PaneId::Log);
    let log = both(&mut c);
    c.focus_pane(PaneId::Mcp);
    assert_snapshot!(format!("{log}\n{}", both(&mut c)));
}

/// A bot with a name, `[model]` parameters and a configured replica: the header shortens the
/// model and leaves out what does not fit, whole.
#[test]
fn a_named_bot_with_parameters_and_a_replica() {
    let mut c = console();
    c.state.header.bot = Some("Hours".into());
    c.state.header.model = "gpt-4o-mini at http://127.0.0.1:8080/v1".into();
    c.state.header.model_short = Some("gpt-4o-mini".into());
    c.state.header.params = "max_tokens=512 temperature=0.2 top_p=0.9".into();
    c.state.header.replica = Some(("r1".into(), "serving".into()));
    assert_snapshot!(both(&mut c));
}

/// A line into a session an MCP client opened asks first: the question shows whole.
#[test]
fn speaking_into_an_mcp_clients_session_asks_whole() {
    let mut c = console();
    c.selected = Some(2);
    c.focus_pane(PaneId::Input);
    c.input.insert_str("hello from the console");
    assert!(c.send().is_none(), "the first Enter only asks");
    assert!(
        c.notice
            .as_ref()
            .is_some_and(|n| n.text.contains("Enter again")),
        "{:?}",
        c.notice
    );
    assert_snapshot!(both(&mut c));
}

/// What `c` or `J` did shows over the turn view that covers the input line.
#[test]
fn a_copy_notice_shows_over_the_turn_view() {
    let mut c = console();
    c.selected = Some(1);
    c.open_turn_view();
    c.notice = Some(Notice {
        text: "model request 1 of turn 2 as curl saved to /tmp/turnscope-copy-20260101-120000.sh and copied (OSC 52)".into(),
        error: false,
    });
    assert_snapshot!(both(&mut c));
}

/// The help at both sizes lists every pane (1 … 9) and what the Frames rows' marks mean.
#[test]
fn the_help() {
    let mut c = console();
    c.help.show();
    let text = both(&mut c);
    assert!(text.contains("1 … 9"), "{text}");
    assert_snapshot!(text);
}

/// A filter that matches nothing says so, at both sizes.
#[test]
fn a_frame_filter_matching_nothing_says_so() {
    let mut c = console();
    c.focus_pane(PaneId::Frames);
    c.frames.filter = crate::view::filter::FrameFilter::parse("name:NoSuchFrame");
    let text = both(&mut c);
    assert!(text.contains("No frame matches the filter"), "{text}");
    assert_snapshot!(text);
    // One no frame could match says what its field takes (it said only "no frame matches").
    c.frames.filter = crate::view::filter::FrameFilter::parse("kind:bogus");
    let text = screen(&mut c, 120, 36);
    assert!(
        text.contains("No frame can match kind:bogus: kind is one of system, data,"),
        "{text}"
    );
}

/// A transcript search that finds nothing says so; one that finds says which of how many.
#[test]
fn a_transcript_search_says_what_it_found() {
    let mut c = console();
    c.focus_pane(PaneId::Transcript);
    c.transcript.search = "no such words".into();
    let none = screen(&mut c, 160, 48);
    assert!(none.contains("search: no such words · no match"), "{none}");
    c.transcript.search = "clock".into();
    let found = screen(&mut c, 160, 48);
    // The newest match is shown first, counted from the oldest.
    assert!(found.contains("search: clock · 3 of 3"), "{found}");
}

/// Very narrow, very short screens. Before, the header's second line was cut inside a word
/// (`claude mcp add --tr…`), and at 30×8 the focused Frames pane got no row at all (the
/// Sessions and Input panes took the body), at 60×12 only its top border. Now the header
/// drops or shortens whole items and ends any cut between words, and the focused pane gets
/// its rows before the other panes and the chrome.
#[test]
fn very_narrow_screens_keep_whole_words_and_the_focused_pane() {
    let mut shots = Vec::new();
    for (w, h) in [(30u16, 8u16), (60, 12)] {
        let mut c = console();
        c.focus_pane(PaneId::Frames);
        let text = screen(&mut c, w, h);
        let lines: Vec<&str> = text.lines().collect();
        for header in &lines[..2] {
            assert!(
                !header.contains("--tr") && !header.contains("http://…"),
                "no word cut in the header: {text}"
            );
        }
        let frames = c.areas.get().inspector;
        assert!(
            frames.height >= 3,
            "the focused Frames pane is drawn: {text}"
        );
        assert!(
            text.contains("ResponseEnd"),
            "the Frames list has a row: {text}"
        );
        shots.push(format!("{w}x{h}\n{text}"));
    }
    // Narrower than the items that never go, the line ends between words.
    let mut c = console();
    let text = screen(&mut c, 20, 8);
    let first = text.lines().next().expect("a header");
    assert!(first.contains(" turnscope  ● live …"), "{text}");
    assert_snapshot!(shots.join("\n"));
}

/// On a screen a few rows tall the chrome goes before the focused pane's one row: the
/// header's second line, then its first, then the footer.
#[test]
fn a_screen_a_few_rows_tall_keeps_the_focused_pane() {
    for (h, header, footer) in [(6u16, 2u16, 1u16), (5, 1, 1), (4, 0, 1), (3, 0, 0)] {
        let mut c = console();
        c.focus_pane(PaneId::Frames);
        let text = screen(&mut c, 60, h);
        let areas = c.areas.get();
        assert_eq!(
            (areas.header.height, areas.footer.height),
            (header, footer),
            "{text}"
        );
        assert_eq!(areas.inspector.height, 3, "{text}");
        assert!(text.contains("ResponseEnd"), "{text}");
    }
}

/// Typing on a short screen, the Transcript (where the reply appears) comes with the Input
/// pane before the Sessions pane; on a stacked screen where every pane fits, the smaller of
/// the Transcript and the inspector keeps a row inside its borders.
#[test]
fn a_short_screen_shows_the_reply_beside_the_input_and_every_pane_keeps_a_row() {
    let mut c = console();
    c.focus_pane(PaneId::Input);
    let text = screen(&mut c, 60, 12);
    let areas = c.areas.get();
    assert!(areas.transcript.height >= 5, "{text}");
    assert_eq!(areas.sessions.height, 0, "{text}");
    for (width, height, focus) in [
        (100u16, 16u16, PaneId::Input),
        (100, 16, PaneId::Frames),
        (70, 17, PaneId::Transcript),
    ] {
        c.focus_pane(focus);
        let text = screen(&mut c, width, height);
        let areas = c.areas.get();
        assert!(
            areas.transcript.height >= 3 && areas.inspector.height >= 3,
            "{width}x{height}: {text}"
        );
    }
}

/// The Frames pane's status line, too wide for a narrow pane, ends between two words.
#[test]
fn the_frames_status_line_is_cut_between_words() {
    let mut c = console();
    c.focus_pane(PaneId::Frames);
    let text = screen(&mut c, 40, 20);
    let status = text
        .lines()
        .find(|l| l.contains("session") && l.contains('·'))
        .unwrap_or_else(|| panic!("a status line: {text}"));
    let inside = status.trim_matches(|ch: char| "│┃\" ".contains(ch));
    assert_eq!(
        inside, "session #1 · 16 shown · 81 kept …",
        "cut between words, no separator left dangling: {status}"
    );
}

/// A store that stopped taking writes is said in the header, even on a narrow screen (before,
/// only the Log's error count told; the header still named the file as if all was well).
#[test]
fn a_degraded_store_is_said_in_the_header() {
    let mut c = fresh();
    c.state.header.store = Some("sqlite:/tmp/s/sessions.sqlite3".into());
    for (w, h) in SIZES {
        let shown = screen(&mut c, w, h);
        assert!(!shown.contains("degraded"), "{shown}");
    }
    c.state.header.store_degraded = true;
    for (w, h) in SIZES {
        let shown = screen(&mut c, w, h);
        let header = shown.lines().next().unwrap_or_default();
        assert!(
            header.contains("sessions.sqlite3 degraded (8 Log)"),
            "{w}x{h}: {header}"
        );
    }
}

/// A server started with `--auth-token` wants it from Claude Code too: the header's connect
/// line carries the header that gives it (`$TOKEN`, never the token).
#[test]
fn the_connect_line_gives_the_token_header_when_the_server_wants_one() {
    let mut c = console();
    c.state.header.wants_token = true;
    let text = screen(&mut c, 220, 30);
    assert!(
        text.contains(
            "claude mcp add --transport http turnscope http://127.0.0.1:7870/mcp --header \"Authorization: Bearer $TOKEN\""
        ),
        "{text}"
    );
}

/// In a session an MCP client opened, its lines are the client's (`user`) and a line typed
/// at the console is the person's (`you`): the transcript tells them apart.
#[test]
fn a_line_typed_into_a_clients_session_is_marked_yours() {
    let mut c = console();
    c.selected = Some(2);
    let before = c.state.transcript(2).len();
    assert!(before > 0, "the client's session has turns");
    let next = c.state.transcript(2).last().map_or(1, |t| t.id + 1);
    c.focus_pane(PaneId::Input);
    c.input.insert_str("hello from the console");
    assert!(c.send().is_none(), "the first Enter only asks");
    assert!(c.send().is_some(), "the second sends");
    c.state.apply(&Event::TurnStarted {
        session: 2,
        turn: next,
        line: "hello from the console".into(),
        at_us: 99_000_000,
    });
    c.focus_pane(PaneId::Transcript);
    let text = screen(&mut c, 160, 48);
    assert!(text.contains("you  hello from the console"), "{text}");
    assert!(
        text.contains("user "),
        "the client's lines are its own: {text}"
    );
    // The same line said by the client afterwards is the client's.
    c.state.apply(&Event::TurnStarted {
        session: 2,
        turn: next + 1,
        line: "hello from the console".into(),
        at_us: 99_500_000,
    });
    let turns = c.state.transcript(2);
    assert!(turns[turns.len() - 2].typed_here && !turns[turns.len() - 1].typed_here);
}

/// Attached, the console runs no server: `q` quits at once (the server's sessions go on, so
/// there is nothing to ask), the help and the footer leave out what it cannot do (`R`, `i`,
/// the replay's stepping) and say what quitting does, and a client gone is not offered `d`.
#[test]
fn an_attached_console_offers_only_what_it_can_do() {
    let mut c = attached_to("http://127.0.0.1:7870/mcp");
    c.focus_pane(PaneId::Sessions);
    let shown = screen(&mut c, 160, 48);
    assert!(!shown.contains("i interrupt"), "{shown}");
    // `d` on its own session asks to let go of the handle, not to close it: MCP has no call
    // that closes a session (tour L).
    c.selected = Some(1);
    c.handle(&crossterm::event::Event::Key(
        crossterm::event::KeyEvent::new(
            crossterm::event::KeyCode::Char('d'),
            crossterm::event::KeyModifiers::NONE,
        ),
    ));
    let asked = c.notice.take().map(|n| n.text).unwrap_or_default();
    assert!(
        asked.starts_with("d again lets go of #1's handle here")
            && asked.contains("open until it idles out"),
        "{asked}"
    );
    c.close_asked = None;
    c.help.open = true;
    let help = screen(&mut c, 160, 48);
    assert!(help.contains("server and its sessions go on"), "{help}");
    assert!(!help.contains("reload the config file"), "{help}");
    assert!(!help.contains("replay: step"), "{help}");
    assert!(!help.contains("interrupt the selected"), "{help}");
    // Another client's session takes no line here (refused, not asked).
    assert!(!help.contains("Enter twice"), "{help}");
    c.help.open = false;
    // Edit and resend is refused at `e`, before any editing, naming what works instead; the
    // turn view's border does not offer it.
    c.selected = Some(1);
    c.open_turn_view();
    let view = screen(&mut c, 160, 48);
    assert!(
        view.contains("c copy as curl") && !view.contains("e/E edit"),
        "{view}"
    );
    assert_eq!(c.edit_request(false), None);
    assert!(c.editor.is_none());
    let said = c
        .notice
        .as_ref()
        .map(|n| n.text.clone())
        .unwrap_or_default();
    assert!(said.contains("c copies the request as curl"), "{said}");
    c.open_variants();
    let said = c
        .notice
        .as_ref()
        .map(|n| n.text.clone())
        .unwrap_or_default();
    assert!(!said.contains("e edits"), "{said}");
    c.notice = None;
    let view = screen(&mut c, 160, 48);
    assert!(
        view.contains("c copy as curl") && !view.contains("edit and resend"),
        "{view}"
    );
    assert_eq!(
        c.quit(),
        Some(crate::input::actions::Action::Quit),
        "nothing to ask: quitting ends no session of the server"
    );
}

/// At 120 columns a replica on a shared store keeps the store in its header: the model's
/// short name makes the room (its address went first, and the store with it).
#[test]
fn at_120_columns_the_header_keeps_the_store() {
    let mut c = console();
    let h = &mut c.state.header;
    h.store = Some("redis://127.0.0.1:18410/0".into());
    h.replica = Some(("r1".into(), "serving".into()));
    h.model = "embedded scripted model (http://127.0.0.1:41529/v1)".into();
    h.model_short = Some("scripted".into());
    let shown = screen(&mut c, 120, 36);
    let first = shown.lines().next().unwrap_or_default();
    assert!(first.contains("store redis://127.0.0.1:18410/0"), "{first}");
    assert!(first.contains("model scripted"), "{first}");
}

/// At 120 columns a named bot on its default store file keeps the MCP URL, what a person
/// connects to: the file's name gives way to its kind first (the URL went for it: tour O).
#[test]
fn at_120_columns_the_header_keeps_the_mcp_url_over_the_store_files_name() {
    let mut c = fresh();
    let h = &mut c.state.header;
    h.bot = Some("Hours".into());
    h.store =
        Some("sqlite:/home/you/.local/state/turnscope/sessions-127.0.0.1-7870.sqlite3".into());
    h.config = Some(crate::state::ConfigMark {
        version: 1,
        outcome: "applied".into(),
        restart: 0,
    });
    h.model = "embedded scripted model (http://127.0.0.1:41529/v1)".into();
    h.model_short = Some("scripted".into());
    let shown = screen(&mut c, 120, 36);
    let first = shown.lines().next().unwrap_or_default();
    assert!(first.contains("MCP http://127.0.0.1:7870/mcp"), "{first}");
    assert!(first.contains("store sqlite "), "{first}");
    let wide = screen(&mut c, 200, 36);
    let first = wide.lines().next().unwrap_or_default();
    assert!(
        first.contains("store sessions-127.0.0.1-7870.sqlite3"),
        "wide, the file's name: {first}"
    );
}

/// Attached to a pipecat bot at 80 columns while another client holds whisker, the header
/// still says whisker is refused: the long `client view: …` is shortened first (tour T: it
/// took the line, and whisker's state was cut to `whisker …`), and so are the URLs' schemes.
#[test]
fn at_80_columns_the_attached_header_keeps_whiskers_state() {
    use crate::run::attach::{Chat, attached_view};
    use turnscope::attach::stream::StreamState;
    use turnscope::attach::whisker::WhiskerState;
    let mut c = fresh();
    let mut no_stream = StreamState::default();
    no_stream.available = Some(false);
    let whiskers = [
        (
            WhiskerState {
                held_elsewhere: true,
                ..WhiskerState::default()
            },
            "whisker refused",
        ),
        (
            WhiskerState {
                not_whisker: Some("404 Not Found".into()),
                ..WhiskerState::default()
            },
            "not a whisker port",
        ),
        (WhiskerState::default(), "waiting for its port"),
    ];
    for (whisker, said) in whiskers {
        for chat in [Chat::Yours, Chat::NotYet] {
            c.state.header.source = Source::Attached {
                target: "http://127.0.0.1:27202/mcp + whisker ws://127.0.0.1:27203".into(),
                view: attached_view(Some(&no_stream), Some(&whisker), chat),
            };
            c.state.header.server = Some("pipecat 1.14.0".into());
            let shown = screen(&mut c, 80, 24);
            let head: Vec<&str> = shown.lines().take(2).collect();
            // (Once your session started, a whisker that never answered is said so.)
            let said = match (said, chat) {
                ("waiting for its port", Chat::Yours) => "whisker: nothing answers (see Log)",
                _ => said,
            };
            assert!(head[1].contains(said), "{chat:?}: {head:?}");
            assert!(head[1].contains("client view"), "{head:?}");
            assert!(head[0].contains("whisker 127.0.0.1:27203"), "{head:?}");
            let wide = screen(&mut c, 220, 24);
            assert!(
                wide.contains("client view: only sessions this console starts (no event stream)")
                    && wide.contains("whisker ws://127.0.0.1:27203"),
                "{wide}"
            );
        }
    }
}

/// A narrow header keeps the count of keys waiting for a restart beside the config version.
#[test]
fn the_header_keeps_the_keys_waiting_for_a_restart_at_80_columns() {
    let mut c = fresh();
    c.state.header.config = Some(crate::state::ConfigMark {
        version: 6,
        outcome: "applied".into(),
        restart: 1,
    });
    // However narrow, the count stays once the version is shortened (tour M: at 80 columns,
    // beside a bot's name and the Log's counts, nothing said a key waited).
    for width in [40u16, 50, 60, 70, 80] {
        let shown = screen(&mut c, width, 24);
        let head: String = shown.lines().take(2).collect::<Vec<_>>().join("\n");
        assert!(
            head.contains("v6 ↻ ·1 to restart") || head.contains("1 key for a restart"),
            "{width}: {head}"
        );
    }
    let wide = screen(&mut c, 200, 40);
    assert!(wide.contains("1 key for a restart"), "{wide}");
}

/// Between 120 and 170 columns the header shortens the model's name before it gives up the
/// MCP URL: a wider screen showed less (at 130–160 the URL went and the model's whole address
/// stayed; tour H), and the wider it is the more comes back.
#[test]
fn the_header_shortens_the_model_before_it_gives_up_the_mcp_url() {
    let mut c = fresh();
    c.state.header.store = Some("sqlite:/tmp/x/sessions-127.0.0.1-47200.sqlite3".into());
    c.state.header.config = Some(crate::state::ConfigMark {
        version: 1,
        ..crate::state::ConfigMark::default()
    });
    for width in [120u16, 130, 140, 150, 160] {
        let shown = screen(&mut c, width, 30);
        let first = shown.lines().next().unwrap_or_default().to_string();
        assert!(
            first.contains("MCP http://127.0.0.1:7870/mcp"),
            "{width}: {first}"
        );
        assert!(first.contains(" model "), "{width}: {first}");
    }
    let first = screen(&mut c, 200, 30)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    assert!(
        first.contains("MCP http://127.0.0.1:7870/mcp")
            && first.contains("model embedded scripted model (http://127.0.0.1:7861/v1)"),
        "{first}"
    );
}

/// Watching whisker alone, a typed line is kept and the notice says nothing here chats (it
/// offered `n`, which then said there was no bot URL), a session selected or not.
#[test]
fn watching_whisker_alone_a_line_is_kept_and_said_to_need_the_bots_url() {
    let mut c = attached_to("whisker ws://127.0.0.1:18531");
    c.state.header.bot_url = None;
    c.selected = Some(2);
    c.focus_pane(PaneId::Input);
    c.input.insert_str("hello");
    assert!(c.send().is_none());
    let said = c
        .notice
        .as_ref()
        .map(|n| n.text.clone())
        .unwrap_or_default();
    assert!(
        said.contains("watching only") && !said.contains("n starts"),
        "{said}"
    );
    assert_eq!(c.input.lines(), ["hello"], "the line is kept");
    // With no session selected (none listed yet) it says the same, not "select one first"
    // (tour L).
    c.selected = None;
    c.notice = None;
    assert!(c.send().is_none());
    let said = c.notice.take().map(|n| n.text).unwrap_or_default();
    assert!(said.contains("watching only"), "{said}");
    assert_eq!(c.input.lines(), ["hello"], "the line is kept");
    // Before any session, the panes say nothing here chats, not that MCP clients open
    // sessions or that Enter sends (tour N).
    let mut alone = attached_to("whisker ws://127.0.0.1:18531");
    alone.state.header.bot_url = None;
    alone.state = crate::state::ConsoleState::default();
    alone.state.header.source = c.state.header.source.clone();
    alone.selected = None;
    let shown = screen(&mut alone, 120, 30);
    assert!(
        shown.contains("no sessions yet: they show as the bot runs them")
            && shown.contains("watching only: nothing here chats")
            && !shown.contains("MCP clients open one"),
        "{shown}"
    );
}

/// At 140 columns (the pane half the screen) the Sessions pane shows the idle time each
/// session has left, its openers whole; it showed neither age nor left below 150 columns.
#[test]
fn at_140_columns_the_sessions_pane_shows_the_time_left_and_whole_openers() {
    let mut c = console();
    let shown = screen(&mut c, 140, 30);
    let pane: Vec<&str> = shown.lines().skip(3).take(3).collect();
    assert!(
        pane[0].contains("state") && pane[0].contains("left"),
        "{pane:?}"
    );
    assert!(
        pane[1].contains("console (you)") && pane[1].contains("4m55s"),
        "{pane:?}"
    );
    assert!(pane[2].contains("mcp: claude-code"), "{pane:?}");
    // With the whole width, every column.
    let wide = screen(&mut c, 100, 30);
    let header = wide.lines().nth(3).unwrap_or_default();
    for column in ["age", "left", "tokens"] {
        assert!(header.contains(column), "{header}");
    }
}

/// A request that offered fifteen tools but whose prompt was 47 tokens (llama.cpp with a
/// chat template that takes no tools: tour J) says the tools were likely left out, on its
/// head line and beside its tools; a prompt that holds them says nothing.
#[test]
fn a_prompt_too_short_for_its_tools_says_they_were_likely_left_out() {
    use crate::draw::panes::model_request::{Shown, lines};
    use turnscope::observe::wire::{ToolSetEvent, WireRequest};
    let mut c = fresh();
    c.state.apply(&opened_by_mcp(2, "ab12cd34", "claude-code"));
    let tools: Vec<serde_json::Value> = (0..15)
        .map(|n| serde_json::json!({"type": "function", "function": {"name": format!("tool_{n}"), "description": "does one thing with a fairly long description, as servers write them", "parameters": {"type": "object", "properties": {"text": {"type": "string", "description": "what to work on"}}, "required": ["text"]}}}))
        .collect();
    c.state.apply(&Event::ToolSet(ToolSetEvent {
        id: "5e7".into(),
        tools,
        at_us: 1_000_000,
    }));
    let at = 2_000_000;
    c.state.apply(&Event::TurnStarted {
        session: 2,
        turn: 1,
        line: "What time is it? Call the clock tool.".into(),
        at_us: at,
    });
    let asked = |prompt_tokens: u64| Event::ModelRequest {
        session: 2,
        turn: 1,
        first_piece_us: Some(300_000),
        total_us: 400_000,
        error: None,
        at_us: at,
        response: turnscope::observe::ModelResponseInfo {
            finish_reason: Some("stop".into()),
            usage: Some(turnscope::observe::TokenUsage {
                prompt_tokens,
                completion_tokens: 10,
                ..Default::default()
            }),
            ..Default::default()
        },
        request: Some(Box::new(WireRequest {
            model: "local".into(),
            url: "http://127.0.0.1:8080/v1/chat/completions".into(),
            tools: Some("5e7".into()),
            tool_count: 15,
            first: 1,
            from: 1,
            appended: vec![serde_json::json!({"role": "user", "content": "What time is it?"})],
            ..Default::default()
        })),
        answer: None,
    };
    c.state.apply(&asked(47));
    let shown = Shown {
        open: true,
        ..Shown::default()
    };
    let text = |c: &Console| {
        lines(c, 2, 1, 120, shown)
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    };
    let short = text(&c);
    assert!(
        short.contains("47→10 tok · tools not in the prompt?")
            && short.contains("the prompt was 47 tokens, but the 15 tools offered are ~")
            && short.contains("llama.cpp needs --jinja"),
        "{short}"
    );
    // The next request's prompt holds them.
    c.state.apply(&Event::TurnStarted {
        session: 2,
        turn: 2,
        line: "again".into(),
        at_us: at + 1_000_000,
    });
    let mut held = asked(1_400);
    if let Event::ModelRequest { turn, .. } = &mut held {
        *turn = 2;
    }
    c.state.apply(&held);
    let long = lines(&c, 2, 2, 120, shown)
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        long.contains("1,400→10 tok") && !long.contains("tools not in the prompt"),
        "{long}"
    );
    // A short prompt whose answer called a tool: the model saw them (tour N: marked under
    // the very calls it made).
    c.state.apply(&Event::TurnStarted {
        session: 2,
        turn: 3,
        line: "and now".into(),
        at_us: at + 2_000_000,
    });
    let mut called = asked(47);
    if let Event::ModelRequest { turn, response, .. } = &mut called {
        *turn = 3;
        response.finish_reason = Some("tool_calls".into());
    }
    c.state.apply(&called);
    let calling = lines(&c, 2, 3, 120, shown)
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        calling.contains("47→10 tok") && !calling.contains("tools not in the prompt"),
        "{calling}"
    );
}

/// Attached, a chat whose call fails after its turn took the line (the watched server was
/// killed, its event stream with it) ends that turn here, cut off, and says so: it showed
/// "streaming" for minutes (tour L).
#[test]
fn an_attached_chat_whose_call_failed_ends_its_turn_cut_off() {
    let mut c = attached_to("http://127.0.0.1:7870/mcp");
    c.chat_started(1);
    let line = "tell me a long story";
    let at = 50_000_000;
    let turn = c.state.transcript(1).last().map_or(0, |t| t.id) + 1;
    c.state.apply(&Event::TurnStarted {
        session: 1,
        turn,
        line: line.into(),
        at_us: at,
    });
    assert!(c.state.transcript(1).last().unwrap().end.is_none());
    c.chat_done(
        1,
        line,
        Err("Transport closed (is the bot still running there?)".into()),
    );
    let last = c.state.transcript(1).last().unwrap();
    assert!(
        last.end
            .as_deref()
            .is_some_and(|end| end.starts_with("cut off: this console's chat call failed")),
        "{:?}",
        last.end
    );
    // Timed to the failure, not "total 0 µs".
    assert!(last.total_us.is_some_and(|t| t > 0), "{:?}", last.total_us);
    let said = c
        .notice
        .as_ref()
        .map(|n| n.text.clone())
        .unwrap_or_default();
    assert!(
        said.contains(&format!(
            "the bot took the line (turn {turn}), shown cut off"
        )),
        "{said}"
    );
}

/// A console attached to `target` (a bot's MCP URL, or whisker's), watching.
fn attached_to(target: &str) -> Console {
    let mut c = console();
    c.state.header.source = Source::Attached {
        target: target.into(),
        view: "watching".into(),
    };
    c
}

/// Attached to a bot that is not a turnscope, the person's own session that closed (its
/// pipeline ended) takes no more lines: a line starts a new session, and the Input pane's
/// title says so (tour T: `to #4` after #4 closed). A watched turnscope may reopen it: there
/// the title still names it.
#[test]
fn the_input_title_says_a_line_starts_a_new_session_when_yours_closed_on_a_pipecat_bot() {
    let mut c = attached_to("http://127.0.0.1:7892/mcp");
    c.start_on_first_line = true;
    c.state
        .apply(&Event::Session(turnscope::observe::SessionEvent {
            session: 1,
            handle_prefix: String::new(),
            opener: turnscope::observe::SessionOpener::Api,
            closed: Some("pipeline ended (CancelFrame)".into()),
            at_us: c.state.now_us,
            restored: false,
            began_us: None,
            taken_from: None,
            greeting: None,
        }));
    c.closed_own_starts_anew = true;
    let shown = screen(&mut c, 120, 34);
    assert!(
        shown.contains("Input · to a new session of yours (#1 closed)"),
        "{shown}"
    );
    c.closed_own_starts_anew = false;
    let shown = screen(&mut c, 120, 34);
    assert!(shown.contains("Input · to #1 "), "{shown}");
}

/// Watching whisker alone, nothing chats: the Input pane's footer offers its way out, not
/// the keys that send or edit a line (it offered `Enter send … Alt+Enter newline`: tour T).
#[test]
fn watching_whisker_alone_the_input_offers_no_sending_keys() {
    let mut c = attached_to("whisker ws://127.0.0.1:7893");
    c.state.header.bot_url = None;
    assert!(c.watching_only());
    c.focus_pane(PaneId::Input);
    let shown = screen(&mut c, 160, 40);
    let footer = shown.lines().last().unwrap_or_default();
    assert!(
        footer.contains("Esc leave")
            && !footer.contains("Enter send")
            && !footer.contains("newline"),
        "{footer}"
    );
}

/// A replay closes nothing: a session whose client went stays open until its handle
/// expires, and its Log line does not offer `d` (it said "or you close it (d)": tour T).
#[test]
fn a_replay_does_not_offer_to_close_a_session_whose_client_went() {
    let mut replay = ConsoleState::new(Header {
        source: Source::Replay {
            file: "attach.jsonl".into(),
            unreadable: Default::default(),
        },
        ..Header::default()
    });
    replay.apply(&opened_by_mcp(2, "2b2b2b2b", "claude-code"));
    replay.apply(&Event::ClientGone {
        session: 2,
        client: "claude-code".into(),
        reason: "its MCP session ended".into(),
        at_us: replay.now_us + 1,
    });
    let said: Vec<String> = replay
        .journal
        .entries()
        .iter()
        .map(|e| e.message.clone())
        .collect();
    assert!(
        said.iter()
            .any(|m| m.contains("stays open on the server until its handle expires")),
        "{said:?}"
    );
    assert!(!said.iter().any(|m| m.contains("(d)")), "{said:?}");
}

/// At a replay's end the recording had stopped: the pipeline diagram shows each link's total
/// (`×N`), as the live console had settled to, not rates as if frames still flowed (tour T:
/// `model ─68/s q2→ output` at the end). Stepped back into the turn, its rates show.
#[test]
fn at_a_replays_end_the_pipeline_shows_totals_not_rates() {
    use crate::state::tape::Tape;
    use crate::tests::fixture::{T0, crossing};
    let mut events = vec![opened_by_mcp(1, "1a1a1a1a", "claude-code")];
    events.push(Event::TurnStarted {
        session: 1,
        turn: 1,
        line: "hi".into(),
        at_us: T0,
    });
    for i in 0..40 {
        events.push(crossing(
            1,
            1,
            10 + i,
            "TextPiece",
            "x",
            T0 + 1_000_000 + i * 20_000,
        ));
    }
    let blank = ConsoleState::new(Header {
        source: Source::Replay {
            file: "run.jsonl".into(),
            unreadable: Default::default(),
        },
        ..Header::default()
    });
    let (tape, state) = Tape::new(events, blank);
    let mut c = Console::new(state, Theme::default(), true);
    c.tape = Some(tape);
    c.selected = Some(1);
    c.settle();
    c.focus_pane(PaneId::Frames);
    let shown = screen(&mut c, 160, 40);
    let diagram = shown
        .lines()
        .find(|l| l.contains("pipeline #1"))
        .unwrap_or_default()
        .to_string();
    assert!(
        diagram.contains("─×40→") && !diagram.contains("/s"),
        "{diagram}"
    );
    let mut state = c.state.clone();
    if let Some(tape) = c.tape.as_mut() {
        assert!(tape.scrub(-1, &mut state));
    }
    c.state = state;
    let shown = screen(&mut c, 160, 40);
    let diagram = shown
        .lines()
        .find(|l| l.contains("pipeline #1"))
        .unwrap_or_default()
        .to_string();
    assert!(diagram.contains("/s"), "{diagram}");
}

/// A Stats pane too narrow for the word `recent` over its sparklines leaves the column
/// unheaded rather than cut (tour T: `rece` at 120×34).
#[test]
fn the_stats_header_never_cuts_recent() {
    let mut c = console();
    c.focus_pane(PaneId::Stats);
    for width in 100..=200u16 {
        let shown = screen(&mut c, width, 34);
        let header = shown
            .lines()
            .find(|l| l.contains("metric") && l.contains("p99"))
            .unwrap_or_default()
            .to_string();
        let last = header
            .trim_end_matches(['"', ' ', '│', '┃', '║'])
            .split_whitespace()
            .last()
            .unwrap_or_default()
            .to_string();
        assert!(
            last == "recent" || !"recent".starts_with(last.as_str()),
            "{width}: {header}"
        );
    }
}
