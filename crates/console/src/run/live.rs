//! The event loop: terminal input, chat results, bus events and a frame tick, in one task. Events
//! are folded in batches at most every [`FOLD_EVERY`]; the screen is drawn only on the tick and
//! only when something changed, at most [`FPS`] times a second ([`FLOOD_FPS`] in a flood while
//! nobody types). Chat calls run in their own tasks, so the loop never waits on a turn.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossterm::event::Event as TermEvent;
use futures::{Stream, StreamExt};
use ratatui::Terminal;
use ratatui::backend::Backend;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::input::actions::Action;

use crate::error::ConsoleError;
use crate::run::feed::LiveFeed;
use crate::run::kept_handles::{GoneHandle, KeptHandles};
use crate::run::signals::ConsoleSignal;
use crate::run::workbench::{Fixed, HandDone, Input, ResendDone, Tty};
use crate::state::{ConfigMark, ConsoleState, Header, Source};
use crate::theme::Theme;
use crate::view::console::{Console, Notice};
use turnscope::app::{App, ReloadCause, StopCause, Stopped};
use turnscope::observe::{SessionOpener, Subscription};
use turnscope::sessions::Sessions;

/// Most frames drawn per second.
pub const FPS: u64 = 30;

/// Frames drawn per second while a flood of events runs and the person is not typing: text
/// that scrolls this fast cannot be read anyway, and every frame costs the server a little.
pub const FLOOD_FPS: u64 = 10;

/// Events per second from which the console counts as flooded.
pub const FLOOD_EVENTS: u64 = 2_000;

/// The least time between two folds of bus events. Waking once per event would cost the
/// server more than the folding itself under a flood; the bus holds 8192 events, far more
/// than arrive in this time.
pub const FOLD_EVERY: Duration = Duration::from_millis(10);

use crate::run::feed::Done;

/// A console attached to a running app: its state filled with the header and tools, its own
/// subscription to the bus, and a session opened for the person (selected).
pub async fn attach(app: &App, theme: Theme) -> (Console, LiveFeed) {
    attach_with(app, theme, app.bus.subscribe()).await
}

/// Like [`attach`] with a subscription taken before the app started, so what the app
/// published while starting (a bridge's warnings) is folded in too.
pub async fn attach_with(app: &App, theme: Theme, sub: Subscription) -> (Console, LiveFeed) {
    let mut state = ConsoleState::new(Header {
        mcp_url: Some(app.server.mcp_url()),
        wants_token: app.wants_token,
        model: app.model.describe(),
        model_short: Some(app.model.short()),
        params: app.model_params(),
        bot: app.sessions.bot().name().map(str::to_string),
        bridges: "none".into(),
        source: Source::Live,
        replica: Some((
            app.sessions.replica().id().to_string(),
            if app.sessions.is_draining() {
                "draining"
            } else {
                "serving"
            }
            .to_string(),
        )),
        store: Some(app.sessions.store_status().url),
        store_degraded: false,
        watched_handle_seconds: None,
        watched_console_holds: false,
        server: None,
        bot_url: None,
        config: Some(ConfigMark {
            version: app.reloader().version(),
            ..ConfigMark::default()
        }),
    });
    let bot = app.sessions.bot();
    state.greeting = bot.greeting();
    let state_dir = turnscope::store::state_dir(&|name| std::env::var(name).ok());
    let (kept, unreadable) = KeptHandles::load(app.sessions.store().clone(), state_dir.as_deref());
    let handle_seconds = app.sessions.limits().handle_seconds;
    state.gone_of_yours = gone_of_yours(&kept.let_go_of_gone(handle_seconds).await, handle_seconds);
    // Subscribe before opening the person's session, so its opening is seen.
    let mut feed = LiveFeed::new(sub, app.sessions.clone())
        .with_bridges(app.bridges.statuses())
        .with_registry(app.tool_registry.clone())
        .with_reloader(app.reloader())
        .with_kept_handles(kept);
    feed.refresh_tools(&mut state);
    let mut console = Console::new(state, theme, false);
    crate::run::workbench::load_saved(&mut console);
    if let Some(text) = unreadable {
        console.notice = Some(Notice { text, error: true });
    }
    match app.sessions.open(SessionOpener::Console).await {
        Ok(session) => {
            console.own = Some(session.number);
            console.selected = Some(session.number);
        }
        Err(e) => {
            console.notice = Some(Notice {
                text: format!("cannot open a session for you: {e}"),
                error: true,
            });
        }
    }
    (console, feed)
}

