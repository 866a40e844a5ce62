//! The sessions' side of the store: what is written when, and how a stored session opens
//! again.
//!
//! - `start` writes the head before the handle is returned.
//! - A line writes a mark before its turn runs (the in-flight turn, durable: a crash leaves it
//!   for the next `chat` to report), together with the record of the turn it replaced.
//! - A turn's record and the history messages it added are written once it ends, before its
//!   reply is returned; a turn no call waits for is written when it ends, as unread.
//! - Nothing is written per token or per frame. With a store that does not outlive the
//!   process (`memory`) the mark is skipped: there is no restart to report it to.
//!
//! What a failed write does is `storage`'s.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use uuid::Uuid;

use super::storage::{Conflict, LeaseStep, Stored};
use super::tasks::{Hold, TaskCell};
use super::{Caller, ChatError, KEPT_TURNS, Replica, Session, Sessions};
use crate::bot::{Restored, Turn, TurnEnd, TurnRecord};
use crate::pipeline::Observer;
use crate::store::{
    Commit, HandleId, Head, InFlight, LOG_TURNS_KEPT, Loaded, StoreError, StoredTurn, now_ms,
};

/// Most stored sessions one sweep deletes (the next sweep takes the rest).
const SWEEP_BATCH: usize = 512;

/// Per-handle state guarded by the handle's lock (here, so that `chat` imports this file and
/// not the other way round).
pub(crate) struct ChatState {
    /// The latest turn no call has read yet (in flight or done).
    pub(crate) pending: Option<Arc<Turn>>,
    /// What the store holds of the session (`None`: nothing is stored).
    pub(crate) stored: Option<Stored>,
    /// The task reading `pending`, when a `chat` call became one (see `tasks`).
    pub(crate) task: Option<Arc<TaskCell>>,
    /// The turn kept as `pending` because a shared store did not take it (its caller was
    /// told so): the same line sent again reads it rather than running twice.
    pub(crate) unsaved: Option<u64>,
}

impl ChatState {
    pub(crate) fn new(stored: Option<Stored>) -> Self {
        Self {
            pending: None,
            stored,
            task: None,
            unsaved: None,
        }
    }

    /// Lets go of a task that no longer holds the pending turn: one a poll collected (the
    /// turn is gone with it, returned so its being read is stored), handed over or cancelled
    /// (the turn is the session's again).
    pub(crate) fn settle_task(&mut self) -> Option<Arc<Turn>> {
        let cell = self.task.as_ref()?;
        let same = self.pending.as_ref().is_some_and(|p| cell.reads(p));
        match cell.hold() {
            Hold::Keeps if same => None,
            Hold::Collected if same => {
                self.task = None;
                self.pending.take()
            }
            _ => {
                self.task = None;
                None
            }
        }
    }
}

/// The record kept for a turn that was running when the process stopped.
fn lost_turn(in_flight: &InFlight) -> TurnRecord {
    TurnRecord {
        id: in_flight.turn,
        line: in_flight.line.clone(),
        end: Some(TurnEnd::Restarted),
        request: in_flight.request.clone(),
        config_version: in_flight.config_version,
        ..TurnRecord::default()
    }
}

/// Most of this replica's copies [`Sessions::let_go_of_stale_copies`] asks the store about at
/// once.
const COPIES_CHECKED: usize = 64;

/// How often a replica on a shared store asks it about its idle copies
/// ([`Sessions::let_go_of_stale_copies`]): one round trip.
pub(super) const COPIES_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// How long a copy is idle before that periodic check asks about it (a conversation in use
/// here is not stale).
pub(super) const COPIES_IDLE: std::time::Duration = std::time::Duration::from_secs(2);

/// The version of `session`'s copy, when its chat lock is free and it is stored.
fn local_version(session: &Session) -> Option<u64> {
    let state = session.chat.try_lock().ok()?;
    state.stored.as_ref().map(Stored::version)
}

