//! The console's bounds over a long session: every record under its share of the byte budget
//! (the oldest dropped and counted, the panes saying so), per-session figures forgotten with
//! their session or bounded when no session was ever seen, and drawing that costs what is on
//! screen (each exchange and frame matched once, not once per frame drawn).

use ratatui::Terminal;
use ratatui::backend::TestBackend;

use super::long;
use crate::state::budget::{Budget, Part};
use crate::state::{CLOSED_KEPT, ConsoleState, Header, SESSIONS_TRACKED};
use crate::theme::Theme;
use crate::view::console::Console;
use crate::view::ids::PaneId;
use turnscope::observe::{Event, ModelResponseInfo, SessionEvent, SessionOpener, TokenUsage};

fn draw(c: &Console, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| crate::draw::draw(f, c)).unwrap();
    let buffer = t.backend().buffer();
    let mut text = String::new();
    for y in 0..buffer.area.height {
        for x in 0..buffer.area.width {
            text.push_str(buffer[(x, y)].symbol());
        }
        text.push('\n');
    }
    text
}

/// 300 turns of 300-word replies with progress, within a 2 MiB budget: each part keeps at most
/// its share, the oldest went first (the newest turn, exchange and request are all kept),
/// and the MCP pane says how many it dropped.
#[test]
fn a_long_session_stays_within_its_budget_and_the_panes_say_what_was_dropped() {
    let budget = Budget::mib(2);
    let mut s = ConsoleState::with_budget(Header::default(), budget);
    for e in long::session(7, 300, 300) {
        s.apply(&e);
    }
    let mut total = 0;
    for (part, bytes, dropped) in s.budget_use() {
        assert!(
            bytes <= budget.share(part),
            "{part:?} keeps {bytes} bytes over its share {}",
            budget.share(part)
        );
        total += bytes;
        if matches!(part, Part::Exchanges | Part::Frames | Part::Transcripts) {
            assert!(dropped > 0, "{part:?} dropped nothing: {bytes} bytes kept");
        }
    }
    assert!(total <= budget.total());
    assert_eq!(s.transcript(7).last().map(|t| t.id), Some(300));
    assert!(s.transcript(7).len() < 300);
    assert!(s.transcript_dropped(7) > 0);
    assert_eq!(
        s.wire.calls_of(7, 300).len(),
        1,
        "the newest request is kept"
    );
    assert!(s.timelines.get(7, 300).is_some());
    let kept = s.wire.exchanges();
    assert!(kept.len() < 300 && kept.dropped() > 0);
    let newest = kept.items().back().unwrap().exchange();
    assert_eq!(newest.request.as_ref().unwrap().value()["id"], 300);
    let mut c = Console::new(s, Theme::default(), true);
    c.focus_pane(PaneId::Mcp);
    c.zoom = true;
    let screen = draw(&c, 160, 48);
    let dropped = kept_dropped_text(&c);
    assert!(screen.contains(&dropped), "{dropped:?} missing:\n{screen}");
    assert!(screen.contains(&format!("of {} exchanges", c.state.wire.exchanges().len())));
    // The transcript says its turns let go (it read as if they never were).
    c.selected = Some(7);
    let first: String = crate::draw::panes::transcript::lines(&c, 160)[0].to_string();
    let said = format!(
        "{} earlier turns of #7 let go, oldest first",
        c.state.transcript_dropped(7)
    );
    assert!(first.contains(&said), "{said:?} missing: {first}");
    // The live session's own turns shown instead (the selected session of a local console):
    // nothing of those was let go. It said "1 earlier turn let go" over the only turn (tour G).
    // Those begin after turn 1: the turns before them are said to be out of view.
    let shown = c.state.transcript(7).to_vec();
    let before = shown[0].id - 1;
    c.state.sync_turns(7, shown);
    let first: String = crate::draw::panes::transcript::lines(&c, 160)[0].to_string();
    assert!(!first.contains("let go"), "{first}");
    let said = format!("{before} earlier turns of #7 not shown");
    assert!(first.contains(&said), "{said:?} missing: {first}");
    let from_one = c.state.transcript(7).iter().map(|t| {
        let mut t = t.clone();
        t.id -= before;
        t
    });
    c.state.sync_turns(7, from_one.collect());
    let first: String = crate::draw::panes::transcript::lines(&c, 160)[0].to_string();
    assert!(!first.contains("not shown"), "{first}");
}

fn kept_dropped_text(c: &Console) -> String {
    format!(
        "{} older dropped (console.max_mib)",
        crate::text::count(c.state.wire.exchanges().dropped())
    )
}

/// The same session in the default budget: what 300 turns of 300 words leave fits in it
/// without dropping a single exchange, and a smaller budget set later drops the oldest.
#[test]
fn the_budget_can_shrink_and_the_oldest_go_first() {
    let mut s = ConsoleState::default();
    for e in long::session(1, 300, 300) {
        s.apply(&e);
    }
    assert_eq!(s.wire.exchanges().dropped(), 0);
    assert_eq!(s.wire.exchanges().len(), 300);
    s.set_budget(Budget::mib(1));
    for (part, bytes, _) in s.budget_use() {
        assert!(bytes <= Budget::mib(1).share(part), "{part:?}: {bytes}");
    }
    let first = s.wire.exchanges().items().front().unwrap().exchange();
    assert!(
        first.request.as_ref().unwrap().value()["id"]
            .as_u64()
            .unwrap()
            > 1
    );
}

fn usage(session: u64) -> Event {
    Event::ModelRequest {
        session,
        turn: 1,
        first_piece_us: None,
        total_us: 1,
        error: None,
        at_us: 0,
        response: ModelResponseInfo {
            usage: Some(TokenUsage {
                prompt_tokens: 5,
                completion_tokens: 1,
                ..TokenUsage::default()
            }),
            ..ModelResponseInfo::default()
        },
        request: None,
        answer: None,
    }
}

