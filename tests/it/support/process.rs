//! Whether a process still runs, read from `/proc` (Linux, where the suite runs).

/// Whether `pid` still runs: it has a `/proc` entry that is not a zombie or dead (a killed
/// child whose parent exited before reaping it stays a zombie until init reaps it).
pub fn runs(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with(['Z', 'X'])),
        Err(_) => false,
    }
}