impl Sessions {
    /// Writes `session`'s state: `append` (its ended turns not yet in the log, oldest first,
    /// with the history messages added since the last write), the turn now in flight, and the
    /// unread turn. Nothing is written when nothing changed or nothing is stored.
    pub(crate) async fn record(
        &self,
        session: &Session,
        stored: &mut Option<Stored>,
        append: &[Arc<Turn>],
        in_flight: Option<InFlight>,
        unread: Option<u64>,
        step: LeaseStep,
    ) -> Result<(), Conflict> {
        let unchanged = |stored: &Option<Stored>| {
            stored.as_ref().is_none_or(|state| {
                let head = &state.head;
                !append.iter().any(|t| t.id > head.turns)
                    && in_flight == head.in_flight
                    && unread == head.unread
            })
        };
        if unchanged(stored) {
            // Nothing to write: the lease step alone.
            return match step {
                LeaseStep::Take if self.inner.storage.shared() => Err(Conflict::NotTaken),
                LeaseStep::Release if self.inner.storage.shared() => {
                    self.inner.storage.release(&session.id).await;
                    Ok(())
                }
                _ => Ok(()),
            };
        }
        let Some(state) = stored.as_mut() else {
            return Ok(());
        };
        let head = &state.head;
        let append: Vec<&Arc<Turn>> = append.iter().filter(|t| t.id > head.turns).collect();
        let mut next = head.clone();
        let mut turns = Vec::with_capacity(append.len());
        if let Some((last, earlier)) = append.split_last() {
            let (first, messages, forgotten) = session.bot.history_after(head.messages);
            let now = now_ms();
            for turn in earlier {
                turns.push(stored_turn(turn, now, first, Vec::new()));
            }
            turns.push(stored_turn(last, now, first, messages));
            let written = turns.last().map(StoredTurn::last_message).unwrap_or(0);
            next.messages = next.messages.max(written);
            next.forgotten = forgotten;
            next.turns = last.id;
            next.errors += turns
                .iter()
                .filter(|t| matches!(t.record.end, Some(TurnEnd::Error(_))))
                .count() as u64;
        }
        next.in_flight = in_flight;
        next.unread = unread;
        next.last_used_ms = now_ms();
        let mut window = state.window.clone();
        for turn in &turns {
            if !turn.messages.is_empty() {
                window.push_back((turn.id(), turn.last_message()));
            }
        }
        while window
            .front()
            .is_some_and(|(_, last)| *last <= next.forgotten)
        {
            window.pop_front();
        }
        next.history_from_turn = window.front().map_or(next.turns + 1, |(turn, _)| *turn);
        let mut commit = Commit {
            expected: head.version,
            drop_before: next
                .history_from_turn
                .min((next.turns + 1).saturating_sub(LOG_TURNS_KEPT)),
            head: next,
            append: turns,
        };
        let mut written = self.inner.storage.commit(&session.id, &commit, step).await;
        if let Err(Conflict::Changed(_)) = &written
            && let Some(version) = self.applied_late(session, &commit).await
        {
            // This very write, retried after a stalled Redis applied its first attempt late:
            // done (the retry found the version it made).
            if step == LeaseStep::Release {
                self.inner.storage.release(&session.id).await;
            }
            written = Ok(Some(version));
        } else if let (Err(Conflict::Changed(_)), Some(mark)) = (&written, &state.unsure)
            && let Some(version) = self.late_mark(session, &state.head, mark).await
        {
            // The store applied the mark it did not confirm in time: this write goes on
            // from it (it was this process's, of a line that never ran).
            commit.expected = version;
            written = self.inner.storage.commit(&session.id, &commit, step).await;
        }
        match written {
            Ok(Some(version)) => {
                state.head = commit.head;
                state.head.version = version;
                state.window = window;
                state.unsure = None;
            }
            Ok(None) => *stored = None,
            Err(conflict) => {
                if matches!(conflict, Conflict::Unsaved(_)) && commit.head.in_flight.is_some() {
                    state.unsure = commit.head.in_flight.clone();
                }
                return Err(conflict);
            }
        }
        Ok(())
    }

