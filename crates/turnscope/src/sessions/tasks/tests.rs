//! The task table's semantics on real sessions (the embedded model): a shared store, a store
//! that refuses, the per-session bound, a result outliving its conversation.

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::bot::Bot;
use crate::model::{EmbeddedModel, ModelClient, ModelConfig, ScriptSettings};
use crate::observe::{Bus, SessionOpener};
use crate::sessions::task_store::{MemoryTaskStore, TaskStatus, TaskStore};
use crate::sessions::{ChatOutcome, ChatReply, Replica, SessionLimits, TaskAsk};

/// A store that refuses every write.
struct Refusing;

#[async_trait]
impl TaskStore for Refusing {
    async fn put_task(&self, _: &TaskRecord) -> Result<(), TaskStoreError> {
        Err(TaskStoreError::Backend("disk full".into()))
    }
    async fn get_task(&self, _: &str) -> Result<Option<TaskRecord>, TaskStoreError> {
        Ok(None)
    }
    async fn remove_task(&self, _: &str) -> Result<(), TaskStoreError> {
        Ok(())
    }
}

/// The embedded model answering `words` words `pace` seconds apart.
async fn model(pace: f64, words: usize) -> EmbeddedModel {
    EmbeddedModel::start(
        0,
        ScriptSettings {
            pace,
            words: Some(words),
        },
    )
    .await
    .expect("the embedded model starts")
}

/// A table of replica `replica` on `model` making every such `chat` a task at once, its
/// handles living `handle_seconds`, its task records in `store`.
fn sessions(
    model: &EmbeddedModel,
    replica: &str,
    handle_seconds: u64,
    store: Arc<dyn TaskStore>,
) -> Sessions {
    let bot = Bot::builder(ModelClient::new(ModelConfig::new(model.base_url(), "m"))).build();
    let limits = SessionLimits {
        handle_seconds,
        tasks: TaskSettings {
            after: Duration::ZERO,
            ..TaskSettings::default()
        },
        ..SessionLimits::default()
    };
    let sessions = Arc::new(crate::store::memory::MemoryStore::new());
    Sessions::with_stores(
        bot,
        Bus::default(),
        limits,
        Replica::new(replica),
        sessions,
        store,
    )
}

/// `line` said on `session` by a client declaring the tasks extension.
async fn say(s: &Sessions, session: &Session, line: &str) -> ChatOutcome {
    let ask = TaskAsk {
        client: "test".into(),
    };
    s.chat_or_task(
        &session.handle(),
        line,
        None,
        None,
        crate::sessions::CallerWatch::cancel_only(&CancellationToken::new()),
        &ask,
    )
    .await
    .expect("the chat is served")
}

fn reply_of(record: &TaskRecord) -> &ChatReply {
    match &record.outcome {
        Some(TaskOutcome::Reply(reply)) => reply,
        _ => panic!("a reply: {record:?}"),
    }
}

