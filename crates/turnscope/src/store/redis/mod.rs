//! The Redis store: sessions in one Redis server that several replicas share, so any replica
//! serves any handle and a replica's death loses no conversation. Through redis-rs: one
//! multiplexed connection kept by a `ConnectionManager`, which reconnects on its own after
//! Redis was lost or restarted (and made anew when Redis refused its reconnect's credentials:
//! `RedisStore::mend`).
//!
//! Key layout, every key under the prefix P (`turnscope:`, or the URL's `?prefix=`):
//! - `P meta` (hash): `key`, the 32 random bytes every replica hashes handles with (the
//!   first replica makes it, the others read it), and `schema`, this layout's version. When
//!   Redis lost its data while replicas ran, the first of them to write or probe puts its key
//!   back; a replica started before that makes a new one, and the running ones, meeting it,
//!   use it from then on ([`RedisStore::adopt`]): the conversations hashed with the old key
//!   are gone from Redis anyway.
//! - `P h:ID` (hash), ID being the handle's keyed hash in hex: `v`, the version every write
//!   checks and bumps; `head`, the head record as JSON; `t` and `hf`, its last turn and the
//!   history window's first (so a reload reads the log it needs in the same round trip); `w`,
//!   the replica that wrote it last.
//! - `P log:ID` (sorted set): the turn log, each turn as JSON scored by its turn id.
//! - `P used` (sorted set): every ID scored by its last use (ms since the Unix epoch), for
//!   listing and the idle sweep.
//! - `P lease:ID` (string): who runs ID's turns now, `REPLICA#NONCE`, expiring after
//!   [`LEASE`] unless renewed: one replica at a time runs a handle's turns.
//! - `P stop:ID` (string): another replica's request that the holder interrupt ID's turn (a
//!   new line arrived there), the asker's `REPLICA#NONCE`, expiring after [`LEASE`]; the
//!   holder takes it at its next renewal, a new holder drops it.
//! - `P task:T` (string, expiring with its conversation): a task's record as JSON, T being
//!   the task id's keyed hash in hex (task ids are secrets, as handles are), so any replica
//!   answers its polls (`sessions::task_store::SharedTaskStore`).
//! - `P probe:REPLICA` (string, expiring after 5 s): written by each replica's health probe
//!   every sweeper tick, so a Redis that answers but takes no write (`maxmemory` reached) is
//!   seen as degraded; it holds the writer's `REPLICA#NONCE`, so a replica that finds
//!   another's there after its own first write knows a second process runs with its id.
//!
//! `h:` and `log:` expire after the idle lifetime (`server.handle_seconds`), refreshed by every
//! write: Redis forgets an abandoned conversation even when no replica is left to sweep it, and
//! `used` drops such IDs when it meets them. Every write is one Lua script ([`scripts`]):
//! the version check and the write it guards are one atomic step on the server.
//!
//! A turn costs two round trips: its mark takes `lease:ID` in the same script
//! ([`SessionStore::commit_taking_lease`]; refused, nothing written, while another replica
//! holds it), and its record gives the lease back in the same script
//! ([`SessionStore::commit_releasing`]). With `appendfsync always` each is one fsync wait.
//!
//! Durability is Redis's: a write is acknowledged once Redis applied it in memory; what a
//! Redis restart keeps depends on its persistence (`appendonly yes` keeps every write; see
//! the README's "Replicas with a shared store").

mod scripts;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{AsyncCommands, RedisError};

use super::{
    Commit, HandleId, HandleKey, Head, Lease, Loaded, SessionStore, StoreError, StoreStats,
    StoredTurn, Written,
};
pub use crate::config::store::RedisUrl;

/// How long a lease lasts unless renewed: how long a replica that died in a turn keeps its
/// handle from the others.
pub const LEASE: Duration = Duration::from_secs(2);

/// How often the holder renews its leases (a quarter of [`LEASE`], so three renewals may
/// fail before a lease is lost).
pub const RENEW_EVERY: Duration = Duration::from_millis(500);

/// How long a replica's probe key lasts unless written again (each sweeper tick writes it).
const PROBE_LASTS: Duration = Duration::from_secs(5);

/// Most heads one listing asks Redis for (`list(usize::MAX)` means every one).
const MOST_HEADS: usize = 1 << 30;

/// The key layout's version, kept in `P meta`.
const SCHEMA: u64 = 1;

/// How long one connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long one command may wait for its answer: past this, Redis is treated as lost.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);

/// How a failed call says Redis refused the URL's credentials (a reconnect after its password
/// changed): the session table says it even after the lost connection before it.
pub const CREDENTIALS_REFUSED: &str = "Redis refused the URL's credentials";

/// What a commit does with the handle's lease ([`scripts::COMMIT`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LeaseStep {
    /// Leaves it as it is.
    Keep,
    /// Takes it (or keeps it when this replica holds it), unless another replica does.
    Take,
    /// Gives it back, if this replica holds it.
    Release,
}

impl LeaseStep {
    fn name(self) -> &'static str {
        match self {
            LeaseStep::Keep => "keep",
            LeaseStep::Take => "take",
            LeaseStep::Release => "release",
        }
    }
}

/// What the store needs to know of the server using it.
#[derive(Debug, Clone)]
pub struct RedisSettings {
    /// This replica's id: the lease holder's name, and the `w` of what it writes.
    pub replica: String,
    /// The idle lifetime (`server.handle_seconds`): the TTL of every head and log.
    pub idle: Duration,
}