/// What the person's new session says of their conversations from before that can no longer
/// be continued (`gone`, newest first): said once, their handles let go of.
pub(crate) fn gone_of_yours(gone: &[GoneHandle], handle_seconds: u64) -> Option<String> {
    let (newest, older) = gone.split_first()?;
    let prefix = &newest.prefix;
    // A conversation not in the store was deleted: by the idle sweep (the usual way), by
    // `turnscope sessions delete`, or by its bot ending it.
    let (what, or_deleted) = if newest.expired {
        ("can no longer be continued", "")
    } else {
        ("is no longer in the store", "; or it was deleted")
    };
    let mut text = format!(
        "Your conversation {prefix} from before {what}: a conversation ends after \
         {handle_seconds} s with no line, and the store then deletes it (--handle-seconds, or \
         [server] handle_seconds in the config, keeps them longer){or_deleted}."
    );
    match older.len() {
        0 => {}
        1 => text.push_str(" 1 older conversation of yours can no longer be continued either."),
        n => text.push_str(&format!(
            " {n} older conversations of yours can no longer be continued either."
        )),
    }
    Some(text)
}

/// Runs the loop until the person quits, `stop` is cancelled or input ends. With no `feed`
/// (a replay) only input is handled.
pub async fn event_loop<B, S>(
    console: &mut Console,
    terminal: &mut Terminal<B>,
    feed: Option<&mut LiveFeed>,
    input: S,
    stop: CancellationToken,
) -> Result<(), ConsoleError>
where
    B: Backend,
    B::Error: Send + Sync + 'static,
    S: Stream<Item = std::io::Result<TermEvent>> + Unpin,
{
    event_loop_on(console, terminal, feed, Fixed(input), stop).await
}

/// [`event_loop`] over input that can let go of the terminal ([`Input`]), so `$EDITOR` can
/// have it for a while.
pub async fn event_loop_on<B, I>(
    console: &mut Console,
    terminal: &mut Terminal<B>,
    mut feed: Option<&mut LiveFeed>,
    mut input: I,
    stop: CancellationToken,
) -> Result<(), ConsoleError>
where
    B: Backend,
    B::Error: Send + Sync + 'static,
    I: Input,
{
    let mut tick = tokio::time::interval(Duration::from_millis(1000 / FPS));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    // Unbounded: one message per chat call, and each call is a line the person sent, so the
    // queue is bounded by typing; a finished chat must never be dropped or block its task.
    // The same holds for hand calls and resent requests, one per key press.
    let (chat_tx, mut chat_rx) = mpsc::unbounded_channel::<Done>();
    let (hand_tx, mut hand_rx) = mpsc::unbounded_channel::<HandDone>();
    let (resend_tx, mut resend_rx) = mpsc::unbounded_channel::<ResendDone>();
    let mut dirty = true;
    let mut pacer = Pacer::new();
    let mut notices = NoticeTimer::default();
    let mut last_fold = Instant::now();
    loop {
        tokio::select! {
            biased;
            _ = stop.cancelled() => break,
            event = input.next() => match event {
                Some(Ok(event)) => {
                    dirty = true;
                    pacer.input();
                    let mut next = console.handle(&event);
                    while let Some(action) = next.take() {
                        match action {
                            Action::Quit => return Ok(()),
                            Action::ReloadConfig => reload_config(feed.as_deref(), console),
                            Action::Suspend => {
                                input.release();
                                crate::run::terminal::hand_over();
                                crate::run::terminal::suspend();
                                take_terminal_back(terminal)?;
                                input.reclaim();
                            }
                            Action::EditExternally { key, text, url } => {
                                input.release();
                                crate::run::terminal::hand_over();
                                let edited = crate::run::workbench::edit_in_editor(&text).await;
                                take_terminal_back(terminal)?;
                                input.reclaim();
                                next = console.external_edit_done(key, url, edited);
                            }
                            action => match feed.as_deref().and_then(|f| f.remote.clone()) {
                                Some(remote) => remote.perform(action, console, &chat_tx),
                                None => {
                                    let sessions = feed.as_deref().and_then(LiveFeed::sessions);
                                    let kept = feed.as_deref().and_then(LiveFeed::kept_handles);
                                    let outbox = (&hand_tx, &resend_tx);
                                    if let Some(action) = crate::run::workbench::perform(
                                        action, console, sessions, outbox,
                                    ) {
                                        perform(action, console, (sessions, kept), &chat_tx, &stop);
                                    }
                                }
                            },
                        }
                    }
                }
                Some(Err(e)) => return Err(ConsoleError::ReadInput(e)),
                None => break,
            },
            Some(done) = chat_rx.recv() => {
                // What the call published before it returned (an attached console's turn
                // ended `not answered`) is folded first: the line it took or not is judged on
                // the transcript as the call left it.
                if let Some(feed) = feed.as_deref_mut() {
                    feed.fold_ready(&mut console.state);
                }
                finished(console, done);
                dirty = true;
            }
            Some((id, result)) = hand_rx.recv() => {
                console.hand_call_done(id, result);
                dirty = true;
            }
            Some((id, key, body, answer)) = resend_rx.recv() => {
                console.resend_ended(id, key, body, answer);
                dirty = true;
            }
            _ = tick.tick() => {
                if let Some(feed) = feed.as_deref_mut() {
                    dirty |= feed.refresh(&mut console.state, console.selected, console.own);
                    if let Some(remote) = feed.remote.clone() {
                        let unseen = notices.unseen_failure(console);
                        remote.settle(console);
                        NoticeTimer::keep_failure(console, unseen);
                    }
                }
                dirty |= notices.tick(console, Instant::now());
                console.settle();
                if pacer.should_draw(dirty) {
                    console.before_draw();
                    terminal
                        .draw(|f| crate::draw::draw(f, console))
                        .map_err(|e| ConsoleError::Draw(e.to_string()))?;
                    dirty = false;
                    pacer.drew();
                }
            }
            event = next_event(feed.as_deref_mut(), last_fold + FOLD_EVERY) => {
                if let (Some(event), Some(feed)) = (event, feed.as_deref_mut()) {
                    let n = feed.fold(&mut console.state, &event);
                    console.notice_reloads();
                    pacer.events(n);
                    last_fold = Instant::now();
                    dirty = true;
                }
            }
        }
    }
    Ok(())
}

