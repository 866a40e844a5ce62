//! The `chat` semantics: one lock per handle, a new line interrupts the turn in flight, an
//! empty line reads it, a read turn is gone, a cancelled caller leaves the turn running, and
//! a request sent again (its `X-Request-ID`) is answered from the turn it started. Progress
//! notifications are `progress`'s; what each step writes to the store is `persist`'s.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::persist::ChatState;
use super::progress::{ProgressSink, forward_progress};
use super::reply::{CallerWatch, ChatOutcome, ChatReply, ReadMark, TaskAsk, UnreadTurn, lost_line};
use super::storage::{Conflict, LeaseStep};
use super::{Caller, ChatError, Session, Sessions};
use crate::bot::Turn;
use crate::store::{InFlight, Lease, now_ms};

/// Longest a call waits for another replica's turn of the same conversation to end (its
/// lease in a shared store), before it gets [`ChatError::Busy`] naming that replica.
pub(crate) const LEASE_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// A call holding the handle's lock, with the turn it reads.
struct Reading<'a> {
    state: tokio::sync::MutexGuard<'a, ChatState>,
    turn: Arc<Turn>,
    unread: Option<UnreadTurn>,
}

impl Reading<'_> {
    /// Lets go of the handle's lock: the turn read, and the unread turn its reply names.
    fn let_go(self) -> (Arc<Turn>, Option<UnreadTurn>) {
        let Reading {
            state,
            turn,
            unread,
        } = self;
        drop(state);
        (turn, unread)
    }
}

/// How often a call has loaded its session: a call that finds the session changed elsewhere
/// since it was loaded ([`ChatError::Stale`]: another replica wrote it) loads it again, once.
#[derive(Default)]
struct Loads {
    reloaded: bool,
}

impl Loads {
    /// Whether the call should load its session again and run on the fresh copy.
    fn again<T>(&mut self, result: &Result<T, ChatError>) -> bool {
        let again = !self.reloaded && matches!(result, Err(ChatError::Stale));
        self.reloaded |= again;
        again
    }
}

/// Waits until `token` (when there is one) is cancelled; forever without one.
async fn lost(token: Option<&CancellationToken>) {
    match token {
        Some(token) => token.cancelled().await,
        None => std::future::pending().await,
    }
}

impl Sessions {
    /// `chat` on a handle as a caller typed it. A session the store holds but this process
    /// has not opened (it restarted) is reopened first.
    pub async fn chat(
        &self,
        handle: &str,
        line: &str,
        progress: Option<&mut dyn ProgressSink>,
        cancel: &CancellationToken,
    ) -> Result<ChatReply, ChatError> {
        self.chat_keyed(
            handle,
            line,
            None,
            progress,
            CallerWatch::cancel_only(cancel),
        )
        .await
    }

    /// [`Sessions::chat`] of a request with an id (`X-Request-ID`): when the handle's last
    /// turn is the one this request id and line already started, that turn's reply is the
    /// answer and nothing runs. A balancer that resends a call whose replica stored the turn
    /// and died before answering so gets the reply instead of a second run of the line.
    pub async fn chat_keyed(
        &self,
        handle: &str,
        line: &str,
        request: Option<&str>,
        progress: Option<&mut dyn ProgressSink>,
        watch: CallerWatch<'_>,
    ) -> Result<ChatReply, ChatError> {
        self.chat_keyed_marked(handle, line, request, progress, watch)
            .await
            .map(|(reply, _)| reply)
    }

    /// [`Sessions::chat_keyed`], and the turn its reply read ([`ReadMark`]), for the server
    /// to hand back ([`Sessions::reply_not_delivered`]) when the answer does not reach its
    /// caller.
    pub(crate) async fn chat_keyed_marked(
        &self,
        handle: &str,
        line: &str,
        request: Option<&str>,
        mut progress: Option<&mut dyn ProgressSink>,
        watch: CallerWatch<'_>,
    ) -> Result<(ChatReply, Option<ReadMark>), ChatError> {
        let mut loads = Loads::default();
        loop {
            // A reopen whose first write (a crash's lost turn) found the session written
            // elsewhere since it was read is loaded again too.
            let found = self.find_for(handle, Caller { line, request }).await;
            if loads.again(&found) {
                continue;
            }
            let session = found?;
            let result = self
                .chat_on_keyed(
                    &session,
                    line,
                    request,
                    progress.as_deref_mut(),
                    watch,
                    false,
                )
                .await;
            if !loads.again(&result) {
                return result.map(|reply| {
                    let mark = ReadMark::of(&session, &reply);
                    (reply, mark)
                });
            }
        }
    }

