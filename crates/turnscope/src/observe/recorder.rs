//! The JSONL recorder behind `--events FILE`: every bus event as one JSON line. It reads the
//! bus like any listener, so it never slows the server; when it falls behind, the events it
//! missed are marked in the file where they were lost (a `warn` log line with the count).
//! Given a [`Retell`] once the server is up, it also writes what an event calls for besides
//! itself: a conversation reopened from the store has its earlier turns told after its
//! opening, so `turnscope replay` shows it whole, not from the turn it went on with.
//! A file an earlier run recorded is kept: moved aside under a dated name before this run's.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use tokio::io::{AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::bus::Bus;
use super::event::Event;
use super::line::write_line;

/// What the recorder writes after an event besides it, told to the callback: a server's
/// conversation reopened from the store has its earlier turns told after its opening
/// (`server::viewers::retell_reopened`). Called for every event: it must return at once for
/// all but the rare ones it tells something after.
pub type Retell = Arc<dyn Fn(&Event, &mut dyn FnMut(&Event)) + Send + Sync>;

/// Starts writing every event published on `bus` to `path` (`-` = stdout), and after each
/// what `retell` (once set) tells of it. It flushes after each burst of events; once `stop`
/// is cancelled it writes what is still queued and ends, returning how many lines it wrote
/// (events, retold ones and loss marks). A file that holds an earlier recording is moved
/// aside first with [`Keep::MovedAside`] (a restart with the same flags would have emptied
/// it, the run before lost): where it went is returned with the task.
pub async fn record(
    bus: &Bus,
    path: &Path,
    stop: CancellationToken,
    retell: Arc<OnceLock<Retell>>,
    keep: Keep,
) -> std::io::Result<(JoinHandle<u64>, Option<PathBuf>)> {
    let mut kept = None;
    let out: Box<dyn AsyncWrite + Send + Unpin> = if path == Path::new("-") {
        Box::new(tokio::io::stdout())
    } else {
        if keep == Keep::MovedAside {
            kept = move_aside(path)?;
        }
        // Owner-only: what it records is people's conversations.
        let file = crate::private_files::create(path).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("cannot create events file {}: {e}", path.display()),
            )
        })?;
        Box::new(tokio::fs::File::from_std(file))
    };
    let mut sub = bus.subscribe_whole();
    Ok((
        tokio::spawn(async move {
            let mut out = BufWriter::new(out);
            let mut written = 0u64;
            let mut marked = 0u64;
            let mut line = Vec::with_capacity(256);
            let mut told: Vec<Event> = Vec::new();
            loop {
                let event = tokio::select! {
                    event = sub.recv() => event,
                    _ = stop.cancelled() => sub.try_recv(),
                };
                let Some(event) = event else { break };
                let mut next = Some(event);
                while let Some(event) = next {
                    line.clear();
                    if write_line(&mut line, &event) {
                        if out.write_all(&line).await.is_err() {
                            return written;
                        }
                        // A frame's journey is a line per crossing.
                        written += line.iter().filter(|b| **b == b'\n').count() as u64;
                    }
                    if let Some(retell) = retell.get() {
                        retell(&event, &mut |e| told.push(e.clone()));
                        for e in told.drain(..) {
                            line.clear();
                            if write_line(&mut line, &e) {
                                if out.write_all(&line).await.is_err() {
                                    return written;
                                }
                                written += 1;
                            }
                        }
                    }
                    next = sub.try_recv();
                }
                let missed = sub.missed();
                if missed > marked {
                    let lost = missed - marked;
                    marked = missed;
                    tracing::warn!(
                        lost,
                        "events recorder fell behind; the loss is marked in the file"
                    );
                    line.clear();
                    if write_line(&mut line, &lost_mark(lost)) {
                        if out.write_all(&line).await.is_err() {
                            return written;
                        }
                        written += 1;
                    }
                }
                let _ = out.flush().await;
            }
            let _ = out.flush().await;
            written
        }),
        kept,
    ))
}

