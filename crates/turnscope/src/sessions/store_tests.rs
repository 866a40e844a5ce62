//! The session table over a store: restarts keep conversations, a crash's turn in flight is
//! reported once, expiry deletes, a failing store degrades to memory, concurrent reopens make
//! one session. A "restart" is a second table over the same store; a "crash" is a second
//! table over a snapshot of the store taken mid-turn (what the disk held then). The real
//! binary with the file store is tested in `tests/it/store.rs`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::bot::TurnEnd;
use crate::model::{EmbeddedModel, ModelClient, ModelConfig, ScriptSettings};
use crate::store::memory::MemoryStore;
use crate::store::{Commit, HandleKey, Head, StoreError, StoreStats, StoredTurn};

/// A memory store that claims to outlive the process, whose writes can be made to fail
/// (a full disk), whose creates and commits can be made slow, whose next commit can be made
/// to find the head written by someone else just before it (another server), and which can
/// claim that other processes share it (set before a table is made over it).
struct Disk {
    inner: MemoryStore,
    broken: AtomicBool,
    slow_create: AtomicBool,
    slow_commit: AtomicBool,
    written_elsewhere_first: AtomicBool,
    shared: AtomicBool,
}

impl Disk {
    fn new(inner: MemoryStore) -> Arc<Self> {
        Arc::new(Self {
            inner,
            broken: AtomicBool::new(false),
            slow_create: AtomicBool::new(false),
            slow_commit: AtomicBool::new(false),
            written_elsewhere_first: AtomicBool::new(false),
            shared: AtomicBool::new(false),
        })
    }

    /// Writes the head of `id` again as it is, as another server would: its version moves on.
    async fn write_elsewhere(&self, id: &HandleId) {
        let head = self.inner.head(id).await.unwrap().unwrap();
        let commit = Commit {
            expected: head.version,
            head,
            append: Vec::new(),
            drop_before: 0,
        };
        self.inner.commit(id, &commit).await.unwrap();
    }

    fn check(&self) -> Result<(), StoreError> {
        if self.broken.load(Ordering::Relaxed) {
            Err(StoreError::unusable(
                "store file /x: a commit failed (SQLite: database or disk is full)",
            ))
        } else {
            Ok(())
        }
    }
}

#[async_trait]
impl SessionStore for Disk {
    fn describe(&self) -> String {
        "disk".into()
    }
    fn durable(&self) -> bool {
        true
    }
    fn shared(&self) -> bool {
        self.shared.load(Ordering::Relaxed)
    }
    fn key(&self) -> HandleKey {
        self.inner.key()
    }
    async fn create(&self, head: &Head) -> Result<u64, StoreError> {
        self.check()?;
        if self.slow_create.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.inner.create(head).await
    }
    async fn head(&self, id: &HandleId) -> Result<Option<Head>, StoreError> {
        self.inner.head(id).await
    }
    async fn turns(&self, id: &HandleId, from: u64) -> Result<Vec<StoredTurn>, StoreError> {
        self.inner.turns(id, from).await
    }
    async fn commit(&self, id: &HandleId, commit: &Commit) -> Result<u64, StoreError> {
        self.check()?;
        if self.slow_commit.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        if self.written_elsewhere_first.swap(false, Ordering::Relaxed) {
            self.write_elsewhere(id).await;
        }
        self.inner.commit(id, commit).await
    }
    async fn delete(&self, id: &HandleId) -> Result<bool, StoreError> {
        self.check()?;
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
    async fn close(&self) {}
}

async fn model(pace: f64) -> EmbeddedModel {
    EmbeddedModel::start(0, ScriptSettings { pace, words: None })
        .await
        .unwrap()
}

fn table(model: &EmbeddedModel, store: Arc<dyn SessionStore>, limits: SessionLimits) -> Sessions {
    let bot = Bot::builder(ModelClient::new(ModelConfig::new(model.base_url(), "m")))
        .greeting("Hello there")
        .build();
    Sessions::with_store(bot, Bus::default(), limits, Replica::default(), store)
}

/// Says `line` as a caller that gives up 30 ms in: the turn runs on with nobody waiting.
async fn give_up(sessions: &Sessions, handle: &str, line: &str) {
    let cancel = CancellationToken::new();
    let later = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(30)).await;
        later.cancel();
    });
    let result = sessions.chat(handle, line, None, &cancel).await;
    assert_eq!(result, Err(ChatError::Cancelled));
}

async fn say(sessions: &Sessions, handle: &str, line: &str) -> ChatReply {
    sessions
        .chat(handle, line, None, &CancellationToken::new())
        .await
        .unwrap()
}

