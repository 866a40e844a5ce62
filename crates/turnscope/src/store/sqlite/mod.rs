//! The embedded file store: SQLite through `rusqlite`, compiled in (`bundled`), in WAL mode
//! with `synchronous=FULL`, so a commit that returned is on disk.
//!
//! Why SQLite and not `redb`: the file is a database every machine can open (`sqlite3
//! sessions.sqlite3 'select prefix, bot, turns from heads'`, the JSON columns through
//! `json_extract`), so a user can read their transcripts without turnscope; WAL lets
//! `turnscope sessions list` read while the server writes (redb locks the whole file to one
//! process); recovery after a crash replays the WAL instead of walking the file; and schema
//! versions are SQLite's `user_version`. The cost is C: a cold build compiles SQLite's
//! amalgamation (measured in the commit that added it), about 1.3 MB more binary.
//!
//! One process holds a file: the store takes an exclusive advisory lock on it for its whole
//! life (`flock`, which does not interfere with SQLite's own POSIX locks), so a second server
//! pointed at the same file stops at start with a clear error. Writes go through one writer
//! thread with group commit (`writer`); reads (a stored session reopened, the list) use a
//! second connection on the blocking pool. Neither ever blocks the async runtime.

mod errors;
pub(crate) mod schema;
mod writer;

pub use writer::WRITER_THREAD;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};

use errors::{explain, explain_io, explain_record};
use writer::Writer;

use super::{Commit, HandleId, HandleKey, Head, SessionStore, StoreError, StoreStats, StoredTurn};

/// Sessions kept in a SQLite file.
pub struct SqliteStore {
    path: Arc<PathBuf>,
    key: HandleKey,
    writer: Writer,
    reader: Arc<Mutex<Connection>>,
    /// The exclusive lock on the file, held until the store closes.
    lock: Mutex<Option<File>>,
}

/// How long a connection waits for a lock another connection holds before failing.
const BUSY_MS: u64 = 5000;

/// Prepared statements a connection keeps: more than the store runs, so none is parsed twice.
const STATEMENTS_CACHED: usize = 32;

impl SqliteStore {
    /// Opens (creating it and its folder if need be) the store file at `path`: locks it for
    /// this process, brings its schema up to date, and starts the writer. Blocking: call it
    /// from a blocking context (`tokio::task::spawn_blocking`).
    ///
    /// # Errors
    /// The file is held by another process, read-only, on a full disk, damaged, not a store,
    /// or from a newer turnscope; each message names the file and says what to do.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            crate::private_files::create_dir_all(dir)
                .map_err(|e| explain_io(path, "creating its folder", &e))?;
        }
        // Created 0600: it holds conversations (and its WAL files take its permissions).
        let lock = crate::private_files::file_options()
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| explain_io(path, "opening", &e))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(StoreError::unusable(format!(
                    "store file {}: another turnscope process is using it (a store is held by one server at \
                     a time). Stop that server, or give this one another --store (or another --port: the \
                     default file is one per address)",
                    path.display()
                )));
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(explain_io(path, "locking", &e));
            }
        }
        let conn = open_connection(path, false)?;
        let key = schema::migrate(&conn, path)?;
        let reader = open_connection(path, true)?;
        let writer = Writer::start(conn, path.to_path_buf(), false)
            .map_err(|e| explain_io(path, "starting its writer thread", &e))?;
        Ok(Self {
            path: Arc::new(path.to_path_buf()),
            key,
            writer,
            reader: Arc::new(Mutex::new(reader)),
            lock: Mutex::new(Some(lock)),
        })
    }

    /// Opens the file at `path` to read only, without the lock (so it can be read while a
    /// server holds it): what `turnscope sessions list` and `export` use. Its writes fail.
    ///
    /// # Errors
    /// The file does not exist, is damaged, not a store, or from a newer turnscope.
    pub fn open_to_read(path: &Path) -> Result<Self, StoreError> {
        if !path.exists() {
            return Err(StoreError::unusable(format!(
                "store file {}: no such file. Give the file a server used (--store sqlite:PATH), or the \
                 --port it listened on for its default file",
                path.display()
            )));
        }
        let (conn, version) = open_reading(path)?;
        if version > schema::LATEST {
            return Err(StoreError::unusable(format!(
                "store file {}: it was written by a newer turnscope (schema version {version}; this one knows \
                 up to {}). Upgrade turnscope",
                path.display(),
                schema::LATEST
            )));
        }
        if version == 0 {
            return Err(StoreError::unusable(format!(
                "store file {}: it is not a turnscope session store (no schema version)",
                path.display()
            )));
        }
        let key: Vec<u8> = conn
            .query_row("SELECT value FROM meta WHERE key = 'handle_key'", [], |r| {
                r.get(0)
            })
            .map_err(|e| explain(path, "reading its handle key", &e))?;
        let key = HandleKey::from_bytes(key.try_into().map_err(|_| {
            StoreError::unusable(format!(
                "store file {}: its handle key is damaged",
                path.display()
            ))
        })?);
        let writer_conn = open_connection(path, true)?;
        let writer = Writer::start(writer_conn, path.to_path_buf(), true)
            .map_err(|e| explain_io(path, "starting its writer thread", &e))?;
        Ok(Self {
            path: Arc::new(path.to_path_buf()),
            key,
            writer,
            reader: Arc::new(Mutex::new(conn)),
            lock: Mutex::new(None),
        })
    }

    /// How many conversations the store file at `path` holds, read as [`Self::open_to_read`]
    /// reads it (a read-only connection, without the lock a server holds for its whole life,
    /// so a running server's file is counted too) but with no writer thread: what `turnscope
    /// sessions` says of each store file in the state directory.
    ///
    /// # Errors
    /// The file cannot be read, is not a store, or is from a newer turnscope.
    pub fn count_in(path: &Path) -> Result<u64, StoreError> {
        let (conn, version) = open_reading(path)?;
        if version == 0 || version > schema::LATEST {
            return Err(StoreError::unusable(format!(
                "store file {}: not a store this turnscope reads (schema version {version})",
                path.display()
            )));
        }
        conn.query_row("SELECT count(*) FROM heads", [], |r| r.get::<_, i64>(0))
            .map(|n| n as u64)
            .map_err(|e| explain(path, "counting sessions", &e))
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `read` on the reading connection, on the blocking pool.
    async fn read<R, F>(&self, what: &'static str, read: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<R> + Send + 'static,
    {
        let reader = self.reader.clone();
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || {
            let conn = reader.lock().unwrap_or_else(|p| p.into_inner());
            read(&conn).map_err(|e| explain(&path, what, &e))
        })
        .await
        .unwrap_or_else(|e| Err(StoreError::unusable(format!("store: a read stopped: {e}"))))
    }
}

