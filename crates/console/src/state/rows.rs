//! Session rows: opened and closed from events, laid over by live snapshots, aged in
//! replay, listed in order; a closed session's live turns handed back to the event-built
//! transcript, and the oldest closed session forgotten past `CLOSED_KEPT`.

use turnscope::observe::event::SessionEvent;

use std::collections::BTreeMap;

use super::journal::{Entry, Level};
use super::{
    Activity, CLOSED_KEPT, CLOSED_TOGETHER, ConsoleState, Greeting, SESSIONS_TRACKED, SessionRow,
    Source, TurnView,
};

impl ConsoleState {
    /// The MCP client that opened `session` let go of it: the row is marked and the Log says so.
    pub(super) fn on_client_gone(&mut self, session: u64, client: &str, reason: &str, at_us: u64) {
        self.saw_time(at_us);
        let Some(row) = self.sessions.get(&session) else {
            return;
        };
        if row.is_closed() {
            return;
        }
        let who = if client.is_empty() {
            "mcp client"
        } else {
            client
        };
        self.clients_gone
            .insert(session, format!("{who}: {reason}"));
        self.journal.push(Entry {
            at_us,
            level: Level::Warn,
            session: Some(session),
            source: format!("mcp client {who}"),
            message: if self.header.source.is_attached()
                || matches!(self.header.source, Source::Replay { .. })
            {
                // Another client's session: an attached console closes only its own, and a
                // replay closes nothing.
                format!("{reason}; #{session} stays open on the server until its handle expires")
            } else {
                format!(
                    "{reason}; #{session} stays open until its handle expires or you close it (d)"
                )
            },
            repeats: 1,
        });
    }

    /// A client withdrew its chat call: its choice, noted as such (never an error).
    pub(super) fn on_cancelled(&mut self, session: u64, client: &str, at_us: u64) {
        self.saw_time(at_us);
        self.touch(session, at_us);
        self.journal.push(Entry {
            at_us,
            level: Level::Info,
            session: Some(session),
            source: format!("mcp client {client}"),
            message: "cancelled its chat call; the turn runs on, an empty line reads its reply"
                .into(),
            repeats: 1,
        });
    }

    /// A session opened or closed.
    pub(super) fn on_session(&mut self, s: &SessionEvent) {
        self.saw_time(s.at_us);
        match &s.closed {
            None => {
                self.sessions_opened += 1;
                // A server never numbers two sessions alike in its life; a closed number
                // opening again is a restarted watched server's new session: the old one's
                // row and figures go, so its turns are not taken for the new one's, and so do
                // the frames kept (the old server's, whose ids the new one numbers again).
                if self
                    .sessions
                    .get(&s.session)
                    .is_some_and(SessionRow::is_closed)
                {
                    self.sessions.remove(&s.session);
                    self.closed_order.retain(|(n, _)| *n != s.session);
                    self.forget_figures(s.session);
                    self.frames.clear();
                    self.frames_cleared += 1;
                }
                // A conversation opened again (from the store: after a restart, or taken over
                // from another replica) is one row: its earlier closed rows here go (it was
                // listed once per take-over). Its turns come with it.
                if s.restored {
                    let earlier: Vec<u64> = self
                        .closed_order
                        .iter()
                        .map(|(n, _)| *n)
                        .filter(|n| {
                            self.sessions
                                .get(n)
                                .is_some_and(|r| r.handle_prefix == s.handle_prefix)
                        })
                        .collect();
                    for old in earlier {
                        self.sessions.remove(&old);
                        self.closed_order.retain(|(n, _)| *n != old);
                        self.forget_figures(old);
                    }
                }
                let row = self.sessions.entry(s.session).or_insert(SessionRow {
                    number: s.session,
                    handle_prefix: s.handle_prefix.clone(),
                    opener: s.opener.clone(),
                    mine: told_own(&self.own_told, s.session, &s.handle_prefix),
                    turns: 0,
                    activity: Activity::Idle,
                    opened_us: s.at_us,
                    began_us: s.began_us,
                    age_s: 0,
                    idle_left_s: None,
                    taken_from: None,
                    greeting: Greeting::Unknown,
                });
                if s.taken_from.is_some() {
                    row.taken_from = s.taken_from.clone();
                }
                // An opening says its greeting, none included (a stored conversation that
                // had none showed the bot's greeting of today: tour U #4).
                row.greeting = Greeting::known(s.greeting.as_deref());
            }
            Some(reason) => self.close_row(s.session, reason.clone(), s.at_us),
        }
    }

