//! Gives MCP tools names that OpenAI accepts (`^[a-zA-Z0-9_-]{1,64}$`), and maps them back. A
//! valid name is kept; any other is rewritten to a unique valid one, and the mapping depends
//! only on the set of names, never on their order. [`NameMap`] states the rules.

use std::collections::{BTreeMap, BTreeSet};

/// Longest function name OpenAI accepts.
pub(crate) const MAX_NAME_LEN: usize = 64;

/// Length of the `_xxxxxxxx` suffix added to shortened or colliding names.
const SUFFIX_LEN: usize = 9;

/// Whether `name` already matches `^[a-zA-Z0-9_-]{1,64}$`.
pub fn is_valid_openai_name(name: &str) -> bool {
    (1..=MAX_NAME_LEN).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A two-way mapping between original MCP tool names and OpenAI names.
///
/// OpenAI function names must match `^[a-zA-Z0-9_-]{1,64}$`, while MCP tool
/// names are free-form (`self.audio_speaker.set_volume`, `fs/read file`, names
/// longer than 64 characters). A [`NameMap`] is built once from a server's
/// tool list and assigns every tool one valid, unique name:
///
/// * a name that is already valid is kept unchanged, whatever else is listed;
/// * otherwise every character outside `[A-Za-z0-9_-]` becomes `_` (one `_`
///   per character, so `é` is one `_` too); an empty name becomes `tool`;
/// * a result longer than 64 characters is cut to 55 and given `_` plus eight
///   hex digits of a hash of the *original* name, so two long names that
///   share a prefix still differ;
/// * if the result is already taken (by a valid name or by an earlier
///   assignment), it gets the same `_` + hash suffix; in the practically
///   impossible case that this is taken too, the hash is re-seeded with a
///   counter until it is free.
///
/// Renamed tools are assigned in byte order of their original names, not in
/// list order, so the result depends only on the *set* of names: a server
/// that lists its tools in a different order after a refresh gets the very
/// same mapping. Nothing depends on `HashMap` iteration order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NameMap {
    /// (original, openai) in the order the originals were first listed.
    pairs: Vec<(String, String)>,
    by_original: BTreeMap<String, usize>,
    by_openai: BTreeMap<String, usize>,
}

impl NameMap {
    /// Builds the mapping for `originals`, a server's tool names in listing
    /// order. A name listed twice is mapped once (the repeat is ignored).
    pub fn new<I, S>(originals: I) -> NameMap
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut unique: Vec<String> = Vec::new();
        let mut seen = BTreeSet::new();
        for name in originals {
            let name = name.as_ref();
            if seen.insert(name.to_owned()) {
                unique.push(name.to_owned());
            }
        }

        let mut assigned: Vec<Option<String>> = vec![None; unique.len()];
        let mut taken: BTreeSet<String> = BTreeSet::new();
        // Valid names first, so a renamed tool can never take one of them.
        for (slot, name) in assigned.iter_mut().zip(&unique) {
            if is_valid_openai_name(name) {
                taken.insert(name.clone());
                *slot = Some(name.clone());
            }
        }
        // Then the rest, in byte order of the original, so list order does
        // not matter.
        let mut pending: Vec<usize> = (0..unique.len())
            .filter(|&i| assigned[i].is_none())
            .collect();
        pending.sort_by(|&a, &b| unique[a].cmp(&unique[b]));
        for index in pending {
            let name = pick_name(&unique[index], &taken);
            taken.insert(name.clone());
            assigned[index] = Some(name);
        }

        let mut map = NameMap::default();
        for (original, openai) in unique.into_iter().zip(assigned) {
            let openai = openai.unwrap_or_default();
            let index = map.pairs.len();
            map.by_original.insert(original.clone(), index);
            map.by_openai.insert(openai.clone(), index);
            map.pairs.push((original, openai));
        }
        map
    }

    /// The OpenAI name given to the MCP tool `original`, if it was listed.
    pub fn openai_name(&self, original: &str) -> Option<&str> {
        let &index = self.by_original.get(original)?;
        Some(self.pairs[index].1.as_str())
    }

    /// The MCP tool behind the OpenAI name `openai_name` (what a tool call
    /// from the model must be executed as), if there is one.
    pub fn original(&self, openai_name: &str) -> Option<&str> {
        let &index = self.by_openai.get(openai_name)?;
        Some(self.pairs[index].0.as_str())
    }

    /// `(original, openai)` pairs in the order the originals were listed.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.pairs.iter().map(|(o, n)| (o.as_str(), n.as_str()))
    }

    /// How many distinct tools are mapped.
    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    /// Whether no tool is mapped.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }
}

