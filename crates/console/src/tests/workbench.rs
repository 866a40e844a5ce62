//! The workbench's hand calls, without a terminal: a long answer read to its end under the
//! form and in the list of calls (PgUp/PgDn and the wheel), one call of a form at a time,
//! selections that stay on their call and their tool while the lists change, and the
//! project's saved-calls file merged with the edits made to it meanwhile.

use crossterm::event::{Event as TermEvent, KeyCode, KeyEvent, KeyModifiers, MouseEvent};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::json;
use turnscope::tools::ToolOutcome;
use turnscope::tools::hand::HandResult;

use crate::input::actions::Action;
use crate::tests::fixture::console;
use crate::view::console::Console;
use crate::view::hand_calls::Mode;
use crate::view::keys::KeyOwner;

fn press(c: &mut Console, code: KeyCode) -> Option<Action> {
    c.handle(&TermEvent::Key(KeyEvent::new(code, KeyModifiers::NONE)))
}

fn type_text(c: &mut Console, text: &str) {
    for ch in text.chars() {
        press(c, KeyCode::Char(ch));
    }
}

/// The whole screen, `w`×`h`, as the loop draws it (a notice gone: its box covers rows).
fn screen(c: &mut Console, w: u16, h: u16) -> String {
    c.notice = None;
    c.before_draw();
    let mut terminal = Terminal::new(TestBackend::new(w, h)).expect("terminal");
    terminal.draw(|f| crate::draw::draw(f, c)).expect("draw");
    terminal.backend().to_string()
}

/// A tool's answer of `lines` numbered lines.
fn long_answer(tool: &str, lines: usize) -> HandResult {
    let text: Vec<String> = (1..=lines)
        .map(|i| format!("line {i:04} lorem ipsum"))
        .collect();
    HandResult {
        tool: tool.into(),
        source: "builtin".into(),
        arguments: json!({"text": "x"}),
        outcome: ToolOutcome::ok(text.join("\n")),
        duration: std::time::Duration::from_millis(7),
        unchecked: None,
    }
}

/// The Tools pane, echo's form open (the built-in, second in the list), `text` typed and sent:
/// the call's id.
fn call_echo(c: &mut Console, text: &str) -> u64 {
    press(c, KeyCode::Esc);
    press(c, KeyCode::Char('6'));
    press(c, KeyCode::Char('g'));
    press(c, KeyCode::Char('j'));
    press(c, KeyCode::Enter);
    assert_eq!(c.key_owner(), KeyOwner::Form);
    type_text(c, text);
    match press(c, KeyCode::Enter) {
        Some(Action::HandCall { id, .. }) => id,
        other => panic!("a call, not {other:?}"),
    }
}

/// A 200-line answer under the form is read to its end with PgDn at 80×24 (tour S H1: the
/// scroll was pulled back to the field edited at each draw, so PgDn stopped once that field
/// reached the top and the answer's end was never seen); the next key typed brings the field
/// back in sight.
#[test]
fn a_long_answer_under_the_form_scrolls_to_its_end_and_typing_brings_the_field_back() {
    let mut c = console();
    let id = call_echo(&mut c, "x");
    c.hand_call_done(id, Ok(long_answer("echo", 200)));
    let first = screen(&mut c, 80, 24);
    assert!(
        first.contains("result of echo"),
        "the answer's head is brought in sight once it came: {first}"
    );
    for _ in 0..30 {
        press(&mut c, KeyCode::PageDown);
        screen(&mut c, 80, 24);
    }
    let end = screen(&mut c, 80, 24);
    assert!(end.contains("line 0200 lorem ipsum"), "{end}");
    press(&mut c, KeyCode::PageUp);
    let back = screen(&mut c, 80, 24);
    assert!(!back.contains("line 0200"), "PgUp scrolls back: {back}");
    type_text(&mut c, "y");
    let typed = screen(&mut c, 80, 24);
    assert!(
        typed.contains("▶*text"),
        "the field edited is in sight: {typed}"
    );
}