/// Sessions in Redis.
pub struct RedisStore {
    /// The connection every call clones; replaced whole by [`RedisStore::mend`] when it
    /// can no longer reconnect by itself.
    conn: Arc<RwLock<ConnectionManager>>,
    /// What a new connection is made from.
    client: redis::Client,
    config: ConnectionManagerConfig,
    /// Whether a new connection is being made.
    mending: Arc<AtomicBool>,
    masked: String,
    prefix: String,
    /// The handle key, as Redis holds it: swapped by [`RedisStore::adopt`].
    key: RwLock<HandleKey>,
    replica: String,
    holder: String,
    ttl_ms: u64,
    writes: AtomicU64,
    largest: AtomicU64,
    /// How Redis keeps its data on disk, when it keeps less than every write (read again
    /// when it answers after it was lost: it may have come back configured otherwise).
    caveat: std::sync::Mutex<Option<String>>,
    /// Redis's `run_id` as last read: another one after it was lost means it restarted.
    run_id: std::sync::Mutex<Option<String>>,
    /// Another process found writing this replica's probe key.
    twin: Twin,
}

/// What the probes saw of another process serving with this replica's id.
#[derive(Default)]
struct Twin {
    /// Whether this process wrote its probe key before: what the first write finds may be
    /// a predecessor's (this replica restarted), what a later one finds is a live twin's.
    wrote: AtomicBool,
    /// The twin's `REPLICA#NONCE` and when its write was last found.
    seen: std::sync::Mutex<Option<(std::time::Instant, String)>>,
}

impl Twin {
    /// How long a twin is still spoken of after its write was last found (its writes
    /// alternate with this one's, so most probes find it while both run).
    const REMEMBERED: Duration = Duration::from_secs(10);

    /// Takes what a probe found before its write (`before`); returns the warning while a
    /// twin was found in the last [`Twin::REMEMBERED`].
    fn seen(&self, holder: &str, before: Option<String>) -> Option<String> {
        let wrote = self.wrote.swap(true, Ordering::Relaxed);
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(other) = before.filter(|b| wrote && b != holder) {
            *seen = Some((std::time::Instant::now(), other));
        }
        let (at, other) = seen.as_ref()?;
        if at.elapsed() > Self::REMEMBERED {
            *seen = None;
            return None;
        }
        let id = replica_of(other);
        Some(format!(
            "another process serves as replica {id:?} on this store (it writes the replica's probe \
             key as {other}; this one is {holder}): two replicas with one id cannot tell their \
             handles and take-overs apart. Give each replica its own --replica-id and restart one \
             of them"
        ))
    }
}

impl RedisStore {
    /// Connects to `url`, and reads the handle key (made on the first connection to this
    /// Redis and prefix).
    ///
    /// # Errors
    /// Redis cannot be reached, refuses the credentials, or holds keys under the prefix that
    /// are not a turnscope store (or one from a newer turnscope); the message names the URL
    /// with its credentials masked and says what to do.
    pub async fn open(url: &RedisUrl, settings: RedisSettings) -> Result<Self, StoreError> {
        let masked = url.masked().to_string();
        let fail = |what: &str, e: &RedisError| explain(&masked, url, what, e);
        // Commands go out as they are made, not held back for the last one's ACK (Nagle):
        // concurrent turns share one connection, and redis-rs leaves Nagle on by default.
        let info = redis::IntoConnectionInfo::into_connection_info(url.secret())
            .map_err(|e| fail("reading the URL", &e))?
            .set_tcp_settings(redis::io::tcp::TcpSettings::default().set_nodelay(true));
        let client = redis::Client::open(info).map_err(|e| fail("reading the URL", &e))?;
        let config = connection_config();
        let mut conn = ConnectionManager::new_with_config(client.clone(), config.clone())
            .await
            .map_err(|e| fail("connecting", &e))?;
        // One plain command first: Redis's refusals (NOAUTH) come back as themselves; in the
        // transaction below redis-rs 1.8 reports them with a wrapped index (and its debug
        // build panics on it).
        let _: String = redis::cmd("PING")
            .query_async(&mut conn)
            .await
            .map_err(|e| fail("asking it to answer (PING)", &e))?;
        let prefix = url.prefix().to_string();
        let meta = format!("{prefix}meta");
        let mut fresh = [0u8; 32];
        getrandom::fill(&mut fresh).map_err(|e| {
            StoreError::unusable(format!(
                "store {masked}: no random source for the handle key: {e}"
            ))
        })?;
        wait_for_a_running_replicas_key(&mut conn, &prefix)
            .await
            .map_err(|e| fail("reading its handle key", &e))?;
        let (_, _, key, schema): (i64, i64, Vec<u8>, u64) = redis::pipe()
            .atomic()
            .hset_nx(&meta, "key", fresh.as_slice())
            .hset_nx(&meta, "schema", SCHEMA)
            .hget(&meta, "key")
            .hget(&meta, "schema")
            .query_async(&mut conn)
            .await
            .map_err(|e| fail("reading its handle key", &e))?;
        if schema > SCHEMA {
            return Err(StoreError::unusable(format!(
                "store {masked}: the keys under {prefix:?} were written by a newer turnscope (layout \
                 version {schema}; this turnscope {} knows up to {SCHEMA}). Upgrade turnscope, or give \
                 another ?prefix= in the URL",
                env!("CARGO_PKG_VERSION"),
            )));
        }
        let key: [u8; 32] = key.try_into().map_err(|_| {
            StoreError::unusable(format!(
                "store {masked}: {meta} holds a handle key that is not 32 bytes, so it is not a \
                 turnscope store. Give another ?prefix= in the URL"
            ))
        })?;
        let caveat = persistence_caveat(&mut conn, &masked).await;
        let run_id = run_id(&mut conn).await;
        let mut nonce = [0u8; 4];
        let _ = getrandom::fill(&mut nonce);
        let nonce: String = nonce.iter().map(|b| format!("{b:02x}")).collect();
        Ok(Self {
            conn: Arc::new(RwLock::new(conn)),
            client,
            config,
            mending: Arc::new(AtomicBool::new(false)),
            holder: format!("{}#{nonce}", settings.replica),
            replica: settings.replica,
            masked,
            prefix,
            key: RwLock::new(HandleKey::from_bytes(key)),
            ttl_ms: (settings.idle.as_millis() as u64).max(1000),
            writes: AtomicU64::new(0),
            largest: AtomicU64::new(0),
            caveat: std::sync::Mutex::new(caveat),
            run_id: std::sync::Mutex::new(run_id),
            twin: Twin::default(),
        })
    }

