//! How a headless drain ended, and the stderr line saying which turns in flight the stop cut.

use std::time::Duration;

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

/// The stderr line saying how many turns in flight the stop cut (none when it cut none): one
/// line of its own, starting `turnscope: cut N turn`, so a script or CI can tell a drain that
/// lost a turn's reply from one that did not (the exit status stays 0: the server did what
/// the signal asked).
pub(crate) fn cut_line(
    stopped: turnscope::app::Stopped,
    end: DrainEnd,
    bound: Duration,
) -> Option<String> {
    let n = stopped.cut;
    if n == 0 {
        return None;
    }
    let turns = if n == 1 { "turn" } else { "turns" };
    let why = match end {
        DrainEnd::Signal => "a second signal".to_string(),
        DrainEnd::Bound | DrainEnd::Drained => {
            format!("the drain bound ({} s)", bound.as_secs_f64())
        }
    };
    let fate = if stopped.kept {
        if n == 1 {
            "its line got no reply; the store keeps the conversation, and the next chat on its \
             handle (an empty line too) tells its client so, once"
        } else {
            "their lines got no reply; the store keeps the conversations, and the next chat on \
             each handle (an empty line too) tells its client so, once"
        }
    } else if n == 1 {
        "its conversation ends with this process (the store is memory; --store sqlite:PATH \
         keeps conversations across a restart)"
    } else {
        "their conversations end with this process (the store is memory; --store sqlite:PATH \
         keeps conversations across a restart)"
    };
    let advice = match end {
        DrainEnd::Signal => "",
        DrainEnd::Bound | DrainEnd::Drained => {
            ". Raise --drain-seconds ([server] drain_seconds) to let turns this long finish"
        }
    };
    Some(format!(
        "turnscope: cut {n} {turns} in flight at {why}: {fate}{advice}"
    ))
}
