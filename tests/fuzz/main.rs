//! Property-based fuzzing of every parser that takes outside input: the model stream parser
//! and tool-call assembler, the schema converter, the scripted model ([`model`]), the config
//! and theme files ([`files`]), the JSON-RPC frames of a Xiaozhi endpoint ([`xiaozhi`]) and
//! replay files loaded, stepped through and drawn by the console ([`replay`]).
//! None may panic or hang on any input. Inputs are generated, or mutated from the real
//! samples under `tests/fuzz_corpus/` ([`corpus`]).
//!
//! `PROPTEST_CASES=N` sets the number of cases per target (CI runs the default, 256);
//! `scripts/fuzz-long` runs every target for a fixed time and prints executions per target.

mod corpus;
mod files;
mod model;
mod replay;
mod whisker;
mod xiaozhi;
mod xiaozhi_socket;

use proptest::prelude::*;

/// One of `items`, as an owned string.
pub fn one_of(items: &'static [&'static str]) -> impl Strategy<Value = String> + Clone {
    prop::sample::select(items).prop_map(str::to_string)
}

/// `PROPTEST_CASES` (default 256) divided by `divisor`, at least 8: the case count of a
/// target that is much slower per case than the others.
pub fn scaled_cases(divisor: u32) -> u32 {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .unwrap_or(256);
    (cases / divisor).max(8)
}
