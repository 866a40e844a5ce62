//! The handles of the conversations the person had in the console, kept in a file so that a
//! console started again (after editing the bot, a crash, Ctrl+C) goes on with them. The store
//! keeps only a keyed hash of each handle (`store::handle`): without this file a console's
//! stored session could be read after a restart but never continued, since nobody held its
//! handle.
//!
//! The file is `STATE/turnscope/console-handles.json` (`store::state_dir`), mode 0600: a handle
//! lets whoever holds it chat in that conversation, and the same user's store file already holds
//! the conversations themselves. It lists the handles of console sessions something was said
//! in, least recently used first, at most [`HANDLES_KEPT`] (a few KiB): a handle is added when
//! the console sends the first line of one of its sessions (and made the newest again by a line
//! an hour or more later), to the file as it is then (another console may
//! have added its own since this one started), which is written whole through a temporary file
//! renamed over it. Handles of every store share it: a store matches only its
//! own (its key hashes a handle to an id it holds), and a handle whose session has since
//! expired or been deleted matches no row. A memory store keeps nothing past the process, so
//! with one the file is neither read nor written.
//!
//! An attached console (`turnscope attach URL`) keeps the handles of the sessions it started
//! on its target in the same file, each with the target's URL ([`KeptHandles::for_target`]):
//! attached again, it takes up those the target's event stream still shows (`run::attach`).
//! The local console's lookup skips them, and theirs skips the local ones.
//!
//! A local handle also names its store (a mark of the store's key, [`store_mark`], which no
//! other store shares even under the same name): a console started again asks its store about
//! the ones kept for it, and a conversation that can no longer be continued (idle past its
//! lifetime, or deleted) is said once and let go of ([`KeptHandles::let_go_of_gone`]), rather
//! than vanishing unsaid. Handles of another store are left alone, and so are ones kept before
//! handles named their store, until a line into one names it: this store could not tell
//! whether they were ever its own. Closing a console session lets go of its handle.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use turnscope::store::{HandleId, SessionStore, now_ms};
use uuid::Uuid;

use super::claims::Claims;
use super::stored::stored_number;

/// Most handles the file keeps (the newest); an older one's conversation can still be read,
/// no longer continued from the console.
pub const HANDLES_KEPT: usize = 64;

/// How old a kept handle's time may grow while lines go into it before it is made the newest
/// again (and the file written).
const MOVED_UP_AFTER_MS: u64 = 3_600_000;

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
    /// The MCP URL of the bot an attached console started it on; none for the local
    /// console's own sessions (files written before attached consoles kept handles).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    target: Option<String>,
    /// The local console's store ([`store_mark`]); none for an attached console's, and in
    /// files written before 2026-12-06.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    store: Option<String>,
}

/// A store's mark in the file: the first 16 hex digits of the id its key gives the nil UUID.
/// Two stores have two keys (each generates its own and keeps it), so two SQLite files named
/// alike from two folders (`sqlite:s.db`) are told apart; the replicas of one Redis share it.
pub fn store_mark(store: &dyn SessionStore) -> String {
    let mut mark = store.key().id_of(&Uuid::nil()).to_hex();
    mark.truncate(16);
    mark
}

/// A kept handle [`KeptHandles::let_go_of_gone`] let go of: its first 8 characters, and
/// whether its conversation expired (idle past its lifetime) rather than was deleted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GoneHandle {
    /// The handle's first 8 characters.
    pub prefix: String,
    /// Idle past `handle_seconds` (still stored until the next sweep); else no longer stored.
    pub expired: bool,
}

/// The console's kept handles: the file's, and which of them this store holds.
#[derive(Clone)]
pub struct KeptHandles {
    inner: Arc<Mutex<Inner>>,
}