    fn head_key(&self, id: &HandleId) -> String {
        format!("{}h:{}", self.prefix, id.to_hex())
    }

    fn log_key(&self, id: &HandleId) -> String {
        format!("{}log:{}", self.prefix, id.to_hex())
    }

    fn lease_key(&self, id: &HandleId) -> String {
        format!("{}lease:{}", self.prefix, id.to_hex())
    }

    fn stop_key(&self, id: &HandleId) -> String {
        format!("{}stop:{}", self.prefix, id.to_hex())
    }

    fn meta_key(&self) -> String {
        format!("{}meta", self.prefix)
    }

    /// The handle key this replica uses now.
    fn current_key(&self) -> HandleKey {
        self.key.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Takes `found`, the handle key Redis holds, when it is not this replica's: Redis lost
    /// its data while this replica ran (restarted without persistence, flushed) and a replica
    /// started since made a new key before any running one put theirs back. The conversations
    /// hashed with the old key are gone from Redis with the rest, so the store's key is the
    /// one to go on with; every replica meeting it does the same. Returns whether it changed.
    ///
    /// # Errors
    /// `found` is not 32 bytes: something other than turnscope wrote `P meta` while this
    /// replica ran, so nothing under the prefix can be trusted to be a turnscope store (said
    /// as that, not as conversations lost).
    fn adopt(&self, found: &[u8]) -> Result<bool, StoreError> {
        let Ok(bytes) = <[u8; 32]>::try_from(found) else {
            return Err(StoreError::unusable(format!(
                "store {}: {} now holds a handle key of {} bytes, not 32: something other than \
                 turnscope wrote it while this replica ran, so the keys under {:?} are no longer \
                 a turnscope store. Nothing was written. Give the replicas another ?prefix= in \
                 the URL, or delete that key and restart them",
                self.masked,
                self.meta_key(),
                found.len(),
                self.prefix,
            )));
        };
        let mut key = self.key.write().unwrap_or_else(|p| p.into_inner());
        if key.as_bytes() == &bytes {
            return Ok(false);
        }
        *key = HandleKey::from_bytes(bytes);
        Ok(true)
    }

    /// A write's answer `{-2, 0, key}` ([`scripts::COMMIT`], [`scripts::CREATE`]): the
    /// store's handle key is not this replica's; it is adopted ([`RedisStore::adopt`]).
    /// Returns whether the answer was that.
    ///
    /// # Errors
    /// The key Redis holds is not a handle key ([`RedisStore::adopt`]).
    fn met_another_key(&self, answer: &[redis::Value]) -> Result<bool, StoreError> {
        let first: Option<i64> = answer
            .first()
            .and_then(|v| redis::from_redis_value(v.clone()).ok());
        if first != Some(-2) {
            return Ok(false);
        }
        let found: Vec<u8> = answer
            .get(2)
            .and_then(|v| redis::from_redis_value(v.clone()).ok())
            .unwrap_or_default();
        self.adopt(&found)?;
        Ok(true)
    }

    fn used_key(&self) -> String {
        format!("{}used", self.prefix)
    }

    /// The connection, for one call (clones share the one multiplexed connection).
    fn conn(&self) -> ConnectionManager {
        self.conn.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// A failed call, as callers read it.
    fn lost(&self, what: &str, e: &RedisError) -> StoreError {
        self.mend(e);
        let (advice, next) = if e.is_timeout() {
            (
                "Redis did not answer in time (busy or unreachable)",
                "turnscope reconnects on its own; try again in a moment",
            )
        } else if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() {
            (
                "Redis cannot be reached",
                "turnscope reconnects on its own; try again in a moment",
            )
        } else if e.code() == Some("OOM") {
            (
                "Redis refused it: it is out of memory (its maxmemory is reached and its policy \
                 evicts nothing)",
                "Free memory in Redis or raise its maxmemory; turnscope saves again as soon as it \
                 takes writes",
            )
        } else if matches!(e.kind(), redis::ErrorKind::AuthenticationFailed) {
            (
                CREDENTIALS_REFUSED,
                "Give Redis back the URL's password (or restart turnscope with the new one); \
                 turnscope signs in again on its own",
            )
        } else {
            (
                "Redis refused it",
                "turnscope reconnects on its own; try again in a moment",
            )
        };
        StoreError::unusable(format!(
            "store {}: {what} failed: {advice} ({}). {next}",
            self.masked,
            scrub(&e.to_string()),
        ))
    }

    /// Makes a new connection after `e` when the one kept cannot mend itself: redis-rs's
    /// `ConnectionManager` reconnects after an I/O error, but a reconnect Redis refused (its
    /// password changed, then changed back) stays failed for good, every call answered with
    /// that refusal. Written here because the crate offers no way to ask it to try again.
    fn mend(&self, e: &RedisError) {
        if !matches!(e.kind(), redis::ErrorKind::AuthenticationFailed)
            || self.mending.swap(true, Ordering::AcqRel)
        {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.mending.store(false, Ordering::Release);
            return;
        };
        let (slot, mending) = (self.conn.clone(), self.mending.clone());
        let (client, config) = (self.client.clone(), self.config.clone());
        runtime.spawn(async move {
            // At most one attempt a second, whatever the calls failing meanwhile.
            tokio::time::sleep(Duration::from_secs(1)).await;
            if let Ok(fresh) = ConnectionManager::new_with_config(client, config).await {
                *slot.write().unwrap_or_else(|p| p.into_inner()) = fresh;
            }
            mending.store(false, Ordering::Release);
        });
    }

    fn damaged(&self, what: &str, detail: impl std::fmt::Display) -> StoreError {
        StoreError::unusable(format!(
            "store {}: {what}: what Redis holds under {:?} is not a turnscope record ({detail}). \
             Delete that key, or give another ?prefix= in the URL",
            self.masked, self.prefix
        ))
    }

    fn wrote(&self, batch: u64) {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.largest.fetch_max(batch, Ordering::Relaxed);
    }

    fn head_of(&self, version: u64, json: &str) -> Result<Head, StoreError> {
        let mut head: Head =
            serde_json::from_str(json).map_err(|e| self.damaged("reading a head", e))?;
        head.version = version;
        Ok(head)
    }

    fn turns_of(&self, list: &[String]) -> Result<Vec<StoredTurn>, StoreError> {
        list.iter()
            .map(|json| {
                serde_json::from_str(json).map_err(|e| self.damaged("reading a turn log", e))
            })
            .collect()
    }

    fn json<T: serde::Serialize>(&self, value: &T) -> Result<String, StoreError> {
        serde_json::to_string(value).map_err(|e| {
            StoreError::unusable(format!(
                "store {}: a record did not encode: {e}",
                self.masked
            ))
        })
    }

    /// [`scripts::COMMIT`]: `commit` applied with the lease `step`; `Ok(Err(Lease::Held))`
    /// when `step` is [`LeaseStep::Take`] and another replica holds the lease.
    async fn commit_with(
        &self,
        id: &HandleId,
        commit: &Commit,
        step: LeaseStep,
    ) -> Result<Result<u64, Lease>, StoreError> {
        let head = &commit.head;
        let mut call = scripts::COMMIT.prepare_invoke();
        call.key(self.head_key(id))
            .key(self.log_key(id))
            .key(self.meta_key())
            .key(self.used_key())
            .key(self.lease_key(id))
            .key(self.stop_key(id))
            .arg(self.current_key().as_bytes().as_slice())
            .arg(commit.expected)
            .arg(self.json(head)?)
            .arg(id.to_hex())
            .arg(head.last_used_ms)
            .arg(self.ttl_ms)
            .arg(head.turns)
            .arg(head.history_from_turn)
            .arg(&self.replica)
            .arg(commit.drop_before)
            .arg(step.name())
            .arg(&self.holder)
            .arg(LEASE.as_millis() as u64);
        for turn in &commit.append {
            call.arg(turn.id()).arg(self.json(turn)?);
        }
        // `{applied, version}`, and a third element only for a refused `take`.
        let answer: Vec<redis::Value> = call.invoke_async(&mut self.conn()).await.map_err(|e| {
            let what = if step == LeaseStep::Take {
                "taking the session's lease"
            } else {
                "saving a turn"
            };
            self.lost(what, &e)
        })?;
        let number = |i: usize| -> Result<i64, StoreError> {
            let value = answer.get(i).cloned().unwrap_or(redis::Value::Nil);
            redis::from_redis_value(value).map_err(|e| self.damaged("saving a turn", e))
        };
        let (applied, version) = (number(0)?, number(1)?);
        let holder: Option<String> = answer
            .get(2)
            .and_then(|v| redis::from_redis_value(v.clone()).ok());
        if self.met_another_key(&answer)? {
            // Nothing written: the conversation, hashed with the key this replica had, is
            // gone with the rest of what Redis lost; said as a head no longer stored.
            return Err(StoreError::Conflict {
                prefix: head.prefix.clone(),
                expected: commit.expected,
                found: None,
            });
        }
        if applied == -3 {
            return Ok(Err(Lease::Held {
                by: replica_of(holder.as_deref().unwrap_or_default()),
                for_ms: u64::try_from(version).unwrap_or(0),
            }));
        }
        if applied == 0 {
            return Err(StoreError::Conflict {
                prefix: head.prefix.clone(),
                expected: commit.expected,
                found: u64::try_from(version).ok(),
            });
        }
        self.wrote(1 + commit.append.len() as u64);
        Ok(Ok(version as u64))
    }

    /// `HEADS` over the `used` index: the newest `limit`, or the oldest `limit` used before
    /// `before_ms`.
    async fn heads(
        &self,
        newest: bool,
        before_ms: u64,
        limit: usize,
    ) -> Result<Vec<Head>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        // Lua's numbers are doubles: a limit past 2^53 (`usize::MAX`, "all of them") is no
        // integer to Redis; no store holds more sessions than this anyway.
        let limit = limit.min(MOST_HEADS);
        let flat: Vec<redis::Value> = scripts::HEADS
            .key(self.used_key())
            .arg(&self.prefix)
            .arg(if newest { "newest" } else { "before" })
            .arg(limit)
            .arg(before_ms)
            .invoke_async(&mut self.conn())
            .await
            .map_err(|e| self.lost("listing sessions", &e))?;
        flat.chunks(2)
            .map(|pair| {
                let version: u64 = redis::from_redis_value(pair[0].clone())
                    .map_err(|e| self.damaged("listing sessions", e))?;
                let json: String = redis::from_redis_value(pair[1].clone())
                    .map_err(|e| self.damaged("listing sessions", e))?;
                self.head_of(version, &json)
            })
            .collect()
    }
}

/// How long a replica starting on a store that holds conversations but no handle key waits
/// for a running replica's probe to put the key back (probes run every sweeper tick).
const KEY_BACK_WITHIN: Duration = Duration::from_secs(2);

/// Before a starting replica makes a handle key, waits (up to [`KEY_BACK_WITHIN`]) while the
/// store holds conversations but no key: only `P meta` was lost (evicted, deleted by hand),
/// and a running replica puts its key back at its next probe. A key made at once would be
/// taken by every running replica, and every conversation still in Redis would hash to an id
/// nobody computes. Past the wait (no replica runs), a new key is made, and said: the
/// conversations left under the old one cannot be reached.
async fn wait_for_a_running_replicas_key(
    conn: &mut ConnectionManager,
    prefix: &str,
) -> Result<(), RedisError> {
    let meta = format!("{prefix}meta");
    let used = format!("{prefix}used");
    let started = std::time::Instant::now();
    loop {
        let (has_key, held): (bool, u64) = redis::pipe()
            .hexists(&meta, "key")
            .zcard(&used)
            .query_async(conn)
            .await?;
        if has_key || held == 0 {
            return Ok(());
        }
        if started.elapsed() >= KEY_BACK_WITHIN {
            tracing::warn!(
                "the store under {prefix:?} holds {held} conversations but no handle key, and no \
                 running replica put one back within {KEY_BACK_WITHIN:?}: a new key is made, and \
                 those conversations cannot be reached (they expire with their idle lifetime)"
            );
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What a restart of Redis would lose, read from its config (`appendonly`, `save`): `None`
/// when it logs every write, or when it does not say (a managed Redis may refuse `CONFIG`).
async fn persistence_caveat(conn: &mut ConnectionManager, masked: &str) -> Option<String> {
    persistence(conn, masked).await.flatten()
}

/// [`persistence_caveat`], or `None` when Redis did not say (a `CONFIG GET` refused or timed
/// out): unknown, which is no news.
async fn persistence(conn: &mut ConnectionManager, masked: &str) -> Option<Option<String>> {
    let setting = |name: &'static str| {
        let mut conn = conn.clone();
        async move {
            let pair: Vec<String> = redis::cmd("CONFIG")
                .arg("GET")
                .arg(name)
                .query_async(&mut conn)
                .await
                .ok()?;
            pair.get(1).cloned()
        }
    };
    if setting("appendonly").await?.as_str() != "no" {
        return Some(None);
    }
    let save = setting("save").await?;
    let keeps = if save.trim().is_empty() {
        "keeps nothing on disk (appendonly no, no save points): a restart of Redis loses every \
         conversation"
            .to_string()
    } else {
        format!(
            "keeps only snapshots (appendonly no, save {save}): a restart of Redis loses what \
             was written since the last one"
        )
    };
    Some(Some(format!(
        "store {masked}: Redis {keeps}. `appendonly yes` in Redis keeps every turn (see the \
         README's \"Replicas with a shared store\")"
    )))
}

/// Redis's `appendfsync` setting (`always`, `everysec`, `no`), when it says.
async fn appendfsync(conn: &mut ConnectionManager) -> Option<String> {
    let pair: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("appendfsync")
        .query_async(conn)
        .await
        .ok()?;
    pair.get(1).cloned()
}

/// `1 conversation`, `3 conversations`.
fn plural(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// Redis's `run_id` (`INFO server`): it changes when Redis restarts.
async fn run_id(conn: &mut ConnectionManager) -> Option<String> {
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(conn)
        .await
        .ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("run_id:"))
        .map(|id| id.trim().to_string())
}

/// How the connection to Redis is kept: short timeouts (a stalled Redis fails a call, not
/// the replica), one retry, quick reconnects.
fn connection_config() -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(CONNECT_TIMEOUT))
        .set_response_timeout(Some(RESPONSE_TIMEOUT))
        .set_number_of_retries(1)
        .set_min_delay(Duration::from_millis(50))
        .set_max_delay(Duration::from_millis(500))
}

/// The replica of a lease holder `REPLICA#NONCE`.
fn replica_of(holder: &str) -> String {
    holder
        .rsplit_once('#')
        .map_or(holder, |(replica, _)| replica)
        .to_string()
}

/// An error from connecting, worded for a person starting turnscope.
fn explain(masked: &str, url: &RedisUrl, what: &str, e: &RedisError) -> StoreError {
    let detail = scrub(&e.to_string());
    let tls = url.secret().starts_with("rediss://");
    let port = reqwest::Url::parse(url.secret())
        .ok()
        .and_then(|u| u.port())
        .unwrap_or(6379);
    let start_there = format!(
        "Start Redis there (e.g. `redis-server --port {port}`), or fix the URL, or give another \
         --store"
    );
    // Redis's own answers first, said plainly: redis-rs wraps some of them (an aborted
    // transaction lists each command's error, with an index of u64::MAX).
    // A refusal redis-rs reports in its own words (switching the URL's database) keeps
    // Redis's text but not its code: "Authentication required." is NOAUTH.
    let (detail, advice) = if detail.contains("NOAUTH")
        || detail.contains("Authentication required")
    {
        (
            "Redis requires a password (NOAUTH) and the URL gives none".to_string(),
            "Give it in the URL: redis://:PASSWORD@HOST:PORT/DB (or USER:PASSWORD@ for an ACL user)",
        )
    } else if detail.contains("WRONGPASS") || detail.contains("AuthenticationFailed") {
        (
            "Redis refused the user name or password in the URL (WRONGPASS)".to_string(),
            "Check them against Redis's requirepass or ACL users",
        )
    } else if detail.contains("DB index is out of range") {
        (
            "this Redis has no such database (DB index is out of range)".to_string(),
            "Give a database it has in the URL (/0 to /15 with Redis's default `databases 16`)",
        )
    } else if e.kind() == redis::ErrorKind::InvalidClientConfig {
        (
            detail,
            "Check the URL: redis://[USER:PASSWORD@]HOST:PORT/DB, or rediss:// for TLS",
        )
    } else if detail.contains("WRONGTYPE") {
        (
            detail,
            "Keys under the prefix hold something else: give another ?prefix= in the URL",
        )
    } else if tls && e.is_timeout() {
        // A plain Redis never answers a TLS hello: the handshake waits out the timeout, as a
        // host that drops the packets does.
        (
            detail,
            "A rediss:// URL speaks TLS: is Redis there serving TLS (its tls-port)? A plain Redis \
             takes redis://; or the host does not answer at all",
        )
    } else if e.is_connection_refusal() || e.is_io_error() || e.is_timeout() {
        (detail, start_there.as_str())
    } else {
        // Redis answered: starting one there is no advice.
        (
            detail,
            "Redis answers there but refused it: check the URL (its database, user and password) \
             against Redis's settings, or give another --store",
        )
    };
    // Redis's own text may end with a period already.
    let detail = detail.trim_end_matches('.');
    StoreError::unusable(format!("store {masked}: {what} failed: {detail}. {advice}"))
}

/// `text` with anything that looks like a URL's credentials (`//user:pass@`) masked: redis-rs
/// errors never quote the URL, but this keeps it so should one ever do.
fn scrub(text: &str) -> String {
    crate::config::store::mask_credentials(text)
}

#[async_trait]
impl SessionStore for RedisStore {
    fn describe(&self) -> String {
        self.masked.clone()
    }