/// Takes the terminal back after handing it over (`$EDITOR`, Ctrl+Z) and clears it for the
/// next draw, through a resize to its own size: `clear` would ask the terminal where its
/// cursor is, an answer that can be lost to the input reader; this clears without asking.
fn take_terminal_back<B>(terminal: &mut Terminal<B>) -> Result<(), ConsoleError>
where
    B: Backend,
    B::Error: Send + Sync + 'static,
{
    crate::run::terminal::take_back().map_err(ConsoleError::Setup)?;
    let size = terminal
        .size()
        .map_err(|e| ConsoleError::Draw(e.to_string()))?;
    terminal
        .resize(ratatui::layout::Rect::new(0, 0, size.width, size.height))
        .map_err(|e| ConsoleError::Draw(e.to_string()))
}

/// How long a notice of what happened stays on screen.
const NOTICE_SHOWN: Duration = Duration::from_secs(6);
/// How long a failure stays (Esc clears either sooner).
const ERROR_SHOWN: Duration = Duration::from_secs(12);

/// How long a notice stays at least once the person opens another view (a turn view, help,
/// another pane or session): long enough to have been read, then it no longer covers what
/// they went to look at.
const SHOWN_BEFORE_A_NEW_VIEW: Duration = Duration::from_millis(1500);

/// Clears a notice once it has been on screen long enough, or once the person opened another
/// view after reading it; a question waiting for its answer (`q` or `d` again, Enter again
/// into another client's session) stays. The view has no clock: this loop keeps time for it.
#[derive(Default)]
struct NoticeTimer {
    shown: Option<(Notice, Instant, ViewOpen)>,
}

/// What the person is looking at: which pane has the focus and which inspector, the selected
/// session, and the overlays open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ViewOpen {
    focus: crate::view::ids::PaneId,
    inspector: crate::view::ids::PaneId,
    selected: Option<u64>,
    overlays: [bool; 5],
}

impl ViewOpen {
    fn of(c: &Console) -> Self {
        Self {
            focus: c.focus,
            inspector: c.inspector,
            selected: c.selected,
            overlays: [
                c.turn_view.is_some(),
                c.help.open,
                c.editor.is_some(),
                c.variants_view.is_some(),
                c.zoom,
            ],
        }
    }
}

impl NoticeTimer {
    /// The notice when it tells of a failure and was never drawn yet (set since the last
    /// tick: a refused line's answer arrived).
    fn unseen_failure(&self, console: &Console) -> Option<Notice> {
        let notice = console.notice.as_ref().filter(|n| n.error)?;
        let seen = self.shown.as_ref().is_some_and(|(seen, ..)| seen == notice);
        (!seen).then(|| notice.clone())
    }

    /// Puts an `unseen` failure back before the notice that replaced it before it was ever
    /// drawn (what the attached bot's refusal did next: its session let go), so the person
    /// reads why as well as what follows; the notice goes with the failure's time.
    fn keep_failure(console: &mut Console, unseen: Option<Notice>) {
        let Some(failure) = unseen else {
            return;
        };
        match &console.notice {
            Some(now) if *now != failure => {
                let text = format!("{}; then: {}", failure.text, now.text);
                console.notice = Some(Notice { text, error: true });
            }
            _ => {}
        }
    }