#[tokio::test]
async fn a_shutdown_keeps_every_conversation_but_a_console_session_nothing_was_said_in() {
    let model = model(0.0).await;
    let disk = Disk::new(MemoryStore::new());
    let sessions = table(&model, disk.clone(), SessionLimits::default());
    let idle_console = sessions.open(SessionOpener::Console).await.unwrap();
    let used_console = sessions.open(SessionOpener::Console).await.unwrap();
    let idle_client = sessions.open(SessionOpener::Api).await.unwrap();
    say(&sessions, &used_console.handle(), "hello").await;
    assert_eq!(disk.count().await.unwrap(), 3, "each is stored as it opens");
    sessions
        .close_all("server shut down", Duration::from_secs(1))
        .await;
    let kept: Vec<_> = disk
        .list(10)
        .await
        .unwrap()
        .into_iter()
        .map(|h| h.id)
        .collect();
    assert!(
        !kept.contains(&idle_console.id),
        "nobody can ever go on with it"
    );
    assert!(kept.contains(&used_console.id), "its turns are a record");
    assert!(
        kept.contains(&idle_client.id),
        "its client holds the handle"
    );
    assert_eq!(kept.len(), 2);
}

#[tokio::test]
async fn a_conversation_goes_on_after_a_restart_with_its_history() {
    let model = model(0.0).await;
    let disk = Disk::new(MemoryStore::new());
    let before = table(&model, disk.clone(), SessionLimits::default());
    let first = before.open(SessionOpener::Api).await.unwrap();
    let (handle, began_ms) = (first.handle(), first.began_ms);
    drop(first);
    say(&before, &handle, "my name is Ada").await;
    before
        .close_all("server shut down", Duration::from_secs(1))
        .await;
    assert!(before.is_empty());
    tokio::time::sleep(Duration::from_millis(20)).await;

    let after = table(&model, disk.clone(), SessionLimits::default());
    let reply = say(&after, &handle, "what did I say").await;
    assert_eq!(reply.reply, "Earlier you said: my name is Ada");
    assert_eq!(reply.turn, Some(2), "turn numbering goes on");
    let session = after.list().pop().unwrap();
    assert!(session.restored);
    assert_eq!(
        session.began_ms, began_ms,
        "its age counts from the conversation's start, not its reopening"
    );
    let context = session.bot().context();
    assert_eq!(
        context.messages[0],
        crate::bot::Message::Assistant {
            text: "Hello there".into(),
            tool_calls: vec![]
        },
        "the greeting is history message 1"
    );
    assert_eq!(context.messages.len(), 5, "{:?}", context.messages);
    assert_eq!(session.turns().len(), 2, "the console sees both turns");
    // A third table sees all three turns.
    after
        .close_all("server shut down", Duration::from_secs(1))
        .await;
    let again = table(&model, disk, SessionLimits::default());
    let reply = say(&again, &handle, "").await;
    assert_eq!(
        reply.end_reason, None,
        "every reply was read: nothing to read"
    );
    assert_eq!(
        (reply.turn, reply.turns),
        (None, Some(2)),
        "no turn read; the conversation's two counted, for a client taking it up"
    );
    assert_eq!(again.list()[0].bot().context().messages.len(), 5);
}