    fn durable(&self) -> bool {
        true
    }

    fn caveat(&self) -> Option<String> {
        self.caveat
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    async fn answered_again(&self) -> Vec<String> {
        let mut conn = self.conn();
        let mut news = Vec::new();
        let now = run_id(&mut conn).await;
        let restarted = {
            let mut kept = self.run_id.lock().unwrap_or_else(|p| p.into_inner());
            let restarted = now.is_some() && kept.is_some() && *kept != now;
            if now.is_some() {
                kept.clone_from(&now);
            }
            restarted
        };
        // Unknown (Redis did not say): neither a change nor the caveat kept is news.
        let read = persistence(&mut conn, &self.masked).await;
        let caveat = read.clone().unwrap_or_else(|| {
            self.caveat
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
        });
        if restarted {
            // What its settings promise, then what it holds: the settings are not what came
            // back (a new data directory or a wiped disk keeps nothing whatever they say).
            let kept = match &caveat {
                Some(_) => "keeps only what it had on disk, if anything".to_string(),
                None => match appendfsync(&mut conn).await.as_deref() {
                    Some("always") => "keeps every turn it acknowledged (appendonly, appendfsync \
                         always)"
                        .to_string(),
                    Some("everysec") => "keeps the turns it acknowledged up to about a second \
                         before it stopped (appendonly, appendfsync everysec)"
                        .to_string(),
                    Some(sync) => format!(
                        "keeps the turns it acknowledged up to the system's last flush to disk \
                         (appendonly, appendfsync {sync}: often half a minute)"
                    ),
                    None => "keeps the turns on disk (appendonly)".to_string(),
                },
            };
            let holds = match self.count().await {
                Ok(0) => "it holds no conversation now: if it held any before, they are gone \
                     (a new data directory, a wiped disk), and their next chat is told so"
                    .to_string(),
                Ok(n) => format!(
                    "it holds {} now; one it did not keep is told so at its next chat",
                    plural(n, "conversation")
                ),
                Err(_) => "how many conversations it holds could not be read".to_string(),
            };
            news.push(format!(
                "store {}: Redis restarted while this replica ran; set up so it {kept}, {holds}",
                self.masked
            ));
        }
        let mut was = self.caveat.lock().unwrap_or_else(|p| p.into_inner());
        if read.is_some() && *was != caveat {
            news.push(caveat.clone().unwrap_or_else(|| {
                format!(
                    "store {}: Redis now keeps every turn on disk (appendonly yes)",
                    self.masked
                )
            }));
            *was = caveat;
        }
        news
    }

    fn key(&self) -> HandleKey {
        self.current_key()
    }

    async fn create(&self, head: &Head) -> Result<u64, StoreError> {
        let json = self.json(head)?;
        let answer: Vec<redis::Value> = scripts::CREATE
            .key(self.head_key(&head.id))
            .key(self.used_key())
            .key(self.meta_key())
            .arg(self.current_key().as_bytes().as_slice())
            .arg(json)
            .arg(head.id.to_hex())
            .arg(head.last_used_ms)
            .arg(self.ttl_ms)
            .arg(head.turns)
            .arg(head.history_from_turn)
            .arg(&self.replica)
            .invoke_async(&mut self.conn())
            .await
            .map_err(|e| self.lost("storing a new session", &e))?;
        if self.met_another_key(&answer)? {
            return Err(StoreError::unusable(format!(
                "store {}: the new session was not stored: Redis lost its data while this replica \
                 ran (restarted without persistence, or flushed), and a replica started since made \
                 a new handle key under {:?}, which this replica uses from now on. Start the \
                 session again",
                self.masked,
                self.meta_key(),
            )));
        }
        let number = |i: usize| -> Result<i64, StoreError> {
            let value = answer.get(i).cloned().unwrap_or(redis::Value::Nil);
            redis::from_redis_value(value).map_err(|e| self.damaged("storing a new session", e))
        };
        let (stored, version) = (number(0)?, number(1)?);
        if stored == 0 {
            return Err(StoreError::Conflict {
                prefix: head.prefix.clone(),
                expected: 0,
                found: Some(version as u64),
            });
        }
        self.wrote(1);
        Ok(1)
    }

    async fn versions(&self, ids: &[HandleId]) -> Result<Vec<Option<Written>>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for id in ids {
            pipe.cmd("HMGET").arg(self.head_key(id)).arg("v").arg("w");
        }
        let found: Vec<(Option<u64>, Option<String>)> = pipe
            .query_async(&mut self.conn())
            .await
            .map_err(|e| self.lost("reading its sessions' versions", &e))?;
        Ok(found
            .into_iter()
            .map(|(version, writer)| version.map(|version| Written { version, writer }))
            .collect())
    }

