//! The input line's keys (readline keys, Enter sends, Esc leaves or cancels the question)
//! and what sending does: a line into a session the console did not open waits for a second
//! Enter, once per session; a chat's outcome becomes a notice.
//!
//! Methods of [`Console`]: they return an [`Action`] for the event loop and never chat
//! themselves.

use crossterm::event::{KeyCode, KeyEvent};
use ratatui::style::Style;
use ratatui_textarea::{TextArea, WrapMode};

use crate::input::actions::Action;

use crate::text::truncate;
use crate::view::console::{Console, Notice};

use crate::view::ids::PaneId;
use crate::view::keys;
use crate::view::line_edit;
use turnscope::sessions::ChatReply;

impl Console {
    pub(crate) fn input_key(&mut self, key: &KeyEvent) -> Option<Action> {
        if keys::is_newline(key) {
            self.input.insert_newline();
            return None;
        }
        if line_edit::textarea_key(&mut self.input, key) {
            return None;
        }
        match key.code {
            KeyCode::Enter => return self.send(),
            KeyCode::Tab => self.cycle(1),
            KeyCode::BackTab => self.cycle(-1),
            KeyCode::Esc if self.input_line.pending_send.is_some() => {
                self.input_line.pending_send = None;
                self.notice = Some(Notice {
                    text: "not sent; the line is still here".into(),
                    error: false,
                });
            }
            KeyCode::Esc => self.focus = PaneId::Sessions,
            KeyCode::F(1) => self.help.show(),
            KeyCode::PageUp => self.scroll_transcript(self.page(PaneId::Transcript)),
            KeyCode::PageDown => self.scroll_transcript(-self.page(PaneId::Transcript)),
            _ => {
                self.input.input(*key);
            }
        }
        None
    }

    /// Takes the input line as a chat action on the selected session (or, before the person
    /// has a session where the first line opens one, as that).
    pub(crate) fn send(&mut self) -> Option<Action> {
        if self.start_on_first_line && self.own.is_none() {
            if self.input_line.starting {
                self.notice = Some(Notice {
                    text: "your session is starting; send this line once it has".into(),
                    error: false,
                });
                return None;
            }
            if self.input.lines().iter().all(|l| l.trim().is_empty()) {
                self.notice = Some(Notice {
                    text: "type a line: sending it starts your session on the bot".into(),
                    error: false,
                });
                return None;
            }
            self.input_line.pending_send = None;
            self.input_line.starting = true;
            let line = self.take_line();
            return Some(Action::StartWith { line });
        }
        // Watching whisker alone: there is no bot to chat with at all, selected or not.
        if self.watching_only() {
            self.notice = Some(Notice {
                text: "watching only (--whisker without the bot's URL): nothing here chats; \
                       `turnscope attach URL --whisker WS` chats with the bot too; your line is kept"
                    .into(),
                error: true,
            });
            return None;
        }
        let Some(session) = self.selected else {
            self.notice = Some(Notice {
                text: "no session selected; select one in Sessions (1) first".into(),
                error: true,
            });
            return None;
        };
        if let Some(row) = self.state.session(session)
            && row.is_closed()
            && Some(session) != self.own
        {
            self.notice = Some(Notice {
                text: format!(
                    "session #{session} is closed; select an open session in Sessions (1), \
                     or press n there to start a new one"
                ),
                error: true,
            });
            return None;
        }
        let stored_mine = match self.state.session(session) {
            // The person's own conversation from before a restart (the console kept its
            // handle, `run::kept_handles`): the line reopens it.
            Some(row) if row.is_stored() && row.mine => true,
            Some(row) if row.is_stored() => {
                // The store keeps only a keyed hash of the handle: the console cannot chat on
                // it, and reopening it here would take the conversation from the client that
                // holds it.
                self.notice = Some(Notice {
                    text: format!(
                        "session {} is stored, not open: its transcript is read-only here; the client holding its handle reopens it with its next chat",
                        row.handle_prefix
                    ),
                    error: true,
                });
                return None;
            }
            _ => false,
        };
        // An attached console chats only in the sessions it started (marked the person's):
        // another's is refused before anything is asked, the line kept (before, it asked
        // "Enter again sends…", then refused and the line was gone).
        if self.is_another_clients(session) {
            self.notice = Some(Notice {
                text: format!(
                    "#{session} was started by another client and attach chats only in its own; \
                     your line is kept (n in Sessions starts one)"
                ),
                error: true,
            });
            return None;
        }
        if Some(session) != self.own
            && !stored_mine
            && !self.input_line.confirmed.contains(&session)
        {
            if self.input_line.pending_send != Some(session) {
                let who = self
                    .state
                    .session(session)
                    .map(|r| r.opener_label())
                    .unwrap_or_else(|| "someone else".into());
                self.input_line.pending_send = Some(session);
                self.notice = Some(Notice {
                    text: format!(
                        "#{session} was opened by {who}: Enter again sends your line into it (asked once); Esc cancels"
                    ),
                    error: true,
                });
                return None;
            }
            self.input_line.confirmed.insert(session);
        }
        self.input_line.pending_send = None;
        let line = self.take_line();
        self.state.sent_line(session, &line);
        Some(Action::Chat { session, line })
    }

