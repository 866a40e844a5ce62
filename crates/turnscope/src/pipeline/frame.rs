//! Frames: the messages that flow through a pipeline.
//!
//! Every frame has a kind ([`FrameKind`]), a direction, a unique sequence id and the id of the
//! turn it belongs to (when it crossed each link is its journey's, kept while someone
//! watches). System frames overtake queued data and control frames and are never dropped;
//! data and control frames keep their order and are dropped by an interruption unless
//! `FrameBody::is_uninterruptible` says otherwise.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::oneshot;

use super::journey::Journey;
use crate::observe::ModelResponseInfo;
use crate::tools::{ToolCall, ToolCallRecord};

/// Id of a turn within one pipeline; 0 means "no turn".
pub type TurnId = u64;

static NEXT_FRAME_ID: AtomicU64 = AtomicU64::new(1);

/// How a frame is queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// Handled at once, ahead of queued frames; never dropped.
    System,
    /// Ordered; dropped by an interruption unless uninterruptible.
    Data,
    /// Ordered like data; brackets and lifecycle.
    Control,
}

impl FrameKind {
    /// Lower-case name, as events show it.
    pub fn as_str(self) -> &'static str {
        match self {
            FrameKind::System => "system",
            FrameKind::Data => "data",
            FrameKind::Control => "control",
        }
    }
}

/// Which way a frame travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// From the input towards the output.
    Downstream,
    /// From the output back towards the input.
    Upstream,
}

impl Direction {
    /// `down` or `up`.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Downstream => "down",
            Direction::Upstream => "up",
        }
    }
}

/// A waiter for a flush: completed when the flush frame reaches the end of the pipeline.
#[derive(Debug)]
pub struct FlushToken(pub(crate) Option<oneshot::Sender<()>>);

impl FlushToken {
    /// A token and the receiver that completes when the flush has passed everything.
    pub fn new() -> (Self, oneshot::Receiver<()>) {
        let (tx, rx) = oneshot::channel();
        (Self(Some(tx)), rx)
    }

