//! The memory store: heads and logs in this process's memory, gone when it exits (the
//! behaviour before stores existed). What `turnscope test` and `turnscope bench` use unless
//! told otherwise, and the reference the other stores are tested against
//! (`store::conformance`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;

use super::{Commit, HandleId, HandleKey, Head, SessionStore, StoreError, StoreStats, StoredTurn};

/// One handle: its head and its log by turn id.
#[derive(Clone)]
struct Entry {
    head: Head,
    log: BTreeMap<u64, StoredTurn>,
}

/// Sessions kept in memory.
pub struct MemoryStore {
    key: HandleKey,
    entries: Mutex<HashMap<HandleId, Entry>>,
    writes: AtomicU64,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// An empty store with a fresh key.
    pub fn new() -> Self {
        Self {
            key: HandleKey::generate(),
            entries: Mutex::new(HashMap::new()),
            writes: AtomicU64::new(0),
        }
    }

    /// A copy of everything it holds, with its key: what a disk would hold at this instant
    /// (the tests' stand-in for a process killed now).
    pub fn snapshot(&self) -> Self {
        Self {
            key: self.key.clone(),
            entries: Mutex::new(self.entries().clone()),
            writes: AtomicU64::new(0),
        }
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<HandleId, Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wrote(&self) {
        self.writes.fetch_add(1, Ordering::Relaxed);
    }
}

#[async_trait]
impl SessionStore for MemoryStore {
    fn describe(&self) -> String {
        "memory".into()
    }

    fn durable(&self) -> bool {
        false
    }

    fn key(&self) -> HandleKey {
        self.key.clone()
    }

    async fn create(&self, head: &Head) -> Result<u64, StoreError> {
        let mut entries = self.entries();
        if let Some(found) = entries.get(&head.id) {
            return Err(StoreError::Conflict {
                prefix: head.prefix.clone(),
                expected: 0,
                found: Some(found.head.version),
            });
        }
        let mut head = head.clone();
        head.version = 1;
        entries.insert(
            head.id,
            Entry {
                head,
                log: BTreeMap::new(),
            },
        );
        self.wrote();
        Ok(1)
    }

    async fn head(&self, id: &HandleId) -> Result<Option<Head>, StoreError> {
        Ok(self.entries().get(id).map(|e| e.head.clone()))
    }

    async fn turns(&self, id: &HandleId, from: u64) -> Result<Vec<StoredTurn>, StoreError> {
        Ok(self
            .entries()
            .get(id)
            .map(|e| e.log.range(from..).map(|(_, t)| t.clone()).collect())
            .unwrap_or_default())
    }

    async fn commit(&self, id: &HandleId, commit: &Commit) -> Result<u64, StoreError> {
        let mut entries = self.entries();
        let Some(entry) = entries.get_mut(id) else {
            return Err(StoreError::Conflict {
                prefix: commit.head.prefix.clone(),
                expected: commit.expected,
                found: None,
            });
        };
        if entry.head.version != commit.expected {
            return Err(StoreError::Conflict {
                prefix: commit.head.prefix.clone(),
                expected: commit.expected,
                found: Some(entry.head.version),
            });
        }
        let version = commit.expected + 1;
        entry.head = commit.head.clone();
        entry.head.version = version;
        for turn in &commit.append {
            entry.log.insert(turn.id(), turn.clone());
        }
        entry.log = entry.log.split_off(&commit.drop_before);
        self.wrote();
        Ok(version)
    }

    async fn delete(&self, id: &HandleId) -> Result<bool, StoreError> {
        let removed = self.entries().remove(id).is_some();
        if removed {
            self.wrote();
        }
        Ok(removed)
    }

    async fn expired(&self, before_ms: u64, limit: usize) -> Result<Vec<Head>, StoreError> {
        let mut heads: Vec<Head> = self
            .entries()
            .values()
            .filter(|e| e.head.last_used_ms < before_ms)
            .map(|e| e.head.clone())
            .collect();
        heads.sort_by_key(|h| h.last_used_ms);
        heads.truncate(limit);
        Ok(heads)
    }

    async fn list(&self, limit: usize) -> Result<Vec<Head>, StoreError> {
        let mut heads: Vec<Head> = self.entries().values().map(|e| e.head.clone()).collect();
        heads.sort_by_key(|h| std::cmp::Reverse(h.last_used_ms));
        heads.truncate(limit);
        Ok(heads)
    }

    async fn count(&self) -> Result<u64, StoreError> {
        Ok(self.entries().len() as u64)
    }

    fn stats(&self) -> StoreStats {
        let writes = self.writes.load(Ordering::Relaxed);
        StoreStats {
            writes,
            syncs: 0,
            largest_batch: u64::from(writes > 0),
        }
    }

    async fn close(&self) {}
}
