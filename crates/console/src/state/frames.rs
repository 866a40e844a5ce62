//! The fold of frame crossings and progress notifications: the Frames pane's bounded
//! window, each reply piece into its turn, the per-link pipeline figures, the Progress pane.

use std::sync::Arc;

use turnscope::observe::{Event, FrameEvent};

use super::budget::{frame_bytes, progress_bytes};
use super::{ConsoleState, FrameRow, ProgressRow};

/// A reply piece reaching the output stage: turnscope's `TextPiece → output`, or pipecat's
/// `LLMTextFrame` pushed into its output transport (an attached whisker feed).
fn is_reply_piece(f: &FrameEvent) -> bool {
    (f.name == "TextPiece" && f.to == "output")
        || (f.name == "LLMTextFrame" && f.to.contains("OutputTransport"))
}

impl ConsoleState {
    pub(super) fn on_frame(&mut self, f: &FrameEvent, shared: Option<&Arc<Event>>) {
        self.saw_time(f.at_us);
        self.frames_seen += 1;
        self.pipelines.fold(f);
        // The reply is what reaches the output stage; counting that one crossing keeps each
        // piece once however many processors pass it on. A piece's crossings are told when
        // its way ends, which may be after the turn's end (`TurnView::takes_piece`).
        if is_reply_piece(f) {
            self.timelines.piece((f.session, f.turn), f.at_us);
            let mut grew = 0;
            if let Some(view) = self.turn_mut(f.session, f.turn) {
                if f.id == 0 && f.name == "TextPiece" {
                    // A kept turn's whole reply as the watched server retells it on a
                    // connect: it replaces the pieces seen before the viewer was dropped
                    // (also those of a turn whose end it saw and not all of its pieces).
                    if view.end.is_none() || view.reply.len() < f.detail.len() {
                        let before = view.reply.len();
                        view.reply.clear();
                        view.reply.push_str(&f.detail);
                        grew = f.detail.len() as isize - before as isize;
                    }
                } else if view.takes_piece(f.detail.len()) {
                    view.reply.push_str(&f.detail);
                    grew = f.detail.len() as isize;
                }
            }
            if grew < 0 {
                self.transcript_bytes = self.transcript_bytes.saturating_sub(grew.unsigned_abs());
            } else if grew > 0 {
                self.transcript_grew(grew as usize);
            }
        }
        let event = shared
            .cloned()
            .unwrap_or_else(|| Arc::new(Event::Frame(f.clone())));
        if let Some(row) = FrameRow::new(self.frames_seen, event) {
            self.frames.push(row, frame_bytes(f));
        }
    }

    /// A progress notification was sent.
    pub(super) fn on_progress(
        &mut self,
        session: &u64,
        progress: &u64,
        message: &str,
        pieces: &u32,
        at_us: &u64,
    ) {
        self.saw_time(*at_us);
        self.timelines.progress(*session, *at_us);
        let row = ProgressRow {
            session: *session,
            progress: *progress,
            pieces: *pieces,
            message: message.to_string(),
            at_us: *at_us,
        };
        let size = progress_bytes(&row);
        self.progress.push(row, size);
        let totals = self.progress_totals.entry(*session).or_default();
        if totals.notes == 0 {
            totals.first_us = *at_us;
        }
        totals.notes += 1;
        totals.pieces = totals.pieces.saturating_add(u64::from(*pieces));
        totals.coalesced += u64::from(*pieces > 1);
        totals.last_us = *at_us;
    }
}
