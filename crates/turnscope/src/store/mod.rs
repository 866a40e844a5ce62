//! The session store: where a conversation outlives the process that served it.
//!
//! One trait, [`SessionStore`], and its implementations: [`memory::MemoryStore`] (nothing
//! survives the process, today's behaviour) and [`sqlite::SqliteStore`] (an embedded file).
//! Issue "replicas that share a Redis store" puts Redis behind the same trait, so the shape
//! is the one a key-value server holds well:
//!
//! - a small **head** per handle ([`Head`]): who opened it, when, how far its log and history
//!   go, the turn in flight (the durable mark a crash leaves behind), the unread turn, and a
//!   **version** every write checks (compare-and-set: a conflict is [`StoreError::Conflict`],
//!   which the caller acts on by reloading);
//! - an **append-only log** of its turns ([`StoredTurn`]): each turn's record and the history
//!   messages it added, exactly as the model is sent them; trimmed from the front only, once
//!   the history window no longer needs a turn and the log is over [`LOG_TURNS_KEPT`];
//! - **lease hooks** ([`SessionStore::acquire`], [`SessionStore::renew`],
//!   [`SessionStore::release`]): one process runs the turns of one handle. A file store is
//!   held by one process (it locks the file), so they are no-ops there; a shared store
//!   ([`SessionStore::shared`], [`redis::RedisStore`]) implements them: a lease per turn, and
//!   the version it reports tells a replica whether its copy of the session is stale.
//!
//! A handle is a bearer secret: stores key sessions by its keyed hash ([`HandleId`], HMAC-SHA256
//! with the store's [`HandleKey`]) and keep only its first 8 characters (which logs and events
//! show anyway), so a store's contents give no usable handle.
//!
//! Writes happen at turn boundaries, never per token or frame: a mark before a turn runs, its
//! record once it ends (see `sessions`). Each write is durable when it returns.

pub mod export;
pub mod handle;
pub mod memory;
pub mod redis;
pub mod sqlite;
pub mod url;

#[cfg(test)]
pub(crate) mod conformance;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

pub use handle::{HandleId, HandleKey};
pub use url::{StoreUrl, address_of, default_path, state_dir};

use crate::bot::{Message, TurnRecord};
use crate::observe::SessionOpener;

/// Most turn records a handle's log keeps beyond what its history window needs; older ones
/// are dropped from the front as new ones are appended.
pub const LOG_TURNS_KEPT: u64 = 1000;

/// A session's head record: small, rewritten by every write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Head {
    /// The keyed hash of the handle.
    pub id: HandleId,
    /// The handle's first 8 characters (shown everywhere; not a secret).
    pub prefix: String,
    /// The bot's name (`[bot] name`, else `bot`).
    pub bot: String,
    /// Who opened it.
    pub opener: SessionOpener,
    /// The greeting the bot opened with: history message number 1 when there is one.
    pub greeting: Option<String>,
    /// When it was opened, ms since the Unix epoch.
    pub created_ms: u64,
    /// When a call last wrote it, ms since the Unix epoch.
    pub last_used_ms: u64,
    /// When a running console last kept it alive without writing it (the file store's row
    /// past the record: [`SessionStore::keep_alive`]), ms since the Unix epoch; 0 when
    /// never. Not part of the record, so a write is still known by its own `last_used_ms`.
    #[serde(skip)]
    pub kept_alive_ms: u64,
    /// The id of the last turn record appended (0: none yet).
    pub turns: u64,
    /// The number of the last history message stored (the greeting is number 1).
    pub messages: u64,
    /// History messages the window has forgotten: only numbers above it are sent again.
    pub forgotten: u64,
    /// The oldest turn whose messages the history window still holds.
    pub history_from_turn: u64,
    /// The turn that was running when this was written, if any: left set by a crash.
    pub in_flight: Option<InFlight>,
    /// The turn whose reply no call has read yet, if any.
    pub unread: Option<u64>,
    /// Its turns that ended in an error (heads written before 2026-12-07 count none).
    #[serde(default)]
    pub errors: u64,
    /// The version the store gave this head; each write checks and bumps it.
    pub version: u64,
}

impl Head {
    /// When its idle lifetime counts from: its last write, or a later keep-alive.
    pub fn idle_since_ms(&self) -> u64 {
        self.last_used_ms.max(self.kept_alive_ms)
    }

