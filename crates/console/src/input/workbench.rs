//! The workbench's keys: the Tools pane's hand calls (open a tool's form, fill it, call; the
//! list of calls: run again, edit, save) and edit-and-resend from the turn view (the request
//! editor, `$EDITOR`, the variants beside the recorded answer), and what their answers do to
//! the view.
//!
//! Methods of [`Console`]: they change the view and return an [`Action`]; the loop calls
//! tools, sends requests, writes files and runs the editor.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::Value;
use turnscope::model::resend::ResendAnswer;
use turnscope::tools::hand::HandResult;

use crate::input::actions::Action;
use crate::state::variants::RequestKey;
use crate::view::console::{Console, Notice};
use crate::view::form::{FieldKind, Form, FormKey};
use crate::view::hand_calls::{Mode, Outcome, Shown};
use crate::view::keys::{self, Command};
use crate::view::line_edit::Edit;
use crate::view::nav::{Follow, PAGE, scroll_back};
use crate::view::resend::{RequestEditor, VariantsPick};

/// Rows below which opening a form zooms the Tools pane.
const FORM_ROOM: u16 = 20;

/// How far a key scrolls a form or the list of calls and the answer under it, in rows:
/// PgUp/PgDn a page of the pane (`inspector` rows high, its borders and sources line off, one
/// row kept for context; [`PAGE`] before the first draw), Ctrl+Home/Ctrl+End to either end
/// (the drawing stops at the last row). `None` for any other key.
fn answer_scroll(key: &KeyEvent, inspector: u16) -> Option<isize> {
    let page = match inspector.saturating_sub(4) {
        0 => PAGE,
        rows => rows as isize,
    };
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    match key.code {
        KeyCode::PageDown => Some(page),
        KeyCode::PageUp => Some(-page),
        KeyCode::End if ctrl => Some(isize::MAX / 2),
        KeyCode::Home if ctrl => Some(-(isize::MAX / 2)),
        _ => None,
    }
}

impl Console {
    /// A key for the Tools pane while it shows a tool's detail: `Enter` (or `c`) opens the
    /// selected tool's form, `h` the list of hand calls. `None` when the key is not one of
    /// those.
    pub(crate) fn tools_detail_key(&mut self, key: &KeyEvent) -> Option<Option<Action>> {
        match key.code {
            KeyCode::Enter | KeyCode::Char('c') => {
                self.open_form(None);
                Some(None)
            }
            KeyCode::Char('h') => {
                self.tools.hand.mode = Mode::Calls;
                self.tools.hand.follow.set(Follow::Cursor);
                // The list and a call's answer need room, as a form does.
                if self.areas.get().inspector.height < FORM_ROOM {
                    self.zoom = true;
                }
                Some(None)
            }
            _ => None,
        }
    }

    /// Opens the form of the selected tool, filled with `arguments` when editing a call.
    pub(crate) fn open_form(&mut self, arguments: Option<(&str, &Value)>) {
        // A list changed since the last tick: the cursor moves to its tool first.
        self.tools
            .follow_list(self.state.tools_generation(), &self.state.tools);
        let tool = match arguments {
            Some((name, _)) => self.state.tools.iter().find(|t| t.name == name),
            None => self.state.tools.get(self.tools.nav.cursor),
        };
        let Some(tool) = tool else {
            self.notice = Some(Notice {
                text: match arguments {
                    Some((name, _)) => format!("the bot has no tool `{name}` now"),
                    None => "no tool selected".into(),
                },
                error: true,
            });
            return;
        };
        if tool.elsewhere {
            self.notice = Some(Notice {
                text: format!(
                    "`{}` is the watched bot's own tool: it runs where that bot runs \
                     (`turnscope tools call {}` there); from here Enter calls the target's \
                     tools/list",
                    tool.name, tool.name
                ),
                error: true,
            });
            return;
        }
        if let Some(why) = &tool.skipped {
            self.notice = Some(Notice {
                text: format!(
                    "`{}` is not offered ({why}); it cannot be called",
                    tool.name
                ),
                error: true,
            });
            return;
        }
        // A form closed with something typed opens as it was left; editing a call fills it
        // from that call.
        let draft = match arguments {
            None => self.tools.hand.take_draft(&tool.name, &tool.input),
            Some(_) => None,
        };
        let form = draft.unwrap_or_else(|| {
            Box::new(Form::new(
                &tool.name,
                &tool.input,
                arguments.map(|(_, a)| a),
            ))
        });
        self.tools.hand.mode = Mode::Form(form);
        // A form needs room, and `z` is a letter to type while it has the keys.
        if self.areas.get().inspector.height < FORM_ROOM {
            self.zoom = true;
        }
        self.tools.hand.last_sent = None;
    }

