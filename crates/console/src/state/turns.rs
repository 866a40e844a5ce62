//! The fold of a turn's events into its transcript entry, its timeline and the session's
//! samples: a turn started or ended, a tool call, a model request (a reply piece comes with
//! the frames, see `frames`).

use turnscope::observe::ModelResponseInfo;
use turnscope::observe::event::{ToolCallEvent, TurnEndEvent};

use super::journal::{Entry, Level};
use super::{Activity, ConsoleState, TURNS_KEPT, ToolLine, TurnView};

impl ConsoleState {
    /// A user line opened a turn.
    pub(super) fn on_turn_started(&mut self, session: &u64, turn: &u64, line: &str, at_us: &u64) {
        self.saw_time(*at_us);
        let turns = self.transcripts.entry(*session).or_default();
        if turns.len() == TURNS_KEPT {
            turns.remove(0);
        }
        turns.push(TurnView {
            id: *turn,
            line: line.to_string(),
            ..TurnView::default()
        });
        self.timelines.started(*session, *turn, *at_us);
        self.touch(*session, *at_us);
        // Someone speaks into it again: no longer a session nobody holds.
        self.clients_gone.remove(session);
        if let Some(row) = self.sessions.get_mut(session) {
            row.turns += 1;
            if !row.is_closed() {
                row.activity = Activity::InTurn;
            }
        }
    }

    /// A turn ended, with its figures.
    pub(super) fn on_turn_ended(&mut self, t: &TurnEndEvent) {
        self.touch(t.session, self.now_us);
        self.timelines
            .ended((t.session, t.turn), &t.reason, t.total_us);
        if let Some(view) = self.turn_mut(t.session, t.turn) {
            view.end = Some(t.reason.clone());
            view.rounds = t.rounds;
            view.first_piece_us = t.first_piece_us;
            view.total_us = Some(t.total_us);
            if t.config_version.is_some() {
                view.config_version = t.config_version;
            }
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
        let samples = self.session_samples.entry(t.session).or_default();
        samples.record("turn total", t.total_us);
        if let Some(first) = t.first_piece_us {
            samples.record("turn first piece", first);
        }
    }

    /// A tool call finished (or failed).
    pub(super) fn on_tool_call(&mut self, c: &ToolCallEvent) {
        if c.started_us != 0 {
            self.touch(c.session, c.started_us + c.duration_us);
        }
        self.timelines.call(
            (c.session, c.turn),
            &c.name,
            c.started_us,
            c.duration_us,
            c.error.is_some(),
        );
        if let Some(e) = &c.error {
            let at = if c.started_us == 0 {
                self.now_us
            } else {
                c.started_us + c.duration_us
            };
            self.journal.push(Entry {
                at_us: at,
                level: Level::Error,
                session: (c.session != 0).then_some(c.session),
                source: format!("tool {}", c.name),
                message: e.clone(),
                repeats: 1,
            });
        }
        if let Some(view) = self.turn_mut(c.session, c.turn) {
            view.tools.push(ToolLine {
                name: c.name.clone(),
                arguments: c.arguments.clone(),
                result: c.error.clone().unwrap_or_else(|| c.result.clone()),
                result_bytes: c.result_bytes,
                duration_us: Some(c.duration_us),
                error: c.error.is_some(),
                running: false,
            });
        }
        if c.session != 0 {
            self.session_samples
                .entry(c.session)
                .or_default()
                .record(&format!("tool {}", c.name), c.duration_us);
        }
    }

    /// One model request finished.
    pub(super) fn on_model_request(
        &mut self,
        session: &u64,
        turn: &u64,
        first_piece_us: &Option<u64>,
        total_us: &u64,
        error: &Option<String>,
        at_us: &u64,
    ) {
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
                    at_us + total_us
                },
                level: Level::Error,
                session: (*session != 0).then_some(*session),
                source: "model".into(),
                message: e.clone(),
                repeats: 1,
            });
        }
        self.session_samples
            .entry(*session)
            .or_default()
            .record("model request", *total_us);
    }

    /// What a model request reported: its tokens and reasoning join its turn's.
    pub(super) fn on_model_response(
        &mut self,
        session: u64,
        turn: u64,
        response: &ModelResponseInfo,
    ) {
        if let Some(view) = self.turn_mut(session, turn) {
            if let Some(u) = &response.usage {
                view.usage.get_or_insert_default().add(u);
            }
            view.reasoning_bytes += response.reasoning_bytes;
        }
    }

    pub(super) fn turn_mut(&mut self, session: u64, turn: u64) -> Option<&mut TurnView> {
        self.transcripts
            .get_mut(&session)?
            .iter_mut()
            .rev()
            .find(|t| t.id == turn)
    }
}