/// A read-only connection to `path` and its schema version, for [`SqliteStore::open_to_read`].
/// On a read-only filesystem (a backup, a mount) SQLite cannot make the shared-memory index
/// WAL mode reads through: the file is then read as immutable, which needs none, as long as
/// no write-ahead log beside it holds commits such a read would miss. Such a read takes no
/// lock: it is a snapshot of a file nobody writes (a server writing the same file through
/// another mount could be read mid-checkpoint; that read then fails, and is said).
fn open_reading(path: &Path) -> Result<(Connection, i64), StoreError> {
    let conn = open_connection(path, true)?;
    let error = match conn.query_row("PRAGMA user_version", [], |r| r.get(0)) {
        Ok(version) => return Ok((conn, version)),
        Err(e) => e,
    };
    drop(conn);
    let cannot_open = matches!(
        error.sqlite_error_code(),
        Some(rusqlite::ErrorCode::CannotOpen | rusqlite::ErrorCode::ReadOnly)
    );
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let log_empty = std::fs::metadata(PathBuf::from(wal)).map_or(true, |m| m.len() == 0);
    if !cannot_open || !log_empty {
        return Err(explain(path, "reading", &error));
    }
    // The URI form takes `?`, `#` and `%` as its own, and `//` as an authority: the whole
    // path, made absolute, is percent-encoded but for plain characters (and so are bytes a
    // non-UTF-8 name holds).
    let absolute = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let mut uri = String::from("file:");
    for byte in absolute.as_os_str().as_encoded_bytes() {
        match byte {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'/' | b'-' | b'_' | b'.' | b'~' => {
                uri.push(char::from(*byte));
            }
            other => uri.push_str(&format!("%{other:02X}")),
        }
    }
    uri.push_str("?immutable=1");
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn =
        Connection::open_with_flags(&uri, flags).map_err(|e| explain(path, "opening", &e))?;
    conn.set_prepared_statement_cache_capacity(STATEMENTS_CACHED);
    let version = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(|e| explain(path, "reading", &e))?;
    Ok((conn, version))
}

