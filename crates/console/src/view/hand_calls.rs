//! The Tools pane's workbench: the hand calls made from the console (newest first, each one
//! re-runnable and editable), the calls saved in the project (`.turnscope/calls.json`, read at
//! start, and read again and merged with when a call is saved or forgotten, since the person
//! may edit it meanwhile), and what the pane shows (a tool's detail, its form, or the list of
//! calls).
//!
//! Bounded: [`CALLS_KEPT`] calls, each result's text cut to [`RESULT_KEPT`] bytes; at most
//! [`SAVED_KEPT`] saved calls.

use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use turnscope::tools::hand::HandResult;

use super::form::Form;
use super::nav::{Follow, ListNav};

/// Hand calls kept in the list (the oldest unsaved one goes first).
pub const CALLS_KEPT: usize = 50;
/// Bytes of a result's text and structured content kept per call.
pub const RESULT_KEPT: usize = 64 * 1024;
/// Saved calls kept in the project's file.
pub const SAVED_KEPT: usize = 200;
/// Forms closed with what was typed in them, kept to open again (one per tool).
pub const DRAFTS_KEPT: usize = 32;
/// Bytes of typed text (and schemas) the kept drafts may hold in all; the oldest go first.
pub const DRAFT_BYTES: usize = 512 * 1024;
/// Where saved calls live, relative to the directory the console started in.
pub const SAVED_FILE: &str = ".turnscope/calls.json";

/// What a finished call showed.
#[derive(Debug, Clone, PartialEq)]
pub struct Shown {
    /// `isError`.
    pub is_error: bool,
    /// Content blocks (MCP JSON), texts cut to [`RESULT_KEPT`].
    pub content: Vec<Value>,
    /// `structuredContent`, when small enough to keep.
    pub structured: Option<Value>,
    /// The result's size: the bytes of its text (every text block, other blocks described:
    /// what a model reads), as the transcript's tool rows measure a result.
    pub bytes: usize,
    /// The time taken.
    pub duration: Duration,
    /// Set when the tool never answered: `content` is then what the model would have read
    /// instead, written by turnscope.
    pub unanswered: Option<turnscope::tools::Unanswered>,
}

impl Shown {
    /// What a [`HandResult`] shows, bounded.
    pub fn of(result: &HandResult) -> Shown {
        let content = result
            .content()
            .into_iter()
            .map(|mut block| {
                if let Some(Value::String(text)) = block.get_mut("text") {
                    cut(text);
                }
                if let Some(Value::String(data)) = block.get_mut("data") {
                    let len = data.len();
                    *data = format!("({len} bytes of base64)");
                }
                block
            })
            .collect();
        let structured = result
            .outcome
            .structured
            .clone()
            .filter(|s| s.to_string().len() <= RESULT_KEPT);
        Shown {
            is_error: result.outcome.is_error,
            content,
            structured,
            bytes: result.bytes(),
            duration: result.duration,
            unanswered: result.outcome.unanswered.as_deref().cloned(),
        }
    }
}

/// `text` cut to [`RESULT_KEPT`] bytes on a character boundary, marked.
fn cut(text: &mut String) {
    if text.len() <= RESULT_KEPT {
        return;
    }
    let mut end = RESULT_KEPT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let total = text.len();
    text.truncate(end);
    text.push_str(&format!("… (cut: {total} bytes in all)"));
}

/// How a call ended, or that it has not yet.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Sent at this instant, no answer yet.
    InFlight(Instant),
    /// Cancelled by the person after this long (its answer, if one comes, is dropped).
    Cancelled(Duration),
    /// Not sent: why (an unknown tool, arguments the schema refuses).
    Refused(String),
    /// Answered.
    Done(Shown),
}

/// One call in the list.
#[derive(Debug, Clone, PartialEq)]
pub struct HandCall {
    /// The tool.
    pub tool: String,
    /// The arguments sent.
    pub arguments: Value,
    /// How it went (`None` for a saved call not run since the console started).
    pub outcome: Option<Outcome>,
    /// Whether it is saved in the project.
    pub saved: bool,
    /// A number for the loop to match the answer with.
    pub id: u64,
}

