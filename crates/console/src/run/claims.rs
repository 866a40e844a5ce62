//! Which kept handles a running console holds now, so that a second console attached with
//! the same state directory (two terminals watching one bot) does not take up the first's
//! session as its own: both would then type into one conversation, each told it was the
//! session "you started here last time".
//!
//! Each console writes the handles it holds to a file of its own,
//! `STATE/turnscope/console-claims/PID-ID.json` (mode 0600: a handle lets whoever holds it
//! chat), beside a `PID-ID.lock` it holds locked (`flock`) while it runs, and removes both
//! when it ends. Another console reads the others' files and skips their handles; a claim
//! whose lock can be taken is of a console that is gone (killed) and is removed by the next
//! reader. A lock rather than the pid alone: a pid is reused, and a console in another pid
//! namespace (a container sharing the state directory) has a pid that means nothing here.
//! Taking sessions up reads the others' claims and writes its own under `take-up.lock`,
//! so two consoles started at the same instant do not both take one session up.
//!
//! A file of its own per console, rather than a field in `console-handles.json`, because
//! two consoles write their claims at any moment and neither may lose the other's.

use std::collections::HashSet;
use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The folder of the claim files, in turnscope's state directory.
const FOLDER: &str = "console-claims";

/// The lock held while a console reads the others' claims and writes its own.
const TAKE_UP_LOCK: &str = "take-up.lock";

/// One console's claim file.
#[derive(Default, Serialize, Deserialize)]
struct ClaimFile {
    /// The console's process id: a claim without its lock file (written by a turnscope
    /// before the locks) is told gone by whether this process runs.
    pid: u32,
    /// The handles it holds.
    handles: Vec<String>,
}

/// This console's claims, and a reader of the others'.
pub struct Claims {
    folder: PathBuf,
    own: PathBuf,
    /// This console's lock file, held locked from its first claim until it ends.
    own_lock: Option<File>,
    held: Vec<String>,
}

impl Claims {
    /// The claims of a console whose state directory is `dir`.
    pub fn in_dir(dir: &Path) -> Self {
        let folder = dir.join(FOLDER);
        let own = folder.join(format!(
            "{}-{}.json",
            std::process::id(),
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        ));
        Self {
            folder,
            own,
            own_lock: None,
            held: Vec::new(),
        }
    }

    /// Holds `handle` from now on (written at once). What could not be written is returned:
    /// another console may then take the session up too.
    pub fn claim(&mut self, handle: &str) -> std::io::Result<()> {
        if self.held.iter().any(|h| h == handle) {
            return Ok(());
        }
        self.held.push(handle.to_string());
        self.write()
    }

    /// Holds those of `handles` no other running console holds, deciding and writing under
    /// the take-up lock (another console taking sessions up at the same instant waits for
    /// it); returns them. What could not be written is returned: none is then held here.
    pub fn claim_free(&mut self, handles: &[String]) -> std::io::Result<Vec<String>> {
        turnscope::private_files::create_dir_all(&self.folder)?;
        let take_up = turnscope::private_files::file_options()
            .create(true)
            .truncate(false)
            .open(self.folder.join(TAKE_UP_LOCK))?;
        // Held for a few reads and one write; released when `take_up` is dropped.
        take_up.lock()?;
        let elsewhere = self.held_elsewhere();
        let free: Vec<String> = handles
            .iter()
            .filter(|h| !elsewhere.contains(*h))
            .cloned()
            .collect();
        let before = self.held.clone();
        for handle in &free {
            if !self.held.contains(handle) {
                self.held.push(handle.clone());
            }
        }
        if self.held.len() != before.len()
            && let Err(e) = self.write()
        {
            self.held = before;
            return Err(e);
        }
        Ok(free)
    }

    /// Holds `handle` no longer.
    pub fn release(&mut self, handle: &str) -> std::io::Result<()> {
        let before = self.held.len();
        self.held.retain(|h| h != handle);
        if self.held.len() == before {
            return Ok(());
        }
        self.write()
    }

