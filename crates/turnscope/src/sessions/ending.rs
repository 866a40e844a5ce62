//! How sessions end: one closed (by its client, the console, or a bot that stopped), the idle
//! sweep that closes what nobody used for `handle_seconds` (and deletes what the store kept that
//! long), the shutdown that ends them all, and the drain behind a load balancer that lets the
//! turns in flight finish first.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::task::JoinHandle;

use super::{Session, Sessions};
use crate::bot::TurnEnd;
use crate::observe::{Event, SessionEvent, SessionOpener, event::now_us};
use crate::store::HandleId;

impl Sessions {
    /// Ends a conversation: removes the session, ends its bot (its turn in flight ends as
    /// "session ended") and deletes it from the store.
    pub async fn close(&self, session: &Session, reason: &str) {
        self.close_as(session, reason, true).await;
    }

    /// Removes a session from this process and ends its bot, keeping it in the store (the
    /// next `chat` on its handle reopens it).
    pub(super) async fn close_keeping(&self, session: &Session, reason: &str) {
        self.close_as(session, reason, false).await;
    }

    async fn close_as(&self, session: &Session, reason: &str, forget: bool) {
        if !forget {
            self.close_now(session, reason, false).await;
            return;
        }
        // Held from the table to the store: a `chat` arriving meanwhile finds the session gone
        // from the table and would reopen from the store the conversation being deleted (a
        // bot that ended itself answering again); its reopen waits on this same gate, and then
        // finds nothing.
        let storage = &self.inner.storage;
        let gate = storage.gate(session.id);
        let closing = gate.lock().await;
        self.close_now(session, reason, true).await;
        drop(closing);
        storage.ungate(&session.id);
    }

    async fn close_now(&self, session: &Session, reason: &str, forget: bool) {
        let removed = {
            let mut table = self.table();
            let same = table
                .by_id
                .get(&session.id)
                .is_some_and(|s| std::ptr::eq(&**s, session));
            if same {
                table.by_id.remove(&session.id);
                table.by_number.remove(&session.number);
            }
            same
        };
        if !removed {
            return;
        }
        self.free_slot();
        session.bot.end().await;
        self.close_tasks(session).await;
        if forget {
            session.deleted_here.store(true, Ordering::Relaxed);
            self.inner
                .ended
                .remember(&session.id, session.number, reason);
            self.inner.storage.delete(&session.id).await;
        }
        self.inner.storage.release(&session.id).await;
        self.inner.bus.publish_with(|| {
            Event::Session(SessionEvent {
                session: session.number,
                handle_prefix: session.handle_prefix(),
                opener: session.opener.clone(),
                closed: Some(reason.to_string()),
                at_us: now_us(),
                restored: false,
                began_us: None,
                taken_from: None,
                greeting: None,
            })
        });
        tracing::info!(session = session.number, handle = %session.handle_prefix(), reason, "session closed");
    }

    /// Drops every session that is idle too long ([`Session::expired`]: never one a running
    /// console opened) or whose bot stopped, and deletes the stored sessions idle too long.
    /// Returns how many open ones it closed.
    pub async fn sweep(&self) -> usize {
        let limit = Duration::from_secs(self.inner.limits.load().handle_seconds);
        let console_holds = self.console_holds();
        let doomed: Vec<(Arc<Session>, &str)> = self
            .table()
            .by_id
            .values()
            .filter_map(|s| {
                if s.bot.is_finished() {
                    Some((s.clone(), "bot stopped"))
                } else if s.expired(limit, console_holds) {
                    Some((s.clone(), "idle too long"))
                } else {
                    None
                }
            })
            .collect();
        for (s, reason) in &doomed {
            self.close(s, reason).await;
        }
        if !self.inner.storage.shared() {
            // A shared store's replicas keep them with every sweep of theirs
            // (`keep_used_alive`).
            self.keep_console_held_alive(limit / 2).await;
        }
        self.sweep_tasks().await;
        self.sweep_stored().await;
        doomed.len()
    }

    /// Marks the sessions a running console holds, idle for `idle_at_least` or more, as used
    /// now in the store: they never idle out here, but the store counted from their last
    /// line, so a console quit after a while idle found its conversation deleted at its next
    /// start (tour O). Each sweep, and once more as the console quits (`close_all`), so the
    /// idle lifetime of what it kept counts from then.
    async fn keep_console_held_alive(&self, idle_at_least: Duration) {
        let storage = &self.inner.storage;
        if !storage.writing() || !self.console_holds() {
            return;
        }
        let now = crate::store::now_ms();
        let since = idle_at_least.as_millis() as u64;
        let held: Vec<Arc<Session>> = self
            .table()
            .by_id
            .values()
            .filter(|s| {
                s.held_by_console()
                    && s.idle() >= idle_at_least
                    && now.saturating_sub(s.kept_alive_ms.load(Ordering::Relaxed)) >= since
            })
            .cloned()
            .collect();
        if held.is_empty() {
            return;
        }
        let ids: Vec<HandleId> = held.iter().map(|s| s.id).collect();
        match storage.store().keep_alive(&ids).await {
            Ok(()) => {
                for session in &held {
                    session.kept_alive_ms.store(now, Ordering::Relaxed);
                }
            }
            Err(e) => storage.fail(&e),
        }
    }