    /// Whether it cleared the notice, at `now`.
    fn tick(&mut self, console: &mut Console, now: Instant) -> bool {
        let Some(notice) = &console.notice else {
            self.shown = None;
            return false;
        };
        let asking = console.quit_asked
            || console.close_asked.is_some()
            || console.input_line.pending_send.is_some();
        let view = ViewOpen::of(console);
        match &self.shown {
            Some((seen, since, over)) if seen == notice => {
                let bound = if *over != view {
                    SHOWN_BEFORE_A_NEW_VIEW
                } else if notice.error {
                    ERROR_SHOWN
                } else {
                    NOTICE_SHOWN
                };
                if !asking && now.duration_since(*since) >= bound {
                    console.notice = None;
                    self.shown = None;
                    return true;
                }
                false
            }
            _ => {
                self.shown = Some((notice.clone(), now, view));
                false
            }
        }
    }
}

/// `R`: reloads the server's config in a task (the outcome comes back as a bus event and
/// its notice); an attached console has no config of its own to reload.
fn reload_config(feed: Option<&LiveFeed>, console: &mut Console) {
    match feed.and_then(LiveFeed::reloader) {
        Some(reloader) => {
            let reloader = reloader.clone();
            tokio::spawn(async move {
                reloader.reload(ReloadCause::Console).await;
            });
        }
        None => {
            console.notice = Some(Notice {
                text: "this console does not run the server: reload its config there (save the file, or SIGHUP)".into(),
                error: true,
            });
        }
    }
}

/// Decides when to draw: when something changed, at most [`FPS`] times a second, or
/// [`FLOOD_FPS`] while events flood in and the person is not typing; and once a second anyway,
/// since ages and idle times change with nothing happening.
struct Pacer {
    last_draw: Instant,
    last_input: Instant,
    window_start: Instant,
    window_events: u64,
    flooded: bool,
}

impl Pacer {
    fn new() -> Self {
        let now = Instant::now();
        Self {
            last_draw: now,
            last_input: now,
            window_start: now,
            window_events: 0,
            flooded: false,
        }
    }

    fn input(&mut self) {
        self.last_input = Instant::now();
    }

    fn events(&mut self, n: usize) {
        self.window_events += n as u64;
        if self.window_start.elapsed() >= Duration::from_secs(1) {
            self.flooded = self.window_events >= FLOOD_EVENTS;
            self.window_events = 0;
            self.window_start = Instant::now();
        }
    }

    fn should_draw(&mut self, dirty: bool) -> bool {
        if self.window_start.elapsed() >= Duration::from_secs(2) {
            self.flooded = false;
        }
        let typing = self.last_input.elapsed() < Duration::from_secs(1);
        let fps = if self.flooded && !typing {
            FLOOD_FPS
        } else {
            FPS
        };
        let since = self.last_draw.elapsed();
        (dirty
            && since >= Duration::from_millis(1000 / fps).saturating_sub(Duration::from_millis(5)))
            || since >= Duration::from_secs(1)
    }

    fn drew(&mut self) {
        self.last_draw = Instant::now();
    }
}

/// The next bus event, not before `not_before`.
async fn next_event(
    feed: Option<&mut LiveFeed>,
    not_before: Instant,
) -> Option<Arc<turnscope::observe::Event>> {
    match feed {
        Some(feed) => {
            if not_before > Instant::now() {
                tokio::time::sleep_until(not_before.into()).await;
            }
            feed.next().await
        }
        None => std::future::pending().await,
    }
}