    /// A key while the form has the keys.
    pub(crate) fn form_key(&mut self, key: &KeyEvent) -> Option<Action> {
        let in_flight = self
            .tools
            .hand
            .last_sent
            .filter(|id| self.tools.hand.in_flight(*id));
        let waited = in_flight
            .and_then(|id| match self.tools.hand.get(id)?.outcome {
                Some(Outcome::InFlight(at)) => Some(at.elapsed()),
                _ => None,
            })
            .unwrap_or_default();
        let Mode::Form(form) = &mut self.tools.hand.mode else {
            return None;
        };
        // F1 anywhere, `?` where nothing is typed (a yes/no, a choice): the help.
        let picking = form
            .fields
            .get(form.cursor)
            .is_some_and(|f| matches!(f.kind, FieldKind::Bool | FieldKind::Choice(_)));
        if key.code == KeyCode::F(1) || (key.code == KeyCode::Char('?') && picking) {
            self.help.show();
            return None;
        }
        // The answer scrolls to its end; the field comes back in sight at the next key that
        // moves or edits.
        if let Some(d) = answer_scroll(key, self.areas.get().inspector.height) {
            form.follow.set(Follow::Free);
            scroll_back(&form.scroll, d);
            return None;
        }
        match form.key(key) {
            FormKey::Handled => None,
            // Esc while the form's call is in flight cancels it; the next Esc closes.
            FormKey::Close if in_flight.is_some() => {
                self.cancel_hand_call(in_flight?);
                None
            }
            FormKey::Close => {
                // Kept as typed, to open again (`Enter` on the tool), with its schema.
                if let Mode::Form(form) = std::mem::take(&mut self.tools.hand.mode)
                    && let Some(tool) = self.state.tools.iter().find(|t| t.name == form.tool)
                {
                    let schema = tool.input.clone();
                    self.tools.hand.keep_draft(&schema, form);
                }
                None
            }
            FormKey::Send => {
                if !form.problems().is_empty() {
                    let (field, why) = form.problems()[0].clone();
                    let more = form.problems().len() - 1;
                    form.to_first_problem();
                    self.notice = Some(Notice {
                        text: format!(
                            "not sent: {field}: {why}{}",
                            if more > 0 {
                                format!(" (and {more} more)")
                            } else {
                                String::new()
                            }
                        ),
                        error: true,
                    });
                    return None;
                }
                // One call of the form at a time: a second Enter (a key pressed twice) would
                // run a side-effecting tool twice, and Esc cancels only the latest.
                if in_flight.is_some() {
                    self.notice = Some(Notice {
                        text: format!(
                            "not sent again: {} is still running ({:.1} s); Esc cancels it, or \
                             wait for its answer",
                            form.tool,
                            waited.as_secs_f64()
                        ),
                        error: true,
                    });
                    return None;
                }
                form.follow.set(Follow::Answer);
                let tool = form.tool.clone();
                let arguments = form.arguments();
                Some(self.hand_call(tool, arguments))
            }
        }
    }

    /// Lists the call and asks the loop to make it.
    fn hand_call(&mut self, tool: String, arguments: Value) -> Action {
        let id = self.tools.hand.started(&tool, arguments.clone());
        // The call just made is the one `h` then shows selected (`s` saves it).
        self.tools.hand.select(Some(id));
        self.tools.hand.last_sent = Some(id);
        self.notice = Some(Notice {
            text: format!("calling {tool}…"),
            error: false,
        });
        Action::HandCall {
            id,
            tool,
            arguments: arguments.to_string(),
        }
    }

