//! The console state: events folded in, bounds kept, live snapshots laid over, and the live
//! feed against a real app (server on a loopback port, embedded model).

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::state::{Activity, CLOSED_KEPT, ConsoleState, FRAMES_KEPT, ProgressTotals, SessionRow};
use crate::tests::fixture::{self, T0};
use turnscope::app::App;
use turnscope::config::Config;
use turnscope::observe::event::{ToolCallEvent, TurnEndEvent};
use turnscope::observe::{Bus, Event, FrameEvent, SessionEvent, SessionOpener};

fn fixture_state() -> ConsoleState {
    let mut s = ConsoleState::default();
    for e in fixture::events() {
        s.apply(&e);
    }
    s
}

#[test]
fn a_closed_label_does_not_say_closed_twice() {
    let by_console = Activity::Closed("closed from the console".into());
    assert_eq!(by_console.label(), "closed from the console");
    let by_bot = Activity::Closed("ended by the bot: goodbye".into());
    assert_eq!(by_bot.label(), "closed: ended by the bot: goodbye");
}

#[test]
fn the_reply_is_built_from_the_pieces_reaching_the_output_once() {
    let s = fixture_state();
    let turns = s.transcript(1);
    assert_eq!(turns.len(), 2);
    assert_eq!(turns[0].line, "hello there");
    assert_eq!(turns[0].reply, "Hello there! How can I help?");
    assert_eq!(turns[0].end.as_deref(), Some("completed"));
    assert_eq!(turns[0].total_us, Some(131_000));
    assert_eq!(turns[1].rounds, 1);
    assert_eq!(turns[1].tools.len(), 1);
    let clock = &turns[1].tools[0];
    assert_eq!(clock.name, "clock");
    assert_eq!(clock.arguments, "{}");
    assert_eq!(clock.result, "2026-01-01 12:00:00 UTC");
    assert!(
        clock.head(20).starts_with("clock({}) → 23 B"),
        "{}",
        clock.head(20)
    );
    let streaming = &s.transcript(2)[0];
    assert_eq!(streaming.reply, "Once upon a time");
    assert_eq!(streaming.end, None);
}

#[test]
fn sessions_follow_their_events() {
    let s = fixture_state();
    let rows = s.session_rows();
    let numbers: Vec<u64> = rows.iter().map(|r| r.number).collect();
    assert_eq!(numbers, [1, 2, 3], "open ones first, then closed");
    assert_eq!(s.session(1).unwrap().activity, Activity::Idle);
    assert_eq!(s.session(1).unwrap().turns, 2);
    assert_eq!(s.session(2).unwrap().activity, Activity::InTurn);
    assert_eq!(s.session(2).unwrap().opener_label(), "mcp: claude-code");
    let closed = s.session(3).unwrap();
    assert_eq!(closed.activity, Activity::Closed("idle too long".into()));
    assert_eq!(
        closed.age_s, 7,
        "a closed session keeps the age it closed at"
    );
    assert_eq!(s.sessions_opened, 3);
}

/// A console that attaches late, or reconnects after a drop, is sent each open session's
/// kept turns only (the server keeps a bounded number): the turns column still says how many
/// the session has had, and a turn sent twice is not counted twice.
#[test]
fn a_sessions_turn_count_is_its_highest_turn_even_when_only_the_last_were_seen() {
    let mut s = ConsoleState::default();
    s.apply(&Event::Session(SessionEvent {
        session: 7,
        handle_prefix: "77777777".into(),
        opener: SessionOpener::Api,
        closed: None,
        at_us: T0,
        restored: false,
        began_us: None,
        taken_from: None,
        greeting: None,
    }));
    let started = |turn: u64| Event::TurnStarted {
        session: 7,
        turn,
        line: format!("line {turn}"),
        at_us: T0 + turn,
    };
    for turn in [122, 123, 123, 124] {
        s.apply(&started(turn));
    }
    assert_eq!(s.session(7).unwrap().turns, 124);
    let ids: Vec<u64> = s.transcript(7).iter().map(|t| t.id).collect();
    assert_eq!(
        ids,
        [122, 123, 124],
        "a start told twice opens no second turn"
    );
}

/// A watched server that restarted numbers its sessions from 1 again: a closed number that
/// opens again is a new session, with none of the old one's turns.
/// A viewer that read a backlog late (stopped with Ctrl-Z, then resumed) folds each turn's
/// end at the turn's own time (its start plus its total), not at the clock as it reads it:
/// the session's last activity, and with it the Sessions pane's `left` (an "at least"),
/// stays what the server counts from (tour T: `≥3m23s` where the server kept 1m51s).
#[test]
fn a_turn_read_late_ends_at_its_own_time_not_when_it_was_read() {
    let mut s = ConsoleState::default();
    s.apply(&Event::Session(SessionEvent {
        session: 4,
        handle_prefix: "eb53d88e".into(),
        opener: SessionOpener::Mcp("mcp".into()),
        closed: None,
        at_us: T0,
        restored: false,
        began_us: None,
        taken_from: None,
        greeting: None,
    }));
    // Read 90 s after it ran.
    s.now_us = T0 + 90_000_000;
    s.apply(&Event::TurnStarted {
        session: 4,
        turn: 1,
        line: "hi".into(),
        at_us: T0 + 1_000_000,
    });
    s.apply(&Event::TurnEnded(TurnEndEvent {
        session: 4,
        turn: 1,
        reason: "completed".into(),
        total_us: 2_000_000,
        ..TurnEndEvent::default()
    }));
    assert_eq!(
        s.last_activity(s.session(4).expect("row 4")),
        T0 + 3_000_000
    );
}