/// Moves an earlier recording at `path` aside, to the same name with the time it was last
/// written (`events.jsonl` → `events.20261206T114903.jsonl`, `-2`… when that is taken), and
/// returns where; nothing when there is none, or it is empty. Not appended to: each file is one
/// run, whose session numbers `turnscope replay` reads as one server's.
fn move_aside(path: &Path) -> std::io::Result<Option<PathBuf>> {
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(None);
    };
    if !meta.is_file() || meta.len() == 0 {
        return Ok(None);
    }
    let written = chrono::DateTime::<chrono::Utc>::from(
        meta.modified()
            .unwrap_or_else(|_| std::time::SystemTime::now()),
    );
    let stamp = written.format("%Y%m%dT%H%M%S").to_string();
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ext = path
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    for n in 1..1000 {
        let suffix = if n == 1 {
            String::new()
        } else {
            format!("-{n}")
        };
        let aside = path.with_file_name(format!("{stem}.{stamp}{suffix}{ext}"));
        if aside.exists() {
            continue;
        }
        std::fs::rename(path, &aside).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!(
                    "cannot keep the earlier recording {} (moving it to {}): {e}; move it yourself, \
                     or give --events another file",
                    path.display(),
                    aside.display()
                ),
            )
        })?;
        return Ok(Some(aside));
    }
    Err(std::io::Error::other(format!(
        "cannot keep the earlier recording {}: too many kept beside it; give --events another file",
        path.display()
    )))
}

/// What is said (in the Log, and so in the file) when an earlier recording at `path` was
/// moved `aside`.
fn aside_note(path: &Path, aside: &Path) -> String {
    format!(
        "--events {}: the earlier recording there is kept as {} (turnscope replay opens it); this \
         run records to {}",
        path.display(),
        aside.display(),
        path.display()
    )
}

/// The line that marks `lost` events missing from the file at that point.
fn lost_mark(lost: u64) -> Event {
    Event::Log {
        at_ms: super::event::now_us() / 1000,
        level: "warn".into(),
        message: format!(
            "{lost} events are missing here: the --events recorder fell behind the bus"
        ),
    }
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

/// What a recording does with a file an earlier run left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Moved aside under a dated name (a server's, an attached console's: what they saw
    /// cannot be seen again).
    MovedAside,
    /// Written over (`turnscope test`: a report of this run, which can be run again).
    Afresh,
}

/// `--events`, when given: a recorder that runs until [`Recording::finish`].
pub struct Recording {
    stop: CancellationToken,
    task: Option<JoinHandle<u64>>,
    retell: Arc<OnceLock<Retell>>,
    kept_aside: Option<String>,
}

impl Recording {
    /// Starts recording `bus` to `path` when a path is given (an earlier run's recording
    /// there moved aside); otherwise records nothing.
    pub async fn start(bus: &Bus, path: Option<&Path>) -> std::io::Result<Self> {
        Self::start_keeping(bus, path, Keep::MovedAside).await
    }

    /// [`Self::start`], with what is done with a file an earlier run left.
    pub async fn start_keeping(
        bus: &Bus,
        path: Option<&Path>,
        keep: Keep,
    ) -> std::io::Result<Self> {
        let stop = CancellationToken::new();
        let retell = Arc::new(OnceLock::new());
        let mut kept_aside = None;
        let task = match path {
            Some(path) => {
                let (task, aside) = record(bus, path, stop.clone(), retell.clone(), keep).await?;
                if let Some(aside) = aside {
                    let note = aside_note(path, &aside);
                    bus.publish(Event::Log {
                        at_ms: super::event::now_us() / 1000,
                        level: "info".into(),
                        message: note.clone(),
                    });
                    kept_aside = Some(note);
                }
                Some(task)
            }
            None => None,
        };
        Ok(Self {
            stop,
            task,
            retell,
            kept_aside,
        })
    }