    async fn head(&self, id: &HandleId) -> Result<Option<Head>, StoreError> {
        let (version, json): (Option<u64>, Option<String>) = redis::cmd("HMGET")
            .arg(self.head_key(id))
            .arg("v")
            .arg("head")
            .query_async(&mut self.conn())
            .await
            .map_err(|e| self.lost("reading a session", &e))?;
        match (version, json) {
            (Some(version), Some(json)) => self.head_of(version, &json).map(Some),
            _ => Ok(None),
        }
    }

    async fn turns(&self, id: &HandleId, from: u64) -> Result<Vec<StoredTurn>, StoreError> {
        let list: Vec<String> = self
            .conn()
            .zrangebyscore(self.log_key(id), from, "+inf")
            .await
            .map_err(|e| self.lost("reading a turn log", &e))?;
        self.turns_of(&list)
    }

    async fn load(&self, id: &HandleId, kept: u64) -> Result<Option<Loaded>, StoreError> {
        let found: Option<(u64, String, Vec<String>)> = scripts::LOAD
            .key(self.head_key(id))
            .key(self.log_key(id))
            .arg(kept)
            .invoke_async(&mut self.conn())
            .await
            .map_err(|e| self.lost("reading a session", &e))?;
        let Some((version, json, turns)) = found else {
            return Ok(None);
        };
        Ok(Some(Loaded {
            head: self.head_of(version, &json)?,
            turns: self.turns_of(&turns)?,
        }))
    }

