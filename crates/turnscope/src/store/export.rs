//! A stored session as a file other commands read: an `--events` JSONL file (`turnscope
//! replay` opens it: the session, each turn's line, reply pieces, tool calls and end), or a
//! `turnscope test` case (each answered line, with its reply, tool calls and end reason as
//! the expectations). `turnscope sessions export` writes them.

use crate::bot::TurnEnd;
use crate::conversation_test::TestFile;
use crate::conversation_test::write::{RecordedTurn, case_from_turns, render};
use crate::observe::Event;
use crate::observe::event::{FrameEvent, SessionEvent};

use super::{Head, StoredTurn};

/// The session number exported events carry.
pub const SESSION: u64 = 1;

/// `head` and its `turns` as the events a live run would have recorded (the turn records'
/// content; timings from the records, placed at each turn's start).
pub fn events(head: &Head, turns: &[StoredTurn], origin: &str) -> Vec<Event> {
    let mut out = Vec::with_capacity(2 + turns.len() * 4);
    out.push(Event::Log {
        at_ms: head.created_ms,
        level: "info".into(),
        message: format!(
            "session {} exported from {origin}: {} of its {} turns",
            head.prefix,
            turns.len(),
            head.turns
        ),
    });
    out.push(Event::Session(SessionEvent {
        session: SESSION,
        handle_prefix: head.prefix.clone(),
        opener: head.opener.clone(),
        closed: None,
        at_us: head.created_ms * 1000,
        restored: false,
        began_us: None,
        taken_from: None,
        greeting: head.greeting.clone(),
    }));
    let mut frame_id = 0u64;
    for turn in turns {
        let r = &turn.record;
        let start_us = turn.started_ms * 1000;
        out.push(Event::TurnStarted {
            session: SESSION,
            turn: r.id,
            line: r.line.clone(),
            at_us: start_us,
        });
        let piece_at = start_us + r.first_piece.map_or(0, |d| d.as_micros() as u64);
        for i in 0..r.piece_ends.len() {
            frame_id += 1;
            out.push(Event::Frame(FrameEvent::reply_piece(
                frame_id,
                SESSION,
                r.id,
                "model",
                piece_at,
                r.piece(i).to_string(),
            )));
        }
        for call in &r.tool_calls {
            out.push(Event::ToolCall(call.event(SESSION, r.id, 0, false)));
        }
        out.push(Event::TurnEnded(r.end_event(SESSION)));
    }
    out
}

/// A stored session as a `turnscope test` file ([`test_case`]), and what of it the file holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestCase {
    /// The file's text.
    pub text: String,
    /// How many turns it holds (its `[[case.turn]]`s).
    pub written: usize,
    /// The turns left out, each with why (`turn 4: ...`), in the order they were said.
    pub left_out: Vec<String>,
}

impl TestCase {
    /// How many turns it holds, of how many: `6 of its 7 turns` when some were left out,
    /// else `6 turns`.
    pub fn summary(&self) -> String {
        let all = self.written + self.left_out.len();
        let turns = if all == 1 { "turn" } else { "turns" };
        if self.left_out.is_empty() {
            format!("{all} {turns}")
        } else {
            format!("{} of its {all} {turns}", self.written)
        }
    }
}

/// Why a stored turn has no reply a test could expect, or `None` when it has one.
fn unanswered(end: Option<&TurnEnd>) -> Option<&'static str> {
    match end {
        None => Some("it had not ended when it was stored, so it has no reply to expect"),
        Some(TurnEnd::Restarted) => {
            Some("turnscope stopped while it ran, so it got no reply to expect")
        }
        Some(_) => None,
    }
}

/// `head` and its `turns` as a `turnscope test` file: each answered turn (a turn lost to a
/// restart got no answer to expect, and is left out: said in the file's heading and in
/// [`TestCase::left_out`]).
///
/// # Errors
/// No turn to export, or a tool's arguments TOML cannot hold.
pub fn test_case(head: &Head, turns: &[StoredTurn], origin: &str) -> Result<TestCase, String> {
    let mut left_out = Vec::new();
    let mut recorded = Vec::new();
    for r in turns.iter().map(|t| &t.record) {
        if let Some(why) = unanswered(r.end.as_ref()) {
            left_out.push(format!("turn {}: {why}", r.id));
            continue;
        }
        recorded.push(RecordedTurn {
            line: r.line.clone(),
            reply: r.reply.clone(),
            tool_calls: r
                .tool_calls
                .iter()
                .map(|c| (c.call.name.clone(), c.call.arguments.clone()))
                .collect(),
            end_reason: r.end.as_ref().map(|e| e.label().to_string()),
        });
    }
    if recorded.is_empty() {
        return Err(format!(
            "session {} has no answered turn to export as a test case{}",
            head.prefix,
            if left_out.is_empty() {
                String::new()
            } else {
                format!(" ({})", left_out.join("; "))
            }
        ));
    }
    let file = TestFile {
        cases: vec![case_from_turns(
            &format!("session {}", head.prefix),
            &recorded,
        )],
        ..TestFile::default()
    };
    let mut heading = format!(
        "turnscope: stored session {} ({origin}) exported as a test case",
        head.prefix
    );
    for why in &left_out {
        heading.push_str(&format!("\n# Left out: {why}"));
    }
    Ok(TestCase {
        text: render(&file, &heading)?,
        written: recorded.len(),
        left_out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::conformance::{head, turn};
    use crate::store::memory::MemoryStore;

    #[test]
    fn a_stored_session_becomes_events_replay_reads_and_a_test_case() {
        let store = MemoryStore::new();
        let head = head(&store, 1_000);
        let mut first = turn(1, 2);
        first.record.piece_ends = vec![3, 7];
        first.record.reply = "rep ly 1".into();
        let mut lost = turn(2, 4);
        lost.record.end = Some(TurnEnd::Restarted);
        lost.record.reply.clear();
        let turns = [first, lost];
        let events = events(&head, &turns, "sqlite:/x");
        let text: String = events
            .iter()
            .map(|e| serde_json::to_string(e).unwrap() + "\n")
            .collect();
        let (back, problems) = crate::observe::recorder::read_events(&text);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(back.len(), events.len());
        let pieces: Vec<&str> = events
            .iter()
            .filter_map(|e| match e {
                Event::Frame(f) => Some(f.detail.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(pieces, ["rep", " ly "]);
        // The greeting it opened with, for the replayed transcript's top (it had none).
        assert!(events.iter().any(|e| matches!(e,
            Event::Session(s) if s.greeting.as_deref() == Some("Hello"))));
        assert!(text.contains("\"reason\":\"restarted\""), "{text}");
        let case = test_case(&head, &turns, "sqlite:/x").unwrap();
        let parsed =
            crate::conversation_test::parse(&case.text, "case.test.toml", &|_| None).unwrap();
        assert_eq!(parsed.cases[0].turns.len(), 1, "the lost turn is left out");
        assert_eq!(case.written, 1);
        assert!(case.text.contains("line 1"), "{}", case.text);
        // What was left out is said, with why: in the file and to the person.
        assert!(
            case.text
                .contains("# Left out: turn 2: turnscope stopped while it ran"),
            "{}",
            case.text
        );
        assert_eq!(case.summary(), "1 of its 2 turns");
        assert_eq!(
            case.left_out,
            ["turn 2: turnscope stopped while it ran, so it got no reply to expect"]
        );
        assert!(test_case(&head, &turns[1..], "x").is_err());
    }
}