    /// A key while the list of hand calls has the keys.
    pub(crate) fn calls_key(&mut self, key: &KeyEvent) -> Option<Action> {
        let len = self.tools.hand.calls.len();
        // PgUp/PgDn (Ctrl+Home/End) scroll the list and the selected call's answer, to its end.
        if let Some(d) = answer_scroll(key, self.areas.get().inspector.height) {
            self.scroll_calls(d);
            return None;
        }
        match key.code {
            KeyCode::Esc => self.tools.hand.mode = Mode::Detail,
            KeyCode::Enter => {
                let call = self.tools.hand.selected()?.clone();
                // One run of a row at a time: its answer and its cancel are that run's.
                if self.tools.hand.in_flight(call.id) {
                    self.notice = Some(Notice {
                        text: format!(
                            "{} is still running: x cancels it, or wait for its answer",
                            call.tool
                        ),
                        error: true,
                    });
                    return None;
                }
                self.tools.hand.follow.set(Follow::Answer);
                if let Some(id) = self.tools.hand.rerun_saved(call.id) {
                    self.notice = Some(Notice {
                        text: format!("calling {}…", call.tool),
                        error: false,
                    });
                    return Some(Action::HandCall {
                        id,
                        tool: call.tool,
                        arguments: call.arguments.to_string(),
                    });
                }
                return Some(self.hand_call(call.tool, call.arguments));
            }
            KeyCode::Char('e') => {
                let call = self.tools.hand.selected()?.clone();
                self.open_form(Some((&call.tool, &call.arguments)));
            }
            KeyCode::Char('x') => {
                let id = self.tools.hand.selected()?.id;
                if !self.tools.hand.in_flight(id) {
                    self.notice = Some(Notice {
                        text: "x cancels a call in flight; this one is not".into(),
                        error: true,
                    });
                    return None;
                }
                self.cancel_hand_call(id);
            }
            KeyCode::Char('s') => match self.tools.hand.toggle_saved() {
                Some((toggled, saved)) => {
                    self.notice = Some(Notice {
                        text: if saved {
                            format!(
                                "saved in {} (there next time)",
                                crate::view::hand_calls::SAVED_FILE
                            )
                        } else {
                            "forgotten (no longer saved)".into()
                        },
                        error: false,
                    });
                    return Some(Action::SaveCalls { toggled });
                }
                None => {
                    self.notice = Some(Notice {
                        text: format!(
                            "{} calls are saved already; forget one (s) first",
                            crate::view::hand_calls::SAVED_KEPT
                        ),
                        error: true,
                    })
                }
            },
            _ => match keys::command(key) {
                Some(Command::Up) => self.step_call(-1),
                Some(Command::Down) => self.step_call(1),
                Some(Command::Home) => self.step_call(-(len as isize)),
                Some(Command::End) => self.step_call(len as isize),
                Some(Command::Help) => self.help.show(),
                Some(Command::Quit) => return self.quit(),
                Some(Command::NextPane) => self.cycle(1),
                Some(Command::PrevPane) => self.cycle(-1),
                Some(Command::Jump(n)) => return self.jump(n),
                // Nothing is typed in the list: `z` zooms as on any pane (tour N).
                Some(Command::Zoom) => self.zoom = !self.zoom,
                _ => {}
            },
        }
        None
    }

    /// Moves the list's selection by `delta` calls, keeping it in sight.
    fn step_call(&mut self, delta: isize) {
        let len = self.tools.hand.calls.len();
        self.tools.hand.nav.step(delta, len);
        self.tools.hand.follow.set(Follow::Cursor);
    }

    /// Scrolls the list of calls (and the selected one's answer) by `delta` rows, the
    /// selection left where it is.
    pub(crate) fn scroll_calls(&mut self, delta: isize) {
        self.tools.hand.follow.set(Follow::Free);
        scroll_back(&self.tools.scroll, delta);
    }

    /// Scrolls the open form (and its answer) by `delta` rows, the field edited left where
    /// it is.
    pub(crate) fn scroll_form(&mut self, delta: isize) {
        if let Mode::Form(form) = &self.tools.hand.mode {
            form.follow.set(Follow::Free);
            scroll_back(&form.scroll, delta);
        }
    }

    /// Cancels hand call `id` (in flight) and says so.
    fn cancel_hand_call(&mut self, id: u64) {
        let tool = self.tools.hand.get(id).map(|c| c.tool.clone());
        if let (Some(ran), Some(tool)) = (self.tools.hand.cancel(id), tool) {
            self.notice = Some(Notice {
                text: format!(
                    "{tool} cancelled after {:.1} s: the request was dropped (an MCP server is \
                     told to stop)",
                    ran.as_secs_f64()
                ),
                error: false,
            });
        }
    }

    fn jump(&mut self, n: usize) -> Option<Action> {
        if let Some(pane) = crate::view::ids::ORDER.get(n.wrapping_sub(1)) {
            self.focus_pane(*pane);
        }
        None
    }