    pub(crate) fn complete(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

/// What a frame carries.
#[derive(Debug)]
pub enum FrameBody {
    /// The pipeline starts (system).
    Start,
    /// The pipeline ends gracefully after everything queued before (control, uninterruptible).
    End,
    /// The pipeline stops now (system).
    Cancel(Arc<str>),
    /// The bot is interrupted: queued data is dropped, model streams abort (system).
    Interruption,
    /// Completes its token when it has passed every processor (control, uninterruptible).
    Flush(FlushToken),
    /// A line the user typed; opens a turn (data).
    UserLine(Arc<str>),
    /// Run the model on the context (data).
    RunModel,
    /// A model response begins (control).
    ResponseStart,
    /// A piece of the model's reply text (data).
    TextPiece(Box<str>),
    /// What a finished model response reported: finish reason, usage, reasoning (data; after
    /// its last `TextPiece`, before its `ResponseEnd`).
    ModelReport(Arc<ModelReport>),
    /// A model response ended, having started `calls` function calls (control).
    ResponseEnd {
        /// Function calls this response started (0 = it starts no round).
        calls: usize,
    },
    /// The model asked for these function calls (system).
    FunctionCallsStarted(Arc<[ToolCall]>),
    /// One function call finished (data, uninterruptible).
    FunctionCallResult(Arc<ToolCallRecord>),
    /// Something failed; ends the turn (system).
    Error(Arc<str>),
    /// A frame of a user's own processors (data).
    Custom {
        /// Frame name shown in the console.
        name: &'static str,
        /// Payload.
        payload: Arc<serde_json::Value>,
    },
}

impl FrameBody {
    /// The frame's kind, which decides how it is queued.
    pub fn kind(&self) -> FrameKind {
        match self {
            FrameBody::Start
            | FrameBody::Cancel(_)
            | FrameBody::Interruption
            | FrameBody::FunctionCallsStarted(_)
            | FrameBody::Error(_) => FrameKind::System,
            FrameBody::End
            | FrameBody::Flush(_)
            | FrameBody::ResponseStart
            | FrameBody::ResponseEnd { .. } => FrameKind::Control,
            FrameBody::UserLine(_)
            | FrameBody::RunModel
            | FrameBody::TextPiece(_)
            | FrameBody::ModelReport(_)
            | FrameBody::FunctionCallResult(_)
            | FrameBody::Custom { .. } => FrameKind::Data,
        }
    }

    /// Whether an interruption leaves this frame in its queue.
    pub(crate) fn is_uninterruptible(&self) -> bool {
        matches!(
            self,
            FrameBody::End | FrameBody::Flush(_) | FrameBody::FunctionCallResult(_)
        )
    }

    /// The frame's name, as the console shows it.
    pub fn name(&self) -> &'static str {
        match self {
            FrameBody::Start => "Start",
            FrameBody::End => "End",
            FrameBody::Cancel(_) => "Cancel",
            FrameBody::Interruption => "Interruption",
            FrameBody::Flush(_) => "Flush",
            FrameBody::UserLine(_) => "UserLine",
            FrameBody::RunModel => "RunModel",
            FrameBody::ResponseStart => "ResponseStart",
            FrameBody::TextPiece(_) => "TextPiece",
            FrameBody::ModelReport(_) => "ModelReport",
            FrameBody::ResponseEnd { .. } => "ResponseEnd",
            FrameBody::FunctionCallsStarted(_) => "FunctionCallsStarted",
            FrameBody::FunctionCallResult(_) => "FunctionCallResult",
            FrameBody::Error(_) => "Error",
            FrameBody::Custom { name, .. } => name,
        }
    }

    /// A short rendering of the payload for the console (built only when someone listens),
    /// at most [`DETAIL_MAX`] bytes but for a text piece (a token or so, which the console
    /// streams the reply from): a journey writes it at every hop, so a 4 MB line or tool
    /// result made 4 MB per crossing of the events file and of every viewer's stream. The
    /// whole texts are the turn's (`turn_started`, `tool_call`, the transcript).
    pub fn detail(&self) -> String {
        if let FrameBody::TextPiece(piece) = self {
            return piece.to_string();
        }
        let mut detail = self.detail_whole();
        cap_detail(&mut detail);
        detail
    }

    fn detail_whole(&self) -> String {
        match self {
            FrameBody::Cancel(reason) => reason.to_string(),
            FrameBody::UserLine(line) => line.to_string(),
            FrameBody::TextPiece(piece) => piece.to_string(),
            FrameBody::ResponseEnd { calls } => format!("calls={calls}"),
            FrameBody::ModelReport(report) => report.summary(),
            FrameBody::FunctionCallsStarted(calls) => calls
                .iter()
                .map(|c| format!("{}({})", c.name, c.arguments))
                .collect::<Vec<_>>()
                .join(", "),
            FrameBody::FunctionCallResult(record) => record.summary(),
            FrameBody::Error(message) => message.to_string(),
            FrameBody::Custom { payload, .. } => payload.to_string(),
            _ => String::new(),
        }
    }
}

/// Most bytes of a frame's detail but a text piece's ([`FrameBody::detail`]).
pub const DETAIL_MAX: usize = 4096;

/// Cuts `detail` to [`DETAIL_MAX`] bytes (on a character boundary), saying how long it was.
fn cap_detail(detail: &mut String) {
    if detail.len() <= DETAIL_MAX {
        return;
    }
    let total = detail.len();
    let mut end = DETAIL_MAX;
    while !detail.is_char_boundary(end) {
        end -= 1;
    }
    detail.truncate(end);
    detail.push_str(&format!(
        "…[cut by turnscope: {total} bytes in all; the transcript and the turn view have it whole]"
    ));
}

/// What one finished model response reported, as the turn records it.
#[derive(Debug, Clone, Default)]
pub struct ModelReport {
    /// Finish reason, usage, model, id, status (as in `Event::ModelRequest`).
    pub info: ModelResponseInfo,
    /// Reasoning text the response streamed apart from its reply.
    pub reasoning: String,
}

impl ModelReport {
    /// `finish=length tokens=32+10` and the like, for the console.
    pub fn summary(&self) -> String {
        let mut out = format!(
            "finish={}",
            self.info.finish_reason.as_deref().unwrap_or("none")
        );
        if let Some(u) = &self.info.usage {
            out.push_str(&format!(
                " tokens={}+{}",
                u.prompt_tokens, u.completion_tokens
            ));
        }
        if !self.reasoning.is_empty() {
            out.push_str(&format!(
                " reasoning={}B {:?}",
                self.reasoning.len(),
                crate::model::client::preview(&self.reasoning, 120)
            ));
        }
        out
    }
}

/// One frame: header plus body.
#[derive(Debug)]
pub struct Frame {
    /// Unique sequence id (process-wide, increasing).
    pub id: u64,
    /// The turn this frame belongs to (0 = none).
    pub turn: TurnId,
    /// Which way it travels.
    pub direction: Direction,
    /// The payload.
    pub body: FrameBody,
    /// The links it crossed, while someone watches (published when it is let go).
    pub(crate) journey: Journey,
}

impl Frame {
    /// A new downstream frame of `turn`.
    pub fn new(turn: TurnId, body: FrameBody) -> Self {
        Self {
            id: NEXT_FRAME_ID.fetch_add(1, Ordering::Relaxed),
            turn,
            direction: Direction::Downstream,
            body,
            journey: Journey::default(),
        }
    }

