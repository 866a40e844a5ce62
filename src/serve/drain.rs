//! How a headless drain ended, and what that makes of the stderr line saying which turns in
//! flight the stop cut ([`turnscope::app::Stopped::cut_line`], shared with the console).

use std::time::Duration;

use turnscope::app::StopCause;

/// How a headless drain ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DrainEnd {
    /// Every turn finished and was read, every answer written out.
    Drained,
    /// `drain_seconds` passed first.
    Bound,
    /// A second signal came first.
    Signal,
}

impl DrainEnd {
    /// What ended the wait, as the cut line says it ([`turnscope::app::Stopped::cut_line`]); `bound` is the
    /// drain bound the drain had.
    pub(crate) fn cause(self, bound: Duration) -> StopCause {
        match self {
            DrainEnd::Signal => StopCause::SecondSignal,
            DrainEnd::Bound | DrainEnd::Drained => StopCause::DrainBound(bound),
        }
    }
}
