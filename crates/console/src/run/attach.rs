//! `turnscope attach`: the console over a bot this process does not run. The library's
//! [`Attached`] feeds (the MCP client, a watched turnscope's event stream, pipecat's whisker)
//! publish events on a local bus; the console folds them like its own server's (the same
//! [`LiveFeed`] over a subscription, with no session table), `--events` records them for
//! `turnscope replay`, and the person's actions go to the MCP client: the first line starts
//! the person's session and goes into it (`n` starts one without a line), a line chats in a
//! session this console started, the others are read-only. The handles of the sessions it
//! started are kept (`run::kept_handles`), so a console attached again to the same URL takes
//! up those the target's event stream still shows: the person goes on where they left off.

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use turnscope::attach::target::Shown;
use turnscope::attach::{AttachOptions, Attached, Reopen};
use turnscope::observe::event::now_us;
use turnscope::observe::recorder::Recording;
use turnscope::observe::{Bus, Event};
use turnscope::tools::ToolSpec;

use crate::error::ConsoleError;
use crate::input::actions::Action;
use crate::run::feed::{Attachment, Done, LiveFeed};
use crate::run::kept_handles::KeptHandles;
use crate::state::{Activity, AttachedView, ConsoleState, Header, Source, ViewPiece};
use crate::theme::Theme;
use crate::view::console::{Console, Notice};
use turnscope::attach::whisker::BOT_RESTARTED;

/// The attached bot, as the loop reaches it.
pub struct Remote {
    /// The feeds.
    pub attached: Attached,
    /// Sessions opened (or failures) waiting to reach the console.
    outcomes: Mutex<Vec<Result<u64, String>>>,
    /// The watched server's restarts the console has been told of.
    restarts_seen: AtomicU64,
    /// The target's `tools/list` (what the Tools pane lists): hand calls are checked
    /// against it before they are sent.
    tools: Vec<ToolSpec>,
    /// What the target's listing says against chatting: it has no `start` or no `chat`
    /// (a plain MCP server), so a line could only be refused (`None` when it has both, or
    /// the listing failed and the first `start` says).
    no_chat: Option<String>,
    /// The handles of the sessions this console started on the target, kept across runs;
    /// none without a target.
    kept: Option<KeptHandles>,
    /// Handles kept by an earlier run, not yet seen among the watched server's sessions.
    to_take_up: Mutex<Vec<String>>,
    /// The sessions let go at the watched server's last restart (not shown by its stream
    /// yet): their numbers before it, and handles. One taken up again under another number
    /// takes the console's selection and input line with it.
    let_go_at_restart: Mutex<Vec<(u64, String)>>,
    /// Refusals of this console's probes (a kept handle reopened that the target no longer
    /// knows: what it said, when the call went out and came back, µs) for the console to take
    /// as expected: the watched server's line for each is news, not an error.
    refused_probes: Mutex<Vec<(String, u64, u64)>>,
}

impl Attachment for Remote {
    fn refresh(&self, state: &mut ConsoleState) -> bool {
        if let Some(stream) = &self.attached.stream {
            let (drops, connected) = {
                let s = stream.lock().unwrap_or_else(|p| p.into_inner());
                (s.dropped, s.connected)
            };
            state.stream_drops = drops;
            // A replica's state is known only while its stream is read: one seen draining
            // before the stream was lost may be gone, or another process by now.
            if !connected
                && let Some((_, replica_state)) = &mut state.header.replica
                && replica_state == "draining"
            {
                *replica_state = "was draining".into();
            }
        }
        for (said, from_us, to_us) in std::mem::take(
            &mut *self
                .refused_probes
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        ) {
            state.expect_refusal("chat", &said, from_us, to_us);
        }
        // The sessions this console started are the person's: marked in the Sessions pane.
        let marked = match &self.attached.target {
            Some(target) => {
                let owned = target.owned_numbers();
                state.mark_yours(|number| owned.contains(&number))
            }
            None => false,
        };
        // A watched turnscope's bridges are not on its stream; a bot that is not a turnscope
        // has none to speak of.
        let bridges = if not_a_turnscope(self) {
            ""
        } else {
            "not visible from here"
        };
        if state.header.bridges != bridges {
            state.header.bridges = bridges.into();
        }
        let view = self.view();
        if let Source::Attached { view: shown, .. } = &mut state.header.source
            && *shown != view
        {
            *shown = view;
            return true;
        }
        marked
    }

    fn settle(&self, console: &mut Console) {
        settle(self, console);
    }

    fn perform(
        self: Arc<Self>,
        action: Action,
        console: &mut Console,
        chat_tx: &mpsc::UnboundedSender<Done>,
    ) {
        perform(action, console, &self, chat_tx);
    }
}

impl Remote {
    fn view(&self) -> AttachedView {
        // Taken before the feeds' locks, which are held for the rest.
        let chat = match &self.attached.target {
            None => Chat::Nowhere,
            Some(_) if self.no_chat.is_some() => Chat::Unserved,
            Some(target) if target.owns_any() => Chat::Yours,
            Some(_) => Chat::NotYet,
        };
        let stream = self
            .attached
            .stream
            .as_ref()
            .map(|s| s.lock().unwrap_or_else(|p| p.into_inner()));
        let whisker = self
            .attached
            .whisker
            .as_ref()
            .map(|w| w.lock().unwrap_or_else(|p| p.into_inner()));
        attached_view(stream.as_deref(), whisker.as_deref(), chat)
    }