/// A server that stops closes its sessions all at once, in no order (hash order, µs apart):
/// they are listed by number, latest closed first only between those that closed apart
/// (tour T: `14, 2, 10, 1, 8, …` under the sort by number).
#[test]
fn sessions_closed_together_are_listed_by_number() {
    let mut s = ConsoleState::default();
    let session = |number: u64, closed: Option<&str>, at_us: u64| {
        Event::Session(SessionEvent {
            session: number,
            handle_prefix: format!("{number:08}"),
            opener: SessionOpener::Api,
            closed: closed.map(str::to_string),
            at_us,
            restored: false,
            began_us: None,
            taken_from: None,
            greeting: None,
        })
    };
    for number in 1..=6 {
        s.apply(&session(number, None, T0));
    }
    s.apply(&session(5, Some("closed first"), T0 + 10_000_000));
    for (i, number) in [4, 2, 6, 1, 3].into_iter().enumerate() {
        s.apply(&session(
            number,
            Some("the server stopped"),
            T0 + 20_000_000 + i as u64 * 7,
        ));
    }
    let listed: Vec<u64> = s.session_rows().iter().map(|r| r.number).collect();
    assert_eq!(listed, [1, 2, 3, 4, 6, 5]);
}

#[test]
fn a_closed_sessions_number_opening_again_is_a_new_session() {
    let mut s = ConsoleState::default();
    let session = |prefix: &str, closed: Option<&str>| {
        Event::Session(SessionEvent {
            session: 1,
            handle_prefix: prefix.into(),
            opener: SessionOpener::Api,
            closed: closed.map(str::to_string),
            at_us: T0,
            restored: false,
            began_us: None,
            taken_from: None,
            greeting: None,
        })
    };
    let started = |line: &str| Event::TurnStarted {
        session: 1,
        turn: 1,
        line: line.into(),
        at_us: T0 + 1,
    };
    let frame = |id: u64| {
        Event::Frame(FrameEvent {
            id,
            session: 1,
            turn: 1,
            kind: "data".into(),
            name: "UserLine".into(),
            from: "source".into(),
            to: "input".into(),
            direction: "down".into(),
            at_us: T0 + 2,
            detail: String::new(),
            depth: 0,
        })
    };
    s.apply(&session("before01", None));
    s.apply(&started("to the old one"));
    s.apply(&frame(3));
    s.apply(&session("", Some("the watched server restarted")));
    s.apply(&session("after001", None));
    s.apply(&started("to the new one"));
    let row = s.session(1).unwrap();
    assert_eq!(row.handle_prefix, "after001");
    assert!(!row.is_closed());
    let lines: Vec<&str> = s.transcript(1).iter().map(|t| t.line.as_str()).collect();
    assert_eq!(lines, ["to the new one"]);
    s.apply(&frame(3));
    assert_eq!(
        s.frames().len(),
        1,
        "the old server's frame 3 is not the new one's"
    );
}

/// Turn 1 of session 1 starting with `line`.
fn turn_started(line: &str) -> Event {
    Event::TurnStarted {
        session: 1,
        turn: 1,
        line: line.into(),
        at_us: T0,
    }
}

/// A reply piece of turn 1 of session 1 reaching the output (frame `id`; 0: a retold reply).
fn piece(id: u64, text: &str) -> Event {
    fixture::crossing(1, 1, id, "TextPiece", text, T0 + 10)
}

/// A turn in flight when an attached console was dropped, finished while it was away: the
/// reconnect retells its whole reply as one piece (frame id 0), which replaces the pieces
/// seen before the drop instead of being added to them.
#[test]
fn a_retold_whole_reply_replaces_the_pieces_seen_before_a_drop() {
    let mut s = ConsoleState::default();
    s.apply(&turn_started("tell me"));
    s.apply(&piece(41, "Once upon"));
    s.apply(&piece(0, "Once upon a time."));
    assert_eq!(s.transcript(1)[0].reply, "Once upon a time.");
}

/// A frame's crossings are told when its way ends, so a server tells a turn's end before the
/// last pieces of its reply have reached the sink (`--events` files and watched streams have
/// them in that order): a console folding events (attached, replay) takes them until the reply
/// has the bytes the end told, and a piece told again is not added twice.
#[test]
fn reply_pieces_told_after_the_turns_end_complete_its_reply_once() {
    let mut s = ConsoleState::default();
    s.apply(&turn_started("hi"));
    s.apply(&piece(5, "You said:"));
    s.apply(&Event::TurnEnded(turnscope::observe::event::TurnEndEvent {
        session: 1,
        turn: 1,
        reason: "completed".into(),
        reply_bytes: "You said: hi".len(),
        ..Default::default()
    }));
    s.apply(&piece(6, " hi"));
    s.apply(&piece(6, " hi"));
    let turn = &s.transcript(1)[0];
    assert_eq!(turn.reply, "You said: hi");
    assert_eq!(turn.end.as_deref(), Some("completed"));
}

/// A session reopened from the store: its opening event says when its conversation began,
/// and its age counts from then (in an attached console or a replay as in the local one),
/// while its frames' times still count from its opening.
#[test]
fn a_reopened_sessions_age_counts_from_its_conversations_start() {
    let mut s = ConsoleState::default();
    s.apply(&Event::Session(SessionEvent {
        session: 1,
        handle_prefix: "abcd1234".into(),
        opener: SessionOpener::Api,
        closed: None,
        at_us: T0,
        restored: true,
        began_us: Some(T0 - 3_600_000_000),
        taken_from: None,
        greeting: None,
    }));
    s.now_us = T0 + 5_000_000;
    s.age_rows();
    assert_eq!(s.session(1).unwrap().age_s, 3_605);
    assert_eq!(s.session_relative(1, T0 + 2_000_000).trim(), "2.000s");
}

#[test]
fn progress_totals_count_coalesced_notifications_and_the_rate() {
    let s = fixture_state();
    let totals = &s.progress_totals()[&2];
    assert_eq!(
        *totals,
        ProgressTotals {
            notes: 2,
            pieces: 3,
            coalesced: 1,
            first_us: T0 + 5_050_000,
            last_us: T0 + 5_120_000,
        }
    );
    let rate = totals.rate().unwrap();
    assert!((rate - 14.285).abs() < 0.01, "{rate}");
    assert_eq!(s.progress().len(), 2);
}

