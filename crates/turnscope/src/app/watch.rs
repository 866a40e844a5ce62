//! The config file's watcher: `notify` on the file's folder (not the file, so an editor that
//! saves by writing a new file and renaming it over the old one is seen too), events naming
//! the file debounced until the folder is quiet for [`DEBOUNCE`], then one reload.
//!
//! The debounce is a few lines here rather than `notify-debouncer-mini`: that crate drops the
//! event kind, and on Linux reading the file ourselves is an `open` event, so every reload
//! would trigger the next one; here only creations, writes, renames and removals count.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use notify::{EventKind, RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::reload::Reloader;

/// How long the file's folder must be quiet before a change is read: an editor's save is
/// several events (write, rename, attributes) within a few milliseconds.
pub const DEBOUNCE: Duration = Duration::from_millis(250);

/// A running watch of the config file; dropping it stops the watch.
pub struct ConfigWatch {
    _watcher: notify::RecommendedWatcher,
    task: JoinHandle<()>,
}

impl Drop for ConfigWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Why the file cannot be watched.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot watch {path} for changes ({source}); the config still reloads on SIGHUP or the console's R key"
)]
pub struct WatchError {
    /// The file.
    pub path: String,
    /// What `notify` said.
    #[source]
    pub source: notify::Error,
}

/// Watches `path` and reloads through `reloader` when it changes.
pub(super) fn watch(reloader: Reloader, path: &Path) -> Result<ConfigWatch, WatchError> {
    let failed = |source| WatchError {
        path: path.display().to_string(),
        source,
    };
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => Path::new(".").to_path_buf(),
    };
    let name: OsString = path.file_name().unwrap_or_default().to_os_string();
    // One slot: a change already waiting covers every later one until it is read.
    let (tx, mut rx) = mpsc::channel::<()>(1);
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else {
            return;
        };
        let counts = matches!(
            event.kind,
            EventKind::Create(_) | EventKind::Modify(_) | EventKind::Remove(_) | EventKind::Any
        );
        if counts
            && event
                .paths
                .iter()
                .any(|p| p.file_name() == Some(name.as_os_str()))
        {
            let _ = tx.try_send(());
        }
    })
    .map_err(failed)?;
    watcher
        .watch(&folder, RecursiveMode::NonRecursive)
        .map_err(failed)?;
    let task = tokio::spawn(async move {
        while rx.recv().await.is_some() {
            loop {
                match tokio::time::timeout(DEBOUNCE, rx.recv()).await {
                    Ok(Some(())) => continue,
                    Ok(None) => return,
                    Err(_quiet) => break,
                }
            }
            reloader.reload_changed_file().await;
        }
    });
    Ok(ConfigWatch {
        _watcher: watcher,
        task,
    })
}
