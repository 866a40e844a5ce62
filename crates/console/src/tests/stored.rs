//! Sessions the store keeps that are not open here (a restart left them): listed as `stored`
//! after the open ones with their turns and last use, counted in the title when more are
//! stored than listed, their transcript and turn view opened from the turns the store gave,
//! a line typed into one refused with what to do, and a read of its turns that fails said in
//! its transcript (the store's error) and tried again when it is selected again.

use std::collections::HashSet;
use std::sync::Arc;

use insta::assert_snapshot;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use turnscope::observe::SessionOpener;
use turnscope::store::{
    Commit, HandleId, HandleKey, Head, SessionStore, StoreError, StoreStats, StoredTurn, now_ms,
};

use crate::run::stored::{STORED_NUMBER_BASE, StoredSessions, stored_number};
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
        activity: Activity::Stored {
            idle_s: 300,
            used_us: 0,
            errors: 3,
        },
        opened_us: 0,
        began_us: None,
        age_s: 3_600,
        idle_left_s: Some(86_100),
        taken_from: None,
        greeting: crate::state::Greeting::None,
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
        // Its errors as the store counts them (the Log that saw them went with its process).
        let row = text
            .lines()
            .find(|l| l.contains("5e5e5e5e") && l.contains("mcp: claude"))
            .unwrap();
        let words: Vec<&str> = row.split_whitespace().collect();
        let at = words.iter().position(|w| *w == "stored").unwrap();
        assert_eq!(words[at - 2..at], ["2", "3"], "turns, errors: {row}");
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

/// A memory store whose `turns` fails while `broken` is set, as a store file whose turn table
/// is damaged does.
struct BrokenTurns {
    inner: turnscope::store::memory::MemoryStore,
    broken: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl SessionStore for BrokenTurns {
    fn describe(&self) -> String {
        "sqlite:/tmp/broken.db".into()
    }
    fn durable(&self) -> bool {
        true
    }
    fn key(&self) -> HandleKey {
        self.inner.key()
    }
    async fn create(&self, head: &Head) -> Result<u64, StoreError> {
        self.inner.create(head).await
    }
    async fn head(&self, id: &HandleId) -> Result<Option<Head>, StoreError> {
        self.inner.head(id).await
    }
    async fn turns(&self, id: &HandleId, from: u64) -> Result<Vec<StoredTurn>, StoreError> {
        if self.broken.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(StoreError::unusable(
                "store: reading a session's turns from /tmp/broken.db failed: no such table: \
                 turns; the file is damaged. Move it aside",
            ));
        }
        self.inner.turns(id, from).await
    }
    async fn commit(&self, id: &HandleId, commit: &Commit) -> Result<u64, StoreError> {
        self.inner.commit(id, commit).await
    }
    async fn delete(&self, id: &HandleId) -> Result<bool, StoreError> {
        self.inner.delete(id).await
    }
    async fn expired(&self, before_ms: u64, limit: usize) -> Result<Vec<Head>, StoreError> {
        self.inner.expired(before_ms, limit).await
    }
    async fn list(&self, limit: usize) -> Result<Vec<Head>, StoreError> {
        self.inner.list(limit).await
    }
    async fn count(&self) -> Result<u64, StoreError> {
        self.inner.count().await
    }
    fn stats(&self) -> StoreStats {
        self.inner.stats()
    }
    async fn close(&self) {
        self.inner.close().await
    }
}

/// A stored head of an API client's session `id` (its prefix `prefix`) counting `turns` turns.
fn api_head(id: HandleId, prefix: &str, turns: u64) -> Head {
    Head {
        id,
        prefix: prefix.into(),
        bot: "bot".into(),
        opener: SessionOpener::Api,
        greeting: None,
        created_ms: now_ms(),
        last_used_ms: now_ms(),
        kept_alive_ms: 0,
        turns,
        messages: 0,
        forgotten: 0,
        history_from_turn: 1,
        in_flight: None,
        unread: None,
        errors: 0,
        version: 0,
    }
}