    /// A hand call's answer (or why it was not made).
    pub fn hand_call_done(&mut self, id: u64, result: Result<HandResult, String>) {
        if self
            .tools
            .hand
            .get(id)
            .is_some_and(|c| matches!(c.outcome, Some(Outcome::Cancelled(_))))
        {
            // Cancelled by the person (its token let go then): what came back after is not news.
            return;
        }
        let (outcome, notice) = match result {
            Ok(done) if done.outcome.unanswered.is_some() => {
                let shown = Shown::of(&done);
                let (headline, why) = done
                    .outcome
                    .unanswered
                    .as_ref()
                    .map(|u| (u.headline(&done.tool), u.to_string()))
                    .unwrap_or_default();
                let text = format!(
                    "{headline}: {why} · {}",
                    crate::text::micros(shown.duration.as_micros() as u64)
                );
                (Outcome::Done(shown), Notice { text, error: true })
            }
            Ok(done) => {
                let shown = Shown::of(&done);
                let text = format!(
                    "{} {} · {} B · {}",
                    done.tool,
                    if shown.is_error {
                        "answered isError"
                    } else {
                        "answered"
                    },
                    shown.bytes,
                    crate::text::micros(shown.duration.as_micros() as u64)
                );
                let error = shown.is_error;
                (Outcome::Done(shown), Notice { text, error })
            }
            Err(why) => (
                Outcome::Refused(why.clone()),
                Notice {
                    text: format!("not sent: {why}"),
                    error: true,
                },
            ),
        };
        self.tools.hand.finished(id, outcome);
        self.notice = Some(notice);
    }

    /// `e` / `E` in the turn view: the picked model request in the console's editor, or in
    /// `$EDITOR`.
    pub(crate) fn edit_request(&mut self, external: bool) -> Option<Action> {
        if self.read_only {
            self.notice = Some(Notice {
                text: "a replay sends nothing; edit and resend from the live console".into(),
                error: true,
            });
            return None;
        }
        if self.state.header.source.is_attached() {
            // Said before any editing, not at the send (its work was lost then).
            self.notice = Some(Notice {
                text: "this console does not run the bot (it is attached to one): its model is \
                       called where it runs, with that server's key; edit and resend from its own \
                       console, or c copies the request as curl to send it yourself"
                    .into(),
                error: true,
            });
            return None;
        }
        let pick = self.turn_view.as_ref()?;
        let key = pick.request_key();
        let calls = self.state.wire.calls_of(key.session, key.turn);
        let Some(call) = calls.get(key.index) else {
            self.notice = Some(Notice {
                text: "this turn has no model request recorded".into(),
                error: true,
            });
            return None;
        };
        let (Some(text), Some(url)) = (
            crate::draw::panes::model_request::request_json(self, call),
            call.request().map(|q| q.url.clone()),
        ) else {
            self.notice = Some(Notice {
                text: "this request's body was not recorded ([wire] max_kib = 0, or an older file); nothing to edit".into(),
                error: true,
            });
            return None;
        };
        if external {
            return Some(Action::EditExternally { key, text, url });
        }
        // An edit closed unsent opens as it was left.
        if self.reopen_kept_edit(key, None) {
            return None;
        }
        self.editor = Some(RequestEditor::new(key, &text, &url));
        None
    }

    /// Opens the unsent edit of request `key` that was opened from `from_variant` (none: from
    /// the recorded request), when one was kept; says so.
    fn reopen_kept_edit(&mut self, key: RequestKey, from_variant: Option<usize>) -> bool {
        let Some(at) = self
            .edits_kept
            .iter()
            .position(|e| e.key == key && e.from_variant == from_variant)
        else {
            return false;
        };
        self.editor = Some(self.edits_kept.remove(at));
        let from = match from_variant {
            Some(shown) => format!("variant {}", shown + 1),
            None => "the recorded request".into(),
        };
        self.notice = Some(Notice {
            text: format!(
                "your unsent edit, as you left it (Ctrl+R in the editor starts over from {from})"
            ),
            error: false,
        });
        true
    }

    /// Closes the request editor. An edit not sent is kept (`e` opens it again); one in flight
    /// goes on, its answer coming as a variant. Back to the variants it was opened from.
    fn close_editor(&mut self, then: &str) {
        let Some(editor) = self.editor.take() else {
            return;
        };
        let from_variant = editor.from_variant;
        let key = editor.key;
        if editor.sending() {
            self.notice = Some(Notice {
                text: format!(
                    "the edited request is still out: its answer comes as a variant when it \
                     arrives (v lists it in flight, Esc there cancels it){then}"
                ),
                error: false,
            });
        } else if editor.edited() {
            self.keep_edit(editor);
            self.notice = Some(Notice {
                text: format!("your edit is kept, not sent: e opens it again{then}"),
                error: false,
            });
        }
        if let Some(shown) = from_variant
            && shown < self.variants.count(key)
        {
            self.variants_view = Some(VariantsPick {
                key,
                shown,
                scroll: Default::default(),
            });
        }
    }