/// A connection to `path` in WAL mode with `synchronous=FULL` (`read_only`: no writes).
fn open_connection(path: &Path, read_only: bool) -> Result<Connection, StoreError> {
    let flags = if read_only {
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX
    } else {
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
    };
    let conn =
        Connection::open_with_flags(path, flags).map_err(|e| explain(path, "opening", &e))?;
    conn.busy_timeout(std::time::Duration::from_millis(BUSY_MS))
        .map_err(|e| explain(path, "opening", &e))?;
    // Every statement a write or a read runs stays prepared (the default keeps 16).
    conn.set_prepared_statement_cache_capacity(STATEMENTS_CACHED);
    if !read_only {
        // Before the journal mode: switching it rewrites the header of a file that may be
        // someone else's database.
        schema::refuse_foreign(&conn, path)?;
        // A new file gives back the pages of deleted conversations (the writer vacuums them
        // with each checkpoint); the file kept its busiest size for ever, 450 MB with nothing
        // in it. Set before the first table, it holds for the file's life; an older file
        // without it is left as it is.
        conn.execute_batch("PRAGMA auto_vacuum = INCREMENTAL;")
            .map_err(|e| explain(path, "opening", &e))?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(|e| explain(path, "opening", &e))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::unusable(format!(
                "store file {}: SQLite kept journal mode {mode} instead of WAL; give a --store on a local disk",
                path.display()
            )));
        }
        // Checkpoints are the writer's (counted), not SQLite's automatic ones. The WAL file is
        // cut back to 64 MiB when a checkpoint lets it start over (it stayed at its busiest,
        // 466 MB).
        conn.execute_batch(
            "PRAGMA synchronous = FULL; PRAGMA wal_autocheckpoint = 0; \
             PRAGMA journal_size_limit = 67108864;",
        )
        .map_err(|e| explain(path, "opening", &e))?;
    }
    Ok(conn)
}

fn head_json(head: &Head) -> Result<String, StoreError> {
    serde_json::to_string(head)
        .map_err(|e| StoreError::unusable(format!("store: a head did not serialize: {e}")))
}

fn parse_head(path: &Path, text: &str) -> Result<Head, rusqlite::Error> {
    serde_json::from_str(text).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(
            0,
            rusqlite::types::Type::Text,
            format!("a head in {} does not parse: {e}", path.display()).into(),
        )
    })
}

fn parse_turn(turn: i64, text: &str) -> Result<StoredTurn, rusqlite::Error> {
    serde_json::from_str(text).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(
            1,
            rusqlite::types::Type::Text,
            format!("the record of its turn {turn} does not parse (damaged): {e}").into(),
        )
    })
}

/// The heads a query selects (its columns: `head`, `last_used_ms`). A row's last use past its
/// record's is a keep-alive ([`SessionStore::keep_alive`] moves only the row's: rewriting the
/// record would re-render the conversation it holds), given as [`Head::kept_alive_ms`].
fn heads_of(
    conn: &Connection,
    path: &Path,
    sql: &str,
    params: impl rusqlite::Params,
) -> rusqlite::Result<Vec<Head>> {
    let mut statement = conn.prepare_cached(sql)?;
    let rows = statement.query_map(params, |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
    })?;
    rows.map(|row| {
        let (text, last_used_ms) = row?;
        let mut head = parse_head(path, &text)?;
        let row_used = last_used_ms.max(0) as u64;
        if row_used > head.last_used_ms {
            head.kept_alive_ms = row_used;
        }
        Ok(head)
    })
    .collect()
}

/// The stored version of `id`, if stored.
fn version_of(conn: &Connection, id: &HandleId) -> rusqlite::Result<Option<u64>> {
    conn.prepare_cached("SELECT version FROM heads WHERE id = ?1")?
        .query_row(params![id.as_bytes().as_slice()], |r| r.get::<_, i64>(0))
        .optional()
        .map(|v| v.map(|v| v as u64))
}

/// A head's row: the columns both statements below number `?1` to `?8`, in this order.
struct HeadRow<'a> {
    id: &'a [u8],
    prefix: &'a str,
    bot: &'a str,
    last_used_ms: i64,
    created_ms: i64,
    turns: i64,
    version: i64,
    json: &'a str,
}

impl<'a> HeadRow<'a> {
    fn of(head: &'a Head, json: &'a str) -> Self {
        Self {
            id: head.id.as_bytes().as_slice(),
            prefix: &head.prefix,
            bot: &head.bot,
            last_used_ms: head.last_used_ms as i64,
            created_ms: head.created_ms as i64,
            turns: head.turns as i64,
            version: head.version as i64,
            json,
        }
    }

