//! The JSONL recorder behind `--events FILE`: every bus event as one JSON line. It reads the
//! bus like any listener, so it never slows the server; when it falls behind, the events it
//! missed are marked in the file where they were lost (a `warn` log line with the count).
//! Given a [`Retell`] once the server is up, it also writes what an event calls for besides
//! itself: a conversation reopened from the store has its earlier turns told after its
//! opening, so `turnscope replay` shows it whole, not from the turn it went on with.
//! A file an earlier run recorded is kept: moved aside under a dated name before this run's.
//! Given a size (`--events-max-mib`), the file is cut into pieces: past the size it is moved
//! aside as the earlier recordings are, the piece before it (this run's) deleted, and a new
//! piece begun with the server as it is then ([`Opening`]), so at most two pieces of a run
//! are kept and each replays whole.

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

/// What a new piece of a recording cut by size begins with, told to the callback: the
/// server as it is then (`server::viewers::open_pieces`), so the piece replays whole though
/// its sessions were opened in an earlier one.
pub type Opening = Arc<dyn Fn(&mut dyn FnMut(&Event)) + Send + Sync>;

/// What the server tells the recorder once it is up ([`Recording::retell_with`],
/// [`Recording::open_pieces_with`]): the recording starts before it.
#[derive(Default)]
pub struct Tellers {
    retell: OnceLock<Retell>,
    opening: OnceLock<Opening>,
}

/// Where the lines go: the file (or stdout) and how many bytes its current piece holds.
struct Out {
    writer: BufWriter<Box<dyn AsyncWrite + Send + Unpin>>,
    bytes: u64,
    lines: u64,
}

impl Out {
    fn new(out: Box<dyn AsyncWrite + Send + Unpin>) -> Self {
        Self {
            writer: BufWriter::new(out),
            bytes: 0,
            lines: 0,
        }
    }

    /// Writes `line` (whole lines); false when the writing failed.
    async fn put(&mut self, line: &[u8]) -> bool {
        if self.writer.write_all(line).await.is_err() {
            return false;
        }
        self.bytes += line.len() as u64;
        // A frame's journey is a line per crossing.
        self.lines += line.iter().filter(|b| **b == b'\n').count() as u64;
        true
    }

    /// Writes `event` as its line(s); false when the writing failed.
    async fn event(&mut self, line: &mut Vec<u8>, event: &Event) -> bool {
        line.clear();
        !write_line(line, event) || self.put(line).await
    }
}

/// A recording cut into pieces of at most `most` bytes (a burst of events past it: the cut
/// comes between bursts): the piece before the current one, this run's, is kept; older ones
/// are deleted.
struct Pieces {
    path: PathBuf,
    most: u64,
    before: Option<PathBuf>,
}

impl Pieces {
    /// Begins a new piece when the current one passed its size: the current one moved aside
    /// (dated, as an earlier run's recording is), the one before it deleted, and the new one
    /// opened with what `opening` tells. Says it on stderr and in the new piece. Returns the
    /// lines the piece it ended held, if it cut; `Err` when no new piece could be made (the
    /// recording ends); a piece that could not be moved aside is written on, uncut, from then
    /// on.
    async fn cut(
        &mut self,
        out: &mut Out,
        opening: Option<&Opening>,
    ) -> Result<Option<u64>, std::io::Error> {
        if out.bytes < self.most {
            return Ok(None);
        }
        let _ = out.writer.flush().await;
        let aside = match move_aside(&self.path) {
            Ok(Some(aside)) => aside,
            Ok(None) => return Ok(None),
            Err(e) => {
                tracing::warn!(
                    "--events {}: not cut at {} MiB, written on whole from now on: {e}",
                    self.path.display(),
                    self.most >> 20
                );
                self.most = u64::MAX;
                return Ok(None);
            }
        };
        let deleted = match self.before.replace(aside.clone()) {
            Some(before) => match std::fs::remove_file(&before) {
                Ok(()) => format!("; the piece before it, {}, was deleted", before.display()),
                Err(e) => format!(
                    "; the piece before it, {}, could not be deleted ({e}): delete it yourself",
                    before.display()
                ),
            },
            None => String::new(),
        };
        let file = crate::private_files::create(&self.path).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!(
                    "--events {}: the recording stops: a new piece could not be made after {} \
                     ({e})",
                    self.path.display(),
                    aside.display()
                ),
            )
        })?;
        let ended = std::mem::replace(out, Out::new(Box::new(tokio::fs::File::from_std(file))));
        let note = format!(
            "--events {}: the file reached {} MiB (--events-max-mib), so this run's recording \
             goes on in a new piece; the one before is kept as {}{deleted}. This piece opens \
             with the sessions open now",
            self.path.display(),
            self.most >> 20,
            aside.display()
        );
        // A warning: a piece of the recording was deleted.
        tracing::warn!("{note}");
        let mut line = Vec::with_capacity(256);
        let told = Event::Log {
            at_ms: super::event::now_us() / 1000,
            level: "info".into(),
            message: note,
        };
        let mut ok = out.event(&mut line, &told).await;
        if let Some(opening) = opening {
            let mut events = Vec::new();
            opening(&mut |e| events.push(e.clone()));
            for e in &events {
                ok = ok && out.event(&mut line, e).await;
            }
        }
        if ok {
            Ok(Some(ended.lines))
        } else {
            Err(std::io::Error::other(format!(
                "--events {}: the recording stops: its new piece could not be written",
                self.path.display()
            )))
        }
    }
}

