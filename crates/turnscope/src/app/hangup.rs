//! What SIGHUP means: a reload of the config, unless the terminal the process runs in hung up.
//!
//! When a terminal goes away (its window closed, an SSH connection dropped, a tmux pane
//! killed) the kernel marks it hung up before it sends SIGHUP: from then on the process's
//! standard streams on it are no longer terminals (`isatty` fails with `EIO`). So a SIGHUP
//! after which a stream that was a terminal at start is one no more is the hang-up, and the
//! front end ends as on SIGTERM; any other SIGHUP (`kill -HUP`, a process manager) reloads.

use std::io::IsTerminal;

/// Which standard streams were terminals when the process started.
#[derive(Debug, Clone, Copy)]
pub struct Terminals {
    stdin: bool,
    stdout: bool,
    stderr: bool,
}

impl Terminals {
    /// The streams that are terminals now (call it at start).
    pub fn now() -> Self {
        Self {
            stdin: std::io::stdin().is_terminal(),
            stdout: std::io::stdout().is_terminal(),
            stderr: std::io::stderr().is_terminal(),
        }
    }

    /// Whether a stream that was a terminal at start is one no more: the terminal hung up.
    pub fn hung_up(&self) -> bool {
        let now = Self::now();
        (self.stdin && !now.stdin) || (self.stdout && !now.stdout) || (self.stderr && !now.stderr)
    }
}
