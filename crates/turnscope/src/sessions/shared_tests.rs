//! Two session tables (two replicas, no balancer) over one real `redis-server`: a handle
//! started on one is chatted on the other with its history whole, a replica's stale copy is
//! never used, and calls on one conversation run one at a time across replicas (the lease).
//! `#[ignore]`d: they need the Debian package `redis-server`, which `interop/run` installs.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::*;
use crate::model::{EmbeddedModel, ModelClient, ModelConfig, ScriptSettings};
use crate::store::redis::tests::RedisServer;
use crate::store::redis::{RedisSettings, RedisStore};

async fn replica(server: &RedisServer, model: &EmbeddedModel, id: &str) -> Sessions {
    replica_with(server, model, id, SessionLimits::default()).await
}

async fn replica_with(
    server: &RedisServer,
    model: &EmbeddedModel,
    id: &str,
    limits: SessionLimits,
) -> Sessions {
    let store = RedisStore::open(
        &server.url("shared:"),
        RedisSettings {
            replica: id.into(),
            idle: Duration::from_secs(limits.handle_seconds),
        },
    )
    .await
    .unwrap();
    let bot = Bot::builder(ModelClient::new(ModelConfig::new(model.base_url(), "m")))
        .greeting("Hello there")
        .build();
    let sessions = Sessions::with_store(
        bot,
        Bus::default(),
        limits,
        Replica::new(id.to_string()),
        Arc::new(store),
    );
    // Renews the leases of running turns (and takes other replicas' interrupt requests), as
    // the server's sweeper does.
    sessions.spawn_sweeper();
    sessions
}

/// The scripted model, `pace` s a word, replies of `words` (its own length when `None`).
async fn scripted(pace: f64, words: Option<usize>) -> EmbeddedModel {
    EmbeddedModel::start(0, ScriptSettings { pace, words })
        .await
        .unwrap()
}

/// The scripted model (`pace` s a word, replies of `words`) and replicas r1 and r2 on it.
async fn two_replicas(
    server: &RedisServer,
    pace: f64,
    words: Option<usize>,
) -> (EmbeddedModel, Sessions, Sessions) {
    let model = scripted(pace, words).await;
    let r1 = replica(server, &model, "r1").await;
    let r2 = replica(server, &model, "r2").await;
    (model, r1, r2)
}

/// Makes Redis sleep `seconds` (`DEBUG SLEEP`, on a connection of its own); the task ends
/// when it wakes.
async fn stall(server: &RedisServer, seconds: u32) -> tokio::task::JoinHandle<()> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{}/0", server.port)).unwrap();
    let mut admin = client.get_multiplexed_async_connection().await.unwrap();
    tokio::spawn(async move {
        let _: Result<(), _> = redis::cmd("DEBUG")
            .arg("SLEEP")
            .arg(seconds)
            .query_async(&mut admin)
            .await;
    })
}

/// The store as a replica that only reads it sees it (to check what the replicas wrote).
async fn reader(server: &RedisServer) -> RedisStore {
    RedisStore::open(
        &server.url("shared:"),
        RedisSettings {
            replica: "reader".into(),
            idle: Duration::from_secs(300),
        },
    )
    .await
    .unwrap()
}

/// r1 (every chat a task at once) and r2 over `server`, the scripted model answering 300 words
/// 0.02 s apart (a 6 s turn), a session opened on r1 and its line "first" running there as a
/// task: the model, r1, r2, the handle and the task's id.
async fn a_task_on_r1(server: &RedisServer) -> (EmbeddedModel, Sessions, Sessions, String, String) {
    let model = scripted(0.02, Some(300)).await;
    let at_once = SessionLimits {
        tasks: TaskSettings {
            after: Duration::ZERO,
            ..TaskSettings::default()
        },
        ..SessionLimits::default()
    };
    let r1 = replica_with(server, &model, "r1", at_once).await;
    let r2 = replica(server, &model, "r2").await;
    let handle = r1.open(SessionOpener::Api).await.unwrap().handle();
    let created = task_of(&r1, &handle, "first").await;
    (model, r1, r2, handle, created.id)
}

/// The task `line` on `handle` at `sessions` makes (their task settings make one at once).
async fn task_of(sessions: &Sessions, handle: &str, line: &str) -> TaskRecord {
    let ask = TaskAsk {
        client: "test".into(),
    };
    let outcome = sessions
        .chat_or_task(
            handle,
            line,
            None,
            None,
            CallerWatch::cancel_only(&CancellationToken::new()),
            &ask,
        )
        .await
        .unwrap();
    let ChatOutcome::Task(created) = outcome else {
        panic!("a task: {outcome:?}");
    };
    created
}