/// A line typed at the console into a client's session is kept as typed there: a console
/// started after a restart still tells it from the client's (tour N: it read `user`).
#[tokio::test]
async fn a_line_typed_at_the_console_is_kept_as_such_across_a_restart() {
    let model = model(0.0).await;
    let disk = Disk::new(MemoryStore::new());
    let before = table(&model, disk.clone(), SessionLimits::default());
    let handle = before.open(SessionOpener::Api).await.unwrap().handle();
    say(&before, &handle, "said by the client").await;
    let session = before.list().pop().unwrap();
    before
        .chat_on(
            &session,
            "typed at the console",
            None,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    drop(session);
    before
        .close_all("server shut down", Duration::from_secs(1))
        .await;
    tokio::time::sleep(Duration::from_millis(20)).await;

    let after = table(&model, disk, SessionLimits::default());
    say(&after, &handle, "").await;
    let typed: Vec<(String, bool)> = after.list()[0]
        .turns()
        .iter()
        .map(|t| {
            let r = t.snapshot();
            (r.line.clone(), r.typed_at_console)
        })
        .collect();
    assert_eq!(
        typed,
        [
            ("said by the client".to_string(), false),
            ("typed at the console".to_string(), true)
        ]
    );
}

/// A session that said "first", then "book a table" to a caller that gave up (the turn runs
/// on, its mark on disk), and the store as a crash left it then: (the live table, the handle,
/// the crashed store).
async fn crashed_mid_turn(model: &EmbeddedModel) -> (Sessions, String, Arc<Disk>) {
    let disk = Disk::new(MemoryStore::new());
    let live = table(model, disk.clone(), SessionLimits::default());
    let handle = live.open(SessionOpener::Api).await.unwrap().handle();
    say(&live, &handle, "first").await;
    give_up(&live, &handle, "book a table").await;
    let crashed = Disk::new(disk.inner.snapshot());
    (live, handle, crashed)
}

#[tokio::test]
async fn a_turn_in_flight_at_a_crash_is_reported_once_and_never_answered() {
    let model = model(0.05).await;
    let (live, handle, crashed) = crashed_mid_turn(&model).await;

    let after = table(&model, crashed.clone(), SessionLimits::default());
    let reply = say(&after, &handle, "").await;
    assert_eq!(reply.end_reason.as_deref(), Some("restarted"));
    assert_eq!(reply.line.as_deref(), Some("book a table"));
    assert_eq!(reply.reply, "");
    // Reported once: the next read has nothing, and the record says what happened.
    assert_eq!(say(&after, &handle, "").await.end_reason, None);
    let session = after.list().pop().unwrap();
    let lost = session.turns().pop().unwrap().snapshot();
    assert_eq!((lost.id, lost.end), (2, Some(TurnEnd::Restarted)));
    // The history holds the first turn only; the next line is turn 3.
    let reply = say(&after, &handle, "what did I say").await;
    assert_eq!(reply.reply, "Earlier you said: first");
    assert_eq!(reply.turn, Some(3));
    // A restart after that reports nothing again.
    after
        .close_all("server shut down", Duration::from_secs(1))
        .await;
    let later = table(&model, crashed, SessionLimits::default());
    assert_eq!(say(&later, &handle, "").await.end_reason, None);
    live.close_all("test over", Duration::from_secs(1)).await;
}

/// A turn the shutdown cuts (the drain bound passed) is answered to the call waiting on it,
/// and kept unread all the same: the next line after the restart is told it got no reply,
/// once, as after a crash (it used to be stored as read, and the next line went on as if
/// nothing happened).
#[tokio::test]
async fn a_turn_the_shutdown_cuts_is_reported_once_after_the_restart() {
    let model = model(0.05).await;
    let disk = Disk::new(MemoryStore::new());
    let before = table(&model, disk.clone(), SessionLimits::default());
    let handle = before.open(SessionOpener::Api).await.unwrap().handle();
    say(&before, &handle, "first").await;
    let waiting = {
        let (before, handle) = (before.clone(), handle.clone());
        tokio::spawn(async move { say(&before, &handle, "tell me a very long story").await })
    };
    tokio::time::sleep(Duration::from_millis(150)).await;
    let cut = before
        .close_all("server shut down", Duration::from_secs(1))
        .await;
    assert_eq!(cut, 1, "one turn was running");
    let answered = waiting.await.unwrap();
    assert_eq!(answered.end_reason.as_deref(), Some("restarted"));
    let id = before.id_of(&handle).unwrap();
    let head = disk.head(&id).await.unwrap().unwrap();
    assert_eq!(
        (head.unread, head.in_flight.is_some()),
        (Some(2), false),
        "{head:?}"
    );

    let after = table(&model, disk.clone(), SessionLimits::default());
    let reply = say(&after, &handle, "what did I say").await;
    let unread = reply.unread.expect("the cut turn is told");
    assert_eq!(unread.end_reason, "restarted");
    assert_eq!(unread.line.as_deref(), Some("tell me a very long story"));
    assert_eq!(reply.end_reason.as_deref(), Some("completed"));
    assert_eq!(say(&after, &handle, "").await.end_reason, None, "once");
    assert_eq!(
        say(&after, &handle, "and now").await.unread,
        None,
        "once, and no more"
    );
    after.close_all("test over", Duration::from_secs(1)).await;
}

/// A reply written as read whose answer never reached its caller (the HTTP exchange that
/// carried it was dropped before its end: `server::caller`) is handed back: unread again, so
/// an empty line reads it, here and after a restart, once. One a client resumes from the
/// replay store (an MCP session's stream) is handed back only once the process stops.
#[tokio::test]
async fn a_reply_that_did_not_reach_its_caller_is_unread_again_here_and_after_a_restart() {
    let model = model(0.0).await;
    let disk = Disk::new(MemoryStore::new());
    let before = table(&model, disk.clone(), SessionLimits::default());
    let handle = before.open(SessionOpener::Api).await.unwrap().handle();
    let cancel = CancellationToken::new();
    let said = |line: &'static str| {
        let (before, handle, cancel) = (before.clone(), handle.clone(), cancel.clone());
        async move {
            before
                .chat_keyed_marked(&handle, line, None, None, CallerWatch::cancel_only(&cancel))
                .await
                .unwrap()
        }
    };
    let (first, mark) = said("my name is Ada").await;
    before.reply_not_delivered(mark.expect("a turn was read"), false);
    assert!(before.undelivered_settled(Duration::from_secs(5)).await);
    let again = say(&before, &handle, "").await;
    assert_eq!((again.turn, &again.reply), (first.turn, &first.reply));
    assert_eq!(say(&before, &handle, "").await.end_reason, None, "once");

    // On a resumable stream, while the process runs: the replay store has it.
    let (_, mark) = said("my name is Bo").await;
    before.reply_not_delivered(mark.unwrap(), true);
    assert!(before.undelivered_settled(Duration::from_secs(5)).await);
    assert_eq!(say(&before, &handle, "").await.end_reason, None);

    // Not delivered as the process stops: the store keeps it unread for after the restart.
    let (third, mark) = said("my name is Cy").await;
    before
        .close_all("server shut down", Duration::from_secs(1))
        .await;
    before.reply_not_delivered(mark.unwrap(), true);
    assert!(before.undelivered_settled(Duration::from_secs(5)).await);
    let after = table(&model, disk, SessionLimits::default());
    let read = say(&after, &handle, "").await;
    assert_eq!((read.turn, &read.reply), (third.turn, &third.reply));
    assert_eq!(say(&after, &handle, "").await.end_reason, None, "once");
    after.close_all("test over", Duration::from_secs(1)).await;
}

