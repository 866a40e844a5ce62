//! The loop's side of the workbench: hand calls and resent model requests run in tasks of their
//! own (the loop never waits on a tool or a model), saved calls read from and written to the
//! project's `.turnscope/calls.json`, and a request edited in `$EDITOR` with the terminal handed
//! over meanwhile ([`Input`] lets go of it, so the editor gets every key).

use std::io;
use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll};

use crossterm::event::{Event as TermEvent, EventStream};
use futures::Stream;
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;
use turnscope::model::resend::{ResendAnswer, resend};
use turnscope::sessions::Sessions;
use turnscope::tools::hand::{self, HandResult};

use crate::input::actions::Action;
use crate::state::variants::RequestKey;
use crate::view::console::{Console, Notice};
use crate::view::hand_calls::{SAVED_FILE, parse_saved};

/// How a hand call ended: (call id, the result or why it was not made).
pub type HandDone = (u64, Result<HandResult, String>);
/// How a resend ended: (send id, request, body sent, answer).
pub type ResendDone = (u64, RequestKey, Value, ResendAnswer);

/// Terminal input the loop reads, able to let go of the terminal while another program (the
/// person's `$EDITOR`) uses it.
pub trait Input: Stream<Item = io::Result<TermEvent>> + Unpin {
    /// Stops reading the terminal (nothing may read it while the editor runs).
    fn release(&mut self) {}
    /// Reads the terminal again.
    fn reclaim(&mut self) {}
}

/// Any stream of terminal events (tests, replay's keys, the bench): nothing to let go of.
pub struct Fixed<S>(pub S);

impl<S: Stream<Item = io::Result<TermEvent>> + Unpin> Stream for Fixed<S> {
    type Item = io::Result<TermEvent>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Pin::new(&mut self.0).poll_next(cx)
    }
}

impl<S: Stream<Item = io::Result<TermEvent>> + Unpin> Input for Fixed<S> {}

/// The real terminal. Released, its crossterm reader is dropped: that stops crossterm's
/// background thread, which would otherwise race the editor for every key typed.
#[derive(Default)]
pub struct Tty(Option<EventStream>);

impl Tty {
    /// Reading the terminal.
    pub fn new() -> Self {
        Tty(Some(EventStream::new()))
    }
}

impl Stream for Tty {
    type Item = io::Result<TermEvent>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match self.0.as_mut() {
            Some(events) => Pin::new(events).poll_next(cx),
            None => Poll::Pending,
        }
    }
}

impl Input for Tty {
    fn release(&mut self) {
        self.0 = None;
    }
    fn reclaim(&mut self) {
        if self.0.is_none() {
            self.0 = Some(EventStream::new());
        }
    }
}

/// Does the workbench's actions (hand calls, resends, saving calls) against the bot this
/// process runs; any other action is handed back for the loop's `perform`.
pub fn perform(
    action: Action,
    console: &mut Console,
    sessions: Option<&Sessions>,
    (hand, resend): (&UnboundedSender<HandDone>, &UnboundedSender<ResendDone>),
) -> Option<Action> {
    match action {
        Action::SaveCalls { toggled } => {
            let dir = std::env::current_dir().unwrap_or_else(|_| ".".into());
            save_calls(console, &dir, toggled);
        }
        Action::HandCall {
            id,
            tool,
            arguments,
        } => match sessions {
            Some(sessions) => {
                let stop = console.tools.hand.cancel_token(id);
                spawn_hand_call(sessions, (id, stop), tool, arguments, hand)
            }
            None => refuse_here(console, id),
        },
        Action::Resend { id, key, body, url } => match sessions {
            Some(sessions) => {
                // Listed in flight when it was asked for: Esc cancels it in the editor that
                // sent it, or over it in `v` (`$EDITOR`'s, or an editor closed meanwhile).
                let stop = console.sends.token(id).unwrap_or_default();
                spawn_resend(sessions, (id, key, stop), body, url, resend)
            }
            None => refuse_resend(console, id),
        },
        other => return Some(other),
    }
    None
}

/// A console that only watches whisker has no tool to call (an attached bot's own
/// `tools/list` is called over MCP: `run::attach`): say so, and settle the call waiting.
pub fn refuse_here(console: &mut Console, hand_call: u64) {
    console.hand_call_done(
        hand_call,
        Err("watching only (--whisker without a bot URL): no tool to call".into()),
    );
}

