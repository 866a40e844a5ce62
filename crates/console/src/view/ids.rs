//! The identifiers everything above names: the panes and their Tab order.

/// The panes, in Tab order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PaneId {
    /// Open and closed sessions.
    Sessions,
    /// The selected session's turns.
    Transcript,
    /// The input line.
    Input,
    /// Live frames.
    Frames,
    /// Progress notifications.
    Progress,
    /// The bot's tools.
    Tools,
    /// Latency statistics and counters.
    Stats,
    /// Every failure and log line.
    Log,
    /// Every `/mcp` exchange, per client and method.
    Mcp,
}

/// Every pane in Tab order.
pub const ORDER: [PaneId; 9] = [
    PaneId::Sessions,
    PaneId::Transcript,
    PaneId::Input,
    PaneId::Frames,
    PaneId::Progress,
    PaneId::Tools,
    PaneId::Stats,
    PaneId::Log,
    PaneId::Mcp,
];

impl PaneId {
    /// The pane's title.
    pub fn title(self) -> &'static str {
        match self {
            PaneId::Sessions => "Sessions",
            PaneId::Transcript => "Transcript",
            PaneId::Input => "Input",
            PaneId::Frames => "Frames",
            PaneId::Progress => "Progress",
            PaneId::Tools => "Tools",
            PaneId::Stats => "Stats",
            PaneId::Log => "Log",
            PaneId::Mcp => "MCP",
        }
    }

    /// Its number (the key that jumps to it).
    pub fn number(self) -> usize {
        ORDER.iter().position(|p| *p == self).unwrap_or(0) + 1
    }

    /// Whether it lives in the inspector's tabs.
    pub fn is_inspector(self) -> bool {
        matches!(
            self,
            PaneId::Frames
                | PaneId::Progress
                | PaneId::Tools
                | PaneId::Stats
                | PaneId::Log
                | PaneId::Mcp
        )
    }
}