    /// The input line's text (trailing whitespace cut), leaving the line empty, the
    /// transcript following its end and no notice.
    fn take_line(&mut self) -> String {
        let line = self.input.lines().join("\n");
        let line = line.trim_end().to_string();
        self.input = {
            let mut fresh = TextArea::default();
            fresh.set_wrap_mode(WrapMode::WordOrGlyph);
            fresh.set_cursor_line_style(Style::new());
            fresh.set_placeholder_text(self.input.placeholder_text().to_string());
            fresh
        };
        self.transcript.back.set(0);
        self.notice = None;
        line
    }

    /// Puts a line that could not be sent back into an empty input line, so it is not lost
    /// (a line already typed since is left as it is). Returns whether it was put back.
    pub fn give_back_line(&mut self, line: &str) -> bool {
        if line.is_empty() || !self.input.lines().iter().all(String::is_empty) {
            return false;
        }
        self.input.insert_str(line);
        true
    }

    /// A line whose chat failed before any turn took it (the call did not reach the bot, the
    /// bot refused it) is nowhere in the transcript: it goes back into the input line when
    /// that is empty, else the notice repeats it. A line a turn took (the turn ran, then its
    /// call failed) is in the transcript already, and is left there: a turn with that line
    /// started after the call was sent (`since`, the last turn's id then), or, when the send
    /// was not seen, the last turn. The words the notice ends with.
    fn unsent(&mut self, session: u64, line: &str, since: Option<u64>) -> String {
        let turns = self.state.transcript(session);
        let taken = match since {
            Some(last_before) => turns
                .iter()
                .rev()
                .take_while(|turn| turn.id > last_before)
                .any(|turn| took(turn, line)),
            None => turns.last().is_some_and(|turn| took(turn, line)),
        };
        if line.is_empty() || taken {
            String::new()
        } else if self.give_back_line(line) {
            " · your line is back in the input line (Enter sends it)".into()
        } else {
            format!(" · your line was: {}", truncate(line, 200))
        }
    }

    /// Follows the person's conversations that go on under other numbers (`moved`: number
    /// before → number now; an attached console's sessions, reopened by the restarted server
    /// it watches): their own session, the selection, the chats in flight, the sessions
    /// confirmed and the questions asked stay with the conversation, not the number.
    pub fn renumbered(&mut self, moved: &[(u64, u64)]) {
        if moved.is_empty() {
            return;
        }
        let now = |n: u64| {
            moved
                .iter()
                .find(|(before, _)| *before == n)
                .map_or(n, |(_, to)| *to)
        };
        self.own = self.own.map(now);
        self.selected = self.selected.map(now);
        self.close_asked = self.close_asked.map(now);
        let line = &mut self.input_line;
        line.pending_send = line.pending_send.map(now);
        line.confirmed = std::mem::take(&mut line.confirmed)
            .into_iter()
            .map(now)
            .collect();
        for number in line.moved.values_mut() {
            *number = now(*number);
        }
        for (sent_to, last) in std::mem::take(&mut line.waiting) {
            let to = now(sent_to);
            if to != sent_to {
                line.moved.insert(sent_to, to);
            }
            line.waiting.insert(to, last);
        }
    }

    /// Notes that a chat call started.
    pub fn chat_started(&mut self, session: u64) {
        let last = self.state.transcript(session).last().map_or(0, |t| t.id);
        self.input_line.waiting.entry(session).or_insert(last);
    }

