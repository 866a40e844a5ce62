//! What a store keys a session by: the handle's keyed hash ([`HandleId`], HMAC-SHA256 of the
//! handle's 16 bytes with the store's [`HandleKey`]), never the handle. The hash is one-way:
//! beyond the 8 characters every log shows, a handle has 74 unknown random bits, and the key
//! (random per store) makes one store's ids unrelated to another's.

use std::fmt;

use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::Sha256;
use uuid::Uuid;

/// The 8 characters of a UUID (a handle, a task id) that logs, events and the console show:
/// its first 4 bytes in lower-case hex, as its hyphenated form begins. The rest stays secret.
pub fn shown_prefix(id: &Uuid) -> String {
    let b = id.as_bytes();
    format!("{:08x}", u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// The keyed hash of a handle.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HandleId([u8; 32]);

impl HandleId {
    /// The id's bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// An id from its 32 bytes (as a store reads them back).
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// Lower-case hex, 64 characters.
    pub fn to_hex(&self) -> String {
        let mut out = String::with_capacity(64);
        for b in self.0 {
            out.push(char::from_digit(u32::from(b >> 4), 16).unwrap_or('0'));
            out.push(char::from_digit(u32::from(b & 15), 16).unwrap_or('0'));
        }
        out
    }

    /// Parses [`HandleId::to_hex`]'s form.
    pub fn from_hex(text: &str) -> Option<Self> {
        if text.len() != 64 || !text.is_ascii() {
            return None;
        }
        let mut bytes = [0u8; 32];
        for (i, pair) in text.as_bytes().chunks(2).enumerate() {
            let hi = (pair[0] as char).to_digit(16)?;
            let lo = (pair[1] as char).to_digit(16)?;
            bytes[i] = (hi * 16 + lo) as u8;
        }
        Some(Self(bytes))
    }
}

impl fmt::Debug for HandleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HandleId({}…)", &self.to_hex()[..12])
    }
}

impl Serialize for HandleId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for HandleId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Self::from_hex(&text)
            .ok_or_else(|| serde::de::Error::custom("a handle id is 64 hex characters"))
    }
}

/// The secret a store hashes handles with (32 random bytes, kept by the store).
#[derive(Clone)]
pub struct HandleKey([u8; 32]);

impl HandleKey {
    /// A fresh random key.
    ///
    /// # Panics
    /// When the system has no random source (the handles themselves need one too).
    pub fn generate() -> Self {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).expect("the system's random source works");
        Self(bytes)
    }

    /// The key whose bytes a store kept.
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The key's bytes (for the store to keep).
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The id of `handle`.
    pub fn id_of(&self, handle: &Uuid) -> HandleId {
        let mut mac =
            <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0).expect("HMAC takes any key length");
        mac.update(handle.as_bytes());
        HandleId(mac.finalize().into_bytes().into())
    }
}

impl fmt::Debug for HandleKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HandleKey(…)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_keyed_stable_and_round_trip_as_hex() {
        let handle = Uuid::new_v4();
        let key = HandleKey::generate();
        let id = key.id_of(&handle);
        assert_eq!(id, HandleKey::from_bytes(*key.as_bytes()).id_of(&handle));
        assert_ne!(id, HandleKey::generate().id_of(&handle), "another key");
        assert_ne!(id, key.id_of(&Uuid::new_v4()), "another handle");
        assert_eq!(HandleId::from_hex(&id.to_hex()), Some(id));
        assert!(!id.to_hex().contains(&handle.simple().to_string()[..8]));
        assert_eq!(HandleId::from_hex("zz"), None);
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(serde_json::from_str::<HandleId>(&json).unwrap(), id);
    }

    #[test]
    fn hmac_sha256_matches_rfc_4231() {
        // RFC 4231 test case 2 ("Jefe"), through the same calls `id_of` makes.
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(b"Jefe").unwrap();
        mac.update(b"what do ya want for nothing?");
        let tag: [u8; 32] = mac.finalize().into_bytes().into();
        assert_eq!(
            HandleId(tag).to_hex(),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn the_shown_prefix_is_how_the_hyphenated_form_begins() {
        for _ in 0..100 {
            let id = Uuid::new_v4();
            assert_eq!(shown_prefix(&id), id.to_string()[..8]);
        }
        let low = Uuid::from_bytes([0, 0, 0, 7, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
        assert_eq!(shown_prefix(&low), "00000007");
    }
}