#[test]
fn stats_and_session_samples_are_fed() {
    let s = fixture_state();
    let names: Vec<String> = s.stats.summaries().into_iter().map(|(n, _)| n).collect();
    for metric in [
        "turn total",
        "turn first piece",
        "model request",
        "tool clock",
        "mcp tools/call chat",
    ] {
        assert!(
            names.iter().any(|n| n == metric),
            "{metric} missing from {names:?}"
        );
    }
    let mine = s.session_samples(1).unwrap().summaries();
    let total = mine.iter().find(|(n, _, _)| n == "turn total").unwrap();
    assert_eq!(total.1.count, 2);
    assert_eq!(total.1.p50_us, 131_000, "nearest rank of two samples");
    assert_eq!(total.1.max_us, 152_000);
    assert_eq!(total.2, [131_000, 152_000]);
    assert_eq!(s.logs().len(), 1);
}

/// A turn told again (a viewer's preamble, a session reopened from the store) is in the
/// transcript, and not in the figures: the whole console's nor its session's, nor the Log.
#[test]
fn a_retold_turn_is_shown_and_not_counted() {
    let mut s = fixture_state();
    let before = |s: &ConsoleState| {
        (
            s.stats.summaries().len(),
            s.session_samples(1).map(|m| m.summaries().len()),
            s.logs().len(),
            s.stats.errors,
        )
    };
    let counted = before(&s);
    let total = |s: &ConsoleState| {
        s.stats
            .summaries()
            .into_iter()
            .find(|(n, _)| n == "turn total")
            .map(|(_, sum)| sum.count)
    };
    let turns_before = total(&s);
    let last_before = s.last_activity(s.session(1).expect("row 1"));
    s.now_us = T0 + 10_000_000;
    s.apply(&Event::TurnStarted {
        session: 1,
        turn: 9,
        line: "told again".into(),
        at_us: T0 + 50,
    });
    s.apply(&Event::ToolCall(ToolCallEvent {
        session: 1,
        turn: 9,
        name: "clock".into(),
        error: Some("down then".into()),
        retold: true,
        ..ToolCallEvent::default()
    }));
    s.apply(&Event::TurnEnded(TurnEndEvent {
        session: 1,
        turn: 9,
        reason: "completed".into(),
        reply_bytes: 0,
        rounds: 1,
        tool_calls: 1,
        first_piece_us: Some(5),
        total_us: 999_000,
        retold: true,
        ..TurnEndEvent::default()
    }));
    let turn = s.transcript(1).iter().find(|t| t.id == 9).expect("shown");
    assert_eq!(turn.line, "told again");
    assert_eq!(turn.end.as_deref(), Some("completed"));
    assert_eq!(turn.tools.len(), 1);
    assert_eq!(total(&s), turns_before);
    assert_eq!(before(&s), counted);
    // Its end, told now, is not activity now: the session's idle time left (a viewer's
    // `left`, at least) counts from its start at most.
    assert_eq!(
        s.last_activity(s.session(1).expect("row 1")),
        last_before.max(T0 + 50)
    );
    // A turn told again with its tokens shows them, and its session's tally has them; one a
    // crash cut off, never timed, shows no total (tour N: `total 0 µs`, and no tokens).
    let tally = |s: &ConsoleState| s.wire.session_tokens(1).map_or(0, |u| u.prompt_tokens);
    let tallied = tally(&s);
    for (turn, reason, total_us) in [(10, "completed", 5_000), (11, "restarted", 0)] {
        s.apply(&Event::TurnStarted {
            session: 1,
            turn,
            line: "told with tokens".into(),
            at_us: T0 + 60,
        });
        s.apply(&Event::TurnEnded(TurnEndEvent {
            session: 1,
            turn,
            reason: reason.into(),
            total_us,
            retold: true,
            usage: (total_us > 0).then_some(turnscope::observe::TokenUsage {
                prompt_tokens: 31,
                completion_tokens: 9,
                ..Default::default()
            }),
            ..TurnEndEvent::default()
        }));
    }
    let told = s.transcript(1).iter().find(|t| t.id == 10).expect("shown");
    assert_eq!(told.usage.map(|u| u.completion_tokens), Some(9));
    assert_eq!(told.total_us, Some(5_000));
    assert_eq!(tally(&s), tallied + 31);
    assert_eq!(before(&s), counted, "not in the figures");
    let cut = s.transcript(1).iter().find(|t| t.id == 11).expect("shown");
    assert_eq!(cut.total_us, None);
}

fn frame(n: u64) -> Event {
    Event::Frame(FrameEvent {
        id: n,
        session: 1,
        turn: 1,
        kind: "data".into(),
        name: "TextPiece".into(),
        from: "model".into(),
        to: "sink".into(),
        direction: "down".into(),
        at_us: T0 + n,
        detail: String::new(),
        depth: 0,
    })
}

#[test]
fn frames_are_kept_up_to_the_bound_and_evictions_counted() {
    let mut s = ConsoleState::default();
    for n in 0..(FRAMES_KEPT as u64 + 25) {
        s.apply(&frame(n));
    }
    assert_eq!(s.frames().len(), FRAMES_KEPT);
    assert_eq!(s.frames_evicted(), 25);
    assert_eq!(s.frames_seen, FRAMES_KEPT as u64 + 25);
    assert_eq!(s.frames().front().unwrap().frame().id, 25);
    assert_eq!(s.events_seen, FRAMES_KEPT as u64 + 25);
}

