//! One warning line per failed model request (what failed, which session and turn, what to do
//! next), rate-limited so a flood of failures cannot drown the log: at most [`BURST`] lines per
//! [`WINDOW`], then one line saying how many were left out. Headless mode logs warnings to
//! stderr, where CI looks; the console shows the same failures in its panes.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Lines allowed per window.
pub(crate) const BURST: u32 = 5;
/// The window.
pub(crate) const WINDOW: Duration = Duration::from_secs(10);

/// A fixed-window limiter for log lines.
pub(crate) struct LineLimiter {
    state: Mutex<Option<Window>>,
}

struct Window {
    start: Instant,
    logged: u32,
    skipped: u32,
}

/// What the limiter allows for one line.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Allow {
    /// Log it; `skipped` lines were left out in the window before.
    Log { skipped: u32 },
    /// Leave it out.
    Skip,
}

impl LineLimiter {
    pub(crate) const fn new() -> Self {
        Self {
            state: Mutex::new(None),
        }
    }

    /// Whether a line may be logged at `now`.
    pub(crate) fn allow(&self, now: Instant) -> Allow {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match state.as_mut() {
            Some(w) if now.duration_since(w.start) < WINDOW => {
                if w.logged < BURST {
                    w.logged += 1;
                    Allow::Log { skipped: 0 }
                } else {
                    w.skipped += 1;
                    Allow::Skip
                }
            }
            _ => {
                let skipped = state.as_ref().map_or(0, |w| w.skipped);
                *state = Some(Window {
                    start: now,
                    logged: 1,
                    skipped: 0,
                });
                Allow::Log { skipped }
            }
        }
    }
}

static MODEL_FAULTS: LineLimiter = LineLimiter::new();

/// Logs one failed model request of `session`'s `turn` (rate-limited).
pub(crate) fn model_request_failed(session: u64, turn: u64, error: &str, next: &str) {
    match MODEL_FAULTS.allow(Instant::now()) {
        Allow::Skip => {}
        Allow::Log { skipped } => {
            if skipped > 0 {
                tracing::warn!(
                    "{skipped} more failed model requests were not logged in the last {} s (at most {BURST} lines per {} s)",
                    WINDOW.as_secs(),
                    WINDOW.as_secs()
                );
            }
            tracing::warn!(
                "model request failed (session {session}, turn {turn}): {error}; {next}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_is_cut_to_a_burst_per_window_and_counted() {
        let l = LineLimiter::new();
        let t0 = Instant::now();
        for _ in 0..BURST {
            assert_eq!(l.allow(t0), Allow::Log { skipped: 0 });
        }
        for _ in 0..7 {
            assert_eq!(l.allow(t0 + Duration::from_secs(1)), Allow::Skip);
        }
        assert_eq!(l.allow(t0 + WINDOW), Allow::Log { skipped: 7 });
        assert_eq!(
            l.allow(t0 + WINDOW + Duration::from_secs(1)),
            Allow::Log { skipped: 0 }
        );
    }
}