    /// A new upstream frame of `turn`.
    pub fn upstream(turn: TurnId, body: FrameBody) -> Self {
        Self {
            direction: Direction::Upstream,
            ..Self::new(turn, body)
        }
    }

    /// Shorthand for `self.body.kind()`.
    pub fn kind(&self) -> FrameKind {
        self.body.kind()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_increasing() {
        let a = Frame::new(1, FrameBody::RunModel);
        let b = Frame::new(1, FrameBody::RunModel);
        assert!(b.id > a.id);
    }

    #[test]
    fn kinds_and_interruptibility_follow_the_rules() {
        assert_eq!(FrameBody::Interruption.kind(), FrameKind::System);
        assert_eq!(FrameBody::TextPiece("a".into()).kind(), FrameKind::Data);
        assert_eq!(
            FrameBody::ResponseEnd { calls: 0 }.kind(),
            FrameKind::Control
        );
        assert!(FrameBody::End.is_uninterruptible());
        assert!(!FrameBody::TextPiece("a".into()).is_uninterruptible());
        assert!(!FrameBody::ResponseEnd { calls: 1 }.is_uninterruptible());
    }

    /// A frame's detail is written at every hop of its journey: a 4 MB line made 4 MB per
    /// crossing of the events file (tour G: one turn, 90 MB). Cut, saying how long it was;
    /// a text piece, which the console streams the reply from, is whole.
    #[test]
    fn a_frames_detail_is_bounded_but_a_text_pieces() {
        // Three bytes a character: the cut falls inside one and moves back to its start.
        let line: String = "€".repeat(1_000_000);
        let detail = FrameBody::UserLine(line.as_str().into()).detail();
        assert!(detail.len() < DETAIL_MAX + 200, "{}", detail.len());
        assert!(
            detail.ends_with("[cut by turnscope: 3000000 bytes in all; the transcript and the turn view have it whole]"),
            "{}",
            &detail[DETAIL_MAX - 10..]
        );
        assert_eq!(FrameBody::UserLine("short".into()).detail(), "short");
        let piece = FrameBody::TextPiece(line.as_str().into()).detail();
        assert_eq!(piece.len(), line.len());
    }
}