/// Reopening after a crash writes the lost turn's record first; when another server wrote the
/// session in between, that write finds it changed: the session is let go and loaded afresh
/// (once), and the lost turn is still reported once, never twice.
#[tokio::test]
async fn a_lost_turn_whose_record_meets_a_write_from_elsewhere_is_reported_once() {
    let model = model(0.05).await;
    let (live, handle, crashed) = crashed_mid_turn(&model).await;
    let id = live.id_of(&handle).unwrap();
    let before = crashed.head(&id).await.unwrap().unwrap().version;
    crashed
        .written_elsewhere_first
        .store(true, Ordering::Relaxed);

    let after = table(&model, crashed.clone(), SessionLimits::default());
    let reply = say(&after, &handle, "").await;
    assert!(
        !crashed.written_elsewhere_first.load(Ordering::Relaxed),
        "the lost turn's record met the write from elsewhere"
    );
    assert_eq!(reply.end_reason.as_deref(), Some("restarted"));
    assert_eq!(reply.line.as_deref(), Some("book a table"));
    // The other write, then this table's writes over it: the lost turn's record, its reading.
    let head = crashed.head(&id).await.unwrap().unwrap();
    assert_eq!(head.version, before + 3, "{head:?}");
    assert_eq!((head.in_flight, head.unread, head.turns), (None, None, 2));
    assert_eq!(say(&after, &handle, "").await.end_reason, None, "once");
    let reply = say(&after, &handle, "what did I say").await;
    assert_eq!(reply.reply, "Earlier you said: first");
    assert_eq!(reply.turn, Some(3));
    after.close_all("test over", Duration::from_secs(1)).await;
    live.close_all("test over", Duration::from_secs(1)).await;
}

#[tokio::test]
async fn a_new_line_after_a_crash_carries_the_lost_one_in_its_note() {
    let model = model(0.05).await;
    let disk = Disk::new(MemoryStore::new());
    let live = table(&model, disk.clone(), SessionLimits::default());
    let handle = live.open(SessionOpener::Api).await.unwrap().handle();
    give_up(&live, &handle, "lost line").await;
    let after = table(
        &model,
        Disk::new(disk.inner.snapshot()),
        SessionLimits::default(),
    );
    let reply = say(&after, &handle, "hello again").await;
    let unread = reply.unread.clone().expect("the lost turn comes first");
    assert_eq!(
        (unread.end_reason.as_str(), unread.line.as_deref()),
        ("restarted", Some("lost line"))
    );
    assert_eq!(reply.reply, "You said: hello again");
    live.close_all("test over", Duration::from_secs(1)).await;
}