    fn opened(&self, outcome: Result<u64, String>) {
        self.outcomes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(outcome);
    }
}

/// What a line can do on the attached target, for the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Chat {
    /// No bot URL: whisker alone, watched.
    Nowhere,
    /// The target has no `start` or no `chat`.
    Unserved,
    /// The person has a session of theirs there.
    Yours,
    /// Not yet: a line starts one.
    NotYet,
}

/// What the console sees of its bot, piece by piece: the event stream's state, whisker's, and
/// what a line does. Each has a short form for a narrow header: what a line does gives way
/// first (shortened, then left out), then whisker's versions, the stream's words, and only
/// then whisker's troubles; whisker's state (refused, not a whisker port, waiting for its port) shows at 80
/// columns, where the long `client view: …` took the whole line before (tour T).
pub(crate) fn attached_view(
    stream: Option<&turnscope::attach::stream::StreamState>,
    whisker: Option<&turnscope::attach::whisker::WhiskerState>,
    chat: Chat,
) -> AttachedView {
    let mut pieces = Vec::new();
    if let Some(s) = stream {
        pieces.push(match (s.available, s.connected) {
            (Some(true), true) => {
                let who = s.replica.as_deref().unwrap_or("the server");
                // Since its last restart: a new server has not dropped this viewer.
                let (dropped, short) = match s.dropped_here {
                    0 => (String::new(), String::new()),
                    n => {
                        let n = crate::text::times(n);
                        (format!(", dropped {n}: see Log"), format!(" (dropped {n})"))
                    }
                };
                ViewPiece::kept(format!(
                    "watching {who} read-only (its event stream{dropped})"
                ))
                .or_short(format!("watching {who}{short}"), 8)
            }
            (Some(true), false) => ViewPiece::kept("event stream lost: reconnecting…")
                .or_short("stream lost: reconnecting…", 8),
            (Some(false), _) if s.refused => ViewPiece::kept(
                "client view: the event stream refused the token (see Log), asking again…",
            )
            .or_short("client view: stream refused the token (Log)", 8),
            (Some(false), _) => {
                ViewPiece::kept("client view: only sessions this console starts (no event stream)")
                    .or_short("client view", 8)
            }
            (None, _) => ViewPiece::kept("asking for the event stream…"),
        });
    }
    if let Some(w) = whisker {
        let streaming = stream.is_some_and(|s| s.available == Some(true));
        pieces.push(if w.connected {
            ViewPiece::kept(format!(
                "whisker {} · {}",
                w.versions,
                crate::text::plural(w.records, "record")
            ))
            // Its versions give way before the stream's words; its troubles last.
            .or_short(
                format!("whisker {}", crate::text::plural(w.records, "record")),
                7,
            )
        } else if w.held_elsewhere {
            ViewPiece::kept("whisker refused: another client holds it (see Log)")
                .or_short("whisker refused (see Log)", 9)
        } else if let Some(status) = &w.not_whisker {
            ViewPiece::kept(format!(
                "whisker: not a whisker port (it answers HTTP {status}; see Log)"
            ))
            .or_short("not a whisker port (see Log)", 9)
        } else if w.connects > 0 {
            ViewPiece::kept("whisker: reconnecting…")
        } else if streaming {
            // The target serves an event stream: a turnscope, which has no whisker feed.
            ViewPiece::kept("whisker: nothing answers (a turnscope has no whisker feed)")
                .or_short("whisker: nothing answers", 9)
        } else if chat == Chat::Yours {
            // Whisker opens its port when the bot's first session starts: one has.
            ViewPiece::kept(
                "whisker: nothing answers yet, though your session on the bot started (its \
                 whisker port? see Log)",
            )
            .or_short("whisker: nothing answers (see Log)", 9)
        } else {
            ViewPiece::kept(
                "whisker: waiting for its port (it opens when the bot's first session starts)…",
            )
            .or_short("whisker: waiting for its port…", 9)
        });
        let mut skipped = Vec::new();
        if w.unknown > 0 {
            skipped.push(format!("{} of unknown types skipped", w.unknown));
        }
        if w.bad > 0 {
            skipped.push(format!("{} bad skipped", w.bad));
        }
        if !skipped.is_empty() {
            pieces.push(
                ViewPiece::kept(skipped.join(" · "))
                    .or_short(format!("{} skipped", w.unknown + w.bad), 5)
                    .or_gone(6),
            );
        }
    }
    let hint = match chat {
        Chat::Nowhere => None,
        Chat::Unserved => Some(
            ViewPiece::kept("no start/chat here: call its tools by hand in 6 Tools")
                .or_short("no start/chat: 6 Tools", 5),
        ),
        Chat::Yours => Some(
            ViewPiece::kept("n: new session · chat only in yours").or_short("n: new session", 5),
        ),
        Chat::NotYet => Some(
            ViewPiece::kept("a line starts your session (or n) · chat only in yours")
                .or_short("a line starts your session", 5),
        ),
    };
    pieces.extend(hint.map(|h| h.or_gone(6)));
    AttachedView { pieces }
}

