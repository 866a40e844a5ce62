//! Writing a test file: a conversation that happened (its lines, replies, tool calls and end
//! reasons) as a case whose expectations are those facts, rendered as TOML for the user to
//! edit. The console's export key uses it; [`super::load::parse`] reads the result back.

use serde_json::{Map, Value};

use super::{Case, TestFile, ToolExpect, ToolsMatch, Turn};

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
/// no error unless the turn ended in one.
pub fn case_from_turns(name: &str, turns: &[RecordedTurn]) -> Case {
    Case {
        name: name.to_string(),
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
            name: name.clone(),
            args: match serde_json::from_str::<Value>(args) {
                // Nulls have no TOML form: a key whose value was null is left out.
                Ok(Value::Object(map)) => Some(without_nulls(map)),
                _ => None,
            },
        })
        .collect();
    let errored = t.end_reason.as_deref() == Some("error");
    Turn {
        say: Some(t.line.clone()),
        reply_contains: if reply.is_empty() {
            Vec::new()
        } else {
            vec![reply.to_string()]
        },
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
    let recorded = RecordedTurn {
        line: last.clone(),
        reply: if tool_calls.is_empty() {
            answer.to_string()
        } else {
            String::new()
        },
        tool_calls: tool_calls.to_vec(),
        end_reason: None,
    };
    let mut turn = turn_of(&recorded);
    if !tool_calls.is_empty() {
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

fn without_nulls(map: Map<String, Value>) -> Map<String, Value> {
    map.into_iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| match v {
            Value::Object(inner) => (k, Value::Object(without_nulls(inner))),
            other => (k, other),
        })
        .collect()
}

/// `file` as TOML, headed by a comment saying where it came from and how to run it.
///
/// # Errors
/// A value TOML cannot hold (a `null` inside a list of tool arguments).
pub fn render(file: &TestFile, origin: &str) -> Result<String, String> {
    let body = toml::to_string_pretty(file)
        .map_err(|e| format!("the test case cannot be written as TOML: {e}"))?;
    Ok(format!(
        "# {origin}\n# Edit the expectations, then run: turnscope test FILE\n\n{body}"
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
        let text = render(&TestFile { cases: vec![asked] }, "a variant").unwrap();
        assert!(
            super::super::parse(&text, "v.test.toml", &|_| None).is_ok(),
            "{text}"
        );
        assert!(case_from_request("x", &messages[..1], "", &[]).is_err());
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
        ];
        let file = TestFile {
            cases: vec![case_from_turns("session 3", &turns)],
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
    }
}
