//! Long turns as MCP tasks (the `io.modelcontextprotocol/tasks` extension, SEP-2663): a task
//! is a view of one session's turn, read by `tasks/get` instead of by the `chat` call that
//! waited on it past the grace period ([`TaskSettings::after`]).
//!
//! A turn is read once, whichever way: the task and `chat` agree through the task's stage,
//! changed only under its lock.
//! - Its turn ends (or a poll finds it ended): the task is complete with what the `chat` call
//!   would have returned. The first poll that hands that result over *collects* it: from then
//!   on the turn is gone for `chat` too (an empty line has nothing to read).
//! - An empty line while the task is not yet collected reads the turn itself, as today; the
//!   task completes at once with a note saying so ([`TaskOutcome::HandedOver`]).
//! - A new line interrupts the turn; the task completes with the interrupted turn (its text
//!   so far and the note a model reads), and the new line's reply does not repeat it as unread.
//! - `tasks/cancel` interrupts the turn and the task is `cancelled`; the turn stays unread,
//!   so an empty line still reads what the bot said.
//! - Its conversation closes (the bot's `end_session`, a close from the console): a task whose
//!   result is not collected yet stays readable until the handle's lifetime would have run
//!   out, so a goodbye is not lost; then it goes (an idle conversation's at once: its client
//!   stopped polling a lifetime ago).
//!
//! Task ids are bearer secrets shaped as handles are (UUIDv4, 106 random bits, the replica's
//! tag in the last 4 hex digits, so a balancer routes `tasks/*` by the `Mcp-Name` header); only
//! their first 8 characters reach logs and events. Each record goes to the [`TaskStore`] before
//! the `CreateTaskResult` is sent and at every change a client can see.
//!
//! rmcp's `TaskManager` is not used: it owns a spawned future per task in an in-memory map,
//! while here the turn already runs in the session's pipeline, a task must agree with `chat`
//! about who read it, and its record must live in the session store a shared store can serve
//! from. rmcp's wire types, capability gate and error codes are used as they are (`server`).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use subtle::ConstantTimeEq;
use uuid::Uuid;

use super::task_store::{TaskOutcome, TaskRecord, TaskStatus, TaskStoreError};
use super::{ChatReply, Session, Sessions, UnreadTurn, index_of, progress_text};
use crate::bot::Turn;
use crate::observe::{Event, TaskChange, TaskEvent, event::now_us};

/// When and how `chat` calls become tasks (`[server] tasks`, `task_after_seconds`,
/// `task_poll_seconds`).
#[derive(Debug, Clone, PartialEq)]
pub struct TaskSettings {
    /// Whether the extension is offered at all.
    pub enabled: bool,
    /// How long a `chat` call waits for its turn before answering with a task (0 = at once).
    pub after: Duration,
    /// The poll interval clients are asked to keep (`pollIntervalMs`).
    pub poll: Duration,
}

impl Default for TaskSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            after: Duration::from_secs(10),
            poll: Duration::from_secs(1),
        }
    }
}

/// Most tasks one session keeps; beyond, the oldest is forgotten (its record removed, its id
/// unknown from then on). Only the latest can be working: the others are answered results a
/// client may still poll.
pub const TASKS_PER_SESSION: usize = 16;

/// Why a `tasks/*` request names no task.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaskError {
    /// No task here (or in the store) has this id, or it expired.
    #[error(
        "taskId: no task has this id. Its conversation ended (after {handle_seconds} seconds with no \
         poll or chat call, or it was closed), it was not created by this server, or the replica that \
         ran it is gone. Call chat with an empty line on the conversation's handle to read its turn, \
         or start again."
    )]
    Unknown {
        /// The idle lifetime in force.
        handle_seconds: u64,
    },
}

/// Where a task stands in memory.
enum Stage {
    /// The turn runs: a poll answers `working`.
    Working,
    /// A new line is interrupting the turn; the task's result follows as soon as it ends.
    Superseded,
    /// The result is ready; `collected_ms` once a poll handed it over.
    Ended {
        outcome: TaskOutcome,
        at_ms: u64,
        collected_ms: Option<u64>,
    },
    /// `tasks/cancel` interrupted the turn.
    Cancelled { at_ms: u64 },
}