/// Brings sessions opened since the last tick into the console (selected, the person's own),
/// and tells of a restart of the watched server.
fn settle(remote: &Remote, console: &mut Console) {
    console.closed_own_starts_anew = remote.attached.target.is_some() && not_a_turnscope(remote);
    let restarts = remote.attached.stream.as_ref().map_or(0, |stream| {
        stream.lock().unwrap_or_else(|p| p.into_inner()).restarts
    });
    if restarts > remote.restarts_seen.swap(restarts, Ordering::Relaxed)
        && let (Some(target), Some(stream)) = (&remote.attached.target, &remote.attached.stream)
    {
        // Behind a balancer the stream may have gone on from another replica.
        let (moved, followed) = {
            let s = stream.lock().unwrap_or_else(|p| p.into_inner());
            let moved = s
                .moved_from
                .clone()
                .map(|before| (before, s.replica.clone().unwrap_or_default()));
            (moved, s.followed)
        };
        // The sessions this console started closed with the server (their numbers are the
        // new server's to give again); those the new server's stream shows, by their handle,
        // were started there since, or reopened by a line sent before the stream showed the
        // new server: they go on under the number it shows them by, and so do the person's
        // own session, the selection and the input line. The others are looked for as at an
        // attach: the person's next line reopens the newest (their own first) when the server
        // kept it in its store.
        let renumbered = {
            let stream = stream.lock().unwrap_or_else(|p| p.into_inner());
            target.renumber(|handle| stream.session_of(&handle_prefix(handle)))
        };
        let mut let_go = renumbered.let_go;
        let before = console.own;
        if let Some(own) = before
            && let Some(at) = let_go.iter().position(|(number, _)| *number == own)
        {
            let mine = let_go.remove(at);
            let_go.insert(0, mine);
            console.own = None;
        }
        console.renumbered(&renumbered.moved);
        // Marked the person's at once under their numbers now, not a tick later: meanwhile
        // their session read as another client's (`mcp: turnscope attach`, its lines `user`).
        let owned = target.owned_numbers();
        console.state.mark_yours(|number| owned.contains(&number));
        if !let_go.is_empty() {
            let mut pending = remote.to_take_up.lock().unwrap_or_else(|p| p.into_inner());
            pending.retain(|h| !let_go.iter().any(|(_, handle)| handle == h));
            pending.splice(0..0, let_go.iter().map(|(_, handle)| handle.clone()));
        }
        *remote
            .let_go_at_restart
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = let_go;
        // The person's session goes on: a line of theirs reopened it on the new server.
        let going_on = before
            .zip(console.own)
            .map(|(before, now)| open_again(before, now));
        let text = match moved {
            // The console's own MCP client moved it: its session is opening there.
            Some((before, now)) if followed => format!(
                "the event stream now comes from replica {now}, where your session lives \
                 ({before} before): it shows your conversation's frames again"
            ),
            Some((before, now)) => format!(
                "the event stream now comes from replica {now} ({before} before): your next line \
                 reopens your session there if its store keeps it (a shared store does), else \
                 starts a new one (n: a new one now)"
            ),
            None => match going_on {
                Some(going_on) => format!("the watched server restarted: {going_on}"),
                None => "the watched server restarted: your next line reopens your session there \
                         if the server kept it in its store, else starts a new one (n: a new one \
                         now)"
                    .into(),
            },
        };
        // The notice goes in a few seconds: the Log keeps what happened.
        remote.attached.bus.publish(Event::Log {
            at_ms: now_us() / 1000,
            level: "info".into(),
            message: text.clone(),
        });
        console.notice = Some(Notice { text, error: false });
    }
    let_go_of_ended_with_the_bot(remote, console);
    take_up_kept(remote, console);
    let outcomes = std::mem::take(&mut *remote.outcomes.lock().unwrap_or_else(|p| p.into_inner()));
    for outcome in outcomes {
        match outcome {
            Ok(number) => {
                console.own = Some(number);
                console.selected = Some(number);
                console.notice = Some(Notice {
                    text: format!("started #{number} for you on the attached bot"),
                    error: false,
                });
            }
            Err(e) => {
                console.notice = Some(Notice {
                    text: e,
                    error: true,
                })
            }
        }
    }
}

/// What the person is told when the restarted server shows their session `before` again
/// (as `now`): a line of theirs, sent before the stream showed the new server, reopened it.
fn open_again(before: u64, now: u64) -> String {
    let name = if before == now {
        format!("#{now}")
    } else {
        format!("#{before} (#{now} now)")
    };
    format!(
        "your session {name} is open again there (your line reopened it from its store): your \
         lines go on in it"
    )
}

/// The first 8 characters of `handle`: all the watched server's stream tells of it.
fn handle_prefix(handle: &str) -> String {
    handle.chars().take(8).collect()
}

/// Lets go of the person's session when its whisker worker's bot restarted (the feed closed
/// it: the bot no longer knows its handle, and a line into it would be refused with the bot's
/// "call start"), or when the bot refused its handle as unknown: the next line starts a new
/// one, as said.
fn let_go_of_ended_with_the_bot(remote: &Remote, console: &mut Console) {
    let (Some(own), Some(target)) = (console.own, &remote.attached.target) else {
        return;
    };
    let why = match console.state.session(own).map(|row| &row.activity) {
        Some(Activity::Closed(why)) if why.starts_with(BOT_RESTARTED) => {
            "ended with the bot's restart"
        }
        // Let go when the bot refused its handle (its row may have closed before, for
        // another reason, which the row keeps).
        Some(Activity::Closed(_)) if !target.owns(own) => "is unknown to the bot now",
        _ => return,
    };
    remote.attached.forget(own);
    console.own = None;
    console.notice = Some(Notice {
        text: format!(
            "#{own} {why}: your next line starts a new session on it (Enter sends the line given \
             back; n: one now)"
        ),
        error: false,
    });
}