    /// The store's head of `session` now, when it answers and holds one.
    async fn stored_head(&self, session: &Session) -> Option<Head> {
        self.inner
            .storage
            .store()
            .head(&session.id)
            .await
            .ok()
            .flatten()
    }

    /// The version of the store's head when it is what `commit` writes, applied once already
    /// (a retry of a write whose first attempt a stalled store applied after it gave up).
    async fn applied_late(&self, session: &Session, commit: &Commit) -> Option<u64> {
        let found = self.stored_head(session).await?;
        let wrote = &commit.head;
        (found.version == commit.expected + 1
            && found.in_flight == wrote.in_flight
            && found.unread == wrote.unread
            && found.turns == wrote.turns
            && found.messages == wrote.messages
            && found.last_used_ms == wrote.last_used_ms)
            .then_some(found.version)
    }

    /// The version of the store's head when it is `known` with only the unconfirmed `mark`
    /// written over it (by this process, applied after its write timed out), else `None`.
    pub(super) async fn late_mark(
        &self,
        session: &Session,
        known: &Head,
        mark: &InFlight,
    ) -> Option<u64> {
        let found = self.stored_head(session).await?;
        (found.in_flight.as_ref() == Some(mark)
            && found.turns == known.turns
            && found.messages == known.messages
            && found.version > known.version)
            .then_some(found.version)
    }

    /// Handles a conflict found while writing `session`: it changed elsewhere (another
    /// server took it, or `turnscope sessions delete` removed it), so this process lets go
    /// of it; the next call reloads what the store holds.
    pub(crate) async fn conflicted(&self, session: &Session, conflict: Conflict) {
        if conflict.head_gone() {
            self.gone_from_store(session).await;
            return;
        }
        let Conflict::Changed(e) = conflict else {
            // Not saved (a shared store is down): the session stays, and its next turn's
            // write carries what this one added to the history.
            return;
        };
        tracing::warn!(session = session.number, handle = %session.handle_prefix(), "{e}");
        self.close_keeping(session, "changed in the store by someone else")
            .await;
    }

    /// Lets go of `session`, whose conversation the store no longer holds though this process
    /// served it: said as such (a warning naming the likely cause), not as a conversation
    /// another replica went on with.
    pub(crate) async fn gone_from_store(&self, session: &Session) {
        if session.deleted_here() {
            // This process closed it and deleted it (the bot's `end_session` while the reply
            // was being written): nothing was lost that the close did not mean to end.
            return;
        }
        let cause = if self.inner.storage.shared() {
            "another replica ended it (its bot's end_session, a close, its idle sweep), or the \
             store lost it (a Redis restarted without persistence keeps nothing: see `appendonly` \
             in the README's \"Replicas with a shared store\")"
        } else {
            "it was deleted (`turnscope sessions delete`)"
        };
        let message = format!(
            "#{} ({}): the session store {} no longer holds this conversation, which this server \
             held open: {cause}. Its client is told to call start",
            session.number,
            session.handle_prefix(),
            self.inner.storage.store().describe(),
        );
        tracing::warn!("{message}");
        self.inner.bus.publish(crate::observe::Event::Log {
            at_ms: crate::observe::event::now_us() / 1000,
            level: "warn".into(),
            message,
        });
        self.close_keeping(session, "gone from the session store")
            .await;
    }