/// A saved call as the project's file holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedCall {
    /// The tool.
    pub tool: String,
    /// The arguments (`{}` when the file leaves them out, as a call of a tool that takes
    /// none may).
    #[serde(default = "no_arguments")]
    pub arguments: Value,
}

fn no_arguments() -> Value {
    Value::Object(serde_json::Map::new())
}

impl SavedCall {
    /// Call `call` as the file holds it.
    fn of(call: &HandCall) -> SavedCall {
        SavedCall {
            tool: call.tool.clone(),
            arguments: call.arguments.clone(),
        }
    }
}

/// The project's file read from `text`.
///
/// # Errors
/// The text is not a saved-calls file; the message says what is expected.
pub fn parse_saved(text: &str) -> Result<SavedFile, String> {
    serde_json::from_str(text).map_err(|e| {
        format!(
            "{SAVED_FILE} is not a saved-calls file ({e}); expected {{\"calls\": [{{\"tool\": \"name\", \"arguments\": {{…}}}}]}}"
        )
    })
}

/// What [`HandCalls::merge_saved`] made of the file.
#[derive(Debug, Clone, PartialEq)]
pub struct Merged {
    /// The file to write.
    pub text: String,
    /// Calls the file held that the list did not (added to it by hand meanwhile).
    pub taken_in: usize,
    /// Calls the list had saved that the file no longer holds (taken out by hand meanwhile).
    pub gone: usize,
}

/// The project's file: `{"calls": [{"tool": …, "arguments": {…}}, …]}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedFile {
    /// The calls, oldest first.
    pub calls: Vec<SavedCall>,
}

/// What the Tools pane's right side shows.
#[derive(Debug, Default)]
pub enum Mode {
    /// The selected tool's schema and notes.
    #[default]
    Detail,
    /// A form to call a tool.
    Form(Box<Form>),
    /// The hand calls, saved ones included.
    Calls,
}

/// The hand calls and the pane's mode.
#[derive(Debug, Default)]
pub struct HandCalls {
    /// Newest first.
    pub calls: VecDeque<HandCall>,
    /// The call under the cursor in the list.
    pub nav: ListNav,
    /// What the list's drawing keeps in sight: the selected call after ↑↓, its answer after
    /// it is run again, nothing after PgUp/PgDn or the wheel (the scroll is the pane's).
    pub follow: Cell<Follow>,
    /// What the pane shows.
    pub mode: Mode,
    /// The id of the call the form last sent (its answer shows under the form).
    pub last_sent: Option<u64>,
    /// Why the project's file did not load, while it does not: the file is the person's, so
    /// nothing is written over it until it loads (`s` reads it again first).
    pub file_refused: Option<String>,
    /// How to cancel each call in flight (the task making it stops and drops the request:
    /// an MCP server is sent `notifications/cancelled`).
    cancels: HashMap<u64, CancellationToken>,
    /// Forms closed (`Esc`) with what was typed, newest first, each with the input schema it
    /// was made from: a tool's form opens as it was left while its schema stays the same.
    drafts: VecDeque<(Value, Box<Form>)>,
    next_id: u64,
}

impl HandCalls {
    /// Takes in the project's saved calls (the file's text), after any already listed. A file
    /// that does not load is remembered in [`HandCalls::file_refused`] until one does.
    ///
    /// # Errors
    /// The text is not a saved-calls file; the message says what is expected.
    pub fn load(&mut self, text: &str) -> Result<usize, String> {
        let file = parse_saved(text).inspect_err(|why| {
            self.file_refused = Some(why.clone());
        })?;
        self.file_refused = None;
        let n = file.calls.len();
        for saved in file.calls.into_iter().rev().take(SAVED_KEPT) {
            let id = self.id();
            self.calls.push_back(HandCall {
                tool: saved.tool,
                arguments: saved.arguments,
                outcome: None,
                saved: true,
                id,
            });
        }
        Ok(n)
    }

