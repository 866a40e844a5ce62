//! The fold of a turn's events into its transcript entry, its timeline and the session's
//! samples: a turn started or ended, a tool call, a model request (a reply piece comes with
//! the frames, see `frames`).

use turnscope::observe::ModelResponseInfo;
use turnscope::observe::event::{ToolCallEvent, TurnEndEvent};

use super::budget::{Part, turn_bytes};
use super::journal::{Entry, Level};
use super::{Activity, ConsoleState, Source, TURNS_KEPT, ToolLine, TurnView};

impl ConsoleState {
    /// A user line opened a turn.
    pub(super) fn on_turn_started(&mut self, session: &u64, turn: &u64, line: &str, at_us: &u64) {
        self.saw_time(*at_us);
        let turns = self.transcripts.entry(*session).or_default();
        // A start told twice (a recording made by an older attached console, which kept what a
        // reconnect retold) opens nothing new.
        if turns.iter().rev().any(|t| t.id == *turn) {
            return;
        }
        let mut freed = 0;
        if turns.len() == TURNS_KEPT {
            freed = turn_bytes(&turns.remove(0));
        }
        let view = TurnView {
            id: *turn,
            line: line.to_string(),
            typed_here: self.typed.started(*session, line),
            ..TurnView::default()
        };
        let size = turn_bytes(&view);
        turns.push(view);
        self.transcript_bytes -= freed;
        self.transcript_order.push_back((*session, *turn));
        self.compact_transcript_order();
        self.transcript_grew(size);
        self.timelines.started(*session, *turn, *at_us);
        self.touch(*session, *at_us);
        // Someone speaks into it again: no longer a session nobody holds.
        self.clients_gone.remove(session);
        if let Some(row) = self.sessions.get_mut(session) {
            // A session numbers its turns 1, 2, … (a restored one goes on from its count),
            // so the highest number is how many it has had, also when the console saw only
            // its last (attached late, or a reconnect's kept turns) or saw one twice.
            row.turns = row.turns.max(*turn);
            if !row.is_closed() {
                row.activity = Activity::InTurn;
            }
        }
    }

    /// A turn ended, with its figures.
    pub(super) fn on_turn_ended(&mut self, t: &TurnEndEvent) {
        // The turn's end is its start plus its total, on the clock of the event: not when this
        // console read it (a viewer that read a backlog late put every session's last
        // activity at "now", and its `left`, an "at least", past the server's). A turn told
        // again (a viewer's connect) ended before, or one whose start was not seen: its start
        // (or nothing) stands as the session's last activity (the Sessions pane's `left` is a
        // least).
        if !t.retold
            && let Some(timeline) = self.timelines.get(t.session, t.turn)
        {
            let ended_us = timeline.started_us.saturating_add(t.total_us);
            self.touch(t.session, ended_us);
        }
        self.timelines
            .ended((t.session, t.turn), &t.reason, t.total_us);
        if let Some(view) = self.turn_mut(t.session, t.turn) {
            let before = view.end.as_ref().map_or(0, String::len);
            view.end = Some(t.reason.clone());
            view.reply_bytes = Some(t.reply_bytes);
            view.rounds = t.rounds;
            view.first_piece_us = t.first_piece_us;
            // A turn cut off by a crash was never timed: no `total 0 µs` (tour N).
            view.total_us = (t.total_us > 0).then_some(t.total_us);
            if t.usage.is_some() {
                view.usage = t.usage;
            }
            view.clock = t.clock;
            if t.config_version.is_some() {
                view.config_version = t.config_version;
            }
            self.transcript_grew(t.reason.len().saturating_sub(before));
        }
        if let Some(row) = self.sessions.get_mut(&t.session)
            && !row.is_closed()
        {
            row.activity = if t.reason.starts_with("interrupted") {
                Activity::Interrupted
            } else {
                Activity::Idle
            };
        }
        // Tokens come with the turn's end only when its model requests are not told (a turn
        // told again, a turn a client saw): in its session's tally, not in the figures.
        // (Tallied only when none of its requests was seen: a viewer that saw some before
        // a reconnect has them in the tally already.)
        if let Some(usage) = &t.usage
            && self.wire.calls_of(t.session, t.turn).is_empty()
        {
            self.wire.tally_session(t.session, usage);
        }
        if t.retold {
            // Told again (on connect, or the session reopened): in the transcript, not in
            // the figures.
            return;
        }
        // A turn an attached console timed (a bot with no turn records, no model requests
        // seen) that failed is the only word of its error: counted, as a server's turn's
        // failed request or tool call is.
        if t.clock.is_some()
            && (t.reason.starts_with("error")
                || t.reason
                    .starts_with(turnscope::attach::target::NOT_ANSWERED))
        {
            self.journal.push(Entry {
                at_us: self.now_us,
                level: Level::Error,
                session: (t.session != 0).then_some(t.session),
                source: "chat".into(),
                message: t.reason.clone(),
                repeats: 1,
            });
        }
        let samples = self.session_samples.entry(t.session).or_default();
        samples.record("turn total", t.total_us);
        if let Some(first) = t.first_piece_us {
            samples.record("turn first piece", first);
        }
    }