    /// The handles other running consoles hold. The files of consoles that are gone are
    /// removed; a file that cannot be read holds nothing.
    pub fn held_elsewhere(&self) -> HashSet<String> {
        let mut held = HashSet::new();
        let Ok(files) = std::fs::read_dir(&self.folder) else {
            return held;
        };
        for file in files.flatten() {
            let path = file.path();
            // A claim half written by a console killed between its write and its rename.
            if path.extension().is_some_and(|e| e == "tmp")
                && path != self.own.with_extension("tmp")
                && !console_runs(&path.with_extension("lock"), 0)
            {
                let _ = std::fs::remove_file(&path);
                let _ = std::fs::remove_file(path.with_extension("lock"));
                continue;
            }
            // A lock with no claim beside it whose console is gone (its claim removed, say,
            // by a reader that could not remove the lock): removed too.
            if path.extension().is_some_and(|e| e == "lock")
                && path != self.own.with_extension("lock")
                && path.file_name().is_some_and(|n| n != TAKE_UP_LOCK)
                && !path.with_extension("json").exists()
                && !path.with_extension("tmp").exists()
                && !console_runs(&path, 0)
            {
                let _ = std::fs::remove_file(&path);
                continue;
            }
            if path == self.own || path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let Ok(bytes) = std::fs::read(&path) else {
                continue;
            };
            let Ok(claim) = serde_json::from_slice::<ClaimFile>(&bytes) else {
                continue;
            };
            let lock = path.with_extension("lock");
            if !console_runs(&lock, claim.pid) {
                let _ = std::fs::remove_file(&path);
                let _ = std::fs::remove_file(&lock);
                continue;
            }
            held.extend(claim.handles);
        }
        held
    }

    fn write(&mut self) -> std::io::Result<()> {
        if self.held.is_empty() {
            return match std::fs::remove_file(&self.own) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            };
        }
        turnscope::private_files::create_dir_all(&self.folder)?;
        if self.own_lock.is_none() {
            // Locked before the claim is written: a reader never sees it unlocked.
            let lock = turnscope::private_files::file_options()
                .create(true)
                .truncate(false)
                .open(self.own.with_extension("lock"))?;
            lock.try_lock().map_err(std::io::Error::from)?;
            self.own_lock = Some(lock);
        }
        let text = serde_json::to_vec(&ClaimFile {
            pid: std::process::id(),
            handles: self.held.clone(),
        })
        .map_err(std::io::Error::other)?;
        let temporary = self.own.with_extension("tmp");
        turnscope::private_files::file_options()
            .create(true)
            .truncate(true)
            .open(&temporary)
            .and_then(|mut file| std::io::Write::write_all(&mut file, &text))
            .and_then(|()| std::fs::rename(&temporary, &self.own))
            .inspect_err(|_| {
                let _ = std::fs::remove_file(&temporary);
            })
    }
}

impl Drop for Claims {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.own);
        if self.own_lock.take().is_some() {
            let _ = std::fs::remove_file(self.own.with_extension("lock"));
        }
    }
}

