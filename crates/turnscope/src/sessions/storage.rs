//! The store as the session table writes it: its name and state (`/healthz`, the header,
//! the ready line), what a failed write does (a local store degrades to memory only, loudly
//! and once; a shared store retries with backoff and tells the caller), the writes themselves
//! (a new session's head, a commit with its lease step), and one reopen at a time per handle.
//! What is written when is `persist`'s.
//!
//! A write that fails for any reason but a version conflict switches the server to memory
//! only (`degraded`), loudly and once: sessions go on from memory, nothing is written any
//! more, `/healthz` says `degraded`, the console and stderr say why.
//!
//! A shared store (Redis, which several replicas use and which reconnects on its own) is
//! different: a failed write is retried with backoff ([`RETRY_AFTER`]), and if it still fails
//! its caller gets [`ChatError::Unsaved`](super::ChatError::Unsaved) naming the store;
//! `/healthz` says `degraded` until the store answers again (the sweeper's tick probes it),
//! and writing never stops.
//!
//! A shared store's handle key may change under a running replica: Redis lost its data and a
//! replica started since made a new one ([`SessionStore::key`]). That is said once
//! ([`Storage::rekeyed`]); a new session whose write met it is written again under the new
//! key, and the conversations hashed with the old one are gone (their next call is told so,
//! the copies sweep lets them go).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};

use uuid::Uuid;

use crate::bot::Bot;
use crate::observe::{Bus, Event, SessionOpener, event::now_us};
use crate::store::{Commit, HandleId, HandleKey, Head, SessionStore, StoreError, now_ms};

/// The waits before each retry of a shared store's failed write (about 2 s in all, what a
/// Redis restart or failover takes on a quiet machine).
const RETRY_AFTER: [std::time::Duration; 3] = [
    std::time::Duration::from_millis(150),
    std::time::Duration::from_millis(500),
    std::time::Duration::from_millis(1500),
];

/// The store's name and state, for the header, `/healthz` and the ready line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreStatus {
    /// `memory`, `sqlite:/path`.
    pub url: String,
    /// Whether it outlives the process (not once writes stopped).
    pub durable: bool,
    /// Why writes stopped, once one failed (sessions then live in memory only).
    pub degraded: Option<String>,
    /// What an operator must fix though writes go on (another process serves with this
    /// replica's id on a shared store).
    pub warning: Option<String>,
}

/// What a session knows of its stored state (guarded by its chat lock).
pub(crate) struct Stored {
    /// The head as last written (its version is the store's current one).
    pub(super) head: Head,
    /// Written turns whose messages the history window still holds: (turn, last message).
    pub(super) window: VecDeque<(u64, u64)>,
    /// A turn's mark whose write a shared store did not confirm (it did not answer in time):
    /// its caller was told nothing ran, yet the store may apply it late. A later write that
    /// finds exactly this mark in the store adopts it instead of taking the conversation for
    /// changed elsewhere (which reported the never-run line as cut off by a crash).
    pub(super) unsure: Option<crate::store::InFlight>,
}

impl Stored {
    /// A session's stored state right after its head was first written.
    pub(super) fn new(head: Head) -> Self {
        Self {
            head,
            window: VecDeque::new(),
            unsure: None,
        }
    }

    /// The version of the head this process last read or wrote.
    pub(crate) fn version(&self) -> u64 {
        self.head.version
    }
}

/// The store as the session table uses it.
pub(crate) struct Storage {
    store: Arc<dyn SessionStore>,
    url: String,
    durable: bool,
    bus: Bus,
    degraded: OnceLock<String>,
    /// A shared store: other processes use it too, and it reconnects on its own.
    shared: bool,
    /// A shared store's last failure, until it answers again (`/healthz` says `degraded`).
    trouble: Mutex<Option<String>>,
    /// Whether a refusal of the URL's credentials was said since the store last answered
    /// (said even when the failure before it, a lost connection, was said already).
    said_credentials: std::sync::atomic::AtomicBool,
    /// A shared store failed since its probe last asked what it came back as (a write may
    /// have seen it answer first).
    ask_what_came_back: std::sync::atomic::AtomicBool,
    /// The shared store's last probe's warning, while it lasts.
    warning: Mutex<Option<String>>,
    /// Per handle being reopened, the lock that makes concurrent calls wait for one reopen.
    reopening: Mutex<HashMap<HandleId, Arc<tokio::sync::Mutex<()>>>>,
    /// The store's handle key as last seen here, to say once that it changed.
    key_seen: Mutex<HandleKey>,
}