#[tokio::test]
async fn an_unread_reply_survives_a_restart_and_an_empty_line_reads_it() {
    let model = model(0.02).await;
    let disk = Disk::new(MemoryStore::new());
    let before = table(&model, disk.clone(), SessionLimits::default());
    let session = before.open(SessionOpener::Api).await.unwrap();
    let handle = session.handle();
    give_up(&before, &handle, "keep this").await;
    // The turn ends with nobody reading it: it is written as unread.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let head = disk.inner.head(&session.id()).await.unwrap();
        if head.is_some_and(|h| h.unread == Some(1)) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "written as unread");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    before
        .close_all("server shut down", Duration::from_secs(1))
        .await;
    let after = table(&model, disk, SessionLimits::default());
    let reply = say(&after, &handle, "").await;
    assert_eq!(
        (reply.reply.as_str(), reply.end_reason.as_deref()),
        ("You said: keep this", Some("completed"))
    );
    assert_eq!(say(&after, &handle, "").await.end_reason, None, "read once");
}

#[tokio::test]
async fn the_head_counts_the_turns_that_ended_in_an_error() {
    // A model nothing listens for: each turn fails to reach it.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", closed.local_addr().unwrap());
    drop(closed);
    let bot = Bot::builder(ModelClient::new(ModelConfig::new(url, "m"))).build();
    let disk = Disk::new(MemoryStore::new());
    let sessions = Sessions::with_store(
        bot,
        Bus::default(),
        SessionLimits::default(),
        Replica::default(),
        disk.clone(),
    );
    let session = sessions.open(SessionOpener::Api).await.unwrap();
    let handle = session.handle();
    for line in ["one", "two"] {
        let reply = say(&sessions, &handle, line).await;
        assert_eq!(reply.end_reason.as_deref(), Some("error"), "{reply:?}");
    }
    let head = disk.inner.head(&session.id()).await.unwrap().unwrap();
    assert_eq!((head.turns, head.errors), (2, 2));
}

/// Room for 4 sessions that live a second without a call, the sweep left to the test.
fn one_second_lifetime() -> SessionLimits {
    SessionLimits {
        cap: 4,
        handle_seconds: 1,
        sweep_every: Duration::from_secs(60),
        ..SessionLimits::default()
    }
}

/// A session the console opened outlives the idle lifetime: the person holds it while they
/// look at its turns and resend its requests (tour J: it closed under them, and their next
/// line went to a new conversation unsaid); an MCP client's is swept and refused.
#[tokio::test]
async fn the_idle_lifetime_ends_a_clients_session_not_the_consoles() {
    let model = model(0.0).await;
    let disk = Disk::new(MemoryStore::new());
    let limits = one_second_lifetime();
    let sessions = table(&model, disk.clone(), limits);
    sessions.hold_console_sessions();
    let console = sessions
        .open(SessionOpener::Console)
        .await
        .unwrap()
        .handle();
    let client = sessions.open(SessionOpener::Api).await.unwrap().handle();
    let other = sessions.open(SessionOpener::Api).await.unwrap().handle();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    // Found expired by a call, and by the sweep.
    let ct = CancellationToken::new();
    assert!(sessions.chat(&other, "hi", None, &ct).await.is_err());
    assert_eq!(sessions.sweep().await, 1, "the client's");
    assert!(sessions.chat(&client, "hi", None, &ct).await.is_err());
    let reply = sessions
        .chat(&console, "still here", None, &ct)
        .await
        .unwrap();
    assert!(reply.reply.contains("still here"), "{reply:?}");
    // With no console running (a headless server reopening a console's stored session), a
    // console's session idles out as any other.
    let headless = table(&model, disk.clone(), one_second_lifetime());
    let opened = headless
        .open(SessionOpener::Console)
        .await
        .unwrap()
        .handle();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(headless.sweep().await, 1);
    assert!(headless.chat(&opened, "hi", None, &ct).await.is_err());
}