/// Takes up the sessions an earlier run of this console started on the target that the
/// watched server's stream now shows (by their handle's first 8 characters, which is all the
/// stream tells): they are this console's again, and the newest becomes the person's own
/// when they have none yet. Without an event stream nothing tells whether a kept session
/// still lives, so none is taken up; nor while the stream comes from another replica than
/// this client's MCP session (behind a balancer): its chats run there, so the stream's copy
/// would not show them, and the first line reopens the session as this client shows it.
fn take_up_kept(remote: &Remote, console: &mut Console) {
    let (Some(target), Some(stream)) = (&remote.attached.target, &remote.attached.stream) else {
        return;
    };
    if target.side().elsewhere().is_some() {
        return;
    }
    let mut pending = remote.to_take_up.lock().unwrap_or_else(|p| p.into_inner());
    if pending.is_empty() {
        return;
    }
    let mut found: Vec<(String, u64)> = {
        let stream = stream.lock().unwrap_or_else(|p| p.into_inner());
        pending
            .iter()
            .filter_map(|handle| {
                stream
                    .session_of(&handle_prefix(handle))
                    .map(|n| (handle.clone(), n))
            })
            .collect()
    };
    if found.is_empty() {
        return;
    }
    let taken: HashSet<&str> = found.iter().map(|(h, _)| h.as_str()).collect();
    pending.retain(|h| !taken.contains(h.as_str()));
    drop(pending);
    // Sessions another console attached with this state directory holds now stay its own.
    if let Some(kept) = &remote.kept {
        let (free, unclaimed) = kept.claim_free(found.iter().map(|(h, _)| h.clone()).collect());
        found.retain(|(handle, _)| free.contains(handle));
        // A claim not written is said (another console may take the session up too), and
        // the take-up goes on: the session is this console's all the same.
        if let Some(text) = unclaimed {
            remote.attached.bus.publish(Event::Log {
                at_ms: now_us() / 1000,
                level: "warn".into(),
                message: text,
            });
        }
        if found.is_empty() {
            return;
        }
    }
    // Newest first: the first found is the person's latest.
    for (handle, number) in &found {
        if !target.owns(*number) {
            // The stream numbers its turns: this client's count is not used.
            target.take_up(*number, handle, Shown::Elsewhere, 0);
        }
    }
    // Those let go at the watched server's restart (a line of the person's reopened them
    // there since) take the console's selection and input line to their numbers now.
    let again: Vec<(u64, u64)> = {
        let mut let_go = remote
            .let_go_at_restart
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        found
            .iter()
            .filter_map(|(handle, now)| {
                let at = let_go.iter().position(|(_, h)| h == handle)?;
                Some((let_go.remove(at).0, *now))
            })
            .collect()
    };
    console.renumbered(&again);
    let numbers: Vec<String> = found.iter().map(|(_, n)| format!("#{n}")).collect();
    let text = if console.own.is_none() {
        let (_, newest) = found[0];
        console.own = Some(newest);
        console.selected = Some(newest);
        match again.iter().find(|(_, now)| *now == newest) {
            Some(&(before, _)) => {
                // As the restart's notice says it when the stream shows it at once.
                let text = format!(
                    "the watched server restarted: {}",
                    open_again(before, newest)
                );
                remote.attached.bus.publish(Event::Log {
                    at_ms: now_us() / 1000,
                    level: "info".into(),
                    message: text.clone(),
                });
                text
            }
            None => format!(
                "#{newest} is the session you started here last time (its handle was kept): \
                 your lines go on in it"
            ),
        }
    } else {
        format!("{} started here last time: yours again", numbers.join(", "))
    };
    console.notice = Some(Notice { text, error: false });
}

/// Most kept sessions a first line tries to reopen before it starts a new one.
const REOPEN_TRIES: usize = 3;

/// Reopens, for the person's first line, the newest session an earlier run of this console
/// started on the target that its stream does not show (the target restarted since and keeps
/// conversations in its store): newest first, at most [`REOPEN_TRIES`]. A handle the target
/// refuses is let go for good; a call that failed leaves it kept. The number reopened, or
/// what stopped it (for the person, once their new session is open).
async fn reopen_kept(remote: &Remote) -> (Option<u64>, Option<String>) {
    // Sessions another console attached with this state directory holds now stay its own.
    if let Some(kept) = &remote.kept {
        let elsewhere = kept.held_elsewhere();
        remote
            .to_take_up
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|h| !elsewhere.contains(h));
    }
    for _ in 0..REOPEN_TRIES {
        let Some(handle) = remote
            .to_take_up
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .first()
            .cloned()
        else {
            return (None, None);
        };
        // Claimed before it is reopened, under the take-up lock: another console taking
        // sessions up at the same instant leaves it to this one (or this one to it).
        if let Some(kept) = &remote.kept {
            let (free, unclaimed) = kept.claim_free(vec![handle.clone()]);
            if let Some(text) = unclaimed {
                remote.attached.bus.publish(Event::Log {
                    at_ms: now_us() / 1000,
                    level: "warn".into(),
                    message: text,
                });
            }
            if free.is_empty() {
                remote
                    .to_take_up
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .retain(|h| *h != handle);
                continue;
            }
        }
        let sent_us = now_us();
        let outcome = remote.attached.reopen(&handle).await;
        if matches!(outcome, Ok(_) | Err(Reopen::Refused(_))) {
            remote
                .to_take_up
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .retain(|h| *h != handle);
        }
        match outcome {
            Ok(number) => return (Some(number), None),
            Err(Reopen::Refused(said)) => {
                // The server logs the refused call as an error (its stream brings it to the
                // Log): this console expected it, so it is news here, and said what it was.
                let prefix = handle_prefix(&handle);
                remote
                    .refused_probes
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((said.clone(), sent_us, now_us()));
                remote.attached.bus.publish(Event::Log {
                    at_ms: now_us() / 1000,
                    level: "info".into(),
                    message: format!(
                        "the session you started here last time ({prefix}…) is gone from the bot: \
                         it refused the handle this console kept ({}), so the handle is \
                         forgotten; the `chat refused` beside this line is that call (expected: \
                         not counted as an error here)",
                        said.split(". ")
                            .next()
                            .unwrap_or_default()
                            .trim_end_matches('.')
                    ),
                });
                if let Some(kept) = &remote.kept
                    && let Err(text) = kept.forget(&handle)
                {
                    return (None, Some(text));
                }
            }
            Err(Reopen::Unwatched) => return (None, None),
            Err(Reopen::Failed(text)) => {
                return (
                    None,
                    Some(format!(
                        "the session you started here last time was not reopened ({text}); \
                         this is a new one"
                    )),
                );
            }
        }
    }
    (None, None)
}

