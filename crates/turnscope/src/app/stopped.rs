//! What a stop did to the turns in flight ([`Stopped`]), and the one stderr line that says so
//! ([`Stopped::cut_line`]), which the headless server and the console both leave.

use std::time::Duration;

/// What [`App::shutdown`](super::App::shutdown) did to the turns in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stopped {
    /// Turns still running when the sessions were ended (the drain bound passed, a second
    /// signal came, or no drain): each ended `restarted` and, in a durable store, kept for
    /// its handle's next `chat` to report once, as after a crash; in memory, lost with the
    /// process.
    pub cut: usize,
    /// Whether the store outlives the process.
    pub kept: bool,
}

/// What ended the wait for turns in flight before the sessions were ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopCause {
    /// The drain ended, by itself or at its bound (`server.drain_seconds`, the value given).
    DrainBound(Duration),
    /// A second signal came during the drain.
    SecondSignal,
    /// The console quit (`q`, Ctrl-C, its terminal hung up): no drain, what ran is cut.
    ConsoleQuit,
}

impl Stopped {
    /// The stderr line saying how many turns in flight the stop cut (none when it cut none):
    /// one line of its own, starting `turnscope: cut N turn`, so a script, CI or the person
    /// who quit can tell a stop that lost a turn's reply from one that did not (the exit
    /// status stays 0: the process did what it was asked).
    pub fn cut_line(&self, cause: StopCause) -> Option<String> {
        let n = self.cut;
        if n == 0 {
            return None;
        }
        let turns = if n == 1 { "turn" } else { "turns" };
        let why = match cause {
            StopCause::SecondSignal => "a second signal".to_string(),
            StopCause::DrainBound(bound) => {
                format!("the drain bound ({} s)", bound.as_secs_f64())
            }
            StopCause::ConsoleQuit => "the console's quit".to_string(),
        };
        let fate = if self.kept {
            if n == 1 {
                "its line got no reply; the store keeps the conversation, and the next chat on \
                 its handle (an empty line too) tells its client so, once"
            } else {
                "their lines got no reply; the store keeps the conversations, and the next chat \
                 on each handle (an empty line too) tells its client so, once"
            }
        } else if n == 1 {
            "its conversation ends with this process (the store is memory; --store sqlite:PATH \
             keeps conversations across a restart)"
        } else {
            "their conversations end with this process (the store is memory; --store \
             sqlite:PATH keeps conversations across a restart)"
        };
        let advice = match cause {
            StopCause::SecondSignal => "",
            StopCause::DrainBound(_) => {
                ". Raise --drain-seconds ([server] drain_seconds) to let turns this long finish"
            }
            StopCause::ConsoleQuit => {
                ". Quitting does not wait for a turn: quit once it has ended, or stop the \
                 console with SIGTERM, which lets turns finish first (--drain-seconds)"
            }
        };
        Some(format!(
            "turnscope: cut {n} {turns} in flight at {why}: {fate}{advice}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_that_cut_nothing_says_nothing_and_one_that_did_says_why_once() {
        let none = Stopped { cut: 0, kept: true };
        assert_eq!(none.cut_line(StopCause::ConsoleQuit), None);
        let one = Stopped { cut: 1, kept: true };
        let bound = one
            .cut_line(StopCause::DrainBound(Duration::from_millis(500)))
            .unwrap();
        assert!(
            bound.starts_with(
                "turnscope: cut 1 turn in flight at the drain bound (0.5 s): its line got no reply"
            ),
            "{bound}"
        );
        assert!(bound.ends_with("to let turns this long finish"), "{bound}");
        let second = one.cut_line(StopCause::SecondSignal).unwrap();
        assert!(second.ends_with("tells its client so, once"), "{second}");
        let quit = Stopped {
            cut: 2,
            kept: false,
        }
        .cut_line(StopCause::ConsoleQuit)
        .unwrap();
        assert!(
            quit.starts_with(
                "turnscope: cut 2 turns in flight at the console's quit: their conversations end \
                 with this process"
            ),
            "{quit}"
        );
        assert!(
            quit.contains("SIGTERM, which lets turns finish first"),
            "{quit}"
        );
        assert!(!quit.contains('\n'));
    }
}
