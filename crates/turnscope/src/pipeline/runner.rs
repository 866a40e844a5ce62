//! The [`Processor`] trait and the [`Pipeline`] that runs processors in a chain, one task each.
//! Each processor takes system frames before ordered ones; an interruption purges what is queued.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::frame::{Direction, FlushToken, Frame, FrameBody, TurnId};
use super::link::{Ends, Inbox, Link, Observer};

/// One stage of a pipeline.
///
/// `process` receives every frame that reaches this processor, in queue order (system frames
/// first), and must push on (`link.push(frame)`) each frame it does not consume. It should
/// return quickly: long work (a model stream, a tool call) belongs in a task the processor
/// spawns with a clone of the link, so that system frames are never held up behind it.
#[async_trait]
pub trait Processor: Send + 'static {
    /// A short, stable name shown in the console (`user-aggregator`, `model`, ...).
    fn name(&self) -> &'static str;

    /// Handles one frame.
    async fn process(&mut self, frame: Frame, link: &Link);
}

/// A running chain of processors.
pub struct Pipeline {
    first: Link,
    last: Link,
    tasks: Vec<JoinHandle<()>>,
    ends: Arc<Ends>,
}

impl Pipeline {
    /// Links `processors` in order, starts one task each and sends the Start frame.
    ///
    /// Panics when `processors` is empty: a pipeline needs at least one stage.
    pub fn start(processors: Vec<Box<dyn Processor>>, observer: Observer) -> Self {
        assert!(
            !processors.is_empty(),
            "a pipeline needs at least one processor"
        );
        let ends = Arc::new(Ends::new());
        let mut inboxes = Vec::with_capacity(processors.len());
        let mut receivers = Vec::with_capacity(processors.len());
        for p in &processors {
            // Unbounded on purpose: frames flow both ways, so a stage that waited on a full
            // neighbour could deadlock with it, and a system frame must never wait. What queues
            // is bounded by the turn: one model response in flight per session, and an
            // interruption purges every interruptible frame.
            let (sys_tx, sys_rx) = mpsc::unbounded_channel();
            let (ord_tx, ord_rx) = mpsc::unbounded_channel();
            inboxes.push(Inbox {
                name: p.name(),
                system: sys_tx,
                ordered: ord_tx,
                queued: Arc::new(AtomicU32::new(0)),
            });
            receivers.push((sys_rx, ord_rx));
        }
        let link_for = |i: usize, me: &'static str| Link {
            me,
            next: inboxes.get(i + 1).cloned(),
            prev: i.checked_sub(1).map(|j| inboxes[j].clone()),
            observer: observer.clone(),
            ends: ends.clone(),
        };
        let mut tasks = Vec::with_capacity(processors.len());
        for (i, (processor, (sys_rx, ord_rx))) in processors.into_iter().zip(receivers).enumerate()
        {
            let link = link_for(i, processor.name());
            let queued = inboxes[i].queued.clone();
            tasks.push(tokio::spawn(run_processor(
                processor, sys_rx, ord_rx, queued, link,
            )));
        }
        // The pipeline's own edges: pushing from "source" into the first processor, and from
        // "sink" back into the last one.
        let first = Link {
            me: "source",
            next: Some(inboxes[0].clone()),
            prev: None,
            observer: observer.clone(),
            ends: ends.clone(),
        };
        let last = Link {
            me: "sink",
            next: None,
            prev: Some(inboxes[inboxes.len() - 1].clone()),
            observer,
            ends: ends.clone(),
        };
        first.push(Frame::new(0, FrameBody::Start));
        Self {
            first,
            last,
            tasks,
            ends,
        }
    }

    /// Sends a frame into the pipeline: downstream frames enter at the first processor,
    /// upstream frames at the last.
    pub fn push(&self, frame: Frame) {
        match frame.direction {
            Direction::Downstream => self.first.push(frame),
            Direction::Upstream => self.last.push(frame),
        }
    }

    /// Interrupts the bot: every processor drops its queued interruptible frames and the
    /// model aborts its stream.
    pub fn interrupt(&self, turn: TurnId) {
        self.push(Frame::new(turn, FrameBody::Interruption));
    }

    /// Waits until every frame queued before this call has left the pipeline, or `timeout`
    /// passes. Returns whether the flush made it through.
    pub async fn drain(&self, timeout: Duration) -> bool {
        let (token, done) = FlushToken::new();
        self.push(Frame::new(0, FrameBody::Flush(token)));
        matches!(tokio::time::timeout(timeout, done).await, Ok(Ok(())))
    }

    /// Whether an End or Cancel frame has left the pipeline (it stopped).
    pub fn is_finished(&self) -> bool {
        *self.ends.finished.borrow()
    }

    /// Frames that have left the downstream end so far.
    pub fn frames_sunk(&self) -> u64 {
        self.ends.sunk.load(Ordering::Relaxed)
    }

    /// Stops the pipeline now (like [`Pipeline::cancel`]) without taking it: waits up to
    /// `timeout` for the Cancel frame to pass every processor.
    pub async fn stop(&self, reason: &str, timeout: Duration) {
        self.push(Frame::new(0, FrameBody::Cancel(reason.into())));
        let mut finished = self.ends.finished.subscribe();
        let _ = tokio::time::timeout(timeout, finished.wait_for(|f| *f)).await;
    }

    /// Ends the pipeline gracefully: everything queued is processed, then End passes through.
    /// Waits up to `timeout` for the processors to stop, then aborts them.
    pub async fn end(mut self, timeout: Duration) {
        self.push(Frame::new(0, FrameBody::End));
        self.join(timeout).await;
    }

    /// Stops the pipeline now: queued frames are dropped, in-flight work is aborted.
    pub async fn cancel(mut self, reason: &str, timeout: Duration) {
        self.push(Frame::new(0, FrameBody::Cancel(reason.into())));
        self.join(timeout).await;
    }

    async fn join(&mut self, timeout: Duration) {
        let tasks = std::mem::take(&mut self.tasks);
        let deadline = tokio::time::Instant::now() + timeout;
        for mut task in tasks {
            if tokio::time::timeout_at(deadline, &mut task).await.is_err() {
                task.abort();
            }
        }
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// One processor's task: system frames first, ordered frames in order, interruption purges.
async fn run_processor(
    mut processor: Box<dyn Processor>,
    mut system: mpsc::UnboundedReceiver<Frame>,
    mut ordered: mpsc::UnboundedReceiver<Frame>,
    queued: Arc<AtomicU32>,
    link: Link,
) {
    // Uninterruptible frames kept through an interruption, ahead of the rest of the queue.
    let mut kept: VecDeque<Frame> = VecDeque::new();
    loop {
        let frame = tokio::select! {
            biased;
            frame = system.recv() => frame,
            frame = async {
                match kept.pop_front() {
                    Some(frame) => Some(frame),
                    None => ordered.recv().await,
                }
            } => frame,
        };
        let Some(frame) = frame else { break };
        queued.fetch_sub(1, Ordering::Relaxed);
        let stops = match &frame.body {
            FrameBody::Interruption => {
                let dropped = purge(&mut ordered, &mut kept, false);
                queued.fetch_sub(dropped, Ordering::Relaxed);
                false
            }
            FrameBody::Cancel(_) => {
                let dropped = purge(&mut ordered, &mut kept, true);
                queued.fetch_sub(dropped, Ordering::Relaxed);
                true
            }
            FrameBody::End => frame.direction == Direction::Downstream,
            _ => false,
        };
        processor.process(frame, &link).await;
        if stops {
            break;
        }
    }
}

/// Empties the ordered queue: uninterruptible frames are kept (in order) unless `all`.
/// Returns how many frames were dropped (kept ones still count as queued).
fn purge(
    ordered: &mut mpsc::UnboundedReceiver<Frame>,
    kept: &mut VecDeque<Frame>,
    all: bool,
) -> u32 {
    let before = kept.len();
    if all {
        kept.clear();
    } else {
        kept.retain(|f| f.body.is_uninterruptible());
    }
    let mut dropped = before - kept.len();
    while let Ok(frame) = ordered.try_recv() {
        if !all && frame.body.is_uninterruptible() {
            kept.push_back(frame);
        } else {
            dropped += 1;
        }
    }
    dropped as u32
}

#[cfg(test)]
#[path = "runner_tests.rs"]
mod tests;