    /// Writes `turn` as unread once it ends, unless a call wrote it first (its caller gave up
    /// waiting: nobody else will).
    pub(crate) fn record_when_done(&self, session: Arc<Session>, turn: Arc<Turn>) {
        let sessions = self.clone();
        tokio::spawn(async move {
            turn.done().await;
            let mut state = session.chat.lock().await;
            let waiting = state
                .pending
                .as_ref()
                .is_some_and(|p| Arc::ptr_eq(p, &turn));
            if !waiting {
                drop(state);
                sessions.task_turn_written(&session, &turn, None).await;
                return;
            }
            session.bot.settle().await;
            // On a shared store a task that reads this turn delivers it, from any replica (its
            // record is in the store): written as read, or a new line on another replica
            // handed it back as unread too, a turn read twice.
            // (Unless another replica told its client it was lost: a Redis stall let its
            // lease lapse, and that client reads it with an empty line.)
            let delivered = sessions.inner.storage.shared()
                && sessions.task_delivers(&session, &turn)
                && !sessions.told_lost(&session, &turn).await;
            let unread = (!delivered).then_some(turn.id);
            // On a shared store the turn's lease is given back once it is written (in the
            // same step), so the replica that takes the conversation next reads it.
            let written = sessions
                .record(
                    &session,
                    &mut state.stored,
                    std::slice::from_ref(&turn),
                    None,
                    unread,
                    LeaseStep::Release,
                )
                .await;
            drop(state);
            // Another replica went on without this turn, or the store lost the conversation:
            // a task reading it says so rather than hand over a reply nothing holds.
            let overtaken = match &written {
                Err(conflict @ Conflict::Changed(_)) if sessions.inner.storage.shared() => {
                    Some(ChatError::unkept(&turn, conflict.head_gone()).to_string())
                }
                _ => None,
            };
            sessions.task_turn_written(&session, &turn, overtaken).await;
            if let Err(conflict) = written {
                sessions.conflicted(&session, conflict).await;
            }
        });
    }

    /// Takes a slot under the cap; at the cap on a store the replicas share, first lets go of
    /// this replica's copies of conversations another replica went on with since
    /// ([`Sessions::let_go_of_stale_copies`]): such a copy held its slot until its next call
    /// here found it stale, so a balancer's fallback filled the cap of a replica that served
    /// nobody.
    pub(super) async fn take_slot_freeing_copies(&self) -> Result<(), ChatError> {
        let refused = match self.take_slot() {
            Ok(()) => return Ok(()),
            Err(refused) if self.inner.storage.shared() => refused,
            Err(refused) => return Err(refused),
        };
        let freed = self.let_go_of_stale_copies(std::time::Duration::ZERO).await;
        if freed > 0 {
            tracing::info!(
                freed,
                "let go of conversations other replicas went on with, to make room"
            );
            return self.take_slot();
        }
        Err(refused)
    }

    /// Keeps the stored conversations used here `within` (a turn running counts) from
    /// expiring in a shared store, in one round trip: Redis dropped a conversation one idle
    /// lifetime after its last write though a turn longer than that still ran, or its task
    /// was still polled (a poll counts as use, as it does for this replica's copy).
    pub(crate) async fn keep_used_alive(&self, within: std::time::Duration) {
        let holds = self.console_holds();
        let used: Vec<Arc<Session>> = self
            .table()
            .by_id
            .values()
            // The console's sessions live as long as it holds them (`Session::expired`).
            .filter(|s| s.idle() < within || (holds && s.held_by_console()))
            .cloned()
            .collect();
        let ids: Vec<HandleId> = used.iter().map(|s| s.id).collect();
        if let Err(e) = self.inner.storage.store().keep_alive(&ids).await {
            tracing::debug!("store: keeping conversations alive failed: {e}");
        }
        // Their working tasks' records too (written at creation only, they expired in the
        // store under a turn longer than the lifetime), with the reply so far.
        for session in &used {
            self.keep_working_tasks(session).await;
        }
    }