/// Keeps `number`'s handle (a line is being said in it) for the next attach; what could not
/// be written goes to the console as a notice.
fn keep_handle(remote: &Remote, number: u64, tx: &mpsc::UnboundedSender<Done>) {
    let (Some(kept), Some(target)) = (&remote.kept, &remote.attached.target) else {
        return;
    };
    // Only a watched target shows whether a kept session lives (`take_up_kept`, `reopen_kept`).
    if !watched(remote) {
        return;
    }
    if let Some(handle) = target.handle_of(number)
        && let Err(text) = kept.keep(&handle)
    {
        let _ = tx.send(Done::Notice { text, error: true });
    }
}

/// Does what an input asks, over the MCP client.
fn perform(
    action: Action,
    console: &mut Console,
    remote: &Arc<Remote>,
    chat_tx: &mpsc::UnboundedSender<Done>,
) {
    let notice = |console: &mut Console, text: String, error: bool| {
        console.notice = Some(Notice { text, error });
    };
    match action {
        Action::Export { .. } | Action::ExportTest { .. } | Action::Copy { .. } => {
            crate::run::live::perform(
                action,
                console,
                (None, None),
                chat_tx,
                &CancellationToken::new(),
            );
        }
        Action::Quit | Action::Suspend | Action::EditExternally { .. } | Action::ReloadConfig => {}
        Action::SaveCalls { .. } => {
            crate::run::workbench::perform(action, console, None, (&dead(), &dead()));
        }
        Action::HandCall {
            id,
            tool,
            arguments,
        } => {
            // The Tools pane lists the target's own tools/list: called over the same client.
            if remote.attached.target.is_none() {
                crate::run::workbench::refuse_here(console, id);
                return;
            }
            let (remote, tx) = (remote.clone(), chat_tx.clone());
            let stop = console.tools.hand.cancel_token(id);
            tokio::spawn(async move {
                let call = async {
                    match serde_json::from_str(&arguments) {
                        Ok(args) => {
                            remote
                                .attached
                                .call_by_hand(&remote.tools, &tool, args)
                                .await
                        }
                        Err(e) => Err(format!("the arguments are not JSON: {e}")),
                    }
                };
                // Cancelled by the person: the request is dropped, nothing comes back.
                let Some(result) = stop.run_until_cancelled(call).await else {
                    return;
                };
                let (result, opened) = match result {
                    Ok((done, opened)) => (Ok(done), opened),
                    Err(e) => (Err(e), None),
                };
                let _ = tx.send(Done::Hand((id, result)));
                // A `start` by hand opened a session of the person's, as `n` does.
                if let Some(number) = opened {
                    let _ = tx.send(Done::Opened {
                        result: Ok(number),
                        replacing: None,
                        chatting: false,
                        unsent: None,
                    });
                    let _ = tx.send(Done::Notice {
                        text: hand_started(number),
                        error: false,
                    });
                }
            });
        }
        Action::Resend { id, .. } => crate::run::workbench::refuse_resend(console, id),
        Action::NewSession | Action::StartWith { .. } if remote.no_chat.is_some() => {
            let mut why = remote.no_chat.clone().unwrap_or_default();
            if let Action::StartWith { line } = action {
                console.input_line.starting = false;
                console.give_back_line(&line);
                why.push_str("; your line is kept");
            }
            notice(console, why, true);
        }
        Action::NewSession => open_session(remote),
        Action::StartWith { line } => {
            let Some(target) = remote.attached.target.clone() else {
                notice(
                    console,
                    "watching only (--whisker without a bot URL): nothing to chat with".into(),
                    true,
                );
                console.input_line.starting = false;
                console.give_back_line(&line);
                return;
            };
            console.notice = Some(Notice {
                text: "starting your session on the attached bot…".into(),
                error: false,
            });
            let (remote, tx) = (remote.clone(), chat_tx.clone());
            tokio::spawn(async move {
                let (reopened, note) = reopen_kept(&remote).await;
                if let Some(number) = reopened {
                    let _ = tx.send(Done::Opened {
                        result: Ok(number),
                        replacing: None,
                        chatting: true,
                        unsent: None,
                    });
                    let _ = tx.send(Done::Notice {
                        text: format!(
                            "#{number} is the session you started here last time, reopened from \
                             the bot's store: your line goes on in it (n starts a new one)"
                        ),
                        error: false,
                    });
                    let result = target.chat(number, &line).await;
                    chat_failed(&remote, number, &line, &result);
                    let _ = tx.send(Done::Chat(number, line, Box::new(result)));
                    return;
                }
                let number = match remote.attached.open().await {
                    Ok(number) => number,
                    Err(e) => {
                        after_failure(&remote, 0, "start", Some(&e), false);
                        let _ = tx.send(Done::Opened {
                            result: Err(e),
                            replacing: None,
                            chatting: true,
                            unsent: Some(line),
                        });
                        return;
                    }
                };
                let _ = tx.send(Done::Opened {
                    result: Ok(number),
                    replacing: None,
                    chatting: true,
                    unsent: None,
                });
                if let Some(text) = note {
                    let _ = tx.send(Done::Notice { text, error: true });
                }
                keep_handle(&remote, number, &tx);
                let result = target.chat(number, &line).await;
                chat_failed(&remote, number, &line, &result);
                let _ = tx.send(Done::Chat(number, line, Box::new(result)));
            });
        }
        Action::Chat { session, line } => {
            let Some(target) = remote.attached.target.clone() else {
                notice(
                    console,
                    "watching only (--whisker without a bot URL): nothing to chat with".into(),
                    true,
                );
                return;
            };
            if not_a_turnscope(remote)
                && console.own == Some(session)
                && console
                    .state
                    .session(session)
                    .is_some_and(|row| row.is_closed())
            {
                // A bot that is not a turnscope keeps no conversation past its session: the
                // handle of one that closed is dead, and a line into it would only be refused
                // (a watched turnscope may reopen it from its store, so it gets the line). It
                // starts a new session of the person's instead.
                remote.attached.forget(session);
                console.own = None;
                console.input_line.starting = true;
                perform(Action::StartWith { line }, console, remote, chat_tx);
                console.notice = Some(Notice {
                    text: format!(
                        "#{session} is closed: your line starts a new session on the attached bot"
                    ),
                    error: false,
                });
                return;
            }
            if !target.owns(session) {
                notice(
                    console,
                    format!(
                        "#{session} was started by another client: an attached console chats only in \
                         sessions it started (n in Sessions (1) starts one)"
                    ),
                    true,
                );
                console.give_back_line(&line);
                return;
            }
            console.chat_started(session);
            keep_handle(remote, session, chat_tx);
            let (remote, tx) = (remote.clone(), chat_tx.clone());
            tokio::spawn(async move {
                let result = target.chat(session, &line).await;
                chat_failed(&remote, session, &line, &result);
                let _ = tx.send(Done::Chat(session, line, Box::new(result)));
            });
        }
        Action::Interrupt { session } => notice(
            console,
            match &remote.attached.target {
                Some(target)
                    if target.owns(session)
                        && console
                            .state
                            .session(session)
                            .is_some_and(|row| row.activity == Activity::InTurn) =>
                {
                    format!(
                        "an attached console cannot interrupt a turn (MCP has no call for it): the \
                         turn in #{session} runs to its end, and a new line of yours waits for it"
                    )
                }
                Some(target) if target.owns(session) => format!(
                    "no turn runs in #{session} (and an attached console interrupts none: MCP has \
                     no call for it)"
                ),
                _ => format!(
                    "#{session} is not this console's: an attached console interrupts nothing (MCP \
                     has no call for it), and another client's session is its client's to \
                     interrupt"
                ),
            },
            false,
        ),
        Action::Close { session } => match &remote.attached.target {
            Some(target) if target.owns(session) => {
                let unwritten = match (&remote.kept, target.handle_of(session)) {
                    (Some(kept), Some(handle)) => kept.forget(&handle).err(),
                    _ => None,
                };
                remote.attached.forget(session);
                if console.own == Some(session) {
                    // The next line starts a new session of the person's.
                    console.own = None;
                }
                match unwritten {
                    // Forgotten here all the same; the file still names it for the next attach.
                    Some(text) => {
                        notice(console, format!("#{session} forgotten here; {text}"), true)
                    }
                    None => notice(
                        console,
                        format!(
                            "#{session} forgotten here (its handle is dropped; the bot ends it when idle)"
                        ),
                        false,
                    ),
                }
            }
            _ => notice(
                console,
                format!("#{session} is not this console's to close"),
                true,
            ),
        },
        Action::Yank { session } => {
            let handle = remote
                .attached
                .target
                .as_ref()
                .and_then(|t| t.handle_of(session));
            match handle {
                // A secret: to the clipboard only, as the local console's `y`.
                Some(handle) => {
                    console.notice = Some(crate::run::output::copy_handle(
                        &format!("#{session}'s handle"),
                        &handle,
                    ));
                }
                None => notice(
                    console,
                    format!("#{session}'s handle belongs to another client"),
                    true,
                ),
            }
        }
    }
}