/// A console over a memory store holding `head`: the store, the console, its reader of the
/// store, and the stored session's number.
async fn over_store(
    head: Head,
) -> (
    Arc<turnscope::store::memory::MemoryStore>,
    Console,
    StoredSessions,
    u64,
) {
    let store = Arc::new(turnscope::store::memory::MemoryStore::new());
    store.create(&head).await.expect("created");
    let stored = StoredSessions::new(store.clone());
    (store, console(), stored, stored_number(&head.id))
}

/// Ticks the reader until `done` holds of the console (the reads run in tasks), at most 2 s;
/// the tick that brought it about must ask for a draw (before, the loop drew what the store
/// answered only at its once-a-second redraw: "Reading…" stayed up to a second).
async fn tick_until(
    c: &mut Console,
    stored: &mut StoredSessions,
    number: u64,
    done: impl Fn(&Console) -> bool,
) {
    for _ in 0..200 {
        let mut draw = stored.refresh(&mut c.state, &HashSet::new(), 86_400);
        if stored.holds(number) {
            draw |= stored.show_turns(&mut c.state, number);
        }
        if done(c) {
            assert!(
                draw,
                "the tick that laid the store's answer asked for no draw"
            );
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("the stored session's read did not end");
}

/// Before, a stored session whose turns the store failed to give said "Reading … from the
/// store…" for ever; now its transcript says the store's error and what to do, and selecting
/// it again reads it again.
#[tokio::test]
async fn a_stored_session_whose_turns_cannot_be_read_says_why_and_reads_again() {
    let store = Arc::new(BrokenTurns {
        inner: turnscope::store::memory::MemoryStore::new(),
        broken: true.into(),
    });
    let id = HandleId::from_bytes([7; 32]);
    let head = api_head(id, "0b0b0b0b", 0);
    let version = store.create(&head).await.expect("created");
    let turn = StoredTurn {
        record: turnscope::bot::TurnRecord {
            id: 1,
            line: "remember the word teapot".into(),
            reply: "I will remember: teapot.".into(),
            end: Some(turnscope::bot::TurnEnd::Completed),
            ..Default::default()
        },
        started_ms: now_ms(),
        first_message: 1,
        messages: Vec::new(),
    };
    let commit = Commit {
        expected: version,
        head: Head { turns: 1, ..head },
        append: vec![turn],
        drop_before: 0,
    };
    store.commit(&id, &commit).await.expect("committed");

    let mut c = console();
    let mut stored = StoredSessions::new(store.clone());
    let number = stored_number(&id);
    c.selected = Some(number);
    let said = |c: &Console, what: &str| {
        crate::draw::panes::transcript::lines(c, 78)
            .iter()
            .map(|l| l.to_string())
            .collect::<Vec<_>>()
            .join("\n")
            .contains(what)
    };
    tick_until(&mut c, &mut stored, number, |c| {
        c.state.stored_read_failure(number).is_some()
    })
    .await;
    let text = screen(&mut c, 80, 24);
    assert!(!said(&c, "Reading this stored session"), "{text}");
    assert!(
        said(&c, "no such table: turns"),
        "the store's error: {text}"
    );
    assert!(said(&c, "this one again to read it again"), "{text}");
    assert_snapshot!(text);

    // Still failed on the next ticks (not read again and again), then selected again: read.
    stored.show_turns(&mut c.state, number);
    assert!(c.state.stored_read_failure(number).is_some());
    store
        .broken
        .store(false, std::sync::atomic::Ordering::Relaxed);
    stored.unshow();
    tick_until(&mut c, &mut stored, number, |c| {
        !c.state.transcript(number).is_empty()
    })
    .await;
    assert!(c.state.stored_read_failure(number).is_none());
    assert!(said(&c, "I will remember: teapot."));
}

/// A stored session deleted from the store after it was listed says so rather than reading.
#[tokio::test]
async fn a_stored_session_gone_from_the_store_says_so() {
    let id = HandleId::from_bytes([9; 32]);
    let (store, mut c, mut stored, number) = over_store(api_head(id, "0c0c0c0c", 3)).await;
    for _ in 0..200 {
        stored.refresh(&mut c.state, &HashSet::new(), 86_400);
        if stored.holds(number) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    store.delete(&id).await.expect("deleted");
    c.selected = Some(number);
    tick_until(&mut c, &mut stored, number, |c| {
        c.state.stored_read_failure(number).is_some()
    })
    .await;
    let error = c.state.stored_read_failure(number).expect("failed");
    assert!(error.contains("no longer holds this session"), "{error}");
}

/// A stored session whose head counts turns its log no longer holds (a turn table emptied
/// or recreated) says so instead of "Reading…" for ever.
#[tokio::test]
async fn a_stored_session_whose_turn_log_is_empty_says_so() {
    let id = HandleId::from_bytes([5; 32]);
    let (_store, mut c, mut stored, number) = over_store(api_head(id, "0d0d0d0d", 2)).await;
    c.selected = Some(number);
    tick_until(&mut c, &mut stored, number, |c| {
        c.state.stored_read_failure(number).is_some()
    })
    .await;
    let error = c.state.stored_read_failure(number).expect("failed");
    assert!(error.contains("has 2 turns but gave none"), "{error}");
}

/// [`with_stored`] where the stored session is the person's own, from a console before a
/// restart (the console kept its handle).
fn with_stored_of_yours() -> Console {
    let mut c = with_stored();
    let mut row = c.state.session(STORED).expect("the stored row").clone();
    row.opener = SessionOpener::Console;
    row.mine = true;
    c.state.sync_stored(vec![row], 0);
    c
}

#[test]
fn a_line_into_the_persons_own_stored_session_goes_on_with_it() {
    let mut c = with_stored_of_yours();
    let text = screen(&mut c, 160, 48);
    assert!(text.contains("console (you)"), "{text}");
    c.focus_pane(PaneId::Input);
    c.input.insert_str("and the colour?");
    assert_eq!(
        c.send(),
        Some(crate::input::actions::Action::Chat {
            session: STORED,
            line: "and the colour?".into()
        }),
        "sent at once, not refused nor asked about: {:?}",
        c.notice
    );
}

#[test]
fn the_persons_new_session_points_to_their_stored_conversation() {
    let mut c = with_stored_of_yours();
    // The session the console opened for the person as it started again: no turns yet.
    c.own = Some(99);
    c.selected = Some(99);
    let text = screen(&mut c, 160, 48);
    assert!(
        text.contains("Your conversation 5e5e5e5e from before (2 turns) is stored"),
        "{text}"
    );
    // Someone else's stored session is not pointed to.
    let mut c = with_stored();
    c.own = Some(99);
    c.selected = Some(99);
    let text = screen(&mut c, 160, 48);
    assert!(!text.contains("from before"), "{text}");
}

/// Before, a conversation of the person's that the store had let go of (idle past
/// `handle_seconds`) vanished unsaid from a console started again; now their new session
/// says so, and what keeps conversations longer.
#[test]
fn the_persons_new_session_says_which_conversations_from_before_are_gone() {
    use crate::run::kept_handles::GoneHandle;
    use crate::run::live::gone_of_yours;
    let gone = |prefix: &str, expired| GoneHandle {
        prefix: prefix.into(),
        expired,
    };
    // The transcript's lines, wide enough that no sentence wraps.
    let said = |c: &Console| {
        crate::draw::panes::transcript::lines(c, 1000)
            .iter()
            .map(|l| l.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let mut c = console();
    c.own = Some(99);
    c.selected = Some(99);
    c.state.gone_of_yours = gone_of_yours(&[gone("657595cf", true)], 300);
    let text = said(&c);
    assert!(
        text.contains("Your conversation 657595cf from before can no longer be continued: a"),
        "{text}"
    );
    assert!(text.contains("ends after 300 s with no line"), "{text}");
    assert!(text.contains("--handle-seconds"), "{text}");
    assert!(!text.contains("deleted."), "{text}");
    c.state.gone_of_yours = gone_of_yours(
        &[
            gone("657595cf", false),
            gone("0c0c0c0c", true),
            gone("1d1d1d1d", false),
        ],
        300,
    );
    let text = said(&c);
    assert!(
        text.contains("Your conversation 657595cf from before is no longer in the store"),
        "{text}"
    );
    assert!(text.contains("or it was deleted."), "{text}");
    assert!(
        text.contains("2 older conversations of yours can no longer be continued either."),
        "{text}"
    );
}

/// A stored session idle past `handle_seconds` is not listed: no line can reopen it and the
/// next sweep deletes it (before, it stayed listed up to the sweep, 30 s, offered as a
/// conversation to go on with until a line failed). Nor is it counted as one not listed.
#[tokio::test]
async fn a_stored_session_idle_past_its_lifetime_is_not_listed() {
    let held = HandleId::from_bytes([3; 32]);
    let (store, mut c, mut stored, held_number) = over_store(api_head(held, "0e0e0e0e", 1)).await;
    let gone = HandleId::from_bytes([4; 32]);
    let idle_10_minutes = now_ms() - 600_000;
    let head = Head {
        last_used_ms: idle_10_minutes,
        ..api_head(gone, "0f0f0f0f", 2)
    };
    store.create(&head).await.expect("created");
    for _ in 0..200 {
        stored.refresh(&mut c.state, &HashSet::new(), 300);
        if stored.holds(held_number) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(stored.holds(held_number), "the held session is listed");
    assert!(
        !stored.holds(stored_number(&gone)),
        "the expired one is not"
    );
    assert_eq!(c.state.stored_counts(), (1, 0));

    // With a lifetime longer than its idleness, it is a conversation to go on with.
    let mut stored = StoredSessions::new(store.clone());
    for _ in 0..200 {
        stored.refresh(&mut c.state, &HashSet::new(), 3_600);
        if stored.holds(held_number) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(stored.holds(stored_number(&gone)));
    assert_eq!(c.state.stored_counts(), (2, 0));
}

/// "latest active first" puts stored sessions in the order of their last use, as their rows
/// say it (`stored 1m` before `stored 2m`): it sorted them by when they were created, so the
/// one used last could come last (tour: `stored 2m`, `stored 3m`, `stored 1m`).
#[tokio::test]
async fn stored_sessions_sort_by_their_last_use() {
    let now = now_ms();
    // Created a, b, c in that order; used last c (1 min ago), then a (2), then b (3).
    let head = |byte: u8, prefix: &str, created_ago_s: u64, used_ago_s: u64| Head {
        created_ms: now - created_ago_s * 1000,
        last_used_ms: now - used_ago_s * 1000,
        ..api_head(HandleId::from_bytes([byte; 32]), prefix, 1)
    };
    let (store, mut c, mut stored, a) = over_store(head(11, "0a0a0a0a", 600, 120)).await;
    store
        .create(&head(12, "0b0b0b0b", 500, 180))
        .await
        .expect("created");
    store
        .create(&head(13, "0c0c0c0c", 400, 60))
        .await
        .expect("created");
    for _ in 0..200 {
        stored.refresh(&mut c.state, &HashSet::new(), 3_600);
        if c.state.stored_counts().0 == 3 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(c.state.stored_counts().0, 3);
    assert!(stored.holds(a));
    c.focus_pane(PaneId::Sessions);
    c.sessions_list.sort = crate::view::sessions::SessionSort::Activity;
    let order: Vec<String> = c
        .listed_sessions()
        .iter()
        .filter(|r| r.is_stored())
        .map(|r| r.handle_prefix.clone())
        .collect();
    assert_eq!(order, ["0c0c0c0c", "0a0a0a0a", "0b0b0b0b"], "by last use");
    let text = screen(&mut c, 160, 48);
    let shown: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split("stored ").nth(1))
        .filter_map(|rest| rest.split_whitespace().next())
        .filter(|w| w.ends_with('m'))
        .collect();
    assert_eq!(shown, ["1m", "2m", "3m"], "{text}");
}

/// A session that closes (and whose close deleted it from the store) is not listed as stored
/// from a listing asked before it closed: it was shown twice, closed and stored, until the
/// next listing.
#[tokio::test]
async fn a_session_that_just_closed_is_not_listed_stored_from_an_older_listing() {
    let id = HandleId::from_bytes([7; 32]);
    let (store, mut c, mut stored, number) = over_store(api_head(id, "0e0e0e0e", 1)).await;
    let open: HashSet<HandleId> = [id].into();
    // A listing taken while it is open (it is left out of the rows then): the first refresh
    // makes rows from none, the next that makes rows made them from the store's listing.
    assert!(stored.refresh(&mut c.state, &open, 86_400));
    let mut came = false;
    for _ in 0..200 {
        if stored.refresh(&mut c.state, &open, 86_400) {
            came = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(came, "a listing came back");
    assert!(!stored.holds(number), "open: not a stored row");
    // It closes, deleted from the store; the rows are made again from that listing.
    store.delete(&id).await.expect("deleted");
    stored.refresh(&mut c.state, &HashSet::new(), 86_400);
    assert!(
        !stored.holds(number),
        "a session that just closed is not a stored row from the listing before"
    );
    assert!(!c.state.session_rows().iter().any(|r| r.number == number));
}

/// The selected stored conversation opened again by its client (a new number, a live row)
/// stays selected: the selection jumped to the person's own session before.
#[test]
fn a_selected_stored_session_stays_selected_when_it_opens_again() {
    let mut c = with_stored();
    assert_eq!(c.selected, Some(STORED));
    let mut open: Vec<SessionRow> = c
        .state
        .session_rows()
        .iter()
        .filter(|r| !r.is_stored() && !r.is_closed())
        .map(|r| (*r).clone())
        .collect();
    let reopened = SessionRow {
        number: 9,
        handle_prefix: "5e5e5e5e".into(),
        opener: SessionOpener::Mcp("claude-code".into()),
        mine: false,
        turns: 2,
        activity: Activity::Idle,
        opened_us: 0,
        began_us: None,
        age_s: 3_600,
        idle_left_s: Some(300),
        taken_from: None,
        greeting: crate::state::Greeting::Unknown,
    };
    open.push(reopened);
    c.state.sync_sessions(open);
    c.state.sync_stored(Vec::new(), 1_234);
    c.settle();
    assert_eq!(c.selected, Some(9), "the conversation stays selected");
}

/// A stored session whose server stopped mid-turn shows that turn, cut off, and counts it, as
/// `turnscope sessions list` does (it showed only the turns before, until a line reopened it).
#[tokio::test]
async fn a_stored_session_cut_off_mid_turn_shows_the_turn_in_flight() {
    let id = HandleId::from_bytes([6; 32]);
    let store = Arc::new(turnscope::store::memory::MemoryStore::new());
    let head = api_head(id, "0f0f0f0f", 0);
    let version = store.create(&head).await.expect("created");
    let turn = StoredTurn {
        record: turnscope::bot::TurnRecord {
            id: 1,
            line: "first line".into(),
            reply: "first reply".into(),
            end: Some(turnscope::bot::TurnEnd::Completed),
            ..Default::default()
        },
        started_ms: now_ms(),
        first_message: 1,
        messages: Vec::new(),
    };
    let commit = Commit {
        expected: version,
        head: Head {
            turns: 1,
            in_flight: Some(turnscope::store::InFlight {
                turn: 2,
                line: "the line it was answering".into(),
                started_ms: now_ms(),
                request: None,
                config_version: Some(1),
            }),
            ..head
        },
        append: vec![turn],
        drop_before: 0,
    };
    store.commit(&id, &commit).await.expect("committed");
    let mut c = console();
    let mut stored = StoredSessions::new(store.clone());
    let number = stored_number(&id);
    c.selected = Some(number);
    tick_until(&mut c, &mut stored, number, |c| {
        c.state.transcript(number).len() == 2
    })
    .await;
    let cut = &c.state.transcript(number)[1];
    assert_eq!(cut.line, "the line it was answering");
    assert!(
        cut.end.as_deref().is_some_and(|e| e.starts_with("cut off")),
        "{cut:?}"
    );
    let row = c.state.session(number).expect("listed");
    assert_eq!(row.turns, 2, "the turn in flight counts");
}

/// The Frames pane's word for a stored session wraps whole in a narrow pane (it was cut:
/// "only its turns; a shows").
#[test]
fn the_frames_note_of_a_stored_session_wraps_whole() {
    let mut c = with_stored();
    c.focus_pane(PaneId::Frames);
    let shown = screen(&mut c, 120, 36);
    assert!(shown.contains("all sessions."), "{shown}");
}
