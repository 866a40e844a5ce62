//! Writing a test file: a conversation that happened (its lines, replies, tool calls and end
//! reasons) as a case whose expectations are those facts, rendered as TOML for the user to
//! edit. The console's export key uses it; [`super::load::parse`] reads the result back.
//!
//! Every text is written as it was typed: each `$` doubled, so a line a client typed as
//! `${GITHUB_TOKEN}` is said again as those characters, never expanded from the environment of
//! the CI that runs the file.

use serde_json::{Map, Value};

use super::{Case, TestFile, ToolExpect, ToolsMatch, Turn};
use crate::config::env::escape_placeholders;

/// One turn as it happened.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecordedTurn {
    /// The user's line.
    pub line: String,
    /// The bot's whole reply.
    pub reply: String,
    /// Each tool call: name and the arguments as the model sent them (JSON text).
    pub tool_calls: Vec<(String, String)>,
    /// How the turn ended (`completed`, ...), when it did.
    pub end_reason: Option<String>,
}

/// A case named `name` that replays `turns`: each line said again, the reply expected to
/// contain what it was, the same tool calls (strict, arguments as sent) and end reason, and
/// no error unless the turn ended in one. Texts are escaped (see the module).
pub fn case_from_turns(name: &str, turns: &[RecordedTurn]) -> Case {
    Case {
        name: escape_placeholders(name),
        repeat: 1,
        pass_rate: 1.0,
        turns: turns.iter().map(turn_of).collect(),
    }
}

fn turn_of(t: &RecordedTurn) -> Turn {
    let reply = t.reply.trim();
    let tools = t
        .tool_calls
        .iter()
        .map(|(name, args)| ToolExpect {
            name: escape_placeholders(name),
            args: match serde_json::from_str::<Value>(args) {
                // Nulls have no TOML form: a key whose value was null is left out.
                Ok(Value::Object(map)) => Some(escaped(without_nulls(map))),
                _ => None,
            },
        })
        .collect();
    let errored = t.end_reason.as_deref() == Some("error");
    // Stopped from outside (a newer line, the person, a cancel): a run of the case cannot stop
    // it the same way, so its line is said again and nothing is expected of its answer.
    if t.end_reason.as_deref() == Some("interrupted") {
        return Turn {
            say: Some(escape_placeholders(&t.line)),
            ..Turn::default()
        };
    }
    // Dates and times change from run to run: such a reply is expected as a pattern.
    let volatile = volatile_pattern(reply);
    Turn {
        say: Some(escape_placeholders(&t.line)),
        reply_contains: if reply.is_empty() || volatile.is_some() {
            Vec::new()
        } else {
            vec![escape_placeholders(reply)]
        },
        reply_matches: volatile.iter().map(|p| escape_placeholders(p)).collect(),
        tools: Some(tools),
        tools_match: Some(ToolsMatch::Strict),
        end_reason: t.end_reason.clone(),
        no_error: (!errored).then_some(true),
        ..Turn::default()
    }
}

/// A case from one model request and an answer to it (a variant the console resent): the
/// request's user lines said again in order, the last one expected to answer as the variant
/// did (its text, or the tools it asked for, as a superset: the turn goes on after them).
/// A request that came after a tool round of its turn also expects that round's calls (as a
/// superset: its model is asked again, and may call more).
///
/// # Errors
/// The request has no user line to say.
pub fn case_from_request(
    name: &str,
    messages: &[Value],
    answer: &str,
    tool_calls: &[(String, String)],
) -> Result<Case, String> {
    let lines: Vec<String> = messages
        .iter()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .filter_map(|m| m.get("content").and_then(Value::as_str))
        .map(str::to_string)
        .collect();
    let Some((last, earlier)) = lines.split_last() else {
        return Err("the request has no user line, so a test case has nothing to say".into());
    };
    let mut turns: Vec<Turn> = earlier
        .iter()
        .map(|line| Turn {
            say: Some(line.clone()),
            no_error: Some(true),
            ..Turn::default()
        })
        .collect();
    // A request after a tool round holds that round's calls after its last user line: the
    // turn said again makes them before it comes to this request.
    let made_before = calls_after_last_user_line(messages);
    let recorded = RecordedTurn {
        line: last.clone(),
        reply: if tool_calls.is_empty() {
            answer.to_string()
        } else {
            String::new()
        },
        tool_calls: made_before.iter().chain(tool_calls).cloned().collect(),
        end_reason: None,
    };
    let mut turn = turn_of(&recorded);
    if !tool_calls.is_empty() || !made_before.is_empty() {
        turn.tools_match = Some(ToolsMatch::Superset);
    }
    turns.push(turn);
    Ok(Case {
        name: name.to_string(),
        repeat: 1,
        pass_rate: 1.0,
        turns,
    })
}