    async fn commit(&self, id: &HandleId, commit: &Commit) -> Result<u64, StoreError> {
        self.commit_with(id, commit, LeaseStep::Keep)
            .await
            .map(|done| done.unwrap_or(0))
    }

    async fn delete(&self, id: &HandleId) -> Result<bool, StoreError> {
        let (removed, _): (u64, u64) = redis::pipe()
            .atomic()
            .del(&[self.head_key(id), self.log_key(id)])
            .zrem(self.used_key(), id.to_hex())
            .query_async(&mut self.conn())
            .await
            .map_err(|e| self.lost("deleting a session", &e))?;
        if removed > 0 {
            self.wrote(1);
        }
        Ok(removed > 0)
    }

    async fn expired(&self, before_ms: u64, limit: usize) -> Result<Vec<Head>, StoreError> {
        self.heads(false, before_ms, limit).await
    }

    async fn list(&self, limit: usize) -> Result<Vec<Head>, StoreError> {
        self.heads(true, 0, limit).await
    }

    async fn count(&self) -> Result<u64, StoreError> {
        self.conn()
            .zcard(self.used_key())
            .await
            .map_err(|e| self.lost("counting sessions", &e))
    }

    async fn probe(&self) -> Result<Option<String>, StoreError> {
        // A write (a key of this replica's that expires): a Redis out of memory answers
        // reads, and refuses this as it refuses a turn's write.
        // It checks the handle key too: after Redis lost its data, the key goes back (or a
        // newer replica's is taken) on this tick, before a call meets the change.
        let key = format!("{}probe:{}", self.prefix, self.replica);
        let (before, other): (Option<String>, Option<Vec<u8>>) = scripts::PROBE
            .key(key)
            .key(self.meta_key())
            .arg(&self.holder)
            .arg(PROBE_LASTS.as_millis() as u64)
            .arg(self.current_key().as_bytes().as_slice())
            .arg(SCHEMA)
            .invoke_async(&mut self.conn())
            .await
            .map_err(|e| self.lost("writing its probe key", &e))?;
        if let Some(other) = other {
            self.adopt(&other)?;
        }
        Ok(self.twin.seen(&self.holder, before))
    }