struct Inner {
    /// The file, when what it keeps outlives the process and a state directory was found.
    path: Option<PathBuf>,
    /// The local console's store (whose key names its sessions), or none when attached.
    store: Option<Arc<dyn SessionStore>>,
    /// The attached console's target URL (none for the local console).
    target: Option<String>,
    /// What a kept handle gives back, for the errors that lose it.
    lost: &'static str,
    entries: Vec<Entry>,
    /// This store's ids of the kept handles, by the number their stored row is shown under.
    by_number: HashMap<u64, (HandleId, Uuid)>,
    /// The handles this attached console holds while it runs (none for the local console).
    claims: Option<Claims>,
}

impl KeptHandles {
    /// The handles kept for `store`, read from the file in `dir` (turnscope's state
    /// directory, `None` when there is none). Also says what went wrong reading it, if
    /// anything: the console then starts with none kept (and writes the file anew).
    pub fn load(store: Arc<dyn SessionStore>, dir: Option<&Path>) -> (Self, Option<String>) {
        let path = dir
            .filter(|_| store.durable())
            .map(|dir| dir.join(FILE_NAME));
        Self::open(path, Some(store), None, LOST_HERE)
    }

    /// The handles an attached console kept for the bot at `target` (its MCP URL), read from
    /// the file in `dir`; also says what went wrong reading it, if anything.
    pub fn for_target(target: &str, dir: Option<&Path>) -> (Self, Option<String>) {
        let path = dir.map(|dir| dir.join(FILE_NAME));
        let opened = Self::open(path, None, Some(target.to_string()), LOST_ATTACHED);
        opened.0.lock().claims = dir.map(Claims::in_dir);
        opened
    }

    /// Holds those of `handles` no other running console holds, and returns them: decided
    /// and written at once, so two consoles taking sessions up at the same instant never
    /// take one session both. When the claim cannot be written, those others hold are still
    /// left out, and what went wrong is said (another console may take them up too).
    pub fn claim_free(&self, handles: Vec<String>) -> (Vec<String>, Option<String>) {
        let mut inner = self.lock();
        let Some(claims) = inner.claims.as_mut() else {
            return (handles, None);
        };
        match claims.claim_free(&handles) {
            Ok(free) => (free, None),
            Err(e) => {
                let elsewhere = claims.held_elsewhere();
                let free = handles
                    .into_iter()
                    .filter(|h| !elsewhere.contains(h))
                    .collect();
                let text = format!(
                    "cannot write this console's claim on the sessions it takes up ({e}): \
                     another console attached from this user may take them up as its own too"
                );
                (free, Some(text))
            }
        }
    }

    /// The handles other running consoles hold ([`Self::claim_free`]).
    pub fn held_elsewhere(&self) -> HashSet<String> {
        self.lock()
            .claims
            .as_ref()
            .map(Claims::held_elsewhere)
            .unwrap_or_default()
    }

