//! The file store's writer: one thread owns the writing connection, so SQLite's blocking calls
//! never run on the async runtime. Writes queue on a channel; the thread takes every write
//! waiting, applies them in one transaction (each inside its own savepoint, so one failing
//! write does not undo the others) and commits once: one flush to disk carries every write
//! that arrived while the previous one was flushing, and under load those of a short gather
//! after it (group commit). A write's caller is answered only after the commit, so a write
//! that returned is on disk.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::Connection;
use tokio::sync::oneshot;

use super::errors::explain;
use crate::store::{StoreError, StoreStats};

/// The writer thread's name (what `top -H` and `/proc/PID/task/*/comm` show).
pub const WRITER_THREAD: &str = "turnscope-store";

/// Most writes one transaction carries.
const MAX_BATCH: usize = 512;

/// How long a batch with company waits for more writes before it commits (see [`run`]).
const GATHER: Duration = Duration::from_millis(4);

/// Commits between two WAL checkpoints (the WAL is copied into the file and reset).
const CHECKPOINT_EVERY: u64 = 1000;

/// One write waiting for the writer thread.
trait Job: Send {
    /// Runs inside the batch's transaction.
    fn apply(&mut self, conn: &Connection, path: &Path);
    /// Called once the transaction committed (`Ok`) or did not (`Err`).
    fn finish(self: Box<Self>, committed: Result<(), StoreError>);
}

/// A write `run` whose result goes to `reply` once its transaction is durable.
struct Write<R, F> {
    run: Option<F>,
    result: Option<Result<R, StoreError>>,
    reply: oneshot::Sender<Result<R, StoreError>>,
}

impl<R, F> Job for Write<R, F>
where
    R: Send,
    F: FnOnce(&Connection) -> Result<R, StoreError> + Send,
{
    fn apply(&mut self, conn: &Connection, path: &Path) {
        let Some(run) = self.run.take() else {
            return;
        };
        let result = match control(conn, "SAVEPOINT job") {
            Ok(()) => {
                let result = run(conn);
                let end = if result.is_ok() {
                    control(conn, "RELEASE job")
                } else {
                    control(conn, "ROLLBACK TO job").and_then(|()| control(conn, "RELEASE job"))
                };
                match end {
                    Ok(()) => result,
                    Err(e) => Err(explain(path, "a write", &e)),
                }
            }
            Err(e) => Err(explain(path, "a write", &e)),
        };
        self.result = Some(result);
    }

    fn finish(self: Box<Self>, committed: Result<(), StoreError>) {
        let outcome = match (committed, self.result) {
            (Ok(()), Some(result)) => result,
            (Err(e), _) => Err(e),
            (Ok(()), None) => Err(StoreError::unusable("store: a write was never applied")),
        };
        let _ = self.reply.send(outcome);
    }
}

/// Counters the writer thread keeps.
#[derive(Default)]
pub(super) struct Counters {
    writes: AtomicU64,
    syncs: AtomicU64,
    largest_batch: AtomicU64,
}

impl Counters {
    pub(super) fn stats(&self) -> StoreStats {
        StoreStats {
            writes: self.writes.load(Ordering::Relaxed),
            syncs: self.syncs.load(Ordering::Relaxed),
            largest_batch: self.largest_batch.load(Ordering::Relaxed),
        }
    }
}

/// The handle to the writer thread.
pub(super) struct Writer {
    queue: Mutex<Option<mpsc::Sender<Box<dyn Job>>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    counters: Arc<Counters>,
}

impl Writer {
    /// Starts the thread over `conn` (a connection in WAL mode with `synchronous=FULL`;
    /// `read_only`: one that cannot write, which never checkpoints).
    pub(super) fn start(conn: Connection, path: PathBuf, read_only: bool) -> std::io::Result<Self> {
        let (tx, rx) = mpsc::channel::<Box<dyn Job>>();
        let counters = Arc::new(Counters::default());
        let thread_counters = counters.clone();
        let thread = std::thread::Builder::new()
            .name(WRITER_THREAD.into())
            .spawn(move || run(conn, &path, rx, &thread_counters, read_only))?;
        Ok(Self {
            queue: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
            counters,
        })
    }

    pub(super) fn stats(&self) -> StoreStats {
        self.counters.stats()
    }

    /// Runs `run` in the next transaction; returns its result once that transaction is on
    /// disk (or the error that kept it off).
    pub(super) async fn write<R, F>(&self, run: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R, StoreError> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job: Box<dyn Job> = Box::new(Write {
            run: Some(run),
            result: None,
            reply,
        });
        let sent = self
            .queue
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|q| q.send(job).is_ok())
            .unwrap_or(false);
        if !sent {
            return Err(StoreError::unusable(
                "store: closed; the write was not made",
            ));
        }
        answer.await.unwrap_or_else(|_| {
            Err(StoreError::unusable(
                "store: the writer thread stopped; the write was not made",
            ))
        })
    }

    /// Lets the thread finish the writes queued, checkpoint and close the connection; waits
    /// for it.
    pub(super) async fn close(&self) {
        drop(self.queue.lock().unwrap_or_else(|p| p.into_inner()).take());
        let thread = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(thread) = thread {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }
}