    /// The oldest turn a reload needs: the history window's first, or the last `kept` for
    /// the console, whichever is older.
    pub fn load_from(&self, kept: u64) -> u64 {
        self.history_from_turn
            .min(self.turns.saturating_sub(kept.saturating_sub(1)))
            .max(1)
    }
}

/// A turn that was running when the head was written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InFlight {
    /// Its turn id.
    pub turn: u64,
    /// The user's line.
    pub line: String,
    /// When it started, ms since the Unix epoch.
    pub started_ms: u64,
    /// The id of the request that said the line (`X-Request-ID`), when it had one: that
    /// request sent again is the lost turn's answer, not a reason to report it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    /// The config version it started on (the run's that wrote the mark), which its report
    /// names when the turn is lost (absent in marks written before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_version: Option<u64>,
}

/// One entry of a handle's log: a finished turn.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredTurn {
    /// Everything the turn recorded (line, reply, end, tool calls with arguments and results,
    /// usage, finish reason, times, and whatever else the record holds).
    pub record: TurnRecord,
    /// When it started, ms since the Unix epoch.
    pub started_ms: u64,
    /// The number of `messages[0]` in the session's history.
    pub first_message: u64,
    /// The history messages the turn added, as the model is sent them.
    pub messages: Vec<Message>,
}

impl StoredTurn {
    /// The turn id.
    pub fn id(&self) -> u64 {
        self.record.id
    }

    /// The number of its last history message (`first_message - 1` when it added none).
    pub fn last_message(&self) -> u64 {
        (self.first_message + self.messages.len() as u64).saturating_sub(1)
    }
}

/// One write to a handle: its new head, the turns appended to its log, and the log's front
/// trimmed. Applied whole or not at all.
#[derive(Debug, Clone)]
pub struct Commit {
    /// The version the writer read; the write fails with a conflict unless it is current.
    pub expected: u64,
    /// The head as it is after this write (its `version` is ignored: the store sets it).
    pub head: Head,
    /// Turns appended to the log, oldest first.
    pub append: Vec<StoredTurn>,
    /// Log entries with a smaller turn id are dropped.
    pub drop_before: u64,
}

/// A head and the turns of its log from some turn on.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The head.
    pub head: Head,
    /// The turns asked for, oldest first.
    pub turns: Vec<StoredTurn>,
}

/// What a store counts, for `/healthz`, benches and the fsync figure.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct StoreStats {
    /// Writes applied (creates, commits, deletes).
    pub writes: u64,
    /// Transactions made durable: each costs the engine's flush to disk (an fsync for the
    /// file store), shared by every write it carried.
    pub syncs: u64,
    /// Most writes one transaction carried.
    pub largest_batch: u64,
}

/// What [`SessionStore::acquire`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lease {
    /// This process may run the handle's turns now. `version`: the head's version in the
    /// store (`None` when it holds no head, or the store keeps no versions apart from
    /// this process's: memory, file); `writer`: the replica that wrote it last, if known.
    Granted {
        /// The stored head's version.
        version: Option<u64>,
        /// Who wrote the head last.
        writer: Option<String>,
    },
    /// Another replica runs a turn of the handle now.
    Held {
        /// The replica holding the lease.
        by: String,
        /// How long the lease lasts unless renewed, in ms.
        for_ms: u64,
    },
}

/// Why a store operation failed. Every message names the store and says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The head changed since the writer read it (another writer, or it was deleted).
    #[error(
        "store: session {prefix} changed since it was read (version {expected} expected, {found}); reload it"
    , found = found.map_or("deleted".to_string(), |v| format!("version {v} found")))]
    Conflict {
        /// The handle's prefix.
        prefix: String,
        /// The version the writer read.
        expected: u64,
        /// The version found, or `None` when the head is gone.
        found: Option<u64>,
    },
    /// The store cannot be used; `message` names it, says what happened and what to do.
    #[error("{message}")]
    Unusable {
        /// The whole explanation.
        message: String,
    },
}

impl StoreError {
    /// An unusable store, described in full.
    pub fn unusable(message: impl Into<String>) -> Self {
        StoreError::Unusable {
            message: message.into(),
        }
    }
}

/// A head's version as stored, and who wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The head's version.
    pub version: u64,
    /// The replica that wrote it last, where the store records it (a shared store).
    pub writer: Option<String>,
}