    pub(super) fn close_row(&mut self, number: u64, reason: String, at_us: u64) {
        let Some(row) = self.sessions.get_mut(&number) else {
            return;
        };
        if row.is_closed() {
            return;
        }
        row.activity = Activity::Closed(reason);
        row.age_s = at_us.saturating_sub(row.age_from_us()) / 1_000_000;
        row.idle_left_s = None;
        // A closed session has no turn in flight: the last live snapshot may have caught
        // one streaming, so the turns built from events (ended by their events) take over,
        // and a turn whose end was never seen is marked as ended with the session.
        let before = self.transcript_bytes_of(number);
        if let Some(live) = self.live_turns.remove(&number) {
            let built = self.transcripts.entry(number).or_default();
            for turn in live {
                match built.iter_mut().find(|t| t.id == turn.id) {
                    Some(known) if known.end.is_none() && turn.end.is_some() => *known = turn,
                    Some(known) if known.end.is_none() => {
                        if turn.reply.len() > known.reply.len() {
                            known.reply = turn.reply;
                        }
                        if known.tools.len() < turn.tools.len() {
                            known.tools = turn.tools;
                        }
                    }
                    Some(_) => {}
                    None => {
                        self.transcript_order.push_back((number, turn.id));
                        built.push(turn);
                    }
                }
            }
            built.sort_by_key(|t| t.id);
        }
        if let Some(turns) = self.transcripts.get_mut(&number) {
            for turn in turns.iter_mut().filter(|t| t.end.is_none()) {
                turn.end = Some("session ended".into());
            }
        }
        let after = self.transcript_bytes_of(number);
        self.transcript_bytes = self.transcript_bytes + after - before;
        self.trim_transcripts();
        self.closed_order.push_back((number, at_us));
        if self.closed_order.len() > CLOSED_KEPT
            && let Some((old, _)) = self.closed_order.pop_front()
        {
            self.sessions.remove(&old);
            self.forget_figures(old);
        }
    }

    /// Forgets everything kept per session of `session` (its row was forgotten): its
    /// transcript, samples, totals, counts, pipeline, token tally and messages.
    fn forget_figures(&mut self, session: u64) {
        self.transcript_bytes -= self.transcript_bytes_of(session);
        self.transcripts.remove(&session);
        self.transcript_dropped.remove(&session);
        self.live_turns.remove(&session);
        self.session_samples.remove(&session);
        self.progress_totals.remove(&session);
        self.journal.forget(session);
        self.clients_gone.remove(&session);
        self.last_activity.remove(&session);
        self.pipelines.forget(session);
        self.timelines.forget_open(session);
        self.wire.forget(session);
    }

    /// Keeps the per-session figures of at most [`SESSIONS_TRACKED`] sessions beyond the
    /// rows listed: events may name sessions never seen opening (a replay, missed events),
    /// whose figures no closing would ever forget. The lowest-numbered go first. Cheap when
    /// within the bound (a few length checks per event).
    pub(super) fn bound_sessions(&mut self) {
        // A live server's open sessions are all listed, however many.
        let bound = SESSIONS_TRACKED + self.live_open;
        let over = |n: usize| n > bound;
        if over(self.sessions.len()) {
            // Rows of sessions never seen closing: the oldest go first.
            while self.sessions.len() > bound {
                let Some((old, _)) = self.sessions.pop_first() else {
                    break;
                };
                self.closed_order.retain(|(n, _)| *n != old);
                self.forget_figures(old);
            }
        }
        if over(self.transcripts.len())
            || over(self.session_samples.len())
            || over(self.progress_totals.len())
            || over(self.last_activity.len())
            || over(self.clients_gone.len())
            || over(self.transcript_dropped.len())
            || over(self.journal.sessions())
            || over(self.timelines.open_sessions())
        {
            let mut numbers: Vec<u64> = self
                .transcripts
                .keys()
                .chain(self.session_samples.keys())
                .chain(self.progress_totals.keys())
                .chain(self.last_activity.keys())
                .copied()
                .filter(|n| !self.sessions.contains_key(n))
                .collect();
            numbers.sort_unstable();
            numbers.dedup();
            let unlisted = numbers.len();
            for old in numbers
                .into_iter()
                .take(unlisted.saturating_sub(SESSIONS_TRACKED / 2))
            {
                self.forget_figures(old);
            }
            trim_lowest(&mut self.clients_gone, bound);
            trim_lowest(&mut self.transcript_dropped, bound);
            self.journal.keep_at_most(bound);
            self.timelines.keep_open_at_most(bound);
        }
    }