/// What a session's pending turn is to its task, for the `chat` paths.
pub(super) enum Hold {
    /// The task will hand the turn over (it runs, or its result is not collected yet).
    Keeps,
    /// A poll collected it: the turn is gone.
    Collected,
    /// The task let go (handed over or cancelled): the turn is the session's as before.
    Released,
}

/// One task: the view of one turn of one session.
pub struct TaskCell {
    id: Uuid,
    handle: Uuid,
    session: u64,
    turn: Arc<Turn>,
    /// An earlier unread reply the line of this turn replaced (it goes with the result).
    unread: Option<UnreadTurn>,
    client: String,
    created_ms: u64,
    poll_ms: u64,
    stage: Mutex<Stage>,
    polls: AtomicU32,
    /// Once its session closed: until when it stays (ms since the epoch); 0 while it is open.
    kept_until_ms: AtomicU64,
}

fn now_ms() -> u64 {
    now_us() / 1000
}

impl TaskCell {
    fn stage(&self) -> std::sync::MutexGuard<'_, Stage> {
        self.stage.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The first 8 characters of the id, safe to show.
    pub fn id_prefix(&self) -> String {
        self.id.to_string()[..8].to_string()
    }

    /// Whether this task reads `turn`.
    pub(super) fn reads(&self, turn: &Arc<Turn>) -> bool {
        Arc::ptr_eq(&self.turn, turn)
    }

    pub(super) fn hold(&self) -> Hold {
        match &*self.stage() {
            Stage::Working | Stage::Superseded => Hold::Keeps,
            Stage::Ended {
                outcome: TaskOutcome::Reply(_),
                collected_ms,
                ..
            } => {
                if collected_ms.is_some() {
                    Hold::Collected
                } else {
                    Hold::Keeps
                }
            }
            Stage::Ended { .. } | Stage::Cancelled { .. } => Hold::Released,
        }
    }

    /// A new line arrives: whether the task keeps the turn it interrupts (it then delivers
    /// it, so the new reply does not carry it as unread).
    pub(super) fn supersede(&self) -> bool {
        let mut stage = self.stage();
        match &*stage {
            Stage::Working => {
                *stage = Stage::Superseded;
                true
            }
            Stage::Superseded => true,
            Stage::Ended {
                outcome: TaskOutcome::Reply(_),
                collected_ms: None,
                ..
            } => true,
            _ => false,
        }
    }

    /// Its turn ended: the result is ready. False when it was already decided.
    fn end(&self) -> bool {
        let mut stage = self.stage();
        if !matches!(*stage, Stage::Working | Stage::Superseded) {
            return false;
        }
        *stage = Stage::Ended {
            outcome: TaskOutcome::Reply(Box::new(ChatReply::of(&self.turn, self.unread.clone()))),
            at_ms: now_ms(),
            collected_ms: None,
        };
        true
    }

    /// An empty line wants the turn: whether it may read it, and whether the task changed.
    /// The task completes with a note unless a poll already collected the turn (then it is
    /// gone for the line too).
    fn hand_over(&self) -> (bool, bool) {
        let mut stage = self.stage();
        match &*stage {
            Stage::Ended {
                collected_ms: Some(_),
                outcome: TaskOutcome::Reply(_),
                ..
            } => (false, false),
            Stage::Working
            | Stage::Superseded
            | Stage::Ended {
                outcome: TaskOutcome::Reply(_),
                ..
            } => {
                *stage = Stage::Ended {
                    outcome: TaskOutcome::HandedOver,
                    at_ms: now_ms(),
                    collected_ms: None,
                };
                (true, true)
            }
            Stage::Ended { .. } | Stage::Cancelled { .. } => (true, false),
        }
    }

    /// A poll: the result when there is one, and whether this poll collects it first.
    fn collect(&self) -> bool {
        let mut stage = self.stage();
        if let Stage::Ended { collected_ms, .. } = &mut *stage
            && collected_ms.is_none()
        {
            *collected_ms = Some(now_ms());
            return true;
        }
        false
    }