    /// `chat` on a session already found (the console's path): the turn is kept as typed at
    /// the console.
    pub async fn chat_on(
        &self,
        session: &Arc<Session>,
        line: &str,
        progress: Option<&mut (dyn ProgressSink + '_)>,
        cancel: &CancellationToken,
    ) -> Result<ChatReply, ChatError> {
        self.chat_on_keyed(
            session,
            line,
            None,
            progress,
            CallerWatch::cancel_only(cancel),
            true,
        )
        .await
    }

    async fn chat_on_keyed(
        &self,
        session: &Arc<Session>,
        line: &str,
        request: Option<&str>,
        progress: Option<&mut (dyn ProgressSink + '_)>,
        watch: CallerWatch<'_>,
        at_console: bool,
    ) -> Result<ChatReply, ChatError> {
        let _in_flight = self.call_guard();
        let reading = match self.begin(session, line, request, watch.cancel).await? {
            Ok(reading) => reading,
            Err(nothing) => return Ok(nothing),
        };
        if at_console && !line.is_empty() {
            reading.turn.mark_typed_at_console();
        }
        let turn = reading.turn.clone();
        let finished = async {
            match progress {
                Some(sink) => forward_progress(&turn, sink, self, session.number).await,
                None => turn.done().await,
            }
        };
        tokio::pin!(finished);
        tokio::select! {
            _ = &mut finished => {}
            _ = watch.cancel.cancelled() => {
                drop(reading);
                session.touch();
                self.record_when_done(session.clone(), turn.clone());
                return Err(ChatError::Cancelled);
            }
            () = lost(watch.stream_lost) => {
                return self.answer_detached(session, reading, finished, watch.cancel).await;
            }
        }
        self.read(session, reading).await
    }

    /// The caller's stream broke where that is not a cancel ([`CallerWatch::stream_lost`]):
    /// the handle is let go at once, as a cancel lets it go (the turn, which no call waits for
    /// now, is written as unread when it ends), but the turn's progress is still forwarded and
    /// its reply returned, for the server to keep for a resumed stream. Whichever reads it
    /// first, a resumed stream ([`Sessions::read_on_resume`]) or an empty line, reads it.
    async fn answer_detached(
        &self,
        session: &Arc<Session>,
        reading: Reading<'_>,
        finished: std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
        cancel: &CancellationToken,
    ) -> Result<ChatReply, ChatError> {
        let (turn, unread) = reading.let_go();
        session.touch();
        self.record_when_done(session.clone(), turn.clone());
        tokio::select! {
            () = finished => {}
            _ = cancel.cancelled() => return Err(ChatError::Cancelled),
        }
        let mut reply = ChatReply::of(&turn, unread);
        reply.kept_unread = true;
        Ok(reply)
    }

    /// `chat` on a handle for a client that declared the tasks extension: as [`Sessions::chat`]
    /// while the turn ends within `[server] task_after_seconds`; past that, the turn becomes a
    /// task (its record stored first) and the call is answered with it. When the store cannot
    /// keep the record the call goes on waiting, as a synchronous one.
    /// `request`: the request's id, as [`Sessions::chat_keyed`] has it.
    pub async fn chat_or_task(
        &self,
        handle: &str,
        line: &str,
        request: Option<&str>,
        progress: Option<&mut dyn ProgressSink>,
        watch: CallerWatch<'_>,
        ask: &TaskAsk,
    ) -> Result<ChatOutcome, ChatError> {
        self.chat_or_task_marked(handle, line, request, progress, watch, ask)
            .await
            .map(|(outcome, _)| outcome)
    }

    /// [`Sessions::chat_or_task`], and the turn a reply read ([`ReadMark`]; none for a
    /// task), as [`Sessions::chat_keyed_marked`].
    pub(crate) async fn chat_or_task_marked(
        &self,
        handle: &str,
        line: &str,
        request: Option<&str>,
        mut progress: Option<&mut dyn ProgressSink>,
        watch: CallerWatch<'_>,
        ask: &TaskAsk,
    ) -> Result<(ChatOutcome, Option<ReadMark>), ChatError> {
        let mut loads = Loads::default();
        loop {
            // A reopen whose first write (a crash's lost turn) found the session written
            // elsewhere since it was read is loaded again too.
            let found = self.find_for(handle, Caller { line, request }).await;
            if loads.again(&found) {
                continue;
            }
            let session = found?;
            let result = self
                .chat_or_task_on(&session, line, request, progress.as_deref_mut(), watch, ask)
                .await;
            if !loads.again(&result) {
                return result.map(|outcome| {
                    let mark = match &outcome {
                        ChatOutcome::Reply(reply) => ReadMark::of(&session, reply),
                        ChatOutcome::Task(_) => None,
                    };
                    (outcome, mark)
                });
            }
        }
    }

    async fn chat_or_task_on(
        &self,
        session: &Arc<Session>,
        line: &str,
        request: Option<&str>,
        progress: Option<&mut (dyn ProgressSink + '_)>,
        watch: CallerWatch<'_>,
        ask: &TaskAsk,
    ) -> Result<ChatOutcome, ChatError> {
        let _in_flight = self.call_guard();
        let cancel = watch.cancel;
        let mut reading = match self.begin(session, line, request, cancel).await? {
            Ok(reading) => reading,
            Err(nothing) => return Ok(ChatOutcome::Reply(nothing)),
        };
        let turn = reading.turn.clone();
        let finished = async {
            match progress {
                Some(sink) => forward_progress(&turn, sink, self, session.number).await,
                None => turn.done().await,
            }
        };
        tokio::pin!(finished);
        let grace = tokio::time::sleep(self.task_settings().after);
        tokio::pin!(grace);
        let mut waiting_for_grace = true;
        loop {
            tokio::select! {
                biased;
                _ = &mut finished => break,
                _ = cancel.cancelled() => {
                    drop(reading);
                    session.touch();
                    self.record_when_done(session.clone(), turn.clone());
                    return Err(ChatError::Cancelled);
                }
                () = lost(watch.stream_lost) => {
                    let reply = self
                        .answer_detached(session, reading, finished, cancel)
                        .await?;
                    return Ok(ChatOutcome::Reply(reply));
                }
                _ = &mut grace, if waiting_for_grace => {
                    waiting_for_grace = false;
                    if turn.is_done() {
                        continue;
                    }
                    // The call was active until now: the task's lifetime is the handle's whole.
                    session.touch();
                    match self
                        .open_task(session, &turn, reading.unread.clone(), &ask.client)
                        .await
                    {
                        Ok((cell, record)) => {
                            reading.state.task = Some(cell);
                            drop(reading);
                            // Stored as unread once it ends, until a poll or a call reads it.
                            self.record_when_done(session.clone(), turn.clone());
                            return Ok(ChatOutcome::Task(record));
                        }
                        Err(e) => {
                            tracing::warn!(session = session.number, error = %e, "the turn stays a synchronous chat call");
                        }
                    }
                }
            }
        }
        Ok(ChatOutcome::Reply(self.read(session, reading).await?))
    }

    /// Takes the handle's lock and does what the line asks: a new line interrupts the turn in
    /// flight and opens its own (its mark stored first); an empty line reads the pending one.
    /// `Ok(Err(reply))` when there is nothing to wait for.
    ///
    /// On a store other replicas share, the call also takes the conversation's lease and
    /// checks that this replica's copy is the latest version; the lease goes back here when
    /// there is nothing to wait for, in [`Sessions::read`] once the turn is read, or in
    /// `record_when_done` for a turn no call waits for (a cancelled call, a task).
    async fn begin<'a>(
        &self,
        session: &'a Arc<Session>,
        line: &str,
        request: Option<&str>,
        cancel: &CancellationToken,
    ) -> Result<Result<Reading<'a>, ChatReply>, ChatError> {
        session.touch();
        if !line.is_empty() && self.refusing() {
            // Refused before waiting for the handle: a line queued behind the turn in flight
            // would be refused anyway once that turn ended.
            return Err(self.draining_error());
        }
        let mut state = tokio::select! {
            state = session.chat.lock() => state,
            _ = cancel.cancelled() => return Err(ChatError::Cancelled),
        };
        session.touch();
        if !self.inner.storage.shared() {
            return self.begin_locked(session, state, line, request, None).await;
        }
        // A store other replicas share: this replica runs the turn only while it holds the
        // conversation's lease, and only on the latest version of it. A new line with
        // nothing else to write first takes the lease with its mark, in one round trip (the
        // mark's version check is the check that this copy is the latest).
        let store = self.inner.storage.store();
        let with_mark = !line.is_empty()
            && state.pending.is_none()
            && state.task.is_none()
            && state.stored.is_some()
            && self.inner.storage.durable();
        if !with_mark
            && let Err(e) = self
                .take_lease(session, &mut state, !line.is_empty(), cancel)
                .await
        {
            drop(state);
            self.let_go_after_lease(session, &e).await;
            return Err(e);
        }
        let begun = self
            .begin_locked(session, state, line, request, with_mark.then_some(cancel))
            .await;
        if !matches!(begun, Ok(Ok(_))) {
            store.release(&session.id).await;
        }
        begun
    }

    /// Takes the conversation's lease in the shared store, waiting (at most [`LEASE_WAIT`])
    /// while another replica runs a turn of it. [`ChatError::Stale`] when the store holds a
    /// newer version than this replica's copy (another replica went on with it).
    async fn take_lease(
        &self,
        session: &Session,
        state: &mut ChatState,
        interrupting: bool,
        cancel: &CancellationToken,
    ) -> Result<(), ChatError> {
        let (version, _) = self
            .wait_for_lease(&session.id, interrupting, cancel)
            .await?;
        let local = state.stored.as_ref().map(|s| s.version());
        if version == local {
            return Ok(());
        }
        // This replica's own mark, applied after its write gave up: its copy goes on from it.
        if let Some(stored) = state.stored.as_mut()
            && let Some(mark) = stored.unsure.clone()
            && let Some(found) = self.late_mark(session, &stored.head, &mark).await
            && Some(found) == version
        {
            stored.head.version = found;
            stored.head.in_flight = Some(mark);
            stored.unsure = None;
            return Ok(());
        }
        // No head at all: the store no longer holds the conversation this replica held (its
        // caller lets the session go, `gone_from_store`, once it let go of its lock).
        if version.is_none() && local.is_some() {
            return Err(self.unknown());
        }
        Err(ChatError::Stale)
    }

    /// Lets go of `session` after [`Sessions::take_lease`] failed with `e` (its chat lock
    /// given back first): a newer version elsewhere closes it as continued there, no head at
    /// all as gone from the store; other errors leave it.
    async fn let_go_after_lease(&self, session: &Session, e: &ChatError) {
        match e {
            ChatError::Stale => {
                self.inner.storage.release(&session.id).await;
                self.close_keeping(session, "continued on another replica")
                    .await;
            }
            ChatError::NoSession { .. } => {
                self.inner.storage.release(&session.id).await;
                self.gone_from_store(session).await;
            }
            _ => {}
        }
    }

    /// Waits (at most [`LEASE_WAIT`]) until this replica holds `id`'s lease; returns the
    /// stored head's version then, and the replica that wrote it last (when the store knows).
    /// `interrupting` (a new line): the holder is asked once to interrupt its turn, which it
    /// does when no call of its own waits on that turn (as a new line on one replica would).
    pub(super) async fn wait_for_lease(
        &self,
        id: &crate::store::HandleId,
        interrupting: bool,
        cancel: &CancellationToken,
    ) -> Result<(Option<u64>, Option<String>), ChatError> {
        let store = self.inner.storage.store();
        let started = std::time::Instant::now();
        let mut asked = !interrupting;
        loop {
            let lease = store.acquire(id).await.map_err(|e| ChatError::StoreAway {
                message: e.to_string(),
            })?;
            match lease {
                Lease::Granted { version, writer } => return Ok((version, writer)),
                Lease::Held { by, for_ms } => {
                    if !asked {
                        asked = true;
                        if let Err(e) = store.ask_interrupt(id).await {
                            tracing::warn!("store: asking {by} to interrupt its turn failed: {e}");
                        }
                    }
                    if started.elapsed() >= LEASE_WAIT {
                        return Err(ChatError::Busy {
                            holder: by,
                            waited_seconds: started.elapsed().as_secs(),
                        });
                    }
                    let wait = std::time::Duration::from_millis(for_ms.clamp(10, 100));
                    tokio::select! {
                        () = tokio::time::sleep(wait) => {}
                        _ = cancel.cancelled() => return Err(ChatError::Cancelled),
                    }
                }
            }
        }
    }

    /// A write that did not happen, as the call's error: a version conflict lets the session
    /// go ([`ChatError::Stale`], the next call reloads it); a shared store that did not take
    /// it is [`ChatError::Unsaved`] (the session stays).
    async fn unwritten(&self, session: &Session, conflict: Conflict) -> ChatError {
        match conflict {
            Conflict::Unsaved(e) => ChatError::Unsaved {
                message: e.to_string(),
            },
            gone if gone.head_gone() => {
                self.gone_from_store(session).await;
                self.unknown()
            }
            changed => {
                self.conflicted(session, changed).await;
                ChatError::Stale
            }
        }
    }

    /// [`Sessions::begin`] with the handle's lock held (and, on a shared store, its lease).
    async fn begin_locked<'a>(
        &self,
        session: &'a Arc<Session>,
        mut state: tokio::sync::MutexGuard<'a, ChatState>,
        line: &str,
        request: Option<&str>,
        take_lease: Option<&CancellationToken>,
    ) -> Result<Result<Reading<'a>, ChatReply>, ChatError> {
        if session.bot.is_finished() {
            drop(state);
            self.close(session, "bot stopped").await;
            return Err(self.unknown());
        }
        if !line.is_empty() && session.bot.end_requested() {
            // Its bot asked to end (`end_session`): no new line, while the goodbye finishes.
            return Err(self.unknown());
        }
        let mut unread = None;
        if !line.is_empty() && self.refusing() {
            return Err(self.draining_error());
        }
        if let Some(collected) = state.settle_task()
            && let Err(conflict) = self
                .record_read(session, &mut state, &collected, false)
                .await
        {
            drop(state);
            return Err(self.unwritten(session, conflict).await);
        }
        if let Some(request) = request
            && !line.is_empty()
            && let Some(answered) = session.answered(request, line)
            && !state
                .pending
                .as_ref()
                .is_some_and(|p| Arc::ptr_eq(p, &answered))
        {
            // The same request again (a balancer resending a call whose replica stored this
            // turn and died before answering): its reply, and nothing runs twice.
            tracing::info!(
                session = session.number,
                turn = answered.id,
                "a request sent again was answered from its stored turn"
            );
            return Ok(Err(ChatReply::of(&answered, None)));
        }
        // The line sent again after the store did not take the turn it began (its caller was
        // told to call chat again): that turn ran; it is read now, and saved, not run twice.
        let resent_unsaved = !line.is_empty()
            && state.pending.as_ref().is_some_and(|p| {
                state.unsaved == Some(p.id) && p.is_done() && p.snapshot().line == line
            });
        if !line.is_empty() && !resent_unsaved {
            let replaced = state.pending.take();
            // A task keeps the turn this line interrupts: it delivers it, so this reply does
            // not repeat it as unread (and the store does not keep it as unread).
            let keeper = state.task.take().filter(|cell| cell.supersede());
            if replaced.is_some() {
                // The turn no call waits for ends first, so its record goes in the same
                // write as this line's mark.
                session.bot.interrupt().await;
                session.bot.settle().await;
            }
            // A turn lost to a crash that this very request started (a balancer resending
            // it): this line is its answer now, so it is not reported as lost.
            let resent = replaced
                .as_ref()
                .zip(request)
                .is_some_and(|(old, request)| old.was_lost_by(request, line));
            if let Some(cell) = &keeper {
                self.superseded(cell).await;
            } else if let Some(old) = replaced.as_ref().filter(|_| !resent) {
                let r = old.snapshot();
                unread = Some(UnreadTurn {
                    reply: r.reply.trim().to_string(),
                    end_reason: r
                        .end
                        .as_ref()
                        .map(|e| e.label().to_string())
                        .unwrap_or_default(),
                    line: lost_line(&r),
                });
            }
            // The mark: durable before the turn runs, so a crash leaves it to be reported.
            let mark = self.inner.storage.durable().then(|| InFlight {
                turn: session.bot.next_turn_id(),
                line: line.to_string(),
                started_ms: now_ms(),
                request: request.map(str::to_string),
                config_version: session.bot.config_version(),
            });
            let unread_id = replaced
                .as_ref()
                .filter(|_| keeper.is_none() && !resent)
                .map(|t| t.id);
            let step = if take_lease.is_some() {
                LeaseStep::Take
            } else {
                LeaseStep::Keep
            };
            let mut written = self
                .record(
                    session,
                    &mut state.stored,
                    replaced.as_slice(),
                    mark.clone(),
                    unread_id,
                    step,
                )
                .await;
            let mut taken_with_mark = take_lease.is_some();
            if let (Err(Conflict::NotTaken), Some(cancel)) = (&written, take_lease) {
                // Another replica runs a turn of it: wait for the lease as any call does.
                taken_with_mark = false;
                if let Err(e) = self.take_lease(session, &mut state, true, cancel).await {
                    if keeper.is_none() && state.pending.is_none() {
                        // Nothing ran: the turn this line would have replaced stays unread.
                        state.pending = replaced;
                    }
                    drop(state);
                    if matches!(e, ChatError::NoSession { .. }) {
                        self.let_go_after_lease(session, &e).await;
                    }
                    if e == ChatError::Stale {
                        self.close_keeping(session, "continued on another replica")
                            .await;
                    }
                    return Err(e);
                }
                written = self
                    .record(
                        session,
                        &mut state.stored,
                        replaced.as_slice(),
                        mark,
                        unread_id,
                        LeaseStep::Keep,
                    )
                    .await;
            }
            if let Err(conflict) = written {
                if keeper.is_none() && state.pending.is_none() {
                    // Nothing ran: the turn this line would have replaced stays unread (one
                    // the store did not take before is not lost with this line's mark).
                    state.pending = replaced;
                }
                drop(state);
                match conflict {
                    // The store holds a newer version (another replica went on with it):
                    // nothing was written, no lease taken; the caller reloads it.
                    gone if taken_with_mark && gone.head_gone() => {
                        self.gone_from_store(session).await;
                        return Err(self.unknown());
                    }
                    Conflict::Changed(_) if taken_with_mark => {
                        self.close_keeping(session, "continued on another replica")
                            .await;
                        return Err(ChatError::Stale);
                    }
                    // The store did not take the mark: the turn did not begin.
                    Conflict::Unsaved(e) => {
                        return Err(ChatError::StoreAway {
                            message: e.to_string(),
                        });
                    }
                    conflict => return Err(self.unwritten(session, conflict).await),
                }
            }
            let turn = session.bot.say(line).await;
            if let Some(request) = request {
                turn.set_request(request);
            }
            session.remember(turn.clone());
            state.pending = Some(turn);
        } else if let Some(cell) = state.task.take()
            && !self.hand_over(&cell).await
        {
            // A poll collected the turn first: it is gone.
            if let Some(collected) = state.pending.take()
                && let Err(conflict) = self
                    .record_read(session, &mut state, &collected, false)
                    .await
            {
                drop(state);
                return Err(self.unwritten(session, conflict).await);
            }
        }
        let Some(turn) = state.pending.clone() else {
            session.touch();
            let turns = session.bot.next_turn_id().saturating_sub(1);
            return Ok(Err(ChatReply::empty(unread, turns)));
        };
        Ok(Ok(Reading {
            state,
            turn,
            unread,
        }))
    }

    /// The reply of a turn a call waited for: a read turn is gone, and its record and
    /// history are stored before its reply is returned ([`ChatError::Unsaved`] when a shared
    /// store did not take them). On a shared store the lease goes back after the write.
    async fn read(
        &self,
        session: &Arc<Session>,
        mut reading: Reading<'_>,
    ) -> Result<ChatReply, ChatError> {
        // A turn the shutdown cut is answered, and kept unread all the same: the next call
        // after the restart reports it, as after a crash (`Sessions::close_all`).
        let cut = session.cut.load(std::sync::atomic::Ordering::Acquire) == reading.turn.id;
        if cut {
            let written = self
                .record(
                    session,
                    &mut reading.state.stored,
                    std::slice::from_ref(&reading.turn),
                    None,
                    Some(reading.turn.id),
                    LeaseStep::Release,
                )
                .await;
            if let Err(e) = &written {
                tracing::warn!(
                    session = session.number,
                    turn = reading.turn.id,
                    "the turn the shutdown cut could not be kept for its report: {e}"
                );
            }
            let (turn, unread) = reading.let_go();
            return Ok(ChatReply::of(&turn, unread));
        }
        if reading
            .state
            .pending
            .as_ref()
            .is_some_and(|p| Arc::ptr_eq(p, &reading.turn))
        {
            reading.state.pending = None;
        }
        // On a shared store the lease goes back with the write (one round trip).
        let written = self
            .record_read(session, &mut reading.state, &reading.turn, true)
            .await;
        if matches!(written, Err(Conflict::Unsaved(_))) && reading.state.pending.is_none() {
            // Not saved, so not read: the turn stays unread here. An empty line reads it
            // (and saves it) once the store answers; a new line saves it as the unread turn
            // it carries. Dropped, the log never held it and its reply was never seen.
            reading.state.pending = Some(reading.turn.clone());
            reading.state.unsaved = Some(reading.turn.id);
        }
        let (turn, unread) = reading.let_go();
        session.touch();
        match written {
            Ok(()) => Ok(ChatReply::of(&turn, unread)),
            Err(Conflict::Unsaved(e)) => Err(ChatError::Unsaved {
                message: e.to_string(),
            }),
            Err(changed) => {
                let gone = changed.head_gone();
                let shared = self.inner.storage.shared();
                self.conflicted(session, changed).await;
                if gone && session.deleted_here() {
                    // Closed here meanwhile, and deleted (the bot ended the conversation with
                    // this turn): its reply is the conversation's last word, not a loss.
                    return Ok(ChatReply::of(&turn, unread));
                }
                if shared {
                    // Another replica went on without this turn (it reported it cut off), or
                    // the store lost the conversation: answering it as a turn would split the
                    // conversation in two, or answer one nothing keeps.
                    return Err(ChatError::unkept(&turn, gone));
                }
                Ok(ChatReply::of(&turn, unread))
            }
        }
    }

    /// Stores `turn` as read (its record and history, no unread turn). `release` (the turn a
    /// call waited for): a shared store's lease goes back in the same write, unless a turn no
    /// call waits for runs on (it keeps the lease, renewed, until it ends and is written:
    /// `record_when_done` gives it back then).
    async fn record_read(
        &self,
        session: &Session,
        state: &mut ChatState,
        turn: &Arc<Turn>,
        release: bool,
    ) -> Result<(), Conflict> {
        if state.stored.is_some() {
            session.bot.settle().await;
        }
        let step = if release && session.bot.current_turn().is_none_or(|t| t.is_done()) {
            LeaseStep::Release
        } else {
            LeaseStep::Keep
        };
        self.record(
            session,
            &mut state.stored,
            std::slice::from_ref(turn),
            None,
            None,
            step,
        )
        .await
    }

    /// A poll collected a task's turn: stores that it was read, unless a call did first.
    pub(in crate::sessions) fn record_collected(&self, session: Arc<Session>) {
        self.record_read_later(session, ChatState::settle_task);
    }

    /// A reply kept unread because its caller's stream broke ([`CallerWatch::stream_lost`])
    /// is about to reach a resumed stream: turn `turn` of session `number` is read now (an
    /// empty line after the resume finds nothing), unless a call read it first or a new line
    /// replaced it. Its being read is stored in the background. Never waits: while a call
    /// holds the handle, the turn is taken (if still there) once it lets go, so a resume is
    /// not held up by another line's turn.
    pub fn read_on_resume(&self, number: u64, turn: u64) {
        let Some(session) = self.by_number(number) else {
            return;
        };
        let take = move |state: &mut ChatState| {
            let kept = state.task.is_none()
                && state
                    .pending
                    .as_ref()
                    .is_some_and(|p| p.id == turn && p.is_done());
            if kept { state.pending.take() } else { None }
        };
        let (read, busy) = match session.chat.try_lock() {
            Ok(mut state) => (take(&mut state), false),
            Err(_) => (None, true),
        };
        if busy {
            // A call holds the handle: decided once it lets go.
            return self.record_read_later(session, take);
        }
        if let Some(read) = read {
            self.record_read_later(session, move |_| Some(read));
        }
    }

    /// The reply a call read (`mark`, written as read before it was returned) did not reach
    /// its caller: the HTTP answer that carried it was dropped before its end (the client
    /// left, the connection broke, the server stopped). The turn is the session's unread one
    /// again, here and in the store, so an empty line reads it (after a restart too) and a
    /// new line's answer names it, unless a newer line began meanwhile or another turn is
    /// unread. `resumable`: the answer went out on a stream of an MCP session, which the
    /// client resumes from this process's replay store (`Last-Event-ID`) while it runs;
    /// it is handed back only when the process is stopping (the replay store dies with it).
    /// Never waits: the write runs in the background ([`Sessions::undelivered_settled`]).
    pub(crate) fn reply_not_delivered(&self, mark: ReadMark, resumable: bool) {
        if resumable && !self.stopping() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let writes = self.inner.undelivered_writes.clone();
        writes.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        let sessions = self.clone();
        runtime.spawn(async move {
            sessions.hand_back(mark).await;
            writes.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
        });
    }

    async fn hand_back(&self, mark: ReadMark) {
        let ReadMark { session, turn } = mark;
        let mut state = session.chat.lock().await;
        let newest = session.bot.next_turn_id().saturating_sub(1);
        if state.pending.is_some() || state.task.is_some() || newest != turn {
            return;
        }
        let Some(read) = session.turns().into_iter().rev().find(|t| t.id == turn) else {
            return;
        };
        let shared = self.inner.storage.shared();
        if shared
            && let Err(e) = self
                .take_lease(&session, &mut state, false, &CancellationToken::new())
                .await
        {
            drop(state);
            self.let_go_after_lease(&session, &e).await;
            return;
        }
        state.pending = Some(read);
        let written = self
            .record(
                &session,
                &mut state.stored,
                &[],
                None,
                Some(turn),
                LeaseStep::Keep,
            )
            .await;
        if shared {
            self.inner.storage.release(&session.id).await;
        }
        drop(state);
        match written {
            Ok(()) => tracing::info!(
                session = session.number,
                handle = %session.handle_prefix(),
                turn,
                "a reply did not reach its caller: kept unread (an empty line reads it)"
            ),
            Err(conflict) => self.conflicted(&session, conflict).await,
        }
    }

    /// Whether this process is ending its sessions or draining: a stream's replay store
    /// does not outlive it.
    fn stopping(&self) -> bool {
        self.is_draining()
            || self
                .inner
                .stopping
                .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Waits until the writes of replies that did not reach their callers
    /// ([`Sessions::reply_not_delivered`]) are done, at most `bound`; true when they are.
    pub(crate) async fn undelivered_settled(&self, bound: std::time::Duration) -> bool {
        let deadline = tokio::time::Instant::now() + bound;
        while self
            .inner
            .undelivered_writes
            .load(std::sync::atomic::Ordering::Acquire)
            > 0
        {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        true
    }

    /// Stores as read the turn `pick` takes from the handle's state (none: nothing to do),
    /// under the handle's lock and, on a shared store, its lease.
    fn record_read_later(
        &self,
        session: Arc<Session>,
        pick: impl FnOnce(&mut ChatState) -> Option<Arc<Turn>> + Send + 'static,
    ) {
        let sessions = self.clone();
        tokio::spawn(async move {
            let mut state = session.chat.lock().await;
            let Some(collected) = pick(&mut state) else {
                return;
            };
            // On a shared store, written only under the conversation's lease and on its
            // latest version (as a call's turn is).
            let shared = sessions.inner.storage.shared();
            if shared
                && let Err(e) = sessions
                    .take_lease(&session, &mut state, false, &CancellationToken::new())
                    .await
            {
                drop(state);
                sessions.let_go_after_lease(&session, &e).await;
                return;
            }
            let written = sessions
                .record_read(&session, &mut state, &collected, false)
                .await;
            if shared {
                sessions.inner.storage.release(&session.id).await;
            }
            drop(state);
            if let Err(conflict) = written {
                sessions.conflicted(&session, conflict).await;
            }
        });
    }
}