    /// Lets go of this replica's copies, idle for at least `idle_for`, of conversations
    /// another replica went on with since (their version in the store newer than the
    /// copy's: closed `continued on replica R`) or that the store no longer holds (said as
    /// such: [`Sessions::gone_from_store`]). At most [`COPIES_CHECKED`] copies, the longest
    /// idle first, in one store round trip; returns how many it let go of. On the sweeper's
    /// tick every [`COPIES_EVERY`] too, so the Sessions pane, the session count and the cap
    /// do not show a conversation served elsewhere as open here until its next call.
    pub(crate) async fn let_go_of_stale_copies(&self, idle_for: std::time::Duration) -> usize {
        let running = |s: &Session| s.bot.current_turn().is_some_and(|t| !t.is_done());
        let mut idle: Vec<(Arc<Session>, u64)> = self
            .table()
            .by_id
            .values()
            .filter(|s| !s.in_call() && s.idle() >= idle_for && !running(s))
            .filter_map(|s| Some((s.clone(), local_version(s)?)))
            .collect();
        if idle.is_empty() {
            return 0;
        }
        idle.sort_by_key(|(s, _)| std::cmp::Reverse(s.idle()));
        idle.truncate(COPIES_CHECKED);
        let ids: Vec<HandleId> = idle.iter().map(|(s, _)| s.id).collect();
        let Ok(found) = self.inner.storage.store().versions(&ids).await else {
            // The store does not answer: its failure is said by the call that meets it.
            return 0;
        };
        let lifetime = std::time::Duration::from_secs(self.inner.limits.load().handle_seconds);
        let mut freed = 0;
        for ((session, version), found) in idle.into_iter().zip(found) {
            // A newer version this replica wrote (a turn's mark Redis applied after its call
            // gave up) is no other's: the next call here goes on from it.
            let own =
                |w: &crate::store::Written| w.writer.as_deref() == Some(self.inner.replica.id());
            let stale = found
                .as_ref()
                .is_none_or(|w| w.version > version && !own(w));
            // Read again: a call that began meanwhile (its own write made the newer version)
            // keeps its copy.
            if !stale
                || session.in_call()
                || running(&session)
                || local_version(&session) != Some(version)
            {
                continue;
            }
            match found {
                // Gone because it was idle for its lifetime (Redis expires it then): the
                // sweep closes it as idle, which is no loss to report.
                None if session.idle() + COPIES_EVERY * 2 >= lifetime => continue,
                None => self.gone_from_store(&session).await,
                Some(written) => {
                    let reason = match written.writer {
                        Some(r) => format!("continued on replica {r}"),
                        None => "continued on another replica".to_string(),
                    };
                    self.close_keeping(&session, &reason).await;
                }
            }
            freed += 1;
        }
        freed
    }

    /// Opens the stored session `id` again (handle `handle`): a fresh pipeline with its
    /// history, its unread turn, and its records for the console. A turn that was in flight
    /// when the process stopped becomes the unread turn, ended `restarted`, so the next call
    /// reports it, once. `Ok(None)` when the store does not hold it.
    pub(super) async fn reopen(
        &self,
        handle: Uuid,
        id: HandleId,
        caller: Caller<'_>,
    ) -> Result<Option<Arc<Session>>, ChatError> {
        let storage = &self.inner.storage;
        let gate = storage.gate(id);
        let _one_at_a_time = gate.lock().await;
        let result = self.reopen_now(handle, id, caller).await;
        storage.ungate(&id);
        result
    }