#[test]
fn closed_sessions_beyond_the_bound_are_forgotten() {
    let mut s = ConsoleState::default();
    let n = CLOSED_KEPT as u64 + 3;
    for number in 1..=n {
        for closed in [None, Some("bye".to_string())] {
            s.apply(&Event::Session(SessionEvent {
                session: number,
                handle_prefix: "abcdefgh".into(),
                opener: SessionOpener::Api,
                closed,
                // A second apart: not closed together (those are listed by number).
                at_us: T0 + number * 1_000_000,
                restored: false,
                began_us: None,
                taken_from: None,
                greeting: None,
            }));
        }
    }
    assert_eq!(s.session_rows().len(), CLOSED_KEPT);
    assert!(s.session(1).is_none(), "the oldest closed one went first");
    assert_eq!(s.session_rows()[0].number, n, "latest closed first");
}

#[test]
fn a_snapshot_replaces_event_rows_and_marks_vanished_ones_closed() {
    let mut s = fixture_state();
    s.now_us = T0 + 20_000_000;
    let row = SessionRow {
        number: 1,
        handle_prefix: "1a2b3c4d".into(),
        opener: SessionOpener::Console,
        mine: true,
        turns: 2,
        activity: Activity::Idle,
        opened_us: T0,
        began_us: None,
        age_s: 20,
        idle_left_s: Some(280),
        taken_from: None,
        greeting: crate::state::Greeting::None,
    };
    s.sync_sessions(vec![row.clone()]);
    assert_eq!(s.session(1), Some(&row));
    assert_eq!(
        s.session(2).unwrap().activity,
        Activity::Closed("gone".into())
    );
    assert_eq!(s.session(2).unwrap().age_s, 19);
}

#[test]
fn tools_explain_renames_collisions_and_refused_schemas() {
    let mut s = ConsoleState::default();
    s.set_tools(&fixture::tools());
    let by_name = |name: &str, source: &str| {
        s.tools
            .iter()
            .find(|t| t.name == name && t.source == source)
            .unwrap()
            .clone()
    };
    let fs = by_name("fs/read file", "mcp:files");
    assert!(fs.notes[0].contains("`fs_read_file`"), "{:?}", fs.notes);
    let params = fs.openai.expect("converted");
    assert!(
        params.contains("A path under the project.") && !params.contains("$ref"),
        "{params}"
    );
    assert!(fs.schema.contains("\"$ref\""));
    let fetch = by_name("fetch", "mcp:web");
    assert!(fetch.openai.unwrap_err().contains("another document"));
    let late_echo = by_name("echo", "mcp:files");
    assert!(
        late_echo.notes[0].contains("collision"),
        "{:?}",
        late_echo.notes
    );
    assert!(by_name("echo", "builtin").notes.is_empty());
}

#[test]
fn replay_rejects_files_with_no_events_and_names_the_first_bad_line() {
    let theme = crate::theme::Theme::default;
    let e = crate::run::replay::console_of("", "empty.jsonl", theme())
        .err()
        .unwrap();
    assert!(
        e.to_string()
            .contains("empty.jsonl: the file holds no events"),
        "{e}"
    );
    let e = crate::run::replay::console_of("{\"type\":\"nope\"}\n", "bad.jsonl", theme())
        .err()
        .unwrap();
    assert!(e.to_string().contains("line 1"), "{e}");
    let ok = crate::run::replay::console_of(
        &(serde_json::to_string(&fixture::events()[0]).unwrap() + "\n"),
        "one.jsonl",
        theme(),
    )
    .unwrap();
    assert!(ok.read_only);
    assert_eq!(ok.selected, Some(1));
}

/// The live feed over a real app: the person's session is opened and selected, a chat on it
/// shows in the transcript from the session's turns, and an API session appears.
#[tokio::test]
async fn live_feed_shows_sessions_and_turns_of_a_running_app() {
    let mut config = Config::default();
    config.server.port = 0;
    config.model.pace = 0.0;
    let app = App::start(&config, Bus::default())
        .await
        .expect("app starts");
    let (mut console, mut feed) =
        crate::run::live::attach(&app, crate::theme::Theme::default()).await;
    let own = console.own.expect("own session");
    assert_eq!(console.selected, Some(own));
    assert!(console.state.tools.iter().any(|t| t.name == "clock"));

    let other = app
        .sessions
        .open(SessionOpener::Api)
        .await
        .expect("second session");
    let session = app.sessions.by_number(own).expect("own is open");
    let reply = app
        .sessions
        .chat_on(&session, "hello console", None, &CancellationToken::new())
        .await
        .expect("chat");
    assert!(!reply.reply.is_empty());
    // Fold every event published so far, then take a snapshot.
    let mut folded = 0;
    while let Ok(Some(event)) = tokio::time::timeout(Duration::from_millis(200), feed.next()).await
    {
        folded += feed.fold(&mut console.state, &event);
    }
    assert!(folded > 10, "frames and turn events arrived: {folded}");
    feed.refresh(&mut console.state, console.selected, console.own);
    console.settle();
    let rows = console.state.session_rows();
    assert_eq!(rows.len(), 2);
    assert!(rows[0].mine && rows[0].turns == 1 && rows[0].activity == Activity::Idle);
    assert_eq!(rows[1].opener, SessionOpener::Api);
    assert_eq!(rows[1].number, other.number);
    let turns = console.state.transcript(own);
    assert_eq!(turns.len(), 1);
    assert_eq!(turns[0].line, "hello console");
    assert_eq!(turns[0].reply.trim(), reply.reply);
    assert_eq!(turns[0].end.as_deref(), Some("completed"));
    assert_eq!(console.state.events_missed, 0);
    app.shutdown().await;
}

