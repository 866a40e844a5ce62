//! Observation: the event bus every part of turnscope publishes to, the latency statistics
//! built from it, and the JSONL recorder behind `--events`.

pub mod bus;
pub mod event;
pub mod recorder;
pub mod stats;

pub use bus::{Bus, Subscription};
pub use event::{
    BridgeEvent, Event, FrameEvent, SessionEvent, SessionOpener, ToolCallEvent, ToolSourceEvent,
    ToolSourceState, TurnEndEvent,
};
