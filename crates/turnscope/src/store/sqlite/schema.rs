//! The file's schema, versioned by SQLite's `user_version`: [`MIGRATIONS`] takes a file from
//! any older version to [`LATEST`] in one transaction; a file from a newer turnscope is
//! refused with a message saying so. The handle key is made with the file.
//!
//! Tables (queryable with the `sqlite3` shell: the JSON columns work with `json_extract`):
//! - `meta(key, value)`: `handle_key` (32 random bytes), `created_by` (turnscope's version);
//! - `heads(id, prefix, bot, last_used_ms, created_ms, turns, version, head)`: one row per
//!   handle, keyed by the handle's keyed hash, `head` the whole record as JSON;
//! - `turns(id, turn, record)`: the append-only log, `record` a turn as JSON.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension, params};

use super::errors::explain;
use crate::store::{HandleKey, StoreError};

/// The schema version this build writes.
pub(crate) const LATEST: i64 = 1;

/// Each step takes the file from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    // 0 → 1: heads, the turn log, meta.
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value BLOB NOT NULL);
     CREATE TABLE heads (
         id BLOB PRIMARY KEY,
         prefix TEXT NOT NULL,
         bot TEXT NOT NULL,
         last_used_ms INTEGER NOT NULL,
         created_ms INTEGER NOT NULL,
         turns INTEGER NOT NULL,
         version INTEGER NOT NULL,
         head TEXT NOT NULL
     ) WITHOUT ROWID;
     CREATE INDEX heads_by_last_used ON heads(last_used_ms);
     CREATE TABLE turns (
         id BLOB NOT NULL,
         turn INTEGER NOT NULL,
         record TEXT NOT NULL,
         PRIMARY KEY (id, turn)
     );",
];

/// Brings the file at `path` (open on `conn`) to [`LATEST`] and returns its handle key.
///
/// # Errors
/// A file from a newer turnscope, one that is not a store, or one that cannot be written.
pub(crate) fn migrate(conn: &Connection, path: &Path) -> Result<HandleKey, StoreError> {
    let fail = |what: &str, e: rusqlite::Error| explain(path, what, &e);
    conn.execute_batch("BEGIN IMMEDIATE")
        .map_err(|e| fail("opening", e))?;
    let result = migrate_in(conn, path);
    let end = if result.is_ok() { "COMMIT" } else { "ROLLBACK" };
    conn.execute_batch(end)
        .map_err(|e| fail("saving the schema", e))?;
    result
}

/// Refuses, by reading only, a file turnscope must not change: someone else's SQLite database
/// (tables, no version) or a newer turnscope's store. Run before anything is written, the
/// journal mode included (switching it to WAL rewrites the file's header). The file's schema
/// version.
///
/// # Errors
/// Such a file, or one SQLite cannot read (damaged, not a database).
pub(crate) fn refuse_foreign(conn: &Connection, path: &Path) -> Result<i64, StoreError> {
    let fail = |what: &str, e: rusqlite::Error| explain(path, what, &e);
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(|e| fail("reading the schema version", e))?;
    if version > LATEST {
        return Err(StoreError::unusable(format!(
            "store file {}: it was written by a newer turnscope (schema version {version}; this turnscope \
             {} knows up to {LATEST}). Upgrade turnscope, or give another --store",
            path.display(),
            env!("CARGO_PKG_VERSION"),
        )));
    }
    if version == 0 {
        // A file with tables but no version is someone else's database.
        let tables: i64 = conn
            .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
            .map_err(|e| fail("reading the schema", e))?;
        if tables > 0 {
            return Err(StoreError::unusable(format!(
                "store file {}: it is a SQLite database but not a turnscope session store (it has {tables} \
                 schema entries and no turnscope version). Give another --store; turnscope will not change \
                 this file",
                path.display()
            )));
        }
    }
    Ok(version)
}

fn migrate_in(conn: &Connection, path: &Path) -> Result<HandleKey, StoreError> {
    let fail = |what: &str, e: rusqlite::Error| explain(path, what, &e);
    let version = refuse_foreign(conn, path)?;
    for (from, step) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        conn.execute_batch(step)
            .map_err(|e| fail(&format!("migrating the schema from version {from}"), e))?;
    }
    conn.pragma_update(None, "user_version", LATEST)
        .map_err(|e| fail("writing the schema version", e))?;
    let key: Option<Vec<u8>> = conn
        .query_row("SELECT value FROM meta WHERE key = 'handle_key'", [], |r| {
            r.get(0)
        })
        .optional()
        .map_err(|e| fail("reading the handle key", e))?;
    let key = match key {
        Some(bytes) => {
            let bytes: [u8; 32] = bytes.try_into().map_err(|_| {
                StoreError::unusable(format!(
                    "store file {}: its handle key is damaged (not 32 bytes), so no stored handle can be \
                     matched. Move it aside (mv {0} {0}.bad) to start with an empty store",
                    path.display()
                ))
            })?;
            HandleKey::from_bytes(bytes)
        }
        None => {
            let key = HandleKey::generate();
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('handle_key', ?1), ('created_by', ?2)",
                params![key.as_bytes().as_slice(), env!("CARGO_PKG_VERSION")],
            )
            .map_err(|e| fail("writing the handle key", e))?;
            key
        }
    };
    // Every start writes, so a file that cannot be written is found now, not at the first
    // turn.
    conn.execute(
        "INSERT OR REPLACE INTO meta (key, value) VALUES ('opened_by', ?1)",
        params![env!("CARGO_PKG_VERSION")],
    )
    .map_err(|e| fail("writing", e))?;
    Ok(key)
}