    /// The project's file to write after call `toggled` was saved or forgotten, and the list
    /// brought in line with it. `file` is the file as it is now (`None`: there is none): the
    /// person may have edited it since it was read, so it is the base, and only the toggle is
    /// applied to it (a call saved is added unless the file holds it already, one forgotten
    /// is taken out); its calls the list lacks are listed (saved), and the list's saved calls
    /// it no longer holds are saved no more (listed only while they ran here). No file: the
    /// list's saved calls are written.
    ///
    /// # Errors
    /// Saving would put more than [`SAVED_KEPT`] calls in the file (the toggle is taken back).
    pub fn merge_saved(&mut self, file: Option<SavedFile>, toggled: u64) -> Result<Merged, String> {
        let Some(file) = file else {
            return Ok(Merged {
                text: self.saved_file(),
                taken_in: 0,
                gone: 0,
            });
        };
        let Some(call) = self.get(toggled).cloned() else {
            return Err(format!(
                "the call to save is no longer listed (over {CALLS_KEPT})"
            ));
        };
        let same = |a: &SavedCall, b: &HandCall| a.tool == b.tool && a.arguments == b.arguments;
        let mut calls = file.calls;
        if call.saved {
            let in_file = calls.iter().filter(|f| same(f, &call)).count();
            let listed = self
                .calls
                .iter()
                .filter(|c| c.saved && c.id != toggled && same(&SavedCall::of(c), &call))
                .count();
            if in_file <= listed {
                if calls.len() >= SAVED_KEPT {
                    self.untoggle_saved(toggled);
                    return Err(format!(
                        "{SAVED_FILE} holds {} calls already (at most {SAVED_KEPT}); forget one \
                         (s) or take one out of the file first",
                        calls.len()
                    ));
                }
                calls.push(SavedCall::of(&call));
            }
        } else if let Some(i) = calls.iter().rposition(|f| same(f, &call)) {
            calls.remove(i);
        }
        // The list in line with the file: each of its calls matched to a saved row, or listed.
        let kept = self.selected().map(|c| c.id);
        let mut matched: Vec<u64> = Vec::new();
        let mut taken_in = 0;
        for entry in calls.iter().rev() {
            let row = self
                .calls
                .iter()
                .find(|c| c.saved && !matched.contains(&c.id) && same(entry, c))
                .map(|c| c.id);
            match row {
                Some(id) => matched.push(id),
                None => {
                    let id = self.id();
                    self.calls.push_back(HandCall {
                        tool: entry.tool.clone(),
                        arguments: entry.arguments.clone(),
                        outcome: None,
                        saved: true,
                        id,
                    });
                    matched.push(id);
                    taken_in += 1;
                }
            }
        }
        let mut gone = 0;
        for c in self.calls.iter_mut() {
            if c.saved && !matched.contains(&c.id) {
                c.saved = false;
                gone += 1;
            }
        }
        // A saved call the file no longer holds, never run here, was listed for the file only.
        self.calls
            .retain(|c| c.saved || c.outcome.is_some() || c.id == toggled);
        self.select(kept);
        let text = serde_json::to_string_pretty(&SavedFile { calls }).unwrap_or_default() + "\n";
        Ok(Merged {
            text,
            taken_in,
            gone,
        })
    }