    /// Lays a snapshot of the open sessions over the rows: their figures replace the
    /// event-built ones, and an open row missing from the snapshot is marked closed.
    pub fn sync_sessions(&mut self, open: Vec<SessionRow>) {
        let numbers: std::collections::BTreeSet<u64> = open.iter().map(|r| r.number).collect();
        let gone: Vec<u64> = self
            .sessions
            .values()
            .filter(|r| !r.is_closed() && !numbers.contains(&r.number))
            .map(|r| r.number)
            .collect();
        let now = self.now_us;
        for number in gone {
            self.close_row(number, "gone".into(), now);
        }
        self.live_open = open.len();
        for mut row in open {
            // The greeting its opening said stays (a snapshot does not carry it): the one it
            // opened with, not the bot's greeting now (a reload may have changed it).
            if row.greeting == Greeting::Unknown
                && let Some(before) = self.sessions.get_mut(&row.number)
            {
                row.greeting = std::mem::take(&mut before.greeting);
            }
            self.sessions.insert(row.number, row);
        }
    }

    /// An attached console said which sessions it started (its recording, replayed; live,
    /// the same as [`Self::mark_yours`] from its client): the open rows that are those
    /// sessions (number and handle) are the person's, the others not; a row opened later is
    /// marked as it opens.
    pub(super) fn on_own_sessions(&mut self, sessions: &[turnscope::observe::OwnSession]) {
        self.own_told = sessions.to_vec();
        for row in self.sessions.values_mut().filter(|r| !r.is_closed()) {
            row.mine = told_own(&self.own_told, row.number, &row.handle_prefix);
        }
    }

    /// Marks the open rows `yours` says are the person's (an attached console's own
    /// sessions on its target), and unmarks the others. Whether a mark changed.
    pub fn mark_yours(&mut self, yours: impl Fn(u64) -> bool) -> bool {
        let mut changed = false;
        for row in self.sessions.values_mut().filter(|r| !r.is_closed()) {
            let mine = yours(row.number);
            changed |= row.mine != mine;
            row.mine = mine;
        }
        changed
    }

    /// Sets each open row's age from the latest event's time (a replay has no live
    /// snapshot); a closed row keeps the age it closed at.
    pub fn age_rows(&mut self) {
        let now = self.now_us;
        let lifetime = self.header.watched_handle_seconds;
        let last_activity = &self.last_activity;
        for row in self.sessions.values_mut().filter(|r| !r.is_closed()) {
            row.age_s = now.saturating_sub(row.age_from_us()) / 1_000_000;
            // A watched server's session: its lifetime counted from the last activity seen
            // (a call that only reads makes no event, so it has at least this long). Its own
            // console's sessions do not idle out while that console runs (and the server
            // runs only as long as its console).
            let console_holds = self.header.watched_console_holds
                && matches!(
                    row.opener,
                    turnscope::observe::event::SessionOpener::Console
                );
            row.idle_left_s = lifetime
                .filter(|_| row.activity != Activity::InTurn && !row.is_stored() && !console_holds)
                .map(|lifetime| {
                    let last = last_activity
                        .get(&row.number)
                        .copied()
                        .unwrap_or(row.opened_us);
                    lifetime.saturating_sub(now.saturating_sub(last) / 1_000_000)
                });
        }
    }

