//! The console's byte budget (`[console] max_mib`): one figure shared out between the kinds of
//! record the console keeps, each of which drops its oldest first when over its share and
//! counts what it dropped, so the pane showing it can say so. Shares, not one pool: a flood of
//! one kind (frames) never pushes out the history of another (the MCP exchanges).
//!
//! Sizes are estimates (strings' bytes, a fixed cost per allocation and per node), counted as
//! records come in; RSS is somewhat more (the allocator's own slack).

use std::sync::atomic::{AtomicUsize, Ordering};

use turnscope::observe::FrameEvent;

use super::records::{ProgressRow, TurnView};

/// A kind of record under the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// `/mcp` exchanges (the MCP pane).
    Exchanges,
    /// Model requests and answers (the turn view's model requests).
    Requests,
    /// The messages those requests carried (to show a request whole).
    Messages,
    /// Frame crossings (the Frames pane).
    Frames,
    /// Turns of the transcripts built from events.
    Transcripts,
    /// Turn timelines (the waterfall).
    Timelines,
    /// Progress notifications (the Progress pane).
    Progress,
}

impl Part {
    /// Every part, with its share of the budget in percent (together 100).
    pub const SHARES: [(Part, usize); 7] = [
        (Part::Exchanges, 30),
        (Part::Requests, 20),
        (Part::Messages, 15),
        (Part::Frames, 15),
        (Part::Transcripts, 10),
        (Part::Timelines, 5),
        (Part::Progress, 5),
    ];

    /// Its share in percent.
    pub fn percent(self) -> usize {
        Self::SHARES
            .iter()
            .find(|(p, _)| *p == self)
            .map_or(0, |(_, pct)| *pct)
    }
}

/// How many bytes the console may keep of what it shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    bytes: usize,
}

/// The budget every console of this process starts with, in MiB (`[console] max_mib`, set
/// once by the binary from its config before a console starts; 0 = the default).
static PROCESS_MIB: AtomicUsize = AtomicUsize::new(0);

impl Default for Budget {
    /// This process's `[console] max_mib` ([`Budget::set_process_default`]), else 16 MiB.
    fn default() -> Self {
        match PROCESS_MIB.load(Ordering::Relaxed) {
            0 => Self::mib(turnscope::config::CONSOLE_MAX_MIB),
            mib => Self::mib(mib),
        }
    }
}

impl Budget {
    /// Makes `mib` the budget of every console this process opens from now on (live, replay,
    /// attached): the binary calls it with `[console] max_mib`.
    pub fn set_process_default(mib: usize) {
        PROCESS_MIB.store(mib, Ordering::Relaxed);
    }

    /// A budget of `mib` MiB (`[console] max_mib`).
    pub fn mib(mib: usize) -> Self {
        Self::bytes(mib.saturating_mul(1024 * 1024))
    }

    /// A budget of `bytes` bytes.
    pub fn bytes(bytes: usize) -> Self {
        Self { bytes }
    }

    /// The whole budget in bytes.
    pub fn total(self) -> usize {
        self.bytes
    }

    /// The bytes `part` may keep.
    pub fn share(self, part: Part) -> usize {
        self.bytes / 100 * part.percent()
    }
}

/// What an allocation costs beyond its bytes.
const ALLOCATION: usize = 16;

/// About how many bytes a kept frame crossing holds (the event it shares with the bus).
pub fn frame_bytes(f: &FrameEvent) -> usize {
    let owned = |s: &turnscope::observe::event::Name| match s {
        std::borrow::Cow::Borrowed(_) => 0,
        std::borrow::Cow::Owned(o) => o.len() + ALLOCATION,
    };
    std::mem::size_of::<turnscope::observe::Event>()
        + 2 * ALLOCATION
        + f.detail.len()
        + owned(&f.kind)
        + owned(&f.name)
        + owned(&f.from)
        + owned(&f.to)
        + owned(&f.direction)
}

/// About how many bytes a kept progress notification holds.
pub fn progress_bytes(p: &ProgressRow) -> usize {
    std::mem::size_of::<ProgressRow>() + p.message.len() + ALLOCATION
}

/// About how many bytes a turn of a transcript holds.
pub fn turn_bytes(t: &TurnView) -> usize {
    std::mem::size_of::<TurnView>()
        + t.line.len()
        + t.reply.len()
        + t.end.as_ref().map_or(0, String::len)
        + 3 * ALLOCATION
        + t.tools
            .iter()
            .map(|c| {
                std::mem::size_of_val(c)
                    + c.name.len()
                    + c.arguments.len()
                    + c.result.len()
                    + 3 * ALLOCATION
            })
            .sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shares_make_the_whole() {
        assert_eq!(Part::SHARES.iter().map(|(_, p)| p).sum::<usize>(), 100);
        let b = Budget::mib(16);
        let parts: usize = Part::SHARES.iter().map(|(p, _)| b.share(*p)).sum();
        assert!(parts <= b.total() && parts > b.total() - 1024);
    }
}