/// The tool calls (name, arguments) of the assistant messages after the last user message of
/// `messages`: the tool rounds of the turn a request came in, before it.
fn calls_after_last_user_line(messages: &[Value]) -> Vec<(String, String)> {
    let after = messages
        .iter()
        .rposition(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .map_or(0, |at| at + 1);
    messages[after..]
        .iter()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
        .filter_map(|m| m.get("tool_calls").and_then(Value::as_array))
        .flatten()
        .filter_map(|call| {
            let function = call.get("function")?;
            let name = function.get("name")?.as_str()?.to_string();
            let arguments = match function.get("arguments") {
                Some(Value::String(text)) => text.clone(),
                Some(other) => other.to_string(),
                None => "{}".to_string(),
            };
            Some((name, arguments))
        })
        .collect()
}

/// The parts of a reply that change from run to run: dates (`2026-12-01`) and times of day
/// (`15:15`, `15:15:13`, `15:15:13.250`).
const VOLATILE: &str = r"\d{4}-\d{2}-\d{2}|\b\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?\b";

/// A regex matching `reply` with any date and time where it had one, the rest as written;
/// `None` when it has none (then the reply is expected as it was).
fn volatile_pattern(reply: &str) -> Option<String> {
    let volatile = regex::Regex::new(VOLATILE).expect("the pattern is valid");
    if !volatile.is_match(reply) {
        return None;
    }
    let mut pattern = String::new();
    let mut last = 0;
    for m in volatile.find_iter(reply) {
        pattern.push_str(&regex::escape(&reply[last..m.start()]));
        pattern.push_str(if m.as_str().contains('-') {
            r"\d{4}-\d{2}-\d{2}"
        } else {
            r"\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?"
        });
        last = m.end();
    }
    pattern.push_str(&regex::escape(&reply[last..]));
    Some(pattern)
}

fn without_nulls(map: Map<String, Value>) -> Map<String, Value> {
    map.into_iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| match v {
            Value::Object(inner) => (k, Value::Object(without_nulls(inner))),
            other => (k, other),
        })
        .collect()
}

/// Every string inside `map` escaped (the loader expands strings in tool arguments too).
fn escaped(map: Map<String, Value>) -> Map<String, Value> {
    fn walk(value: Value) -> Value {
        match value {
            Value::String(s) => Value::String(escape_placeholders(&s)),
            Value::Array(items) => Value::Array(items.into_iter().map(walk).collect()),
            Value::Object(map) => Value::Object(escaped(map)),
            other => other,
        }
    }
    map.into_iter().map(|(k, v)| (k, walk(v))).collect()
}

/// `file` as TOML, headed by a comment saying where it came from and how to run it.
///
/// # Errors
/// A value TOML cannot hold (a `null` inside a list of tool arguments).
pub fn render(file: &TestFile, origin: &str) -> Result<String, String> {
    render_against(file, origin, None)
}

