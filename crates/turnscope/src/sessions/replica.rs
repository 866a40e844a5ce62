//! Which replica this process is, behind a load balancer, and how a handle names the replica
//! that issued it: a handle's last 4 hex digits are its replica's tag (16 bits of a hash of
//! the replica id), so a replica tells a handle another replica issued from one that expired.
//! Draining (SIGTERM) is the replica's state too: no new conversation, turns in flight finish.

use std::sync::Arc;

use uuid::Uuid;

/// This process's replica: its id (as configured, or `host:port`) and the tag its handles
/// end in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replica {
    id: Arc<str>,
    tag: u16,
    /// Whether the id was configured: this server runs as one of several, so a handle of
    /// another tag is another replica's rather than one from before a restart.
    one_of_several: bool,
}

impl Default for Replica {
    /// The replica of a table built without one (library use, unit tests): `local`, alone.
    fn default() -> Self {
        Self::alone("local")
    }
}

impl Replica {
    /// The replica called `id`, one of several; its tag is derived from the id (FNV-1a, mixed), so the same id
    /// always issues handles with the same ending.
    pub fn new(id: impl Into<Arc<str>>) -> Self {
        let id = id.into();
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for b in id.bytes() {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        // A finaliser (splitmix64's) so ids that differ in one character get unrelated tags.
        hash = (hash ^ (hash >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        hash = (hash ^ (hash >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        let tag = (hash ^ (hash >> 31)) as u16;
        Self {
            id,
            tag,
            one_of_several: true,
        }
    }

    /// A server that is no replica of others (no id configured), called `id` (`host:port`).
    pub fn alone(id: impl Into<Arc<str>>) -> Self {
        Self {
            one_of_several: false,
            ..Self::new(id)
        }
    }

    /// Whether this server runs as one of several replicas (its id was configured).
    pub fn is_one_of_several(&self) -> bool {
        self.one_of_several
    }

    /// The id, as shown in `/healthz`, `start`'s structured content, events and errors.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The id, shared.
    pub fn id_arc(&self) -> Arc<str> {
        self.id.clone()
    }

    /// The tag every handle of this replica ends in, as 4 hex digits.
    pub fn tag(&self) -> String {
        format!("{:04x}", self.tag)
    }

    /// `handle` with its last 16 bits replaced by this replica's tag (106 random bits stay).
    pub(crate) fn stamp(&self, handle: Uuid) -> Uuid {
        let mut bytes = *handle.as_bytes();
        bytes[14..16].copy_from_slice(&self.tag.to_be_bytes());
        Uuid::from_bytes(bytes)
    }

    /// Whether this replica issued `handle` (its tag matches).
    pub(crate) fn issued(&self, handle: &Uuid) -> bool {
        handle.as_bytes()[14..16] == self.tag.to_be_bytes()
    }
}

/// The tag a handle ends in: its last 4 characters.
pub(crate) fn tag_of(handle: &Uuid) -> String {
    let b = handle.as_bytes();
    format!("{:02x}{:02x}", b[14], b[15])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamped_handle_ends_in_the_tag_and_stays_a_v4_uuid() {
        let r = Replica::new("r1");
        let h = r.stamp(Uuid::new_v4());
        let text = h.to_string();
        assert_eq!(text.len(), 36);
        assert!(text.ends_with(&r.tag()), "{text} {}", r.tag());
        assert_eq!(h.get_version_num(), 4);
        assert!(r.issued(&h));
        assert_eq!(tag_of(&h), r.tag());
        assert_eq!(Replica::new("r1"), r, "the same id, the same tag");
        let others = ["r2", "r3", "127.0.0.1:7871", "127.0.0.1:7872"];
        assert!(others.iter().all(|o| Replica::new(*o).tag() != r.tag()));
        assert!(!Replica::new("r2").issued(&h));
    }
}