#[test]
fn frame_times_are_fixed_width_and_count_from_the_session() {
    use crate::state::fixed_offset;
    assert_eq!(fixed_offset(4_060_000), "   4.060s");
    assert_eq!(fixed_offset(118_778_000), " 118.778s");
    assert_eq!(fixed_offset(9_999_999_000), "9999.999s");
    assert_eq!(fixed_offset(10_000_000_000), "  166m40s");
    assert_eq!(fixed_offset(10_000_000_000).chars().count(), 9);
    let s = fixture_state();
    // Session 2 opened one second after the first event.
    assert_eq!(
        s.session_relative(2, T0 + 5 * 1_000_000),
        "   4.000s",
        "relative to #2's opening, not the console's first event"
    );
    // A frame stamped just before its session's opening counts from the opening too.
    assert_eq!(
        s.session_relative(2, T0 + 500_000),
        "   0.000s",
        "not from the console's first event"
    );
}

#[test]
fn a_closed_session_drops_its_stale_live_snapshot() {
    let mut s = fixture_state();
    // The last snapshot caught turn 1 of #2 streaming, cut short.
    let mut stale = s.transcript(2).to_vec();
    stale[0].reply = "Once".into();
    stale[0].end = None;
    s.sync_turns(2, stale);
    assert_eq!(s.transcript(2)[0].end, None);
    s.apply(&Event::Session(SessionEvent {
        session: 2,
        handle_prefix: "2a2b3c4d".into(),
        opener: SessionOpener::Mcp("claude-code".into()),
        closed: Some("ended by the bot".into()),
        at_us: T0 + 9 * 1_000_000,
        restored: false,
        began_us: None,
        taken_from: None,
        greeting: None,
    }));
    let turn = &s.transcript(2)[0];
    assert_eq!(turn.reply, "Once upon a time", "the event-built reply wins");
    assert_eq!(turn.end.as_deref(), Some("session ended"));
}

#[test]
fn failures_are_journaled_with_time_and_session() {
    let s = fixture_state();
    let j = &s.journal;
    assert_eq!(j.errors, 2, "the refused starts");
    assert!(j.warnings >= 2, "a failed tool source and a warn log line");
    let refused = j
        .entries()
        .iter()
        .find(|e| e.source == "start refused")
        .expect("the refused start is listed");
    assert!(refused.message.contains("sessions are in use"));
    assert_eq!(
        refused.repeats, 2,
        "a repeated refusal is one entry, counted"
    );
    assert_ne!(refused.at_us, 0);
}

#[test]
fn the_replica_and_its_draining_reach_the_header_from_events() {
    use turnscope::observe::ReplicaEvent;
    let mut s = ConsoleState::default();
    let replica = |state: &'static str| {
        Event::Replica(ReplicaEvent {
            id: "r2".into(),
            tag: "8e6c".into(),
            state: state.into(),
            at_us: T0,
            open_sessions: None,
            started_us: None,
            handle_seconds: None,
            console_holds: None,
        })
    };
    s.apply(&replica("serving"));
    assert_eq!(s.header.replica, Some(("r2".into(), "serving".into())));
    s.apply(&replica("draining"));
    assert_eq!(s.header.replica, Some(("r2".into(), "draining".into())));
}

#[test]
fn a_turn_cut_by_the_token_limit_shows_length_with_its_tokens_and_reasoning() {
    use turnscope::observe::{ModelResponseInfo, TokenUsage, TurnEndEvent};
    let mut s = ConsoleState::default();
    s.apply(&Event::TurnStarted {
        session: 3,
        turn: 1,
        line: "tell me a story".into(),
        at_us: T0,
    });
    for (prompt, completion, reasoning) in [(30, 5, 12), (40, 64, 0)] {
        s.apply(&Event::ModelRequest {
            session: 3,
            turn: 1,
            first_piece_us: Some(1_000),
            total_us: 9_000,
            error: None,
            at_us: T0,
            response: ModelResponseInfo {
                finish_reason: Some("length".into()),
                usage: Some(TokenUsage {
                    prompt_tokens: prompt,
                    completion_tokens: completion,
                    ..TokenUsage::default()
                }),
                reasoning_bytes: reasoning,
                ..ModelResponseInfo::default()
            },
            request: None,
            answer: None,
        });
    }
    s.apply(&Event::TurnEnded(TurnEndEvent {
        session: 3,
        turn: 1,
        reason: "length".into(),
        reply_bytes: 20,
        rounds: 1,
        tool_calls: 1,
        first_piece_us: Some(1_000),
        total_us: 20_000,
        config_version: Some(3),
        ..TurnEndEvent::default()
    }));
    let t = &s.transcript(3)[0];
    assert_eq!(t.end.as_deref(), Some("length"));
    let u = t.usage.expect("tokens summed over the turn's requests");
    assert_eq!((u.prompt_tokens, u.completion_tokens), (70, 69));
    assert_eq!(t.reasoning_bytes, 12);
    assert_eq!(t.config_version, Some(3));
}

#[test]
fn a_cancelled_call_is_noted_as_the_clients_choice_not_an_error() {
    let mut s = fixture_state();
    let errors = s.journal.errors;
    s.apply(&Event::CallCancelled {
        session: 2,
        client: "claude-code".into(),
        at_us: T0 + 9_000_000,
    });
    assert_eq!(s.journal.errors, errors, "a cancel is not an error");
    let last = s.journal.entries().back().unwrap();
    assert_eq!(last.source, "mcp client claude-code");
    assert!(
        last.message
            .starts_with("cancelled its chat call; the turn runs on")
    );
    assert_eq!(s.client_gone(2), None, "the client still holds the session");
}