/// Folds what a console task handed back into the console.
fn finished(console: &mut Console, done: Done) {
    match done {
        Done::Chat(session, line, result) => console.chat_done(session, &line, *result),
        Done::Hand((id, result)) => console.hand_call_done(id, result),
        Done::Opened {
            result: Ok(number),
            replacing,
            chatting,
            ..
        } => {
            console.selected = Some(number);
            console.input_line.starting = false;
            if console.own.is_none() {
                // The person's first session (an attached console opens it with their line).
                console.own = Some(number);
            }
            if chatting {
                console.chat_started(number);
            }
            console.notice = Some(Notice {
                text: match replacing {
                    Some(old) => {
                        console.own = Some(number);
                        format!("your session #{old} had ended; opened #{number} for you")
                    }
                    None => {
                        // Opened for the person (`n`): their line goes into it unasked.
                        console.input_line.confirmed.insert(number);
                        format!("opened #{number} for you")
                    }
                },
                error: false,
            });
        }
        Done::Reopened {
            stored,
            number,
            prefix,
        } => {
            if console.selected == Some(stored) {
                console.selected = Some(number);
            }
            console.own = Some(number);
            console.chat_started(number);
            console.notice = Some(Notice {
                text: format!("your stored session {prefix} is open again as #{number}"),
                error: false,
            });
        }
        Done::Notice { text, error } => console.notice = Some(Notice { text, error }),
        Done::Opened {
            result: Err(text),
            unsent,
            ..
        } => {
            console.input_line.starting = false;
            let text = match unsent {
                Some(line) if console.give_back_line(&line) => {
                    format!("{text} (your line is back in the input line)")
                }
                // Something was typed since: the line is told rather than put over it.
                Some(line) => format!("{text} (your line was: {line})"),
                None => text,
            };
            console.notice = Some(Notice { text, error: true });
        }
    }
}

pub(crate) fn perform(
    action: Action,
    console: &mut Console,
    (sessions, kept): (Option<&Sessions>, Option<&KeptHandles>),
    chat_tx: &mpsc::UnboundedSender<Done>,
    stop: &CancellationToken,
) {
    if let Action::Export { session, text } = &action {
        console.notice = Some(crate::run::output::export_to_file(*session, text, "txt"));
        return;
    }
    if let Action::ExportTest { session, text } = &action {
        console.notice = Some(crate::run::output::export_to_file(
            *session,
            text,
            "test.toml",
        ));
        return;
    }
    if let Action::Copy { what, text } = &action {
        console.notice = Some(crate::run::output::copy(what, text));
        return;
    }
    let Some(sessions) = sessions else {
        return;
    };
    match action {
        Action::Quit
        | Action::Export { .. }
        | Action::ExportTest { .. }
        | Action::Copy { .. }
        // The workbench's own (`run::workbench::perform`) and the loop's.
        | Action::HandCall { .. }
        | Action::SaveCalls { .. }
        | Action::Resend { .. }
        | Action::EditExternally { .. }
        | Action::Suspend
        | Action::ReloadConfig => {}
        Action::Yank { session } => {
            let stored = console.state.session(session).filter(|r| r.is_stored());
            let handle = match stored {
                // The person's own from before a restart: the handle the console kept.
                Some(_) => kept.and_then(|k| k.handle_of(session)),
                None => sessions.by_number(session).map(|s| s.handle()),
            };
            let shown = match stored {
                Some(row) => format!("stored session {}", row.handle_prefix),
                None => format!("#{session}"),
            };
            console.notice = Some(match handle {
                Some(handle) => crate::run::output::copy_handle(&format!("{shown}'s handle"), &handle),
                None if stored.is_some() => Notice {
                    text: format!(
                        "{shown}'s handle is not here: the store keeps only its hash, and the client that \
                         opened it holds it"
                    ),
                    error: true,
                },
                None => Notice {
                    text: format!("#{session} is closed; its handle is gone"),
                    error: true,
                },
            });
        }
        Action::NewSession => {
            let sessions = sessions.clone();
            let tx = chat_tx.clone();
            tokio::spawn(async move {
                let result = sessions
                    .open(SessionOpener::Console)
                    .await
                    .map(|s| s.number)
                    .map_err(|e| e.to_string());
                let _ = tx.send(Done::Opened {
                    result,
                    replacing: None,
                    chatting: false,
                    unsent: None,
                });
            });
        }
        // Only an attached console sends it (`Console::start_on_first_line`): this one opened
        // the person's session as it started, and reopens it when a line finds it ended.
        Action::StartWith { line } => {
            console.input_line.starting = false;
            console.give_back_line(&line);
        }
        Action::Close { session } => {
            if let Some(s) = sessions.by_number(session) {
                // Closing deletes it from the store: its kept handle goes with it, so the
                // next start does not say it was lost.
                if let Some(Err(text)) = kept.map(|k| k.forget(&s.handle())) {
                    console.notice = Some(Notice { text, error: true });
                }
                let sessions = sessions.clone();
                tokio::spawn(async move {
                    sessions.close(&s, "closed from the console").await;
                });
            }
        }
        Action::Chat { session, line } => {
            let target = sessions.by_number(session);
            if target.is_none()
                && let Some(handle) = kept.and_then(|k| k.handle_of(session))
            {
                reopen_and_chat(sessions, handle, session, line, chat_tx, stop);
                return;
            }
            if target.is_none() && Some(session) != console.own {
                console.notice = Some(Notice {
                    text: format!(
                        "session #{session} is not open here; select an open session in Sessions (1) (a stored \
                         one opens again when its client chats on its handle)"
                    ),
                    error: true,
                });
                return;
            }
            if let Some(target) = &target {
                console.chat_started(target.number);
                if matches!(target.opener, SessionOpener::Console)
                    && let Some(Err(text)) = kept.map(|k| k.keep(&target.handle()))
                {
                    console.notice = Some(Notice { text, error: true });
                }
            }
            let sessions = sessions.clone();
            let tx = chat_tx.clone();
            let cancel = stop.child_token();
            let kept = kept.cloned();
            tokio::spawn(async move {
                // The person's own session had ended: a new one takes its place.
                let target = match target {
                    Some(target) => target,
                    None => match sessions.open(SessionOpener::Console).await {
                        Ok(s) => {
                            if let Some(Err(text)) = kept.map(|k| k.keep(&s.handle())) {
                                let _ = tx.send(Done::Notice { text, error: true });
                            }
                            let _ = tx.send(Done::Opened {
                                result: Ok(s.number),
                                replacing: Some(session),
                                chatting: true,
                                unsent: None,
                            });
                            s
                        }
                        Err(e) => {
                            let _ = tx.send(Done::Opened {
                                result: Err(e.to_string()),
                                replacing: Some(session),
                                chatting: true,
                                unsent: Some(line),
                            });
                            return;
                        }
                    },
                };
                let result = sessions
                    .chat_on(&target, &line, None, &cancel)
                    .await
                    .map_err(|e| e.to_string());
                let _ = tx.send(Done::Chat(target.number, line, Box::new(result)));
            });
        }
        Action::Interrupt { session } => {
            if let Some(s) = sessions.by_number(session) {
                tokio::spawn(async move {
                    s.bot().interrupt().await;
                });
            }
        }
    }
}

