//! The output stage: collects the reply of the current turn and decides when it ends.
//!
//! A turn ends on the first `ResponseEnd` that started no round, on an error, on an
//! interruption, or when the pipeline ends. Frames carry their turn id, so a late frame of an
//! older turn can never fill or end the current one; such frames are counted and logged.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::turn::{Turn, TurnEnd};
use crate::observe::Event;
use crate::pipeline::{Frame, FrameBody, Link, Observer, Processor};

/// The current turn of a session, shared by the session (which opens turns) and the
/// collector (which fills and ends them).
#[derive(Default)]
pub struct TurnBoard {
    current: Mutex<Option<Arc<Turn>>>,
    late_frames: AtomicU64,
}

impl TurnBoard {
    /// The turn most recently opened, if any.
    pub fn current(&self) -> Option<Arc<Turn>> {
        self.current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub(crate) fn open(&self, turn: Arc<Turn>) {
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = Some(turn);
    }

    /// Frames that arrived for a turn other than the current one (late, ignored).
    pub fn late_frames(&self) -> u64 {
        self.late_frames.load(Ordering::Relaxed)
    }
}

/// The pipeline stage that turns frames into the [`Turn`] readers wait on.
pub(crate) struct TurnCollector {
    board: Arc<TurnBoard>,
    cached: Option<Arc<Turn>>,
}

impl TurnCollector {
    /// A collector reporting to `board`.
    pub fn new(board: Arc<TurnBoard>) -> Self {
        Self {
            board,
            cached: None,
        }
    }

    /// The current turn if `turn` is its id; otherwise counts a late frame.
    fn turn_for(&mut self, turn: u64, name: &'static str) -> Option<Arc<Turn>> {
        if self.cached.as_ref().map(|t| t.id) != Some(turn) {
            self.cached = self.board.current();
        }
        match &self.cached {
            Some(t) if t.id == turn => Some(t.clone()),
            _ => {
                self.board.late_frames.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(turn, frame = name, "late frame of an older turn ignored");
                None
            }
        }
    }
}

/// Ends `turn` with `end` and publishes `TurnEnded`, unless it had already ended.
pub(crate) fn finish(turn: &Turn, end: TurnEnd, observer: &Observer) {
    if turn.finish(end) {
        observer
            .bus
            .publish_with(|| Event::TurnEnded(turn.snapshot().end_event(observer.session)));
    }
}

#[async_trait]
impl Processor for TurnCollector {
    fn name(&self) -> &'static str {
        "output"
    }

    async fn process(&mut self, frame: Frame, link: &Link) {
        let observer = link.observer();
        match &frame.body {
            FrameBody::TextPiece(piece) => {
                if let Some(t) = self.turn_for(frame.turn, "TextPiece") {
                    t.add_piece(piece);
                }
            }
            FrameBody::ResponseEnd { calls } => {
                if let Some(t) = self.turn_for(frame.turn, "ResponseEnd") {
                    if *calls == 0 {
                        let cut = t.with_record(|r| r.finish_reason.as_deref() == Some("length"));
                        let end = if cut {
                            TurnEnd::Length
                        } else {
                            TurnEnd::Completed
                        };
                        finish(&t, end, observer);
                    } else {
                        t.update(|r| r.rounds += 1);
                    }
                }
            }
            FrameBody::ModelReport(report) => {
                if let Some(t) = self.turn_for(frame.turn, "ModelReport") {
                    t.update(|r| {
                        r.model_requests += 1;
                        r.finish_reason.clone_from(&report.info.finish_reason);
                        if let Some(u) = &report.info.usage {
                            r.usage.get_or_insert_default().add(u);
                        }
                        r.reasoning.push_str(&report.reasoning);
                    });
                }
            }
            FrameBody::FunctionCallsStarted(calls) => {
                if let Some(t) = self.turn_for(frame.turn, "FunctionCallsStarted") {
                    t.update(|r| {
                        if r.pending_calls.is_empty() {
                            r.pending_since = Some(std::time::Instant::now());
                        }
                        r.pending_calls.extend(calls.iter().cloned());
                    });
                }
            }
            FrameBody::FunctionCallResult(record) => {
                if let Some(t) = self.turn_for(frame.turn, "FunctionCallResult") {
                    t.update(|r| {
                        r.pending_calls.retain(|c| c.id != record.call.id);
                        if r.pending_calls.is_empty() {
                            r.pending_since = None;
                        }
                        r.tool_calls.push((**record).clone());
                    });
                }
            }
            FrameBody::Error(message) => {
                if let Some(t) = self.turn_for(frame.turn, "Error") {
                    finish(&t, TurnEnd::Error(message.to_string()), observer);
                }
            }
            FrameBody::Interruption => {
                if let Some(t) = self.board.current() {
                    finish(&t, TurnEnd::Interrupted, observer);
                }
            }
            FrameBody::End | FrameBody::Cancel(_) => {
                if let Some(t) = self.board.current() {
                    finish(&t, TurnEnd::SessionEnded, observer);
                }
            }
            _ => {}
        }
        link.push(frame);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::observe::Bus;
    use crate::pipeline::{Observer, Pipeline};

    #[tokio::test]
    async fn frames_of_an_older_turn_neither_fill_nor_end_the_current_one() {
        let board = Arc::new(TurnBoard::default());
        let pipeline = Pipeline::start(
            vec![Box::new(TurnCollector::new(board.clone()))],
            Observer::new(Bus::default(), 1),
        );
        let current = Turn::new(2, "new line");
        board.open(current.clone());
        pipeline.push(Frame::new(1, FrameBody::TextPiece("stale text".into())));
        pipeline.push(Frame::new(1, FrameBody::ResponseEnd { calls: 0 }));
        pipeline.push(Frame::new(1, FrameBody::Error("old failure".into())));
        assert!(pipeline.drain(Duration::from_secs(5)).await);
        assert!(!current.is_done());
        assert_eq!(current.snapshot().reply, "");
        assert_eq!(board.late_frames(), 3);

        pipeline.push(Frame::new(2, FrameBody::TextPiece("fresh".into())));
        pipeline.push(Frame::new(2, FrameBody::ResponseEnd { calls: 1 }));
        pipeline.push(Frame::new(2, FrameBody::ResponseEnd { calls: 0 }));
        assert!(pipeline.drain(Duration::from_secs(5)).await);
        let r = current.snapshot();
        assert_eq!(
            (r.reply.as_str(), r.rounds, r.end),
            ("fresh", 1, Some(TurnEnd::Completed))
        );
    }
}