    /// `tasks/cancel`: whether the task was working (it is cancelled now).
    fn cancel(&self) -> bool {
        let mut stage = self.stage();
        if matches!(*stage, Stage::Working) {
            *stage = Stage::Cancelled { at_ms: now_ms() };
            true
        } else {
            false
        }
    }

    /// The record as of `now`, its lifetime `ttl_ms` from creation.
    fn record(&self, ttl_ms: u64) -> TaskRecord {
        let now = now_ms();
        let stage = self.stage();
        let (status, outcome, ended_ms, collected_ms) = match &*stage {
            Stage::Working | Stage::Superseded => (TaskStatus::Working, None, None, None),
            Stage::Ended {
                outcome,
                at_ms,
                collected_ms,
            } => (
                TaskStatus::Completed,
                Some(outcome.clone()),
                Some(*at_ms),
                *collected_ms,
            ),
            Stage::Cancelled { at_ms } => (TaskStatus::Cancelled, None, Some(*at_ms), None),
        };
        drop(stage);
        let status_message = (status == TaskStatus::Working)
            .then(|| self.turn.with_record(|r| progress_text(&r.reply)));
        TaskRecord {
            id: self.id.to_string(),
            session: self.session,
            turn: self.turn.id,
            client: self.client.clone(),
            status,
            status_message,
            created_ms: self.created_ms,
            updated_ms: now,
            ttl_ms,
            poll_ms: self.poll_ms,
            outcome,
            ended_ms,
            collected_ms,
        }
    }

    /// Whether a client still waits for this task's result (working, or ended and not
    /// collected), which draining waits for.
    fn awaited(&self) -> bool {
        matches!(
            &*self.stage(),
            Stage::Working
                | Stage::Superseded
                | Stage::Ended {
                    collected_ms: None,
                    outcome: TaskOutcome::Reply(_),
                    ..
                }
        )
    }
}

/// Every live task of a table, by id and by session.
#[derive(Default)]
pub(super) struct TaskTable {
    inner: Mutex<TableInner>,
}

#[derive(Default)]
struct TableInner {
    /// By the first 8 bytes of the id; the whole id is compared in constant time.
    by_index: HashMap<u64, Arc<TaskCell>>,
    /// Each session's tasks, oldest first (at most [`TASKS_PER_SESSION`]).
    by_session: HashMap<u64, VecDeque<Arc<TaskCell>>>,
}

impl TaskTable {
    fn lock(&self) -> std::sync::MutexGuard<'_, TableInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn taken(&self, id: &Uuid) -> bool {
        self.lock().by_index.contains_key(&index_of(id))
    }

    /// Adds `cell`; returns the task it pushed out of its session's list, if any.
    fn insert(&self, cell: Arc<TaskCell>) -> Option<Arc<TaskCell>> {
        let mut inner = self.lock();
        inner.by_index.insert(index_of(&cell.id), cell.clone());
        let list = inner.by_session.entry(cell.session).or_default();
        list.push_back(cell);
        let evicted = (list.len() > TASKS_PER_SESSION)
            .then(|| list.pop_front())
            .flatten();
        if let Some(old) = &evicted {
            inner.by_index.remove(&index_of(&old.id));
        }
        evicted
    }

    fn find(&self, id: &str) -> Option<Arc<TaskCell>> {
        if id.len() != 36 {
            return None;
        }
        let uuid = Uuid::parse_str(id).ok()?;
        let found = self.lock().by_index.get(&index_of(&uuid)).cloned()?;
        bool::from(found.id.as_bytes().ct_eq(uuid.as_bytes())).then_some(found)
    }

    /// A session closed: its tasks whose result a client still waits for stay until
    /// `until_ms`; the others are removed and returned.
    fn close_session(&self, session: u64, until_ms: u64) -> Vec<Arc<TaskCell>> {
        let mut inner = self.lock();
        let Some(list) = inner.by_session.get_mut(&session) else {
            return Vec::new();
        };
        let (kept, gone): (VecDeque<_>, VecDeque<_>) =
            std::mem::take(list).into_iter().partition(|c| c.awaited());
        for cell in &kept {
            cell.kept_until_ms.store(until_ms.max(1), Ordering::Relaxed);
        }
        if kept.is_empty() {
            inner.by_session.remove(&session);
        } else {
            inner.by_session.insert(session, kept);
        }
        for cell in &gone {
            inner.by_index.remove(&index_of(&cell.id));
        }
        gone.into()
    }

    /// Removes and returns the tasks of closed sessions kept past `now_ms`.
    fn expired(&self, now_ms: u64) -> Vec<Arc<TaskCell>> {
        let mut inner = self.lock();
        let mut gone = Vec::new();
        inner.by_session.retain(|_, list| {
            list.retain(|c| {
                let until = c.kept_until_ms.load(Ordering::Relaxed);
                let keep = until == 0 || until >= now_ms;
                if !keep {
                    gone.push(c.clone());
                }
                keep
            });
            !list.is_empty()
        });
        for cell in &gone {
            inner.by_index.remove(&index_of(&cell.id));
        }
        gone
    }

    fn any_awaited(&self) -> bool {
        self.lock().by_index.values().any(|c| c.awaited())
    }
}

