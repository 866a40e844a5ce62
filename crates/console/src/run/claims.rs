//! Which kept handles a running console holds now, so that a second console attached with
//! the same state directory (two terminals watching one bot) does not take up the first's
//! session as its own: both would then type into one conversation, each told it was the
//! session "you started here last time".
//!
//! Each console writes the handles it holds to a file of its own,
//! `STATE/turnscope/console-claims/PID-ID.json` (mode 0600: a handle lets whoever holds it
//! chat), and removes it when it ends. Another console reads the others' files and skips
//! their handles; a file whose process is gone (a console killed) is removed by the next
//! reader. A file of its own per console, rather than a field in `console-handles.json`,
//! because two consoles write their claims at any moment and neither may lose the other's.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The folder of the claim files, in turnscope's state directory.
const FOLDER: &str = "console-claims";

/// One console's claim file.
#[derive(Default, Serialize, Deserialize)]
struct ClaimFile {
    /// The console's process id, to tell a claim of a console that is gone.
    pid: u32,
    /// The handles it holds.
    handles: Vec<String>,
}

/// This console's claims, and a reader of the others'.
pub struct Claims {
    folder: PathBuf,
    own: PathBuf,
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
            if path == self.own || path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let Ok(bytes) = std::fs::read(&path) else {
                continue;
            };
            let Ok(claim) = serde_json::from_slice::<ClaimFile>(&bytes) else {
                continue;
            };
            if !running(claim.pid) {
                let _ = std::fs::remove_file(&path);
                continue;
            }
            held.extend(claim.handles);
        }
        held
    }

    fn write(&self) -> std::io::Result<()> {
        if self.held.is_empty() {
            return match std::fs::remove_file(&self.own) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            };
        }
        turnscope::private_files::create_dir_all(&self.folder)?;
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
    }
}

/// Whether process `pid` runs (a zombie or a process of another user counts as running: a
/// claim is kept rather than taken wrongly).
fn running(pid: u32) -> bool {
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
}
