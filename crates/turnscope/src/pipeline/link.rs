//! Links: how a processor hands frames to its neighbours, and how each crossing is observed
//! (recorded on the frame's journey, `super::journey`).
//! A frame goes the way its direction says; the pipeline's two ends decide what leaving means.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use tokio::sync::{mpsc, watch};

use super::frame::{Direction, Frame, FrameBody, FrameKind};
use super::journey::HOPS_EXPECTED;
use crate::observe::Bus;
use crate::observe::event::{FrameJourney, Hop, now_us};

/// The two queues of one processor: system frames and ordered (data/control) frames.
#[derive(Clone)]
pub(crate) struct Inbox {
    pub(crate) name: &'static str,
    pub(crate) system: mpsc::UnboundedSender<Frame>,
    pub(crate) ordered: mpsc::UnboundedSender<Frame>,
    /// Frames sent to this processor and not yet taken up (both queues): one relaxed
    /// add per crossing here, one subtract when the processor takes the frame.
    pub(crate) queued: Arc<AtomicU32>,
}

impl Inbox {
    /// Counts the frame in (returns the queue depth it joins, itself included).
    fn enqueue(&self) -> u32 {
        self.queued.fetch_add(1, Ordering::Relaxed).wrapping_add(1)
    }

    fn deliver(&self, frame: Frame) {
        // A send fails only when the processor's task has ended (after End or Cancel);
        // frames sent to a stopped pipeline are dropped by design.
        let queue = if frame.kind() == FrameKind::System {
            &self.system
        } else {
            &self.ordered
        };
        if queue.send(frame).is_err() {
            self.queued.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Where observations go: the bus and the session number stamped on each event.
#[derive(Clone)]
pub struct Observer {
    /// The bus frame crossings are published on.
    pub bus: Bus,
    /// The session number the pipeline belongs to.
    pub session: u64,
}

impl Observer {
    /// An observer that publishes on `bus` for session `session`.
    pub fn new(bus: Bus, session: u64) -> Self {
        Self { bus, session }
    }

    /// Records `frame` crossing `from → to` on its journey, when someone listens.
    #[inline]
    fn crossing(&self, frame: &mut Frame, from: &'static str, to: &'static str, depth: u32) {
        if self.bus.is_listened() {
            self.record(frame, from, to, depth);
        }
    }

    /// [`Observer::crossing`] when someone listens, kept out of line so that `push` stays
    /// small for the frames nobody watches.
    #[inline(never)]
    fn record(&self, frame: &mut Frame, from: &'static str, to: &'static str, depth: u32) {
        let (id, turn, body) = (frame.id, frame.turn, &frame.body);
        let name = body.name();
        let direction = frame.direction.as_str();
        frame.journey.hop(
            &self.bus,
            |j| std::ptr::eq(j.name, name) && j.direction == direction && j.turn == turn,
            || FrameJourney {
                id,
                session: self.session,
                turn,
                kind: body.kind().as_str(),
                name,
                direction,
                detail: body.detail(),
                hops: Vec::with_capacity(HOPS_EXPECTED),
            },
            Hop {
                from,
                to,
                at_us: now_us(),
                depth,
            },
        );
    }
}

/// What happens to frames that leave either end of the pipeline.
pub(crate) struct Ends {
    /// Frames that left the downstream end.
    pub(crate) sunk: AtomicU64,
    /// Set once an End or Cancel frame left the downstream end.
    pub(crate) finished: watch::Sender<bool>,
}

impl Ends {
    pub(crate) fn new() -> Self {
        Self {
            sunk: AtomicU64::new(0),
            finished: watch::Sender::new(false),
        }
    }

    fn sink(&self, mut frame: Frame) {
        self.sunk.fetch_add(1, Ordering::Relaxed);
        match &mut frame.body {
            FrameBody::Flush(token) => token.complete(),
            FrameBody::End | FrameBody::Cancel(_) => {
                self.finished.send_replace(true);
            }
            _ => {}
        }
    }

    fn source(&self, mut frame: Frame) {
        // Upstream frames that reach the input are done; a flush sent upstream completes here.
        if let FrameBody::Flush(token) = &mut frame.body {
            token.complete();
        }
        if let FrameBody::Error(message) = &frame.body {
            tracing::debug!(%message, "error frame reached the pipeline source");
        }
    }
}

/// A processor's view of its neighbours: push a frame and it goes the way its direction says.
///
/// Links are cheap to clone, so a processor can hand one to a task it spawns (a model stream,
/// a tool call) that pushes frames later.
#[derive(Clone)]
pub struct Link {
    pub(crate) me: &'static str,
    pub(crate) next: Option<Inbox>,
    pub(crate) prev: Option<Inbox>,
    pub(crate) observer: Observer,
    pub(crate) ends: Arc<Ends>,
}

impl Link {
    /// The name of the processor this link belongs to.
    pub fn name(&self) -> &'static str {
        self.me
    }

    /// The observer (bus and session number) of this pipeline.
    pub(crate) fn observer(&self) -> &Observer {
        &self.observer
    }

    /// Sends `frame` to the next processor (downstream) or the previous one (upstream).
    pub fn push(&self, mut frame: Frame) {
        let target = match frame.direction {
            Direction::Downstream => &self.next,
            Direction::Upstream => &self.prev,
        };
        match target {
            Some(inbox) => {
                let depth = inbox.enqueue();
                self.observer
                    .crossing(&mut frame, self.me, inbox.name, depth);
                inbox.deliver(frame);
            }
            // Past an end the journey is over: published before the end acts on the frame
            // (a flush's waiter, woken there, then finds its crossings already out).
            None => match frame.direction {
                Direction::Downstream => {
                    self.observer.crossing(&mut frame, self.me, "sink", 0);
                    frame.journey.finish();
                    self.ends.sink(frame);
                }
                Direction::Upstream => {
                    self.observer.crossing(&mut frame, self.me, "source", 0);
                    frame.journey.finish();
                    self.ends.source(frame);
                }
            },
        }
    }
}