/// What the person is told when their hand call of `start` opened `number`: it is theirs.
fn hand_started(number: u64) -> String {
    format!(
        "your call of start opened #{number}: yours, as n opens one (a line chats in it, d lets \
         it go, y in Sessions copies its handle)"
    )
}

/// A channel nobody reads, for the workbench's actions that send nothing here.
fn dead<T>() -> mpsc::UnboundedSender<T> {
    mpsc::unbounded_channel().0
}

/// Why nothing chats on a target whose `tools/list` (`listed`, as it came back) lacks
/// `start` or `chat`: what it has, and what can be done there instead.
fn no_chat(listed: &[ToolSpec]) -> Option<String> {
    let has = |name: &str| listed.iter().any(|t| t.name == name);
    if has("start") && has("chat") {
        return None;
    }
    let names: Vec<&str> = listed.iter().map(|t| t.name.as_str()).take(8).collect();
    let what = if listed.is_empty() {
        "it lists no tool".to_string()
    } else {
        let more = if listed.len() > names.len() {
            ", …"
        } else {
            ""
        };
        format!("it has: {}{more}", names.join(", "))
    };
    Some(format!(
        "this server offers no start and chat tools ({what}), so nothing here chats; call its \
         tools by hand in 6 Tools"
    ))
}

fn open_session(remote: &Arc<Remote>) {
    let remote = remote.clone();
    tokio::spawn(async move {
        let outcome = remote.attached.open().await;
        if let Err(e) = &outcome {
            after_failure(&remote, 0, "start", Some(e), false);
        }
        remote.opened(outcome);
    });
}

