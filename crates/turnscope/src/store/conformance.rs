//! What every [`SessionStore`] must do, as one suite run against each implementation: the
//! memory store, the file store, and (issue 27) Redis. A new store passes [`suite`].

use std::path::PathBuf;
use std::sync::Arc;

use uuid::Uuid;

use super::memory::MemoryStore;
use super::sqlite::SqliteStore;
use super::*;
use crate::bot::{Message, TurnEnd, TurnRecord};

/// A head for a fresh handle of `store`.
pub(crate) fn head(store: &dyn SessionStore, last_used_ms: u64) -> Head {
    let handle = Uuid::new_v4();
    Head {
        id: store.key().id_of(&handle),
        prefix: crate::store::handle::shown_prefix(&handle),
        bot: "bot".into(),
        opener: SessionOpener::Api,
        greeting: Some("Hello".into()),
        created_ms: last_used_ms,
        last_used_ms,
        kept_alive_ms: 0,
        turns: 0,
        messages: 1,
        forgotten: 0,
        history_from_turn: 1,
        in_flight: None,
        unread: None,
        errors: 0,
        version: 0,
    }
}

/// Turn `id` with its line and reply, adding two history messages after `first_message`.
pub(crate) fn turn(id: u64, first_message: u64) -> StoredTurn {
    StoredTurn {
        record: TurnRecord {
            id,
            line: format!("line {id}"),
            reply: format!("reply {id}"),
            end: Some(TurnEnd::Completed),
            ..TurnRecord::default()
        },
        started_ms: 1000 + id,
        first_message,
        messages: vec![
            Message::User(format!("line {id}").into()),
            Message::Assistant {
                text: format!("reply {id}"),
                tool_calls: Vec::new(),
            },
        ],
    }
}

/// Appends turn `head.turns + 1` to `head` and commits it.
async fn append(store: &dyn SessionStore, head: &mut Head) -> Result<u64, StoreError> {
    let t = turn(head.turns + 1, head.messages + 1);
    let mut next = head.clone();
    next.turns = t.id();
    next.messages = t.last_message();
    let commit = Commit {
        expected: head.version,
        head: next.clone(),
        append: vec![t],
        drop_before: 0,
    };
    let version = store.commit(&head.id, &commit).await?;
    *head = next;
    head.version = version;
    Ok(version)
}