fn idle_ms(session: &Session) -> u64 {
    session.idle().as_millis().min(u128::from(u64::MAX)) as u64
}

impl Sessions {
    /// When and how `chat` calls become tasks.
    pub fn task_settings(&self) -> &TaskSettings {
        &self.inner.limits.tasks
    }

    /// The session a task's turn belongs to, if still open.
    fn session_of(&self, cell: &TaskCell) -> Option<Arc<Session>> {
        let found = self.table().get(&index_of(&cell.handle)).cloned()?;
        (found.handle == cell.handle).then_some(found)
    }

    /// A task's lifetime from its creation: the time since, plus what is left of its
    /// session's (polls and calls extend it); 0 left once the session is gone.
    fn ttl_ms(&self, cell: &TaskCell, session: Option<&Session>) -> u64 {
        let kept_until = cell.kept_until_ms.load(Ordering::Relaxed);
        if kept_until != 0 {
            return kept_until.saturating_sub(cell.created_ms);
        }
        let lifetime = self.limits().handle_seconds.saturating_mul(1000);
        let left = session.map_or(0, |s| lifetime.saturating_sub(idle_ms(s)));
        now_ms().saturating_sub(cell.created_ms) + left
    }

    /// Makes `turn` (running, pending on `session`) a task for `client`: stores its record
    /// first, then tables it and watches the turn's end.
    ///
    /// # Errors
    /// The store could not keep the record; the caller answers synchronously instead.
    pub(super) async fn open_task(
        &self,
        session: &Session,
        turn: &Arc<Turn>,
        unread: Option<UnreadTurn>,
        client: &str,
    ) -> Result<(Arc<TaskCell>, TaskRecord), TaskStoreError> {
        let replica = self.replica();
        let mut id = replica.stamp(Uuid::new_v4());
        while self.inner.tasks.taken(&id) {
            id = replica.stamp(Uuid::new_v4());
        }
        let settings = self.task_settings();
        let cell = Arc::new(TaskCell {
            id,
            handle: session.handle,
            session: session.number,
            turn: turn.clone(),
            unread,
            client: client.to_string(),
            created_ms: now_ms(),
            poll_ms: settings.poll.as_millis().max(1) as u64,
            stage: Mutex::new(Stage::Working),
            polls: AtomicU32::new(0),
            kept_until_ms: AtomicU64::new(0),
        });
        let record = cell.record(self.ttl_ms(&cell, Some(session)));
        // Durable creation: the record is where any replica sharing the store finds it
        // before the client learns its id.
        self.inner.task_store.put_task(&record).await?;
        if let Some(old) = self.inner.tasks.insert(cell.clone()) {
            self.remove_task(&old).await;
        }
        self.publish_task(&cell, TaskChange::Created, &record);
        tracing::info!(session = cell.session, task = %cell.id_prefix(), client, "chat call became a task");
        let sessions = self.clone();
        let watched = cell.clone();
        tokio::spawn(async move {
            watched.turn.done().await;
            sessions.settle(&watched).await;
        });
        Ok((cell, record))
    }

