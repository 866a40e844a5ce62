//! The frame pipeline: processors linked in a chain, frames flowing down and up.
//!
//! This is pipecat's model in Rust: each processor runs in its own task with two queues; system
//! frames overtake queued data frames; an interruption empties every queue of interruptible
//! frames; a flush lets a caller wait until everything queued before it has passed. When someone
//! listens on the event bus, every frame's crossings are published there (as one event per
//! frame, `journey`).

pub mod frame;
pub(crate) mod journey;
pub mod link;
pub(crate) mod runner;

pub use frame::{Direction, FlushToken, Frame, FrameBody, FrameKind, ModelReport, TurnId};
pub use link::{Link, Observer};
pub use runner::{Pipeline, Processor};
