//! The handles of the conversations the person had in the console, kept in a file so that a
//! console started again (after editing the bot, a crash, Ctrl+C) goes on with them. The store
//! keeps only a keyed hash of each handle (`store::handle`): without this file a console's
//! stored session could be read after a restart but never continued, since nobody held its
//! handle.
//!
//! The file is `STATE/turnscope/console-handles.json` (`store::state_dir`), mode 0600: a handle
//! lets whoever holds it chat in that conversation, and the same user's store file already holds
//! the conversations themselves. It lists the handles of console sessions something was said
//! in, oldest first, at most [`HANDLES_KEPT`] (a few KiB): a handle is added when the console
//! sends the first line of one of its sessions, to the file as it is then (another console may
//! have added its own since this one started), which is written whole through a temporary file
//! renamed over it. Handles of every store share it: a store matches only its
//! own (its key hashes a handle to an id it holds), and a handle whose session has since
//! expired or been deleted matches no row. A memory store keeps nothing past the process, so
//! with one the file is neither read nor written.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use turnscope::store::{HandleId, SessionStore, now_ms};
use uuid::Uuid;

use super::stored::stored_number;

/// Most handles the file keeps (the newest); an older one's conversation can still be read,
/// no longer continued from the console.
pub const HANDLES_KEPT: usize = 64;

/// The file's name in turnscope's state directory.
pub const FILE_NAME: &str = "console-handles.json";

/// The file as written.
#[derive(Default, Serialize, Deserialize)]
struct HandlesFile {
    handles: Vec<Entry>,
}

/// One kept handle.
#[derive(Clone, Serialize, Deserialize)]
struct Entry {
    /// The handle as a client types it.
    handle: String,
    /// When it was kept, ms since the Unix epoch.
    at_ms: u64,
}

/// The console's kept handles: the file's, and which of them this store holds.
#[derive(Clone)]
pub struct KeptHandles {
    inner: Arc<Mutex<Inner>>,
}

struct Inner {
    /// The file, when this store outlives the process and a state directory was found.
    path: Option<PathBuf>,
    store: Arc<dyn SessionStore>,
    entries: Vec<Entry>,
    /// This store's ids of the kept handles, by the number their stored row is shown under.
    by_number: HashMap<u64, (HandleId, Uuid)>,
}

impl KeptHandles {
    /// The handles kept for `store`, read from the file in `dir` (turnscope's state
    /// directory, `None` when there is none). Also says what went wrong reading it, if
    /// anything: the console then starts with none kept (and writes the file anew).
    pub fn load(store: Arc<dyn SessionStore>, dir: Option<&Path>) -> (Self, Option<String>) {
        let path = dir
            .filter(|_| store.durable())
            .map(|dir| dir.join(FILE_NAME));
        let (entries, problem) = match &path {
            Some(path) => read(path),
            None => (Vec::new(), None),
        };
        let mut inner = Inner {
            path,
            store,
            entries,
            by_number: HashMap::new(),
        };
        inner.index();
        (
            Self {
                inner: Arc::new(Mutex::new(inner)),
            },
            problem,
        )
    }

    /// Whether the console holds the handle of the stored session `id`.
    pub fn holds(&self, id: &HandleId) -> bool {
        let inner = self.lock();
        inner
            .by_number
            .get(&stored_number(id))
            .is_some_and(|(held, _)| held == id)
    }

    /// The handle of the stored session shown as row `number`, when the console holds it.
    pub fn handle_of(&self, number: u64) -> Option<String> {
        self.lock()
            .by_number
            .get(&number)
            .map(|(_, handle)| handle.to_string())
    }