/// Reopens the person's stored conversation `handle` (shown as row `stored`) and sends
/// `line` into it, as a client's chat on its handle would: the loop is told the number it
/// opened as, then the chat's outcome. A reopen that fails (the conversation expired or was
/// deleted since it was listed) gives the line back.
fn reopen_and_chat(
    sessions: &Sessions,
    handle: String,
    stored: u64,
    line: String,
    chat_tx: &mpsc::UnboundedSender<Done>,
    stop: &CancellationToken,
) {
    let sessions = sessions.clone();
    let tx = chat_tx.clone();
    let cancel = stop.child_token();
    tokio::spawn(async move {
        let prefix = handle.chars().take(8).collect::<String>();
        let target = match sessions.find(&handle).await {
            Ok(target) => target,
            Err(e) => {
                let why = match e {
                    // Its own words tell an MCP client to call start.
                    turnscope::sessions::ChatError::NoSession { handle_seconds, .. } => format!(
                        "it ended since it was listed (no line for {handle_seconds} s, or it was \
                         closed or deleted); send your line to your session or a new one (n)"
                    ),
                    turnscope::sessions::ChatError::Ended { reason, .. } => format!(
                        "it ended since it was listed ({reason}); send your line to your \
                         session or a new one (n)"
                    ),
                    e => e.to_string(),
                };
                let _ = tx.send(Done::Opened {
                    result: Err(format!(
                        "cannot go on with your stored session {prefix}: {why}"
                    )),
                    replacing: None,
                    chatting: true,
                    unsent: Some(line),
                });
                return;
            }
        };
        let _ = tx.send(Done::Reopened {
            stored,
            number: target.number,
            prefix,
        });
        let result = sessions
            .chat_on(&target, &line, None, &cancel)
            .await
            .map_err(|e| e.to_string());
        let _ = tx.send(Done::Chat(target.number, line, Box::new(result)));
    });
}

/// The console's subscription, taken on `bus` before the app starts (see [`run_with`]).
pub fn listen_early(bus: &turnscope::observe::Bus) -> Subscription {
    bus.subscribe()
}

/// Runs the console over a started app until the person quits, then ends every session
/// (`App::shutdown`). The terminal is restored even when the console panics.
pub async fn run(app: App, theme: Theme) -> Result<(), ConsoleError> {
    let sub = app.bus.subscribe();
    run_with(app, theme, sub).await
}