#[tokio::test]
async fn a_replica_sharing_the_store_answers_a_poll_from_the_record() {
    let model = model(0.01, 20).await;
    let store: Arc<dyn TaskStore> = Arc::new(MemoryTaskStore::default());
    let a = sessions(&model, "a", 300, store.clone());
    let b = sessions(&model, "b", 300, store.clone());
    let session = a.open(SessionOpener::Api).await.unwrap();
    let outcome = say(&a, &session, "hello").await;
    let ChatOutcome::Task(created) = outcome else {
        panic!("a task: {outcome:?}");
    };
    // Stored before the caller learnt the id: the other replica finds it at once.
    let seen = b.poll_task(&created.id).await.unwrap();
    assert_eq!(seen.status, TaskStatus::Working);
    assert_eq!(seen.id, created.id);
    session.turns().pop().unwrap().done().await;
    let ended = loop {
        let r = b.poll_task(&created.id).await.unwrap();
        if r.status == TaskStatus::Completed {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert!(reply_of(&ended).reply.starts_with("You said: hello"));
    // Collected on its own replica, then its conversation ends: the record goes with it,
    // on every replica.
    a.poll_task(&created.id).await.unwrap();
    a.close(&session, "test").await;
    assert!(b.poll_task(&created.id).await.is_err());
    assert!(a.poll_task(&created.id).await.is_err());
}

#[tokio::test]
async fn a_result_not_collected_outlives_its_conversation_for_the_handles_lifetime() {
    let model = model(0.01, 10).await;
    let store = Arc::new(MemoryTaskStore::default());
    let s = sessions(&model, "a", 1, store.clone());
    let session = s.open(SessionOpener::Api).await.unwrap();
    let ChatOutcome::Task(created) = say(&s, &session, "goodbye").await else {
        panic!("a task");
    };
    // The conversation closes before anyone polled (a bot's end_session does that).
    session.turns().pop().unwrap().done().await;
    s.close(&session, "ended by the bot").await;
    let kept = s.poll_task(&created.id).await.unwrap();
    assert_eq!(kept.status, TaskStatus::Completed);
    assert!(kept.ttl_ms <= 1_000 + (now_ms() - kept.created_ms));
    assert!(
        reply_of(&kept).reply.starts_with("You said: goodbye"),
        "the goodbye is not lost"
    );
    // Once the handle's lifetime would have run out, it goes, record and all.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    s.sweep().await;
    assert!(s.poll_task(&created.id).await.is_err());
    assert!(store.is_empty());
}

#[tokio::test]
async fn a_task_whose_record_cannot_be_stored_is_answered_synchronously() {
    let model = model(0.01, 20).await;
    let s = sessions(&model, "a", 300, Arc::new(Refusing));
    let session = s.open(SessionOpener::Api).await.unwrap();
    let outcome = say(&s, &session, "hello").await;
    let ChatOutcome::Reply(reply) = outcome else {
        panic!("no task without its record: {outcome:?}");
    };
    assert!(reply.reply.starts_with("You said: hello"));
    assert_eq!(reply.end_reason.as_deref(), Some("completed"));
}

#[tokio::test]
async fn a_session_keeps_its_latest_tasks_only() {
    let model = model(0.0, 3).await;
    let store = Arc::new(MemoryTaskStore::default());
    let s = sessions(&model, "a", 300, store.clone());
    let session = s.open(SessionOpener::Api).await.unwrap();
    let mut ids = Vec::new();
    while ids.len() < TASKS_PER_SESSION + 3 {
        // A zero-pace turn may end before the grace period's first look: only tasks count.
        if let ChatOutcome::Task(r) = say(&s, &session, "x").await {
            ids.push(r.id);
        }
    }
    assert_eq!(store.len(), TASKS_PER_SESSION);
    assert!(
        s.poll_task(&ids[0]).await.is_err(),
        "the oldest is forgotten"
    );
    assert!(s.poll_task(ids.last().unwrap()).await.is_ok());
}

/// A table of replica `a` over the session store `kept` (a restart finds it again), making
/// every such `chat` a task at once.
fn table_over(model: &EmbeddedModel, kept: Arc<dyn crate::store::SessionStore>) -> Sessions {
    let bot = Bot::builder(ModelClient::new(ModelConfig::new(model.base_url(), "m"))).build();
    let limits = SessionLimits {
        tasks: TaskSettings {
            after: Duration::ZERO,
            ..TaskSettings::default()
        },
        ..SessionLimits::default()
    };
    let tasks = Arc::new(MemoryTaskStore::default());
    Sessions::with_stores(bot, Bus::default(), limits, Replica::new("a"), kept, tasks)
}

/// Waits until the stored head of `session` names `want` as its unread turn.
async fn stored_unread(
    kept: &dyn crate::store::SessionStore,
    session: &Session,
    want: Option<u64>,
) {
    let mut seen = None;
    for _ in 0..300 {
        seen = kept.head(&session.id()).await.unwrap().map(|h| h.unread);
        if seen == Some(want) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("stored unread turn {seen:?}, expected {want:?}");
}

#[tokio::test]
async fn the_session_store_keeps_a_tasks_turn_unread_until_a_poll_collects_it() {
    let model = model(0.01, 10).await;
    let kept: Arc<dyn crate::store::SessionStore> =
        Arc::new(crate::store::memory::MemoryStore::new());
    let before = table_over(&model, kept.clone());
    let collected = before.open(SessionOpener::Api).await.unwrap();
    let left = before.open(SessionOpener::Api).await.unwrap();
    let ChatOutcome::Task(polled) = say(&before, &collected, "first").await else {
        panic!("a task");
    };
    let ChatOutcome::Task(unpolled) = say(&before, &left, "second").await else {
        panic!("a task");
    };
    // Ended, nobody read them yet: both are stored as unread.
    collected.turns().pop().unwrap().done().await;
    left.turns().pop().unwrap().done().await;
    stored_unread(&*kept, &collected, Some(polled.turn)).await;
    stored_unread(&*kept, &left, Some(unpolled.turn)).await;
    // A poll collects the first: the store says it was read, as a chat call's reading would.
    let done = before.poll_task(&polled.id).await.unwrap();
    assert_eq!(done.status, TaskStatus::Completed);
    stored_unread(&*kept, &collected, None).await;
    // After a restart, the collected turn is not delivered again; the other one is, once.
    let after = table_over(&model, kept.clone());
    let none = CancellationToken::new();
    let again = after
        .chat(&collected.handle(), "", None, &none)
        .await
        .unwrap();
    assert_eq!(again.turn, None, "read by the poll: {again:?}");
    let unread = after.chat(&left.handle(), "", None, &none).await.unwrap();
    assert_eq!(unread.turn, Some(unpolled.turn));
    assert!(unread.reply.starts_with("You said: second"), "{unread:?}");
    let twice = after.chat(&left.handle(), "", None, &none).await.unwrap();
    assert_eq!(twice.turn, None);
}