    /// The saved calls as the project's file, oldest first.
    pub fn saved_file(&self) -> String {
        let file = SavedFile {
            calls: self
                .calls
                .iter()
                .rev()
                .filter(|c| c.saved)
                .map(|c| SavedCall {
                    tool: c.tool.clone(),
                    arguments: c.arguments.clone(),
                })
                .collect(),
        };
        serde_json::to_string_pretty(&file).unwrap_or_default() + "\n"
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// A call sent now: listed first, in flight; returns its id. The list's selection stays
    /// on the call it was on.
    pub fn started(&mut self, tool: &str, arguments: Value) -> u64 {
        let kept = self.selected().map(|c| c.id);
        let id = self.id();
        self.calls.push_front(HandCall {
            tool: tool.to_string(),
            arguments,
            outcome: Some(Outcome::InFlight(Instant::now())),
            saved: false,
            id,
        });
        // The oldest unsaved call goes first; saved ones stay (bounded by SAVED_KEPT).
        while self.calls.len() > CALLS_KEPT + SAVED_KEPT
            || self.calls.iter().filter(|c| !c.saved).count() > CALLS_KEPT
        {
            match self.calls.iter().rposition(|c| !c.saved) {
                Some(i) => {
                    if let Some(gone) = self.calls.remove(i) {
                        self.cancels.remove(&gone.id);
                    }
                }
                None => break,
            }
        }
        self.select(kept);
        id
    }

    /// Puts the list's cursor on call `id` (by identity: rows move as calls come and go);
    /// one no longer listed leaves it on the same row, within the list.
    pub fn select(&mut self, id: Option<u64>) {
        if let Some(i) = id.and_then(|id| self.calls.iter().position(|c| c.id == id)) {
            self.nav.cursor = i;
        }
        self.nav.step(0, self.calls.len());
    }

    /// A saved call run again: its own row goes in flight (a saved call keeps one row, showing
    /// its latest run); returns its id.
    pub fn rerun_saved(&mut self, id: u64) -> Option<u64> {
        let call = self.calls.iter_mut().find(|c| c.id == id && c.saved)?;
        call.outcome = Some(Outcome::InFlight(Instant::now()));
        Some(id)
    }

    /// The token the task making call `id` stops on.
    pub fn cancel_token(&mut self, id: u64) -> CancellationToken {
        self.cancels.entry(id).or_default().clone()
    }

    /// Cancels call `id` if it is in flight: how long it had run.
    pub fn cancel(&mut self, id: u64) -> Option<Duration> {
        let call = self.calls.iter_mut().find(|c| c.id == id)?;
        let Some(Outcome::InFlight(at)) = call.outcome else {
            return None;
        };
        let ran = at.elapsed();
        call.outcome = Some(Outcome::Cancelled(ran));
        if let Some(token) = self.cancels.remove(&id) {
            token.cancel();
        }
        Some(ran)
    }

    /// Whether call `id` is in flight.
    pub fn in_flight(&self, id: u64) -> bool {
        self.get(id)
            .is_some_and(|c| matches!(c.outcome, Some(Outcome::InFlight(_))))
    }

    /// The answer (or refusal) of call `id`.
    pub fn finished(&mut self, id: u64, outcome: Outcome) {
        self.cancels.remove(&id);
        if let Some(c) = self.calls.iter_mut().find(|c| c.id == id)
            && !matches!(c.outcome, Some(Outcome::Cancelled(_)))
        {
            c.outcome = Some(outcome);
        }
    }

    /// The call `id`.
    pub fn get(&self, id: u64) -> Option<&HandCall> {
        self.calls.iter().find(|c| c.id == id)
    }

    /// The call under the list's cursor.
    pub fn selected(&self) -> Option<&HandCall> {
        self.calls.get(self.nav.cursor)
    }

    /// Saves (or forgets) the call under the cursor: its id and whether it is saved now.
    pub fn toggle_saved(&mut self) -> Option<(u64, bool)> {
        let saved = self.calls.iter().filter(|c| c.saved).count();
        let call = self.calls.get_mut(self.nav.cursor)?;
        if !call.saved && saved >= SAVED_KEPT {
            return None;
        }
        call.saved = !call.saved;
        Some((call.id, call.saved))
    }

    /// Keeps a closed form to open again (its tool's earlier draft goes).
    pub fn keep_draft(&mut self, schema: &Value, form: Box<Form>) {
        self.drafts.retain(|(_, f)| f.tool != form.tool);
        self.drafts.push_front((schema.clone(), form));
        self.drafts.truncate(DRAFTS_KEPT);
        // A pasted text can be long: the newest draft stays, older ones go past the bound.
        let size =
            |(schema, form): &(Value, Box<Form>)| schema.to_string().len() + form.typed_bytes();
        let mut total: usize = self.drafts.iter().map(size).sum();
        while total > DRAFT_BYTES && self.drafts.len() > 1 {
            if let Some(gone) = self.drafts.pop_back() {
                total -= size(&gone);
            }
        }
    }

    /// The draft of `tool`'s form, taken out, when one was kept for this same schema.
    pub fn take_draft(&mut self, tool: &str, schema: &Value) -> Option<Box<Form>> {
        let at = self.drafts.iter().position(|(_, f)| f.tool == tool)?;
        let (kept_schema, form) = self.drafts.remove(at)?;
        (kept_schema == *schema).then_some(form)
    }

    /// Takes back a [`HandCalls::toggle_saved`] of call `id` that could not be written.
    pub fn untoggle_saved(&mut self, id: u64) {
        if let Some(call) = self.calls.iter_mut().find(|c| c.id == id) {
            call.saved = !call.saved;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A hand call's size is measured as the transcript measures a tool's result: the bytes
    /// of its text, not of the serialized content (echo's "hi" was 2 B in the transcript and
    /// 37 B by hand: tour F3).
    #[test]
    fn a_results_size_is_its_texts_as_in_the_transcript() {
        let result = HandResult {
            tool: "echo".into(),
            source: "builtin".into(),
            arguments: json!({"text": "hi"}),
            outcome: turnscope::tools::ToolOutcome {
                structured: Some(json!({"text": "hi"})),
                ..turnscope::tools::ToolOutcome::ok("hi")
            },
            duration: Duration::from_millis(1),
            unchecked: None,
        };
        assert_eq!(Shown::of(&result).bytes, 2);
    }

    #[test]
    fn saved_calls_round_trip_through_the_file_and_the_list_is_bounded() {
        let mut calls = HandCalls::default();
        let text = r#"{"calls": [{"tool": "echo", "arguments": {"text": "a"}}, {"tool": "add", "arguments": {"a": 1, "b": 2}}]}"#;
        assert_eq!(calls.load(text), Ok(2));
        assert_eq!(calls.calls[0].tool, "add", "newest saved first");
        let back: SavedFile = serde_json::from_str(&calls.saved_file()).unwrap();
        assert_eq!(back.calls[0].tool, "echo");
        for i in 0..CALLS_KEPT + 5 {
            calls.started("echo", json!({"text": i.to_string()}));
        }
        assert_eq!(calls.calls.iter().filter(|c| !c.saved).count(), CALLS_KEPT);
        assert_eq!(calls.calls.iter().filter(|c| c.saved).count(), 2);
        assert!(calls.load("[1]").unwrap_err().contains("saved-calls file"));
    }

    #[test]
    fn drafts_are_bounded_in_bytes_the_newest_kept() {
        let schema = json!({"type": "object", "properties": {"t": {"type": "string"}}});
        let mut calls = HandCalls::default();
        let long = "x".repeat(DRAFT_BYTES / 3);
        for tool in ["a", "b", "c", "d"] {
            let form = Form::new(tool, &schema, Some(&json!({"t": long})));
            calls.keep_draft(&schema, Box::new(form));
        }
        assert!(calls.take_draft("a", &schema).is_none(), "the oldest went");
        assert!(calls.take_draft("d", &schema).is_some(), "the newest stays");
        let huge = Form::new(
            "e",
            &schema,
            Some(&json!({"t": "y".repeat(2 * DRAFT_BYTES)})),
        );
        calls.keep_draft(&schema, Box::new(huge));
        assert!(
            calls.take_draft("e", &schema).is_some(),
            "even over the bound alone"
        );
    }
}