    /// Ends `cell` if its turn ended (nothing when it was decided already).
    async fn settle(&self, cell: &Arc<TaskCell>) {
        if cell.turn.is_done() && cell.end() {
            self.task_changed(cell, TaskChange::Ended).await;
        }
    }

    /// A new line took the turn of a task that keeps it: its result is the interrupted turn.
    pub(super) async fn superseded(&self, cell: &Arc<TaskCell>) {
        self.settle(cell).await;
    }

    /// An empty line wants the turn of `cell`: whether it may read it.
    pub(super) async fn hand_over(&self, cell: &Arc<TaskCell>) -> bool {
        let (may, changed) = cell.hand_over();
        if changed {
            self.task_changed(cell, TaskChange::HandedOver).await;
        }
        may
    }

    /// Writes the record of `cell` as it stands and publishes the change.
    async fn task_changed(&self, cell: &Arc<TaskCell>, change: TaskChange) {
        let session = self.session_of(cell);
        let record = cell.record(self.ttl_ms(cell, session.as_deref()));
        if let Err(e) = self.inner.task_store.put_task(&record).await {
            tracing::warn!(task = %cell.id_prefix(), error = %e, "task record not updated; this replica still answers its polls");
        }
        self.publish_task(cell, change, &record);
        if matches!(
            change,
            TaskChange::Ended | TaskChange::Cancelled | TaskChange::HandedOver
        ) {
            tracing::info!(session = cell.session, task = %cell.id_prefix(), change = ?change, "task {}", record.status.label());
        }
    }

    fn publish_task(&self, cell: &TaskCell, change: TaskChange, record: &TaskRecord) {
        self.bus().publish_with(|| {
            Event::Task(TaskEvent {
                session: cell.session,
                turn: cell.turn.id,
                task: cell.id_prefix(),
                client: cell.client.clone(),
                change,
                status: record.status.label().into(),
                end_reason: match &record.outcome {
                    Some(TaskOutcome::Reply(reply)) => reply.end_reason.clone(),
                    Some(TaskOutcome::HandedOver) => Some("handed_over".into()),
                    None => None,
                },
                polls: cell.polls.load(Ordering::Relaxed),
                at_us: now_us(),
            })
        });
    }

    async fn remove_task(&self, cell: &Arc<TaskCell>) {
        if let Err(e) = self
            .inner
            .task_store
            .remove_task(&cell.id.to_string())
            .await
        {
            tracing::warn!(task = %cell.id_prefix(), error = %e, "task record not removed");
        }
        let record = cell.record(0);
        self.publish_task(cell, TaskChange::Removed, &record);
    }

    /// A session closed (its turn ended): its tasks whose result is not collected stay until
    /// the handle's lifetime would have run out; the others go now, with their records.
    pub(super) async fn close_tasks(&self, session: &Session) {
        let lifetime = self.limits().handle_seconds.saturating_mul(1000);
        let until = now_ms() + lifetime.saturating_sub(idle_ms(session));
        let cells = self
            .inner
            .tasks
            .lock()
            .by_session
            .get(&session.number)
            .cloned();
        for cell in cells.unwrap_or_default() {
            self.settle(&cell).await;
        }
        for cell in self.inner.tasks.close_session(session.number, until) {
            self.remove_task(&cell).await;
        }
    }

    /// Removes the tasks of closed sessions whose time ran out (the sweep's).
    pub(super) async fn sweep_tasks(&self) {
        for cell in self.inner.tasks.expired(now_ms()) {
            self.remove_task(&cell).await;
        }
    }

    /// Whether a client still waits for a task's result (draining waits for it).
    pub(super) fn tasks_awaited(&self) -> bool {
        self.inner.tasks.any_awaited()
    }