/// `line` said on `handle` at `sessions` by a caller waiting for its reply, in the background.
fn said_in_background(
    sessions: &Sessions,
    handle: &str,
    line: &str,
) -> tokio::task::JoinHandle<Result<ChatReply, ChatError>> {
    let (sessions, handle, line) = (sessions.clone(), handle.to_string(), line.to_string());
    tokio::spawn(async move {
        sessions
            .chat(&handle, &line, None, &CancellationToken::new())
            .await
    })
}

/// Polls `task` on `sessions` until it is no longer working (at most `bound`).
async fn until_decided(sessions: &Sessions, task: &str, bound: Duration) -> TaskRecord {
    let deadline = std::time::Instant::now() + bound;
    loop {
        let record = sessions.poll_task(task).await.unwrap();
        if record.status != TaskStatus::Working {
            return record;
        }
        assert!(std::time::Instant::now() < deadline, "still working");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn say(sessions: &Sessions, handle: &str, line: &str) -> ChatReply {
    sessions
        .chat(handle, line, None, &CancellationToken::new())
        .await
        .unwrap()
}

#[tokio::test]
#[ignore = "needs redis-server (interop/run installs it)"]
async fn a_handle_started_on_one_replica_goes_on_on_the_other_with_its_history_whole() {
    let server = RedisServer::start(&[]);
    let (_model, r1, r2) = two_replicas(&server, 0.0, None).await;
    let handle = r1.open(SessionOpener::Api).await.unwrap().handle();
    assert_eq!(r1.list().pop().unwrap().taken_from, None, "born on r1");
    say(&r1, &handle, "my name is Ada").await;
    let mut r2_events = r2.bus().subscribe();
    let reply = say(&r2, &handle, "what did I say").await;
    assert_eq!(reply.reply, "Earlier you said: my name is Ada");
    assert_eq!(reply.turn, Some(2));
    // r2 took it over from r1, and says so in its table and its events.
    assert_eq!(r2.list().pop().unwrap().taken_from.as_deref(), Some("r1"));
    let opened = std::iter::from_fn(|| r2_events.try_recv())
        .find_map(|e| match &*e {
            Event::Session(s) if s.closed.is_none() => Some(s.clone()),
            _ => None,
        })
        .expect("r2 published the session it opened");
    assert!(opened.restored);
    assert_eq!(opened.taken_from.as_deref(), Some("r1"));
    // Back on the first: its copy is one version behind, so it loads the latest, never
    // answering from what it held.
    let reply = say(&r1, &handle, "and then").await;
    assert_eq!(
        reply.turn,
        Some(3),
        "turn numbering goes on across replicas"
    );
    let session = r1.list().pop().unwrap();
    assert!(session.restored, "r1 reloaded it from the store");
    assert_eq!(
        session.taken_from.as_deref(),
        Some("r2"),
        "r2 served it last: r1 takes it back from r2"
    );
    let messages = session.bot().context().messages;
    assert_eq!(messages.len(), 7, "greeting + 3 turns: {messages:?}");
    assert!(
        format!("{messages:?}").contains("what did I say"),
        "r2's turn is in r1's history: {messages:?}"
    );
    // An empty line on the stale r2 reads nothing (r1 read its reply): no stale unread turn.
    assert_eq!(say(&r2, &handle, "").await.end_reason, None);
    assert_eq!(r2.list().pop().unwrap().bot().context().messages.len(), 7);
}

#[tokio::test]
#[ignore = "needs redis-server (interop/run installs it)"]
async fn a_new_line_on_another_replica_interrupts_the_turn_running_elsewhere() {
    let server = RedisServer::start(&[]);
    let (_model, r1, r2) = two_replicas(&server, 0.02, Some(200)).await;
    let handle = r1.open(SessionOpener::Api).await.unwrap().handle();
    // A caller on r1 gives up 50 ms in: its turn (200 words, 4 s) runs on there, holding
    // the lease, with no call of r1 waiting on it.
    let cancel = CancellationToken::new();
    let later = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        later.cancel();
    });
    assert_eq!(
        r1.chat(&handle, "first", None, &cancel).await,
        Err(ChatError::Cancelled)
    );
    let running = r1.list().pop().unwrap().bot().current_turn().unwrap();
    assert!(!running.is_done());
    // A new line on r2 interrupts it, as it would on r1 (never two turns of one handle at
    // once): r1 ends it, writes it as unread and gives the lease back; r2 goes on with it in
    // its history and hands it back as the unread turn, interrupted.
    let reply = say(&r2, &handle, "second").await;
    assert!(running.is_done(), "r2 ran only once r1's turn ended");
    assert_eq!(
        running.snapshot().end,
        Some(crate::bot::TurnEnd::Interrupted)
    );
    assert_eq!(reply.turn, Some(2));
    let unread = reply.unread.expect("r1's unread turn is handed over");
    assert_eq!(unread.end_reason, "interrupted");
    let words = unread.reply.split_whitespace().count();
    assert!(
        (1..200).contains(&words),
        "the partial reply of the interrupted turn: {words} words"
    );
    let messages = r2.list().pop().unwrap().bot().context().messages;
    assert_eq!(messages.len(), 5, "{messages:?}");
}

