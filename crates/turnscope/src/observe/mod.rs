//! Observation: the event bus every part of turnscope publishes to, the latency statistics
//! built from it, the JSONL recorder behind `--events` (and the one way an event is written
//! as a line), and the process's own resource figures.

pub mod bus;
pub mod event;
pub mod line;
pub mod model_request;
pub mod process;
pub mod rebuild;
pub mod recorder;
pub mod redact;
pub mod stats;
pub mod wire;

pub use bus::{Bus, Subscription};
pub use event::{
    BridgeEvent, ConfigReloadEvent, Event, FrameEvent, FrameJourney, Hop, Name, OwnSession,
    ReplicaEvent, SessionEvent, SessionOpener, TaskChange, TaskEvent, ToolCallEvent,
    ToolSourceEvent, ToolSourceState, TurnClock, TurnEndEvent,
};
pub use model_request::{ModelResponseInfo, TokenUsage};