fn session_event(session: u64, closed: Option<&str>) -> Event {
    Event::Session(SessionEvent {
        session,
        handle_prefix: "0f1e2d3c".into(),
        opener: SessionOpener::Api,
        closed: closed.map(str::to_string),
        restored: false,
        began_us: None,
        taken_from: None,
        greeting: None,
        at_us: 1,
    })
}

/// A session's token tally goes with its row: once past `CLOSED_KEPT` closed sessions, the
/// oldest one's tally is forgotten too (the total stays).
#[test]
fn token_tallies_are_forgotten_with_their_session() {
    let mut s = ConsoleState::default();
    let n = CLOSED_KEPT as u64 + 10;
    for session in 1..=n {
        s.apply(&session_event(session, None));
        s.apply(&usage(session));
        s.apply(&session_event(session, Some("closed")));
    }
    assert!(s.session(1).is_none());
    assert_eq!(s.wire.session_tokens(1), None, "forgotten with its row");
    assert_eq!(s.wire.session_tokens(n).map(|u| u.prompt_tokens), Some(5));
    assert_eq!(s.wire.total.prompt_tokens, 5 * n);
    assert!(s.sessions_tracked() <= CLOSED_KEPT);
}

/// Events naming sessions never seen opening (a replay's, a console that missed events)
/// keep per-session figures for at most `SESSIONS_TRACKED` of them.
#[test]
fn figures_of_sessions_never_seen_opening_stay_bounded() {
    let mut s = ConsoleState::default();
    for session in 1..=(SESSIONS_TRACKED as u64 * 3) {
        s.apply(&Event::TurnStarted {
            session,
            turn: 1,
            line: "hi".into(),
            at_us: 1,
        });
        s.apply(&usage(session));
        s.apply(&Event::Progress {
            session,
            progress: 1,
            message: "so far".into(),
            pieces: 1,
            at_us: 2,
        });
    }
    assert!(
        s.sessions_tracked() <= SESSIONS_TRACKED,
        "{} sessions tracked",
        s.sessions_tracked()
    );
    assert_eq!(s.transcript(SESSIONS_TRACKED as u64 * 3).len(), 1);
}

/// Drawing the MCP pane over 1,000 exchanges tests each against the filters once, however
/// often it is drawn; a new exchange is tested alone; only a changed filter tests all again.
#[test]
fn the_mcp_pane_tests_each_exchange_once_however_often_it_is_drawn() {
    let mut s = ConsoleState::default();
    for e in long::session(3, 1000, 3) {
        s.apply(&e);
    }
    let mut c = Console::new(s, Theme::default(), true);
    c.focus_pane(PaneId::Mcp);
    assert_eq!(c.state.wire.exchanges().len(), 1000);
    for _ in 0..20 {
        draw(&c, 160, 48);
    }
    assert_eq!(c.mcp.tested(), 1000);
    for e in long::session(3, 1, 3).into_iter().skip(1) {
        c.state.apply(&e);
    }
    draw(&c, 160, 48);
    assert_eq!(c.mcp.tested(), 1000 + 1, "the new exchange alone");
    c.mcp.filter = crate::view::mcp::McpFilter::parse("777");
    let screen = draw(&c, 160, 48);
    assert_eq!(
        c.mcp.tested(),
        2001,
        "a new filter tests every kept exchange once"
    );
    assert!(screen.contains("1 of 1,000 exchanges"), "{screen}");
}

/// The Frames pane matches each frame once as it arrives, not every kept frame per draw.
#[test]
fn the_frames_pane_matches_each_frame_once_however_often_it_is_drawn() {
    let mut s = ConsoleState::default();
    for e in long::session(1, 3, 200) {
        s.apply(&e);
    }
    let kept = s.frames().len() as u64;
    let mut c = Console::new(s, Theme::default(), true);
    c.focus_pane(PaneId::Frames);
    c.frames.all = true;
    for _ in 0..20 {
        draw(&c, 160, 48);
    }
    assert_eq!(c.frames.matched(), kept);
}

/// A session whose frames all went to keep the bound says so in Frames (it said "no frames
/// of this session yet" of a session that had run 300 turns).
#[test]
fn a_session_whose_frames_were_all_dropped_says_so() {
    let mut s = ConsoleState::with_budget(Header::default(), Budget::mib(2));
    for e in long::session(7, 300, 300)
        .into_iter()
        .chain(long::session(8, 300, 300))
    {
        s.apply(&e);
    }
    assert!(s.frames_evicted() > 0);
    let mut c = Console::new(s, Theme::default(), true);
    c.selected = Some(7);
    c.focus_pane(PaneId::Frames);
    c.zoom = true;
    c.before_draw();
    let screen = draw(&c, 160, 48);
    let flat: String = screen.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("No frame of this session is among those kept"),
        "{screen}"
    );
    assert!(!flat.contains("yet"), "{screen}");
    // A session some of whose frames are kept: the pane's line says older ones went (the
    // list started mid-turn with no word of it; tour G).
    c.selected = Some(8);
    c.before_draw();
    let screen = draw(&c, 160, 48);
    let said = format!(
        "{} older dropped, all sessions",
        crate::text::count(c.state.frames_evicted())
    );
    assert!(screen.contains(&said), "{said:?} missing:\n{screen}");
    // Narrower, the pane's own state stays and the count gives way (at 140 columns, half
    // the screen, it had pushed "following" out).
    c.zoom = false;
    c.before_draw();
    let screen = draw(&c, 140, 40);
    assert!(screen.contains("· following"), "{screen}");
}