/// The thread: batches, one transaction each, until every sender is gone.
///
/// A batch is every write waiting. When it holds more than one (writers are busy), the thread
/// first waits [`GATHER`] and takes what arrived meanwhile too, so under concurrent load a
/// write waits at most that much more while one transaction, and its flush to disk, carries
/// more writes. (Release build, zero pace, 200 sessions: waiting a fixed 2 ms flushed 0.21–0.33
/// times a turn and kept 0.83 of the memory store's turns/s, 4 ms 0.10–0.18 and 0.90, 6 ms
/// no better; waiting only as long as the last transaction took, as before 2026-12-03,
/// flushed more still: docs/benchmarks.md.) A lone write (one caller, or a quiet server) is
/// committed at once. Nobody is answered before the commit.
fn run(
    conn: Connection,
    path: &Path,
    rx: mpsc::Receiver<Box<dyn Job>>,
    counters: &Counters,
    read_only: bool,
) {
    let mut since_checkpoint = 0u64;
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        take_waiting(&rx, &mut batch);
        if batch.len() > 1 && batch.len() < MAX_BATCH {
            std::thread::sleep(GATHER);
            take_waiting(&rx, &mut batch);
        }
        let committed = match control(&conn, "BEGIN IMMEDIATE") {
            Ok(()) => {
                for job in &mut batch {
                    job.apply(&conn, path);
                }
                match control(&conn, "COMMIT") {
                    Ok(()) => Ok(()),
                    Err(e) => {
                        let _ = control(&conn, "ROLLBACK");
                        Err(explain(path, "a commit", &e))
                    }
                }
            }
            Err(e) => Err(explain(path, "a transaction", &e)),
        };
        if committed.is_ok() {
            counters.syncs.fetch_add(1, Ordering::Relaxed);
            counters
                .writes
                .fetch_add(batch.len() as u64, Ordering::Relaxed);
            counters
                .largest_batch
                .fetch_max(batch.len() as u64, Ordering::Relaxed);
            since_checkpoint += 1;
        }
        for job in batch {
            job.finish(committed.clone());
        }
        if since_checkpoint >= CHECKPOINT_EVERY && !read_only {
            since_checkpoint = 0;
            checkpoint(&conn, counters, "PASSIVE");
        }
    }
    if !read_only {
        checkpoint(&conn, counters, "TRUNCATE");
    }
}

/// Moves the writes waiting on `rx` into `batch`, up to [`MAX_BATCH`].
fn take_waiting(rx: &mpsc::Receiver<Box<dyn Job>>, batch: &mut Vec<Box<dyn Job>>) {
    while batch.len() < MAX_BATCH {
        match rx.try_recv() {
            Ok(job) => batch.push(job),
            Err(_) => break,
        }
    }
}

/// Runs a transaction-control statement (`BEGIN`, `COMMIT`, a savepoint's) from the
/// connection's statement cache: each write runs two and each batch two, and parsing them anew
/// every time (`execute_batch`) is work on the one thread every write waits for.
fn control(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(drop)
}

/// Most free pages one checkpoint gives back while writes wait on this thread (8 MiB of
/// 4 KiB pages); the rest go with the next ones, and all of them at exit.
const VACUUMED_AT_MOST: u32 = 2048;

/// Copies the WAL into the database file (two flushes: the WAL, then the file) so the WAL
/// does not grow without bound; counted with the syncs. First gives back pages deleted
/// conversations left free (a file made with `auto_vacuum = INCREMENTAL`; nothing otherwise):
/// at most [`VACUUMED_AT_MOST`] while serving, every one at the last (`TRUNCATE`) checkpoint.
fn checkpoint(conn: &Connection, counters: &Counters, mode: &str) {
    // 0 gives back every free page.
    let pages = if mode == "TRUNCATE" {
        0
    } else {
        VACUUMED_AT_MOST
    };
    // Stepped to its end: each step gives back one page (`execute_batch` stepped once).
    let vacuumed = conn
        .prepare(&format!("PRAGMA incremental_vacuum({pages})"))
        .and_then(|mut statement| {
            let mut steps = statement.query([])?;
            while steps.next()?.is_some() {}
            Ok(())
        });
    // (Not counted with the syncs: it flushes only when it freed pages, which it does not say.)
    if let Err(e) = vacuumed {
        tracing::warn!("store: giving back free pages failed: {e}");
    }
    let copied = conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |row| {
        row.get::<_, i64>(2)
    });
    match copied {
        Ok(frames) if frames > 0 => {
            counters.syncs.fetch_add(2, Ordering::Relaxed);
        }
        Ok(_) => {}
        Err(e) => tracing::warn!("store: WAL checkpoint failed: {e}"),
    }
}