    /// Lays a live snapshot of one session's turns over its event-built transcript.
    pub fn sync_turns(&mut self, session: u64, mut turns: Vec<TurnView>) {
        // Which lines were typed here only the events' transcript knows (the session's own
        // records do not say): its marks go on the snapshot's turns.
        let typed: Vec<u64> = self
            .transcripts
            .get(&session)
            .map(|built| {
                built
                    .iter()
                    .filter(|t| t.typed_here)
                    .map(|t| t.id)
                    .collect()
            })
            .unwrap_or_default();
        if !typed.is_empty() {
            for turn in &mut turns {
                turn.typed_here |= typed.contains(&turn.id);
            }
        }
        self.live_turns.insert(session, turns);
    }

    /// Forgets live turn snapshots of every session but `keep`.
    pub fn keep_live_turns_of(&mut self, keep: Option<u64>) {
        self.live_turns.retain(|n, _| Some(*n) == keep);
    }

    /// Sets the sessions the store keeps that are not open here (`rows`, most recently used
    /// first) and how many more it holds that are not listed.
    pub fn sync_stored(&mut self, rows: Vec<SessionRow>, unlisted: u64) {
        self.stored = rows;
        self.stored_unlisted = unlisted;
    }

    /// The most recently used stored session of the person's own (one they chatted in from a
    /// console before a restart), when one is listed.
    pub fn latest_stored_of_yours(&self) -> Option<&SessionRow> {
        self.stored.iter().find(|row| row.mine)
    }

    /// Says that the store failed to give the turns of the stored session `session`, with
    /// the store's `error` (shown in its transcript until it is read again).
    pub fn fail_stored_read(&mut self, session: u64, error: String) {
        self.stored_failure = Some((session, error));
    }

    /// Forgets a failed read of a stored session's turns (it is being read again).
    pub fn clear_stored_failure(&mut self) {
        self.stored_failure = None;
    }

    /// Why the store failed to give the turns of `session`, when it did.
    pub fn stored_read_failure(&self, session: u64) -> Option<&str> {
        match &self.stored_failure {
            Some((number, error)) if *number == session => Some(error),
            _ => None,
        }
    }

    /// How screens name a session: `#3`, or `stored 5e5e5e5e` for a stored session (it has
    /// no number until a client's chat reopens it).
    pub fn session_name(&self, number: u64) -> String {
        match self.stored.iter().find(|r| r.number == number) {
            Some(row) => format!("stored {}", row.handle_prefix),
            None => format!("#{number}"),
        }
    }

    /// Stored sessions listed, and how many more the store holds that are not.
    pub fn stored_counts(&self) -> (usize, u64) {
        (self.stored.len(), self.stored_unlisted)
    }

    /// Session rows: open ones by number, then stored ones (most recently used first), then
    /// closed ones, latest closed first (those closed together by number).
    pub fn session_rows(&self) -> Vec<&SessionRow> {
        let mut rows: Vec<&SessionRow> =
            self.sessions.values().filter(|r| !r.is_closed()).collect();
        rows.extend(self.stored.iter());
        // Latest closed first; each run closed within [`CLOSED_TOGETHER`] of its latest,
        // by number.
        let mut closed: Vec<(u64, u64)> = self.closed_order.iter().rev().copied().collect();
        let mut from = 0;
        while from < closed.len() {
            let latest = closed[from].1;
            let to = closed[from..]
                .iter()
                .position(|(_, at)| latest.saturating_sub(*at) >= CLOSED_TOGETHER)
                .map_or(closed.len(), |k| from + k);
            closed[from..to].sort_unstable_by_key(|(n, _)| *n);
            from = to;
        }
        rows.extend(closed.iter().filter_map(|(n, _)| self.sessions.get(n)));
        rows
    }

    /// One session's row.
    pub fn session(&self, number: u64) -> Option<&SessionRow> {
        self.sessions
            .get(&number)
            .or_else(|| self.stored.iter().find(|r| r.number == number))
    }
}

/// Forgets the lowest-numbered entries of a per-session map beyond `bound`.
fn trim_lowest<V>(map: &mut BTreeMap<u64, V>, bound: usize) {
    while map.len() > bound {
        map.pop_first();
    }
}

/// Whether `own` (an attached console's sessions, as it told them) holds session `number`
/// with the handle `prefix` (a row whose handle is not known matches by its number).
fn told_own(own: &[turnscope::observe::OwnSession], number: u64, prefix: &str) -> bool {
    own.iter()
        .any(|o| o.session == number && (prefix.is_empty() || o.handle_prefix == prefix))
}