/// Like [`run`] with a subscription taken before the app started ([`listen_early`]): warnings
/// published while it started (bridges, tool sources) reach the Log pane.
pub async fn run_with(app: App, theme: Theme, sub: Subscription) -> Result<(), ConsoleError> {
    // The person holds the sessions this console opens: they do not idle out under them.
    app.sessions.hold_console_sessions();
    let (console, feed) = attach_with(&app, theme, sub).await;
    let (terminal, guard) = match crate::run::terminal::enter() {
        Ok(t) => t,
        Err(e) => {
            app.shutdown().await;
            return Err(e);
        }
    };
    let stop = CancellationToken::new();
    let reloader = app.reloader();
    let mut handlers = super::signals::Signals::new();
    let terminals = turnscope::app::hangup::Terminals::now();
    let ui_stop = stop.clone();
    let mut ui = tokio::spawn(async move {
        let (mut console, mut feed, mut terminal) = (console, feed, terminal);
        let result = event_loop_on(
            &mut console,
            &mut terminal,
            Some(&mut feed),
            Tty::new(),
            ui_stop,
        )
        .await;
        crate::run::terminal::let_go(terminal, result, &terminals)
    });
    // Signals are taken here, beside the screen (which goes on drawing a drain: the header
    // says "draining", the turns in flight finish in sight).
    // A quit (`q`, Ctrl-C, the terminal hung up) waits for no turn; a SIGTERM's drain does.
    let mut cause = StopCause::ConsoleQuit;
    let outcome = loop {
        tokio::select! {
            outcome = &mut ui => break outcome,
            signal = handlers.next() => match signal {
                ConsoleSignal::Reload => {
                    reloader.reload(ReloadCause::Signal).await;
                }
                ConsoleSignal::Quit => stop.cancel(),
                ConsoleSignal::Drain => {
                    let bound = app.drain_bound().await;
                    tokio::select! {
                        _ = app.drain() => cause = StopCause::DrainBound(bound),
                        // A second signal stops at once; the person may quit meanwhile.
                        _ = handlers.next() => cause = StopCause::SecondSignal,
                        outcome = &mut ui => break outcome,
                    }
                    stop.cancel();
                }
            },
        }
    };
    drop(guard);
    let sessions = app.sessions.clone();
    let stopped = app.shutdown().await;
    // The terminal is the shell's again: what the stop cut, and where the conversations went.
    // Written, not `eprintln!`: that panics when the terminal hung up (its stderr is gone),
    // and a note nobody can read is no reason to fail.
    let clean = matches!(outcome, Ok(Ok(())));
    for line in closing_lines(stopped, cause, &sessions.store_status(), clean) {
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), "{line}");
    }
    match outcome {
        Ok(result) => result,
        Err(e) => Err(ConsoleError::Panicked(e.to_string())),
    }
}