    /// `tasks/get`: the task as it stands, counted as activity on its session. A task this
    /// replica does not hold is answered from the store (another replica's, when shared).
    ///
    /// # Errors
    /// No live task and no unexpired record has this id.
    pub async fn poll_task(&self, id: &str) -> Result<TaskRecord, TaskError> {
        let Some(cell) = self.inner.tasks.find(id) else {
            return self.stored_task(id).await;
        };
        let kept_until = cell.kept_until_ms.load(Ordering::Relaxed);
        if kept_until != 0 && kept_until < now_ms() {
            self.sweep_tasks().await;
            return Err(TaskError::Unknown {
                handle_seconds: self.limits().handle_seconds,
            });
        }
        let session = self.session_of(&cell);
        if let Some(s) = &session {
            s.touch();
        }
        self.settle(&cell).await;
        cell.polls.fetch_add(1, Ordering::Relaxed);
        if cell.collect() {
            self.task_changed(&cell, TaskChange::Collected).await;
        }
        let record = cell.record(self.ttl_ms(&cell, session.as_deref()));
        self.publish_task(&cell, TaskChange::Polled, &record);
        Ok(record)
    }

    async fn stored_task(&self, id: &str) -> Result<TaskRecord, TaskError> {
        let unknown = TaskError::Unknown {
            handle_seconds: self.limits().handle_seconds,
        };
        if Uuid::parse_str(id).is_err() {
            return Err(unknown);
        }
        match self.inner.task_store.get_task(id).await {
            Ok(Some(record)) if !record.expired(now_ms()) => Ok(record),
            Ok(_) => Err(unknown),
            Err(e) => {
                tracing::warn!(error = %e, "task store unreadable; answering the poll as an unknown task");
                Err(unknown)
            }
        }
    }

    /// `tasks/cancel`: interrupts the turn of a working task (the person stopped it); the
    /// task is `cancelled` and the turn stays unread. A task already decided is left as it is.
    /// A task only the store knows (another replica runs it) is acknowledged and left to run.
    ///
    /// # Errors
    /// No task has this id.
    pub async fn cancel_task(&self, id: &str) -> Result<(), TaskError> {
        let Some(cell) = self.inner.tasks.find(id) else {
            return self.stored_task(id).await.map(|_| ());
        };
        let session = self.session_of(&cell);
        if let Some(s) = &session {
            s.touch();
        }
        if cell.cancel() {
            if let Some(s) = &session
                && s.bot.current_turn().is_some_and(|t| cell.reads(&t))
            {
                s.bot.interrupt().await;
            }
            self.task_changed(&cell, TaskChange::Cancelled).await;
        }
        Ok(())
    }

