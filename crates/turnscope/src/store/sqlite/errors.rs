//! What went wrong with the store file, in words: each error names the file, what SQLite
//! said, and what to do next (by kind: damaged, read-only, full, locked, cannot open).

use std::path::Path;

use rusqlite::ErrorCode;

use crate::store::StoreError;

/// The kinds of trouble a store file has, each with its own advice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Trouble {
    /// Not a database, or a damaged one.
    Damaged,
    /// The file (or its folder) cannot be written.
    ReadOnly,
    /// The disk is full.
    Full,
    /// Another process holds it.
    Locked,
    /// It cannot be opened at all.
    CannotOpen,
    /// Anything else (an I/O error, a bug).
    Other,
}

/// The kind of `e`.
pub(crate) fn classify(e: &rusqlite::Error) -> Trouble {
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => Trouble::Damaged,
        Some(ErrorCode::ReadOnly) => Trouble::ReadOnly,
        Some(ErrorCode::DiskFull) => Trouble::Full,
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => Trouble::Locked,
        Some(ErrorCode::CannotOpen | ErrorCode::PermissionDenied) => Trouble::CannotOpen,
        _ => Trouble::Other,
    }
}

/// What to do about `trouble` with the file at `path`.
pub(crate) fn advice(trouble: Trouble, path: &Path) -> String {
    let path = path.display();
    match trouble {
        Trouble::Damaged => format!(
            "the file is not a turnscope session store, or it is damaged. Move it aside (mv {path} {path}.bad) \
             to start with an empty store, or give another --store"
        ),
        Trouble::ReadOnly => format!(
            "the file or its folder cannot be written. Make both writable (chmod u+w {path}; the folder holds \
             its -wal and -shm files too), or give another --store (--store memory keeps nothing)"
        ),
        Trouble::Full => {
            "the disk holding it is full. Free some space, or give a --store on another disk"
                .to_string()
        }
        Trouble::Locked => {
            "another process holds it (another turnscope using the same file, or a program such as \
             sqlite3 in a write transaction). Stop that one, or give this one another --store"
                .to_string()
        }
        Trouble::CannotOpen => format!(
            "it cannot be opened. Check that the folder of {path} exists and is writable, or give another --store"
        ),
        Trouble::Other => "give another --store, or --store memory to keep nothing".to_string(),
    }
}

/// `e`, which SQLite gave during `what` on the file at `path`, as a store error.
pub(crate) fn explain(path: &Path, what: &str, e: &rusqlite::Error) -> StoreError {
    StoreError::unusable(format!(
        "store file {}: {what} failed (SQLite: {e}): {}",
        path.display(),
        advice(classify(e), path)
    ))
}

/// `e`, which SQLite gave while reading the turns of one conversation (`prefix`, when its row
/// still says it) from the file at `path`, as a store error. A damaged record, or one that
/// does not parse, is that conversation's: `turnscope sessions delete` removes it alone and
/// keeps the others, where moving the whole file aside would lose them all. Other trouble
/// (a lock, a full disk) is the file's, and advised as [`explain`] does.
pub(crate) fn explain_record(
    path: &Path,
    what: &str,
    prefix: Option<&str>,
    e: &rusqlite::Error,
) -> StoreError {
    let trouble = classify(e);
    // A record whose bytes are not its JSON (a bad page can give text that is not UTF-8).
    let unparsed = matches!(
        e,
        rusqlite::Error::FromSqlConversionFailure(..) | rusqlite::Error::Utf8Error(..)
    );
    if trouble != Trouble::Damaged && !unparsed {
        return explain(path, what, e);
    }
    let shown = path.display();
    let (which, prefix) = match prefix {
        Some(prefix) => (format!("conversation {prefix}"), prefix.to_string()),
        None => ("this conversation".to_string(), "PREFIX".to_string()),
    };
    let mut advice = format!(
        "the record of {which} is damaged; the file's other conversations may read fine. Delete \
         it alone with `turnscope sessions delete {prefix} --store sqlite:{shown}` once no server \
         uses the file (the others are kept)"
    );
    if prefix == "PREFIX" {
        advice.push_str(&format!(
            ", PREFIX its handle's first characters as `turnscope sessions list --store \
             sqlite:{shown}` shows them"
        ));
    }
    advice.push_str(&format!(
        ". Should other conversations fail too, the file itself is damaged: move it aside (mv \
         {shown} {shown}.bad) to start with an empty store"
    ));
    StoreError::unusable(format!(
        "store file {shown}: {what} failed (SQLite: {e}): {advice}"
    ))
}

/// An I/O error of the file at `path` during `what`, as a store error.
pub(crate) fn explain_io(path: &Path, what: &str, e: &std::io::Error) -> StoreError {
    let trouble = match e.kind() {
        std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem => {
            Trouble::ReadOnly
        }
        std::io::ErrorKind::StorageFull => Trouble::Full,
        std::io::ErrorKind::WouldBlock => Trouble::Locked,
        std::io::ErrorKind::NotFound => Trouble::CannotOpen,
        _ => Trouble::Other,
    };
    StoreError::unusable(format!(
        "store file {}: {what} failed ({e}): {}",
        path.display(),
        advice(trouble, path)
    ))
}