    fn values(&self) -> Vec<&dyn rusqlite::ToSql> {
        vec![
            &self.id,
            &self.prefix,
            &self.bot,
            &self.last_used_ms,
            &self.created_ms,
            &self.turns,
            &self.version,
            &self.json,
        ]
    }
}

fn write_head(conn: &Connection, head: &Head, json: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT OR REPLACE INTO heads (id, prefix, bot, last_used_ms, created_ms, turns, version, head)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(HeadRow::of(head, json).values().as_slice())?;
    Ok(())
}

/// Rewrites the stored head of `id` if its version is still `expected`; `false` when it is
/// not (or the head is gone): a conflict, nothing written.
fn update_head(
    conn: &Connection,
    id: &HandleId,
    head: &Head,
    json: &str,
    expected: u64,
) -> rusqlite::Result<bool> {
    let row = HeadRow {
        id: id.as_bytes().as_slice(),
        ..HeadRow::of(head, json)
    };
    let expected = expected as i64;
    let mut values = row.values();
    values.push(&expected);
    let changed = conn
        .prepare_cached(
            "UPDATE heads SET prefix = ?2, bot = ?3, last_used_ms = ?4, created_ms = ?5, turns = ?6,
             version = ?7, head = ?8 WHERE id = ?1 AND version = ?9",
        )?
        .execute(values.as_slice())?;
    Ok(changed == 1)
}

#[async_trait]
impl SessionStore for SqliteStore {
    fn describe(&self) -> String {
        format!("sqlite:{}", self.path.display())
    }

    fn durable(&self) -> bool {
        true
    }

    fn key(&self) -> HandleKey {
        self.key.clone()
    }

    async fn create(&self, head: &Head) -> Result<u64, StoreError> {
        let mut head = head.clone();
        head.version = 1;
        let json = head_json(&head)?;
        let path = self.path.clone();
        self.writer
            .write(move |conn| {
                let fail = |e: rusqlite::Error| explain(&path, "storing a new session", &e);
                if let Some(found) = version_of(conn, &head.id).map_err(fail)? {
                    return Err(StoreError::Conflict {
                        prefix: head.prefix.clone(),
                        expected: 0,
                        found: Some(found),
                    });
                }
                write_head(conn, &head, &json).map_err(fail)?;
                Ok(1)
            })
            .await
    }

    async fn head(&self, id: &HandleId) -> Result<Option<Head>, StoreError> {
        let id = *id;
        let path = self.path.clone();
        self.read("reading a session", move |conn| {
            Ok(heads_of(
                conn,
                &path,
                "SELECT head, last_used_ms FROM heads WHERE id = ?1",
                params![id.as_bytes().as_slice()],
            )?
            .pop())
        })
        .await
    }