/// A running console's session idle for half a lifetime is marked used in a file store by
/// the sweep, and again as the console quits, so its conversation outlives a restart that
/// comes within a lifetime of the quit, however long before that its last line was: it was
/// deleted as idle at the next start (tour O F2).
#[tokio::test]
async fn a_consoles_session_stays_fresh_in_the_file_store_while_the_console_holds_it() {
    let model = model(0.0).await;
    let dir = crate::store::conformance::TempDir::new("console-held");
    let store: Arc<dyn SessionStore> =
        Arc::new(crate::store::sqlite::SqliteStore::open(&dir.0.join("sessions.sqlite3")).unwrap());
    let limits = SessionLimits {
        cap: 4,
        handle_seconds: 2,
        sweep_every: Duration::from_secs(60),
        ..SessionLimits::default()
    };
    let sessions = table(&model, store.clone(), limits.clone());
    sessions.hold_console_sessions();
    let console = sessions.open(SessionOpener::Console).await.unwrap();
    let handle = console.handle();
    say(&sessions, &handle, "remember kiwi").await;
    let last_line = store.head(&console.id).await.unwrap().unwrap().last_used_ms;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    sessions.sweep().await;
    let swept = store.head(&console.id).await.unwrap().unwrap();
    assert!(
        swept.idle_since_ms() >= last_line + 1200,
        "the sweep marked it used: {last_line} → {}",
        swept.kept_alive_ms
    );
    assert_eq!(
        swept.last_used_ms, last_line,
        "the record is the last write's"
    );
    // A second sweep within half a lifetime writes nothing more.
    sessions.sweep().await;
    let again = store.head(&console.id).await.unwrap().unwrap();
    assert_eq!(again.kept_alive_ms, swept.kept_alive_ms);
    // Past a lifetime after the sweep's mark, the quit's own keeps it.
    tokio::time::sleep(Duration::from_millis(2200)).await;
    let quit_at = crate::store::now_ms();
    sessions
        .close_all("server shut down", Duration::from_secs(1))
        .await;
    let quit = store.head(&console.id).await.unwrap().unwrap();
    assert!(quit.idle_since_ms() >= quit_at, "marked as it quit");
    // 3.4 s after the last line, a lifetime of 2 s: it goes on, counted from the quit.
    let after = table(&model, store.clone(), limits);
    let reply = sessions_chat(&after, &handle, "and again").await;
    assert!(
        reply.is_ok(),
        "the console's conversation goes on: {reply:?}"
    );
}

async fn sessions_chat(
    sessions: &Sessions,
    handle: &str,
    line: &str,
) -> Result<ChatReply, ChatError> {
    sessions
        .chat(handle, line, None, &CancellationToken::new())
        .await
}

#[tokio::test]
async fn the_sweep_deletes_expired_stored_sessions_and_a_chat_on_one_is_refused() {
    let model = model(0.0).await;
    let disk = Disk::new(MemoryStore::new());
    let limits = one_second_lifetime();
    let before = table(&model, disk.clone(), limits.clone());
    let a = before.open(SessionOpener::Api).await.unwrap().handle();
    let b = before.open(SessionOpener::Api).await.unwrap().handle();
    before
        .close_all("server shut down", Duration::from_secs(1))
        .await;
    assert_eq!(disk.count().await.unwrap(), 2);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let after = table(&model, disk.clone(), limits);
    // A chat on an expired stored handle deletes it and says so.
    let e = after
        .chat(&a, "hi", None, &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(e, ChatError::NoSession { kept: true, .. }), "{e}");
    assert_eq!(disk.count().await.unwrap(), 1);
    // The sweep deletes the other one.
    after.sweep().await;
    assert_eq!(disk.count().await.unwrap(), 0);
    assert!(
        after
            .chat(&b, "hi", None, &CancellationToken::new())
            .await
            .is_err()
    );
}

#[tokio::test]
async fn the_cap_counts_open_sessions_and_reopened_ones_take_a_slot() {
    let model = model(0.0).await;
    let disk = Disk::new(MemoryStore::new());
    let limits = SessionLimits {
        cap: 1,
        ..SessionLimits::default()
    };
    let before = table(&model, disk.clone(), limits.clone());
    let a = before.open(SessionOpener::Api).await.unwrap().handle();
    before
        .close_all("server shut down", Duration::from_secs(1))
        .await;
    let after = table(&model, disk, limits);
    let b = after.open(SessionOpener::Api).await.unwrap();
    let e = after
        .chat(&a, "hi", None, &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(e, ChatError::Cap { cap: 1, .. }), "{e}");
    let said = e.to_string();
    assert!(
        said.contains("holds 1 open session, its cap") && said.contains("raise the cap"),
        "{said}"
    );
    after.close(&b, "closed by hand").await;
    say(&after, &a, "hi").await;
}

#[tokio::test]
async fn concurrent_calls_on_a_stored_handle_reopen_it_once() {
    let model = model(0.0).await;
    let disk = Disk::new(MemoryStore::new());
    let before = table(&model, disk.clone(), SessionLimits::default());
    let handle = before.open(SessionOpener::Api).await.unwrap().handle();
    before
        .close_all("server shut down", Duration::from_secs(1))
        .await;
    let after = table(&model, disk, SessionLimits::default());
    let calls = (0..8).map(|_| after.find(&handle));
    let found = futures::future::join_all(calls).await;
    let numbers: std::collections::HashSet<u64> =
        found.into_iter().map(|s| s.unwrap().number).collect();
    assert_eq!(numbers.len(), 1);
    assert_eq!(after.len(), 1);
}

