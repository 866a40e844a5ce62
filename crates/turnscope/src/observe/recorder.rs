//! The JSONL recorder behind `--events FILE`: every bus event as one JSON line.

use std::path::Path;

use tokio::io::{AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::bus::Bus;
use super::event::Event;

/// Starts writing every event published on `bus` to `path` (`-` = stdout). It flushes after
/// each burst of events; once `stop` is cancelled it writes what is still queued and ends,
/// returning how many events it wrote.
pub async fn record(
    bus: &Bus,
    path: &Path,
    stop: CancellationToken,
) -> std::io::Result<JoinHandle<u64>> {
    let out: Box<dyn AsyncWrite + Send + Unpin> = if path == Path::new("-") {
        Box::new(tokio::io::stdout())
    } else {
        Box::new(tokio::fs::File::create(path).await.map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("cannot create events file {}: {e}", path.display()),
            )
        })?)
    };
    let mut sub = bus.subscribe();
    Ok(tokio::spawn(async move {
        let mut out = BufWriter::new(out);
        let mut written = 0u64;
        let mut line = Vec::with_capacity(256);
        loop {
            let event = tokio::select! {
                event = sub.recv() => event,
                _ = stop.cancelled() => sub.try_recv(),
            };
            let Some(event) = event else { break };
            let mut next = Some(event);
            while let Some(event) = next {
                line.clear();
                if serde_json::to_writer(&mut line, &*event).is_ok() {
                    line.push(b'\n');
                    if out.write_all(&line).await.is_err() {
                        return written;
                    }
                    written += 1;
                }
                next = sub.try_recv();
            }
            if sub.missed() > 0 {
                tracing::warn!(
                    missed = sub.missed(),
                    "events recorder fell behind; some events were not written"
                );
            }
            let _ = out.flush().await;
        }
        let _ = out.flush().await;
        written
    }))
}

/// Reads a file written by [`record`] back into events; bad lines are reported with their
/// number and skipped.
pub fn read_events(text: &str) -> (Vec<Event>, Vec<String>) {
    let mut events = Vec::new();
    let mut problems = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Event>(line) {
            Ok(e) => events.push(e),
            Err(e) => problems.push(format!("line {}: {e}", i + 1)),
        }
    }
    (events, problems)
}

/// `--events`, when given: a recorder that runs until [`Recording::finish`].
pub struct Recording {
    stop: CancellationToken,
    task: Option<JoinHandle<u64>>,
}

impl Recording {
    /// Starts recording `bus` to `path` when a path is given; otherwise records nothing.
    pub async fn start(bus: &Bus, path: Option<&Path>) -> std::io::Result<Self> {
        let stop = CancellationToken::new();
        let task = match path {
            Some(path) => Some(record(bus, path, stop.clone()).await?),
            None => None,
        };
        Ok(Self { stop, task })
    }

    /// Writes what is still queued and stops (waiting at most 2 s).
    pub async fn finish(self) {
        self.stop.cancel();
        if let Some(task) = self.task {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(2), task).await;
        }
    }
}