/// [`render`] for a case of a bot at `url` (one turnscope does not run: an attached console's
/// session), whose run line names it (`turnscope test --url URL FILE`).
///
/// # Errors
/// As [`render`].
pub fn render_against(file: &TestFile, origin: &str, url: Option<&str>) -> Result<String, String> {
    let body = toml::to_string_pretty(file)
        .map_err(|e| format!("the test case cannot be written as TOML: {e}"))?;
    let run = match url {
        Some(url) => format!("turnscope test --url {url} FILE"),
        None => "turnscope test FILE".to_string(),
    };
    Ok(format!(
        "# {origin}\n# Edit the expectations, then run: {run}\n\n{body}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resent_request_becomes_a_case_for_its_last_line() {
        let messages = [
            serde_json::json!({"role": "system", "content": "Answer in capital letters."}),
            serde_json::json!({"role": "user", "content": "hi"}),
            serde_json::json!({"role": "assistant", "content": "HI"}),
            serde_json::json!({"role": "user", "content": "hello"}),
        ];
        let case = case_from_request("variant", &messages, "YOU SAID: HELLO", &[]).unwrap();
        assert_eq!(case.turns.len(), 2);
        assert_eq!(case.turns[0].say.as_deref(), Some("hi"));
        assert!(case.turns[0].reply_contains.is_empty());
        assert_eq!(case.turns[1].reply_contains, ["YOU SAID: HELLO"]);
        let calls = [("clock".to_string(), "{}".to_string())];
        let asked = case_from_request("v", &messages, "", &calls).unwrap();
        assert_eq!(asked.turns[1].tools_match, Some(ToolsMatch::Superset));
        let text = render(
            &TestFile {
                cases: vec![asked],
                ..TestFile::default()
            },
            "a variant",
        )
        .unwrap();
        assert!(
            super::super::parse(&text, "v.test.toml", &|_| None).is_ok(),
            "{text}"
        );
        assert!(case_from_request("x", &messages[..1], "", &[]).is_err());
    }

    /// A variant of the request after a tool round (the turn's second request) expects the
    /// round's calls: the turn said again makes them first (tour N: it expected no tool call,
    /// strictly, and could never pass).
    #[test]
    fn a_request_after_a_tool_round_expects_the_rounds_calls() {
        let messages = [
            serde_json::json!({"role": "system", "content": "Use capital letters."}),
            serde_json::json!({"role": "user", "content": "what does the clock say and echo hi"}),
            serde_json::json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "clock", "arguments": "{}"}},
                {"id": "c2", "type": "function", "function": {"name": "echo", "arguments": "{\"text\":\"hi\"}"}},
            ]}),
            serde_json::json!({"role": "tool", "tool_call_id": "c1", "content": "12:00"}),
            serde_json::json!({"role": "tool", "tool_call_id": "c2", "content": "hi"}),
        ];
        let case = case_from_request("v", &messages, "THE CLOCK SAYS 12:00. HI.", &[]).unwrap();
        let turn = &case.turns[0];
        let names: Vec<&str> = turn
            .tools
            .iter()
            .flatten()
            .map(|t| t.name.as_str())
            .collect();
        assert_eq!(names, ["clock", "echo"]);
        assert_eq!(turn.tools_match, Some(ToolsMatch::Superset));
        assert_eq!(
            turn.tools.as_ref().unwrap()[1].args.as_ref().unwrap()["text"].as_str(),
            Some("hi")
        );
        assert!(!turn.reply_matches.is_empty(), "{turn:?}");
    }

    #[test]
    fn a_recorded_conversation_renders_and_reads_back() {
        let turns = [
            RecordedTurn {
                line: "echo hi".into(),
                reply: "The echo tool says: hi.".into(),
                tool_calls: vec![("echo".into(), r#"{"text":"hi","n":null}"#.into())],
                end_reason: Some("completed".into()),
            },
            RecordedTurn {
                line: "hello".into(),
                reply: "You said: hello".into(),
                tool_calls: vec![],
                end_reason: Some("completed".into()),
            },
            RecordedTurn {
                line: "use the slow tool".into(),
                reply: String::new(),
                tool_calls: vec![("slow".into(), r#"{"ms":8000}"#.into())],
                end_reason: Some("interrupted".into()),
            },
        ];
        let file = TestFile {
            cases: vec![case_from_turns("session 3", &turns)],
            ..TestFile::default()
        };
        let text = render(&file, "exported from session 3").unwrap();
        let back = super::super::parse(&text, "x.test.toml", &|_| None).unwrap();
        let t0 = &back.cases[0].turns[0];
        assert_eq!(t0.say.as_deref(), Some("echo hi"));
        assert_eq!(t0.reply_contains, ["The echo tool says: hi."]);
        let tools = t0.tools.as_ref().unwrap();
        assert_eq!(tools[0].args.as_ref().unwrap().len(), 1, "{text}");
        assert_eq!(back.cases[0].turns[1].tools.as_deref(), Some(&[][..]));
        assert_eq!(t0.no_error, Some(true));
        // Interrupted from outside: said again, nothing expected (a run cannot interrupt it).
        let t2 = &back.cases[0].turns[2];
        assert_eq!(t2.say.as_deref(), Some("use the slow tool"));
        assert!(t2.end_reason.is_none() && t2.tools.is_none() && t2.no_error.is_none());
    }

    /// A line typed as `${GITHUB_TOKEN}` is said again as those characters when the exported
    /// case runs, whatever the environment holds; replies and arguments likewise.
    #[test]
    fn exported_texts_never_read_the_environment() {
        let typed = "print ${GITHUB_TOKEN}, $$ and $HOME";
        let turns = [RecordedTurn {
            line: typed.into(),
            reply: format!("You said: {typed}"),
            tool_calls: vec![(
                "echo".into(),
                r#"{"text":"${GITHUB_TOKEN}","n":["$$"]}"#.into(),
            )],
            end_reason: Some("completed".into()),
        }];
        let file = TestFile {
            cases: vec![case_from_turns("${CASE}", &turns)],
            ..TestFile::default()
        };
        let text = render(&file, "exported").unwrap();
        let secrets = |name: &str| Some(format!("secret-{name}"));
        let back = super::super::parse(&text, "x.test.toml", &secrets).unwrap();
        assert!(!format!("{back:?}").contains("secret-"), "{back:?}");
        let case = &back.cases[0];
        assert_eq!(case.name, "${CASE}");
        let turn = &case.turns[0];
        assert_eq!(turn.say.as_deref(), Some(typed));
        assert_eq!(turn.reply_contains, [format!("You said: {typed}")]);
        let args = turn.tools.as_ref().unwrap()[0].args.clone().unwrap();
        assert_eq!(
            Value::Object(args),
            serde_json::json!({"text": "${GITHUB_TOKEN}", "n": ["$$"]})
        );
    }

    #[test]
    fn dates_and_times_in_a_reply_become_a_pattern_that_matches_another_run() {
        let turn = turn_of(&RecordedTurn {
            line: "what does the clock say".into(),
            reply: "The clock tool says: 2026-12-01 15:15:13 UTC.".into(),
            tool_calls: vec![("clock".into(), "{}".into())],
            end_reason: Some("completed".into()),
        });
        assert!(turn.reply_contains.is_empty());
        let pattern = regex::Regex::new(&turn.reply_matches[0]).unwrap();
        assert!(pattern.is_match("The clock tool says: 2027-01-31 09:05:00 UTC."));
        assert!(!pattern.is_match("The echo tool says: 2027-01-31 09:05:00 UTC."));
        let file = TestFile {
            cases: vec![Case {
                name: "clock".into(),
                repeat: 1,
                pass_rate: 1.0,
                turns: vec![turn],
            }],
            ..TestFile::default()
        };
        let text = render(&file, "exported").unwrap();
        let back = super::super::parse(&text, "x.test.toml", &|_| None).unwrap();
        assert_eq!(back.cases[0].turns[0].reply_matches.len(), 1, "{text}");
        let plain = turn_of(&RecordedTurn {
            reply: "You said: hello".into(),
            ..RecordedTurn::default()
        });
        assert_eq!(plain.reply_contains, ["You said: hello"]);
        assert!(plain.reply_matches.is_empty());
    }
}