    /// Keeps an unsent edit, for `e` to open again: one per request and what it was opened
    /// from (an edit of a variant does not replace the one of the recorded request), at most
    /// [`EDITS_KEPT`](crate::view::console::EDITS_KEPT).
    fn keep_edit(&mut self, editor: RequestEditor) {
        let (key, from_variant) = (editor.key, editor.from_variant);
        self.edits_kept
            .retain(|e| !(e.key == key && e.from_variant == from_variant));
        if self.edits_kept.len() == crate::view::console::EDITS_KEPT {
            self.edits_kept.remove(0);
        }
        self.edits_kept.push(editor);
    }

    /// A key while the request editor has the keys.
    pub(crate) fn editor_key(&mut self, key: &KeyEvent) -> Option<Action> {
        let editor = self.editor.as_mut()?;
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            // Esc while the edited request is out cancels it, as in the hand-call form; the
            // next Esc closes.
            KeyCode::Esc if editor.sending() => {
                if let Some(id) = editor.send_id {
                    self.sends.cancel(id);
                }
                let waited = editor.cancel().unwrap_or_default();
                self.notice = Some(Notice {
                    text: format!(
                        "{}; Ctrl+S sends it again, Esc closes",
                        cancelled_after(waited)
                    ),
                    error: false,
                });
                return None;
            }
            KeyCode::Esc => {
                self.close_editor("");
                return None;
            }
            KeyCode::Char('c') if ctrl => {
                if !editor.edited() && !editor.sending() {
                    return Some(Action::Quit);
                }
                self.close_editor("; Ctrl+C again quits");
                return None;
            }
            // The URL line keeps no history: undo and redo act on the body only, so there
            // only (on the URL they changed the body unseen).
            KeyCode::Char('z' | 'y') if ctrl && editor.on_url => {
                self.notice = Some(Notice {
                    text: "Ctrl+Z/Ctrl+Y undo and redo in the body (Tab goes back to it); the \
                           URL line keeps no history"
                        .into(),
                    error: false,
                });
                return None;
            }
            KeyCode::Char('z') if ctrl => {
                editor.body.undo();
            }
            KeyCode::Char('y') if ctrl => {
                editor.body.redo();
            }
            KeyCode::Char('r') if ctrl => {
                let what = match editor.from_variant {
                    Some(shown) => format!("variant {}", shown + 1),
                    None => "the recorded request".to_string(),
                };
                let put_back = editor.start_over();
                let text = match (put_back.body, put_back.url_typed) {
                    (false, None) => format!("nothing to start over: this is {what} as opened"),
                    (true, None) => {
                        format!("started over from {what}; Ctrl+Z twice brings your edit back")
                    }
                    (true, Some(typed)) => format!(
                        "started over from {what}; Ctrl+Z twice brings your edit of the body back \
                         (the URL you typed was {typed})"
                    ),
                    (false, Some(typed)) => {
                        format!("the URL is {what}'s again (you had typed {typed})")
                    }
                };
                self.notice = Some(Notice { text, error: false });
                return None;
            }
            KeyCode::Char('s') if ctrl => return self.send_edited(),
            KeyCode::F(5) => return self.send_edited(),
            KeyCode::Tab | KeyCode::BackTab => {
                editor.on_url = !editor.on_url;
                return None;
            }
            _ => {}
        }
        let undone = matches!(key.code, KeyCode::Char('z' | 'y') if ctrl);
        if editor.on_url {
            if editor.url.key(key) == Edit::Accept {
                editor.on_url = false;
            }
            return None;
        }
        if !undone && !crate::view::line_edit::textarea_key(&mut editor.body, key) {
            editor.body.input(*key);
        }
        // After a refused send, the complaint goes once the body is JSON again, typed or
        // undone so (checked only then, so typing in a good body costs no parse per key).
        if editor.error.is_some() && serde_json::from_str::<Value>(&editor.text()).is_ok() {
            editor.error = None;
        }
        None
    }

    fn send_edited(&mut self) -> Option<Action> {
        let editor = self.editor.as_mut()?;
        if editor.sending() {
            return None;
        }
        let text = editor.text();
        if let Err(e) = serde_json::from_str::<Value>(&text) {
            editor.not_json(
                &e,
                format!("the body is not JSON ({e}); fix it, then Ctrl+S"),
            );
            return None;
        }
        editor.error = None;
        let (key, url, from) = (editor.key, editor.url.text(), editor.from_variant);
        let (action, send) = self.resend_action(key, text, url, from);
        if let Some(editor) = self.editor.as_mut() {
            editor.sent(send);
        }
        Some(action)
    }

    /// The action sending `body` to `url` (the recorded URL: the session's model), listed as
    /// a send in flight; its id and token.
    fn resend_action(
        &mut self,
        key: RequestKey,
        body: String,
        url: String,
        from_variant: Option<usize>,
    ) -> (Action, (u64, tokio_util::sync::CancellationToken)) {
        let recorded = self
            .state
            .wire
            .calls_of(key.session, key.turn)
            .get(key.index)
            .and_then(|c| c.request().map(|q| q.url.clone()));
        let url = url.trim().to_string();
        let shown_url = if url.is_empty() {
            recorded.clone().unwrap_or_default()
        } else {
            url.clone()
        };
        let send = self.sends.start(key, body.clone(), shown_url, from_variant);
        let action = Action::Resend {
            id: send.0,
            key,
            body,
            url: (Some(&url) != recorded.as_ref() && !url.is_empty()).then_some(url),
        };
        (action, send)
    }

    /// What `$EDITOR` left: send it (or say why not).
    pub fn external_edit_done(
        &mut self,
        key: RequestKey,
        url: String,
        edited: Result<String, String>,
    ) -> Option<Action> {
        match edited {
            Ok(text) => match serde_json::from_str::<Value>(&text) {
                Ok(_) => {
                    self.notice = Some(Notice {
                        text: "sending the edited request… (Esc cancels it)".into(),
                        error: false,
                    });
                    let (action, (id, _)) = self.resend_action(key, text, url, None);
                    // No editor is open to show it going out: the variants show it, in flight,
                    // where Esc cancels it.
                    let place = self.sends.place(id).unwrap_or_default();
                    self.variants_view = Some(VariantsPick {
                        key,
                        shown: self.variants.count(key) + place,
                        scroll: Default::default(),
                    });
                    Some(action)
                }
                Err(e) => {
                    // Keep the edit: open it in the console's editor to fix.
                    let mut editor = RequestEditor::new(key, &text, &url);
                    editor.not_json(
                        &e,
                        format!("what $EDITOR saved is not JSON ({e}); fix it here"),
                    );
                    self.editor = Some(editor);
                    None
                }
            },
            Err(why) => {
                self.notice = Some(Notice {
                    text: why,
                    error: true,
                });
                None
            }
        }
    }

    /// Send `id`'s answer (or why it failed), from the task that sent it: its row in `v`
    /// becomes the variant. One cancelled meanwhile is no news: dropped.
    pub fn resend_ended(&mut self, id: u64, key: RequestKey, body: Value, answer: ResendAnswer) {
        // Which send in flight the variants show, by id: the list shifts as this one lands.
        let watching = self
            .variants_view
            .as_ref()
            .filter(|v| v.key == key)
            .and_then(|v| v.shown.checked_sub(self.variants.count(key)))
            .and_then(|i| self.sends.nth(key, i))
            .map(|s| s.id);
        if self.sends.end(id).is_none() {
            return;
        }
        self.variant_came(Some(id), key, body, answer);
        // Another send in flight stays shown (the notice says this one answered).
        if let (Some(other), Some(view)) = (
            watching.filter(|w| *w != id),
            self.variants_view.as_mut().filter(|v| v.key == key),
        ) && let Some(place) = self.sends.place(other)
        {
            view.shown = self.variants.count(key) + place;
        }
    }

    /// A resent request's answer: kept as a variant and set beside the recorded one.
    pub fn resend_done(&mut self, key: RequestKey, body: Value, answer: ResendAnswer) {
        self.variant_came(None, key, body, answer);
    }

    /// A variant of `key` came back (from send `id`, when known): kept, and shown unless an
    /// editor is open; the editor that sent it closes.
    fn variant_came(
        &mut self,
        id: Option<u64>,
        key: RequestKey,
        body: Value,
        answer: ResendAnswer,
    ) {
        let failed = answer.error.clone();
        let shown = self.variants.add(key, body, answer);
        if self.editor.as_ref().is_some_and(|e| match id {
            Some(id) => e.send_id == Some(id),
            None => e.key == key && e.sending(),
        }) {
            self.editor = None;
        }
        // An editor the person opened meanwhile stays on top: the variants wait for `v`.
        let then = if self.editor.is_some() {
            "; v in the turn view shows it"
        } else {
            self.variants_view = Some(VariantsPick {
                key,
                shown,
                scroll: Default::default(),
            });
            ""
        };
        self.notice = Some(match failed {
            Some(e) => Notice {
                text: format!("variant {} failed: {e}{then}", shown + 1),
                error: true,
            },
            None => Notice {
                text: format!(
                    "variant {} answered; the session's history is unchanged{then}",
                    shown + 1
                ),
                error: false,
            },
        });
    }

    /// `v` in the turn view: the picked request's variants beside its recorded answer.
    pub(crate) fn open_variants(&mut self) {
        let Some(pick) = self.turn_view.as_ref() else {
            return;
        };
        let key = pick.request_key();
        // Its variants, then its sends still in flight.
        let n = self.variants.count(key) + self.sends.of(key).count();
        if n == 0 {
            self.notice = Some(Notice {
                text: if self.state.header.source.is_attached() {
                    // Attached, `e` is refused: no variant can be made here.
                    "no variants here: this console does not run the bot, so it sends none of its \
                     requests; c copies the request as curl"
                        .into()
                } else {
                    "no variant of this request yet: e edits it and sends it again".into()
                },
                error: false,
            });
            return;
        }
        self.variants_view = Some(VariantsPick {
            key,
            shown: n - 1,
            scroll: Default::default(),
        });
    }

    /// A key while the variants have the keys.
    pub(crate) fn variants_key(&mut self, key: &KeyEvent) -> Option<Action> {
        // A send still in flight shown: Esc cancels it (as in the editor); what needs its
        // answer waits for it.
        let in_flight = self.shown_send().map(|s| s.id);
        let view = self.variants_view.as_mut()?;
        let n = self.variants.count(view.key) + self.sends.of(view.key).count();
        if let Some(id) = in_flight {
            match key.code {
                KeyCode::Esc => {
                    self.cancel_send_shown(id);
                    return None;
                }
                KeyCode::Char('e' | 't' | 'c' | 'J') => {
                    self.notice = Some(Notice {
                        text: format!(
                            "variant {} is still in flight: wait for its answer, or Esc cancels it",
                            view.shown + 1
                        ),
                        error: true,
                    });
                    return None;
                }
                _ => {}
            }
        }
        match key.code {
            KeyCode::Esc | KeyCode::Char('q') => self.variants_view = None,
            KeyCode::Left | KeyCode::Char('h') => {
                view.shown = view.shown.saturating_sub(1);
                view.scroll.set(0);
            }
            KeyCode::Right | KeyCode::Char('l') => {
                view.shown = (view.shown + 1).min(n.saturating_sub(1));
                view.scroll.set(0);
            }
            KeyCode::Char('e') => {
                let key = view.key;
                let variant = self.variants.get(key, view.shown)?;
                let text = serde_json::to_string_pretty(&variant.body).unwrap_or_default();
                let url = variant.answer.url.clone();
                let shown = view.shown;
                self.variants_view = None;
                if self.reopen_kept_edit(key, Some(shown)) {
                    return None;
                }
                let mut editor = RequestEditor::new(key, &text, &url);
                editor.from_variant = Some(shown);
                self.editor = Some(editor);
            }
            KeyCode::Char('t') => return self.variant_test_case(),
            KeyCode::Char('c' | 'J') => return self.copy_variant(key.code == KeyCode::Char('J')),
            _ => match keys::command(key) {
                Some(Command::Up) => scroll_back(&view.scroll, -1),
                Some(Command::Down) => scroll_back(&view.scroll, 1),
                Some(Command::PageUp) => scroll_back(&view.scroll, -PAGE),
                Some(Command::PageDown) => scroll_back(&view.scroll, PAGE),
                Some(Command::Help) => self.help.open = true,
                _ => {}
            },
        }
        None
    }

    /// `Esc` over a send in flight in the variants: cancelled (its connection closed, no
    /// variant comes), its edit kept for `e`; the view shows what is left of the request's
    /// variants, or closes when nothing is.
    fn cancel_send_shown(&mut self, id: u64) {
        let Some(gone) = self.sends.cancel(id) else {
            return;
        };
        let key = gone.key;
        // What the edit was opened from, for Ctrl+R: the variant, or the recorded request.
        let opened = match gone.from_variant {
            Some(v) => self.variants.get(key, v).map(|v| {
                (
                    serde_json::to_string_pretty(&v.body).unwrap_or_default(),
                    v.answer.url.clone(),
                )
            }),
            None => {
                let calls = self.state.wire.calls_of(key.session, key.turn);
                calls.get(key.index).and_then(|call| {
                    Some((
                        crate::draw::panes::model_request::request_json(self, call)?,
                        call.request()?.url.clone(),
                    ))
                })
            }
        }
        .unwrap_or_else(|| (gone.body.clone(), gone.url.clone()));
        let mut editor = RequestEditor::of_edit(key, (&opened.0, &opened.1), &gone.body, &gone.url);
        editor.from_variant = gone.from_variant;
        self.keep_edit(editor);
        self.notice = Some(Notice {
            text: format!(
                "{}; your edit is kept: e on the request opens it again",
                cancelled_after(gone.at.elapsed())
            ),
            error: false,
        });
        let n = self.variants.count(key) + self.sends.of(key).count();
        match self.variants_view.as_mut() {
            Some(view) if n > 0 => {
                view.shown = view.shown.min(n - 1);
                view.scroll.set(0);
            }
            _ => self.variants_view = None,
        }
    }

    /// `c` / `J` over the variants: the shown variant (its edited body, to its URL) as curl or
    /// JSON, as the turn view copies the recorded request.
    fn copy_variant(&mut self, json: bool) -> Option<Action> {
        let view = self.variants_view.as_ref()?;
        let variant = self.variants.get(view.key, view.shown)?;
        let what = format!(
            "variant {} of model request {} of turn {} as {}",
            view.shown + 1,
            view.key.index + 1,
            view.key.turn,
            if json { "JSON" } else { "curl" }
        );
        let text = if json {
            serde_json::to_string_pretty(&variant.body).unwrap_or_default()
        } else {
            let calls = self.state.wire.calls_of(view.key.session, view.key.turn);
            let Some(wire) = calls.get(view.key.index).and_then(|c| c.request()) else {
                self.notice = Some(Notice {
                    text: format!("{what}: its recorded request is gone (the wire record's bound)"),
                    error: true,
                });
                return None;
            };
            turnscope::observe::rebuild::curl_of(wire, &variant.answer.url, &variant.body)
        };
        Some(Action::Copy { what, text })
    }

    /// `t` over the variants: the shown variant as a `turnscope test` case.
    fn variant_test_case(&mut self) -> Option<Action> {
        use turnscope::conversation_test::TestFile;
        use turnscope::conversation_test::write::{case_from_request, render};
        let view = self.variants_view.as_ref()?;
        let variant = self.variants.get(view.key, view.shown)?;
        let messages: Vec<Value> = variant.body["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let calls: Vec<(String, String)> = variant
            .answer
            .tool_calls
            .iter()
            .map(|c| (c.name.clone(), c.arguments.clone()))
            .collect();
        let name = format!(
            "session {} turn {} request {} variant {}",
            view.key.session,
            view.key.turn,
            view.key.index + 1,
            view.shown + 1
        );
        let system = messages
            .iter()
            .find(|m| m["role"] == "system")
            .and_then(|m| m["content"].as_str())
            .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "));
        let mut origin = format!(
            "turnscope: {name}, resent from the console.\n# The variant was sent with this system prompt; the bot under test needs it too ([bot] system_prompt):\n#   {}",
            system.unwrap_or_else(|| "(none)".into())
        );
        // Edits beside the messages (sampling, limits) are the model's settings, not the
        // case's: said, so the test is not taken for the variant itself.
        let calls_of = self.state.wire.calls_of(view.key.session, view.key.turn);
        if let Some(q) = calls_of.get(view.key.index).and_then(|c| c.request()) {
            // Answered by another model server: the case's expectations are that one's.
            if variant.answer.url != q.url {
                origin.push_str(&format!(
                    "\n# It was sent to {} instead of the session's model ({}): its answer is that server's; point the bot under test there ([model] url) for the case to hold",
                    variant.answer.url, q.url
                ));
            }
            let recorded = self.state.wire.book.whole(view.key.session, q).body(q);
            let settings: Vec<String> =
                crate::state::variants::changed_paths(&recorded, &variant.body, 256)
                    .into_iter()
                    .filter(|p| !p.starts_with("/messages"))
                    .take(8)
                    .map(|p| {
                        let value = variant.body.pointer(&p).map_or_else(
                            || "(removed)".to_string(),
                            std::string::ToString::to_string,
                        );
                        format!("{p} = {value}")
                    })
                    .collect();
            if !settings.is_empty() {
                origin.push_str(&format!(
                    "\n# It was also sent with edits a case cannot hold; set them where the bot under test gets its model ([model] in its config):\n#   {}",
                    settings.join(", ")
                ));
            }
        }
        let made =
            case_from_request(&name, &messages, &variant.answer.text, &calls).and_then(|case| {
                render(
                    &TestFile {
                        cases: vec![case],
                        ..TestFile::default()
                    },
                    &origin,
                )
            });
        match made {
            Ok(text) => Some(Action::ExportTest {
                session: view.key.session,
                text,
            }),
            Err(e) => {
                self.notice = Some(Notice {
                    text: e,
                    error: true,
                });
                None
            }
        }
    }
}

/// The notice of an edited request cancelled in flight, after `waited`.
fn cancelled_after(waited: std::time::Duration) -> String {
    format!(
        "the edited request was cancelled after {:.1} s: it was dropped (its connection closed) \
         and no variant comes",
        waited.as_secs_f64()
    )
}
