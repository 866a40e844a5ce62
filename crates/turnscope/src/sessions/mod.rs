//! Sessions: handles, the session table with its cap and idle sweep, and the `chat`
//! semantics shared by the MCP server and the console.
//!
//! One handle = one session = one bot pipeline, context and history. Handles are UUIDv4
//! bearer secrets (106 random bits; the last 4 hex digits are the replica's tag, see
//! `replica`); only their first 8 characters are ever logged or published.

mod chat;
mod errors;
pub mod haproxy;
pub mod replica;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use subtle::ConstantTimeEq;
use tokio::task::JoinHandle;
use uuid::Uuid;

pub use chat::{
    ChatReply, PROGRESS_CHARS, ProgressSink, ToolCallSummary, UnreadTurn, progress_text,
};
pub use errors::ChatError;
pub use replica::Replica;

use crate::bot::{Bot, BotSession, Turn};
use crate::observe::{Bus, Event, SessionEvent, SessionOpener, event::now_us};
use crate::pipeline::Observer;

/// Limits of the session table.
#[derive(Debug, Clone)]
pub struct SessionLimits {
    /// Most sessions open at once.
    pub cap: usize,
    /// A session with no call for this long is dropped.
    pub handle_seconds: u64,
    /// How often the sweep runs.
    pub(crate) sweep_every: Duration,
}