    async fn acquire(&self, id: &HandleId) -> Result<Lease, StoreError> {
        let (granted, a, b): (i64, Option<String>, Option<String>) = scripts::ACQUIRE
            .key(self.lease_key(id))
            .key(self.head_key(id))
            .key(self.stop_key(id))
            .arg(&self.holder)
            .arg(LEASE.as_millis() as u64)
            .invoke_async(&mut self.conn())
            .await
            .map_err(|e| self.lost("taking the session's lease", &e))?;
        if granted == 1 {
            return Ok(Lease::Granted {
                version: a.and_then(|v| v.parse().ok()),
                writer: b,
            });
        }
        Ok(Lease::Held {
            by: replica_of(&a.unwrap_or_default()),
            for_ms: b.and_then(|ms| ms.parse().ok()).unwrap_or(0),
        })
    }

    async fn renew(&self, ids: &[HandleId]) -> Result<Vec<HandleId>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut call = scripts::RENEW.prepare_invoke();
        call.arg(&self.prefix)
            .arg(&self.holder)
            .arg(LEASE.as_millis() as u64);
        for id in ids {
            call.arg(id.to_hex());
        }
        let asked: Vec<String> = call
            .invoke_async(&mut self.conn())
            .await
            .map_err(|e| self.lost("renewing leases", &e))?;
        Ok(ids
            .iter()
            .filter(|id| asked.contains(&id.to_hex()))
            .copied()
            .collect())
    }