/// The wheel over the form scrolls it and its answer, not the tool list under it.
#[test]
fn the_wheel_over_the_form_scrolls_its_answer() {
    let mut c = console();
    let id = call_echo(&mut c, "x");
    c.hand_call_done(id, Ok(long_answer("echo", 200)));
    screen(&mut c, 80, 24);
    let area = c.areas.get().inspector;
    let cursor = c.tools.nav.cursor;
    for _ in 0..80 {
        c.handle(&TermEvent::Mouse(MouseEvent {
            kind: crossterm::event::MouseEventKind::ScrollDown,
            column: area.x + area.width - 5,
            row: area.y + 5,
            modifiers: KeyModifiers::NONE,
        }));
        screen(&mut c, 80, 24);
    }
    let end = screen(&mut c, 80, 24);
    assert!(end.contains("line 0200 lorem ipsum"), "{end}");
    assert_eq!(c.tools.nav.cursor, cursor, "the tool selected stays");
}

/// In the list of hand calls (`h`), PgDn scrolls the selected call's answer to its end (it
/// moved the selection, and the answer's end was out of reach: tour S H1); ↑↓ move the
/// selection and bring it back in sight.
#[test]
fn the_list_of_calls_scrolls_the_selected_answer_to_its_end() {
    let mut c = console();
    let id = call_echo(&mut c, "x");
    c.hand_call_done(id, Ok(long_answer("echo", 200)));
    press(&mut c, KeyCode::Esc);
    press(&mut c, KeyCode::Char('h'));
    assert_eq!(c.key_owner(), KeyOwner::Calls);
    screen(&mut c, 80, 24);
    for _ in 0..30 {
        press(&mut c, KeyCode::PageDown);
        screen(&mut c, 80, 24);
    }
    let end = screen(&mut c, 80, 24);
    assert!(end.contains("line 0200 lorem ipsum"), "{end}");
    assert_eq!(c.tools.hand.nav.cursor, 0, "the selection stays");
    press(&mut c, KeyCode::Up);
    let back = screen(&mut c, 80, 24);
    assert!(back.contains("▶  echo("), "{back}");
}

/// A second Enter while the form's call is in flight sends nothing (tour S M2: each Enter sent
/// one more call, and Esc cancelled only the last); once it is answered, Enter calls again.
#[test]
fn enter_while_the_forms_call_is_in_flight_sends_nothing_and_says_why() {
    let mut c = console();
    let id = call_echo(&mut c, "once");
    assert_eq!(press(&mut c, KeyCode::Enter), None);
    assert_eq!(press(&mut c, KeyCode::Enter), None);
    assert_eq!(c.tools.hand.calls.len(), 1, "one call made");
    let notice = c.notice.clone().expect("a notice");
    assert!(
        notice.error
            && notice
                .text
                .starts_with("not sent again: echo is still running"),
        "{notice:?}"
    );
    assert!(notice.text.contains("Esc cancels it"), "{notice:?}");
    c.hand_call_done(id, Ok(long_answer("echo", 1)));
    assert!(matches!(
        press(&mut c, KeyCode::Enter),
        Some(Action::HandCall { .. })
    ));
    assert!(matches!(c.tools.hand.mode, Mode::Form(_)));
}