#[test]
fn a_task_read_back_from_an_events_file_folds_as_it_did_live() {
    use crate::tests::fixture::{console, task_events};
    let text: String = task_events()
        .iter()
        .map(|e| serde_json::to_string(e).unwrap() + "\n")
        .collect();
    let (read, bad) = turnscope::observe::recorder::read_events(&text);
    assert!(bad.is_empty(), "{bad:?}");
    let (mut live, mut replayed) = (console(), console());
    for e in task_events() {
        live.state.apply(&e);
    }
    for e in &read {
        replayed.state.apply(e);
    }
    let view = replayed
        .state
        .tasks
        .of_turn(4, 1)
        .expect("the task is back");
    assert_eq!(Some(view), live.state.tasks.of_turn(4, 1));
    assert_eq!(view.polls, 4);
    assert_eq!(view.collection_gap_us(), Some(500_000));
    assert_eq!(
        replayed
            .state
            .timelines
            .get(4, 1)
            .and_then(|t| t.task.clone()),
        live.state.timelines.get(4, 1).and_then(|t| t.task.clone())
    );
}

/// An attached bot's `tools/list` is what its MCP clients see: no OpenAI bridge of ours offers
/// it, so what strict mode refuses is said with no pointer to a strict version that nobody
/// serves, and not marked; the bot's own tools keep the pointer (the bridge serves the
/// mended one).
#[test]
fn an_attached_bots_tools_are_not_said_to_have_a_strict_version_served() {
    let spec = turnscope::tools::ToolSpec {
        name: "start".into(),
        description: "Open a conversation".into(),
        input_schema: serde_json::json!({"type": "object", "properties": {}}),
        source: "the attached bot (tools/list)".into(),
    };
    let mut attached = ConsoleState::default();
    attached.set_attached_tools(std::slice::from_ref(&spec));
    let tool = &attached.tools[0];
    assert_eq!(
        tool.portability,
        ["OpenAI strict: refused as sent (1 object not closed)"]
    );
    // Called over MCP only here, which takes it as it is: not marked as refused (tour T: a
    // working `start` looked broken), the finding said in its detail.
    assert!(!tool.unserved && tool.over_mcp);
    let mut own = ConsoleState::default();
    own.set_tools(&[spec]);
    let tool = &own.tools[0];
    assert_eq!(
        tool.portability,
        [
            "OpenAI strict: refused as sent (1 object not closed); GET /v1/tools?strict=true serves a strict version"
        ]
    );
    assert!(!tool.unserved);
}

/// Attached to a turnscope, the tool sets on its stream (what its model is offered) are listed
/// after the target's `tools/list`, marked as the watched bot's own: the latest set replaces
/// the one before, and their form is refused with where to call them. A console that runs its
/// bot lists its registry's tools, whatever tool sets it sees.
#[test]
fn a_watched_bots_tool_set_is_listed_after_the_targets_tools_and_not_called_from_here() {
    use crate::state::{Header, Source};
    use turnscope::observe::wire::ToolSetEvent;
    let set = |names: &[&str]| {
        Event::ToolSet(ToolSetEvent {
            id: names.join("-"),
            tools: names
                .iter()
                .map(|n| {
                    serde_json::json!({"type": "function", "function": {
                        "name": n, "description": format!("{n} it"),
                        "parameters": {"type": "object", "properties": {}}}})
                })
                .collect(),
            at_us: T0,
        })
    };
    let start = turnscope::tools::ToolSpec {
        name: "start".into(),
        description: String::new(),
        input_schema: serde_json::json!({"type": "object", "properties": {}}),
        source: "the attached bot (tools/list)".into(),
    };
    let mut attached = ConsoleState::new(Header {
        source: Source::Attached {
            target: "http://127.0.0.1:7870/mcp".into(),
            view: Default::default(),
        },
        ..Header::default()
    });
    attached.set_attached_tools(std::slice::from_ref(&start));
    attached.apply(&set(&["clock", "echo"]));
    attached.apply(&set(&["clock"]));
    let listed: Vec<(&str, bool)> = attached
        .tools
        .iter()
        .map(|t| (t.name.as_str(), t.elsewhere))
        .collect();
    assert_eq!(listed, [("start", false), ("clock", true)]);
    assert_eq!(attached.tools[1].description, "clock it");
    // Its strict version is the watched server's to serve, while that server's OpenAI bridge
    // runs (which a viewer cannot see): said so, not marked as served nowhere.
    let clock = &attached.tools[1];
    assert_eq!(
        clock.portability,
        [
            "OpenAI strict: refused as sent (1 object not closed); the watched server's GET \
             /v1/tools?strict=true serves a strict version while its OpenAI bridge runs"
        ]
    );
    assert!(!clock.unserved);

    let mut c = crate::view::console::Console::new(attached, crate::theme::Theme::default(), false);
    c.tools.nav.cursor = 1;
    c.open_form(None);
    assert!(
        matches!(c.tools.hand.mode, crate::view::hand_calls::Mode::Detail),
        "no form for a tool that runs elsewhere"
    );
    let notice = c.notice.clone().expect("said why");
    assert!(
        notice
            .text
            .contains("`clock` is the watched bot's own tool"),
        "{notice:?}"
    );

    let mut own = ConsoleState::default();
    own.set_tools(std::slice::from_ref(&start));
    own.apply(&set(&["clock"]));
    assert_eq!(own.tools.len(), 1, "a running bot's list is its registry's");
}

/// A conversation that closed here (another replica went on with it) and opened here again
/// from the store is one row, not one per take-over.
#[test]
fn a_conversation_opened_again_is_one_row() {
    let mut s = ConsoleState::default();
    let event = |session: u64, closed: Option<&str>, restored: bool| {
        Event::Session(SessionEvent {
            session,
            handle_prefix: "e1d8c0a4".into(),
            opener: SessionOpener::Mcp("mcp".into()),
            closed: closed.map(str::to_string),
            at_us: T0 + session,
            restored,
            began_us: None,
            taken_from: None,
            greeting: None,
        })
    };
    s.apply(&event(12, None, false));
    s.apply(&event(12, Some("continued on another replica"), false));
    s.apply(&event(13, None, true));
    s.apply(&event(13, Some("continued on another replica"), false));
    s.apply(&event(14, None, true));
    let rows: Vec<u64> = s.session_rows().iter().map(|r| r.number).collect();
    assert_eq!(rows, [14]);
}