    async fn reopen_now(
        &self,
        handle: Uuid,
        id: HandleId,
        caller: Caller<'_>,
    ) -> Result<Option<Arc<Session>>, ChatError> {
        let interrupting = !caller.line.is_empty();
        if let Some(session) = self.live(&id, &handle) {
            return Ok(Some(session));
        }
        let storage = &self.inner.storage;
        if !storage.writing() {
            return Ok(None);
        }
        // On a shared store, a turn in flight in the head may be running on another replica:
        // load only while holding the lease (once it is granted, a mark left behind is a turn
        // its replica lost: it died).
        let mut writer = None;
        if storage.shared() {
            (_, writer) = self
                .wait_for_lease(
                    &id,
                    interrupting,
                    &tokio_util::sync::CancellationToken::new(),
                )
                .await?;
        }
        let mut loaded = match storage.store().load(&id, KEPT_TURNS as u64).await {
            Ok(Some(loaded)) => loaded,
            Ok(None) => {
                storage.release(&id).await;
                return Ok(None);
            }
            Err(e) => {
                storage.release(&id).await;
                // Said to whoever runs the server (the client cannot move a store file aside,
                // nor should it read the server's paths), with the conversation named.
                let prefix: String = handle.to_string().chars().take(8).collect();
                let message = format!(
                    "the stored conversation {prefix} could not be read back; its client was told \
                     to try again, then call start: {e}"
                );
                tracing::warn!("{message}");
                self.inner.bus.publish(crate::observe::Event::Log {
                    at_ms: crate::observe::event::now_us() / 1000,
                    level: "warn".into(),
                    message,
                });
                return Err(ChatError::Store {
                    message: "its record there is damaged, or the store could not be read (the \
                              server's log names the cause for whoever runs it)"
                        .into(),
                });
            }
        };
        // The turn in flight is this very request's, sent again by a balancer after its
        // replica died: not a lost turn (it would be logged `restarted`, then run again as a
        // second turn of the same line), but this call's, which runs it under its number.
        if let (Some(flight), Some(request)) = (&loaded.head.in_flight, caller.request)
            && flight.request.as_deref() == Some(request)
            && flight.line == caller.line
        {
            tracing::info!(
                turn = flight.turn,
                "a request sent again after its replica died runs the turn it began"
            );
            loaded.head.in_flight = None;
        }
        let limits = self.inner.limits.load();
        let idle_ms = now_ms().saturating_sub(loaded.head.idle_since_ms());
        // A shared store expires an idle conversation itself (its TTL, which a replica keeps
        // fresh while a turn runs or a task is polled, without writing the head): what it
        // holds is alive, whatever the head's last write says (a turn longer than the
        // lifetime, taken over after its replica died, was deleted here as idle).
        if !storage.shared() && idle_ms > limits.handle_seconds.saturating_mul(1000) {
            storage.delete(&id).await;
            return Ok(None);
        }
        if self.refusing() {
            return Err(self.draining_error());
        }
        self.take_slot_freeing_copies().await?;
        let taken_from = storage
            .shared()
            .then(|| taken_from(&self.inner.replica, &handle, writer))
            .flatten();
        let (session, lost) = self.restore(handle, id, loaded, taken_from);
        if let Some(lost) = lost {
            let mut state = session.chat.lock().await;
            let written = self
                .record(
                    &session,
                    &mut state.stored,
                    std::slice::from_ref(&lost),
                    None,
                    Some(lost.id),
                    LeaseStep::Keep,
                )
                .await;
            drop(state);
            if let Err(conflict) = written {
                self.free_slot();
                storage.release(&id).await;
                session.bot.end().await;
                tracing::warn!("{conflict}");
                return Err(match conflict {
                    // Written elsewhere since it was read: the next call loads it afresh.
                    Conflict::Changed(_) => ChatError::Stale,
                    conflict => ChatError::StoreAway {
                        message: conflict.to_string(),
                    },
                });
            }
        }
        self.admit(&session);
        Ok(Some(session))
    }

