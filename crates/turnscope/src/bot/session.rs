//! One running conversation: a pipeline, its context and its turns. [`BotSession`] says a line,
//! interrupts the turn in flight, and ends the conversation.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::aggregators::{SharedContext, lock};
use super::collector::{TurnBoard, finish};
use super::context::Context;
use super::settings::SharedSettings;
use super::turn::{Turn, TurnEnd};
use crate::observe::{Event, event::now_us};
use crate::pipeline::{Frame, FrameBody, Observer, Pipeline};
use crate::tools::{SessionControl, Tools};

/// How long an interruption or a drain may take before we stop waiting (pipecat uses 5 s).
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// How long [`BotSession::settle`] waits for a finished turn's frames to pass.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(1);

/// A live conversation with a bot.
pub struct BotSession {
    pipeline: Pipeline,
    board: Arc<TurnBoard>,
    context: SharedContext,
    next_turn: AtomicU64,
    observer: Observer,
    control: SessionControl,
    own_tools: Option<Arc<dyn Tools>>,
    /// The bot's settings, read once per line (see `say`), when the session has a bot.
    settings: Option<SharedSettings>,
    /// The settings of the session's latest turn, which its model stage runs it on.
    turn_settings: Option<SharedSettings>,
    greeting: Option<String>,
    /// The latest ended turn (its id + 1; 0: none) after whose end a drain got through: its
    /// frames have all left the pipeline, so draining again before the next line would only
    /// send one more `Flush` through every processor (see [`BotSession::drain_after_turn`]).
    settled: AtomicU64,
}

impl BotSession {
    pub(crate) fn new(
        pipeline: Pipeline,
        board: Arc<TurnBoard>,
        context: SharedContext,
        observer: Observer,
        next_turn: u64,
    ) -> Self {
        Self {
            pipeline,
            board,
            context,
            next_turn: AtomicU64::new(next_turn),
            observer,
            control: SessionControl::new(),
            own_tools: None,
            settings: None,
            turn_settings: None,
            greeting: None,
            settled: AtomicU64::new(0),
        }
    }

    /// Reads `settings` once per line and hands what it read to the model stage through
    /// `turn_settings`; `greeting` is what the session opened with.
    pub(crate) fn with_settings(
        mut self,
        settings: SharedSettings,
        turn_settings: SharedSettings,
        greeting: Option<String>,
    ) -> Self {
        self.settings = Some(settings);
        self.turn_settings = Some(turn_settings);
        self.greeting = greeting;
        self
    }

    /// The config version its next line runs on (`None` for a bot built without settings).
    pub fn config_version(&self) -> Option<u64> {
        self.settings.as_ref().map(|s| s.load().version)
    }

    /// The greeting the session opened with, if any.
    pub fn greeting(&self) -> Option<&str> {
        self.greeting.as_deref()
    }

    /// Uses `control` as the session's control handle, and `own_tools` as tools this session
    /// owns (closed when it ends).
    pub(crate) fn with_control(
        mut self,
        control: SessionControl,
        own_tools: Option<Arc<dyn Tools>>,
    ) -> Self {
        self.control = control;
        self.own_tools = own_tools;
        self
    }

    /// The session's control handle: whether a tool asked it to end, and when it closed.
    pub fn control(&self) -> &SessionControl {
        &self.control
    }

    /// Sends a user line: interrupts a turn in flight (and drains the pipeline so nothing of
    /// it is left), then opens a new turn on the bot's settings as they are now and returns
    /// it.
    pub async fn say(&self, line: &str) -> Arc<Turn> {
        self.interrupt().await;
        // Also lets the assistant aggregator commit the previous reply before the new line.
        self.drain_after_turn(DRAIN_TIMEOUT).await;
        let version = self.take_settings();
        let id = self.next_turn.fetch_add(1, Ordering::Relaxed);
        let turn = Turn::on_version(id, line, version);
        self.board.open(turn.clone());
        self.observer.bus.publish_with(|| Event::TurnStarted {
            session: self.observer.session,
            turn: id,
            line: line.to_string(),
            at_us: now_us(),
        });
        self.pipeline
            .push(Frame::new(id, FrameBody::UserLine(line.into())));
        // An ended session has no stage left to end this turn (see `end`).
        if self.control.is_closed() {
            finish(&turn, TurnEnd::SessionEnded, &self.observer);
        }
        turn
    }