#[tokio::test]
#[ignore = "needs redis-server (interop/run installs it)"]
async fn a_new_line_on_another_replica_waits_for_a_turn_a_call_there_reads() {
    let server = RedisServer::start(&[]);
    let (_model, r1, r2) = two_replicas(&server, 0.02, Some(40)).await;
    let handle = r1.open(SessionOpener::Api).await.unwrap().handle();
    // A call on r1 reads its turn: calls keep their order across replicas, as on one.
    let first = {
        let (r1, handle) = (r1.clone(), handle.clone());
        tokio::spawn(async move { say(&r1, &handle, "first").await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let second = say(&r2, &handle, "second").await;
    let first = first.await.unwrap();
    assert_eq!(first.end_reason.as_deref(), Some("completed"), "{first:?}");
    assert_eq!(first.reply.split_whitespace().count(), 40);
    assert_eq!(second.turn, Some(2));
    assert!(
        second.unread.is_none(),
        "r1's call read its turn: {second:?}"
    );
}

#[tokio::test]
#[ignore = "needs redis-server (interop/run installs it)"]
async fn a_line_sent_while_redis_is_away_runs_nothing_and_says_so() {
    let durable = ["--appendonly", "yes", "--appendfsync", "always"];
    let mut server = RedisServer::start(&durable);
    let (_model, r1, _r2) = two_replicas(&server, 0.0, None).await;
    let handle = r1.open(SessionOpener::Api).await.unwrap().handle();
    say(&r1, &handle, "my name is Ada").await;
    server.kill();
    let cancel = CancellationToken::new();
    let e = r1
        .chat(&handle, "what did I say", None, &cancel)
        .await
        .unwrap_err();
    // Not "could not be read back": the session is here, the store did not take its mark.
    let text = e.to_string();
    assert!(
        matches!(e, ChatError::StoreAway { .. })
            && text.starts_with("store: the session store did not take this line")
            && text.contains("store redis://127.0.0.1:")
            && text.contains("Call chat again"),
        "{text}"
    );
    // A start: no conversation began, so the next call is start, not chat.
    let e = r1.open(SessionOpener::Api).await.err().expect("no handle");
    let text = e.to_string();
    assert!(
        matches!(e, ChatError::NotStarted { .. })
            && text.starts_with("store: no conversation was started")
            && text.ends_with("Call start again once it answers."),
        "{text}"
    );
    server.restart(&durable);
    // Once Redis answers, the same line runs on the history as it was.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let reply = loop {
        match r1.chat(&handle, "what did I say", None, &cancel).await {
            Ok(reply) => break reply,
            Err(e) if std::time::Instant::now() < deadline => {
                assert!(matches!(e, ChatError::StoreAway { .. }), "{e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("Redis never answered again: {e}"),
        }
    };
    assert_eq!(reply.reply, "Earlier you said: my name is Ada");
    assert_eq!(
        reply.turn,
        Some(2),
        "the line sent while Redis was away never ran"
    );
}

#[tokio::test]
#[ignore = "needs redis-server (interop/run installs it)"]
async fn a_mark_redis_applies_after_its_call_gave_up_is_not_reported_as_a_crash() {
    let server = RedisServer::start(&["--enable-debug-command", "local"]);
    let (_model, r1, _r2) = two_replicas(&server, 0.0, None).await;
    let handle = r1.open(SessionOpener::Api).await.unwrap().handle();
    say(&r1, &handle, "my name is Ada").await;
    // Redis stalls past the response timeout: the line's mark waits in its socket, the call
    // gives up ("nothing ran"), and Redis applies the mark once it wakes.
    let sleeper = stall(&server, 7).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let e = r1
        .chat(
            &handle,
            "line during the stall",
            None,
            &CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, ChatError::StoreAway { .. }), "{e}");
    sleeper.await.unwrap();
    // An empty line first (it takes the lease, not a mark): it finds the mark Redis applied
    // late and goes on from it, rather than taking the copy for stale and the never-run line
    // for one a crash cut off.
    let read = say(&r1, &handle, "").await;
    assert_eq!(read.unread, None, "{read:?}");
    // The next line goes on from the mark Redis applied late: no "turnscope stopped" note
    // for the line that never ran, and no turn of it in the log.
    let reply = say(&r1, &handle, "what did I say").await;
    assert_eq!(reply.unread, None, "{reply:?}");
    assert_eq!(reply.reply, "Earlier you said: my name is Ada");
    let store = reader(&server).await;
    let id = store.key().id_of(&handle.parse().unwrap());
    let turns = store.turns(&id, 0).await.unwrap();
    let lines: Vec<(&str, String)> = turns
        .iter()
        .map(|t| {
            (
                t.record.line.as_str(),
                t.record
                    .end
                    .as_ref()
                    .map(|e| e.label().to_string())
                    .unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        lines,
        [
            ("my name is Ada", "completed".to_string()),
            ("what did I say", "completed".to_string())
        ]
    );
}

#[tokio::test]
#[ignore = "needs redis-server (interop/run installs it)"]
async fn an_unknown_handle_on_a_shared_store_names_the_store_not_routing() {
    let server = RedisServer::start(&[]);
    let (_model, _r1, r2) = two_replicas(&server, 0.0, None).await;
    let e = r2
        .chat(
            "11111111-2222-4333-8444-555555557532",
            "hi",
            None,
            &CancellationToken::new(),
        )
        .await
        .unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("in the session store the replicas share")
            && text.contains("appendonly")
            && !text.contains("route each chat"),
        "{text}"
    );
}

#[tokio::test]
#[ignore = "needs redis-server (interop/run installs it)"]
async fn a_copy_another_replica_went_on_with_does_not_hold_a_slot_at_the_cap() {
    let server = RedisServer::start(&[]);
    let (model, r1, _r2) = two_replicas(&server, 0.0, None).await;
    let limits = SessionLimits {
        cap: 1,
        ..SessionLimits::default()
    };
    let r4 = replica_with(&server, &model, "r4", limits).await;
    let handle = r4.open(SessionOpener::Api).await.unwrap().handle();
    say(&r4, &handle, "my name is Ada").await;
    // r1 goes on with it: r4's copy is stale, and it was r4's only slot.
    say(&r1, &handle, "what did I say").await;
    let opened = r4.open(SessionOpener::Api).await;
    assert!(
        opened.is_ok(),
        "the stale copy made room: {:?}",
        opened.err()
    );
    // The conversation goes on where it is.
    let reply = say(&r1, &handle, "and again").await;
    assert_eq!(reply.turn, Some(3), "{reply:?}");
}

#[tokio::test]
#[ignore = "needs redis-server (interop/run installs it)"]
async fn a_conversation_a_redis_restart_lost_is_said_lost_not_continued_elsewhere() {
    let mut server = RedisServer::start(&[]);
    let (_model, r1, _r2) = two_replicas(&server, 0.0, None).await;
    let handle = r1.open(SessionOpener::Api).await.unwrap().handle();
    say(&r1, &handle, "my name is Ada").await;
    // Redis restarts with no persistence: the conversation r1 holds open is gone from it.
    server.restart(&[]);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let e = loop {
        match r1
            .chat(&handle, "what did I say", None, &CancellationToken::new())
            .await
        {
            // Reconnecting meanwhile.
            Err(ChatError::StoreAway { .. }) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => break e,
            Ok(reply) => panic!("answered from a conversation the store lost: {reply:?}"),
        }
    };
    let text = e.to_string();
    assert!(
        matches!(e, ChatError::NoSession { shared: true, .. }) && text.contains("appendonly"),
        "{text}"
    );
}

#[tokio::test]
#[ignore = "needs redis-server (interop/run installs it)"]
async fn a_turn_whose_lease_lapsed_while_redis_stalled_is_not_answered_as_part_of_the_conversation()
{
    let server = RedisServer::start(&["--enable-debug-command", "local"]);
    let (_model, r1, r2) = two_replicas(&server, 0.02, Some(300)).await;
    let handle = r1.open(SessionOpener::Api).await.unwrap().handle();
    // A 6 s turn on r1, its caller waiting.
    let first = said_in_background(&r1, &handle, "first");
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Redis stalls past the lease (2 s): r1 cannot renew it, so when Redis wakes the lease
    // has lapsed and a new line on r2 takes the conversation, reporting r1's turn as cut off.
    let sleeper = stall(&server, 4).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let second = say(&r2, &handle, "second").await;
    sleeper.await.unwrap();
    let lost = second.unread.expect("r2 reports r1's turn");
    assert_eq!(lost.end_reason, "restarted", "{lost:?}");
    // r1's turn ran on: its reply is not in the conversation r2 went on with, so its caller
    // is not answered as if it were (before: `completed`, the whole reply).
    let first = first.await.unwrap();
    let e = first.expect_err("not answered as a turn of the conversation");
    let text = e.to_string();
    assert!(
        matches!(e, ChatError::Overtaken { turn: 1, .. })
            && text.contains("another replica went on with this conversation")
            && text.contains("You said: first"),
        "{text}"
    );
}

#[tokio::test]
#[ignore = "needs redis-server (interop/run installs it)"]
async fn a_turn_redis_refused_to_save_stays_unread_and_is_saved_when_read() {
    let server = RedisServer::start(&[]);
    let (_model, r1, _r2) = two_replicas(&server, 0.02, Some(50)).await;
    let handle = r1.open(SessionOpener::Api).await.unwrap().handle();
    say(&r1, &handle, "one").await;
    let client = redis::Client::open(format!("redis://127.0.0.1:{}/0", server.port)).unwrap();
    let mut admin = client.get_multiplexed_async_connection().await.unwrap();
    let maxmemory = |bytes: &'static str| {
        let mut admin = admin.clone();
        async move {
            let _: () = redis::cmd("CONFIG")
                .arg("SET")
                .arg("maxmemory")
                .arg(bytes)
                .query_async(&mut admin)
                .await
                .unwrap();
        }
    };
    // Redis fills while turn 2 runs (1 s): its mark was stored, its end is refused.
    let second = {
        let (r1, handle) = (r1.clone(), handle.clone());
        tokio::spawn(async move {
            r1.chat(&handle, "two", None, &CancellationToken::new())
                .await
        })
    };
    // Once its mark is stored (on a loaded machine that may take a while).
    let reader = reader(&server).await;
    let id = reader.key().id_of(&handle.parse().unwrap());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while reader
        .head(&id)
        .await
        .unwrap()
        .is_none_or(|h| h.in_flight.is_none())
    {
        assert!(std::time::Instant::now() < deadline, "turn 2 never began");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    maxmemory("1").await;
    let e = second.await.unwrap().expect_err("not saved, not answered");
    assert!(matches!(e, ChatError::Unsaved { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("this same line again) to read its reply"),
        "{e}"
    );
    assert!(e.to_string().contains("out of memory"), "{e}");
    // Degraded while Redis takes no write, though it answers reads (the probe writes; it
    // counted, so the replica said ok again within half a second of each refusal).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let status = r1.store_status();
    assert!(
        status
            .degraded
            .as_deref()
            .is_some_and(|d| d.contains("out of memory")),
        "{:?}",
        status.degraded
    );
    // A new line while Redis still refuses writes runs nothing, and does not take the
    // unread turn with it (it was dropped with the line's refused mark).
    let e = r1
        .chat(&handle, "a line too soon", None, &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(e, ChatError::StoreAway { .. }), "{e}");
    maxmemory("0").await;
    let _: () = redis::cmd("PING").query_async(&mut admin).await.unwrap();
    // Before: the empty line found nothing to read, and turn 2 was never in the log though
    // the model's history held it. The same line sent again (as the error says a caller may)
    // reads it too, rather than running it twice.
    let read = say(&r1, &handle, "two").await;
    assert_eq!(
        (read.turn, read.end_reason.as_deref(), read.unread.is_none()),
        (Some(2), Some("completed"), true),
        "{read:?}"
    );
    assert!(read.reply.starts_with("You said: two"), "{read:?}");
    let three = say(&r1, &handle, "three").await;
    assert_eq!(
        (three.turn, three.unread.is_none()),
        (Some(3), true),
        "{three:?}"
    );
    let lines: Vec<String> = reader
        .turns(&id, 0)
        .await
        .unwrap()
        .iter()
        .map(|t| t.record.line.clone())
        .collect();
    assert_eq!(lines, ["one", "two", "three"]);
}

#[tokio::test]
#[ignore = "needs redis-server (interop/run installs it)"]
async fn two_replicas_started_with_one_id_are_told_so_in_their_health_and_log() {
    let server = RedisServer::start(&[]);
    let model = scripted(ScriptSettings::default().pace, None).await;
    let first = replica(&server, &model, "same").await;
    let mut log = first.bus().subscribe();
    let second = replica(&server, &model, "same").await;
    // The sweepers probe every half second; each finds the other's write from its second on.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while first.store_status().warning.is_none() || second.store_status().warning.is_none() {
        assert!(std::time::Instant::now() < deadline, "no twin found");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let warning = first.store_status().warning.unwrap();
    assert!(warning.contains("replica \"same\""), "{warning}");
    // Still serving: writes go on, the health is not `degraded` (a balancer keeps both).
    assert_eq!(first.store_status().degraded, None);
    let logged = std::iter::from_fn(|| log.try_recv()).find_map(|e| match &*e {
        Event::Log { level, message, .. } if message.contains("another process serves") => {
            Some(level.clone())
        }
        _ => None,
    });
    assert_eq!(logged.as_deref(), Some("error"), "said once in the Log");
}

#[tokio::test]
#[ignore = "needs redis-server (interop/run installs it)"]
async fn a_copy_another_replica_went_on_with_is_let_go_of_without_a_call() {
    let server = RedisServer::start(&[]);
    let (_model, r1, r2) = two_replicas(&server, 0.0, None).await;
    let handle = r1.open(SessionOpener::Api).await.unwrap().handle();
    say(&r1, &handle, "my name is Ada").await;
    let mut r1_events = r1.bus().subscribe();
    say(&r2, &handle, "what did I say").await;
    // Before: r1 listed its copy open and idle (and counted it against its cap) until a call
    // reached it there. Its sweeper asks the store about idle copies every 5 s.
    let deadline = std::time::Instant::now() + Duration::from_secs(12);
    while !r1.is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "r1 kept its stale copy"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The table lets go of it before its close is told (the bot ends, the store is told):
    // waited for, not read at once (CI caught the race).
    let closed = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(e) = r1_events.recv().await {
            if let Event::Session(s) = &*e
                && s.closed.is_some()
            {
                return s.closed.clone();
            }
        }
        None
    })
    .await
    .expect("its close is told");
    assert_eq!(closed.as_deref(), Some("continued on replica r2"));
    // r2's copy is its own latest: kept. And the conversation goes on on r1 as it was.
    assert_eq!(r2.len(), 1);
    let back = say(&r1, &handle, "and now").await;
    assert_eq!(back.turn, Some(3), "{back:?}");
}

#[tokio::test]
#[ignore = "needs redis-server (interop/run installs it)"]
async fn a_turn_longer_than_the_idle_lifetime_and_a_polled_conversation_stay_stored() {
    let server = RedisServer::start(&[]);
    // Turns of 3 s; conversations Redis drops 2 s after their last write.
    let model = scripted(0.25, Some(12)).await;
    let limits = SessionLimits {
        handle_seconds: 2,
        ..SessionLimits::default()
    };
    let r1 = replica_with(&server, &model, "r1", limits).await;
    let store = reader(&server).await;
    let handle = r1.open(SessionOpener::Api).await.unwrap().handle();
    let id = store.key().id_of(&handle.parse().unwrap());
    say(&r1, &handle, "my name is Ada").await;
    // Before: the head expired under the running turn (no write refreshed it), and the
    // turn's record found no conversation to add to.
    let long = say(&r1, &handle, "tell me more").await;
    assert_eq!(long.turn, Some(2), "{long:?}");
    assert!(
        store.head(&id).await.unwrap().is_some(),
        "kept while it ran"
    );
    // Used here without a write (as a task's polls are) for twice the lifetime: kept.
    for _ in 0..8 {
        let session = r1.table().by_id.values().next().cloned().unwrap();
        session.touch();
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let head = store.head(&id).await.unwrap().expect("kept while polled");
    assert_eq!(head.turns, 2);
    // Unused for longer than the lifetime: gone, as before.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert!(store.head(&id).await.unwrap().is_none(), "expired unused");
}

#[tokio::test]
#[ignore = "needs redis-server (interop/run installs it)"]
async fn a_task_whose_lease_lapsed_while_redis_stalled_does_not_hand_over_its_reply_as_a_turn() {
    let server = RedisServer::start(&["--enable-debug-command", "local"]);
    let (_model, r1, r2, handle, task) = a_task_on_r1(&server).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Redis stalls past the lease: a new line on r2 takes the conversation and reports r1's
    // turn as cut off.
    let sleeper = stall(&server, 4).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let second = say(&r2, &handle, "second").await;
    sleeper.await.unwrap();
    assert_eq!(
        second.unread.expect("r2 reports it").end_reason,
        "restarted"
    );
    // Before: the task completed with the whole reply, a turn the conversation does not hold.
    let done = until_decided(&r1, &task, Duration::from_secs(20)).await;
    match &done.outcome {
        Some(TaskOutcome::Overtaken { message }) => assert!(
            message.contains("another replica went on with this conversation")
                && message.contains("You said: first"),
            "{message}"
        ),
        other => panic!("overtaken: {other:?}"),
    }
}

#[tokio::test]
#[ignore = "needs redis-server (interop/run installs it)"]
async fn a_new_line_on_another_replica_does_not_hand_back_the_turn_a_task_delivers() {
    let server = RedisServer::start(&[]);
    let (_model, r1, r2, handle, task) = a_task_on_r1(&server).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    // A new line on r2 interrupts r1's turn, as it would on one replica: the task delivers
    // the interrupted turn, and the new line's reply does not repeat it as unread (before,
    // both handed it over: a turn read twice).
    let second = say(&r2, &handle, "second").await;
    assert_eq!(second.unread, None, "{second:?}");
    assert!(second.reply.starts_with("You said: second"), "{second:?}");
    let done = until_decided(&r1, &task, Duration::from_secs(10)).await;
    match &done.outcome {
        Some(TaskOutcome::Reply(reply)) => {
            assert_eq!(
                reply.end_reason.as_deref(),
                Some("interrupted"),
                "{reply:?}"
            );
            assert!(reply.reply.starts_with("You said: first"), "{reply:?}");
        }
        other => panic!("the interrupted turn: {other:?}"),
    }
}

#[tokio::test]
#[ignore = "needs redis-server (interop/run installs it)"]
async fn a_task_an_empty_line_made_of_a_running_turn_completes_with_its_reply() {
    let server = RedisServer::start(&[]);
    let (_model, r1, r2, handle, first) = a_task_on_r1(&server).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // An empty line takes the running turn over (the first task completes with the note) and
    // becomes a task of its own: both read the same turn.
    let second = task_of(&r1, &handle, "").await;
    assert_ne!(second.id, first);
    let handed = r1.poll_task(&first).await.unwrap();
    assert_eq!(handed.outcome, Some(TaskOutcome::HandedOver), "{handed:?}");
    // Before: the turn's end went to the first task (already handed over), the second stayed
    // `working` on its replica, was said lost on the other, and r1's draining waited for it.
    let done = until_decided(&r1, &second.id, Duration::from_secs(15)).await;
    match &done.outcome {
        Some(TaskOutcome::Reply(reply)) => {
            assert_eq!(reply.end_reason.as_deref(), Some("completed"), "{reply:?}");
            assert!(reply.reply.starts_with("You said: first"), "{reply:?}");
        }
        other => panic!("the turn's reply: {other:?}"),
    }
    // The other replica answers the same result from the record in Redis (its times read
    // back from JSON: compared by what they say, not to the last bit of a float).
    let elsewhere = r2.poll_task(&second.id).await.unwrap();
    match (&elsewhere.outcome, &done.outcome) {
        (Some(TaskOutcome::Reply(there)), Some(TaskOutcome::Reply(here))) => {
            assert_eq!(
                (&there.reply, there.turn, &there.end_reason),
                (&here.reply, here.turn, &here.end_reason),
                "{elsewhere:?}"
            );
        }
        other => panic!("the same reply on both replicas: {other:?}"),
    }
    assert!(!r1.tasks_awaited(), "its end is in the store");
    // Delivered by the task: an empty line finds nothing left to read.
    let after = say(&r1, &handle, "").await;
    assert_eq!(after.turn, None, "{after:?}");
}

#[tokio::test]
#[ignore = "needs redis-server (interop/run installs it)"]
async fn a_turn_whose_conversation_redis_lost_while_it_ran_is_not_answered_as_kept() {
    let mut server = RedisServer::start(&[]);
    let (_model, r1, _r2) = two_replicas(&server, 0.02, Some(150)).await;
    let handle = r1.open(SessionOpener::Api).await.unwrap().handle();
    // A 3 s turn; Redis restarts without persistence 1 s in: the conversation is gone.
    let turn = said_in_background(&r1, &handle, "first");
    tokio::time::sleep(Duration::from_millis(1000)).await;
    server.restart(&[]);
    // Before: answered as a turn (`completed`), its conversation gone from the store; only
    // the log said so, and the next chat was told to call start.
    let e = turn.await.unwrap().expect_err("not answered as kept");
    let text = e.to_string();
    assert!(
        matches!(e, ChatError::Forgotten { turn: 1, .. })
            && text.contains("no longer holds this conversation")
            && text.contains("You said: first")
            && text.contains("Call start"),
        "{text}"
    );
}

#[tokio::test]
#[ignore = "needs redis-server (interop/run installs it)"]
async fn a_conversation_redis_expired_for_idleness_is_not_reported_as_lost() {
    let server = RedisServer::start(&[]);
    let model = scripted(ScriptSettings::default().pace, None).await;
    let limits = SessionLimits {
        handle_seconds: 2,
        ..SessionLimits::default()
    };
    let r1 = replica_with(&server, &model, "r1", limits).await;
    let mut log = r1.bus().subscribe();
    let handle = r1.open(SessionOpener::Api).await.unwrap().handle();
    say(&r1, &handle, "hello").await;
    // Redis drops it 2 s after its last write; the copies check (every 0.67 s here) finds it
    // gone before the sweep (every 30 s) closes it as idle. Before: reported as a conversation
    // the store lost ("a Redis restarted without persistence"), a warning for nothing.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let blamed = std::iter::from_fn(|| log.try_recv()).any(|e| {
        matches!(&*e, Event::Log { message, .. } if message.contains("no longer holds this conversation"))
    });
    assert!(!blamed, "an idle expiry was reported as a loss");
}

#[tokio::test]
#[ignore = "needs redis-server (interop/run installs it)"]
async fn a_replica_with_a_shorter_lifetime_does_not_sweep_the_others_conversations() {
    let server = RedisServer::start(&[]);
    let model = scripted(ScriptSettings::default().pace, None).await;
    let r1 = replica(&server, &model, "r1").await;
    let short = SessionLimits {
        handle_seconds: 1,
        sweep_every: Duration::from_millis(200),
        ..SessionLimits::default()
    };
    let _r2 = replica_with(&server, &model, "r2", short).await;
    let handle = r1.open(SessionOpener::Api).await.unwrap().handle();
    say(&r1, &handle, "my name is Ada").await;
    // Before: r2's sweep deleted it as idle by r2's own lifetime (1 s), r1's being 300 s.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let store = reader(&server).await;
    let id = store.key().id_of(&handle.parse().unwrap());
    assert!(store.head(&id).await.unwrap().is_some(), "swept by r2");
    let back = say(&r1, &handle, "what did I say").await;
    assert_eq!(back.reply, "Earlier you said: my name is Ada");
}

#[tokio::test]
#[ignore = "needs redis-server (interop/run installs it)"]
async fn a_tasks_cancel_reaching_another_replica_stops_its_turn() {
    let server = RedisServer::start(&[]);
    let (_model, r1, r2, _handle, task) = a_task_on_r1(&server).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Before: acknowledged, and the 6 s turn ran to its end.
    let asked = std::time::Instant::now();
    r2.cancel_task(&task).await.unwrap();
    let done = loop {
        let record = r1.poll_task(&task).await.unwrap();
        if record.status != TaskStatus::Working {
            break record;
        }
        assert!(asked.elapsed() < Duration::from_secs(3), "never stopped");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    match &done.outcome {
        Some(TaskOutcome::Reply(reply)) => {
            assert_eq!(
                reply.end_reason.as_deref(),
                Some("interrupted"),
                "{reply:?}"
            );
        }
        other => panic!("the interrupted turn: {other:?}"),
    }
}

#[tokio::test]
#[ignore = "needs redis-server (interop/run installs it)"]
async fn running_replicas_go_on_by_themselves_after_one_started_since_redis_lost_its_data() {
    let server = RedisServer::start(&[]);
    let (model, r1, r2) = two_replicas(&server, 0.0, None).await;
    let old = r1.open(SessionOpener::Api).await.unwrap().handle();
    say(&r1, &old, "my name is Ada").await;
    // Redis loses its data, and a replica starts before any running one wrote: it makes a
    // new handle key (before, every write of r1 and r2 was refused from then on, "Restart this
    // replica", while their health said ok).
    let client = redis::Client::open(format!("redis://127.0.0.1:{}/0", server.port)).unwrap();
    let mut admin = client.get_multiplexed_async_connection().await.unwrap();
    let () = redis::cmd("FLUSHALL")
        .query_async(&mut admin)
        .await
        .unwrap();
    let r3 = replica(&server, &model, "r3").await;
    // The conversation Redis lost is said lost, naming the likely cause...
    let e = r1
        .chat(&old, "what did I say", None, &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(
        matches!(e, ChatError::NoSession { shared: true, .. })
            && e.to_string().contains("appendonly"),
        "{e}"
    );
    // ...and both running replicas serve new sessions, which every replica reads.
    for (at, other) in [(&r1, &r3), (&r2, &r1), (&r3, &r2)] {
        let handle = at.open(SessionOpener::Api).await.unwrap().handle();
        say(at, &handle, "my name is Bo").await;
        let reply = say(other, &handle, "and again").await;
        assert_eq!(reply.turn, Some(2), "{reply:?}");
    }
    for r in [&r1, &r2, &r3] {
        assert_eq!(r.store_status().degraded, None);
    }
}