    /// The session a stored one becomes (not yet in the table), and the turn that was in
    /// flight when the process stopped (not yet written as such).
    fn restore(
        &self,
        handle: Uuid,
        id: HandleId,
        loaded: Loaded,
        taken_from: Option<String>,
    ) -> (Arc<Session>, Option<Arc<Turn>>) {
        let Loaded { head, turns } = loaded;
        let mut messages = Vec::new();
        if let Some(greeting) = &head.greeting
            && head.forgotten == 0
        {
            messages.push(crate::bot::Message::Assistant {
                text: greeting.clone(),
                tool_calls: Vec::new(),
            });
        }
        let mut window = VecDeque::new();
        for turn in &turns {
            let skip = (head.forgotten + 1).saturating_sub(turn.first_message) as usize;
            if skip < turn.messages.len() {
                messages.extend(turn.messages[skip..].iter().cloned());
                window.push_back((turn.id(), turn.last_message()));
            }
        }
        let lost = head.in_flight.as_ref().map(lost_turn);
        let next_turn = head.turns.max(lost.as_ref().map_or(0, |t| t.id)) + 1;
        let number = self.inner.next_number.fetch_add(1, Ordering::Relaxed);
        // Before the bot starts: its pipeline's first frames count from here.
        let opening = Instant::now();
        let bot = self.inner.bot.reopen(
            Observer::new(self.inner.bus.clone(), number),
            Restored {
                messages,
                forgotten: head.forgotten,
                next_turn,
                greeting: head.greeting.clone(),
            },
        );
        let mut kept: VecDeque<Arc<Turn>> = turns
            .iter()
            .rev()
            .take(KEPT_TURNS)
            .rev()
            .map(|t| Turn::restored(t.record.clone()))
            .collect();
        let lost = lost.map(Turn::restored);
        if let Some(lost) = &lost {
            if kept.len() == KEPT_TURNS {
                kept.pop_front();
            }
            kept.push_back(lost.clone());
        }
        let pending = match (&lost, head.unread) {
            (Some(lost), _) => Some(lost.clone()),
            (None, Some(unread)) => kept.iter().find(|t| t.id == unread).cloned(),
            (None, None) => None,
        };
        let idle_ms = now_ms().saturating_sub(head.idle_since_ms());
        let epoch = self.inner.epoch;
        let last_used = (epoch.elapsed().as_millis() as u64).saturating_sub(idle_ms);
        let mut state = ChatState::new(Some(Stored {
            head: head.clone(),
            window,
            unsure: None,
        }));
        state.pending = pending;
        let session = Arc::new(Session {
            handle,
            id,
            number,
            opener: head.opener.clone(),
            opened: opening,
            began_ms: head.created_ms,
            restored: true,
            restored_turns: kept.back().map_or(0, |t| t.id),
            taken_from,
            last_used_ms: AtomicU64::new(last_used),
            kept_alive_ms: AtomicU64::new(0),
            client_gone: Mutex::new(None),
            gone: std::sync::atomic::AtomicBool::new(false),
            holder: AtomicU64::new(0),
            deleted_here: std::sync::atomic::AtomicBool::new(false),
            cut: AtomicU64::new(0),
            epoch,
            bot,
            chat: tokio::sync::Mutex::new(state),
            turns: Mutex::new(kept),
        });
        (session, lost)
    }

    /// Deletes the console sessions in which nothing was said that a console stopped without
    /// quitting (`kill -9`, its terminal gone hard) left in a store no other process uses (a
    /// file, which this process locks): a console's clean quit deletes its own
    /// (`close_all`), and nobody holds the handle of one (the console keeps a
    /// handle from its first line on), so it could only ever be an empty record listed as
    /// someone else's. On a store the replicas share one may be a running console's on
    /// another replica: those are left to their lifetime. Runs as the server starts, before
    /// any session opens; says what it deleted (the Log, an `info` log line). Returns how many.
    pub async fn drop_abandoned_console_sessions(&self) -> usize {
        let storage = &self.inner.storage;
        if !storage.writing() || storage.shared() || !storage.durable() {
            return 0;
        }
        let heads = match storage.store().list(usize::MAX).await {
            Ok(heads) => heads,
            Err(e) => {
                storage.fail(&e);
                return 0;
            }
        };
        let mut dropped = Vec::new();
        for head in heads {
            let abandoned = head.opener == crate::observe::SessionOpener::Console
                && head.turns == 0
                && head.in_flight.is_none()
                && head.unread.is_none()
                && self.number_of_id(&head.id).is_none();
            if abandoned {
                storage.delete(&head.id).await;
                dropped.push(head.prefix);
            }
        }
        if !dropped.is_empty() {
            let message = format!(
                "deleted {} in which nothing was said, left in the store by a console that \
                 stopped without quitting (killed, or its terminal gone): {}",
                match dropped.len() {
                    1 => "1 console session".to_string(),
                    n => format!("{n} console sessions"),
                },
                dropped.join(", ")
            );
            tracing::info!("{message}");
            self.inner.bus.publish(crate::observe::Event::Log {
                at_ms: crate::observe::event::now_us() / 1000,
                level: "info".into(),
                message,
            });
        }
        dropped.len()
    }

