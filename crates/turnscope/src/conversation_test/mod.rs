//! Conversation test files (`*.test.toml`): the file model that `turnscope test` runs and the
//! console writes when it exports a session. [`load`] reads and checks a file (every error names
//! the file, case, turn and key), [`write`] renders one; running cases lives in the binary.
//!
//! ```toml
//! env = ["WHO"]         # the only variables ${NAME} may read
//!
//! [[case]]
//! name = "greets and echoes"
//! repeat = 3            # run 3 times, one session each
//! pass_rate = 0.66      # at least 2 of 3 must pass
//!
//! [[case.turn]]
//! say = "echo hello"
//! reply_contains = "hello"
//! tools = [{ name = "echo", args = { text = "hello" } }]
//! tools_match = "strict"
//! end_reason = "completed"
//! total_ms = 2000
//!
//! [[case.turn]]
//! pause = 0.5
//! ```

pub mod load;
pub mod write;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

pub use load::{TestFileError, parse, read};

/// Every end reason a turn can report; an `end_reason` expectation must name one of them.
pub const END_REASONS: &[&str] = &[
    "completed",
    "interrupted",
    "error",
    "session_ended",
    "length",
    "restarted",
];

/// One test file: the environment variables it reads, and its cases, in order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestFile {
    /// The environment variables `${NAME}` may read (`env = ["BOOKING_TIME"]`): expansion is
    /// explicit, so a `${GITHUB_TOKEN}` in a line someone typed, or in a file from elsewhere,
    /// is an error naming it instead of a CI secret sent to the bot and into `--events`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// `[[case]]` tables.
    #[serde(default, rename = "case")]
    pub cases: Vec<Case>,
}

/// One conversation: a fresh session, its turns in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    /// Shown in every line about the case; unique within the file.
    pub name: String,
    /// Runs of the case, each on a session of its own (default 1).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub repeat: u32,
    /// Share of the runs that must pass, above 0 and at most 1 (default 1: all).
    #[serde(default = "all", skip_serializing_if = "is_all")]
    pub pass_rate: f64,
    /// `[[case.turn]]` tables.
    #[serde(default, rename = "turn")]
    pub turns: Vec<Turn>,
}

/// One step of a case: a line to say (`say = ""` reads the turn in flight) or a pause, and
/// what the reply must show.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    /// The line to say; `""` reads the reply of the turn in flight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub say: Option<String>,
    /// Seconds to wait instead of saying anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause: Option<f64>,
    /// Texts the reply must contain (a string or a list).
    #[serde(
        default,
        deserialize_with = "one_or_many",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub reply_contains: Vec<String>,
    /// Texts the reply must not contain (a string or a list).
    #[serde(
        default,
        deserialize_with = "one_or_many",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub reply_not_contains: Vec<String>,
    /// Regular expressions (Rust `regex` syntax) the reply must match (a string or a list).
    #[serde(
        default,
        deserialize_with = "one_or_many",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub reply_matches: Vec<String>,
    /// The tool calls the turn must make, compared as `tools_match` says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<ToolExpect>>,
    /// How `tools` is compared (default `strict`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools_match: Option<ToolsMatch>,
    /// The turn's end reason, one of [`END_REASONS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_reason: Option<String>,
    /// Most milliseconds from the line to the first piece of the reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_piece_ms: Option<f64>,
    /// Most milliseconds from the line to the whole reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_ms: Option<f64>,
    /// `true`: the turn must not end in error (nor the call fail).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_error: Option<bool>,
}

impl Turn {
    /// Whether the turn says what the reply must show (a pause never does).
    pub fn has_expectations(&self) -> bool {
        !self.reply_contains.is_empty()
            || !self.reply_not_contains.is_empty()
            || !self.reply_matches.is_empty()
            || self.tools.is_some()
            || self.tools_match.is_some()
            || self.end_reason.is_some()
            || self.first_piece_ms.is_some()
            || self.total_ms.is_some()
            || self.no_error.is_some()
    }
}

/// One expected tool call: its name, and arguments that must appear in the call's (a subset:
/// each key given must be there with that value, nested tables likewise; others may be too).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolExpect {
    /// The tool's name as the model called it.
    pub name: String,
    /// Arguments matched as a subset; absent = any arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Map<String, Value>>,
}

/// How the calls a turn made are compared with `tools` (the trajectory match modes of
/// agentevals).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolsMatch {
    /// The same calls in the same order, no others.
    #[default]
    Strict,
    /// The same calls in any order, no others.
    Unordered,
    /// Every call made is one of `tools` (some may not be called).
    Subset,
    /// Every one of `tools` is called (others may be too).
    Superset,
}

impl ToolsMatch {
    /// The name as written in a file.
    pub fn label(self) -> &'static str {
        match self {
            ToolsMatch::Strict => "strict",
            ToolsMatch::Unordered => "unordered",
            ToolsMatch::Subset => "subset",
            ToolsMatch::Superset => "superset",
        }
    }
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

fn all() -> f64 {
    1.0
}

fn is_all(r: &f64) -> bool {
    *r == 1.0
}

/// A string or a list of strings, as a list.
fn one_or_many<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    match OneOrMany::deserialize(d) {
        Ok(OneOrMany::One(s)) => Ok(vec![s]),
        Ok(OneOrMany::Many(v)) => Ok(v),
        Err(_) => Err(serde::de::Error::custom(
            "expected a string or a list of strings",
        )),
    }
}