/// Why a write did not happen.
#[derive(Debug)]
pub(crate) enum Conflict {
    /// The head changed elsewhere since this process read it.
    Changed(StoreError),
    /// A shared store did not take it, retries included.
    Unsaved(StoreError),
    /// [`LeaseStep::Take`]: another replica holds the lease (or nothing was to be written),
    /// so nothing was written and no lease taken.
    NotTaken,
}

impl Conflict {
    /// Whether the write found no head at all: the store no longer holds the conversation
    /// (deleted, expired, or lost by the store: a Redis restarted without persistence).
    pub(crate) fn head_gone(&self) -> bool {
        matches!(
            self,
            Conflict::Changed(StoreError::Conflict { found: None, .. })
        )
    }
}

impl std::fmt::Display for Conflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Conflict::Changed(e) | Conflict::Unsaved(e) => e.fmt(f),
            Conflict::NotTaken => f.write_str("store: the session's lease was not taken"),
        }
    }
}

/// What a write does with the conversation's lease on a shared store (a store with no
/// leases ignores it): one round trip for the write and the lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LeaseStep {
    /// Leaves it as it is.
    Keep,
    /// Takes it first; [`Conflict::NotTaken`] while another replica holds it. Not retried:
    /// the turn has not begun, so its caller is told at once.
    Take,
    /// Gives it back after the write, whatever its outcome.
    Release,
}

impl Storage {
    /// The table's view of `store`; notices go out on `bus`.
    pub(crate) fn new(store: Arc<dyn SessionStore>, bus: Bus) -> Self {
        Self {
            url: store.describe(),
            durable: store.durable(),
            key_seen: Mutex::new(store.key()),
            shared: store.shared(),
            store,
            bus,
            degraded: OnceLock::new(),
            trouble: Mutex::new(None),
            said_credentials: std::sync::atomic::AtomicBool::new(false),
            ask_what_came_back: std::sync::atomic::AtomicBool::new(false),
            warning: Mutex::new(None),
            reopening: Mutex::new(HashMap::new()),
        }
    }

    /// The store itself, for the reads (heads, logs, the sweep's expired list).
    pub(crate) fn store(&self) -> &Arc<dyn SessionStore> {
        &self.store
    }

    /// The store's handle key: what hashes a handle into its id.
    pub(crate) fn key(&self) -> HandleKey {
        self.store.key()
    }

    /// Whether the store's handle key changed since it was last seen here (a shared store
    /// whose data was lost: [`SessionStore::key`]); says so once, on stderr and in the Log.
    pub(crate) fn rekeyed(&self) -> bool {
        let now = self.store.key();
        {
            let mut seen = self.key_seen.lock().unwrap_or_else(|p| p.into_inner());
            if seen.as_bytes() == now.as_bytes() {
                return false;
            }
            *seen = now;
        }
        let message = format!(
            "store {}: Redis lost its data while this replica ran (restarted without persistence, \
             or flushed), and a replica started since made a new handle key; this replica uses \
             it from now on. The conversations Redis held are gone: each one's next call is told \
             so and to call start; new ones are stored as before. `appendonly yes` in Redis keeps \
             them over a restart (see the README's \"Replicas with a shared store\")",
            self.url
        );
        tracing::warn!("{message}");
        self.publish_log("warn", message);
        true
    }

    /// Whether conversations outlive the process (and writing has not stopped).
    pub(crate) fn durable(&self) -> bool {
        self.durable && self.degraded.get().is_none()
    }

    /// The store as the header, `/healthz` and the ready line show it.
    pub(crate) fn status(&self) -> StoreStatus {
        StoreStatus {
            url: self.url.clone(),
            // Not once writing stopped: what is said now lives in memory only.
            durable: self.durable(),
            degraded: self.degraded.get().cloned().or_else(|| self.troubled()),
            warning: self
                .warning
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
        }
    }

    /// Whether writes stopped or a shared store is failing now (cheap: for each frame's header).
    pub(crate) fn is_degraded(&self) -> bool {
        self.degraded.get().is_some()
            || self
                .trouble
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .is_some()
    }