/// What went wrong with a chat call: it failed, or the bot answered it with an error and
/// no turn (a refusal, or a failed turn of a bot that numbers none).
fn failure(result: &Result<turnscope::sessions::ChatReply, String>) -> Option<&str> {
    match result {
        Err(e) => Some(e),
        Ok(reply) if reply.turn.is_none() => reply.error.as_deref(),
        Ok(_) => None,
    }
}

/// Whether the target serves a turnscope event stream this console reads (or reconnects to).
fn watched(remote: &Remote) -> bool {
    remote.attached.stream.as_ref().is_some_and(|stream| {
        stream.lock().unwrap_or_else(|p| p.into_inner()).available == Some(true)
    })
}

/// Whether the target is known not to be a turnscope (its `/events` answered that it serves
/// none): such a bot keeps no conversation past its session, so a closed session's handle is
/// dead. A turnscope may reopen one from its store.
fn not_a_turnscope(remote: &Remote) -> bool {
    remote.attached.stream.as_ref().is_none_or(|stream| {
        let s = stream.lock().unwrap_or_else(|p| p.into_inner());
        s.available == Some(false) && !s.refused
    })
}

/// Why a session of this console's closed when the bot refused its handle as unknown.
const UNKNOWN_TO_BOT: &str =
    "the bot no longer knows its handle (it restarted, or ended the session)";

/// After this console's `chat` of `line` in `session` ([`after_failure`]): a failure is told
/// already when this client showed the turn (its end, `not answered: …`, counts in the Log),
/// so it is not said again (one refused line counted two errors: tour T).
fn chat_failed(
    remote: &Remote,
    session: u64,
    line: &str,
    result: &Result<turnscope::sessions::ChatReply, String>,
) {
    let told = !line.is_empty()
        && remote
            .attached
            .target
            .as_ref()
            .and_then(|t| t.shown(session))
            == Some(Shown::ByClient);
    after_failure(remote, session, "chat", failure(result), told);
}

/// After a failed or refused call of this console's (`what`: `chat` in `session`, or
/// `start`): a session whose handle the bot refused as unknown is let go (closed, so the
/// person's next line starts a new one), and the failure goes in the Log as an error, so it
/// outlives its notice, unless it is `told` already (the turn this client showed ended
/// saying it) or a watched server's stream shows the server's own line for it (a turnscope
/// logs every refusal).
fn after_failure(remote: &Remote, session: u64, what: &str, error: Option<&str>, told: bool) {
    let Some(e) = error else {
        return;
    };
    if what == "chat" && e.contains("no live session") && not_a_turnscope(remote) {
        // The bot no longer knows the handle (it restarted, or ended the session): the row
        // closes, and the person's next line (given back) starts a new session.
        remote.attached.let_go(session, UNKNOWN_TO_BOT);
    }
    if told || watched(remote) {
        return;
    }
    let call = match what {
        "start" => "start".to_string(),
        _ => format!("{what} in #{session}"),
    };
    remote.attached.bus.publish(Event::Log {
        at_ms: now_us() / 1000,
        level: "error".into(),
        message: format!("this console's {call} failed: {e}"),
    });
}