impl<S: AsRef<str>> FromIterator<S> for NameMap {
    /// Same as [`NameMap::new`].
    fn from_iter<I: IntoIterator<Item = S>>(originals: I) -> Self {
        NameMap::new(originals)
    }
}

/// Chooses a free valid name for an original that is not valid as it is.
fn pick_name(original: &str, taken: &BTreeSet<String>) -> String {
    let mut base: String = original
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if base.is_empty() {
        base.push_str("tool");
    }
    if base.len() <= MAX_NAME_LEN && !taken.contains(&base) {
        return base;
    }
    // Only ASCII is left, so cutting at a byte index is safe.
    base.truncate(MAX_NAME_LEN - SUFFIX_LEN);
    let mut seed = 0u32;
    loop {
        let candidate = format!("{base}_{:08x}", name_hash(original, seed));
        if !taken.contains(&candidate) {
            return candidate;
        }
        seed += 1;
    }
}

/// 32-bit FNV-1a of `original` (and, if non-zero, `seed`).
///
/// Hand-written on purpose: the names are shown to models and written to
/// logs, so they must be identical across runs, machines and Rust releases,
/// which std's `DefaultHasher` does not promise; FNV-1a is a few lines, needs
/// no new dependency, and its weak collision resistance does not matter here
/// because every collision is detected and re-seeded.
fn name_hash(original: &str, seed: u32) -> u32 {
    const OFFSET: u32 = 0x811c_9dc5;
    const PRIME: u32 = 0x0100_0193;
    let mut hash = OFFSET;
    let mut feed = |bytes: &[u8]| {
        for &b in bytes {
            hash ^= u32::from(b);
            hash = hash.wrapping_mul(PRIME);
        }
    };
    feed(original.as_bytes());
    if seed != 0 {
        feed(&[0xff]);
        feed(&seed.to_le_bytes());
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(map: &NameMap) -> Vec<(&str, &str)> {
        map.iter().collect()
    }

    #[test]
    fn validity_matches_the_openai_pattern() {
        assert!(is_valid_openai_name("get_weather"));
        assert!(is_valid_openai_name("A-z_09"));
        assert!(is_valid_openai_name(&"a".repeat(64)));
        assert!(!is_valid_openai_name(&"a".repeat(65)));
        assert!(!is_valid_openai_name(""));
        assert!(!is_valid_openai_name("a.b"));
        assert!(!is_valid_openai_name("a b"));
        assert!(!is_valid_openai_name("wetter_ä"));
    }

    #[test]
    fn fnv1a_matches_the_published_test_vectors() {
        assert_eq!(name_hash("", 0), 0x811c_9dc5);
        assert_eq!(name_hash("a", 0), 0xe40c_292c);
        assert_eq!(name_hash("foobar", 0), 0xbf9c_f968);
        assert_eq!(name_hash("a.b", 1), 0xff2b_7e08);
    }

    #[test]
    fn valid_names_are_kept_unchanged() {
        let map = NameMap::new(["get_weather", "a-b", "X9"]);
        assert_eq!(
            names(&map),
            [("get_weather", "get_weather"), ("a-b", "a-b"), ("X9", "X9")]
        );
        assert_eq!(map.original("a-b"), Some("a-b"));
    }

    #[test]
    fn case21_dotted_name_is_sanitised_and_maps_back() {
        let map = NameMap::new(["self.audio_speaker.set_volume"]);
        assert_eq!(
            map.openai_name("self.audio_speaker.set_volume"),
            Some("self_audio_speaker_set_volume")
        );
        assert_eq!(
            map.original("self_audio_speaker_set_volume"),
            Some("self.audio_speaker.set_volume")
        );
    }

    #[test]
    fn slashes_spaces_unicode_and_empty_names_are_sanitised() {
        let map = NameMap::new(["fs/read file", "wetter-äöü", "", "日本"]);
        assert_eq!(
            names(&map),
            [
                ("fs/read file", "fs_read_file"),
                ("wetter-äöü", "wetter-___"),
                ("", "tool"),
                ("日本", "__"),
            ]
        );
    }

    #[test]
    fn case22_collision_with_a_valid_name_suffixes_the_renamed_tools() {
        // `a_b` is valid and keeps its name even though it is listed last.
        let map = NameMap::new(["a.b", "a/b", "a_b"]);
        assert_eq!(
            names(&map),
            [
                ("a.b", "a_b_108bf50c"),
                ("a/b", "a_b_3a8e75c1"),
                ("a_b", "a_b")
            ]
        );
        for (original, openai) in map.iter() {
            assert_eq!(map.original(openai), Some(original));
        }
    }

    #[test]
    fn collision_between_renamed_tools_goes_by_byte_order() {
        // "x y" sorts before "x.y", so it gets the plain name.
        let forward = NameMap::new(["x.y", "x y"]);
        assert_eq!(names(&forward), [("x.y", "x_y_c6d04176"), ("x y", "x_y")]);
        let backward = NameMap::new(["x y", "x.y"]);
        assert_eq!(backward.openai_name("x.y"), Some("x_y_c6d04176"));
        assert_eq!(backward.openai_name("x y"), Some("x_y"));
    }

    #[test]
    fn taken_hash_suffix_is_reseeded() {
        // A valid tool already owns the name `a.b` would get, twice over.
        let map = NameMap::new(["a.b", "a_b", "a_b_108bf50c"]);
        assert_eq!(map.openai_name("a.b"), Some("a_b_ff2b7e08"));
        assert_eq!(map.openai_name("a_b_108bf50c"), Some("a_b_108bf50c"));
        assert_eq!(map.original("a_b_ff2b7e08"), Some("a.b"));
    }

    #[test]
    fn case23_long_name_is_cut_with_a_stable_hash_and_round_trips() {
        let long = format!("tool_{}", "x".repeat(65));
        assert_eq!(long.len(), 70);
        let map = NameMap::new([long.as_str()]);
        let expected = format!("tool_{}_f25e1490", "x".repeat(50));
        assert_eq!(expected.len(), 64);
        assert_eq!(map.openai_name(&long), Some(expected.as_str()));
        assert_eq!(map.original(&expected), Some(long.as_str()));
        // Same input, same name: nothing depends on the run.
        assert_eq!(NameMap::new([long.as_str()]), map);
    }

    #[test]
    fn long_names_sharing_a_prefix_stay_distinct() {
        let a = format!("get_{}.v1", "a".repeat(60));
        let b = format!("get_{}.v2", "a".repeat(60));
        let map = NameMap::new([&a, &b]);
        let prefix = format!("get_{}", "a".repeat(51));
        assert_eq!(
            map.openai_name(&a),
            Some(format!("{prefix}_c79c98c3").as_str())
        );
        assert_eq!(
            map.openai_name(&b),
            Some(format!("{prefix}_c89c9a56").as_str())
        );
    }

    #[test]
    fn duplicates_are_mapped_once_and_order_is_kept() {
        let map: NameMap = ["b.x", "a", "b.x", "c"].into_iter().collect();
        assert_eq!(map.len(), 3);
        assert!(!map.is_empty());
        assert_eq!(names(&map), [("b.x", "b_x"), ("a", "a"), ("c", "c")]);
    }

    #[test]
    fn unknown_names_give_none() {
        let map = NameMap::new(["a.b"]);
        assert_eq!(map.openai_name("a_b"), None);
        assert_eq!(map.original("a.b"), None);
        assert!(NameMap::new(Vec::<String>::new()).is_empty());
    }

    #[test]
    fn every_assigned_name_is_valid_unique_and_reversible() {
        let mut originals: Vec<String> = Vec::new();
        for sep in [".", "/", " ", "_", "-", ":", "é"] {
            for stem in ["run", "", &"z".repeat(70)] {
                originals.push(format!("{stem}{sep}x"));
                originals.push(format!("{stem}{sep}{sep}x"));
            }
        }
        let map = NameMap::new(&originals);
        let mut seen = BTreeSet::new();
        for original in &originals {
            let openai = map.openai_name(original).unwrap();
            assert!(is_valid_openai_name(openai), "{openai}");
            assert_eq!(map.original(openai), Some(original.as_str()));
            seen.insert(openai);
        }
        assert_eq!(seen.len(), map.len());
        let mut reversed = originals.clone();
        reversed.reverse();
        let again = NameMap::new(&reversed);
        for original in &originals {
            assert_eq!(again.openai_name(original), map.openai_name(original));
        }
    }
}