/// A console that runs no bot (attached to another one) sends no model request of it (its
/// model is called where it runs): say so, and take send `id` off the list.
pub fn refuse_resend(console: &mut Console, id: u64) {
    let why = "this console does not run the bot (it is attached to one): its model is called \
               where it runs; resend the request from its own console there";
    console.sends.end(id);
    if let Some(editor) = console.editor.as_mut() {
        editor.cancel();
        editor.error = Some(why.into());
    }
}

/// Reads the project's saved calls into the console at start; a file that is not one is left
/// as it is, and said.
pub fn load_saved(console: &mut Console) {
    let dir = std::env::current_dir().unwrap_or_else(|_| ".".into());
    if let Err(why) = take_in_saved(console, &dir) {
        console.notice = Some(Notice {
            text: format!(
                "{why}; it was left as it is, and saving a call (s) will not write over it \
                 until it loads"
            ),
            error: true,
        });
    }
}

/// Reads `dir`'s saved-calls file into the list (nothing when there is none).
///
/// # Errors
/// It cannot be read or is not a saved-calls file (remembered as
/// [`HandCalls::file_refused`](crate::view::hand_calls::HandCalls::file_refused)).
pub(crate) fn take_in_saved(console: &mut Console, dir: &Path) -> Result<(), String> {
    let hand = &mut console.tools.hand;
    match read_saved(dir) {
        None => {
            hand.file_refused = None;
            Ok(())
        }
        Some(Ok(text)) => hand.load(&text).map(|_| ()),
        Some(Err(e)) => {
            let why = format!("cannot read {SAVED_FILE}: {e}");
            hand.file_refused = Some(why.clone());
            Err(why)
        }
    }
}

/// Writes the saved calls after call `toggled` was saved or forgotten. The file is read again
/// first, since the person may have edited it while the console ran: its calls are the base,
/// the toggle is applied to them, and the list takes in what was added there and lets go of
/// what was taken out ([`HandCalls::merge_saved`](crate::view::hand_calls::HandCalls::merge_saved)).
/// One that does not load (or cannot be read) is left as it is and the toggle taken back (a
/// person's hand-edited file is never written over); gone, the file is ours to write.
pub fn save_calls(console: &mut Console, dir: &Path, toggled: u64) {
    let hand = &mut console.tools.hand;
    let now = match read_saved(dir) {
        None => Ok(None),
        Some(Ok(text)) => parse_saved(&text).map(Some),
        Some(Err(e)) => Err(format!("cannot read {SAVED_FILE}: {e}")),
    };
    let file = match now {
        Ok(file) => {
            hand.file_refused = None;
            file
        }
        Err(why) => {
            hand.untoggle_saved(toggled);
            hand.file_refused = Some(why.clone());
            console.notice = Some(Notice {
                text: format!(
                    "not saved: {why}; it was left as it is. Fix it (or move it away) and press s \
                     again"
                ),
                error: true,
            });
            return;
        }
    };
    let merged = match hand.merge_saved(file, toggled) {
        Ok(merged) => merged,
        Err(why) => {
            console.notice = Some(Notice {
                text: format!("not saved: {why}"),
                error: true,
            });
            return;
        }
    };
    if let Err(e) = write_saved(dir, &merged.text) {
        console.tools.hand.untoggle_saved(toggled);
        console.notice = Some(Notice {
            text: format!("not saved: {e}; the call stays listed here"),
            error: true,
        });
        return;
    }
    if merged.taken_in + merged.gone > 0 {
        let saved = console.tools.hand.get(toggled).is_some_and(|c| c.saved);
        let mut edits = Vec::new();
        if merged.taken_in > 0 {
            edits.push(format!(
                "{} added there {} listed (★)",
                calls(merged.taken_in),
                if merged.taken_in == 1 { "is" } else { "are" }
            ));
        }
        if merged.gone > 0 {
            edits.push(format!(
                "{} taken out there {} no longer saved",
                calls(merged.gone),
                if merged.gone == 1 { "is" } else { "are" }
            ));
        }
        console.notice = Some(Notice {
            text: format!(
                "{} {SAVED_FILE}, which was edited meanwhile; its edits are kept: {}",
                if saved { "saved in" } else { "forgotten in" },
                edits.join(", ")
            ),
            error: false,
        });
    }
}

/// `n` calls, in words.
fn calls(n: usize) -> String {
    if n == 1 {
        "1 call".into()
    } else {
        format!("{n} calls")
    }
}

