//! Reading a test file: TOML into [`TestFile`], `${VAR}` placeholders expanded (the config's
//! one rule, [`crate::config::env`]) from the variables the file declares in `env` and no
//! others, then every rule checked. Each error names the file, the
//! case (number and name), the turn (number, from 1) and the key, so the fix is one look away.

use std::cell::Cell;
use std::path::Path;

use serde_json::Value;

use super::{END_REASONS, TestFile, Turn};
use crate::config::env::expand_env;

/// Why a test file was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}{}: {}{message}", line.map(|l| format!(":{l}")).unwrap_or_default(), place(*case, case_name.as_deref(), *turn, key.as_deref()))]
pub struct TestFileError {
    /// The file as given.
    pub file: String,
    /// The line, when the parser knew it.
    pub line: Option<usize>,
    /// The case's number (from 1), when the error is inside one.
    pub case: Option<usize>,
    /// The case's name, when it has one.
    pub case_name: Option<String>,
    /// The turn's number within the case (from 1), when the error is inside one.
    pub turn: Option<usize>,
    /// The key at fault.
    pub key: Option<String>,
    /// What is wrong and what is expected.
    pub message: String,
}

fn place(
    case: Option<usize>,
    name: Option<&str>,
    turn: Option<usize>,
    key: Option<&str>,
) -> String {
    let mut out = String::new();
    if let Some(c) = case {
        out.push_str(&format!("case {c}"));
        if let Some(n) = name {
            out.push_str(&format!(" {n:?}"));
        }
    }
    if let Some(t) = turn {
        out.push_str(&format!(", turn {t}"));
    }
    if let Some(k) = key {
        if !out.is_empty() {
            out.push_str(", ");
        }
        out.push_str(&format!("`{k}`"));
    }
    if !out.is_empty() {
        out.push_str(": ");
    }
    out
}

/// Reads and checks the test file at `path`, expanding `${VAR}` from the process environment.
///
/// # Errors
/// The file cannot be read, is not TOML of this shape, or breaks a rule (see [`parse`]).
pub fn read(path: &Path) -> Result<TestFile, Box<TestFileError>> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| {
        Box::new(TestFileError {
            file: file.clone(),
            line: None,
            case: None,
            case_name: None,
            turn: None,
            key: None,
            message: format!("cannot read the test file: {e}; check the path"),
        })
    })?;
    parse(&text, &file, &|name| std::env::var(name).ok())
}

