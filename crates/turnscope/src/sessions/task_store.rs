//! Where task records are kept: [`TaskStore`], the small interface, [`MemoryTaskStore`], the
//! in-process one, and [`SharedTaskStore`], records in a session store the replicas share
//! (Redis), so any replica answers a task's polls, also once the replica running it drained
//! or died.
//!
//! A [`TaskRecord`] is self-contained: status, times, lifetime, poll interval and, once the
//! task is complete, the turn record its `CallToolResult` is rendered from. So a replica that
//! shares the store with the one running the turn answers a `tasks/get` from the record alone.
//! The record is written before the `CreateTaskResult` is sent (the extension's "durable
//! creation"), and again at each change a client can see (ended, collected, handed over,
//! cancelled); it is removed with its conversation.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::ChatReply;
use crate::store::SessionStore;

/// Most records [`MemoryTaskStore`] holds: every session's kept tasks at the largest session
/// cap anyone runs, with room to spare. Records are removed with their sessions, so this is
/// only reached by a leak, which then fails loudly (a `chat` answers synchronously) instead of
/// growing.
pub const MEMORY_RECORDS_KEPT: usize = 65_536;

/// What a `tasks/get` answers, as the extension names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// The turn runs.
    Working,
    /// The result is ready.
    Completed,
    /// `tasks/cancel` stopped it.
    Cancelled,
}

impl TaskStatus {
    /// `working`, `completed` or `cancelled`.
    pub fn label(self) -> &'static str {
        match self {
            TaskStatus::Working => "working",
            TaskStatus::Completed => "completed",
            TaskStatus::Cancelled => "cancelled",
        }
    }
}

/// What a completed task hands its client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TaskOutcome {
    /// What the `chat` call would have returned (rendered by `server::mcp_text::chat_result`).
    Reply(Box<ChatReply>),
    /// A `chat` call with an empty line read the turn instead (a turn is read once).
    HandedOver,
    /// The turn ran, but while it ran another replica went on with the conversation without
    /// it (a shared store stalled past its lease): its reply is not part of the
    /// conversation, and the result says so, as a `chat` call is told
    /// ([`super::ChatError::Overtaken`]).
    Overtaken {
        /// What the caller is told, the reply quoted.
        message: String,
    },
    /// The replica running the turn stopped before the turn ended (another replica found its
    /// record working and the conversation's lease no longer that replica's): an empty line
    /// reads the turn as the conversation kept it (a replica that died kept its line, cut off,
    /// without its reply; one whose lease lapsed in a Redis stall writes the reply at its end).
    Lost {
        /// The replica that ran it.
        replica: String,
    },
}

/// One task as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRecord {
    /// The task id (a secret, as handles are).
    pub id: String,
    /// The session's number (for events; never the handle).
    pub session: u64,
    /// The turn it reads.
    pub turn: u64,
    /// The client that called `chat`.
    pub client: String,
    /// Where it stands.
    pub status: TaskStatus,
    /// While working: the reply so far, as progress messages carry it.
    pub status_message: Option<String>,
    /// Created, in ms since the epoch.
    pub created_ms: u64,
    /// Last changed, in ms since the epoch.
    pub updated_ms: u64,
    /// Lifetime from `created_ms` as of `updated_ms`: the handle's remaining lifetime then
    /// (polls and calls extend it).
    pub ttl_ms: u64,
    /// How often the client should poll.
    pub poll_ms: u64,
    /// Once completed: what the client gets.
    pub outcome: Option<TaskOutcome>,
    /// When its turn ended (or was handed over), in ms since the epoch.
    pub ended_ms: Option<u64>,
    /// When a `tasks/get` first handed the result over, in ms since the epoch.
    pub collected_ms: Option<u64>,
    /// The replica running its turn.
    #[serde(default)]
    pub replica: Option<String>,
    /// Its conversation's keyed hash in hex (not the handle), so another replica can ask the
    /// store whether the turn still runs.
    #[serde(default)]
    pub conversation: Option<String>,
    /// The process running its turn as a lease holder (`REPLICA#NONCE`, a shared store): a
    /// replica restarted under the same id is another process.
    #[serde(default)]
    pub holder: Option<String>,
}

impl TaskRecord {
    /// Whether its lifetime ran out at `now_ms` (its conversation ended by then).
    pub fn expired(&self, now_ms: u64) -> bool {
        now_ms > self.created_ms.saturating_add(self.ttl_ms)
    }
}

/// Why a store could not keep or read a record.
#[derive(Debug, thiserror::Error)]
pub enum TaskStoreError {
    /// The store holds as many records as it may.
    #[error(
        "the task store is full ({records} records); tasks are answered synchronously until some end"
    )]
    Full {
        /// Records held.
        records: usize,
    },
    /// The store's backend failed.
    #[error("the task store failed: {0}")]
    Backend(String),
}

/// Where task records live: [`MemoryTaskStore`], or [`SharedTaskStore`] when the replicas
/// share a store, so any of them answers a poll.
#[async_trait]
pub trait TaskStore: Send + Sync {
    /// Writes `record` (replacing the one with its id); returns once a `get_task` anywhere
    /// would see it.
    async fn put_task(&self, record: &TaskRecord) -> Result<(), TaskStoreError>;
    /// The record with this id, if there is one.
    async fn get_task(&self, id: &str) -> Result<Option<TaskRecord>, TaskStoreError>;
    /// Removes the record with this id (nothing when there is none).
    async fn remove_task(&self, id: &str) -> Result<(), TaskStoreError>;
    /// Writes `record` only if the stored one is still `working` (another replica may have
    /// written its end meanwhile); returns whether it did.
    async fn replace_working(&self, record: &TaskRecord) -> Result<bool, TaskStoreError> {
        let working = self
            .get_task(&record.id)
            .await?
            .is_some_and(|now| now.status == TaskStatus::Working);
        if working {
            self.put_task(record).await?;
        }
        Ok(working)
    }
}

