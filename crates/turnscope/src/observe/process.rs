//! What the process itself uses: resident memory, open file descriptors, OS threads and live
//! tokio tasks. Served in `/healthz` (so a soak can watch a server from outside) and read by
//! the benches. Linux figures come from `/proc/self`; elsewhere they are absent.

use serde::Serialize;

/// One reading of the process's resources.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct ProcessStats {
    /// Resident set size, in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rss_bytes: Option<u64>,
    /// Open file descriptors (sockets included).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_fds: Option<u64>,
    /// OS threads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threads: Option<u64>,
    /// Live tokio tasks of the runtime this is called on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tasks: Option<u64>,
}

impl ProcessStats {
    /// Reads the figures now. Cheap (a few small `/proc` reads), but not for per-frame paths.
    pub fn sample() -> Self {
        Self {
            rss_bytes: rss_bytes(),
            open_fds: std::fs::read_dir("/proc/self/fd")
                .ok()
                .map(|dir| dir.count() as u64),
            threads: std::fs::read_to_string("/proc/self/status")
                .ok()
                .and_then(|status| {
                    status
                        .lines()
                        .find_map(|l| l.strip_prefix("Threads:"))
                        .and_then(|n| n.trim().parse().ok())
                }),
            tasks: tokio::runtime::Handle::try_current()
                .ok()
                .map(|rt| rt.metrics().num_alive_tasks() as u64),
        }
    }
}

/// Resident set size of this process, in bytes (Linux).
pub fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_sample_sees_this_process() {
        let stats = ProcessStats::sample();
        if cfg!(target_os = "linux") {
            assert!(stats.rss_bytes.unwrap() > 1_000_000);
            // stdin/stdout/stderr at least.
            assert!(stats.open_fds.unwrap() >= 3);
            assert!(stats.threads.unwrap() >= 1);
        }
        let before = stats.tasks.unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let _ = rx.await;
        });
        assert_eq!(ProcessStats::sample().tasks.unwrap(), before + 1);
        tx.send(()).unwrap();
        task.await.unwrap();
    }
}
