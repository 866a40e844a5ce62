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
//! the `CreateTaskResult` is sent and at every change a client can see. The session store
//! keeps the task's turn as any other: unread once it ends, read once a poll collects it (on a
//! store the replicas share, read once it ends: the task's record there delivers it).
//!
//! rmcp's `TaskManager` is not used: it owns a spawned future per task in an in-memory map,
//! while here the turn already runs in the session's pipeline, a task must agree with `chat`
//! about who read it, and its record must be where a replica sharing the store can serve it
//! from (the [`TaskStore`]). rmcp's wire types, capability gate and error codes are used as they are (`server`).

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use uuid::Uuid;

use super::task_store::{TaskOutcome, TaskRecord, TaskStatus, TaskStoreError};
use super::{Session, Sessions, UnreadTurn};
use crate::bot::Turn;
use crate::observe::{Event, TaskChange, TaskEvent, event::now_us};

mod cell;
#[cfg(test)]
mod tests;

pub(in crate::sessions) use cell::{Hold, TaskCell, TaskTable};
use cell::{Stage, now_ms};

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

/// How long a task another replica runs is watched without its lease before it is said
/// lost ([`Sessions::unless_lost`]).
const LOST_AFTER: Duration = Duration::from_secs(1);

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
         poll or chat call, or it was closed), or it was not created here; without a store the \
         replicas share, also when this server restarted since or the replica that ran it is gone \
         (its conversation may outlive it: a store keeps it). Call chat with an empty line on the \
         conversation's handle to read its turn, or start again."
    )]
    Unknown {
        /// The idle lifetime in force.
        handle_seconds: u64,
    },
    /// The id is not one a task has (a UUID, 36 characters): a typo, a cut, or another id.
    #[error(
        "taskId: \"{given}\" is not a task id: expected the 36-character id (a UUID) that chat's \
         CreateTaskResult gave, received {length} characters. Copy it whole"
    )]
    Malformed {
        /// Its first 8 characters (ids are secrets).
        given: String,
        /// How many characters it has.
        length: usize,
    },
}

impl TaskError {
    /// The error for an id that does not parse as a task id.
    fn malformed(id: &str) -> Self {
        TaskError::Malformed {
            given: id.chars().take(8).collect(),
            length: id.chars().count(),
        }
    }
}

fn idle_ms(session: &Session) -> u64 {
    session.idle().as_millis().min(u128::from(u64::MAX)) as u64
}

impl Sessions {
    /// When and how `chat` calls become tasks (a copy of the limits in force).
    pub fn task_settings(&self) -> TaskSettings {
        self.inner.limits.load().tasks.clone()
    }