impl Default for SessionLimits {
    fn default() -> Self {
        Self {
            cap: 32,
            handle_seconds: 300,
            sweep_every: Duration::from_secs(30),
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

/// The table key of a handle: its first 8 bytes.
fn index_of(handle: &Uuid) -> u64 {
    let bytes = handle.as_bytes();
    u64::from_le_bytes(bytes[..8].try_into().expect("a UUID has 16 bytes"))
}

/// How many turns a session keeps for the console's live transcript. Bounded so a long
/// conversation costs bounded memory; `--events` records every turn.
const KEPT_TURNS: usize = 64;

/// One open session.
pub struct Session {
    /// The secret handle.
    handle: Uuid,
    /// A small number events and the console use instead of the handle.
    pub number: u64,
    /// Who opened it.
    pub opener: SessionOpener,
    /// When it opened.
    pub opened: Instant,
    last_used_ms: AtomicU64,
    epoch: Instant,
    bot: BotSession,
    chat: tokio::sync::Mutex<chat::ChatState>,
    turns: Mutex<Vec<Arc<Turn>>>,
}

impl Session {
    /// The first 8 characters of the handle, safe to show.
    pub fn handle_prefix(&self) -> String {
        self.handle.to_string()[..8].to_string()
    }

    /// The full handle (a secret: give it only to whoever opened the session).
    pub fn handle(&self) -> String {
        self.handle.to_string()
    }

    /// The bot session.
    pub fn bot(&self) -> &BotSession {
        &self.bot
    }

    /// Time since the last call.
    pub fn idle(&self) -> Duration {
        let last = Duration::from_millis(self.last_used_ms.load(Ordering::Relaxed));
        self.epoch.elapsed().saturating_sub(last)
    }

    fn touch(&self) {
        self.last_used_ms
            .store(self.epoch.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    /// Whether a call holds the session's lock now.
    pub fn in_call(&self) -> bool {
        self.chat.try_lock().is_err()
    }

    /// The session's turns, oldest first (the last `KEPT_TURNS`).
    pub fn turns(&self) -> Vec<Arc<Turn>> {
        self.turns.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn remember(&self, turn: Arc<Turn>) {
        let mut turns = self.turns.lock().unwrap_or_else(|p| p.into_inner());
        if turns.len() == KEPT_TURNS {
            turns.remove(0);
        }
        turns.push(turn);
    }
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
    /// Sessions by the first 8 bytes of their handle; the whole handle is then compared in
    /// constant time, so lookup timing reveals nothing about the secret part.
    table: Mutex<HashMap<u64, Arc<Session>>>,
    next_number: AtomicU64,
    epoch: Instant,
    /// `chat` calls in progress, across all sessions (shutdown waits for them to answer).
    calls_in_flight: AtomicUsize,
    /// Which replica this table is (handles end in its tag).
    replica: Replica,
    /// Set by [`Sessions::drain`]: no new session, no new line.
    draining: AtomicBool,
}

impl Sessions {
    /// A table for sessions of `bot`, publishing on `bus`, as replica `local`.
    pub fn new(bot: Bot, bus: Bus, limits: SessionLimits) -> Self {
        Self::for_replica(bot, bus, limits, Replica::default())
    }

    /// A table for sessions of `bot` on replica `replica` (its handles end in its tag).
    pub fn for_replica(bot: Bot, bus: Bus, limits: SessionLimits, replica: Replica) -> Self {
        Self {
            inner: Arc::new(Inner {
                bot,
                bus,
                limits: arc_swap::ArcSwap::from_pointee(limits),
                table: Mutex::new(HashMap::new()),
                next_number: AtomicU64::new(1),
                epoch: Instant::now(),
                calls_in_flight: AtomicUsize::new(0),
                replica,
                draining: AtomicBool::new(false),
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

    /// The event bus.
    pub fn bus(&self) -> &Bus {
        &self.inner.bus
    }

    /// The replica this table is.
    pub fn replica(&self) -> &Replica {
        &self.inner.replica
    }

    /// Whether [`Sessions::drain`] began: no new session, no new line.
    pub fn is_draining(&self) -> bool {
        self.inner.draining.load(Ordering::Acquire)
    }

    fn draining_error(&self) -> ChatError {
        ChatError::Draining {
            replica: self.inner.replica.id_arc(),
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Session>>> {
        self.inner.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Opens a session, unless the cap is reached.
    pub fn open(&self, opener: SessionOpener) -> Result<Arc<Session>, ChatError> {
        let limits = self.inner.limits.load();
        if self.is_draining() {
            return Err(self.draining_error());
        }
        let mut table = self.table();
        if table.len() >= limits.cap {
            return Err(ChatError::Cap {
                cap: limits.cap,
                handle_seconds: limits.handle_seconds,
            });
        }
        let number = self.inner.next_number.fetch_add(1, Ordering::Relaxed);
        let replica = &self.inner.replica;
        let mut handle = replica.stamp(Uuid::new_v4());
        while table.contains_key(&index_of(&handle)) {
            handle = replica.stamp(Uuid::new_v4());
        }
        let session = Arc::new(Session {
            handle,
            number,
            opener: opener.clone(),
            opened: Instant::now(),
            last_used_ms: AtomicU64::new(self.inner.epoch.elapsed().as_millis() as u64),
            epoch: self.inner.epoch,
            bot: self
                .inner
                .bot
                .open(Observer::new(self.inner.bus.clone(), number)),
            chat: tokio::sync::Mutex::new(chat::ChatState::default()),
            turns: Mutex::new(Vec::new()),
        });
        table.insert(index_of(&handle), session.clone());
        drop(table);
        self.watch_end_request(&session);
        self.inner.bus.publish_with(|| {
            Event::Session(SessionEvent {
                session: number,
                handle_prefix: session.handle_prefix(),
                opener,
                closed: None,
                at_us: now_us(),
            })
        });
        tracing::info!(session = number, handle = %session.handle_prefix(), "session opened");
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

    /// Finds the live session of a handle as a caller typed it. An expired session is
    /// dropped here, before the sweep gets to it.
    pub async fn find(&self, handle: &str) -> Result<Arc<Session>, ChatError> {
        let limits = self.inner.limits.load_full();
        // A draining replica ends its sessions as it exits: say so rather than "no session".
        let unknown = || {
            if self.is_draining() {
                self.draining_error()
            } else {
                ChatError::NoSession {
                    handle_seconds: limits.handle_seconds,
                }
            }
        };
        if handle.len() != 36 {
            return Err(ChatError::HandleLength {
                received: handle.chars().count(),
            });
        }
        let uuid = Uuid::parse_str(handle).map_err(|_| unknown())?;
        let found = self.table().get(&index_of(&uuid)).cloned();
        let replica = &self.inner.replica;
        let Some(session) =
            found.filter(|s| bool::from(s.handle.as_bytes().ct_eq(uuid.as_bytes())))
        else {
            // Another tag on a lone server is a handle from before it restarted (on another
            // port); only among replicas is it another replica's.
            return Err(if replica.issued(&uuid) || !replica.is_one_of_several() {
                unknown()
            } else {
                ChatError::Foreign {
                    tag: replica::tag_of(&uuid),
                    replica: replica.id_arc(),
                    own_tag: replica.tag(),
                    handle_seconds: limits.handle_seconds,
                }
            });
        };
        let expired =
            session.idle() > Duration::from_secs(limits.handle_seconds) && !session.in_call();
        if expired || session.bot.is_finished() {
            self.close(
                &session,
                if expired {
                    "idle too long"
                } else {
                    "bot stopped"
                },
            )
            .await;
            return Err(unknown());
        }
        Ok(session)
    }

    /// The number of the open session of a handle, if there is one (no expiry check).
    pub fn number_of(&self, handle: &str) -> Option<u64> {
        let uuid = Uuid::parse_str(handle).ok()?;
        let found = self.table().get(&index_of(&uuid)).cloned()?;
        bool::from(found.handle.as_bytes().ct_eq(uuid.as_bytes())).then_some(found.number)
    }

    /// The session with this number, if open.
    pub fn by_number(&self, number: u64) -> Option<Arc<Session>> {
        self.table().values().find(|s| s.number == number).cloned()
    }

    /// Every open session, by number.
    pub fn list(&self) -> Vec<Arc<Session>> {
        let mut all: Vec<_> = self.table().values().cloned().collect();
        all.sort_by_key(|s| s.number);
        all
    }

    /// How many sessions are open.
    pub fn len(&self) -> usize {
        self.table().len()
    }

    /// Whether no session is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Removes a session and ends its bot (its turn in flight ends as "session ended").
    pub async fn close(&self, session: &Session, reason: &str) {
        let removed = {
            let mut table = self.table();
            let key = index_of(&session.handle);
            let same = table.get(&key).is_some_and(|s| std::ptr::eq(&**s, session));
            same && table.remove(&key).is_some()
        };
        if removed {
            session.bot.end().await;
            self.inner.bus.publish_with(|| {
                Event::Session(SessionEvent {
                    session: session.number,
                    handle_prefix: session.handle_prefix(),
                    opener: session.opener.clone(),
                    closed: Some(reason.to_string()),
                    at_us: now_us(),
                })
            });
            tracing::info!(session = session.number, handle = %session.handle_prefix(), reason, "session closed");
        }
    }

    /// Drops every session that is idle too long (and not in a call) or whose bot stopped.
    pub async fn sweep(&self) -> usize {
        let limit = Duration::from_secs(self.inner.limits.load().handle_seconds);
        let doomed: Vec<(Arc<Session>, &str)> = self
            .table()
            .values()
            .filter_map(|s| {
                if s.bot.is_finished() {
                    Some((s.clone(), "bot stopped"))
                } else if s.idle() > limit && !s.in_call() {
                    Some((s.clone(), "idle too long"))
                } else {
                    None
                }
            })
            .collect();
        for (s, reason) in &doomed {
            self.close(s, reason).await;
        }
        doomed.len()
    }

    /// Starts the periodic sweep (one now, then one each `sweep_every` as it is at the time);
    /// the task runs until aborted.
    pub(crate) fn spawn_sweeper(&self) -> JoinHandle<()> {
        let sessions = self.clone();
        tokio::spawn(async move {
            loop {
                sessions.sweep().await;
                let every = sessions.inner.limits.load().sweep_every;
                tokio::time::sleep(every).await;
            }
        })
    }

    /// Ends every session (server shutdown): each turn in flight ends as "session ended",
    /// and the `chat` calls waiting on those turns get their answers (this waits up to
    /// `grace` for them to be handed back).
    pub(crate) async fn close_all(&self, reason: &str, grace: Duration) {
        let all: Vec<_> = self.table().values().cloned().collect();
        futures::future::join_all(all.iter().map(|s| self.close(s, reason))).await;
        let deadline = tokio::time::Instant::now() + grace;
        while self.inner.calls_in_flight.load(Ordering::Acquire) > 0
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Drains the table (SIGTERM behind a load balancer): from now on `start` and new lines
    /// are refused with an error saying so, while turns in flight run to their end and their
    /// callers read them. Returns once no `chat` call is in progress and no turn runs, or
    /// after `bound`; true when it drained before the bound.
    pub async fn drain(&self, bound: Duration) -> bool {
        self.inner.draining.store(true, Ordering::Release);
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            if self.quiet() {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Whether no `chat` call is in progress and no session has a turn running.
    fn quiet(&self) -> bool {
        self.inner.calls_in_flight.load(Ordering::Acquire) == 0
            && self
                .table()
                .values()
                .all(|s| s.bot.current_turn().is_none_or(|t| t.is_done()))
    }

    /// Counts a `chat` call in progress until the returned guard drops.
    pub(crate) fn call_guard(&self) -> CallGuard {
        self.inner.calls_in_flight.fetch_add(1, Ordering::AcqRel);
        CallGuard(self.inner.clone())
    }
}
