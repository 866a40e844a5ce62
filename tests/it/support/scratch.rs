//! A test's scratch directory in the temp dir, removed when the test ends (passing or
//! panicking), so test runs do not pile directories up in `/tmp`.

use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A fresh, empty directory named `turnscope-<name>-<this process>-<n>`; removed on drop.
pub struct Scratch(PathBuf);

/// Numbers each scratch directory of this process, so two with one name never share.
static MADE: AtomicU64 = AtomicU64::new(0);

impl Scratch {
    /// Creates it, emptying what an earlier run with the same pid left.
    pub fn new(name: &str) -> Self {
        let n = MADE.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("turnscope-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|e| panic!("create the scratch directory {}: {e}", dir.display()));
        Self(dir)
    }

    /// Writes `text` to `name` in it and returns the file's path.
    pub fn file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        path
    }
}

impl Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