/// The lines the console leaves on stderr once it has let go of the terminal: the turns in
/// flight its stop cut (`cause`: what ended the wait for them), as the headless server says
/// it ([`Stopped::cut_line`]), then, after a `clean` end (not an error), where the
/// conversations were kept.
pub fn closing_lines(
    stopped: Stopped,
    cause: StopCause,
    store: &turnscope::sessions::StoreStatus,
    clean: bool,
) -> Vec<String> {
    let mut lines: Vec<String> = stopped.cut_line(cause).into_iter().collect();
    if clean {
        lines.push(crate::run::output::kept_note(store));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notice_goes_after_a_few_seconds_and_a_question_stays() {
        let mut c = Console::new(
            crate::state::ConsoleState::default(),
            crate::theme::Theme::default(),
            false,
        );
        let mut timer = NoticeTimer::default();
        let t0 = Instant::now();
        c.notice = Some(Notice {
            text: "copied".into(),
            error: false,
        });
        assert!(!timer.tick(&mut c, t0));
        assert!(!timer.tick(&mut c, t0 + Duration::from_secs(3)));
        assert!(timer.tick(&mut c, t0 + NOTICE_SHOWN));
        assert_eq!(c.notice, None);
        c.notice = Some(Notice {
            text: "q again quits".into(),
            error: true,
        });
        c.quit_asked = true;
        timer.tick(&mut c, t0);
        assert!(
            !timer.tick(&mut c, t0 + ERROR_SHOWN * 2),
            "a question waits"
        );
        c.quit_asked = false;
        assert!(timer.tick(&mut c, t0 + ERROR_SHOWN));
        // A failure read, then another view opened: it goes, not covering the new view for
        // the rest of its time; one just shown stays a moment even so.
        c.notice = Some(Notice {
            text: "not sent".into(),
            error: true,
        });
        timer.tick(&mut c, t0);
        c.help.open = true;
        assert!(!timer.tick(&mut c, t0 + Duration::from_millis(500)));
        assert!(timer.tick(&mut c, t0 + SHOWN_BEFORE_A_NEW_VIEW));
        c.notice = Some(Notice {
            text: "not sent".into(),
            error: true,
        });
        timer.tick(&mut c, t0);
        assert!(
            !timer.tick(&mut c, t0 + Duration::from_secs(5)),
            "in the same view it stays its time"
        );
    }

    /// A failure replaced before it was ever drawn (the bot's refusal of a line, then the
    /// session it refused let go in the same tick) is kept before what replaced it; one
    /// already shown, or a notice that is no failure, is replaced as before.
    #[test]
    fn a_failure_replaced_before_it_was_drawn_is_kept_before_what_followed() {
        let mut c = Console::new(
            crate::state::ConsoleState::default(),
            crate::theme::Theme::default(),
            false,
        );
        let mut timer = NoticeTimer::default();
        let refused = Notice {
            text: "the bot refused the line: unknown handle".into(),
            error: true,
        };
        let let_go = Notice {
            text: "#3 is unknown to the bot now".into(),
            error: false,
        };
        c.notice = Some(refused.clone());
        let unseen = timer.unseen_failure(&c);
        c.notice = Some(let_go.clone());
        NoticeTimer::keep_failure(&mut c, unseen);
        let kept = c.notice.clone().unwrap();
        assert!(kept.error, "{kept:?}");
        assert_eq!(
            kept.text,
            "the bot refused the line: unknown handle; then: #3 is unknown to the bot now"
        );
        // Drawn (the timer saw it): replaced as before.
        c.notice = Some(refused.clone());
        timer.tick(&mut c, Instant::now());
        let unseen = timer.unseen_failure(&c);
        assert_eq!(unseen, None);
        c.notice = Some(let_go.clone());
        NoticeTimer::keep_failure(&mut c, unseen);
        assert_eq!(c.notice, Some(let_go.clone()));
        // A notice that is no failure is replaced, unseen or not.
        c.notice = Some(Notice {
            text: "started #4".into(),
            error: false,
        });
        let unseen = timer.unseen_failure(&c);
        c.notice = Some(let_go.clone());
        NoticeTimer::keep_failure(&mut c, unseen);
        assert_eq!(c.notice, Some(let_go));
    }

    /// A stop that cut a turn says so before where the conversations went, as the headless
    /// server's line; one that cut nothing, or ended in an error, leaves what it left before.
    #[test]
    fn the_closing_lines_say_a_cut_turn_before_where_the_conversations_went() {
        let store = turnscope::sessions::StoreStatus {
            url: "sqlite:/tmp/s.sqlite3".into(),
            durable: true,
            degraded: None,
            warning: None,
        };
        let cut = Stopped { cut: 1, kept: true };
        let lines = closing_lines(cut, StopCause::ConsoleQuit, &store, true);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(Some(lines[0].clone()), cut.cut_line(StopCause::ConsoleQuit));
        assert!(
            lines[0].starts_with("turnscope: cut 1 turn in flight at the console's quit"),
            "{lines:?}"
        );
        assert!(lines[1].starts_with("turnscope: the conversations are kept in"));
        let none = Stopped { cut: 0, kept: true };
        assert_eq!(
            closing_lines(none, StopCause::ConsoleQuit, &store, true).len(),
            1
        );
        let failed = closing_lines(cut, StopCause::SecondSignal, &store, false);
        assert_eq!(failed.len(), 1, "{failed:?}");
        assert!(failed[0].contains("at a second signal"), "{failed:?}");
    }

    /// A line into the person's stored conversation that ended since it was listed (idle
    /// past its lifetime, or deleted, before the listing caught up) is said in the console's
    /// words, not MCP's "call start", and the line is given back.
    #[tokio::test]
    async fn a_line_into_a_stored_conversation_that_ended_since_it_was_listed_comes_back() {
        let mut config = turnscope::config::Config::default();
        config.server.port = 0;
        config.model.pace = 0.0;
        let app = App::start(&config, turnscope::observe::Bus::default())
            .await
            .expect("app starts");
        let (tx, mut rx) = mpsc::unbounded_channel();
        let gone = uuid::Uuid::new_v4().to_string();
        reopen_and_chat(
            &app.sessions,
            gone.clone(),
            7,
            "what was the word?".into(),
            &tx,
            &CancellationToken::new(),
        );
        let done = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .expect("an answer")
            .expect("sent");
        let Done::Opened {
            result: Err(said),
            unsent,
            ..
        } = done
        else {
            panic!("not refused");
        };
        assert!(
            said.starts_with(&format!(
                "cannot go on with your stored session {}: it ended since it was listed",
                &gone[..8]
            )),
            "{said}"
        );
        assert!(!said.contains("Call start"), "{said}");
        assert_eq!(unsent.as_deref(), Some("what was the word?"));
    }
}