    async fn put_record(&self, key: &str, value: &[u8], ttl_ms: u64) -> Result<(), StoreError> {
        self.conn()
            .pset_ex::<_, _, ()>(format!("{}{key}", self.prefix), value, ttl_ms.max(1))
            .await
            .map_err(|e| self.lost("writing a task's record", &e))
    }

    async fn get_record(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.conn()
            .get(format!("{}{key}", self.prefix))
            .await
            .map_err(|e| self.lost("reading a task's record", &e))
    }

    async fn remove_record(&self, key: &str) -> Result<(), StoreError> {
        self.conn()
            .del::<_, ()>(format!("{}{key}", self.prefix))
            .await
            .map_err(|e| self.lost("removing a task's record", &e))
    }

    async fn lease_holder(&self, id: &HandleId) -> Result<Option<String>, StoreError> {
        self.conn()
            .get(self.lease_key(id))
            .await
            .map_err(|e| self.lost("reading a session's lease", &e))
    }

    fn holder(&self) -> Option<String> {
        Some(self.holder.clone())
    }

    async fn replace_record_if(
        &self,
        key: &str,
        needle: &str,
        value: &[u8],
        ttl_ms: u64,
    ) -> Result<bool, StoreError> {
        let replaced: i64 = scripts::REPLACE_IF
            .key(format!("{}{key}", self.prefix))
            .arg(needle)
            .arg(value)
            .arg(ttl_ms.max(1))
            .invoke_async(&mut self.conn())
            .await
            .map_err(|e| self.lost("replacing a task's record", &e))?;
        Ok(replaced == 1)
    }

    async fn keep_alive(&self, ids: &[HandleId]) -> Result<(), StoreError> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut call = scripts::KEEP_ALIVE.prepare_invoke();
        call.arg(&self.prefix).arg(self.ttl_ms).arg(super::now_ms());
        for id in ids {
            call.arg(id.to_hex());
        }
        call.invoke_async::<i64>(&mut self.conn())
            .await
            .map_err(|e| self.lost("keeping its conversations from expiring", &e))?;
        Ok(())
    }

    async fn ask_interrupt(&self, id: &HandleId) -> Result<(), StoreError> {
        let _asked: i64 = scripts::ASK_INTERRUPT
            .key(self.lease_key(id))
            .key(self.stop_key(id))
            .arg(&self.holder)
            .arg(LEASE.as_millis() as u64)
            .invoke_async(&mut self.conn())
            .await
            .map_err(|e| self.lost("asking the lease's holder to interrupt its turn", &e))?;
        Ok(())
    }

    async fn release(&self, id: &HandleId) {
        let released: Result<i64, _> = scripts::RELEASE
            .key(self.lease_key(id))
            .arg(&self.holder)
            .invoke_async(&mut self.conn())
            .await;
        if let Err(e) = released {
            // It expires by itself within LEASE.
            tracing::debug!("{}", self.lost("giving a lease back", &e));
        }
    }

    async fn commit_taking_lease(
        &self,
        id: &HandleId,
        commit: &Commit,
    ) -> Result<Result<u64, Lease>, StoreError> {
        self.commit_with(id, commit, LeaseStep::Take).await
    }

    async fn commit_releasing(&self, id: &HandleId, commit: &Commit) -> Result<u64, StoreError> {
        self.commit_with(id, commit, LeaseStep::Release)
            .await
            .map(|done| done.unwrap_or(0))
    }

    fn lease_every(&self) -> Option<Duration> {
        Some(RENEW_EVERY)
    }

    fn shared(&self) -> bool {
        true
    }

    fn stats(&self) -> StoreStats {
        StoreStats {
            writes: self.writes.load(Ordering::Relaxed),
            syncs: 0,
            largest_batch: self.largest.load(Ordering::Relaxed),
        }
    }

    async fn close(&self) {}
}

#[cfg(test)]
pub(crate) mod tests;