    /// Notes how a chat call ended: errors and reads become a notice; a reply shows in the
    /// transcript on its own and clears a failed chat's notice, but leaves any other (what
    /// sending the line told, such as which session it opened or reopened, goes as notices
    /// go: after a while, or with the next line).
    pub fn chat_done(&mut self, session: u64, line: &str, result: Result<ChatReply, String>) {
        // Sent before its conversation went on under another number: told there.
        let session = self.input_line.moved.remove(&session).unwrap_or(session);
        let since = self.input_line.waiting.remove(&session);
        let failed = result.as_ref().map_or(true, ChatReply::is_error);
        let call_failed = result.as_ref().err().cloned();
        self.notice = match result {
            Err(message) => Some(Notice {
                text: format!("{message}{}", self.unsent(session, line, since)),
                error: true,
            }),
            Ok(reply) if reply.is_error() => Some(Notice {
                text: match reply.turn {
                    Some(turn) => format!(
                        "turn {turn} ended in error: {}",
                        reply.error.unwrap_or_default()
                    ),
                    // An attached console's chat answered with an error before any turn (the
                    // bot refused the call): its text says what happened, in words meant for
                    // a model ("call start for a new handle"): the key that does it here too.
                    None => {
                        let error = reply.error.unwrap_or_default();
                        let unsent = self.unsent(session, line, since);
                        let start = if error.to_ascii_lowercase().contains("start") {
                            " · n in Sessions (1) starts a new session on the bot"
                        } else {
                            ""
                        };
                        format!("chat failed: {error}{unsent}{start}")
                    }
                },
                error: true,
            }),
            Ok(reply) if line.is_empty() => Some(Notice {
                text: match reply.turn {
                    Some(turn) => format!(
                        "read turn {turn} of #{session}: {} ({} characters)",
                        reply.end_reason.unwrap_or_default(),
                        reply.reply.chars().count()
                    ),
                    None => format!("#{session} has no unread turn to read"),
                },
                error: false,
            }),
            Ok(_) => {
                let shown = self.notice.take();
                let chat_failure = self.chat_failure.take();
                shown.filter(|n| Some(n) != chat_failure.as_ref())
            }
        };
        if let Some(message) = call_failed {
            self.end_cut_off_turn(session, line, since, &message);
        }
        if failed {
            self.chat_failure.clone_from(&self.notice);
        }
    }

    /// An attached console's call failed (no answer: the watched server went away) after the
    /// turn it started took the line: the turn is ended here, cut off, since its end may
    /// never come (the server's event stream went with it; tour L: "streaming" for minutes).
    /// A turn the stream ends later keeps that end.
    fn end_cut_off_turn(&mut self, session: u64, line: &str, since: Option<u64>, message: &str) {
        if line.is_empty() || !self.state.header.source.is_attached() {
            return;
        }
        let open = self
            .state
            .transcript(session)
            .iter()
            .rev()
            .take_while(|turn| since.is_none_or(|before| turn.id > before))
            .find(|turn| turn.line == line && turn.end.is_none())
            .map(|turn| turn.id);
        let Some(turn) = open else {
            return;
        };
        // Timed from its start to the failure, by this console's clock.
        let total_us = self.state.timelines.get(session, turn).map_or(0, |t| {
            turnscope::observe::event::now_us().saturating_sub(t.started_us)
        });
        self.state.apply(&turnscope::observe::Event::TurnEnded(
            turnscope::observe::TurnEndEvent {
                session,
                turn,
                reason: format!(
                    "cut off: this console's chat call failed ({}); how the turn ended is not \
                     known here",
                    crate::text::one_line(message)
                ),
                // Left out of the turn statistics: its end is not known.
                retold: true,
                total_us,
                clock: Some(turnscope::observe::TurnClock::Client),
                ..Default::default()
            },
        ));
        if let Some(notice) = self.notice.as_mut() {
            notice.text.push_str(&format!(
                " · the bot took the line (turn {turn}), shown cut off"
            ));
        }
    }
}

/// Whether `turn` took `line`: a turn the attached console timed itself whose call failed
/// ([`NOT_ANSWERED`](turnscope::attach::target::NOT_ANSWERED)) did not, as far as anyone knows.
fn took(turn: &crate::state::TurnView, line: &str) -> bool {
    turn.line == line
        && !turn
            .end
            .as_deref()
            .is_some_and(|end| end.starts_with(turnscope::attach::target::NOT_ANSWERED))
}
