//! Seed corpora and the mutations fuzz targets apply to them.
//!
//! Seeds are real inputs: files under `tests/fuzz_corpus/<target>/` (frames from the Xiaozhi
//! broker and the reference documents, the documented configs, user themes) and, for themes,
//! the shipped `themes/*.toml`. A mutated input starts from one seed and applies a few byte
//! edits: truncation, byte flips, insertions, deletions, duplicated runs, splices from
//! another seed and insertions of tokens that matter to the format.

use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;

/// Every file in `dir` (relative to the crate root), sorted by name; panics when there is
/// none, so a moved corpus cannot silently leave a target without seeds.
pub fn load(dir: &str) -> Vec<Vec<u8>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut files: Vec<_> = std::fs::read_dir(&path)
        .unwrap_or_else(|e| panic!("cannot read the fuzz corpus {}: {e}", path.display()))
        .map(|entry| entry.expect("a corpus entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(
        !files.is_empty(),
        "the fuzz corpus {} is empty",
        path.display()
    );
    files
        .iter()
        .map(|p| std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .collect()
}

/// One edit; positions are taken modulo the input's length.
#[derive(Debug, Clone)]
enum Edit {
    Truncate(usize),
    Flip(usize, u8),
    Insert(usize, u8),
    Delete(usize, usize),
    Duplicate(usize, usize),
    Splice {
        seed: usize,
        from: usize,
        len: usize,
        at: usize,
    },
    Token(usize, usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        any::<usize>().prop_map(Edit::Truncate),
        (any::<usize>(), 1u8..=255).prop_map(|(at, mask)| Edit::Flip(at, mask)),
        (any::<usize>(), any::<u8>()).prop_map(|(at, b)| Edit::Insert(at, b)),
        (any::<usize>(), 1usize..16).prop_map(|(at, n)| Edit::Delete(at, n)),
        (any::<usize>(), 1usize..32).prop_map(|(at, n)| Edit::Duplicate(at, n)),
        (any::<usize>(), any::<usize>(), 1usize..64, any::<usize>()).prop_map(
            |(seed, from, len, at)| Edit::Splice {
                seed,
                from,
                len,
                at
            }
        ),
        (any::<usize>(), any::<usize>()).prop_map(|(at, t)| Edit::Token(at, t)),
    ]
}

fn apply(input: &mut Vec<u8>, edit: &Edit, seeds: &[Vec<u8>], tokens: &[&str]) {
    let len = input.len();
    let at = |p: usize| if len == 0 { 0 } else { p % (len + 1) };
    match *edit {
        Edit::Truncate(p) => input.truncate(at(p)),
        Edit::Flip(p, mask) if len > 0 => input[p % len] ^= mask,
        Edit::Flip(..) => {}
        Edit::Insert(p, b) => input.insert(at(p), b),
        Edit::Delete(p, n) => {
            let from = at(p);
            input.drain(from..(from + n).min(len));
        }
        Edit::Duplicate(p, n) => {
            let from = at(p);
            let run = input[from..(from + n).min(len)].to_vec();
            input.splice(from..from, run);
        }
        Edit::Splice {
            seed,
            from,
            len: n,
            at: p,
        } => {
            let other = &seeds[seed % seeds.len()];
            let from = from % (other.len() + 1);
            let run = &other[from..(from + n).min(other.len())];
            let to = at(p);
            input.splice(to..to, run.iter().copied());
        }
        Edit::Token(p, t) => {
            let to = at(p);
            input.splice(to..to, tokens[t % tokens.len()].bytes());
        }
    }
}

/// Inputs that start from one of `seeds` and go through up to `max_edits` edits; `tokens`
/// are fragments worth inserting for the format (quotes, brackets, key names, …). Seeds are
/// also produced unchanged (zero edits), so every seed is run as it is.
pub fn mutated(
    seeds: Vec<Vec<u8>>,
    tokens: &'static [&'static str],
    max_edits: usize,
) -> impl Strategy<Value = Vec<u8>> {
    let seeds = Arc::new(seeds);
    let count = seeds.len();
    (0..count, prop::collection::vec(edit(), 0..=max_edits)).prop_map(move |(i, edits)| {
        let mut input = seeds[i].clone();
        for e in &edits {
            apply(&mut input, e, &seeds, tokens);
        }
        input
    })
}

/// The input as text the way a parser receives it: invalid UTF-8 replaced.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
