//! A task in memory: [`TaskCell`], the view of one pending turn and who reads it (its stage,
//! changed only under its lock), and [`TaskTable`], the live tasks by id and by session.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use subtle::ConstantTimeEq;
use uuid::Uuid;

use super::TASKS_PER_SESSION;
use crate::bot::Turn;
use crate::observe::event::now_us;
use crate::sessions::task_store::{TaskOutcome, TaskRecord, TaskStatus};
use crate::sessions::{ChatReply, UnreadTurn, progress_text};
use crate::store::HandleId;

/// Where a task stands in memory.
pub(in crate::sessions) enum Stage {
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
pub(in crate::sessions) enum Hold {
    /// The task will hand the turn over (it runs, or its result is not collected yet).
    Keeps,
    /// A poll collected it: the turn is gone.
    Collected,
    /// The task let go (handed over or cancelled): the turn is the session's as before.
    Released,
}

/// One task: the view of one turn of one session.
pub struct TaskCell {
    pub(super) id: Uuid,
    pub(super) handle: Uuid,
    /// The keyed hash of `handle` (the session table's key).
    pub(super) session_id: HandleId,
    pub(super) session: u64,
    pub(super) turn: Arc<Turn>,
    /// An earlier unread reply the line of this turn replaced (it goes with the result).
    pub(super) unread: Option<UnreadTurn>,
    pub(super) client: String,
    /// The replica running its turn (this one).
    pub(super) replica: String,
    /// This process as a lease holder (a shared store).
    pub(super) holder: Option<String>,
    pub(super) created_ms: u64,
    pub(super) poll_ms: u64,
    pub(super) stage: Mutex<Stage>,
    pub(super) polls: AtomicU32,
    /// Once its session closed: until when it stays (ms since the epoch); 0 while it is open.
    pub(super) kept_until_ms: AtomicU64,
    /// On a store the replicas share: its turn's end waits for the turn's write, which may
    /// find another replica went on without it ([`TaskOutcome::Overtaken`]); cleared once
    /// written ([`super::Sessions::task_turn_written`]).
    pub(super) write_first: std::sync::atomic::AtomicBool,
    /// Whether its record in the task store says how it ended (a draining replica on a
    /// shared store waits for that, as other replicas answer its polls from it).
    pub(super) end_stored: std::sync::atomic::AtomicBool,
}

/// The task table's key of a task id: its first 8 bytes (the whole id is then compared in
/// constant time).
fn index_of(id: &Uuid) -> u64 {
    let bytes = id.as_bytes();
    u64::from_le_bytes(bytes[..8].try_into().expect("a UUID has 16 bytes"))
}

pub(super) fn now_ms() -> u64 {
    now_us() / 1000
}

impl TaskCell {
    pub(super) fn stage(&self) -> std::sync::MutexGuard<'_, Stage> {
        self.stage.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The first 8 characters of the id, safe to show.
    pub fn id_prefix(&self) -> String {
        crate::store::handle::shown_prefix(&self.id)
    }

    /// Whether this task reads `turn`.
    pub(in crate::sessions) fn reads(&self, turn: &Arc<Turn>) -> bool {
        Arc::ptr_eq(&self.turn, turn)
    }

    pub(in crate::sessions) fn hold(&self) -> Hold {
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
    pub(in crate::sessions) fn supersede(&self) -> bool {
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
    pub(super) fn end(&self) -> bool {
        self.end_with(TaskOutcome::Reply(Box::new(ChatReply::of(
            &self.turn,
            self.unread.clone(),
        ))))
    }

    /// Ends it with `outcome`, unless it was decided already.
    pub(super) fn end_with(&self, outcome: TaskOutcome) -> bool {
        let mut stage = self.stage();
        if !matches!(*stage, Stage::Working | Stage::Superseded) {
            return false;
        }
        *stage = Stage::Ended {
            outcome,
            at_ms: now_ms(),
            collected_ms: None,
        };
        true
    }

    /// An empty line wants the turn: whether it may read it, and whether the task changed.
    /// The task completes with a note unless a poll already collected the turn (then it is
    /// gone for the line too).
    pub(super) fn hand_over(&self) -> (bool, bool) {
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
    pub(super) fn collect(&self) -> bool {
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
    pub(super) fn cancel(&self) -> bool {
        let mut stage = self.stage();
        if matches!(*stage, Stage::Working) {
            *stage = Stage::Cancelled { at_ms: now_ms() };
            true
        } else {
            false
        }
    }

    /// The record as it stands, its lifetime `ttl_ms` from creation. Its `updated_ms` is when
    /// its status last changed (created, ended, handed over, cancelled), not when it was
    /// read: a poll changes nothing a client sees in `lastUpdatedAt`.
    pub(super) fn record(&self, ttl_ms: u64) -> TaskRecord {
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
            updated_ms: ended_ms.unwrap_or(self.created_ms),
            ttl_ms,
            poll_ms: self.poll_ms,
            outcome,
            ended_ms,
            collected_ms,
            replica: Some(self.replica.clone()),
            conversation: Some(self.session_id.to_hex()),
            holder: self.holder.clone(),
        }
    }

    /// Whether a client still waits for this task's result (working, or ended and not
    /// collected), which draining waits for.
    pub(super) fn awaited(&self) -> bool {
        matches!(
            &*self.stage(),
            Stage::Working
                | Stage::Superseded
                | Stage::Ended {
                    collected_ms: None,
                    outcome: TaskOutcome::Reply(_) | TaskOutcome::Overtaken { .. },
                    ..
                }
        )
    }
}

/// Every live task of a table, by id and by session.
#[derive(Default)]
pub(in crate::sessions) struct TaskTable {
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

    pub(super) fn taken(&self, id: &Uuid) -> bool {
        self.lock().by_index.contains_key(&index_of(id))
    }

    /// Adds `cell`; returns the task it pushed out of its session's list, if any.
    pub(super) fn insert(&self, cell: Arc<TaskCell>) -> Option<Arc<TaskCell>> {
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

    pub(super) fn find(&self, id: &str) -> Option<Arc<TaskCell>> {
        if id.len() != 36 {
            return None;
        }
        let uuid = Uuid::parse_str(id).ok()?;
        let found = self.lock().by_index.get(&index_of(&uuid)).cloned()?;
        bool::from(found.id.as_bytes().ct_eq(uuid.as_bytes())).then_some(found)
    }

    /// A session closed: its tasks whose result a client still waits for stay until
    /// `until_ms`; the others are removed and returned.
    pub(super) fn close_session(&self, session: u64, until_ms: u64) -> Vec<Arc<TaskCell>> {
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
    pub(super) fn expired(&self, now_ms: u64) -> Vec<Arc<TaskCell>> {
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

    /// The tasks of `session`, oldest first.
    pub(super) fn cells_of(&self, session: u64) -> Vec<Arc<TaskCell>> {
        self.lock()
            .by_session
            .get(&session)
            .map(|list| list.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Whether a client still waits for a task's result here; `shared`: only for one whose
    /// record does not say its end yet (the shared store answers the others' polls).
    pub(super) fn any_awaited(&self, shared: bool) -> bool {
        self.lock().by_index.values().any(|c| {
            if shared {
                !c.end_stored.load(Ordering::Acquire)
            } else {
                c.awaited()
            }
        })
    }
}