/// A pipecat worker whisker's feed showed is labelled as whisker's, its number first to be
/// seen, not as an MCP client named `pipecat …` (it read `mcp: pipecat PipelineTask#0`, cut to
/// `mcp: pipecat Pi…` for every worker); an MCP client of that name keeps its label.
#[test]
fn a_whisker_worker_is_labelled_as_whiskers_not_as_an_mcp_client() {
    let mut s = ConsoleState::default();
    let opened = |session: u64, handle_prefix: &str, name: &str| {
        Event::Session(SessionEvent {
            session,
            handle_prefix: handle_prefix.into(),
            opener: SessionOpener::Mcp(name.into()),
            closed: None,
            at_us: T0 + session,
            restored: false,
            began_us: None,
            taken_from: None,
            greeting: None,
        })
    };
    s.apply(&opened(1, "", "pipecat PipelineTask#0"));
    s.apply(&opened(2, "e1d8c0a4", "pipecat client"));
    let labels: Vec<String> = s.session_rows().iter().map(|r| r.opener_label()).collect();
    assert_eq!(labels, ["whisker: task#0", "mcp: pipecat client"]);
}

/// A watched server's sessions are counted down from their last activity, at least; its own
/// console's are not (they do not idle out while that console runs: tour L saw `≥0s` on
/// one open for twelve minutes).
#[test]
fn a_watched_servers_console_session_has_no_time_left() {
    let mut s = ConsoleState::default();
    s.header.watched_handle_seconds = Some(300);
    s.header.watched_console_holds = true;
    for (session, opener) in [
        (1, SessionOpener::Console),
        (2, SessionOpener::Mcp("claude-code".into())),
    ] {
        s.apply(&opened(session, opener));
    }
    s.now_us = T0 + 60 * 1_000_000;
    s.age_rows();
    assert_eq!(s.session(1).unwrap().idle_left_s, None);
    assert_eq!(s.session(2).unwrap().idle_left_s, Some(240));
    // A server without a console (headless, one that reopened such a session from its
    // store) holds none: its console-opened sessions idle out as the others do.
    s.header.watched_console_holds = false;
    s.age_rows();
    assert_eq!(s.session(1).unwrap().idle_left_s, Some(240));
}

/// A transcript built from events (an attached console, a replay) keeps its latest
/// [`TURNS_KEPT`] turns and counts the earlier ones, as a live snapshot's are counted (tour L:
/// the first 50 of 250 vanished without a word), and so are those before it began watching.
#[test]
fn turns_beyond_those_kept_from_events_are_counted() {
    use crate::state::TURNS_KEPT;
    let mut s = ConsoleState::default();
    s.apply(&opened(2, SessionOpener::Mcp("mcp".into())));
    let start = |s: &mut ConsoleState, turn: u64| {
        s.apply(&Event::TurnStarted {
            session: 2,
            turn,
            line: format!("line {turn}"),
            at_us: T0 + turn,
        })
    };
    // Watching began at turn 5.
    start(&mut s, 5);
    assert_eq!(s.transcript_unshown(2), 4);
    for turn in 6..=(TURNS_KEPT as u64 + 54) {
        start(&mut s, turn);
    }
    assert_eq!(s.transcript(2).len(), TURNS_KEPT);
    assert_eq!(s.transcript_unshown(2), 54);
}

/// Session `session` opened by `opener` at [`T0`], its handle's prefix its number.
fn opened(session: u64, opener: SessionOpener) -> Event {
    Event::Session(SessionEvent {
        session,
        handle_prefix: format!("{session:08}"),
        opener,
        closed: None,
        at_us: T0,
        restored: false,
        began_us: None,
        taken_from: None,
        greeting: None,
    })
}

/// A session reopened from the store counts its earlier turns' tokens (from their records:
/// their requests ran in an earlier process) once, beside the turns run since (tour N: the
/// row counted only the turns since the reopen).
#[test]
fn a_reopened_sessions_earlier_turns_count_in_its_tokens_once() {
    use crate::state::TurnView;
    use turnscope::observe::TokenUsage;
    let mut s = fixture_state();
    let turn = |id: u64, prompt: u64| TurnView {
        id,
        end: Some("completed".into()),
        usage: Some(TokenUsage {
            prompt_tokens: prompt,
            completion_tokens: 1,
            ..Default::default()
        }),
        ..TurnView::default()
    };
    let turns = [turn(1, 10), turn(2, 20), turn(3, 40)];
    let before = s.wire.session_tokens(9).map_or(0, |u| u.prompt_tokens);
    s.wire.tally_restored(9, 2, &turns);
    s.wire.tally_restored(9, 2, &turns);
    let after = s.wire.session_tokens(9).map_or(0, |u| u.prompt_tokens);
    assert_eq!(after - before, 30, "turns 1 and 2, once; turn 3 ran here");
}

/// The watched server's refusal of this console's probe (a kept handle reopened) is news, not
/// an error, whether its line comes after the console knew it was expected or before (tour F3).
#[test]
fn a_refusal_the_console_expected_is_not_counted_as_an_error() {
    let refused = |at_us: u64| turnscope::observe::Event::Served {
        route: "mcp tools/call chat".into(),
        duration_us: 1_000,
        ok: false,
        error: Some("handle: no session has this handle".into()),
        session: None,
        at_us,
        probe: false,
    };
    // Expected first, the server's line after.
    let mut s = ConsoleState::default();
    s.expect_refusal(
        "chat",
        "handle: no session has this handle",
        1_000_000,
        1_100_000,
    );
    s.apply(&refused(1_050_000));
    assert_eq!(s.journal.errors, 0);
    assert_eq!(s.journal.entries().len(), 1, "still in the Log");
    // Only once: another client's refusal like it afterwards is an error.
    s.apply(&refused(1_060_000));
    assert_eq!(s.journal.errors, 1);
    // The server's line first, the expectation after.
    let mut s = ConsoleState::default();
    s.apply(&refused(1_050_000));
    assert_eq!(s.journal.errors, 1);
    s.expect_refusal(
        "chat",
        "handle: no session has this handle",
        1_000_000,
        1_100_000,
    );
    assert_eq!(s.journal.errors, 0);
}