/// Whether the console whose claim is locked by `lock` runs: its lock is held. A claim
/// without a lock file is of a turnscope before the locks, told by whether `pid` runs.
fn console_runs(lock: &Path, pid: u32) -> bool {
    match File::open(lock) {
        // Taken: nobody held it (released again when the file is dropped).
        Ok(file) => matches!(file.try_lock(), Err(TryLockError::WouldBlock)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => pid_runs(pid),
        // Cannot be read: the claim is kept rather than taken wrongly.
        Err(_) => true,
    }
}

/// Whether process `pid` runs (a zombie or a process of another user counts as running: a
/// claim is kept rather than taken wrongly).
fn pid_runs(pid: u32) -> bool {
    if pid == 0 {
        return false;
    }
    #[cfg(unix)]
    {
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return false;
        };
        // SAFETY: signal 0 sends nothing; it only asks whether the process exists.
        let answer = unsafe { libc::kill(pid, 0) };
        answer == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
    }
    #[cfg(not(unix))]
    {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("turnscope-claims-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_console_sees_the_others_claims_not_its_own_nor_those_of_the_gone() {
        let dir = dir("two");
        let mut first = Claims::in_dir(&dir);
        let mut second = Claims::in_dir(&dir);
        first.claim("h-1").unwrap();
        first.claim("h-2").unwrap();
        second.claim("h-3").unwrap();
        assert_eq!(
            second.held_elsewhere(),
            HashSet::from(["h-1".into(), "h-2".into()])
        );
        assert_eq!(first.held_elsewhere(), HashSet::from(["h-3".into()]));
        first.release("h-1").unwrap();
        assert_eq!(second.held_elsewhere(), HashSet::from(["h-2".into()]));
        // A console that is gone: its file names a process that does not run.
        let gone = dir.join(FOLDER).join("4194304-deadbeef.json");
        std::fs::write(&gone, r#"{"pid":4194304,"handles":["h-9"]}"#).unwrap();
        assert!(!second.held_elsewhere().contains("h-9"));
        assert!(
            !gone.exists(),
            "the claim of a console that is gone is removed"
        );
        // One that ends removes its own.
        drop(first);
        assert!(second.held_elsewhere().is_empty());
    }

    #[test]
    fn a_claim_is_held_while_its_lock_is_whatever_its_pid_says() {
        let dir = dir("locks");
        let reader = Claims::in_dir(&dir);
        let folder = dir.join(FOLDER);
        turnscope::private_files::create_dir_all(&folder).unwrap();
        // A reused pid: the claim names a process that runs (this one), but nobody holds
        // its lock: the console is gone.
        let reused = folder.join("1-reused.json");
        let own_pid = std::process::id();
        std::fs::write(
            &reused,
            format!(r#"{{"pid":{own_pid},"handles":["h-reused"]}}"#),
        )
        .unwrap();
        std::fs::write(reused.with_extension("lock"), b"").unwrap();
        // A console in another pid namespace: its pid means nothing here, its lock is held.
        let elsewhere = folder.join("2-namespace.json");
        std::fs::write(&elsewhere, r#"{"pid":4194304,"handles":["h-held"]}"#).unwrap();
        let held = File::create(elsewhere.with_extension("lock")).unwrap();
        held.lock().unwrap();
        // A claim half written by a console killed before its rename.
        let half = folder.join("3-half.tmp");
        std::fs::write(&half, b"{\"pid\":").unwrap();
        std::fs::write(half.with_extension("lock"), b"").unwrap();
        assert_eq!(reader.held_elsewhere(), HashSet::from(["h-held".into()]));
        assert!(!reused.exists() && !reused.with_extension("lock").exists());
        assert!(
            !half.exists(),
            "a dead console's half-written claim is removed"
        );
        assert!(elsewhere.with_extension("lock").exists());
        // A lock left with no claim beside it, nobody holding it: removed; a held one stays.
        let orphan = folder.join("4-orphan.lock");
        std::fs::write(&orphan, b"").unwrap();
        let _ = reader.held_elsewhere();
        assert!(!orphan.exists());
        assert!(elsewhere.with_extension("lock").exists());
        drop(held);
        assert!(reader.held_elsewhere().is_empty());
    }

    #[test]
    fn consoles_taking_sessions_up_at_once_never_take_the_same_one() {
        let dir = dir("race");
        let handles: Vec<String> = (0..8).map(|n| format!("h-{n}")).collect();
        for _ in 0..20 {
            let _ = std::fs::remove_dir_all(&dir);
            let barrier = std::sync::Barrier::new(2);
            let (first, second) = std::thread::scope(|scope| {
                let take = || {
                    let mut claims = Claims::in_dir(&dir);
                    barrier.wait();
                    let taken = claims.claim_free(&handles).unwrap();
                    (claims, taken)
                };
                let a = scope.spawn(take);
                let b = scope.spawn(take);
                (a.join().unwrap(), b.join().unwrap())
            });
            let (mut fewer, mut more) = (first.1, second.1);
            if fewer.len() > more.len() {
                std::mem::swap(&mut fewer, &mut more);
            }
            assert!(fewer.is_empty(), "both took some: {fewer:?} and {more:?}");
            assert_eq!(more, handles);
        }
    }
}