    fn open(
        path: Option<PathBuf>,
        store: Option<Arc<dyn SessionStore>>,
        target: Option<String>,
        lost: &'static str,
    ) -> (Self, Option<String>) {
        let (entries, problem) = match &path {
            Some(path) => read(path, lost),
            None => (Vec::new(), None),
        };
        let mut inner = Inner {
            path,
            store,
            target,
            lost,
            entries,
            by_number: HashMap::new(),
            claims: None,
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
        let mut inner = self.lock();
        // The local console's handles are turnscope's UUIDs; an attached bot's are its own.
        let handle = match &inner.target {
            None => match Uuid::parse_str(handle) {
                Ok(handle) => handle.to_string(),
                Err(_) => return Ok(()),
            },
            Some(_) if handle.is_empty() || handle.contains(char::is_whitespace) => return Ok(()),
            Some(_) => handle.to_string(),
        };
        let Some(path) = inner.path.clone() else {
            return Ok(());
        };
        if let Some(claims) = inner.claims.as_mut() {
            // A line goes into it: it is this console's while it runs. A claim not written
            // costs only that another console could take the session up too.
            let _ = claims.claim(&handle);
        }
        if inner.has(&handle) && !inner.unmarked(&handle) {
            // Kept newest first by use, not by its first line: one gone on with for weeks is
            // not let go of for 64 newer ones. The file is written at most once an hour each.
            let now = now_ms();
            let stale = |entries: &[Entry]| {
                entries
                    .iter()
                    .position(|e| e.handle == handle && e.at_ms + MOVED_UP_AFTER_MS < now)
            };
            if stale(&inner.entries).is_none() {
                return Ok(());
            }
            // Written over from what the file holds now (another console may have kept or let
            // go of handles since this one read it), as an addition is.
            if let (now, None) = read(&path, inner.lost) {
                inner.entries = now;
                inner.index();
            }
            let Some(at) = stale(&inner.entries) else {
                return Ok(());
            };
            let mut entry = inner.entries.remove(at);
            entry.at_ms = now;
            inner.entries.push(entry);
            return inner.write(&path);
        }
        // Another console (another port) may have kept handles since this one read the file:
        // written over from what it holds now, not from what this one read at start.
        if let (now, None) = read(&path, inner.lost) {
            inner.entries = now;
            if inner.has(&handle) && !inner.unmarked(&handle) {
                inner.index();
                return Ok(());
            }
        }
        // Kept before handles named their store: named now (a line went into it here).
        let store = inner.store.as_ref().map(|s| store_mark(s.as_ref()));
        if inner.unmarked(&handle) {
            for e in inner.entries.iter_mut().filter(|e| e.handle == handle) {
                e.store.clone_from(&store);
            }
            inner.index();
            return inner.write(&path);
        }
        let target = inner.target.clone();
        inner.entries.push(Entry {
            handle,
            at_ms: now_ms(),
            target,
            store,
        });
        let excess = inner.entries.len().saturating_sub(HANDLES_KEPT);
        inner.entries.drain(..excess);
        inner.index();
        inner.write(&path)
    }

    /// The handles kept for the attached console's target, newest first (none for the local
    /// console).
    pub fn of_target(&self) -> Vec<String> {
        let inner = self.lock();
        let Some(target) = &inner.target else {
            return Vec::new();
        };
        inner
            .entries
            .iter()
            .rev()
            .filter(|e| e.target.as_ref() == Some(target))
            .map(|e| e.handle.clone())
            .collect()
    }

    /// Lets go of a kept handle (the person closed its session: the local console's, or one
    /// on the attached console's target), writing the file when it was there.
    pub fn forget(&self, handle: &str) -> Result<(), String> {
        let mut inner = self.lock();
        let Some(path) = inner.path.clone() else {
            return Ok(());
        };
        if let (now, None) = read(&path, inner.lost) {
            inner.entries = now;
        }
        if let Some(claims) = inner.claims.as_mut() {
            let _ = claims.release(handle);
        }
        if !inner.has(handle) {
            return Ok(());
        }
        let target = inner.target.clone();
        inner
            .entries
            .retain(|e| !(e.handle == handle && e.target == target));
        inner.index();
        inner.write(&path)
    }

    /// Lets go of the local console's kept handles whose conversations can no longer be
    /// continued: deleted, or expired (no line for `handle_seconds`: the next idle sweep
    /// deletes it and a line can no longer reopen it), writing the file; returns them, newest
    /// first, to say to the person. Only handles kept for this store are asked about (all at
    /// once); one the store fails to answer about stays, asked again at the next start.
    pub async fn let_go_of_gone(&self, handle_seconds: u64) -> Vec<GoneHandle> {
        let (store, asked) = {
            let inner = self.lock();
            let Some(store) = inner.store.clone() else {
                return Vec::new();
            };
            let this = store_mark(store.as_ref());
            let asked: Vec<(String, HandleId)> = inner
                .entries
                .iter()
                .filter(|e| e.target.is_none() && e.store.as_deref() == Some(this.as_str()))
                .filter_map(|e| {
                    let handle = Uuid::parse_str(&e.handle).ok()?;
                    Some((e.handle.clone(), store.key().id_of(&handle)))
                })
                .collect();
            (store, asked)
        };
        let expired_before = now_ms().saturating_sub(handle_seconds.saturating_mul(1000));
        let shared = store.shared();
        let answers = futures::future::join_all(asked.iter().map(|(_, id)| store.head(id))).await;
        let mut gone = Vec::new();
        for ((handle, _), answer) in asked.iter().zip(answers) {
            let expired = match answer {
                Ok(None) => false,
                // A shared store expires a conversation itself (its TTL, which replicas keep
                // fresh): one it holds is alive.
                Ok(Some(head)) if !shared && head.idle_since_ms() < expired_before => true,
                _ => continue,
            };
            gone.push((handle.clone(), expired));
        }
        if gone.is_empty() {
            return Vec::new();
        }
        let mut inner = self.lock();
        if let Some(path) = inner.path.clone() {
            // Written over from the file as it is now (another console may have kept more).
            if let (now, None) = read(&path, inner.lost) {
                inner.entries = now;
            }
            inner
                .entries
                .retain(|e| !(e.target.is_none() && gone.iter().any(|(h, _)| *h == e.handle)));
            inner.index();
            // Not written: said again at the next start, which is no loss.
            let _ = inner.write(&path);
        }
        gone.iter()
            .rev()
            .map(|(handle, expired)| GoneHandle {
                prefix: handle.chars().take(8).collect(),
                expired: *expired,
            })
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What the local console loses with its kept handles.
const LOST_HERE: &str = "your stored console sessions can be read, not continued";

/// What an attached console loses with its kept handles.
const LOST_ATTACHED: &str =
    "the sessions this console started on attached bots are not taken up when attached again";

impl Inner {
    /// Whether `handle` is kept for this console (its target, or none).
    fn has(&self, handle: &str) -> bool {
        self.entries
            .iter()
            .any(|e| e.handle == handle && e.target == self.target)
    }

    /// Whether `handle` is kept for the local console without naming its store (kept before
    /// handles named their store).
    fn unmarked(&self, handle: &str) -> bool {
        self.store.is_some()
            && self
                .entries
                .iter()
                .any(|e| e.handle == handle && e.target.is_none() && e.store.is_none())
    }

    /// Writes the entries to `path`; the error says what that costs.
    fn write(&self, path: &Path) -> Result<(), String> {
        write(path, &self.entries)
            .map_err(|e| format!("cannot write {}: {e}; {}", path.display(), self.lost))
    }

    /// This store's ids of the kept handles (an entry that is not a handle, or an attached
    /// console's, is skipped).
    fn index(&mut self) {
        let Some(store) = &self.store else {
            return;
        };
        let key = store.key();
        self.by_number = self
            .entries
            .iter()
            .filter(|e| e.target.is_none())
            .filter_map(|e| Uuid::parse_str(&e.handle).ok())
            .map(|handle| {
                let id = key.id_of(&handle);
                (stored_number(&id), (id, handle))
            })
            .collect();
    }
}

/// The kept handles in `path` (none when it does not exist), and what went wrong reading it.
/// `lost` says what the console loses when it cannot read them.
fn read(path: &Path, lost: &str) -> (Vec<Entry>, Option<String>) {
    match std::fs::read(path) {
        Ok(bytes) => match serde_json::from_slice::<HandlesFile>(&bytes) {
            Ok(file) => (file.handles, None),
            Err(e) => (
                Vec::new(),
                Some(format!(
                    "{} is not a list of console handles ({e}): {lost}; it is written anew \
                     with your next session",
                    path.display()
                )),
            ),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Vec::new(), None),
        Err(e) => (
            Vec::new(),
            Some(format!("cannot read {}: {e}; {lost}", path.display())),
        ),
    }
}

/// Writes `entries` to `path` whole: into a temporary file beside it (mode 0600), renamed over it.
fn write(path: &Path, entries: &[Entry]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        turnscope::private_files::create_dir_all(dir)?;
    }
    let text = serde_json::to_vec_pretty(&HandlesFile {
        handles: entries.to_vec(),
    })
    .map_err(std::io::Error::other)?;
    let temporary = path.with_extension(format!("json.{}", std::process::id()));
    let written = turnscope::private_files::file_options()
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

    /// A handle gone on with is kept as the newest (by use, not by its first line): an old
    /// conversation still in use is not let go of for 64 newer ones.
    #[test]
    fn a_handle_in_use_is_kept_as_the_newest() {
        let dir = dir("in-use");
        let (kept, _) = KeptHandles::load(store_in(&dir), Some(&dir));
        let handles: Vec<String> = (0..3).map(|_| Uuid::new_v4().to_string()).collect();
        for h in &handles {
            kept.keep(h).expect("written");
        }
        // The first one's first line was two hours ago (as the file says); a line goes into
        // it now.
        let mut entries = kept.lock().entries.clone();
        entries[0].at_ms = now_ms() - 7_200_000;
        write(&dir.join(FILE_NAME), &entries).unwrap();
        kept.lock().entries = entries;
        kept.keep(&handles[0]).expect("written");
        let file: HandlesFile =
            serde_json::from_slice(&std::fs::read(dir.join(FILE_NAME)).unwrap()).unwrap();
        let in_file: Vec<&str> = file.handles.iter().map(|e| e.handle.as_str()).collect();
        assert_eq!(in_file, [&handles[1], &handles[2], &handles[0]]);
        assert!(file.handles[2].at_ms + 60_000 > now_ms());
        // Within the hour, a line writes nothing.
        std::fs::remove_file(dir.join(FILE_NAME)).unwrap();
        kept.keep(&handles[0]).expect("nothing to write");
        assert!(!dir.join(FILE_NAME).exists());
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

    /// An attached console keeps its target's handles in the same file as the local
    /// console's: each reads only its own (another target none), forgetting one leaves the
    /// others, and a target's handle never names a local stored session.
    #[test]
    fn an_attached_consoles_handles_are_kept_by_target_beside_the_local_ones() {
        let dir = dir("attached");
        let store = store_in(&dir);
        let (local, _) = KeptHandles::load(store.clone(), Some(&dir));
        local.keep(HANDLE).expect("written");
        let (a, problem) = KeptHandles::for_target("http://a:1/mcp", Some(&dir));
        assert_eq!(problem, None);
        a.keep("pipecat-1").expect("written");
        a.keep("pipecat-2").expect("written");
        a.keep("not a handle").expect("nothing to write");
        assert_eq!(a.of_target(), ["pipecat-2", "pipecat-1"], "newest first");
        let (b, _) = KeptHandles::for_target("http://b:1/mcp", Some(&dir));
        assert!(b.of_target().is_empty());
        let theirs = Uuid::new_v4().to_string();
        a.keep(&theirs).expect("written");
        let (local, _) = KeptHandles::load(store.clone(), Some(&dir));
        let key = store.key();
        assert!(local.holds(&key.id_of(&Uuid::parse_str(HANDLE).unwrap())));
        assert!(
            !local.holds(&key.id_of(&Uuid::parse_str(&theirs).unwrap())),
            "a target's handle is not the local console's"
        );
        assert!(local.of_target().is_empty());
        a.forget("pipecat-2").expect("written");
        let (a, _) = KeptHandles::for_target("http://a:1/mcp", Some(&dir));
        assert_eq!(a.of_target(), [theirs.as_str(), "pipecat-1"]);
        let (local, _) = KeptHandles::load(store.clone(), Some(&dir));
        assert!(local.holds(&key.id_of(&Uuid::parse_str(HANDLE).unwrap())));
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

    /// A kept handle whose conversation can no longer be continued (deleted, or idle past
    /// its lifetime) is said once and let go of; one its store holds stays, and so do another
    /// store's (even under the same name) and one kept before handles named their store,
    /// until a line into it names it.
    #[tokio::test]
    async fn a_handle_its_store_can_no_longer_continue_is_said_once_and_let_go_of() {
        use turnscope::observe::SessionOpener;
        use turnscope::store::Head;
        let dir = dir("gone");
        let store = store_in(&dir);
        const HELD: &str = "1b1c2d3e-4f50-4617-8293-a4b5c6d7e8f9";
        const OLD: &str = "2b1c2d3e-4f50-4617-8293-a4b5c6d7e8f9";
        const ELSEWHERE: &str = "3b1c2d3e-4f50-4617-8293-a4b5c6d7e8f9";
        let held_id = store.key().id_of(&Uuid::parse_str(HELD).unwrap());
        store
            .create(&Head {
                id: held_id,
                prefix: "1b1c2d3e".into(),
                bot: "bot".into(),
                opener: SessionOpener::Console,
                greeting: None,
                created_ms: now_ms() - 60_000,
                // A minute without a line.
                last_used_ms: now_ms() - 60_000,
                kept_alive_ms: 0,
                turns: 1,
                messages: 2,
                forgotten: 0,
                history_from_turn: 1,
                in_flight: None,
                unread: None,
                errors: 0,
                version: 0,
            })
            .await
            .expect("created");
        // A handle kept before stores were named: no `store` in its entry.
        write(
            &dir.join(FILE_NAME),
            &[Entry {
                handle: OLD.into(),
                at_ms: 1,
                target: None,
                store: None,
            }],
        )
        .unwrap();
        let (kept, _) = KeptHandles::load(store.clone(), Some(&dir));
        kept.keep(HANDLE).expect("written");
        kept.keep(HELD).expect("written");
        // Another store of the same file name, in another folder.
        let elsewhere = dir.join("other");
        std::fs::create_dir_all(&elsewhere).unwrap();
        let (other, _) = KeptHandles::load(store_in(&elsewhere), Some(&dir));
        other.keep(ELSEWHERE).expect("written");

        let (kept, _) = KeptHandles::load(store.clone(), Some(&dir));
        let deleted = GoneHandle {
            prefix: "0b1c2d3e".into(),
            expired: false,
        };
        assert_eq!(kept.let_go_of_gone(86_400).await, [deleted]);
        let text = std::fs::read_to_string(dir.join(FILE_NAME)).unwrap();
        assert!(!text.contains(HANDLE), "{text}");
        for stays in [HELD, OLD, ELSEWHERE] {
            assert!(text.contains(stays), "{stays}: {text}");
        }
        assert!(kept.holds(&held_id));
        let (kept, _) = KeptHandles::load(store.clone(), Some(&dir));
        assert!(kept.let_go_of_gone(86_400).await.is_empty(), "said once");

        // Idle past its lifetime (30 s here): the next sweep deletes it, no line reopens it.
        // The old handle, named by a line into it, is asked about too: not in this store.
        kept.keep(OLD).expect("named");
        let gone = kept.let_go_of_gone(30).await;
        assert_eq!(
            gone,
            [
                GoneHandle {
                    prefix: "1b1c2d3e".into(),
                    expired: true
                },
                GoneHandle {
                    prefix: "2b1c2d3e".into(),
                    expired: false
                }
            ],
            "newest first"
        );
        assert!(!kept.holds(&held_id));
        let text = std::fs::read_to_string(dir.join(FILE_NAME)).unwrap();
        assert!(text.contains(ELSEWHERE), "{text}");
    }

    /// Closing a console session lets go of its kept handle (closing deleted it from the
    /// store: the next start must not say it was lost).
    #[test]
    fn a_local_handle_is_let_go_of_when_its_session_is_closed() {
        let dir = dir("closed");
        let store = store_in(&dir);
        let id = store.key().id_of(&Uuid::parse_str(HANDLE).unwrap());
        let (kept, _) = KeptHandles::load(store.clone(), Some(&dir));
        kept.keep(HANDLE).expect("written");
        kept.forget(HANDLE).expect("written");
        assert!(!kept.holds(&id));
        let (kept, _) = KeptHandles::load(store, Some(&dir));
        assert!(!kept.holds(&id));
        let text = std::fs::read_to_string(dir.join(FILE_NAME)).unwrap();
        assert!(!text.contains(HANDLE), "{text}");
    }
}