    /// `tasks/update`: this server asks for no input, so there is nothing to take; checks
    /// only that the task exists.
    ///
    /// # Errors
    /// No task has this id.
    pub async fn known_task(&self, id: &str) -> Result<(), TaskError> {
        if self.inner.tasks.find(id).is_some() {
            return Ok(());
        }
        self.stored_task(id).await.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use async_trait::async_trait;
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::bot::Bot;
    use crate::model::{EmbeddedModel, ModelClient, ModelConfig, ScriptSettings};
    use crate::observe::{Bus, SessionOpener};
    use crate::sessions::task_store::{MemoryTaskStore, TaskStore};
    use crate::sessions::{ChatOutcome, SessionLimits, TaskAsk};

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

    async fn sessions(model: &EmbeddedModel, replica: &str, store: Arc<dyn TaskStore>) -> Sessions {
        let bot = Bot::builder(ModelClient::new(ModelConfig::new(model.base_url(), "m"))).build();
        let limits = SessionLimits {
            tasks: TaskSettings {
                after: Duration::ZERO,
                ..TaskSettings::default()
            },
            ..SessionLimits::default()
        };
        Sessions::with_task_store(
            bot,
            Bus::default(),
            limits,
            crate::sessions::Replica::new(replica),
            store,
        )
    }

    fn ask() -> TaskAsk {
        TaskAsk {
            client: "test".into(),
        }
    }

    #[tokio::test]
    async fn a_replica_sharing_the_store_answers_a_poll_from_the_record() {
        let model = EmbeddedModel::start(
            0,
            ScriptSettings {
                pace: 0.01,
                words: Some(20),
            },
        )
        .await
        .unwrap();
        let store: Arc<dyn TaskStore> = Arc::new(MemoryTaskStore::default());
        let a = sessions(&model, "a", store.clone()).await;
        let b = sessions(&model, "b", store.clone()).await;
        let session = a.open(SessionOpener::Api).unwrap();
        let outcome = a
            .chat_or_task(
                &session.handle(),
                "hello",
                None,
                &CancellationToken::new(),
                &ask(),
            )
            .await
            .unwrap();
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
        let Some(TaskOutcome::Reply(reply)) = &ended.outcome else {
            panic!("{ended:?}");
        };
        assert!(reply.reply.starts_with("You said: hello"));
        // Collected on its own replica, then its conversation ends: the record goes with it,
        // on every replica.
        a.poll_task(&created.id).await.unwrap();
        a.close(&session, "test").await;
        assert!(b.poll_task(&created.id).await.is_err());
        assert!(a.poll_task(&created.id).await.is_err());
    }

    #[tokio::test]
    async fn a_result_not_collected_outlives_its_conversation_for_the_handles_lifetime() {
        let model = EmbeddedModel::start(
            0,
            ScriptSettings {
                pace: 0.01,
                words: Some(10),
            },
        )
        .await
        .unwrap();
        let store = Arc::new(MemoryTaskStore::default());
        let bot = Bot::builder(ModelClient::new(ModelConfig::new(model.base_url(), "m"))).build();
        let limits = SessionLimits {
            handle_seconds: 1,
            tasks: TaskSettings {
                after: Duration::ZERO,
                ..TaskSettings::default()
            },
            ..SessionLimits::default()
        };
        let s = Sessions::with_task_store(
            bot,
            Bus::default(),
            limits,
            crate::sessions::Replica::new("a"),
            store.clone(),
        );
        let session = s.open(SessionOpener::Api).unwrap();
        let ChatOutcome::Task(created) = s
            .chat_or_task(
                &session.handle(),
                "goodbye",
                None,
                &CancellationToken::new(),
                &ask(),
            )
            .await
            .unwrap()
        else {
            panic!("a task");
        };
        // The conversation closes before anyone polled (a bot's end_session does that).
        session.turns().pop().unwrap().done().await;
        s.close(&session, "ended by the bot").await;
        let kept = s.poll_task(&created.id).await.unwrap();
        assert_eq!(kept.status, TaskStatus::Completed);
        assert!(kept.ttl_ms <= 1_000 + (kept.updated_ms - kept.created_ms));
        let Some(TaskOutcome::Reply(reply)) = &kept.outcome else {
            panic!("{kept:?}");
        };
        assert!(
            reply.reply.starts_with("You said: goodbye"),
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
        let model = EmbeddedModel::start(
            0,
            ScriptSettings {
                pace: 0.01,
                words: Some(20),
            },
        )
        .await
        .unwrap();
        let s = sessions(&model, "a", Arc::new(Refusing)).await;
        let session = s.open(SessionOpener::Api).unwrap();
        let outcome = s
            .chat_or_task(
                &session.handle(),
                "hello",
                None,
                &CancellationToken::new(),
                &ask(),
            )
            .await
            .unwrap();
        let ChatOutcome::Reply(reply) = outcome else {
            panic!("no task without its record: {outcome:?}");
        };
        assert!(reply.reply.starts_with("You said: hello"));
        assert_eq!(reply.end_reason.as_deref(), Some("completed"));
    }

    #[tokio::test]
    async fn a_session_keeps_its_latest_tasks_only() {
        let model = EmbeddedModel::start(
            0,
            ScriptSettings {
                pace: 0.0,
                words: Some(3),
            },
        )
        .await
        .unwrap();
        let store = Arc::new(MemoryTaskStore::default());
        let s = sessions(&model, "a", store.clone()).await;
        let session = s.open(SessionOpener::Api).unwrap();
        let mut ids = Vec::new();
        while ids.len() < TASKS_PER_SESSION + 3 {
            // A zero-pace turn may end before the grace period's first look: only tasks count.
            if let ChatOutcome::Task(r) = s
                .chat_or_task(
                    &session.handle(),
                    "x",
                    None,
                    &CancellationToken::new(),
                    &ask(),
                )
                .await
                .unwrap()
            {
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
}