    /// Keeps the handle of a console session (a line is being sent into it), writing the
    /// file when it is new there. The error says what could not be written and what that
    /// costs.
    pub fn keep(&self, handle: &str) -> Result<(), String> {
        let Ok(handle) = Uuid::parse_str(handle) else {
            return Ok(());
        };
        let mut inner = self.lock();
        let Some(path) = inner.path.clone() else {
            return Ok(());
        };
        let handle = handle.to_string();
        if inner.entries.iter().any(|e| e.handle == handle) {
            return Ok(());
        }
        // Another console (another port) may have kept handles since this one read the file:
        // written over from what it holds now, not from what this one read at start.
        if let (now, None) = read(&path) {
            inner.entries = now;
            if inner.entries.iter().any(|e| e.handle == handle) {
                inner.index();
                return Ok(());
            }
        }
        inner.entries.push(Entry {
            handle,
            at_ms: now_ms(),
        });
        let excess = inner.entries.len().saturating_sub(HANDLES_KEPT);
        inner.entries.drain(..excess);
        inner.index();
        write(&path, &inner.entries).map_err(|e| {
            format!(
                "cannot write {}: {e}; after a restart this conversation can be read in the \
                 console but not continued from it",
                path.display()
            )
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Inner {
    /// This store's ids of the kept handles (an entry that is not a handle is skipped).
    fn index(&mut self) {
        let key = self.store.key();
        self.by_number = self
            .entries
            .iter()
            .filter_map(|e| Uuid::parse_str(&e.handle).ok())
            .map(|handle| {
                let id = key.id_of(&handle);
                (stored_number(&id), (id, handle))
            })
            .collect();
    }
}

/// The kept handles in `path` (none when it does not exist), and what went wrong reading it.
fn read(path: &Path) -> (Vec<Entry>, Option<String>) {
    match std::fs::read(path) {
        Ok(bytes) => match serde_json::from_slice::<HandlesFile>(&bytes) {
            Ok(file) => (file.handles, None),
            Err(e) => (
                Vec::new(),
                Some(format!(
                    "{} is not a list of console handles ({e}): your stored console sessions \
                     can be read, not continued; it is written anew with your next session",
                    path.display()
                )),
            ),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Vec::new(), None),
        Err(e) => (
            Vec::new(),
            Some(format!(
                "cannot read {}: {e}; your stored console sessions can be read, not continued",
                path.display()
            )),
        ),
    }
}

/// Writes `entries` to `path` whole: into a temporary file beside it (mode 0600), renamed over it.
fn write(path: &Path, entries: &[Entry]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        turnscope::store::private::create_dir_all(dir)?;
    }
    let text = serde_json::to_vec_pretty(&HandlesFile {
        handles: entries.to_vec(),
    })
    .map_err(std::io::Error::other)?;
    let temporary = path.with_extension(format!("json.{}", std::process::id()));
    let written = turnscope::store::private::file_options()
        .create(true)
        .truncate(true)
        .open(&temporary)
        .and_then(|mut file| std::io::Write::write_all(&mut file, &text));
    match written.and_then(|()| std::fs::rename(&temporary, path)) {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = std::fs::remove_file(&temporary);
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use turnscope::store::memory::MemoryStore;
    use turnscope::store::sqlite::SqliteStore;

    /// A directory of this test's own, removed first.
    fn dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "turnscope-kept-handles-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        dir
    }

    fn store_in(dir: &Path) -> Arc<dyn SessionStore> {
        Arc::new(SqliteStore::open(&dir.join("sessions.sqlite3")).expect("a store file"))
    }

    const HANDLE: &str = "0b1c2d3e-4f50-4617-8293-a4b5c6d7e8f9";

    #[test]
    fn a_kept_handle_is_held_by_its_store_after_a_restart_and_by_no_other() {
        let dir = dir("restart");
        let store = store_in(&dir);
        let id = store.key().id_of(&Uuid::parse_str(HANDLE).unwrap());
        let (kept, problem) = KeptHandles::load(store.clone(), Some(&dir));
        assert_eq!(problem, None);
        assert!(!kept.holds(&id));
        kept.keep(HANDLE).expect("written");
        assert!(kept.holds(&id));
        assert_eq!(kept.handle_of(stored_number(&id)).as_deref(), Some(HANDLE));
        let file = dir.join(FILE_NAME);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&file).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "only its owner reads a handle");
        }
        // Started again (the store file closed and opened again): read from the file.
        drop(kept);
        drop(store);
        let store = store_in(&dir);
        let (kept, problem) = KeptHandles::load(store, Some(&dir));
        assert_eq!(problem, None);
        assert!(kept.holds(&id));
        // Another store hashes the handle with its own key: the first store's session is
        // not one it can name.
        let (elsewhere, _) = KeptHandles::load(store_in(&dir.join("other")), Some(&dir));
        assert!(!elsewhere.holds(&id));
    }

    #[test]
    fn the_file_keeps_the_newest_handles_within_its_bound() {
        let dir = dir("bound");
        let (kept, _) = KeptHandles::load(store_in(&dir), Some(&dir));
        let handles: Vec<String> = (0..HANDLES_KEPT + 5)
            .map(|_| Uuid::new_v4().to_string())
            .collect();
        for h in &handles {
            kept.keep(h).expect("written");
        }
        kept.keep(&handles[HANDLES_KEPT + 4])
            .expect("kept again: no change");
        let file: HandlesFile =
            serde_json::from_slice(&std::fs::read(dir.join(FILE_NAME)).unwrap()).unwrap();
        let in_file: Vec<&str> = file.handles.iter().map(|e| e.handle.as_str()).collect();
        let newest: Vec<&str> = handles[5..].iter().map(String::as_str).collect();
        assert_eq!(in_file, newest, "the oldest 5 went, none twice");
    }

    /// Two consoles (two ports, two stores) keep their handles in the one file: neither writes
    /// over what the other kept after it started.
    #[test]
    fn two_consoles_keep_each_others_handles() {
        let dir = dir("two");
        let (first, _) = KeptHandles::load(store_in(&dir.join("a")), Some(&dir));
        let (second, _) = KeptHandles::load(store_in(&dir.join("b")), Some(&dir));
        let (a, b) = (Uuid::new_v4().to_string(), Uuid::new_v4().to_string());
        first.keep(&a).expect("written");
        second.keep(&b).expect("written");
        let text = std::fs::read_to_string(dir.join(FILE_NAME)).unwrap();
        assert!(text.contains(&a) && text.contains(&b), "{text}");
    }

    #[test]
    fn a_damaged_file_is_said_and_written_anew() {
        let dir = dir("damaged");
        std::fs::write(dir.join(FILE_NAME), b"{not json").unwrap();
        let (kept, problem) = KeptHandles::load(store_in(&dir), Some(&dir));
        let problem = problem.expect("said");
        assert!(problem.contains(FILE_NAME), "{problem}");
        assert!(problem.contains("not continued"), "{problem}");
        kept.keep(HANDLE).expect("written anew");
        let text = std::fs::read_to_string(dir.join(FILE_NAME)).unwrap();
        assert!(text.contains(HANDLE), "{text}");
    }

    #[test]
    fn a_memory_store_keeps_no_file() {
        let dir = dir("memory");
        let (kept, problem) = KeptHandles::load(Arc::new(MemoryStore::new()), Some(&dir));
        assert_eq!(problem, None);
        kept.keep(HANDLE).expect("nothing to write");
        assert!(!dir.join(FILE_NAME).exists());
    }
}