    async fn turns(&self, id: &HandleId, from: u64) -> Result<Vec<StoredTurn>, StoreError> {
        let id = *id;
        let reader = self.reader.clone();
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || {
            let conn = reader.lock().unwrap_or_else(|p| p.into_inner());
            let read = || -> rusqlite::Result<Vec<StoredTurn>> {
                let mut statement = conn.prepare_cached(
                    "SELECT turn, record FROM turns WHERE id = ?1 AND turn >= ?2 ORDER BY turn",
                )?;
                let rows = statement
                    .query_map(params![id.as_bytes().as_slice(), from as i64], |r| {
                        Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
                    })?;
                rows.map(|row| {
                    let (turn, text) = row?;
                    parse_turn(turn, &text)
                })
                .collect()
            };
            read().map_err(|e| {
                // The conversation named by its row's prefix column, when that still reads
                // (the turns are in another part of the file than the heads).
                let prefix = conn
                    .query_row(
                        "SELECT prefix FROM heads WHERE id = ?1",
                        params![id.as_bytes().as_slice()],
                        |r| r.get::<_, String>(0),
                    )
                    .ok();
                explain_record(&path, "reading a session's turns", prefix.as_deref(), &e)
            })
        })
        .await
        .unwrap_or_else(|e| Err(StoreError::unusable(format!("store: a read stopped: {e}"))))
    }

    async fn commit(&self, id: &HandleId, commit: &Commit) -> Result<u64, StoreError> {
        let id = *id;
        let version = commit.expected + 1;
        let mut head = commit.head.clone();
        head.version = version;
        let json = head_json(&head)?;
        let mut turns = Vec::with_capacity(commit.append.len());
        for turn in &commit.append {
            let text = serde_json::to_string(turn).map_err(|e| {
                StoreError::unusable(format!("store: a turn record did not serialize: {e}"))
            })?;
            turns.push((turn.id(), text));
        }
        let (expected, drop_before) = (commit.expected, commit.drop_before);
        let path = self.path.clone();
        self.writer
            .write(move |conn| {
                let fail = |e: rusqlite::Error| explain(&path, "storing a turn", &e);
                // The version check and the head's write in one statement; only a conflict
                // reads the version it found.
                if !update_head(conn, &id, &head, &json, expected).map_err(fail)? {
                    return Err(StoreError::Conflict {
                        prefix: head.prefix.clone(),
                        expected,
                        found: version_of(conn, &id).map_err(fail)?,
                    });
                }
                let mut insert = conn
                    .prepare_cached(
                        "INSERT OR REPLACE INTO turns (id, turn, record) VALUES (?1, ?2, ?3)",
                    )
                    .map_err(fail)?;
                for (turn, text) in &turns {
                    insert
                        .execute(params![id.as_bytes().as_slice(), *turn as i64, text])
                        .map_err(fail)?;
                }
                // Turn ids start at 1: a bound of 1 or less drops nothing.
                if drop_before > 1 {
                    conn.prepare_cached("DELETE FROM turns WHERE id = ?1 AND turn < ?2")
                        .and_then(|mut s| {
                            s.execute(params![id.as_bytes().as_slice(), drop_before as i64])
                        })
                        .map_err(fail)?;
                }
                Ok(version)
            })
            .await
    }

    async fn delete(&self, id: &HandleId) -> Result<bool, StoreError> {
        let id = *id;
        let path = self.path.clone();
        self.writer
            .write(move |conn| {
                let fail = |e: rusqlite::Error| explain(&path, "deleting a session", &e);
                let key = id.as_bytes().as_slice();
                conn.prepare_cached("DELETE FROM turns WHERE id = ?1")
                    .and_then(|mut s| s.execute(params![key]))
                    .map_err(fail)?;
                let removed = conn
                    .prepare_cached("DELETE FROM heads WHERE id = ?1")
                    .and_then(|mut s| s.execute(params![key]))
                    .map_err(fail)?;
                Ok(removed > 0)
            })
            .await
    }

    /// Marks the conversations of `ids` used now (their rows' `last_used_ms`), so neither the
    /// sweep nor a restart takes them for idle: the console's own sessions live as long as it
    /// holds them, however long since their last line.
    async fn keep_alive(&self, ids: &[HandleId]) -> Result<(), StoreError> {
        if ids.is_empty() {
            return Ok(());
        }
        let ids = ids.to_vec();
        let path = self.path.clone();
        let now = super::now_ms() as i64;
        self.writer
            .write(move |conn| {
                let fail =
                    |e: rusqlite::Error| explain(&path, "keeping sessions from expiring", &e);
                let mut statement = conn
                    .prepare_cached(
                        "UPDATE heads SET last_used_ms = MAX(last_used_ms, ?1) WHERE id = ?2",
                    )
                    .map_err(fail)?;
                for id in &ids {
                    statement
                        .execute(params![now, id.as_bytes().as_slice()])
                        .map_err(fail)?;
                }
                Ok(())
            })
            .await
    }

    async fn expired(&self, before_ms: u64, limit: usize) -> Result<Vec<Head>, StoreError> {
        let path = self.path.clone();
        self.read("listing expired sessions", move |conn| {
            heads_of(
                conn,
                &path,
                "SELECT head, last_used_ms FROM heads WHERE last_used_ms < ?1 ORDER BY last_used_ms LIMIT ?2",
                params![before_ms as i64, limit as i64],
            )
        })
        .await
    }

    async fn list(&self, limit: usize) -> Result<Vec<Head>, StoreError> {
        let path = self.path.clone();
        self.read("listing sessions", move |conn| {
            heads_of(
                conn,
                &path,
                "SELECT head, last_used_ms FROM heads ORDER BY last_used_ms DESC LIMIT ?1",
                params![limit as i64],
            )
        })
        .await
    }

    async fn count(&self) -> Result<u64, StoreError> {
        self.read("counting sessions", |conn| {
            conn.query_row("SELECT count(*) FROM heads", [], |r| r.get::<_, i64>(0))
                .map(|n| n as u64)
        })
        .await
    }

    fn stats(&self) -> StoreStats {
        self.writer.stats()
    }

    async fn close(&self) {
        self.writer.close().await;
        drop(self.lock.lock().unwrap_or_else(|p| p.into_inner()).take());
    }
}