/// A refusal its client marked as a probe (another console reopening a handle it kept) is
/// news in every console watching, not an error, and says what it was.
#[test]
fn a_refused_probe_is_news_in_every_console() {
    let refused = |probe: bool| turnscope::observe::Event::Served {
        route: "mcp tools/call chat".into(),
        duration_us: 1_000,
        ok: false,
        error: Some("handle: no session has this handle".into()),
        session: None,
        at_us: 1_050_000,
        probe,
    };
    let mut s = ConsoleState::default();
    s.apply(&refused(true));
    assert_eq!(s.journal.errors, 0);
    let entries = s.journal.entries();
    assert_eq!(entries.len(), 1, "still in the Log");
    assert!(
        entries[0].message.contains("probe of a handle it kept"),
        "{:?}",
        entries[0].message
    );
    // The same refusal unmarked is an error.
    s.apply(&refused(false));
    assert_eq!(s.journal.errors, 1);
}

/// The header says what runs: a reload that points `[model]` at another server (and gives it
/// parameters) changes the model, its short name and its parameters in the header, and a
/// reload back to the embedded model changes them back (tour U #3: the header kept the model
/// the console started with).
#[tokio::test]
async fn the_header_follows_a_reload_of_the_model() {
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    async fn header_after(
        app: &App,
        console: &mut crate::view::console::Console,
        feed: &mut crate::run::feed::LiveFeed,
        config: Config,
    ) -> String {
        let reload = app.reloader().apply(config).await;
        assert_eq!(&*reload.outcome, "applied", "{}", reload.summary());
        while let Ok(Some(event)) =
            tokio::time::timeout(Duration::from_millis(200), feed.next()).await
        {
            feed.fold(&mut console.state, &event);
        }
        console.before_draw();
        let mut terminal = Terminal::new(TestBackend::new(120, 34)).expect("test terminal");
        terminal
            .draw(|f| crate::draw::draw(f, console))
            .expect("draw");
        let screen = terminal.backend().to_string();
        screen.lines().take(2).collect::<Vec<_>>().join("\n")
    }

    let mut config = Config::default();
    config.server.port = 0;
    config.model.pace = 0.0;
    let app = App::start(&config, Bus::default())
        .await
        .expect("app starts");
    let (mut console, mut feed) =
        crate::run::live::attach(&app, crate::theme::Theme::default()).await;
    assert_eq!(
        console.state.header.model_short.as_deref(),
        Some("scripted")
    );

    let mut remote = config.clone();
    remote.model.url = Some("http://127.0.0.1:9/v1".into());
    remote.model.name = Some("llama-tour".into());
    remote.model.max_tokens = Some(400);
    let header = header_after(&app, &mut console, &mut feed, remote).await;
    assert!(header.contains("llama-tour"), "{header}");
    assert!(header.contains("max_tokens=400"), "{header}");
    assert!(!header.contains("scripted"), "{header}");

    let header = header_after(&app, &mut console, &mut feed, config).await;
    assert!(header.contains("scripted"), "{header}");
    assert!(!header.contains("llama-tour"), "{header}");
    assert!(!header.contains("max_tokens"), "{header}");
    app.shutdown().await;
}

/// An attached console's recording, as `turnscope replay` folds it: the watched server tells
/// the person's session as any MCP client's (`mcp: turnscope attach`), and the console's own
/// `own_sessions` line makes it theirs, matched by number and handle. A file recorded before
/// that line existed (the same lines without it) still replays, as it did: a client's session.
#[test]
fn an_attached_consoles_own_sessions_mark_the_persons_and_a_file_without_them_replays() {
    let old = [
        r#"{"type":"session","session":3,"handle_prefix":"8e99284d","opener":{"mcp":"turnscope attach"},"closed":null,"at_us":1796686852079096}"#,
        r#"{"type":"session","session":4,"handle_prefix":"b128d466","opener":{"mcp":"claude-code"},"closed":null,"at_us":1796686858292308}"#,
        r#"{"type":"turn_started","session":3,"turn":1,"line":"remember the word teal","at_us":1796686852121627}"#,
    ];
    let fold = |lines: &[&str]| {
        let mut s = ConsoleState::default();
        for line in lines {
            s.apply(&serde_json::from_str::<Event>(line).expect("a recorded line reads back"));
        }
        s
    };
    let mine = |s: &ConsoleState, n: u64| s.session(n).expect("its row").mine;
    let before = fold(&old);
    assert!(!mine(&before, 3) && !mine(&before, 4));
    assert_eq!(before.transcript(3)[0].line, "remember the word teal");

    let own = r#"{"type":"own_sessions","sessions":[{"session":3,"handle_prefix":"8e99284d"}],"at_us":1796686852116552}"#;
    // Told after the session opened (the watched server's stream was first) or before it.
    let after = fold(&[old[0], old[1], own, old[2]]);
    assert!(mine(&after, 3) && !mine(&after, 4));
    let first = fold(&[own, old[0], old[1], old[2]]);
    assert!(mine(&first, 3) && !mine(&first, 4));
    assert_eq!(after.session(3).unwrap().opener_label(), "attach (you)");
    // A number told with another handle is another session (the target restarted since).
    let other = own.replace("8e99284d", "00000000");
    assert!(!mine(&fold(&[old[0], &other]), 3));
    // Let go of: no longer the person's while open.
    let none = r#"{"type":"own_sessions","sessions":[],"at_us":1796686860000000}"#;
    assert!(!mine(&fold(&[old[0], own, none]), 3));
}