/// A session's bot starts (its `Start` frame crosses the pipeline) before the store has
/// taken the session; the session event still says it opened before that frame, so a
/// watcher counting frame times from the opening never sees one before it (the Frames pane
/// of `attach` and `replay` showed `Start` seconds off).
#[tokio::test]
async fn a_session_opens_before_its_first_frame_however_slow_the_store() {
    let model = model(0.0).await;
    let disk = Disk::new(MemoryStore::new());
    disk.slow_create.store(true, Ordering::Relaxed);
    let sessions = table(&model, disk.clone(), SessionLimits::default());
    let mut sub = sessions.bus().subscribe();
    let session = sessions.open(SessionOpener::Api).await.unwrap();
    let (mut opened, mut first_frame) = (None, None);
    while opened.is_none() {
        let event = tokio::time::timeout(Duration::from_secs(5), sub.recv())
            .await
            .expect("the session event comes")
            .expect("the bus is open");
        match &*event {
            Event::Frame(f) if f.session == session.number => {
                first_frame.get_or_insert(f.at_us);
            }
            Event::Session(s) if s.session == session.number => opened = Some(s.at_us),
            _ => {}
        }
    }
    let (opened, first_frame) = (opened.unwrap(), first_frame.expect("Start came first"));
    assert!(
        opened <= first_frame,
        "opened at {opened} µs, its first frame at {first_frame} µs"
    );
}

#[tokio::test]
async fn a_failing_store_degrades_to_memory_loudly_and_sessions_go_on() {
    let model = model(0.0).await;
    let disk = Disk::new(MemoryStore::new());
    let sessions = table(&model, disk.clone(), SessionLimits::default());
    let mut sub = sessions.bus().subscribe();
    let handle = sessions.open(SessionOpener::Api).await.unwrap().handle();
    say(&sessions, &handle, "one").await;
    disk.broken.store(true, Ordering::Relaxed);
    let reply = say(&sessions, &handle, "what did I say").await;
    assert_eq!(reply.reply, "Earlier you said: one");
    let status = sessions.store_status();
    assert!(
        status
            .degraded
            .as_deref()
            .is_some_and(|d| d.contains("disk is full")),
        "{status:?}"
    );
    // Said once on the bus (the console's Log, stderr through tracing).
    let mut logs = Vec::new();
    while let Some(event) = sub.try_recv() {
        if let Event::Log { level, message, .. } = &*event {
            logs.push((level.to_string(), message.clone()));
        }
    }
    assert_eq!(logs.len(), 1, "{logs:?}");
    assert!(logs[0].1.contains("Serving from memory"), "{logs:?}");
    // New sessions still open, from memory.
    let other = sessions.open(SessionOpener::Api).await.unwrap().handle();
    assert_eq!(say(&sessions, &other, "two").await.reply, "You said: two");
}

/// The bot's `end_session` closes its conversation (deleting it from the store) once the
/// goodbye turn is done, which can be before the call reading that turn has written it. The
/// write then finds the conversation gone by this process's own doing. Before: a warning that
/// it "was deleted (`turnscope sessions delete`)" in about one run in four of the example
/// test file (tour H), and on a shared store the goodbye answered as an error.
#[tokio::test]
async fn a_turn_whose_conversation_closed_here_meanwhile_is_answered_without_a_warning() {
    for shared in [false, true] {
        let model = model(0.02).await;
        let disk = Disk::new(MemoryStore::new());
        disk.shared.store(shared, Ordering::Relaxed);
        let sessions = table(&model, disk.clone(), SessionLimits::default());
        let mut log = sessions.bus().subscribe();
        let session = sessions.open(SessionOpener::Api).await.unwrap();
        let handle = session.handle();
        say(&sessions, &handle, "one").await;
        let chat = {
            let sessions = sessions.clone();
            tokio::spawn(async move {
                sessions
                    .chat(&handle, "goodbye now", None, &CancellationToken::new())
                    .await
            })
        };
        while session.turns().len() < 2 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        // Its record's write (200 ms) lands after the close below has deleted it.
        disk.slow_commit.store(true, Ordering::Relaxed);
        session.turns().pop().unwrap().done().await;
        sessions.close(&session, "ended by the bot: goodbye").await;
        let reply = chat.await.unwrap();
        assert_eq!(
            reply.map(|r| r.reply),
            Ok("You said: goodbye now".to_string()),
            "shared store: {shared}"
        );
        let warned: Vec<String> = std::iter::from_fn(|| log.try_recv())
            .filter_map(|e| match &*e {
                Event::Log { message, .. } => Some(message.clone()),
                _ => None,
            })
            .collect();
        assert!(warned.is_empty(), "shared store: {shared}: {warned:?}");
        assert_eq!(disk.inner.count().await.unwrap(), 0, "deleted by the close");
    }
}