    /// The session a task's turn belongs to, if still open.
    fn session_of(&self, cell: &TaskCell) -> Option<Arc<Session>> {
        self.live(&cell.session_id, &cell.handle)
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
    pub(in crate::sessions) async fn open_task(
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
            session_id: session.id,
            session: session.number,
            turn: turn.clone(),
            unread,
            client: client.to_string(),
            replica: replica.id().to_string(),
            holder: self.inner.storage.store().holder(),
            created_ms: now_ms(),
            poll_ms: settings.poll.as_millis().max(1) as u64,
            stage: Mutex::new(Stage::Working),
            polls: AtomicU32::new(0),
            kept_until_ms: AtomicU64::new(0),
            write_first: std::sync::atomic::AtomicBool::new(self.inner.storage.shared()),
            end_stored: std::sync::atomic::AtomicBool::new(false),
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

    /// Ends `cell` if its turn ended (nothing when it was decided already, or while its turn
    /// waits for its write on a shared store).
    async fn settle(&self, cell: &Arc<TaskCell>) {
        if cell.turn.is_done() && !cell.write_first.load(Ordering::Acquire) && cell.end() {
            self.task_changed(cell, TaskChange::Ended).await;
        }
    }

    /// A new line took the turn of a task that keeps it: its result is the interrupted turn.
    pub(in crate::sessions) async fn superseded(&self, cell: &Arc<TaskCell>) {
        cell.write_first.store(false, Ordering::Release);
        self.settle(cell).await;
    }

    /// Writes the records of `session`'s working tasks again (their lifetime, the reply so
    /// far), so the store keeps them while their turn runs past the lifetime they were written
    /// with.
    pub(in crate::sessions) async fn keep_working_tasks(&self, session: &Session) {
        for cell in self.inner.tasks.cells_of(session.number) {
            if !matches!(&*cell.stage(), Stage::Working | Stage::Superseded) {
                continue;
            }
            let record = cell.record(self.ttl_ms(&cell, Some(session)));
            if let Err(e) = self.inner.task_store.replace_working(&record).await {
                tracing::debug!(task = %cell.id_prefix(), error = %e, "a working task's record not kept");
            }
        }
    }

    /// Whether a task still to be answered (working, not cancelled nor handed over) reads
    /// `turn` on `session`: on a shared store it delivers the turn (its record, result and
    /// all, is in the store), so the turn is written as read.
    pub(in crate::sessions) fn task_delivers(&self, session: &Session, turn: &Arc<Turn>) -> bool {
        self.cell_reading(session, turn)
            .is_some_and(|c| matches!(&*c.stage(), Stage::Working | Stage::Superseded))
    }

    /// The task reading `turn` on `session`, if one does: the latest that does. An empty
    /// line that took a task's turn over and became a task itself reads the same turn, and
    /// the turn is its now (the first completed as handed over); the turn's end and its write
    /// go to it, or on a shared store it stayed `working` for good.
    fn cell_reading(&self, session: &Session, turn: &Arc<Turn>) -> Option<Arc<TaskCell>> {
        self.inner
            .tasks
            .cells_of(session.number)
            .into_iter()
            .rev()
            .find(|c| c.reads(turn))
    }

    /// The turn of the task reading `turn` on `session` was written (or another call wrote
    /// it): the task may end now. `overtaken`: the write found that another replica went on
    /// with the conversation without it, and the task says so (what a `chat` call is told)
    /// instead of handing over a reply the conversation does not hold.
    pub(in crate::sessions) async fn task_turn_written(
        &self,
        session: &Session,
        turn: &Arc<Turn>,
        overtaken: Option<String>,
    ) {
        let Some(cell) = self.cell_reading(session, turn) else {
            return;
        };
        cell.write_first.store(false, Ordering::Release);
        match overtaken {
            Some(message) => {
                if cell.end_with(TaskOutcome::Overtaken { message }) {
                    self.task_changed(&cell, TaskChange::Ended).await;
                }
            }
            None => self.settle(&cell).await,
        }
    }

    /// An empty line wants the turn of `cell`: whether it may read it.
    pub(in crate::sessions) async fn hand_over(&self, cell: &Arc<TaskCell>) -> bool {
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
        match self.inner.task_store.put_task(&record).await {
            Ok(()) if record.status != TaskStatus::Working => {
                cell.end_stored.store(true, Ordering::Release);
            }
            Ok(()) => {}
            Err(e) => {
                tracing::warn!(task = %cell.id_prefix(), error = %e, "task record not updated; this replica still answers its polls");
            }
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
                    Some(TaskOutcome::Lost { .. }) => Some("lost".into()),
                    Some(TaskOutcome::Overtaken { .. }) => Some("overtaken".into()),
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
    pub(in crate::sessions) async fn close_tasks(&self, session: &Session) {
        let lifetime = self.limits().handle_seconds.saturating_mul(1000);
        let until = now_ms() + lifetime.saturating_sub(idle_ms(session));
        for cell in self.inner.tasks.cells_of(session.number) {
            self.settle(&cell).await;
        }
        for cell in self.inner.tasks.close_session(session.number, until) {
            self.remove_task(&cell).await;
        }
    }

    /// Removes the tasks of closed sessions whose time ran out (the sweep's).
    pub(in crate::sessions) async fn sweep_tasks(&self) {
        for cell in self.inner.tasks.expired(now_ms()) {
            self.remove_task(&cell).await;
        }
    }

    /// Whether a client still waits for a task's result (draining waits for it). On a store
    /// the replicas share, only while a task's record does not hold its end yet: the others
    /// answer its polls from the record once this replica is gone (behind the recipe a
    /// draining replica gets no poll: its health says 503), so draining waited its whole
    /// bound for polls that could not arrive.
    pub(in crate::sessions) fn tasks_awaited(&self) -> bool {
        self.inner.tasks.any_awaited(self.inner.storage.shared())
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
            if let Some(s) = &session {
                self.record_collected(s.clone());
            }
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
            return Err(TaskError::malformed(id));
        }
        match self.inner.task_store.get_task(id).await {
            Ok(Some(record)) if !record.expired(now_ms()) => Ok(self.unless_lost(record).await),
            Ok(_) => Err(unknown),
            Err(e) => {
                tracing::warn!(error = %e, "task store unreadable; answering the poll as an unknown task");
                Err(unknown)
            }
        }
    }

    /// A working task another process runs (another replica, or this one's predecessor
    /// under the same id), as it stands: `completed` as [`TaskOutcome::Lost`] when that
    /// process no longer holds the conversation's lease (it died, or its lease lapsed, and
    /// its record was never written as ended), asked twice a second apart so a turn that
    /// just ended is not taken for lost. The verdict is written only over a record still
    /// `working` (a compare-and-set), so every replica answers alike from then on, and a
    /// result written meanwhile is not overwritten.
    async fn unless_lost(&self, record: TaskRecord) -> TaskRecord {
        let store = self.inner.storage.store();
        if record.status != TaskStatus::Working || !self.inner.storage.shared() {
            return record;
        }
        let (Some(holder), Some(id)) = (
            record.holder.clone(),
            record
                .conversation
                .as_deref()
                .and_then(crate::store::HandleId::from_hex),
        ) else {
            return record;
        };
        let still_runs = || async {
            match store.lease_holder(&id).await {
                Ok(now) => now.as_deref() == Some(holder.as_str()),
                // The store does not answer: nothing to say of the turn.
                Err(_) => true,
            }
        };
        if still_runs().await {
            return record;
        }
        tokio::time::sleep(LOST_AFTER).await;
        let now = match self.inner.task_store.get_task(&record.id).await {
            Ok(Some(now)) => now,
            _ => return record,
        };
        if now.status != TaskStatus::Working || still_runs().await {
            return now;
        }
        let replica = now.replica.clone().unwrap_or_else(|| holder.clone());
        let at = now_ms();
        let lost = TaskRecord {
            status: TaskStatus::Completed,
            status_message: None,
            updated_ms: at,
            outcome: Some(TaskOutcome::Lost {
                replica: replica.clone(),
            }),
            ended_ms: Some(at),
            ..now
        };
        match self.inner.task_store.replace_working(&lost).await {
            Ok(true) => {}
            // Its end was written meanwhile: that is the answer.
            Ok(false) => {
                return match self.inner.task_store.get_task(&lost.id).await {
                    Ok(Some(written)) => written,
                    _ => lost,
                };
            }
            Err(e) => tracing::debug!(error = %e, "a lost task's record not written"),
        }
        tracing::warn!(
            session = lost.session,
            turn = lost.turn,
            replica,
            "a task's replica stopped before its turn ended; its poll is told to read the turn with an empty line"
        );
        lost
    }

    /// Whether another replica said the task reading `turn` on `session` was lost (its
    /// replica's lease lapsed while it ran: a Redis stall), so its client was told to read the
    /// turn with an empty line: the turn must then stay unread.
    pub(in crate::sessions) async fn told_lost(&self, session: &Session, turn: &Arc<Turn>) -> bool {
        let Some(cell) = self.cell_reading(session, turn) else {
            return false;
        };
        matches!(
            self.inner.task_store.get_task(&cell.id.to_string()).await,
            Ok(Some(TaskRecord {
                outcome: Some(TaskOutcome::Lost { .. }),
                ..
            }))
        )
    }

    /// `tasks/cancel`: interrupts the turn of a working task (the person stopped it); the
    /// task is `cancelled` and the turn stays unread. A task already decided is left as it is.
    /// A task only the store knows (another replica runs it, draining or reached directly):
    /// that replica is asked to interrupt its turn, as a new line there does, and the task
    /// completes with the interrupted turn (its `cancelled` is that replica's to say).
    ///
    /// # Errors
    /// No task has this id.
    pub async fn cancel_task(&self, id: &str) -> Result<(), TaskError> {
        let Some(cell) = self.inner.tasks.find(id) else {
            let record = self.stored_task(id).await?;
            let conversation = record
                .conversation
                .as_deref()
                .and_then(crate::store::HandleId::from_hex);
            if let (TaskStatus::Working, Some(conversation)) = (record.status, conversation)
                && self.inner.storage.shared()
            {
                // Its holder takes the request at its next lease renewal (within 0.5 s).
                if let Err(e) = self
                    .inner
                    .storage
                    .store()
                    .ask_interrupt(&conversation)
                    .await
                {
                    tracing::warn!(task = %&id[..8.min(id.len())], error = %e, "a task another replica runs could not be asked to stop");
                }
            }
            return Ok(());
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
