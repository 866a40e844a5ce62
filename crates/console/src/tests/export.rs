//! The `e` report: a session's turns, waterfalls, whole tool calls and its frames as text.

use super::fixture;
use crate::draw::export::session_report;

#[test]
fn the_report_holds_turns_tool_results_and_frames() {
    let mut c = fixture::console();
    c.frames.all = true;
    let report = session_report(&c, 1);
    assert!(
        report.starts_with("turnscope session #1 · console (you)"),
        "{report}"
    );
    assert!(report.contains("you   what does the clock say"), "{report}");
    assert!(
        report.contains("result 2026-01-01 12:00:00 UTC"),
        "{report}"
    );
    assert!(report.contains("waterfall"), "{report}");
    assert!(report.contains("FunctionCallResult"), "{report}");
    assert!(
        !report.contains("Once upon"),
        "only session #1's frames: {report}"
    );
}

/// The report opens with the greeting the session opened with, as its transcript does; one
/// that opened with none has none (the report began at its first turn).
#[test]
fn the_report_opens_with_the_sessions_greeting() {
    use turnscope::observe::{Event, SessionEvent, SessionOpener};
    let mut c = fixture::console();
    c.state.greeting = Some("Hello from the bot of today".into());
    for (session, greeting) in [(7, Some("Hi, I am Hours.")), (8, None)] {
        c.state.apply(&Event::Session(SessionEvent {
            session,
            handle_prefix: format!("{session:08}"),
            opener: SessionOpener::Api,
            closed: None,
            at_us: c.state.now_us,
            restored: false,
            began_us: None,
            taken_from: None,
            greeting: greeting.map(str::to_string),
        }));
    }
    let report = session_report(&c, 7);
    assert!(report.contains("\n\nbot   Hi, I am Hours.\n\n"), "{report}");
    let report = session_report(&c, 8);
    assert!(!report.contains("bot "), "{report}");
}

/// A session of an attached bot that gives no turn records (a pipecat bot): its test case
/// says to run it against that bot (`--url`), expects nothing of tools it cannot see, and
/// leaves out a call the bot never answered.
#[test]
fn an_attached_bots_session_exports_a_case_that_runs_against_it() {
    use turnscope::observe::{Event, TurnClock, TurnEndEvent};
    let mut c = crate::tests::fixture::console();
    c.state.header.source = crate::state::Source::Attached {
        target: "http://127.0.0.1:18530/mcp".into(),
        view: "client view".into(),
    };
    c.state.header.bot_url = Some("http://127.0.0.1:18530/mcp".into());
    let turn = |turn: u64, line: &str, reason: &str| {
        [
            Event::TurnStarted {
                session: 9,
                turn,
                line: line.into(),
                at_us: 0,
            },
            Event::TurnEnded(TurnEndEvent {
                session: 9,
                turn,
                reason: reason.into(),
                clock: Some(TurnClock::Client),
                ..Default::default()
            }),
        ]
    };
    for event in turn(1, "hello there", "completed").into_iter().chain(turn(
        2,
        "are you there",
        "not answered: Transport send error",
    )) {
        c.state.apply(&event);
    }
    let text = c.state.test_case(9).expect("a test case");
    assert!(
        text.contains("run: turnscope test --url http://127.0.0.1:18530/mcp FILE"),
        "{text}"
    );
    assert!(text.contains("hello there"), "{text}");
    assert!(!text.contains("are you there"), "{text}");
    assert!(!text.contains("tools"), "{text}");
    assert!(!text.contains("end_reason"), "not checkable there: {text}");
}