    /// Reads the bot's settings for the turn about to start (one atomic load), lays its
    /// system prompt and history window on the context (idle now: the pipeline was drained)
    /// and hands them to the model stage. Returns their version.
    fn take_settings(&self) -> Option<u64> {
        let (Some(settings), Some(turn_settings)) = (&self.settings, &self.turn_settings) else {
            return None;
        };
        let now = settings.load_full();
        {
            let mut ctx = lock(&self.context);
            if ctx.system.as_deref() != now.system_prompt.as_deref() {
                // The next request's record carries the new prompt (`bot::wire::WireTrail`
                // sees it changed): the history is not told again, so the earlier requests
                // keep theirs (telling all from message 0 again gave them the new one: tour M).
                ctx.system.clone_from(&now.system_prompt);
            }
            ctx.window = now.history_window;
        }
        let version = now.version;
        turn_settings.store(now);
        Some(version)
    }

    /// Interrupts the turn in flight, if any, and waits until the pipeline has dropped it.
    /// Returns whether there was one.
    pub async fn interrupt(&self) -> bool {
        let Some(turn) = self.board.current().filter(|t| !t.is_done()) else {
            return false;
        };
        self.pipeline.interrupt(turn.id);
        if tokio::time::timeout(DRAIN_TIMEOUT, turn.done())
            .await
            .is_err()
        {
            turn.finish(TurnEnd::Interrupted);
        }
        self.drain_after_turn(DRAIN_TIMEOUT).await;
        true
    }

    /// Drains the pipeline (waits, `timeout` at most, until every frame queued so far has
    /// left it) unless a drain already got through after the latest turn ended: nothing has
    /// been pushed since (a line opens a new turn, which is not ended), and the turn's own
    /// frames were all ahead of that drain's `Flush`. So a chat that settles its turn (to
    /// store the reply) and then says the next line sends one `Flush` between them, not two.
    /// Returns whether the pipeline is drained.
    async fn drain_after_turn(&self, timeout: Duration) -> bool {
        let ended = self
            .board
            .current()
            .filter(|turn| turn.is_done())
            .map(|turn| turn.id + 1);
        if ended.is_some_and(|mark| self.settled.load(Ordering::Acquire) == mark) {
            return true;
        }
        let drained = self.pipeline.drain(timeout).await;
        if let (true, Some(mark)) = (drained, ended) {
            self.settled.store(mark, Ordering::Release);
        }
        drained
    }

    /// The id the next line's turn gets.
    pub fn next_turn_id(&self) -> u64 {
        self.next_turn.load(Ordering::Relaxed)
    }

    /// Waits (1 s at most) until every frame of the turns so far has left the pipeline, so the
    /// context holds the last reply (the assistant aggregator commits it after the turn
    /// ended). Returns whether it settled.
    pub async fn settle(&self) -> bool {
        if self.pipeline.is_finished() {
            return false;
        }
        self.drain_after_turn(SETTLE_TIMEOUT).await
    }

    /// The history messages numbered above `after` and the number of the first, with how
    /// many the window has forgotten (see [`Context::messages_after`]).
    pub fn history_after(&self, after: u64) -> (u64, Vec<super::Message>, u64) {
        let context = lock(&self.context);
        let (first, messages) = context.messages_after(after);
        (first, messages, context.forgotten())
    }

    /// Ends the turn in flight, if any, with `end` (no stage ends it otherwise), as
    /// [`BotSession::end`] would with "session ended".
    pub fn end_turn_as(&self, end: TurnEnd) {
        if let Some(turn) = self.board.current() {
            finish(&turn, end, &self.observer);
        }
    }

    /// The most recent turn, done or not.
    pub fn current_turn(&self) -> Option<Arc<Turn>> {
        self.board.current()
    }

    /// A copy of the context (system prompt and history).
    pub fn context(&self) -> Context {
        lock(&self.context).clone()
    }

    /// Frames of older turns that arrived late and were ignored.
    pub fn late_frames(&self) -> u64 {
        self.board.late_frames()
    }

    /// Whether the pipeline has stopped.
    pub fn is_finished(&self) -> bool {
        self.pipeline.is_finished()
    }

    /// Whether a tool asked the conversation to end (`end_session`): its pipeline stops once
    /// the turn is over, and no new line is taken meanwhile (one sent right after the
    /// goodbye's reply would otherwise race the stop).
    pub fn end_requested(&self) -> bool {
        self.control.is_end_requested()
    }

    /// The session number events carry.
    pub fn number(&self) -> u64 {
        self.observer.session
    }

    /// Ends the conversation: the turn in flight ends as "session ended", then the pipeline
    /// stops and the tools the session owns are closed.
    pub async fn end(&self) {
        self.pipeline.stop("session ended", DRAIN_TIMEOUT).await;
        self.control.mark_closed();
        // A line said while the pipeline was stopping opened a turn no stage will end. Either
        // it is opened before this look at the board, or its `say` sees the mark above.
        if let Some(turn) = self.board.current() {
            finish(&turn, TurnEnd::SessionEnded, &self.observer);
        }
        if let Some(tools) = &self.own_tools {
            tools.close().await;
        }
    }
}