#[tokio::test]
async fn a_session_changed_elsewhere_is_reloaded_not_overwritten() {
    let model = model(0.0).await;
    let disk = Disk::new(MemoryStore::new());
    let sessions = table(&model, disk.clone(), SessionLimits::default());
    let session = sessions.open(SessionOpener::Api).await.unwrap();
    let handle = session.handle();
    say(&sessions, &handle, "one").await;
    // Another writer bumps the version behind this table's back.
    disk.write_elsewhere(&session.id()).await;
    let reply = say(&sessions, &handle, "what did I say").await;
    assert_eq!(
        reply.reply, "Earlier you said: one",
        "reloaded with its history"
    );
    assert!(sessions.list()[0].restored);
}

#[test]
fn a_replica_takes_over_what_another_wrote_last_or_issued() {
    use super::persist::taken_from;
    let (r1, r2) = (Replica::new("r1"), Replica::new("r2"));
    let born_on_r1 = r1.stamp(Uuid::new_v4());
    assert_eq!(
        taken_from(&r2, &born_on_r1, Some("r1".into())),
        Some("r1".into())
    );
    assert_eq!(
        taken_from(&r1, &born_on_r1, Some("r2".into())),
        Some("r2".into()),
        "back on its first replica after another served it"
    );
    assert_eq!(
        taken_from(&r1, &born_on_r1, Some("r1".into())),
        None,
        "its own"
    );
    assert_eq!(
        taken_from(&r2, &born_on_r1, Some("r2".into())),
        None,
        "r2 wrote it last: it continues its own"
    );
    assert_eq!(
        taken_from(&r2, &born_on_r1, None),
        Some(format!("tag {}", r1.tag())),
        "no writer known: the handle's tag names the replica"
    );
    assert_eq!(taken_from(&r1, &born_on_r1, None), None);
}

/// Redis's password changed, then the replica's connection was cut: the call in flight
/// fails with the lost connection, the reconnect with the refused credentials. Before, only
/// the first was logged ("Redis cannot be reached (broken pipe)"), and `/healthz` alone named
/// the cause to fix.
#[tokio::test]
async fn a_credentials_refusal_after_a_lost_connection_is_logged_as_the_cause() {
    let disk = Disk::new(MemoryStore::new());
    disk.shared.store(true, Ordering::Relaxed);
    let bus = Bus::default();
    let mut sub = bus.subscribe();
    let storage = storage::Storage::new(disk, bus);
    let lost = StoreError::unusable(
        "store redis://127.0.0.1:1/0: saving a turn failed: Redis cannot be reached (broken \
         pipe). turnscope reconnects on its own; try again in a moment",
    );
    let refused = StoreError::unusable(format!(
        "store redis://127.0.0.1:1/0: saving a turn failed: {} (AuthenticationFailed). Give \
         Redis back the URL's password",
        crate::store::redis::CREDENTIALS_REFUSED
    ));
    for e in [&lost, &refused, &lost, &refused, &refused] {
        storage.fail(e);
    }
    let logs = |sub: &mut crate::observe::Subscription| {
        let mut logs = Vec::new();
        while let Some(event) = sub.try_recv() {
            if let Event::Log { message, .. } = &*event {
                logs.push(message.clone());
            }
        }
        logs
    };
    let said = logs(&mut sub);
    assert_eq!(said.len(), 2, "{said:?}");
    assert!(said[0].contains("cannot be reached"), "{said:?}");
    assert!(
        said[1].contains("refused the URL's credentials"),
        "{said:?}"
    );
    // Once it answers (said), a later refusal is said again.
    storage.answered();
    storage.fail(&refused);
    let said = logs(&mut sub);
    assert_eq!(said.len(), 2, "{said:?}");
    assert!(
        said[0].contains("answers again") && said[1].contains("credentials"),
        "{said:?}"
    );
}

/// A conversation closed here keeps its number for a while, with why it ended: a `chat`
/// refused on it names its session in the Log (its row was blank: tour F3).
#[tokio::test]
async fn a_closed_conversation_is_still_known_by_its_number() {
    let model = model(0.0).await;
    let sessions = table(
        &model,
        Disk::new(MemoryStore::new()),
        SessionLimits::default(),
    );
    let _first = sessions.open(SessionOpener::Api).await.unwrap();
    let session = sessions.open(SessionOpener::Api).await.unwrap();
    let handle = session.handle();
    assert_eq!(sessions.number_known(&handle), Some(session.number));
    sessions.close(&session, "closed from the console").await;
    assert_eq!(sessions.number_of(&handle), None, "no longer open");
    assert_eq!(sessions.number_known(&handle), Some(session.number));
    assert_eq!(
        sessions.number_known("0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"),
        None
    );
}