/// Calls a tool by hand in a task: the bot's tools, its tool timeout, the bus. Cancelled
/// (`stop`), the call is dropped (an MCP server is sent `notifications/cancelled`) and nothing
/// is sent back.
pub fn spawn_hand_call(
    sessions: &Sessions,
    (id, stop): (u64, CancellationToken),
    tool: String,
    arguments: String,
    tx: &UnboundedSender<HandDone>,
) {
    let bot = sessions.bot();
    let tools = bot.tools().clone();
    let timeout = bot.limits().tool_timeout;
    let bus = sessions.bus().clone();
    let tx = tx.clone();
    tokio::spawn(async move {
        let call = async {
            match serde_json::from_str::<Value>(&arguments) {
                Ok(args) => hand::call(&*tools, &tool, args, timeout, &bus)
                    .await
                    .map_err(|refused| refusal_here(&refused)),
                Err(e) => Err(format!("the arguments are not JSON: {e}")),
            }
        };
        if let Some(result) = stop.run_until_cancelled(call).await {
            let _ = tx.send((id, result));
        }
    });
}

/// Why a hand call was not made, in the console's words: an unknown tool points to the Tools
/// pane, not to `turnscope tools list` as the command line's refusal does (tour S L7).
pub(crate) fn refusal_here(refused: &hand::Refusal) -> String {
    match refused {
        hand::Refusal::UnknownTool { name, known } => format!(
            "no tool named `{name}` is offered now; the Tools pane (6) lists the {} that are{}",
            known.len(),
            if known.is_empty() {
                String::new()
            } else {
                format!(": {}", known.join(", "))
            }
        ),
        other => other.to_string(),
    }
}

/// Sends a request body again in a task: the session's model client, or one for `url`.
/// Cancelled (`stop`), the request is dropped (its connection closed) and nothing is sent back.
pub fn spawn_resend(
    sessions: &Sessions,
    (id, key, stop): (u64, RequestKey, CancellationToken),
    body: String,
    url: Option<String>,
    tx: &UnboundedSender<ResendDone>,
) {
    let client = sessions.bot().model().clone();
    let tx = tx.clone();
    tokio::spawn(async move {
        let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        let sent = resend(&client, body.clone(), url.as_deref());
        if let Some(answer) = stop.run_until_cancelled(sent).await {
            let _ = tx.send((id, key, body, answer));
        }
    });
}

/// The project's saved calls (`.turnscope/calls.json` under `dir`), when there are any.
pub fn read_saved(dir: &Path) -> Option<io::Result<String>> {
    let path = dir.join(SAVED_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => Some(Ok(text)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => Some(Err(e)),
    }
}

/// Writes the saved calls to `.turnscope/calls.json` under `dir` (a whole new file moved into
/// place, so a crash never leaves half of one).
pub fn write_saved(dir: &Path, text: &str) -> Result<(), String> {
    let path = dir.join(SAVED_FILE);
    let folder = path.parent().unwrap_or(dir);
    std::fs::create_dir_all(folder)
        .map_err(|e| format!("cannot make {}: {e}", folder.display()))?;
    let fresh = path.with_extension("json.new");
    std::fs::write(&fresh, text)
        .and_then(|()| std::fs::rename(&fresh, &path))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Runs `$VISUAL`, else `$EDITOR`, else `vi`, on `text` in a temporary file, and gives back
/// what was saved. The caller hands the terminal over first and takes it back after.
///
/// # Errors
/// The editor would not start, failed, or the file could not be read back.
pub async fn edit_in_editor(text: &str) -> Result<String, String> {
    let editor = std::env::var("VISUAL")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .or_else(|| {
            std::env::var("EDITOR")
                .ok()
                .filter(|v| !v.trim().is_empty())
        })
        .unwrap_or_else(|| "vi".into());
    let path = std::env::temp_dir().join(format!(
        "turnscope-request-{}-{}.json",
        std::process::id(),
        turnscope::observe::event::now_us()
    ));
    // A model request holds a conversation: its user's alone in a folder others share.
    turnscope::private_files::write_new(&path, text.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    // Through the shell, so an EDITOR with arguments (`code -w`) works; the file is "$1".
    let status = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{editor} \"$1\""))
        .arg("sh")
        .arg(&path)
        .status()
        .await;
    let result = match status {
        Ok(s) if s.success() => std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read back {}: {e}", path.display())),
        Ok(s) => Err(format!(
            "the editor ({editor}) exited with {s}, an editor's way to cancel (vim's :cq): \
             what it saved was not read and nothing was sent; E opens it again"
        )),
        Err(e) => Err(format!(
            "cannot start the editor ({editor}): {e}; set $EDITOR"
        )),
    };
    let _ = std::fs::remove_file(&path);
    result
}