/// Where sessions are kept. Every method is one round trip; writes are durable when they
/// return. Implementations: [`memory::MemoryStore`], [`sqlite::SqliteStore`].
#[async_trait]
pub trait SessionStore: Send + Sync {
    /// How the header, `/healthz` and the ready line name it: `memory`, `sqlite:/path`.
    fn describe(&self) -> String;

    /// Whether what it holds outlives the process.
    fn durable(&self) -> bool;

    /// What an operator should know of how long it keeps what it holds, when that is less
    /// than they may think (a Redis that keeps nothing on disk), said once at start.
    fn caveat(&self) -> Option<String> {
        None
    }

    /// What an operator should hear when a shared store answers again after it was lost:
    /// that it restarted (and what it kept), or that how it keeps its data changed (the
    /// caveat is read again). By default nothing.
    async fn answered_again(&self) -> Vec<String> {
        Vec::new()
    }

    /// The key handles are hashed with, as it is now: a shared store's changes when the
    /// store lost its data and another replica made a new key, which every replica then uses
    /// (so it is given by value).
    fn key(&self) -> HandleKey;

    /// Stores a new head (its version becomes 1). Fails with a conflict when the id exists.
    async fn create(&self, head: &Head) -> Result<u64, StoreError>;

    /// The head of `id`, if stored.
    async fn head(&self, id: &HandleId) -> Result<Option<Head>, StoreError>;

    /// The log of `id` from turn `from` on, oldest first.
    async fn turns(&self, id: &HandleId, from: u64) -> Result<Vec<StoredTurn>, StoreError>;

    /// The head of `id` and its log from `head.load_from(kept)` on.
    async fn load(&self, id: &HandleId, kept: u64) -> Result<Option<Loaded>, StoreError> {
        let Some(head) = self.head(id).await? else {
            return Ok(None);
        };
        let turns = self.turns(id, head.load_from(kept)).await?;
        Ok(Some(Loaded { head, turns }))
    }

    /// Applies `commit` to `id` if its version is still `commit.expected`; returns the new
    /// version.
    async fn commit(&self, id: &HandleId, commit: &Commit) -> Result<u64, StoreError>;