/// The whole suite.
pub(crate) async fn suite(store: &dyn SessionStore) {
    // Create, read back, refuse a second create.
    let mut a = head(store, 5_000);
    assert_eq!(store.create(&a).await.unwrap(), 1);
    a.version = 1;
    assert_eq!(store.head(&a.id).await.unwrap().as_ref(), Some(&a));
    assert!(matches!(
        store.create(&a).await,
        Err(StoreError::Conflict { found: Some(1), .. })
    ));
    // Appends bump the version; a stale version is a conflict and changes nothing.
    for _ in 0..3 {
        append(store, &mut a).await.unwrap();
    }
    assert_eq!(a.version, 4);
    let stale = Commit {
        expected: 2,
        head: a.clone(),
        append: vec![turn(9, 99)],
        drop_before: 0,
    };
    let e = store.commit(&a.id, &stale).await.unwrap_err();
    assert_eq!(
        e,
        StoreError::Conflict {
            prefix: a.prefix.clone(),
            expected: 2,
            found: Some(4)
        }
    );
    assert!(e.to_string().contains("reload"), "{e}");
    let log = store.turns(&a.id, 1).await.unwrap();
    assert_eq!(
        log.iter().map(StoredTurn::id).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert_eq!(log[2].messages, turn(3, 6).messages);
    assert_eq!(log[2].record.reply, "reply 3");
    assert_eq!(store.turns(&a.id, 3).await.unwrap().len(), 1);
    // The in-flight mark and unread turn round-trip.
    let mut marked = a.clone();
    marked.in_flight = Some(InFlight {
        turn: 4,
        line: "a line with \"quotes\" and é".into(),
        started_ms: 7,
        request: Some("lb-1".into()),
        config_version: Some(2),
    });
    marked.unread = Some(3);
    let version = store
        .commit(
            &a.id,
            &Commit {
                expected: a.version,
                head: marked.clone(),
                append: Vec::new(),
                drop_before: 0,
            },
        )
        .await
        .unwrap();
    marked.version = version;
    let loaded = store.load(&a.id, 2).await.unwrap().unwrap();
    assert_eq!(loaded.head, marked);
    a = marked;
    // `load` reads from the history window's first turn or the last `kept`, the older.
    assert_eq!(
        loaded.turns.iter().map(StoredTurn::id).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    // The front of the log is dropped on request.
    a.in_flight = None;
    let t = turn(4, a.messages + 1);
    let mut next = a.clone();
    next.turns = 4;
    next.messages = t.last_message();
    next.history_from_turn = 3;
    let version = store
        .commit(
            &a.id,
            &Commit {
                expected: a.version,
                head: next.clone(),
                append: vec![t],
                drop_before: 3,
            },
        )
        .await
        .unwrap();
    next.version = version;
    assert_eq!(
        store
            .turns(&a.id, 0)
            .await
            .unwrap()
            .iter()
            .map(StoredTurn::id)
            .collect::<Vec<_>>(),
        [3, 4]
    );
    assert_eq!(
        store
            .load(&a.id, 1)
            .await
            .unwrap()
            .unwrap()
            .turns
            .iter()
            .map(StoredTurn::id)
            .collect::<Vec<_>>(),
        [3, 4]
    );
    // Listing, counting, expiry by last use.
    let b = head(store, 1_000);
    let c = head(store, 9_000);
    store.create(&b).await.unwrap();
    store.create(&c).await.unwrap();
    assert_eq!(store.count().await.unwrap(), 3);
    let listed: Vec<_> = store
        .list(10)
        .await
        .unwrap()
        .into_iter()
        .map(|h| h.id)
        .collect();
    assert_eq!(listed, [c.id, a.id, b.id], "newest first");
    assert_eq!(store.list(1).await.unwrap().len(), 1);
    let expired: Vec<_> = store
        .expired(6_000, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|h| h.id)
        .collect();
    assert_eq!(expired, [b.id, a.id], "oldest first");
    assert_eq!(store.expired(6_000, 1).await.unwrap().len(), 1);
    // Delete: gone with its log; a write on it is a conflict naming no version.
    assert!(store.delete(&a.id).await.unwrap());
    assert!(!store.delete(&a.id).await.unwrap());
    assert_eq!(store.head(&a.id).await.unwrap(), None);
    assert!(store.turns(&a.id, 0).await.unwrap().is_empty());
    assert!(store.load(&a.id, 10).await.unwrap().is_none());
    let e = append(store, &mut next).await.unwrap_err();
    assert!(matches!(e, StoreError::Conflict { found: None, .. }), "{e}");
    // The lease hooks of a store one process holds grant everything.
    store.acquire(&b.id).await.unwrap();
    store.renew(&[b.id, c.id]).await.unwrap();
    store.release(&b.id).await;
    assert!(store.stats().writes >= 8);
}

/// A fresh folder under the system's temporary one, removed by [`TempDir`]'s drop.
pub(crate) struct TempDir(pub PathBuf);

impl TempDir {
    pub(crate) fn new(what: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("turnscope-{what}-{}", Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[tokio::test]
async fn the_memory_store_passes() {
    suite(&MemoryStore::new()).await;
}

#[tokio::test]
async fn the_file_store_passes_and_keeps_everything_across_a_reopen() {
    let dir = TempDir::new("store");
    let path = dir.0.join("nested/sessions.sqlite3");
    let store = SqliteStore::open(&path).unwrap();
    suite(&store).await;
    let mut kept = head(&store, 42);
    store.create(&kept).await.unwrap();
    kept.version = 1;
    append(&store, &mut kept).await.unwrap();
    let key = store.key();
    store.close().await;
    let again = SqliteStore::open(&path).unwrap();
    assert_eq!(again.key().as_bytes(), key.as_bytes(), "the key is kept");
    let loaded = again.load(&kept.id, 10).await.unwrap().unwrap();
    assert_eq!(loaded.head, kept);
    assert_eq!(loaded.turns[0].record.line, "line 1");
    assert_eq!(again.count().await.unwrap(), 3);
    again.close().await;
}

/// The file gives back what deleted conversations took: it kept its busiest size for ever
/// (tour G: 450 MB holding nothing), its free pages never reused by another file.
#[tokio::test]
async fn the_file_store_gives_back_the_room_of_deleted_conversations() {
    let dir = TempDir::new("store-vacuum");
    let path = dir.0.join("sessions.sqlite3");
    let store = SqliteStore::open(&path).unwrap();
    let mut ids = Vec::new();
    for _ in 0..40 {
        let mut h = head(&store, 42);
        store.create(&h).await.unwrap();
        h.version = 1;
        let mut t = turn(1, 2);
        t.record.line = "x".repeat(100_000);
        let mut next = h.clone();
        next.turns = 1;
        next.messages = t.last_message();
        let commit = Commit {
            expected: h.version,
            head: next,
            append: vec![t],
            drop_before: 0,
        };
        store.commit(&h.id, &commit).await.unwrap();
        ids.push(h.id);
    }
    for id in &ids {
        assert!(store.delete(id).await.unwrap());
    }
    store.close().await;
    let size = std::fs::metadata(&path).unwrap().len();
    let file = rusqlite::Connection::open(&path).unwrap();
    let free: i64 = file
        .query_row("PRAGMA freelist_count", [], |r| r.get(0))
        .unwrap();
    assert!(
        size < 400_000,
        "{size} bytes kept of 4 MB deleted, {free} pages free"
    );
}

/// Writes that arrive together share transactions (fewer flushes than writes), and the
/// one that conflicts undoes only itself: every other write of its batch is on disk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_file_store_s_concurrent_writes_share_commits_and_a_conflict_undoes_only_itself() {
    const SESSIONS: usize = 64;
    let dir = TempDir::new("writer");
    let path = dir.0.join("sessions.sqlite3");
    let store = Arc::new(SqliteStore::open(&path).unwrap());
    let heads: Vec<_> = (0..SESSIONS)
        .map(|i| head(store.as_ref(), 1000 + i as u64))
        .collect();
    let mut writes = tokio::task::JoinSet::new();
    for h in heads.clone() {
        let store = store.clone();
        writes.spawn(async move { store.create(&h).await });
    }
    while let Some(created) = writes.join_next().await {
        assert_eq!(created.unwrap().unwrap(), 1);
    }
    // Each session appends its first turn at once; the first one's version is stale.
    let mut commits = tokio::task::JoinSet::new();
    for (i, h) in heads.iter().enumerate() {
        let store = store.clone();
        let t = turn(1, 2);
        let mut next = h.clone();
        next.turns = 1;
        next.messages = t.last_message();
        let commit = Commit {
            expected: if i == 0 { 7 } else { 1 },
            head: next,
            append: vec![t],
            drop_before: 0,
        };
        let id = h.id;
        commits.spawn(async move { (i, store.commit(&id, &commit).await) });
    }
    while let Some(done) = commits.join_next().await {
        match done.unwrap() {
            (0, result) => assert!(
                matches!(
                    result,
                    Err(StoreError::Conflict {
                        expected: 7,
                        found: Some(1),
                        ..
                    })
                ),
                "{result:?}"
            ),
            (_, result) => assert_eq!(result.unwrap(), 2),
        }
    }
    let stats = store.stats();
    assert_eq!(stats.writes, 2 * SESSIONS as u64);
    assert!(
        stats.syncs < stats.writes && stats.largest_batch > 1,
        "{stats:?}"
    );
    store.close().await;
    // What a later process reads.
    let again = SqliteStore::open(&path).unwrap();
    for (i, h) in heads.iter().enumerate() {
        let loaded = again.load(&h.id, 10).await.unwrap().unwrap();
        let (version, turns) = if i == 0 { (1, 0) } else { (2, 1) };
        assert_eq!(loaded.head.version, version, "session {i}");
        assert_eq!(loaded.turns.len(), turns, "session {i}");
    }
    again.close().await;
}