/// Parses and checks `text` (from `file`, named in errors), expanding `${VAR}` with `env` for
/// the variables the file's `env` list declares.
///
/// Rules: `env` names variables, and every `${NAME}` is one of them; at least one case; names present and unique; `repeat` at least 1; `pass_rate` above
/// 0 and at most 1; each case has a turn that says something; each turn has exactly one of
/// `say` and `pause`, a pause no expectations; `tools_match` only with `tools`; regexes compile;
/// an `end_reason` is one the bot reports; time budgets are positive numbers of milliseconds.
///
/// # Errors
/// The first rule broken, as a [`TestFileError`].
pub fn parse(
    text: &str,
    file: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<TestFile, Box<TestFileError>> {
    parse_unboxed(text, file, env).map_err(Box::new)
}

#[allow(clippy::result_large_err)] // boxed once, by `parse`
fn parse_unboxed(
    text: &str,
    file: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<TestFile, TestFileError> {
    let mut parsed: TestFile = toml::from_str(text).map_err(|e| syntax_error(text, file, &e))?;
    if let Some(bad) = parsed.env.iter().find(|n| !is_variable_name(n)) {
        return Err(TestFileError {
            file: file.to_string(),
            line: None,
            case: None,
            case_name: None,
            turn: None,
            key: Some("env".into()),
            message: format!(
                "{bad:?} is not an environment variable's name; use letters, digits and _ (not first)"
            ),
        });
    }
    let declared = parsed.env.clone();
    let env = Declared {
        names: &declared,
        env,
    };
    let env = &env;
    let err = |case: Option<usize>, turn: Option<usize>, key: &str, message: String| {
        let name = case.and_then(|c| parsed_name(text, c));
        TestFileError {
            file: file.to_string(),
            line: None,
            case: case.map(|c| c + 1),
            case_name: name,
            turn: turn.map(|t| t + 1),
            key: Some(key.to_string()),
            message,
        }
    };
    if parsed.cases.is_empty() {
        return Err(err(
            None,
            None,
            "case",
            "the file has no [[case]]; add one with a name and a [[case.turn]] that says a line"
                .into(),
        ));
    }
    let mut names = std::collections::HashSet::new();
    for (c, case) in parsed.cases.iter_mut().enumerate() {
        case.name = env
            .expand(&case.name)
            .map_err(|m| err(Some(c), None, "name", m))?;
        if case.name.trim().is_empty() {
            return Err(err(Some(c), None, "name", "a case needs a name".into()));
        }
        if !names.insert(case.name.clone()) {
            return Err(err(
                Some(c),
                None,
                "name",
                "another case of this file has the same name; names must be unique".into(),
            ));
        }
        if case.repeat == 0 {
            return Err(err(
                Some(c),
                None,
                "repeat",
                "must be at least 1 (runs of the case)".into(),
            ));
        }
        if !(case.pass_rate > 0.0 && case.pass_rate <= 1.0) {
            return Err(err(
                Some(c),
                None,
                "pass_rate",
                format!(
                    "{} is out of range; give the share of runs that must pass, above 0 and at most 1 (0.9 = 90 %)",
                    case.pass_rate
                ),
            ));
        }
        if !case.turns.iter().any(|t| t.say.is_some()) {
            return Err(err(
                Some(c),
                None,
                "turn",
                "the case says nothing; add a [[case.turn]] with `say = \"...\"`".into(),
            ));
        }
        for (t, turn) in case.turns.iter_mut().enumerate() {
            check_turn(turn, env).map_err(|(key, m)| err(Some(c), Some(t), key, m))?;
        }
    }
    Ok(parsed)
}

/// The file's placeholders read only the variables it declares.
struct Declared<'a> {
    names: &'a [String],
    env: &'a dyn Fn(&str) -> Option<String>,
}

impl Declared<'_> {
    /// `text` with its `${NAME}`s expanded; a name the file does not declare is an error.
    fn expand(&self, text: &str) -> Result<String, String> {
        let undeclared = Cell::new(None);
        let lookup = |name: &str| {
            if self.names.iter().any(|n| n == name) {
                (self.env)(name)
            } else {
                undeclared.set(Some(name.to_string()));
                None
            }
        };
        expand_env(text, &lookup).map_err(|message| match undeclared.take() {
            Some(name) => format!(
                "`${{{name}}}` reads an environment variable the file does not declare; add \
                 env = [\"{name}\"] at the top of the file to read it, or write $${{{name}}} for the \
                 text itself"
            ),
            None => message,
        })
    }
}

fn is_variable_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Checks one turn and expands its placeholders; the error is (key, message).
fn check_turn(turn: &mut Turn, env: &Declared<'_>) -> Result<(), (&'static str, String)> {
    match (&turn.say, turn.pause) {
        (Some(_), Some(_)) => {
            return Err((
                "pause",
                "a turn either says a line or pauses; split it into two [[case.turn]]".into(),
            ));
        }
        (None, None) => {
            return Err((
                "say",
                "missing; give `say = \"a line\"` (\"\" reads the turn in flight) or `pause = SECONDS`"
                    .into(),
            ));
        }
        (None, Some(p)) => {
            if !(p.is_finite() && p > 0.0 && p <= 3600.0) {
                return Err((
                    "pause",
                    format!("{p} is not a pause; give seconds above 0 and at most 3600"),
                ));
            }
            if turn.has_expectations() {
                return Err((
                    "pause",
                    "a pause has no reply to check; move the expectations to the turn that says the line"
                        .into(),
                ));
            }
        }
        (Some(_), None) => {}
    }
    if let Some(say) = &turn.say {
        turn.say = Some(env.expand(say).map_err(|m| ("say", m))?);
    }
    for (key, list) in [
        ("reply_contains", &mut turn.reply_contains),
        ("reply_not_contains", &mut turn.reply_not_contains),
        ("reply_matches", &mut turn.reply_matches),
    ] {
        for s in list.iter_mut() {
            *s = env.expand(s).map_err(|m| (key, m))?;
            if s.is_empty() && key != "reply_matches" {
                return Err((key, "an empty text matches every reply; remove it".into()));
            }
        }
    }
    for pattern in &turn.reply_matches {
        regex::Regex::new(pattern).map_err(|e| {
            (
                "reply_matches",
                format!("{pattern:?} is not a regular expression: {e}"),
            )
        })?;
    }
    if turn.tools_match.is_some() && turn.tools.is_none() {
        return Err((
            "tools_match",
            "given without `tools`; list the expected calls, e.g. tools = [{ name = \"clock\" }]"
                .into(),
        ));
    }
    for tool in turn.tools.iter_mut().flatten() {
        tool.name = env.expand(&tool.name).map_err(|m| ("tools", m))?;
        if tool.name.is_empty() {
            return Err(("tools", "a tool call needs a `name`".into()));
        }
        if let Some(args) = &mut tool.args {
            for value in args.values_mut() {
                expand_value(value, env).map_err(|m| ("tools", m))?;
            }
        }
    }
    if let Some(reason) = &turn.end_reason
        && !END_REASONS.contains(&reason.as_str())
    {
        return Err((
            "end_reason",
            format!(
                "{reason:?} is not an end reason; expected one of {}",
                END_REASONS.join(", ")
            ),
        ));
    }
    for (key, budget) in [
        ("first_piece_ms", turn.first_piece_ms),
        ("total_ms", turn.total_ms),
    ] {
        if let Some(ms) = budget
            && !(ms.is_finite() && ms > 0.0)
        {
            return Err((
                key,
                format!("{ms} is not a time budget; give milliseconds above 0"),
            ));
        }
    }
    if turn.no_error == Some(false) {
        return Err((
            "no_error",
            "`no_error = false` checks nothing; remove it, or expect `end_reason = \"error\"`"
                .into(),
        ));
    }
    Ok(())
}