/// Task records in a session store the replicas share, each under the keyed hash of its id
/// (`task:HASH`: task ids are secrets, as handles are) for as long as its lifetime and a
/// margin, so a replica that did not run a task answers its polls from the record.
pub struct SharedTaskStore {
    store: Arc<dyn SessionStore>,
}

/// How long a shared record outlives its lifetime as last written (polls on the replica
/// running it extend the lifetime without a write).
const SHARED_MARGIN_MS: u64 = 60_000;

impl SharedTaskStore {
    /// Task records in `store` (one that [`SessionStore::shared`]).
    pub fn new(store: Arc<dyn SessionStore>) -> Self {
        Self { store }
    }

    fn key(&self, id: &str) -> Result<String, TaskStoreError> {
        let id = uuid::Uuid::parse_str(id)
            .map_err(|_| TaskStoreError::Backend(format!("{id:?} is no task id")))?;
        Ok(format!("task:{}", self.store.key().id_of(&id).to_hex()))
    }
}

#[async_trait]
impl TaskStore for SharedTaskStore {
    async fn put_task(&self, record: &TaskRecord) -> Result<(), TaskStoreError> {
        let json =
            serde_json::to_vec(record).map_err(|e| TaskStoreError::Backend(e.to_string()))?;
        let now = crate::store::now_ms();
        let ttl = record
            .created_ms
            .saturating_add(record.ttl_ms)
            .saturating_sub(now)
            .saturating_add(SHARED_MARGIN_MS);
        self.store
            .put_record(&self.key(&record.id)?, &json, ttl)
            .await
            .map_err(|e| TaskStoreError::Backend(e.to_string()))
    }

    async fn get_task(&self, id: &str) -> Result<Option<TaskRecord>, TaskStoreError> {
        let Some(json) = self
            .store
            .get_record(&self.key(id)?)
            .await
            .map_err(|e| TaskStoreError::Backend(e.to_string()))?
        else {
            return Ok(None);
        };
        serde_json::from_slice(&json)
            .map(Some)
            .map_err(|e| TaskStoreError::Backend(format!("a task record that is not one: {e}")))
    }

    async fn remove_task(&self, id: &str) -> Result<(), TaskStoreError> {
        self.store
            .remove_record(&self.key(id)?)
            .await
            .map_err(|e| TaskStoreError::Backend(e.to_string()))
    }

    async fn replace_working(&self, record: &TaskRecord) -> Result<bool, TaskStoreError> {
        let json =
            serde_json::to_vec(record).map_err(|e| TaskStoreError::Backend(e.to_string()))?;
        self.store
            .replace_record_if(
                &self.key(&record.id)?,
                "\"status\":\"working\"",
                &json,
                SHARED_MARGIN_MS.saturating_add(record.ttl_ms),
            )
            .await
            .map_err(|e| TaskStoreError::Backend(e.to_string()))
    }
}

/// Task records in this process's memory (bounded by [`MEMORY_RECORDS_KEPT`]).
#[derive(Default)]
pub struct MemoryTaskStore {
    records: Mutex<HashMap<String, TaskRecord>>,
}

impl MemoryTaskStore {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, TaskRecord>> {
        self.records.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records held.
    pub fn len(&self) -> usize {
        self.map().len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[async_trait]
impl TaskStore for MemoryTaskStore {
    async fn put_task(&self, record: &TaskRecord) -> Result<(), TaskStoreError> {
        let mut map = self.map();
        if map.len() >= MEMORY_RECORDS_KEPT && !map.contains_key(&record.id) {
            let now = crate::observe::event::now_us() / 1000;
            map.retain(|_, r| !r.expired(now));
            if map.len() >= MEMORY_RECORDS_KEPT {
                return Err(TaskStoreError::Full { records: map.len() });
            }
        }
        map.insert(record.id.clone(), record.clone());
        Ok(())
    }

    async fn get_task(&self, id: &str) -> Result<Option<TaskRecord>, TaskStoreError> {
        Ok(self.map().get(id).cloned())
    }

    async fn remove_task(&self, id: &str) -> Result<(), TaskStoreError> {
        self.map().remove(id);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, created_ms: u64, ttl_ms: u64) -> TaskRecord {
        TaskRecord {
            id: id.into(),
            session: 1,
            turn: 1,
            client: "c".into(),
            status: TaskStatus::Working,
            status_message: None,
            created_ms,
            updated_ms: created_ms,
            ttl_ms,
            poll_ms: 1000,
            outcome: None,
            ended_ms: None,
            collected_ms: None,
            replica: None,
            conversation: None,
            holder: None,
        }
    }

    #[tokio::test]
    async fn a_record_reads_back_as_written_and_is_gone_once_removed() {
        let store = MemoryTaskStore::default();
        let mut r = record("a", 1, 300_000);
        store.put_task(&r).await.unwrap();
        r.status = TaskStatus::Completed;
        r.outcome = Some(TaskOutcome::HandedOver);
        store.put_task(&r).await.unwrap();
        assert_eq!(store.get_task("a").await.unwrap(), Some(r.clone()));
        // The record survives a round trip through JSON, as a shared store keeps it.
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<TaskRecord>(&text).unwrap(), r);
        store.remove_task("a").await.unwrap();
        assert_eq!(store.get_task("a").await.unwrap(), None);
        assert!(store.is_empty());
    }

    #[test]
    fn a_record_expires_after_its_lifetime() {
        let r = record("a", 1_000, 500);
        assert!(!r.expired(1_500));
        assert!(r.expired(1_501));
    }
}
