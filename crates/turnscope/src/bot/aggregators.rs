//! The user and assistant aggregators: the two ends of the pipeline that write the context. A
//! user line is appended before the model runs; a reply is committed when it ends or is cut off.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::context::Context;
use crate::pipeline::{Frame, FrameBody, Link, Processor, TurnId};

/// Shared, lockable context (held briefly, never across an await).
pub(crate) type SharedContext = Arc<Mutex<Context>>;

pub(crate) fn lock(ctx: &SharedContext) -> std::sync::MutexGuard<'_, Context> {
    ctx.lock().unwrap_or_else(|p| p.into_inner())
}

/// Appends each user line to the context and asks the model to run.
pub(crate) struct UserAggregator {
    context: SharedContext,
}

impl UserAggregator {
    /// An aggregator writing to `context`.
    pub fn new(context: SharedContext) -> Self {
        Self { context }
    }
}

#[async_trait]
impl Processor for UserAggregator {
    fn name(&self) -> &'static str {
        "user-aggregator"
    }

    async fn process(&mut self, frame: Frame, link: &Link) {
        match frame.body {
            FrameBody::UserLine(line) => {
                lock(&self.context).push_user(line);
                link.push(Frame::new(frame.turn, FrameBody::RunModel));
            }
            _ => link.push(frame),
        }
    }
}

/// Commits what the bot said: a response's text on its end (responses that started a round
/// are committed with their calls by the model processor), partial text on interruption or
/// error.
pub(crate) struct AssistantAggregator {
    context: SharedContext,
    turn: TurnId,
    text: String,
}

impl AssistantAggregator {
    /// An aggregator writing to `context`.
    pub fn new(context: SharedContext) -> Self {
        Self {
            context,
            turn: 0,
            text: String::new(),
        }
    }

    fn commit_partial(&mut self) {
        if !self.text.is_empty() {
            let text = std::mem::take(&mut self.text);
            lock(&self.context).push_assistant(text);
        }
    }
}

#[async_trait]
impl Processor for AssistantAggregator {
    fn name(&self) -> &'static str {
        "assistant-aggregator"
    }

    async fn process(&mut self, frame: Frame, link: &Link) {
        match &frame.body {
            FrameBody::ResponseStart => {
                self.turn = frame.turn;
                self.text.clear();
            }
            FrameBody::TextPiece(piece) if frame.turn == self.turn => self.text.push_str(piece),
            FrameBody::ResponseEnd { calls } if frame.turn == self.turn => {
                if *calls == 0 {
                    let text = std::mem::take(&mut self.text);
                    lock(&self.context).push_assistant(text);
                } else {
                    self.text.clear();
                }
            }
            FrameBody::Interruption | FrameBody::Error(_) | FrameBody::Cancel(_) => {
                self.commit_partial()
            }
            _ => {}
        }
        link.push(frame);
    }
}