/// Starts writing every event published on `bus` to `path` (`-` = stdout), and after each
/// what the `tellers` retell (once set). It flushes after each burst of events; once `stop`
/// is cancelled it writes what is still queued and ends, returning how many lines it wrote
/// (events, retold ones and loss marks, in every piece). A file that holds an earlier
/// recording is moved aside first with [`Keep::MovedAside`] (a restart with the same flags
/// would have emptied it, the run before lost): where it went is returned with the task.
/// With `most` bytes, the file is cut into pieces past it ([`Pieces`]; not stdout).
pub async fn record(
    bus: &Bus,
    path: &Path,
    stop: CancellationToken,
    tellers: Arc<Tellers>,
    keep: Keep,
    most: Option<u64>,
) -> std::io::Result<(JoinHandle<u64>, Option<PathBuf>)> {
    let mut kept = None;
    let to_stdout = path == Path::new("-");
    let out: Box<dyn AsyncWrite + Send + Unpin> = if to_stdout {
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
    let mut pieces = most.filter(|_| !to_stdout).map(|most| Pieces {
        path: path.to_path_buf(),
        most: most.max(1),
        before: None,
    });
    let mut sub = bus.subscribe_whole();
    Ok((
        tokio::spawn(async move {
            let mut out = Out::new(out);
            let mut earlier = 0u64;
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
                    if !out.event(&mut line, &event).await {
                        return earlier + out.lines;
                    }
                    if let Some(retell) = tellers.retell.get() {
                        retell(&event, &mut |e| told.push(e.clone()));
                        for e in told.drain(..) {
                            if !out.event(&mut line, &e).await {
                                return earlier + out.lines;
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
                    if !out.event(&mut line, &lost_mark(lost)).await {
                        return earlier + out.lines;
                    }
                }
                let _ = out.writer.flush().await;
                if let Some(pieces) = pieces.as_mut() {
                    match pieces.cut(&mut out, tellers.opening.get()).await {
                        Ok(Some(ended)) => earlier += ended,
                        Ok(None) => {}
                        Err(e) => {
                            tracing::error!("{e}");
                            return earlier + out.lines;
                        }
                    }
                    let _ = out.writer.flush().await;
                }
            }
            let _ = out.writer.flush().await;
            earlier + out.lines
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
    tellers: Arc<Tellers>,
    kept_aside: Option<String>,
}

/// The size past which `--events` files are cut into pieces (`--events-max-mib`), for
/// every recording this process starts: set once, at start, from the command line.
static PIECE_BYTES: OnceLock<u64> = OnceLock::new();

impl Recording {
    /// Cuts every recording this process starts from now on into pieces of `bytes`
    /// (`--events-max-mib`; see [`Pieces`]). Only the first call counts.
    pub fn cut_into_pieces_of(bytes: u64) {
        let _ = PIECE_BYTES.set(bytes);
    }

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
        let tellers = Arc::new(Tellers::default());
        let mut kept_aside = None;
        let task = match path {
            Some(path) => {
                let most = PIECE_BYTES.get().copied();
                let (task, aside) =
                    record(bus, path, stop.clone(), tellers.clone(), keep, most).await?;
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
            tellers,
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
        let _ = self.tellers.retell.set(retell);
    }

    /// From now on, a new piece of a recording cut by size (`--events-max-mib`) begins with
    /// what `opening` tells (the server as it is then). Only the first call counts.
    pub fn open_pieces_with(&self, opening: Opening) {
        let _ = self.tellers.opening.set(opening);
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
        let (task, _) = record(
            &bus,
            &path,
            stop.clone(),
            Arc::default(),
            Keep::MovedAside,
            None,
        )
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
        let (task, _) = record(
            &bus,
            &path,
            stop.clone(),
            Arc::default(),
            Keep::MovedAside,
            None,
        )
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