    /// The version of each of `ids`' heads and the replica that wrote it last (`None`: not
    /// stored), in order: one round trip where the store can (a replica asks about its idle
    /// copies so). By default a read of each head.
    async fn versions(&self, ids: &[HandleId]) -> Result<Vec<Option<Written>>, StoreError> {
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            out.push(self.head(id).await?.map(|head| Written {
                version: head.version,
                writer: None,
            }));
        }
        Ok(out)
    }

    /// Deletes `id`'s head and log; returns whether it was stored.
    async fn delete(&self, id: &HandleId) -> Result<bool, StoreError>;

    /// Heads last used before `before_ms`, oldest first, at most `limit`.
    async fn expired(&self, before_ms: u64, limit: usize) -> Result<Vec<Head>, StoreError>;

    /// The most recently used heads, at most `limit`, newest first.
    async fn list(&self, limit: usize) -> Result<Vec<Head>, StoreError>;

    /// How many heads are stored.
    async fn count(&self) -> Result<u64, StoreError>;

    /// Asks whether it takes writes now (one cheap round trip), for a replica's health on
    /// its sweeper's tick. By default a count. `Ok(Some(warning))`: it takes writes, but
    /// an operator must fix something (another process serves with this replica's id).
    async fn probe(&self) -> Result<Option<String>, StoreError> {
        self.count().await.map(|_| None)
    }

    /// Takes the right to run `id`'s turns in this process (a lease a shared store grants to
    /// one replica at a time, for one turn). A store one process holds grants it always.
    async fn acquire(&self, _id: &HandleId) -> Result<Lease, StoreError> {
        Ok(Lease::Granted {
            version: None,
            writer: None,
        })
    }

    /// Keeps `value` under `key` for `ttl_ms` where every replica sharing the store reads it
    /// (a task's record, so any replica answers its polls). Only a shared store keeps such
    /// records; the others refuse.
    async fn put_record(&self, _key: &str, _value: &[u8], _ttl_ms: u64) -> Result<(), StoreError> {
        Err(StoreError::unusable(format!(
            "store {}: keeps no records for other replicas",
            self.describe()
        )))
    }

    /// The record under `key` ([`SessionStore::put_record`]), if kept and not expired.
    async fn get_record(&self, _key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(None)
    }

    /// Removes the record under `key` (nothing when there is none).
    async fn remove_record(&self, _key: &str) -> Result<(), StoreError> {
        Ok(())
    }

    /// Who holds `id`'s lease now, `REPLICA#NONCE` (a shared store; `None` when nobody does,
    /// or the store has no leases).
    async fn lease_holder(&self, _id: &HandleId) -> Result<Option<String>, StoreError> {
        Ok(None)
    }

    /// This process's name as a lease holder, `REPLICA#NONCE` (a store with leases): a
    /// replica restarted under its id is another holder.
    fn holder(&self) -> Option<String> {
        None
    }

    /// Replaces the record under `key` with `value` only if it is there and contains
    /// `needle` (a compare-and-set: another replica may have written it meanwhile); returns
    /// whether it did.
    async fn replace_record_if(
        &self,
        _key: &str,
        _needle: &str,
        _value: &[u8],
        _ttl_ms: u64,
    ) -> Result<bool, StoreError> {
        Ok(false)
    }

    /// Keeps the stored conversations of `ids` from expiring for another idle lifetime, as a
    /// write does (a task polled here, whose conversation no write refreshes; a running
    /// console's own sessions). Redis refreshes their TTL; the file store marks its rows used
    /// now, which a head read gives as [`Head::kept_alive_ms`]; the memory store, which
    /// outlives nothing, does nothing.
    async fn keep_alive(&self, _ids: &[HandleId]) -> Result<(), StoreError> {
        Ok(())
    }

    /// Keeps the leases of `ids` (called at least every [`SessionStore::lease_every`]);
    /// returns those of them whose running turn another replica asked to interrupt
    /// ([`SessionStore::ask_interrupt`]), each once.
    async fn renew(&self, _ids: &[HandleId]) -> Result<Vec<HandleId>, StoreError> {
        Ok(Vec::new())
    }

    /// Asks the replica holding `id`'s lease to interrupt the turn it runs (a new line
    /// arrived here: the order of calls across replicas, "a new line interrupts the turn in
    /// flight"); the holder sees it at its next renewal. A no-op on a store with no leases.
    async fn ask_interrupt(&self, _id: &HandleId) -> Result<(), StoreError> {
        Ok(())
    }

    /// Gives `id`'s lease back (its session closed here).
    async fn release(&self, _id: &HandleId) {}

    /// [`SessionStore::acquire`] and [`SessionStore::commit`] as one step: when this process
    /// may run `id`'s turns, applies `commit` (the version check included) and keeps the
    /// lease; `Ok(Err(Lease::Held))`, nothing written, while another replica holds it. A
    /// shared store does both in one round trip (the mark a line writes before its turn).
    async fn commit_taking_lease(
        &self,
        id: &HandleId,
        commit: &Commit,
    ) -> Result<Result<u64, Lease>, StoreError> {
        match self.acquire(id).await? {
            Lease::Granted { .. } => self.commit(id, commit).await.map(Ok),
            held @ Lease::Held { .. } => Ok(Err(held)),
        }
    }

    /// [`SessionStore::commit`], then [`SessionStore::release`] whether or not the version
    /// matched; the lease stays only when the store could not be reached. A shared store
    /// does both in one round trip (the record a turn's reply waits for).
    async fn commit_releasing(&self, id: &HandleId, commit: &Commit) -> Result<u64, StoreError> {
        let done = self.commit(id, commit).await;
        if !matches!(done, Err(StoreError::Unusable { .. })) {
            self.release(id).await;
        }
        done
    }

    /// How often leases must be renewed; `None` for a store with no leases.
    fn lease_every(&self) -> Option<std::time::Duration> {
        None
    }

    /// Whether other processes use it at the same time (a Redis several replicas share): a
    /// session is then checked against its stored version before each call, a lease is
    /// taken per turn, and a write that fails is retried and reported to its caller instead
    /// of ending all writing (the store reconnects on its own).
    fn shared(&self) -> bool {
        false
    }

    /// What it counted so far.
    fn stats(&self) -> StoreStats;

    /// Finishes every write in progress and lets go of the store (the file's lock).
    async fn close(&self);
}

/// Milliseconds since the Unix epoch, as heads keep times.
pub fn now_ms() -> u64 {
    crate::observe::event::now_us() / 1000
}