    /// A tool call finished (or failed).
    pub(super) fn on_tool_call(&mut self, c: &ToolCallEvent) {
        if c.started_us != 0 {
            self.touch(c.session, c.started_us.saturating_add(c.duration_us));
        }
        self.timelines.call(
            (c.session, c.turn),
            &c.name,
            c.started_us,
            c.duration_us,
            c.error.is_some(),
        );
        // A call told again with its turn is in the transcript; the Log and the figures had
        // it when it ran (or never saw it run).
        if let Some(e) = c.error.as_ref().filter(|_| !c.retold) {
            let at = if c.started_us == 0 {
                self.now_us
            } else {
                c.started_us.saturating_add(c.duration_us)
            };
            // A person's experiment at the workbench is news, not a bot's error to count.
            let (level, source) = if c.by_hand {
                (Level::Info, format!("hand call {}", c.name))
            } else {
                (Level::Error, format!("tool {}", c.name))
            };
            self.journal.push(Entry {
                at_us: at,
                level,
                session: (c.session != 0).then_some(c.session),
                source,
                message: e.clone(),
                repeats: 1,
            });
        }
        if let Some(view) = self.turn_mut(c.session, c.turn) {
            let before = turn_bytes(view);
            view.tools.push(ToolLine {
                name: c.name.clone(),
                arguments: c.arguments.clone(),
                result: c.error.clone().unwrap_or_else(|| c.result.clone()),
                result_bytes: c.result_bytes,
                duration_us: Some(c.duration_us),
                error: c.error.is_some(),
                running: false,
            });
            let grown = turn_bytes(view) - before;
            self.transcript_grew(grown);
        }
        if c.session != 0 && !c.retold {
            self.session_samples
                .entry(c.session)
                .or_default()
                .record(&format!("tool {}", c.name), c.duration_us);
        }
    }

    /// One model request finished (`event`, a `ModelRequest`; others are ignored).
    pub(super) fn on_model_request(&mut self, event: &turnscope::observe::Event) {
        let turnscope::observe::Event::ModelRequest {
            session,
            turn,
            first_piece_us,
            total_us,
            error,
            at_us,
            response,
            ..
        } = event
        else {
            return;
        };
        let stopped = response.stopped;
        self.timelines.request(
            (*session, *turn),
            *at_us,
            *first_piece_us,
            *total_us,
            error.as_deref(),
        );
        if let Some(e) = error {
            self.journal.push(Entry {
                at_us: if *at_us == 0 {
                    self.now_us
                } else {
                    at_us.saturating_add(*total_us)
                },
                level: Level::Error,
                session: (*session != 0).then_some(*session),
                source: "model".into(),
                message: e.clone(),
                repeats: 1,
            });
        }
        // One its turn was stopped under did not run its course: not a latency.
        if !stopped {
            self.session_samples
                .entry(*session)
                .or_default()
                .record("model request", *total_us);
        }
    }

    /// What a model request reported: its tokens and reasoning join its turn's.
    pub(super) fn on_model_response(
        &mut self,
        session: u64,
        turn: u64,
        response: &ModelResponseInfo,
    ) {
        // Attached, the header learns the model from the target's requests (as their server
        // named it): at start it knew only the target's own name.
        if let (Source::Attached { .. }, Some(model)) = (&self.header.source, &response.model)
            && self.header.model != *model
        {
            self.header.model.clone_from(model);
            self.header.model_short = None;
        }
        if let Some(view) = self.turn_mut(session, turn) {
            if let Some(u) = &response.usage {
                view.usage.get_or_insert_default().add(u);
            }
            view.reasoning_bytes = view
                .reasoning_bytes
                .saturating_add(response.reasoning_bytes);
        }
    }

    /// The transcripts grew by `delta` bytes: the oldest turns go while over their share.
    pub(super) fn transcript_grew(&mut self, delta: usize) {
        self.transcript_bytes += delta;
        self.trim_transcripts();
    }

    /// Drops the oldest turns (of any session) while the transcripts are over their share,
    /// keeping the newest.
    pub(super) fn trim_transcripts(&mut self) {
        let share = self.budget.share(Part::Transcripts);
        while self.transcript_bytes > share && self.transcript_order.len() > 1 {
            let Some((session, turn)) = self.transcript_order.pop_front() else {
                break;
            };
            let Some(turns) = self.transcripts.get_mut(&session) else {
                continue;
            };
            let Some(at) = turns.iter().position(|t| t.id == turn) else {
                continue;
            };
            let gone = turns.remove(at);
            self.transcript_bytes -= turn_bytes(&gone);
            *self.transcript_dropped.entry(session).or_default() += 1;
        }
    }

    /// Forgets the order of turns no longer kept once it is mostly stale (a session's turns
    /// dropped by `TURNS_KEPT`, a session forgotten), so the order stays bounded too.
    fn compact_transcript_order(&mut self) {
        let kept: usize = self.transcripts.values().map(Vec::len).sum();
        if self.transcript_order.len() > 2 * kept + 64 {
            let transcripts = &self.transcripts;
            self.transcript_order.retain(|(s, t)| {
                transcripts
                    .get(s)
                    .is_some_and(|turns| turns.iter().any(|v| v.id == *t))
            });
        }
    }

    /// The bytes of `session`'s transcript.
    pub(super) fn transcript_bytes_of(&self, session: u64) -> usize {
        self.transcripts
            .get(&session)
            .map_or(0, |turns| turns.iter().map(turn_bytes).sum())
    }

    pub(super) fn turn_mut(&mut self, session: u64, turn: u64) -> Option<&mut TurnView> {
        self.transcripts
            .get_mut(&session)?
            .iter_mut()
            .rev()
            .find(|t| t.id == turn)
    }
}
