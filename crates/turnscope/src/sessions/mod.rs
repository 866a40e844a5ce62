//! Sessions: handles, the session table with its cap and idle sweep, and the `chat`
//! semantics shared by the MCP server and the console.
//!
//! One handle = one session = one bot pipeline, context and history. Handles are UUIDv4
//! bearer secrets (106 random bits; the last 4 hex digits are the replica's tag, see
//! `replica`); only their first 8 characters are ever logged or published. The table is
//! keyed by the handle's keyed hash ([`HandleId`], the store's key), so a lookup costs one
//! hash and reveals nothing about the secret by its timing; the found handle is compared
//! once more in constant time.
//!
//! Every session is also kept in a [`SessionStore`] (`persist`): a session not in the table
//! but in the store (this process restarted, or its bot stopped) is reopened on its next
//! `chat`, lazily, with its history, unread reply and records.

mod chat;
mod ended;
mod ending;
mod errors;
pub mod haproxy;
mod persist;
mod progress;
pub mod replica;
mod reply;
#[cfg(test)]
mod shared_tests;
mod storage;
#[cfg(test)]
mod store_tests;
pub mod task_store;
mod tasks;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use subtle::ConstantTimeEq;
use uuid::Uuid;

pub use errors::ChatError;
pub use progress::{PROGRESS_CHARS, ProgressSink, progress_text};
pub use replica::Replica;
pub(crate) use reply::ReadMark;
pub use reply::{CallerWatch, ChatOutcome, ChatReply, TaskAsk, ToolCallSummary, UnreadTurn};
pub use storage::StoreStatus;
pub use task_store::{
    MemoryTaskStore, SharedTaskStore, TaskOutcome, TaskRecord, TaskStatus, TaskStore,
};
pub use tasks::{TASKS_PER_SESSION, TaskError, TaskSettings};

use crate::bot::{Bot, BotSession, Turn};
use crate::observe::{Bus, Event, SessionEvent, SessionOpener, event::now_us};
use crate::pipeline::Observer;
use crate::store::{HandleId, SessionStore, memory::MemoryStore};

/// Limits of the session table.
#[derive(Debug, Clone)]
pub struct SessionLimits {
    /// Most sessions open at once.
    pub cap: usize,
    /// A session with no call for this long is dropped.
    pub handle_seconds: u64,
    /// How often the sweep runs.
    pub(crate) sweep_every: Duration,
    /// When `chat` calls become MCP tasks.
    pub tasks: TaskSettings,
}

impl Default for SessionLimits {
    fn default() -> Self {
        Self {
            cap: 32,
            handle_seconds: 300,
            sweep_every: Duration::from_secs(30),
            tasks: TaskSettings::default(),
        }
    }
}

impl SessionLimits {
    /// The limits `[server]` sets (at start, and again on each reload).
    pub fn of(server: &crate::config::ServerSection) -> Self {
        Self {
            cap: server.sessions,
            handle_seconds: server.handle_seconds,
            sweep_every: Duration::from_secs_f64(server.sweep_seconds.max(0.01)),
            tasks: TaskSettings {
                enabled: server.tasks,
                after: Duration::from_secs_f64(server.task_after_seconds),
                poll: crate::config::task_poll(server),
            },
        }
    }
}

/// Marks one `chat` call in progress (see [`Sessions::close_all`]).
pub(crate) struct CallGuard(Arc<Inner>);