    /// Deletes the stored sessions idle longer than the handle lifetime that are not open
    /// here (open ones are swept by their own idle time).
    pub(super) async fn sweep_stored(&self) {
        let storage = &self.inner.storage;
        if !storage.writing() {
            return;
        }

        let lifetime_ms = self.inner.limits.load().handle_seconds.saturating_mul(1000);
        let before = now_ms().saturating_sub(lifetime_ms);
        let expired = match storage.store().expired(before, SWEEP_BATCH).await {
            Ok(expired) => expired,
            Err(e) => {
                storage.fail(&e);
                return;
            }
        };
        if storage.shared() {
            // Redis expires each conversation itself, by the lifetime of the replica that
            // wrote it last (its TTL); a replica deleting by its own lifetime deleted the
            // others' when it was shorter (a rolling change of `handle_seconds`). The listing
            // above dropped the index entries of heads Redis expired.
            return;
        }
        for head in expired {
            if self.number_of_id(&head.id).is_some() {
                continue;
            }
            storage.delete(&head.id).await;
            tracing::info!(handle = %head.prefix, "stored session deleted: idle too long");
        }
    }

    /// Renews the leases of the open sessions (a store with leases only).
    pub(super) async fn renew_leases(&self) {
        let storage = &self.inner.storage;
        if storage.store().lease_every().is_none() {
            return;
        }
        // The leases of running turns (a shared store renews only those this replica holds).
        let ids: Vec<HandleId> = self
            .table()
            .by_id
            .values()
            .filter(|s| s.bot.current_turn().is_some_and(|t| !t.is_done()) || s.in_call())
            .map(|s| s.id)
            .collect();
        if ids.is_empty() {
            // Nothing to renew: one cheap round trip tells `/healthz` whether the store
            // takes writes. With leases to renew, the probe follows the renewal (a probe
            // first would delay it behind a slow Redis, and a lease could lapse under a
            // running turn).
            storage.probe().await;
            return;
        }
        let asked = match storage.store().renew(&ids).await {
            Ok(asked) => {
                // Renewed first (a lease must not wait behind it), then the probe's write says
                // whether Redis takes writes: a renewal is taken by a Redis out of memory.
                storage.probe().await;
                asked
            }
            Err(e) => {
                // Said once by `fail` (the store's failure), not every half second.
                tracing::debug!("store: renewing leases failed: {e}");
                if storage.shared() {
                    storage.fail(&e);
                }
                return;
            }
        };
        // Another replica got a new line for these: a turn no call of ours waits on is
        // interrupted, as that line would on this replica; its waiter (`record_when_done`)
        // writes it as unread and gives the lease back. A turn a call here reads goes on:
        // calls keep their order, and the line waits for it.
        for id in asked {
            let Some(session) = self.table().by_id.get(&id).cloned() else {
                continue;
            };
            let Ok(state) = session.chat.try_lock() else {
                continue;
            };
            if session.bot.current_turn().is_some_and(|t| !t.is_done()) {
                tracing::info!(session = session.number, handle = %session.handle_prefix(), "a new line on another replica interrupts the turn in flight");
                session.bot.interrupt().await;
            }
            drop(state);
        }
    }

    /// The stored sessions, most recently used first, at most `limit` (the console's list of
    /// conversations this process has not reopened).
    pub async fn stored(&self, limit: usize) -> Result<Vec<Head>, StoreError> {
        self.inner.storage.store().list(limit).await
    }
}

/// Whom a replica takes a conversation over from when it reopens it from a shared store: the
/// replica that wrote it last when that is another (its id), else the replica that issued the
/// handle when that is another (`tag TAG`), else nobody (this replica continues its own).
pub(super) fn taken_from(me: &Replica, handle: &Uuid, writer: Option<String>) -> Option<String> {
    match writer {
        Some(writer) if writer != me.id() => Some(writer),
        Some(_) => None,
        None if !me.issued(handle) => Some(format!("tag {}", super::replica::tag_of(handle))),
        None => None,
    }
}

fn stored_turn(
    turn: &Turn,
    now: u64,
    first_message: u64,
    messages: Vec<crate::bot::Message>,
) -> StoredTurn {
    let record = turn.snapshot();
    let ran_ms = record.total.map_or(0, |d| d.as_millis() as u64);
    StoredTurn {
        started_ms: now.saturating_sub(ran_ms),
        record,
        first_message,
        messages,
    }
}