/// Expands placeholders in every string inside `value`.
fn expand_value(value: &mut Value, env: &Declared<'_>) -> Result<(), String> {
    match value {
        Value::String(s) => *s = env.expand(s)?,
        Value::Array(items) => {
            for v in items {
                expand_value(v, env)?;
            }
        }
        Value::Object(map) => {
            for v in map.values_mut() {
                expand_value(v, env)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// A parser error, placed: the line, the case and turn the line is in, and the key on it.
fn syntax_error(text: &str, file: &str, e: &toml::de::Error) -> TestFileError {
    let at = e.span().map(|s| s.start).unwrap_or(0).min(text.len());
    let line = text[..at].matches('\n').count() + 1;
    let (mut case, mut turn) = (None::<usize>, None::<usize>);
    for l in text[..at].lines() {
        match l.trim() {
            "[[case]]" => {
                case = Some(case.map_or(0, |c| c + 1));
                turn = None;
            }
            "[[case.turn]]" => turn = Some(turn.map_or(0, |t| t + 1)),
            _ => {}
        }
    }
    let line_text = text[..at].rsplit('\n').next().unwrap_or("").to_string()
        + text[at..].split('\n').next().unwrap_or("");
    let key = line_text
        .split_once('=')
        .map(|(k, _)| k.trim().trim_matches('"').to_string())
        .filter(|k| !k.is_empty() && !k.starts_with('['));
    let message = e.message().trim().to_string();
    TestFileError {
        file: file.to_string(),
        line: e.span().map(|_| line),
        case: case.map(|c| c + 1),
        case_name: case.and_then(|c| parsed_name(text, c)),
        turn: turn.map(|t| t + 1),
        key: if message.contains("unknown field") {
            None
        } else {
            key
        },
        message: if message.contains("unknown field") {
            format!("{message} (see the file format in docs/testing.md)")
        } else {
            message
        },
    }
}

/// The name of case `index` when the text is valid TOML with such a case.
fn parsed_name(text: &str, index: usize) -> Option<String> {
    let table: toml::Table = text.parse().ok()?;
    table
        .get("case")?
        .as_array()?
        .get(index)?
        .get("name")?
        .as_str()
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn error(text: &str) -> TestFileError {
        *parse(text, "bot.test.toml", &no_env).unwrap_err()
    }

    #[test]
    fn a_file_reads_into_cases_and_turns() {
        let f = parse(
            r#"
env = ["WHO"]

[[case]]
name = "hello"
repeat = 3
pass_rate = 0.5
[[case.turn]]
say = "echo ${WHO}"
reply_contains = "hi"
reply_matches = ["^The", "hi"]
tools = [{ name = "echo", args = { text = "${WHO}" } }]
tools_match = "unordered"
end_reason = "length"
[[case.turn]]
pause = 0.5
"#,
            "f",
            &|n| (n == "WHO").then(|| "hi".to_string()),
        )
        .unwrap();
        let case = &f.cases[0];
        assert_eq!((case.repeat, case.pass_rate, case.turns.len()), (3, 0.5, 2));
        let turn = &case.turns[0];
        assert_eq!(turn.say.as_deref(), Some("echo hi"));
        assert_eq!(turn.reply_contains, ["hi"]);
        assert_eq!(turn.reply_matches.len(), 2);
        let tools = turn.tools.as_ref().unwrap();
        assert_eq!(tools[0].args.as_ref().unwrap()["text"], "hi");
        assert_eq!(case.turns[1].pause, Some(0.5));
    }

    #[test]
    fn an_unknown_key_names_file_line_case_and_turn() {
        let e = error(
            "[[case]]\nname = \"greets\"\n[[case.turn]]\nsay = \"hi\"\n[[case.turn]]\nsay = \"x\"\nreply_contain = \"y\"\n",
        );
        let text = e.to_string();
        assert_eq!(
            (e.case, e.turn, e.line),
            (Some(1), Some(2), Some(7)),
            "{text}"
        );
        assert!(
            text.starts_with("bot.test.toml:7: case 1 \"greets\", turn 2: "),
            "{text}"
        );
        assert!(text.contains("reply_contain"), "{text}");
    }

    /// Expansion is explicit: a variable the file does not declare is never read, whatever
    /// the environment holds.
    #[test]
    fn only_declared_variables_are_read() {
        let env = |n: &str| Some(format!("value of {n}"));
        let text = "[[case]]\nname = \"a\"\n[[case.turn]]\nsay = \"${GITHUB_TOKEN}\"\n";
        let e = parse(text, "f", &env).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("say"), "{e}");
        assert!(!e.to_string().contains("value of"), "{e}");
        let declared = format!("env = [\"GITHUB_TOKEN\"]\n{text}");
        let f = parse(&declared, "f", &env).unwrap();
        assert_eq!(
            f.cases[0].turns[0].say.as_deref(),
            Some("value of GITHUB_TOKEN")
        );
        let literal = text.replace("${", "$${");
        let f = parse(&literal, "f", &env).unwrap();
        assert_eq!(f.cases[0].turns[0].say.as_deref(), Some("${GITHUB_TOKEN}"));
    }

    #[test]
    fn a_wrong_type_names_the_key() {
        let e = error("[[case]]\nname = \"a\"\nrepeat = \"twice\"\n[[case.turn]]\nsay = \"hi\"\n");
        assert_eq!(e.key.as_deref(), Some("repeat"), "{e}");
        assert_eq!(e.case, Some(1));
    }

    #[test]
    fn rules_are_checked_with_the_key_named() {
        let cases = [
            ("[[case]]\nname = \"a\"\n", "turn", "says nothing"),
            (
                "[[case]]\nname = \"a\"\npass_rate = 1.5\n[[case.turn]]\nsay = \"x\"\n",
                "pass_rate",
                "out of range",
            ),
            (
                "[[case]]\nname = \"a\"\n[[case.turn]]\nsay = \"x\"\nend_reason = \"complete\"\n",
                "end_reason",
                "expected one of completed, interrupted, error, session_ended, length",
            ),
            (
                "[[case]]\nname = \"a\"\n[[case.turn]]\nsay = \"x\"\nreply_matches = \"(\"\n",
                "reply_matches",
                "not a regular expression",
            ),
            (
                "[[case]]\nname = \"a\"\n[[case.turn]]\nsay = \"x\"\n[[case.turn]]\npause = 1\nreply_contains = \"x\"\n",
                "pause",
                "no reply to check",
            ),
            (
                "[[case]]\nname = \"a\"\n[[case.turn]]\nsay = \"x\"\ntools_match = \"subset\"\n",
                "tools_match",
                "without `tools`",
            ),
            (
                "env = [\"NOPE\"]\n[[case]]\nname = \"a\"\n[[case.turn]]\nsay = \"${NOPE}\"\n",
                "say",
                "NOPE is not set",
            ),
            (
                "[[case]]\nname = \"a\"\n[[case.turn]]\nsay = \"${GITHUB_TOKEN}\"\n",
                "say",
                "does not declare; add env = [\"GITHUB_TOKEN\"]",
            ),
            (
                "env = [\"2X\"]\n[[case]]\nname = \"a\"\n[[case.turn]]\nsay = \"x\"\n",
                "env",
                "not an environment variable's name",
            ),
            (
                "[[case]]\nname = \"a\"\n[[case.turn]]\nsay = \"x\"\n[[case]]\nname = \"a\"\n[[case.turn]]\nsay = \"y\"\n",
                "name",
                "same name",
            ),
            (
                "[[case]]\nname = \"a\"\n[[case.turn]]\nsay = \"x\"\ntotal_ms = -1\n",
                "total_ms",
                "above 0",
            ),
        ];
        for (text, key, words) in cases {
            let e = error(text);
            assert_eq!(e.key.as_deref(), Some(key), "{e}");
            assert!(e.to_string().contains(words), "{e}");
            assert!(e.to_string().starts_with("bot.test.toml: "), "{e}");
        }
    }

    #[test]
    fn a_file_with_no_case_is_refused() {
        assert!(error("").to_string().contains("no [[case]]"));
    }
}