/// The list's selection stays on its call as calls are added above it, and a call made from
/// the form is the one selected then (tour S M1: the cursor kept its row, so `s` meant to save
/// the new call forgot the saved one that had slid under it).
#[test]
fn the_selected_call_stays_the_same_call_and_a_new_call_is_selected() {
    let mut c = console();
    let saved =
        r#"{"calls": [{"tool": "echo", "arguments": {"text": "plan"}}, {"tool": "clock"}]}"#;
    c.tools.hand.load(saved).unwrap();
    // Listed newest first: clock, then echo "plan"; the cursor on echo.
    c.tools.hand.nav.cursor = 1;
    c.tools.hand.started("clock", json!({}));
    let selected = c.tools.hand.selected().unwrap();
    assert_eq!(
        (selected.tool.as_str(), &selected.arguments),
        ("echo", &json!({"text": "plan"}))
    );
    // A call from the form: `h` shows it selected, and `s` saves that one.
    let id = call_echo(&mut c, "new");
    press(&mut c, KeyCode::Esc);
    press(&mut c, KeyCode::Esc);
    press(&mut c, KeyCode::Char('h'));
    assert_eq!(c.tools.hand.selected().map(|c| c.id), Some(id));
    assert!(matches!(
        press(&mut c, KeyCode::Char('s')),
        Some(Action::SaveCalls { toggled }) if toggled == id
    ));
    let saved: Vec<String> = c
        .tools
        .hand
        .calls
        .iter()
        .filter(|c| c.saved)
        .map(|c| c.arguments.to_string())
        .collect();
    assert_eq!(saved, [r#"{"text":"new"}"#, "{}", r#"{"text":"plan"}"#]);
}

/// A new tool list keeps the same tool selected, not the same row (tour S M1: a tool added
/// above by `tools/list_changed`, or one moved to the skipped ones, left the cursor on another
/// tool, whose form Enter then opened).
#[test]
fn the_selected_tool_stays_selected_when_the_tool_list_changes() {
    let mut c = console();
    let name_at = |c: &Console| c.state.tools[c.tools.nav.cursor].name.clone();
    c.tools.nav.cursor = c
        .state
        .tools
        .iter()
        .position(|t| t.name == "fetch")
        .unwrap();
    let mut tools = crate::tests::fixture::tools();
    tools.insert(
        0,
        turnscope::tools::ToolSpec {
            name: "added".into(),
            description: "Added by tools/list_changed.".into(),
            input_schema: json!({"type": "object"}),
            source: "mcp:files".into(),
        },
    );
    c.state.set_tools(&tools);
    c.settle();
    assert_eq!(name_at(&c), "fetch");
    // Moved to the skipped ones: still the same tool.
    tools.retain(|t| t.name != "fetch");
    c.state.set_tools_and_skips(
        &tools,
        &[turnscope::tools::merge::Skip {
            tool: "fetch".into(),
            source: "mcp:web".into(),
            reason: turnscope::tools::merge::SkipReason::TakenBy("builtin".into()),
        }],
    );
    c.settle();
    assert_eq!(name_at(&c), "fetch");
    assert!(c.state.tools[c.tools.nav.cursor].skipped.is_some());
}

/// A fresh project folder with a `.turnscope` in it.
fn project(name: &str) -> std::path::PathBuf {
    let dir =
        std::env::temp_dir().join(format!("turnscope-workbench-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join(".turnscope")).unwrap();
    dir
}

/// The tools the project's file holds, in its order.
fn file_tools(file: &std::path::Path) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap();
    crate::view::hand_calls::parse_saved(&text)
        .unwrap()
        .calls
        .into_iter()
        .map(|c| format!("{}{}", c.tool, c.arguments))
        .collect()
}

/// Saves (or forgets) the call `id` as `s` in the list does, and writes the file.
fn toggle(c: &mut Console, dir: &std::path::Path, id: u64) {
    c.tools.hand.select(Some(id));
    let (toggled, _) = c.tools.hand.toggle_saved().expect("toggled");
    crate::run::workbench::save_calls(c, dir, toggled);
}

/// `s` reads the project's file again: calls added to it by hand while the console ran are
/// kept and listed, calls taken out of it are saved no more, and a file broken since the start
/// is left as it is (tour S H2: the file was written from memory, the hand-added calls lost,
/// the broken file rewritten without a word).
#[test]
fn saving_keeps_the_edits_made_to_the_file_while_the_console_ran() {
    let dir = project("merge");
    let file = dir.join(crate::view::hand_calls::SAVED_FILE);
    std::fs::write(
        &file,
        r#"{"calls": [{"tool": "plan_trip", "arguments": {"city": "Oslo"}}]}"#,
    )
    .unwrap();
    let mut c = console();
    crate::run::workbench::take_in_saved(&mut c, &dir).unwrap();
    // Edited in another shell: two calls added.
    std::fs::write(
        &file,
        r#"{"calls": [{"tool": "plan_trip", "arguments": {"city": "Oslo"}}, {"tool": "get-sum", "arguments": {"a": 40, "b": 2}}, {"tool": "clock"}]}"#,
    )
    .unwrap();
    let echo = c.tools.hand.started("echo", json!({"text": "hi"}));
    toggle(&mut c, &dir, echo);
    assert_eq!(
        file_tools(&file),
        [
            r#"plan_trip{"city":"Oslo"}"#,
            r#"get-sum{"a":40,"b":2}"#,
            "clock{}",
            r#"echo{"text":"hi"}"#
        ]
    );
    let listed: Vec<&str> = c
        .tools
        .hand
        .calls
        .iter()
        .filter(|c| c.saved)
        .map(|c| c.tool.as_str())
        .collect();
    assert_eq!(listed.len(), 4, "{listed:?}");
    let notice = c.notice.clone().unwrap();
    assert!(
        !notice.error && notice.text.contains("2 calls added there are listed"),
        "{notice:?}"
    );
    // Taken out there: clock (never run here) goes from the list; forgetting echo keeps the
    // rest of the file as it is.
    std::fs::write(
        &file,
        r#"{"calls": [{"tool": "get-sum", "arguments": {"a": 40, "b": 2}}, {"tool": "plan_trip", "arguments": {"city": "Oslo"}}, {"tool": "echo", "arguments": {"text": "hi"}}]}"#,
    )
    .unwrap();
    toggle(&mut c, &dir, echo);
    assert_eq!(
        file_tools(&file),
        [r#"get-sum{"a":40,"b":2}"#, r#"plan_trip{"city":"Oslo"}"#]
    );
    assert!(!c.tools.hand.calls.iter().any(|c| c.tool == "clock"));
    let notice = c.notice.clone().unwrap();
    assert!(
        notice
            .text
            .contains("1 call taken out there is no longer saved"),
        "{notice:?}"
    );
    assert!(!c.tools.hand.get(echo).unwrap().saved, "echo forgotten");
    // Broken after the start: left as it is, and the save taken back.
    let broken = r#"{"calls": [{"tool": "get-sum", "arguments": {"a": 40, "b": 2}}],}"#;
    std::fs::write(&file, broken).unwrap();
    toggle(&mut c, &dir, echo);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), broken);
    assert!(!c.tools.hand.get(echo).unwrap().saved);
    let notice = c.notice.clone().unwrap();
    assert!(
        notice.error
            && notice
                .text
                .starts_with("not saved: .turnscope/calls.json is not"),
        "{notice:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `Esc` while an edited request is out cancels it, as in the hand-call form: the task's token
/// is cancelled, the editor stays with the edit, and the next `Esc` closes (tour S M5: a hung
/// model server held it 60 s, with no key to stop it).
#[test]
fn esc_cancels_an_edited_request_in_flight_and_the_next_esc_closes() {
    use crate::state::variants::RequestKey;
    use crate::view::resend::RequestEditor;
    let mut c = console();
    let key = RequestKey {
        session: 1,
        turn: 1,
        index: 0,
    };
    c.editor = Some(RequestEditor::new(
        key,
        "{\"model\": \"m\", \"messages\": []}",
        "http://127.0.0.1:9/v1/chat/completions",
    ));
    let sent = c.handle(&TermEvent::Key(KeyEvent::new(
        KeyCode::Char('s'),
        KeyModifiers::CONTROL,
    )));
    assert!(matches!(sent, Some(Action::Resend { .. })), "{sent:?}");
    let editor = c.editor.as_ref().expect("open while sending");
    assert!(editor.sending());
    let stop = editor.stop.clone().expect("a token for the task");
    let drawn = screen(&mut c, 120, 36);
    assert!(drawn.contains("Esc cancels"), "{drawn}");
    // Its lines numbered, as a body that is not JSON is said by line (tour S L8).
    assert!(drawn.contains(" 1 {\"model\""), "{drawn}");
    press(&mut c, KeyCode::Esc);
    assert!(stop.is_cancelled(), "the task is told to stop");
    let editor = c.editor.as_ref().expect("the editor stays");
    assert!(!editor.sending());
    let notice = c.notice.clone().expect("a notice").text;
    assert!(
        notice.starts_with("the edited request was cancelled after"),
        "{notice}"
    );
    press(&mut c, KeyCode::Esc);
    assert!(c.editor.is_none(), "the next Esc closes");
}

/// Help from the form (tour S L1: `?` was typed into the field and F1 did nothing): F1 opens
/// it from any field, `?` from a yes/no or a choice, where nothing is typed; in a text field
/// `?` is a character like any other.
#[test]
fn f1_opens_the_help_from_the_form_and_question_mark_where_nothing_is_typed() {
    let mut c = console();
    call_echo(&mut c, "why");
    press(&mut c, KeyCode::Char('?'));
    let Mode::Form(form) = &c.tools.hand.mode else {
        panic!("the form")
    };
    assert_eq!(form.fields[0].text.text(), "why?");
    assert!(!c.help.open);
    press(&mut c, KeyCode::F(1));
    assert!(c.help.open, "F1 opens the help");
    press(&mut c, KeyCode::Esc);
    assert!(!c.help.open);
    let schema = json!({"type": "object", "properties": {"loud": {"type": "boolean"}}});
    c.tools.hand.mode = Mode::Form(Box::new(crate::view::form::Form::new(
        "shout", &schema, None,
    )));
    press(&mut c, KeyCode::Char('?'));
    assert!(c.help.open, "? on a yes/no opens the help");
}

/// A saved call forgotten before it ran here no longer says `saved` (tour S L6), and a call
/// of a tool no longer offered is refused in the console's words, not with advice for the
/// command line (L7).
#[test]
fn a_forgotten_call_says_so_and_an_unknown_tool_points_to_the_tools_pane() {
    let mut c = console();
    c.tools
        .hand
        .load(r#"{"calls": [{"tool": "clock"}]}"#)
        .unwrap();
    c.tools.hand.toggle_saved();
    c.tools.hand.mode = Mode::Calls;
    let shown: Vec<String> = crate::draw::panes::hand_call::calls_lines(&c, 80)
        .lines
        .iter()
        .map(ToString::to_string)
        .collect();
    let shown = shown.join("\n");
    assert!(
        shown.contains("clock({})") && shown.contains("not run"),
        "{shown}"
    );
    assert!(
        !shown.contains(" saved\n") && shown.contains("forgotten"),
        "{shown}"
    );
    let why = crate::run::workbench::refusal_here(&turnscope::tools::hand::Refusal::UnknownTool {
        name: "nonexistent".into(),
        known: vec!["clock".into(), "echo".into()],
    });
    assert_eq!(
        why,
        "no tool named `nonexistent` is offered now; the Tools pane (6) lists the 2 that are: \
         clock, echo"
    );
}

/// Ctrl+End reaches the end of a long answer in one key and Ctrl+Home its top; PgDn moves a
/// page of the pane, not ten rows (a 64 KiB answer took hundreds of presses).
#[test]
fn ctrl_end_reaches_a_long_answers_end_and_a_page_is_the_panes_height() {
    let mut c = console();
    let id = call_echo(&mut c, "x");
    c.hand_call_done(id, Ok(long_answer("echo", 2000)));
    screen(&mut c, 120, 36);
    let Mode::Form(form) = &c.tools.hand.mode else {
        panic!("the form")
    };
    let before = form.scroll.get();
    press(&mut c, KeyCode::PageDown);
    screen(&mut c, 120, 36);
    let Mode::Form(form) = &c.tools.hand.mode else {
        panic!("the form")
    };
    assert!(
        form.scroll.get() - before > 20,
        "a page: {}",
        form.scroll.get()
    );
    c.handle(&TermEvent::Key(KeyEvent::new(
        KeyCode::End,
        KeyModifiers::CONTROL,
    )));
    let end = screen(&mut c, 120, 36);
    assert!(end.contains("line 2000 lorem ipsum"), "{end}");
    c.handle(&TermEvent::Key(KeyEvent::new(
        KeyCode::Home,
        KeyModifiers::CONTROL,
    )));
    let top = screen(&mut c, 120, 36);
    assert!(top.contains("call echo"), "{top}");
}

/// Enter right after the tool list changed (before the loop's next tick settles the view)
/// opens the form of the tool selected, not of the one now on its row.
#[test]
fn enter_right_after_the_tool_list_changed_opens_the_selected_tools_form() {
    let mut c = console();
    press(&mut c, KeyCode::Esc);
    press(&mut c, KeyCode::Char('6'));
    c.tools.nav.cursor = c.state.tools.iter().position(|t| t.name == "echo").unwrap();
    let mut tools = crate::tests::fixture::tools();
    tools.insert(
        0,
        turnscope::tools::ToolSpec {
            name: "added".into(),
            description: "Added by tools/list_changed.".into(),
            input_schema: json!({"type": "object"}),
            source: "mcp:files".into(),
        },
    );
    c.state.set_tools(&tools);
    press(&mut c, KeyCode::Enter);
    let Mode::Form(form) = &c.tools.hand.mode else {
        panic!("a form")
    };
    assert_eq!(form.tool, "echo");
}

/// A bot (its embedded model, quick) whose sessions send the console's resends, and the
/// channels their answers come back on.
async fn resending_app() -> (
    turnscope::app::App,
    tokio::sync::mpsc::UnboundedSender<crate::run::workbench::HandDone>,
    tokio::sync::mpsc::UnboundedSender<crate::run::workbench::ResendDone>,
    tokio::sync::mpsc::UnboundedReceiver<crate::run::workbench::ResendDone>,
) {
    let mut config = turnscope::config::Config::default();
    config.server.port = 0;
    config.model.pace = 0.0;
    let app = turnscope::app::App::start(&config, turnscope::observe::Bus::default())
        .await
        .expect("app starts");
    let (hand, _) = tokio::sync::mpsc::unbounded_channel();
    let (resend, done) = tokio::sync::mpsc::unbounded_channel();
    (app, hand, resend, done)
}

/// The console's turn view open on session 1's first turn and its first model request.
fn on_a_request() -> (Console, crate::state::variants::RequestKey) {
    let mut c = console();
    c.selected = Some(1);
    c.open_turn_view();
    let key = c.turn_view.as_ref().expect("turn view").request_key();
    (c, key)
}

/// A request edited in `$EDITOR` and sent can be cancelled (tour: once the editor closed
/// there was no editor to press Esc in, and a hung model server held it until its timeout):
/// the variants show it in flight, saying Esc cancels it; Esc closes its connection, no
/// variant comes, and the edit is kept for `e`.
#[tokio::test]
async fn a_request_sent_from_dollar_editor_shows_in_flight_and_esc_cancels_it() {
    use tokio::io::AsyncReadExt;
    // A model server that takes the request and never answers.
    let hung = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1/chat/completions", hung.local_addr().unwrap());
    let (app, hand, resend, mut answers) = resending_app().await;
    let (mut c, key) = on_a_request();
    let Some(Action::EditExternally { text, .. }) = press(&mut c, KeyCode::Char('E')) else {
        panic!("E hands the request to $EDITOR");
    };
    let edited = text.replacen('{', "{\"temperature\": 0.5,", 1);
    // What $EDITOR saved comes back (to the hung server: the same path as the session's URL).
    let sent = c.external_edit_done(key, url, Ok(edited.clone()));
    let Some(action @ Action::Resend { .. }) = sent else {
        panic!("{sent:?}");
    };
    assert!(
        crate::run::workbench::perform(action, &mut c, Some(&app.sessions), (&hand, &resend))
            .is_none()
    );
    let (mut conn, _) = tokio::time::timeout(std::time::Duration::from_secs(10), hung.accept())
        .await
        .expect("the request reaches the hung server")
        .unwrap();
    // No editor is open: the variants show the send in flight, and the key that cancels it.
    assert!(c.editor.is_none());
    assert_eq!(c.key_owner(), KeyOwner::Variants);
    let drawn = screen(&mut c, 120, 36);
    for want in [
        "variant 1 of 1 · in flight, 0.",
        "waiting for the answer…",
        "edited      the URL, /temperature",
        "Esc cancels it",
        "Esc cancels the send",
        "\"temperature\": 0.5",
    ] {
        assert!(drawn.contains(want), "{want:?} missing:\n{drawn}");
    }
    // The footer too: no key that needs the answer.
    let footer = drawn.lines().last().unwrap_or_default();
    assert!(
        footer.contains("Esc cancel the send") && !footer.contains("t save as test"),
        "{footer}"
    );
    press(&mut c, KeyCode::Esc);
    let notice = c.notice.clone().expect("a notice").text;
    assert!(
        notice.starts_with("the edited request was cancelled after")
            && notice.contains("it was dropped (its connection closed) and no variant comes"),
        "{notice}"
    );
    // Dropped: the server sees its connection close.
    let closed = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the connection was not closed");
    assert!(answers.try_recv().is_err(), "no answer comes");
    assert!(c.variants_view.is_none(), "nothing left to show");
    assert_eq!(c.sends.of(key).count(), 0);
    // The edit is kept: e on the request opens it as it was sent.
    c.edit_request(false);
    let editor = c.editor.as_ref().expect("the kept edit");
    assert_eq!(editor.text(), edited);
    assert!(
        editor.edited(),
        "Ctrl+R starts over from the recorded request"
    );
    app.shutdown().await;
}

/// `v` lists a send still in flight (tour: it appeared only once answered): an edit sent and
/// its editor closed with Ctrl+C is there, marked in flight with its seconds, and becomes the
/// variant when its answer comes.
#[tokio::test]
async fn v_lists_a_send_in_flight_and_it_becomes_the_variant_when_answered() {
    use turnscope::model::{EmbeddedModel, ScriptSettings};
    // A real model server, slow: a word every 0.2 s.
    let slow = EmbeddedModel::start(
        0,
        ScriptSettings {
            pace: 0.2,
            words: None,
        },
    )
    .await
    .unwrap();
    let url = format!("{}/chat/completions", slow.base_url());
    let (app, hand, resend, mut answers) = resending_app().await;
    let (mut c, key) = on_a_request();
    c.edit_request(false);
    press(&mut c, KeyCode::Tab);
    c.handle(&TermEvent::Key(KeyEvent::new(
        KeyCode::Char('u'),
        KeyModifiers::CONTROL,
    )));
    type_text(&mut c, &url);
    press(&mut c, KeyCode::Tab);
    let sent = c.handle(&TermEvent::Key(KeyEvent::new(
        KeyCode::Char('s'),
        KeyModifiers::CONTROL,
    )));
    let Some(action @ Action::Resend { .. }) = sent else {
        panic!("{sent:?}");
    };
    crate::run::workbench::perform(action, &mut c, Some(&app.sessions), (&hand, &resend));
    // Ctrl+C closes the editor leaving the request going.
    c.handle(&TermEvent::Key(KeyEvent::new(
        KeyCode::Char('c'),
        KeyModifiers::CONTROL,
    )));
    assert!(c.editor.is_none());
    let notice = c.notice.clone().expect("a notice").text;
    assert!(notice.contains("v lists it in flight"), "{notice}");
    press(&mut c, KeyCode::Char('v'));
    let drawn = screen(&mut c, 120, 36);
    for want in [
        "variant 1 of 1 · in flight, 0.",
        "waiting for the answer…",
        "edited      the URL",
        "Esc cancels the send",
    ] {
        assert!(drawn.contains(want), "{want:?} missing:\n{drawn}");
    }
    // What needs the answer says it waits for it.
    press(&mut c, KeyCode::Char('t'));
    let notice = c.notice.clone().expect("a notice").text;
    assert!(notice.contains("still in flight"), "{notice}");
    let (id, k, body, answer) =
        tokio::time::timeout(std::time::Duration::from_secs(20), answers.recv())
            .await
            .expect("the slow model answers")
            .expect("an answer");
    assert_eq!(answer.error, None);
    c.resend_ended(id, k, body, answer);
    assert_eq!(c.sends.of(key).count(), 0);
    let drawn = screen(&mut c, 120, 36);
    assert!(
        drawn.contains("variant 1 of 1 beside the recorded answer") && !drawn.contains("in flight"),
        "{drawn}"
    );
    assert!(drawn.contains("Esc back"), "{drawn}");
    app.shutdown().await;
}

/// At 80×24 (tour: rough there): the tool list is as wide as its rows need, a long name keeps
/// its letters and lets its source go (the detail names it), and the request editor's hint
/// and title are whole pieces and words, never cut mid-word.
#[test]
fn at_80_columns_tool_names_and_the_editors_hint_are_not_cut_mid_word() {
    let mut c = console();
    c.state.tools[0].name = "a_rather_long_tool_name_from_a_server".into();
    press(&mut c, KeyCode::Esc);
    press(&mut c, KeyCode::Char('6'));
    let drawn = screen(&mut c, 80, 24);
    let row = drawn
        .lines()
        .find(|l| l.find("a_rather") < l.find('│') && l.contains("a_rather"))
        .unwrap_or_else(|| panic!("no tool row:\n{drawn}"));
    assert!(row.contains("a_rather_long_tool_na"), "{row}");
    assert!(!row.contains("builtin"), "the source gives way: {row}");

    let (mut c, _) = on_a_request();
    c.edit_request(false);
    let drawn = screen(&mut c, 80, 24);
    let lines: Vec<&str> = drawn.lines().collect();
    let title = lines
        .iter()
        .find(|l| l.contains("Edit model request"))
        .unwrap_or_else(|| panic!("{drawn}"));
    assert!(
        !title.contains("o…"),
        "the title cut between words: {title}"
    );
    let hint = lines
        .iter()
        .find(|l| l.contains("Ctrl+Z/Y undo/redo"))
        .unwrap_or_else(|| panic!("{drawn}"));
    assert!(
        hint.contains("Ctrl+R starts over · Tab: the URL") && !hint.contains('…'),
        "{hint}"
    );
    // Sending, the key that cancels comes before what is explained (it was cut off).
    c.handle(&TermEvent::Key(KeyEvent::new(
        KeyCode::Char('s'),
        KeyModifiers::CONTROL,
    )));
    let drawn = screen(&mut c, 80, 24);
    let status = drawn
        .lines()
        .find(|l| l.contains("sending…"))
        .unwrap_or_else(|| panic!("{drawn}"));
    assert!(status.contains("· Esc cancels it"), "{status}");
}