    fn troubled(&self) -> Option<String> {
        self.trouble
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// A shared store answered: it is no longer degraded (said once, when it was).
    pub(super) fn answered(&self) {
        let was = self
            .trouble
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        self.said_credentials
            .store(false, std::sync::atomic::Ordering::Relaxed);
        if was.is_some() {
            let message = format!("store {} answers again; turns are saved again", self.url);
            // On stderr beside the failure it ends; in the console's Log as news, not as a
            // warning the header counts.
            tracing::warn!("{message}");
            self.publish_log("info", message);
        }
    }

    /// Probes a shared store on the sweeper's tick (one cheap round trip), so `/healthz`
    /// says `degraded` when it is lost and recovers with it even when no call writes (an
    /// idle replica said `ok` with Redis down until a call failed).
    pub(crate) async fn probe(&self) {
        if !self.shared {
            return;
        }
        match self.store.probe().await {
            Ok(warning) => {
                self.answered();
                self.rekeyed();
                self.warn(warning);
                if self
                    .ask_what_came_back
                    .swap(false, std::sync::atomic::Ordering::Relaxed)
                {
                    // Said once each: it restarted (what it kept), or keeps its data otherwise.
                    for news in self.store.answered_again().await {
                        tracing::warn!("{news}");
                        self.publish_log("warn", news);
                    }
                }
            }
            Err(e) => self.fail(&e),
        }
    }

    /// Keeps a probe's warning for `/healthz`; says it when it begins (an error in the Log
    /// and on stderr) and when it ends.
    fn warn(&self, warning: Option<String>) {
        let mut kept = self.warning.lock().unwrap_or_else(|p| p.into_inner());
        match (kept.is_some(), &warning) {
            (false, Some(text)) => {
                let message = format!("store {}: {text}", self.url);
                tracing::error!("{message}");
                self.publish_log("error", message);
            }
            (true, None) => {
                let message = format!(
                    "store {}: no other process writes this replica's probe key any more",
                    self.url
                );
                tracing::warn!("{message}");
                self.publish_log("info", message);
            }
            _ => {}
        }
        *kept = warning;
    }

    /// Whether writes still go to the store (not degraded to memory).
    pub(super) fn writing(&self) -> bool {
        self.degraded.get().is_none()
    }

    /// Stops writing after `e`, saying so once on every channel a person watches.
    pub(super) fn fail(&self, e: &StoreError) {
        let reason = e.to_string();
        if self.shared {
            self.ask_what_came_back
                .store(true, std::sync::atomic::Ordering::Relaxed);
            let mut trouble = self.trouble.lock().unwrap_or_else(|p| p.into_inner());
            let first = trouble.replace(reason.clone()).is_none();
            // A lost connection whose reconnect Redis refused (its password changed): the
            // refusal is the cause to fix, said too though the loss was said first.
            let credentials = reason.contains(crate::store::redis::CREDENTIALS_REFUSED)
                && !self
                    .said_credentials
                    .swap(true, std::sync::atomic::Ordering::Relaxed);
            if first || credentials {
                // Said once each: the store's own text names it and may say it reconnects.
                let said = reason
                    .strip_prefix(&format!("store {}: ", self.url))
                    .unwrap_or(&reason)
                    .trim_end_matches('.');
                let reconnects = if said.contains("reconnects on its own") {
                    ""
                } else {
                    "; turnscope reconnects on its own"
                };
                let message = format!(
                    "store {} failed: {said}. Calls that need it get an error naming it until it answers \
                     again{reconnects}",
                    self.url
                );
                tracing::error!("{message}");
                self.publish_log("error", message);
            }
            return;
        }
        if self.degraded.set(reason.clone()).is_err() {
            return;
        }
        let message = format!(
            "store {} failed: {reason}. Serving from memory from now on: conversations go on, but nothing \
             more is stored, so a restart loses what happens from here. Fix the store and restart turnscope",
            self.url
        );
        tracing::error!("{message}");
        self.publish_log("error", message);
    }

    /// Puts `message` on the bus at `level` (the console's Log pane, `--events`), beside the
    /// line its caller logs.
    fn publish_log(&self, level: &'static str, message: String) {
        self.bus.publish(Event::Log {
            at_ms: now_us() / 1000,
            level: level.into(),
            message,
        });
    }

    /// Writes a new session's head (`greeting`: the one it opened with); `Ok(None)` when
    /// nothing is stored (writing stopped), an error when a shared store did not take it.
    pub(crate) async fn create(
        &self,
        handle: &Uuid,
        id: HandleId,
        opener: &SessionOpener,
        bot: &Bot,
        greeting: Option<&str>,
    ) -> Result<Option<Stored>, StoreError> {
        if !self.writing() {
            return Ok(None);
        }
        let now = now_ms();
        let greeting = greeting.map(str::to_string);
        let mut head = Head {
            id,
            prefix: crate::store::handle::shown_prefix(handle),
            bot: bot.name().unwrap_or("bot").to_string(),
            opener: opener.clone(),
            messages: u64::from(greeting.is_some()),
            greeting,
            created_ms: now,
            last_used_ms: now,
            kept_alive_ms: 0,
            turns: 0,
            forgotten: 0,
            history_from_turn: 1,
            in_flight: None,
            unread: None,
            errors: 0,
            version: 0,
        };
        let mut again = true;
        loop {
            let e = match self.store.create(&head).await {
                Ok(version) => {
                    if self.shared {
                        self.answered();
                    }
                    head.version = version;
                    return Ok(Some(Stored::new(head)));
                }
                Err(e) => e,
            };
            // The store's key changed (a shared store that lost its data): nothing was written,
            // and the handle's id under the new key is another. Written again, once.
            self.rekeyed();
            let fresh = self.store.key().id_of(handle);
            if fresh == head.id {
                self.fail(&e);
                return if self.shared { Err(e) } else { Ok(None) };
            }
            self.answered();
            if !std::mem::take(&mut again) {
                return Err(e);
            }
            head.id = fresh;
        }
    }

    /// Applies `commit` with the lease `step`; `Ok(None)` when nothing was written (writing
    /// stopped). [`LeaseStep::Release`] gives the lease back whatever happens.
    pub(super) async fn commit(
        &self,
        id: &HandleId,
        commit: &Commit,
        step: LeaseStep,
    ) -> Result<Option<u64>, Conflict> {
        let step = if self.shared { step } else { LeaseStep::Keep };
        if !self.writing() {
            return match step {
                LeaseStep::Take => Err(Conflict::NotTaken),
                LeaseStep::Release => {
                    self.release(id).await;
                    Ok(None)
                }
                LeaseStep::Keep => Ok(None),
            };
        }
        let mut retries = RETRY_AFTER.iter();
        loop {
            let done = match step {
                LeaseStep::Keep => self.store.commit(id, commit).await,
                LeaseStep::Release => self.store.commit_releasing(id, commit).await,
                LeaseStep::Take => match self.store.commit_taking_lease(id, commit).await {
                    Ok(Err(_held)) => return Err(Conflict::NotTaken),
                    Ok(Ok(version)) => Ok(version),
                    Err(e) => Err(e),
                },
            };
            match done {
                Ok(version) => {
                    if self.shared {
                        self.answered();
                    }
                    return Ok(Some(version));
                }
                Err(e @ StoreError::Conflict { .. }) => {
                    // A shared store whose key changed answers so (the head is gone with
                    // what it lost): said once.
                    if self.shared {
                        self.rekeyed();
                    }
                    return Err(Conflict::Changed(e));
                }
                // A turn not begun yet: its caller hears at once, as when taking the lease.
                Err(e) if step == LeaseStep::Take => {
                    self.fail(&e);
                    return Err(Conflict::Unsaved(e));
                }
                Err(e) if self.shared => match retries.next() {
                    Some(wait) => {
                        tracing::debug!("store write failed, retrying in {wait:?}: {e}");
                        tokio::time::sleep(*wait).await;
                    }
                    None => {
                        self.fail(&e);
                        if step == LeaseStep::Release {
                            self.release(id).await;
                        }
                        return Err(Conflict::Unsaved(e));
                    }
                },
                Err(e) => {
                    self.fail(&e);
                    return Ok(None);
                }
            }
        }
    }

    /// Whether other processes share the store.
    pub(crate) fn shared(&self) -> bool {
        self.shared
    }

    /// Deletes a handle's session from the store; a failure degrades the store, never the call.
    pub(crate) async fn delete(&self, id: &HandleId) {
        if self.writing()
            && let Err(e) = self.store.delete(id).await
        {
            self.fail(&e);
        }
    }

    /// Gives a handle's lease back (a shared store; a no-op otherwise).
    pub(crate) async fn release(&self, id: &HandleId) {
        self.store.release(id).await;
    }

    /// The lock one reopen of `id` holds, so concurrent calls on a stored handle wait for it.
    pub(super) fn gate(&self, id: HandleId) -> Arc<tokio::sync::Mutex<()>> {
        self.reopening
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(id)
            .or_default()
            .clone()
    }

    /// Forgets `id`'s reopen lock once its reopen is done.
    pub(super) fn ungate(&self, id: &HandleId) {
        self.reopening
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
    }
}