    /// What was said when the file held an earlier recording, moved aside (the console's
    /// Log shows it; a headless server prints it).
    pub fn kept_aside(&self) -> Option<&str> {
        self.kept_aside.as_deref()
    }

    /// From now on, writes after each event what `retell` tells of it (the recording starts
    /// before the server, so that its start-up warnings are in it; the server's sessions
    /// come later). Only the first call counts. What the recorder reads before (a session
    /// reopened in the instant between the server's start and this call), or after the
    /// sessions are gone (events still queued at shutdown), is written without retelling.
    pub fn retell_with(&self, retell: Retell) {
        let _ = self.retell.set(retell);
    }

    /// Writes what is still queued and stops (waiting at most 2 s).
    pub async fn finish(self) {
        self.stop.cancel();
        if let Some(task) = self.task {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(2), task).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame's journey is written as a line per crossing, and counted so.
    #[tokio::test]
    async fn a_journey_is_recorded_as_its_crossings() {
        let bus = Bus::new(16);
        let path =
            std::env::temp_dir().join(format!("turnscope-rec-j-{}.jsonl", std::process::id()));
        let stop = CancellationToken::new();
        let (task, _) = record(&bus, &path, stop.clone(), Arc::default(), Keep::MovedAside)
            .await
            .unwrap();
        let hop = |from, to| crate::observe::Hop {
            from,
            to,
            at_us: 1,
            depth: 0,
        };
        bus.publish(Event::Journey(crate::observe::FrameJourney {
            id: 1,
            session: 1,
            turn: 1,
            kind: "data",
            name: "TextPiece",
            direction: "down",
            detail: "hi".into(),
            hops: vec![hop("model", "output"), hop("output", "sink")],
        }));
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        stop.cancel();
        let written = task.await.unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        #[cfg(unix)]
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&path).unwrap().permissions(),
        ) & 0o777;
        std::fs::remove_file(&path).ok();
        #[cfg(unix)]
        assert_eq!(mode, 0o600, "a recording is its owner's alone");
        let (events, problems) = read_events(&text);
        assert!(problems.is_empty(), "{problems:?}");
        let hops: Vec<String> = events
            .iter()
            .filter_map(|e| match e {
                Event::Frame(f) => Some(format!("{}>{}", f.from, f.to)),
                _ => None,
            })
            .collect();
        assert_eq!(hops, ["model>output", "output>sink"], "{text}");
        assert_eq!(written, 2);
    }

    /// A recorder that cannot keep up marks the loss in the file, once per loss, and the file
    /// still reads back whole.
    #[tokio::test]
    async fn a_loss_is_marked_in_the_file() {
        let bus = Bus::new(4);
        let path = std::env::temp_dir().join(format!("turnscope-rec-{}.jsonl", std::process::id()));
        let stop = CancellationToken::new();
        let (task, _) = record(&bus, &path, stop.clone(), Arc::default(), Keep::MovedAside)
            .await
            .unwrap();
        // A burst far beyond the bus's capacity, published without yielding to the recorder.
        for n in 0..100u64 {
            bus.publish(Event::Log {
                at_ms: n,
                level: "info".into(),
                message: n.to_string(),
            });
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        stop.cancel();
        task.await.unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).ok();
        let (events, problems) = read_events(&text);
        assert!(problems.is_empty(), "{problems:?}");
        let marks: Vec<&String> = events
            .iter()
            .filter_map(|e| match e {
                Event::Log { message, .. } if message.contains("missing here") => Some(message),
                _ => None,
            })
            .collect();
        assert_eq!(marks.len(), 1, "{text}");
        let lost: u64 = marks[0].split(' ').next().unwrap().parse().unwrap();
        let kept = events.len() as u64 - 1;
        assert_eq!(
            lost + kept,
            100,
            "every event is either written or counted: {text}"
        );
    }
}