    /// Starts the periodic sweep (and the store's lease renewals); the task runs until
    /// aborted. Each wait is read anew, so a reloaded `sweep_seconds` applies from the next.
    pub(crate) fn spawn_sweeper(&self) -> JoinHandle<()> {
        let sessions = self.clone();
        tokio::spawn(async move {
            let lease = sessions.inner.storage.store().lease_every();
            let mut last_sweep = tokio::time::Instant::now();
            let mut last_copies = tokio::time::Instant::now();
            let shared = sessions.inner.storage.shared();
            let copies_running = Arc::new(std::sync::atomic::AtomicBool::new(false));
            loop {
                let sweep_every = sessions.inner.limits.load().sweep_every;
                let every = lease.map_or(sweep_every, |lease| lease.min(sweep_every));
                tokio::time::sleep(every).await;
                sessions.renew_leases().await;
                // At least three times an idle lifetime, so a short one is kept too.
                let lifetime = Duration::from_secs(sessions.inner.limits.load().handle_seconds);
                let copies_every = super::persist::COPIES_EVERY.min(lifetime / 3);
                // Apart from the renewals (a lease must not wait behind closing copies), one
                // pass at a time.
                if shared
                    && last_copies.elapsed() >= copies_every
                    && !copies_running.swap(true, Ordering::AcqRel)
                {
                    last_copies = tokio::time::Instant::now();
                    let (sessions, running) = (sessions.clone(), copies_running.clone());
                    tokio::spawn(async move {
                        sessions.keep_used_alive(copies_every * 2).await;
                        sessions
                            .let_go_of_stale_copies(super::persist::COPIES_IDLE)
                            .await;
                        running.store(false, Ordering::Release);
                    });
                }
                if last_sweep.elapsed() >= sessions.inner.limits.load().sweep_every {
                    last_sweep = tokio::time::Instant::now();
                    sessions.sweep().await;
                }
            }
        })
    }

    /// Ends every session (server shutdown): each turn in flight ends, and the `chat` calls
    /// waiting on those turns get their answers (this waits up to `grace` for them to be
    /// handed back). With a durable store the conversations are kept: a turn in flight ends
    /// as `restarted` and is kept unread, so the next `chat` on its handle after the restart
    /// reports it once, as after a crash (its caller, when still connected, is answered with
    /// it too: nothing tells whether that answer was read before the process ended);
    /// otherwise they are over (`session_ended`). A console session in which nothing was
    /// said is deleted: nobody holds its handle once the console is gone, so it could only
    /// ever be an empty record. Returns how many turns in flight it cut.
    pub(crate) async fn close_all(&self, reason: &str, grace: Duration) -> usize {
        self.inner.stopping.store(true, Ordering::Release);
        self.keep_console_held_alive(Duration::ZERO).await;
        let all: Vec<_> = self.table().by_id.values().cloned().collect();
        let kept = self.inner.storage.durable();
        let cut = std::sync::atomic::AtomicUsize::new(0);
        futures::future::join_all(all.iter().map(|s| {
            let cut = &cut;
            async move {
                if matches!(s.opener, SessionOpener::Console) && s.turns().is_empty() {
                    self.close(s, reason).await;
                    return;
                }
                if let Some(turn) = s.bot.current_turn().filter(|t| !t.is_done()) {
                    cut.fetch_add(1, Ordering::Relaxed);
                    if kept {
                        // Before it ends: the call reading it finds it marked.
                        s.cut.store(turn.id, Ordering::Release);
                        s.bot.end_turn_as(TurnEnd::Restarted);
                    }
                }
                self.close_keeping(s, reason).await;
            }
        }))
        .await;
        let deadline = tokio::time::Instant::now() + grace;
        while self.inner.calls_in_flight.load(Ordering::Acquire) > 0
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        cut.into_inner()
    }

    /// Drains the table (SIGTERM behind a load balancer): from now on `start` and new lines
    /// are refused with an error saying so, while turns in flight run to their end and their
    /// callers read them. Returns once no `chat` call is in progress and no turn runs, or
    /// after `bound`; true when it drained before the bound.
    pub async fn drain(&self, bound: Duration) -> bool {
        self.begin_drain();
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

    /// Begins a drain ([`Sessions::drain`]) without waiting for it: `start` and new lines are
    /// refused from now on (on a store of its own; see [`Sessions::is_draining`]).
    pub fn begin_drain(&self) {
        self.inner.draining.store(true, Ordering::Release);
    }

    /// Whether no `chat` call is in progress, no session has a turn running, and no task's
    /// client still waits for its result.
    pub fn quiet(&self) -> bool {
        self.inner.calls_in_flight.load(Ordering::Acquire) == 0
            && !self.tasks_awaited()
            && self
                .table()
                .by_id
                .values()
                .all(|s| s.bot.current_turn().is_none_or(|t| t.is_done()))
    }
}