/// Builds the attached console: the feeds started on a local bus (the console subscribed first),
/// the target's tools in the Tools pane; the person's session opens with their first line.
///
/// # Errors
/// The MCP URL cannot be reached.
pub async fn attach(
    options: &AttachOptions,
    theme: Theme,
    bus: Bus,
) -> Result<(Console, LiveFeed, Arc<Remote>), ConsoleError> {
    let sub = bus.subscribe();
    let attached = Attached::start(options, bus)
        .await
        .map_err(ConsoleError::Attach)?;
    let target = match (&options.url, &options.whisker) {
        (Some(url), Some(ws)) => format!("{url} + whisker {ws}"),
        (Some(url), None) => url.clone(),
        (None, Some(ws)) => format!("whisker {ws}"),
        (None, None) => String::new(),
    };
    let mut state = ConsoleState::new(Header {
        mcp_url: None,
        bot_url: options.url.clone(),
        // The model is not known until the target's model requests name it (a turnscope's
        // event stream carries them); its server's own name is not the model's.
        server: attached.target.as_ref().and_then(|t| t.server_name()),
        bridges: "not visible from here".into(),
        source: Source::Attached {
            target,
            view: AttachedView::default(),
        },
        replica: None,
        ..Header::default()
    });
    let mut listed = Vec::new();
    // Whether the target's listing came back (an empty one too): only then does it say the
    // server has no start or chat.
    let mut listed_ok = false;
    match &attached.target {
        Some(t) => match t.tools().await {
            Ok(tools) => {
                listed_ok = true;
                let specs: Vec<ToolSpec> = tools
                    .iter()
                    .map(|tool| ToolSpec {
                        name: tool.name.to_string(),
                        description: tool.description.as_deref().unwrap_or_default().to_string(),
                        input_schema: serde_json::Value::Object((*tool.input_schema).clone()),
                        source: "the attached bot (tools/list)".into(),
                    })
                    .collect();
                state.set_attached_tools(&specs);
                listed = specs;
            }
            Err(e) => state.tools_note = Some(e),
        },
        None => {
            state.tools_note =
                Some("whisker shows no tool list; tool calls appear in each turn".into())
        }
    }
    let state_dir = turnscope::store::state_dir(&|name| std::env::var(name).ok());
    let (kept, unreadable) = match (&attached.target, &options.url) {
        (Some(_), Some(url)) => {
            let (kept, problem) = KeptHandles::for_target(url, state_dir.as_deref());
            (Some(kept), problem)
        }
        _ => (None, None),
    };
    // Those another console attached with this state directory holds now are left to it.
    let to_take_up = kept
        .as_ref()
        .map(|kept| {
            let elsewhere = kept.held_elsewhere();
            let mut handles = kept.of_target();
            handles.retain(|h| !elsewhere.contains(h));
            handles
        })
        .unwrap_or_default();
    let remote = Arc::new(Remote {
        attached,
        outcomes: Mutex::new(Vec::new()),
        restarts_seen: AtomicU64::new(0),
        no_chat: listed_ok.then(|| no_chat(&listed)).flatten(),
        tools: listed,
        kept,
        to_take_up: Mutex::new(to_take_up),
        let_go_at_restart: Mutex::new(Vec::new()),
        refused_probes: Mutex::new(Vec::new()),
    });
    remote.refresh(&mut state);
    let feed = LiveFeed::attached(sub, remote.clone() as Arc<dyn Attachment>);
    let mut console = Console::new(state, theme, false);
    if let Some(text) = unreadable {
        console.notice = Some(Notice { text, error: true });
    }
    // No session is opened until the person writes (or presses n): a console that only
    // watches adds nothing to the bot it watches (a CI server's session count, its cap).
    console.start_on_first_line = remote.attached.target.is_some();
    if console.watching_only() {
        console.input.set_placeholder_text(
            "Watching only: nothing here chats (attach URL --whisker WS chats with the bot too)",
        );
    }
    if remote.no_chat.is_some() {
        console.no_chat_here = true;
        console.input.set_placeholder_text(
            "This server offers no start/chat tools: nothing here chats; call its tools by hand in 6 Tools",
        );
    }
    Ok((console, feed, remote))
}

/// Runs the attached console until the person quits; `--events` records what it saw.
pub async fn run(
    options: AttachOptions,
    theme: Theme,
    events: Option<&Path>,
) -> Result<(), ConsoleError> {
    // Room for a watched server's history and bursts (1 MiB of lines is ~4,000 events).
    let bus = Bus::new(1 << 16);
    let recording = Recording::start(&bus, events)
        .await
        .map_err(|e| ConsoleError::Attach(e.to_string()))?;
    let (mut console, feed, remote_for_shutdown) = match attach(&options, theme, bus).await {
        Ok(built) => built,
        Err(e) => {
            recording.finish().await;
            return Err(e);
        }
    };
    // Published before the console subscribed (the file has it): said on screen instead.
    if let Some(note) = recording.kept_aside() {
        console.notice = Some(Notice {
            text: note.to_string(),
            error: false,
        });
    }
    let (terminal, guard) = match crate::run::terminal::enter() {
        Ok(t) => t,
        Err(e) => {
            recording.finish().await;
            return Err(e);
        }
    };
    let stop = CancellationToken::new();
    let on_signal = stop.clone();
    let mut handlers = super::signals::Signals::new();
    let signals = tokio::spawn(async move {
        // No config of its own to reload: only SIGTERM or a hung-up terminal end it.
        while handlers.next().await == super::signals::ConsoleSignal::Reload {}
        on_signal.cancel();
    });
    let terminals = turnscope::app::hangup::Terminals::now();
    let ui = tokio::spawn(async move {
        let (mut console, mut feed, mut terminal) = (console, feed, terminal);
        let input = crossterm::event::EventStream::new();
        let result =
            crate::run::live::event_loop(&mut console, &mut terminal, Some(&mut feed), input, stop)
                .await;
        (
            crate::run::terminal::let_go(terminal, result, &terminals),
            feed,
        )
    });
    let outcome = ui.await;
    signals.abort();
    drop(guard);
    recording.finish().await;
    match outcome {
        Ok((result, feed)) => {
            drop(feed);
            if let Ok(remote) = Arc::try_unwrap(remote_for_shutdown) {
                remote.attached.shutdown().await;
            }
            result
        }
        Err(e) => Err(ConsoleError::Panicked(e.to_string())),
    }
}