impl Drop for CallGuard {
    fn drop(&mut self) {
        self.0.calls_in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// How many turns a session keeps for the console's live transcript. Bounded so a long
/// conversation costs bounded memory; the store and `--events` keep every turn.
const KEPT_TURNS: usize = 64;

/// One open session.
pub struct Session {
    /// The secret handle.
    handle: Uuid,
    /// Its keyed hash: the table's and the store's key.
    id: HandleId,
    /// A small number events and the console use instead of the handle.
    pub number: u64,
    /// Who opened it.
    pub opener: SessionOpener,
    /// When it began opening in this process (before its bot started, so before its first
    /// frame).
    pub opened: Instant,
    /// When the conversation began, ms since the Unix epoch: its first opening, also for one
    /// reopened after a restart (whose `opened` is its reopening here). What its age counts from.
    pub began_ms: u64,
    /// Whether it continues a conversation kept in the store (reopened after a restart).
    pub restored: bool,
    /// The last of the turns it was reopened with (0 for one born here): those ran before
    /// this opening, and the viewers watching it reopen are told them again.
    pub restored_turns: u64,
    /// The replica this one took the conversation over from, on a store the replicas share
    /// (see [`SessionEvent::taken_from`]); `None` when born here or continued by this replica.
    pub taken_from: Option<String>,
    last_used_ms: AtomicU64,
    /// When the store last marked it used for a running console that holds it (ms since
    /// the Unix epoch; 0: never), so an idle console session is written once per half
    /// lifetime, not at every sweep (`Sessions::keep_console_held_alive`).
    kept_alive_ms: AtomicU64,
    /// The client that held it let go (its MCP session ended) and no call came since: the
    /// client's name and when (µs since the epoch), told to a viewer that connects meanwhile
    /// as it was told live (the same line, which a reconnecting viewer knows it had). `gone`
    /// says so without a lock.
    client_gone: Mutex<Option<(String, u64)>>,
    gone: std::sync::atomic::AtomicBool,
    /// Which MCP client holds it: the mark of the MCP session that opened it or last chatted
    /// on it (`server::held`), 0 when that was a call outside an MCP session (a 2026-07-28
    /// client, Xiaozhi's `@bot`) or nobody yet. Only the holder's going marks it client gone.
    holder: AtomicU64,
    /// Closed here and its stored copy deleted on purpose ([`Sessions::close`]: the bot's
    /// `end_session`, the console, the idle sweep): a write of its last turn that then finds
    /// it gone from the store is that close's doing, not news to warn about.
    deleted_here: std::sync::atomic::AtomicBool,
    /// The turn the shutdown cut ([`Sessions::close_all`]; 0: none): the call reading it
    /// keeps it unread, for the next `chat` after the restart to report.
    cut: AtomicU64,
    epoch: Instant,
    bot: BotSession,
    chat: tokio::sync::Mutex<persist::ChatState>,
    turns: Mutex<VecDeque<Arc<Turn>>>,
}

impl Session {
    /// When its conversation began (µs since the epoch) if that was before it opened here
    /// (one reopened from the store), for the events that tell its opening.
    pub fn began_before_opening_us(&self) -> Option<u64> {
        self.restored.then_some(self.began_ms.saturating_mul(1000))
    }

    /// The first 8 characters of the handle, safe to show.
    pub fn handle_prefix(&self) -> String {
        crate::store::handle::shown_prefix(&self.handle)
    }

    /// The full handle (a secret: give it only to whoever opened the session).
    pub fn handle(&self) -> String {
        self.handle.to_string()
    }

    /// The handle's keyed hash.
    pub fn id(&self) -> HandleId {
        self.id
    }

    /// The bot session.
    pub fn bot(&self) -> &BotSession {
        &self.bot
    }

    /// Time since the last call, or since its latest turn ended when that is later: a turn
    /// still running (its caller gone after a cancel or a dropped stream) is activity, and
    /// its reply must stay readable for the idle lifetime after it ends, not be swept with
    /// the session while it streams.
    pub fn idle(&self) -> Duration {
        let last = Duration::from_millis(self.last_used_ms.load(Ordering::Relaxed));
        let since_call = self.epoch.elapsed().saturating_sub(last);
        match self.bot.current_turn() {
            Some(turn) if !turn.is_done() => Duration::ZERO,
            Some(turn) => {
                let ended = turn.with_record(|r| r.total).map(|t| turn.started() + t);
                ended.map_or(since_call, |at| since_call.min(at.elapsed()))
            }
            None => since_call,
        }
    }

    fn touch(&self) {
        self.last_used_ms
            .store(self.epoch.elapsed().as_millis() as u64, Ordering::Relaxed);
        // A plain load on every call; the swap only when a client had let go.
        if self.gone.load(Ordering::Relaxed) && self.gone.swap(false, Ordering::Relaxed) {
            *self.client_gone.lock().unwrap_or_else(|p| p.into_inner()) = None;
        }
    }

    /// The client that held it let go of it (`client`: its name) at `at_us`, until the next
    /// call.
    pub(crate) fn client_went(&self, client: &str, at_us: u64) {
        *self.client_gone.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((client.to_string(), at_us));
        self.gone.store(true, Ordering::Relaxed);
    }

    /// The MCP client marked `holder` (an MCP session's mark, 0 for a call outside one) opened
    /// it or chatted on it: it holds it now, whoever held it before.
    pub(crate) fn held_by(&self, holder: u64) {
        self.holder.store(holder, Ordering::Relaxed);
    }

    /// Whether the MCP session marked `holder` is the one that opened it or last chatted on it.
    pub(crate) fn is_held_by(&self, holder: u64) -> bool {
        self.holder.load(Ordering::Relaxed) == holder
    }

    /// Whether this process closed it and deleted its stored copy on purpose.
    fn deleted_here(&self) -> bool {
        self.deleted_here.load(Ordering::Relaxed)
    }

    /// The client that let go of it and when, when no call came since.
    pub fn client_gone(&self) -> Option<(String, u64)> {
        if !self.gone.load(Ordering::Relaxed) {
            return None;
        }
        self.client_gone
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Whether a call holds the session's lock now.
    pub fn in_call(&self) -> bool {
        self.chat.try_lock().is_err()
    }

    /// Whether it went without a call for longer than `lifetime` and none holds it now: the
    /// idle sweep ends it, and a call finding it so refuses it. Never one the console opened
    /// while that console runs (`console_holds`): the person at it holds it (looking at its
    /// turns, resending its requests) until they close it or quit; the lifetime is for
    /// handles an MCP client may have left.
    pub(crate) fn expired(&self, lifetime: Duration, console_holds: bool) -> bool {
        self.idle() > lifetime && !self.in_call() && !(console_holds && self.held_by_console())
    }

    /// Whether the console opened it.
    pub fn held_by_console(&self) -> bool {
        matches!(self.opener, SessionOpener::Console)
    }

    /// The session's turns, oldest first (the last `KEPT_TURNS`).
    pub fn turns(&self) -> Vec<Arc<Turn>> {
        self.turns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .cloned()
            .collect()
    }

    /// The last turn kept, when it is the one `request` already started with `line`
    /// ([`Turn::answers`]).
    fn answered(&self, request: &str, line: &str) -> Option<Arc<Turn>> {
        let turns = self.turns.lock().unwrap_or_else(|p| p.into_inner());
        turns.back().filter(|t| t.answers(request, line)).cloned()
    }

    fn remember(&self, turn: Arc<Turn>) {
        let mut turns = self.turns.lock().unwrap_or_else(|p| p.into_inner());
        if turns.len() == KEPT_TURNS {
            turns.pop_front();
        }
        turns.push_back(turn);
    }
}

/// The open sessions, by id and by number (both lookups are one hash).
#[derive(Default)]
struct Table {
    by_id: HashMap<HandleId, Arc<Session>>,
    by_number: HashMap<u64, HandleId>,
}

/// The session table: opens, finds, sweeps and closes sessions of one bot.
#[derive(Clone)]
pub struct Sessions {
    inner: Arc<Inner>,
}

struct Inner {
    bot: Bot,
    bus: Bus,
    /// Replaced whole by a config reload; read with an atomic load.
    limits: arc_swap::ArcSwap<SessionLimits>,
    table: Mutex<Table>,
    /// Sessions open or being opened: what the cap counts (a slot is taken before the bot
    /// opens, outside the table's lock).
    slots: AtomicUsize,
    next_number: AtomicU64,
    epoch: Instant,
    /// `chat` calls in progress, across all sessions (shutdown waits for them to answer).
    calls_in_flight: AtomicUsize,
    /// Whether a console runs in this process and holds the sessions it opened: they do not
    /// idle out then ([`Session::expired`]).
    console_holds: AtomicBool,
    /// Which replica this table is (handles end in its tag).
    replica: Replica,
    /// Set by [`Sessions::drain`]: no new session, no new line.
    draining: AtomicBool,
    /// Set by [`Sessions::close_all`]: this process is ending its sessions.
    stopping: AtomicBool,
    /// Writes of replies that did not reach their caller, still running
    /// ([`Sessions::reply_not_delivered`]); the shutdown waits for them.
    undelivered_writes: Arc<AtomicUsize>,
    /// Where sessions are kept.
    storage: storage::Storage,
    /// The live tasks (`chat` calls answered with a task), by id.
    tasks: tasks::TaskTable,
    /// Where task records are kept.
    task_store: Arc<dyn TaskStore>,
    /// Conversations ended here, remembered a while for the `chat` calls that come after.
    ended: ended::EndedHandles,
}

impl Sessions {
    /// A table for sessions of `bot`, publishing on `bus`, as replica `local`, kept in memory.
    pub fn new(bot: Bot, bus: Bus, limits: SessionLimits) -> Self {
        Self::for_replica(bot, bus, limits, Replica::default())
    }

    /// A table for sessions of `bot` on replica `replica` (its handles end in its tag), kept
    /// in memory.
    pub fn for_replica(bot: Bot, bus: Bus, limits: SessionLimits, replica: Replica) -> Self {
        Self::with_store(bot, bus, limits, replica, Arc::new(MemoryStore::new()))
    }

    /// A table for sessions of `bot` on replica `replica`, kept in `store` (task records in
    /// it too when the replicas share it, else in memory).
    pub fn with_store(
        bot: Bot,
        bus: Bus,
        limits: SessionLimits,
        replica: Replica,
        store: Arc<dyn SessionStore>,
    ) -> Self {
        let task_store: Arc<dyn TaskStore> = if store.shared() {
            Arc::new(task_store::SharedTaskStore::new(store.clone()))
        } else {
            Arc::new(MemoryTaskStore::default())
        };
        Self::with_stores(bot, bus, limits, replica, store, task_store)
    }

    /// [`Sessions::with_store`] keeping task records in `task_store` (shared by replicas
    /// when the store is).
    pub fn with_stores(
        bot: Bot,
        bus: Bus,
        limits: SessionLimits,
        replica: Replica,
        store: Arc<dyn SessionStore>,
        task_store: Arc<dyn TaskStore>,
    ) -> Self {
        let storage = storage::Storage::new(store, bus.clone());
        Self {
            inner: Arc::new(Inner {
                bot,
                bus,
                limits: arc_swap::ArcSwap::from_pointee(limits),
                table: Mutex::new(Table::default()),
                slots: AtomicUsize::new(0),
                next_number: AtomicU64::new(1),
                epoch: Instant::now(),
                calls_in_flight: AtomicUsize::new(0),
                console_holds: AtomicBool::new(false),
                replica,
                draining: AtomicBool::new(false),
                stopping: AtomicBool::new(false),
                undelivered_writes: Arc::new(AtomicUsize::new(0)),
                storage,
                tasks: tasks::TaskTable::default(),
                task_store,
                ended: ended::EndedHandles::default(),
            }),
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> SessionLimits {
        SessionLimits::clone(&self.inner.limits.load())
    }

    /// Replaces the limits (a config reload): a lower cap refuses new sessions until enough
    /// have closed, never closes open ones; a new idle lifetime counts from each session's
    /// last call; the sweep runs at the new interval from its next round.
    pub fn set_limits(&self, limits: SessionLimits) {
        self.inner.limits.store(Arc::new(limits));
    }

    /// The bot sessions are opened on.
    pub fn bot(&self) -> &Bot {
        &self.inner.bot
    }

    /// Marks that a console runs in this process: the sessions it opened live until the
    /// person closes them or quits ([`Session::expired`]).
    pub fn hold_console_sessions(&self) {
        self.inner.console_holds.store(true, Ordering::Release);
    }

    /// Whether a console in this process holds the sessions it opened.
    pub(crate) fn console_holds(&self) -> bool {
        self.inner.console_holds.load(Ordering::Acquire)
    }

    /// The event bus.
    pub fn bus(&self) -> &Bus {
        &self.inner.bus
    }

    /// The replica this table is.
    pub fn replica(&self) -> &Replica {
        &self.inner.replica
    }

    /// The store sessions are kept in.
    pub fn store(&self) -> &Arc<dyn SessionStore> {
        self.inner.storage.store()
    }

    /// The store's name and state (`degraded` once a write failed).
    pub fn store_status(&self) -> StoreStatus {
        self.inner.storage.status()
    }

    /// Whether the store is degraded now (writes stopped, or a shared store failing).
    pub fn store_degraded(&self) -> bool {
        self.inner.storage.is_degraded()
    }

    /// Whether [`Sessions::drain`] began: no new session, no new line.
    pub fn is_draining(&self) -> bool {
        self.inner.draining.load(Ordering::Acquire)
    }

    /// Whether calls are refused now: draining, with conversations that live only here. On a
    /// shared store a draining replica refuses nothing: every turn is in the store, so it
    /// serves what still reaches it while the balancer moves its handles to the others.
    fn refusing(&self) -> bool {
        self.is_draining() && !self.inner.storage.shared()
    }

    fn draining_error(&self) -> ChatError {
        ChatError::Draining {
            replica: self.inner.replica.id_arc(),
            shared: self.inner.storage.store().shared(),
            one_of_several: self.inner.replica.is_one_of_several(),
        }
    }

    /// "No session", or "draining" on a draining replica (whose sessions end as it exits).
    fn unknown(&self) -> ChatError {
        if self.refusing() {
            self.draining_error()
        } else {
            ChatError::NoSession {
                handle_seconds: self.inner.limits.load().handle_seconds,
                kept: self.inner.storage.durable(),
                shared: self.inner.storage.shared(),
            }
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.inner.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes a slot under the cap (freed by [`Sessions::free_slot`] when the session closes
    /// or fails to open).
    fn take_slot(&self) -> Result<(), ChatError> {
        let limits = self.inner.limits.load();
        self.inner
            .slots
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limits.cap).then_some(n + 1)
            })
            .map(|_| ())
            .map_err(|_| ChatError::Cap {
                cap: limits.cap,
                handle_seconds: limits.handle_seconds,
            })
    }

    fn free_slot(&self) {
        self.inner.slots.fetch_sub(1, Ordering::AcqRel);
    }

    /// Puts an opened session in the table and says so (event, log).
    fn admit(&self, session: &Arc<Session>) {
        {
            let mut table = self.table();
            table.by_number.insert(session.number, session.id);
            table.by_id.insert(session.id, session.clone());
        }
        self.watch_end_request(session);
        self.inner.bus.publish_with(|| {
            Event::Session(SessionEvent {
                session: session.number,
                handle_prefix: session.handle_prefix(),
                opener: session.opener.clone(),
                closed: None,
                // When it began opening, so its pipeline's first frames (published before
                // this) are not older than the session they belong to.
                at_us: now_us().saturating_sub(session.opened.elapsed().as_micros() as u64),
                restored: session.restored,
                began_us: session.began_before_opening_us(),
                taken_from: session.taken_from.clone(),
                greeting: session.bot.greeting().map(str::to_string),
            })
        });
        tracing::info!(session = session.number, handle = %session.handle_prefix(), restored = session.restored, taken_from = session.taken_from.as_deref(), "session opened");
    }

    /// Opens a session, unless the cap is reached; it is in the store before its handle is
    /// returned. The bot opens (the tools factory, your processors) outside the table's lock.
    pub async fn open(&self, opener: SessionOpener) -> Result<Arc<Session>, ChatError> {
        if self.refusing() {
            return Err(self.draining_error());
        }
        self.take_slot_freeing_copies().await?;
        // Before the bot starts: its pipeline's first frames count from here.
        let opening = Instant::now();
        let number = self.inner.next_number.fetch_add(1, Ordering::Relaxed);
        let handle = self.inner.replica.stamp(Uuid::new_v4());
        let id = self.inner.storage.key().id_of(&handle);
        let bot = self
            .inner
            .bot
            .open(Observer::new(self.inner.bus.clone(), number));
        let stored = match self
            .inner
            .storage
            .create(&handle, id, &opener, &self.inner.bot, bot.greeting())
            .await
        {
            Ok(stored) => stored,
            Err(e) => {
                // A shared store that did not take it: no handle that no replica could serve.
                self.free_slot();
                bot.end().await;
                return Err(ChatError::NotStarted {
                    message: e.to_string(),
                });
            }
        };
        // Written under another id when the store's key changed meanwhile (`Storage::create`).
        let id = stored.as_ref().map_or(id, |s| s.head.id);
        let began_ms = stored
            .as_ref()
            .map_or_else(crate::store::now_ms, |s| s.head.created_ms);
        let session = Arc::new(Session {
            handle,
            id,
            number,
            opener,
            opened: opening,
            began_ms,
            restored: false,
            restored_turns: 0,
            taken_from: None,
            last_used_ms: AtomicU64::new(self.inner.epoch.elapsed().as_millis() as u64),
            kept_alive_ms: AtomicU64::new(0),
            client_gone: Mutex::new(None),
            gone: std::sync::atomic::AtomicBool::new(false),
            holder: AtomicU64::new(0),
            deleted_here: std::sync::atomic::AtomicBool::new(false),
            cut: AtomicU64::new(0),
            epoch: self.inner.epoch,
            bot,
            chat: tokio::sync::Mutex::new(persist::ChatState::new(stored)),
            turns: Mutex::new(VecDeque::new()),
        });
        self.admit(&session);
        Ok(session)
    }

    /// Closes `session` once a tool (the built-in `end_session`) asked it to end and its turn
    /// in flight is over, so the reply is complete before the slot is freed.
    fn watch_end_request(&self, session: &Arc<Session>) {
        let sessions = self.clone();
        let session = session.clone();
        tokio::spawn(async move {
            let control = session.bot.control().clone();
            let reason = tokio::select! {
                reason = control.wait_end_requested() => reason,
                () = control.closed() => return,
            };
            if let Some(turn) = session.bot.current_turn() {
                tokio::select! {
                    () = turn.done() => {}
                    () = control.closed() => return,
                }
            }
            sessions
                .close(&session, &format!("ended by the bot: {reason}"))
                .await;
        });
    }

    /// The open session of `id` whose handle is `handle` (compared in constant time).
    fn live(&self, id: &HandleId, handle: &Uuid) -> Option<Arc<Session>> {
        self.table()
            .by_id
            .get(id)
            .filter(|s| bool::from(s.handle.as_bytes().ct_eq(handle.as_bytes())))
            .cloned()
    }

    /// Finds the session of a handle as a caller typed it: open, or reopened from the store.
    /// An expired session is dropped here, before the sweep gets to it.
    pub async fn find(&self, handle: &str) -> Result<Arc<Session>, ChatError> {
        self.find_for(handle, Caller::default()).await
    }

    /// [`Sessions::find`] for a call of `caller`: a new line on a shared store asks the
    /// replica running a turn of it to interrupt that turn.
    pub(crate) async fn find_for(
        &self,
        handle: &str,
        caller: Caller<'_>,
    ) -> Result<Arc<Session>, ChatError> {
        let interrupting = !caller.line.is_empty();
        let limits = self.inner.limits.load_full();
        if handle.len() != 36 {
            return Err(ChatError::HandleLength {
                received: handle.chars().count(),
            });
        }
        let uuid = Uuid::parse_str(handle).map_err(|_| self.unknown())?;
        let id = self.inner.storage.key().id_of(&uuid);
        let Some(session) = self.live(&id, &uuid) else {
            return match self.reopen(uuid, id, caller).await? {
                Some(session) => Ok(session),
                None => Err(self.ended_here(&id).unwrap_or_else(|| self.not_here(&uuid))),
            };
        };
        let expired = session.expired(
            Duration::from_secs(limits.handle_seconds),
            self.console_holds(),
        );
        if expired || session.bot.is_finished() {
            // A bot that stopped (returned, raised, ended by a tool) ended its conversation.
            self.close(
                &session,
                if expired {
                    "idle too long"
                } else {
                    "bot stopped"
                },
            )
            .await;
            return Err(self.ended_here(&id).unwrap_or_else(|| self.unknown()));
        }
        if interrupting && session.bot.end_requested() {
            // Its bot asked to end: no new line, while the goodbye finishes.
            return Err(ChatError::Ended {
                reason: "the bot is ending it (end_session)".into(),
                ago_seconds: 0,
            });
        }
        Ok(session)
    }

    /// The error for a conversation this process ended a while ago, when it remembers it.
    fn ended_here(&self, id: &crate::store::HandleId) -> Option<ChatError> {
        let (reason, ago) = self.inner.ended.why(id)?;
        Some(ChatError::Ended {
            reason,
            ago_seconds: ago.as_secs(),
        })
    }

    /// The error for a handle neither open nor stored here.
    fn not_here(&self, uuid: &Uuid) -> ChatError {
        let replica = &self.inner.replica;
        // Another tag on a lone server is a handle from before it restarted (on another
        // port); only among replicas is it another replica's, and only when they do not
        // share a store (where any of them would have found it).
        if replica.issued(uuid) || !replica.is_one_of_several() || self.inner.storage.shared() {
            self.unknown()
        } else {
            ChatError::Foreign {
                tag: replica::tag_of(uuid),
                replica: replica.id_arc(),
                own_tag: replica.tag(),
                handle_seconds: self.inner.limits.load().handle_seconds,
            }
        }
    }

    /// The keyed hash of a handle as a caller typed it (`None` when it is not a handle).
    pub fn id_of(&self, handle: &str) -> Option<HandleId> {
        let uuid = Uuid::parse_str(handle).ok()?;
        Some(self.inner.storage.key().id_of(&uuid))
    }

    /// The number of the open session of a handle, if there is one (no expiry check; the
    /// handle is compared in constant time).
    pub fn number_of(&self, handle: &str) -> Option<u64> {
        let uuid = Uuid::parse_str(handle).ok()?;
        let id = self.inner.storage.key().id_of(&uuid);
        self.live(&id, &uuid).map(|s| s.number)
    }

    /// The number of the session with this handle: open, or ended here a while ago (as a
    /// `chat` refused on it is told why), so a refusal names its session.
    pub fn number_known(&self, handle: &str) -> Option<u64> {
        let uuid = Uuid::parse_str(handle).ok()?;
        let id = self.inner.storage.key().id_of(&uuid);
        self.live(&id, &uuid)
            .map(|s| s.number)
            .or_else(|| self.inner.ended.number(&id))
    }

    /// The number of the open session with this id, if there is one.
    pub fn number_of_id(&self, id: &HandleId) -> Option<u64> {
        self.table().by_id.get(id).map(|s| s.number)
    }

    /// The open session with this id, if there is one.
    pub fn by_id(&self, id: &HandleId) -> Option<Arc<Session>> {
        self.table().by_id.get(id).cloned()
    }

    /// The session with this number, if open.
    pub fn by_number(&self, number: u64) -> Option<Arc<Session>> {
        let table = self.table();
        let id = table.by_number.get(&number)?;
        table.by_id.get(id).cloned()
    }

    /// Every open session, by number.
    pub fn list(&self) -> Vec<Arc<Session>> {
        let mut all: Vec<_> = self.table().by_id.values().cloned().collect();
        all.sort_by_key(|s| s.number);
        all
    }

    /// How many sessions are open.
    pub fn len(&self) -> usize {
        self.table().by_id.len()
    }

    /// Whether no session is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Counts a `chat` call in progress until the returned guard drops.
    pub(crate) fn call_guard(&self) -> CallGuard {
        self.inner.calls_in_flight.fetch_add(1, Ordering::AcqRel);
        CallGuard(self.inner.clone())
    }
}

/// The call a handle is looked up for: its line (a new line interrupts a turn running on
/// another replica) and its request id (`X-Request-ID`): a stored turn in flight that this
/// very request started, lost with its replica and sent again by a balancer, is this call's
/// turn, not one to report lost.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Caller<'a> {
    /// The line (empty: a read).
    pub(crate) line: &'a str,
    /// The request id, when the call had one.
    pub(crate) request: Option<&'a str>,
}
