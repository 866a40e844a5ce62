//! Times as the panes print them: a wall-clock time of day (UTC) for the Log and MCP panes, and
//! a time since its session opened in a fixed width for the Frames and Progress panes.

use super::ConsoleState;

impl ConsoleState {
    /// A wall-clock time of day (UTC) for the Log pane: `14:03:07.250`.
    pub fn clock(&self, at_us: u64) -> String {
        if at_us == 0 {
            return "-".into();
        }
        let ms = (at_us / 1_000) % 86_400_000;
        format!(
            "{:02}:{:02}:{:02}.{:03}",
            ms / 3_600_000,
            (ms / 60_000) % 60,
            (ms / 1_000) % 60,
            ms % 1_000
        )
    }

    /// A frame's time relative to its session's opening (or, for a session not seen open, to
    /// the first event), in a fixed 9 cells: `   12.345`, ` 1234.567`, `  123m04s`. A frame
    /// stamped before its session's opening (a source whose clock or order differs) shows 0,
    /// not a time counted from somewhere else.
    pub fn session_relative(&self, session: u64, at_us: u64) -> String {
        let base = self
            .sessions
            .get(&session)
            .map(|r| r.opened_us)
            .filter(|b| *b > 0)
            .or(self.base_us)
            .unwrap_or(at_us);
        fixed_offset(at_us.saturating_sub(base))
    }
}

/// An offset in a fixed 9 cells: seconds with milliseconds below 10,000 s, else minutes.
pub fn fixed_offset(us: u64) -> String {
    let s = us / 1_000_000;
    if s < 10_000 {
        format!("{s:>4}.{:03}s", (us / 1_000) % 1_000)
    } else {
        format!("{:>5}m{:02}s", (s / 60).min(99_999), s % 60)
    }
}
