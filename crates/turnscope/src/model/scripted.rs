//! The embedded scripted model's behaviour: a deterministic answer for a conversation, so tests
//! and benches need no real model. [`answer`] states the rules, in order.

use serde_json::Value;

use super::scripted_calls::calls_for;

/// How the scripted model streams.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptSettings {
    /// Seconds between streamed words (0.03 paces it like a typical stub model).
    pub pace: f64,
    /// Exact number of words in a text answer, the one after a tool round too (`None` = as
    /// the rule builds it).
    pub words: Option<usize>,
}

impl Default for ScriptSettings {
    fn default() -> Self {
        Self {
            pace: 0.03,
            words: None,
        }
    }
}

/// What the model answers.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// Text, streamed as pieces (each piece carries its own leading space).
    Text(Vec<String>),
    /// One round of function calls: (tool name, JSON arguments text).
    Calls(Vec<(String, String)>),
}

const FILLER: [&str; 8] = ["and", "that", "is", "all", "I", "have", "for", "now"];

/// Decides the answer to `messages` (OpenAI message objects) given the offered `tools`
/// (OpenAI `tools` array entries).
///
/// Rules, in order:
/// 1. the last message is a tool result → a sentence built from the results
///    ("The clock tool says: ..."), each named by the call it answers in the latest round
///    (call ids repeat across rounds); after `end_session`, a goodbye;
/// 2. tools are offered and the user's line names one or more of them → one round calling each,
///    with arguments built from the words that belong to it (the rule:
///    [`super::scripted_calls`]);
/// 3. the line asks "what did I say" → the previous user line;
/// 4. otherwise → "You said: <line>", cut or padded to `words` words when set.
///
/// A system prompt asking for capitals ("capital letters", "uppercase") makes every text answer
/// upper-case: a prompt that changes the answer, for trying edited prompts (the console's
/// edit-and-resend) against the embedded model.
pub fn answer(messages: &[Value], tools: &[Value], settings: &ScriptSettings) -> Answer {
    match plain_answer(messages, tools, settings) {
        Answer::Text(pieces) if wants_capitals(messages) => {
            Answer::Text(pieces.iter().map(|p| p.to_uppercase()).collect())
        }
        other => other,
    }
}

/// Whether a system message asks for answers in capitals.
fn wants_capitals(messages: &[Value]) -> bool {
    messages
        .iter()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("system"))
        .map(|m| content_text(m).to_lowercase())
        .any(|t| {
            t.contains("capital letters") || t.contains("uppercase") || t.contains("in capitals")
        })
}

fn plain_answer(messages: &[Value], tools: &[Value], settings: &ScriptSettings) -> Answer {
    let last = messages.last();
    let role = last
        .and_then(|m| m.get("role"))
        .and_then(Value::as_str)
        .unwrap_or("");
    if role == "tool" {
        return Answer::Text(pieces(&tool_summary(messages), settings.words));
    }
    let line = last.map(content_text).unwrap_or_default();
    let calls = calls_for(&line, tools);
    if !calls.is_empty() {
        return Answer::Calls(calls);
    }
    let lower = line.to_lowercase();
    let sentence = if lower.contains("what did i say") {
        match previous_user_line(messages) {
            Some(prev) => format!("Earlier you said: {prev}"),
            None => "You have not said anything before this.".to_string(),
        }
    } else if line.trim().is_empty() {
        "I am listening.".to_string()
    } else {
        format!("You said: {}", line.trim())
    };
    Answer::Text(pieces(&sentence, settings.words))
}

/// The id of call `i` of the round answering `messages`: `call_<turn>_<round>_<i>`, the turn
/// counting user messages and the round the tool-call rounds since the last one (from 1). Ids
/// are distinct across turns and rounds, and the same for the same conversation.
pub fn call_id(messages: &[Value], i: usize) -> String {
    let role = |m: &Value| m.get("role").and_then(Value::as_str).map(str::to_string);
    let turn = messages
        .iter()
        .filter(|m| role(m).as_deref() == Some("user"))
        .count();
    let round = 1 + messages
        .iter()
        .rev()
        .take_while(|m| role(m).as_deref() != Some("user"))
        .filter(|m| m.get("tool_calls").is_some_and(|c| !c.is_null()))
        .count();
    format!("call_{turn}_{round}_{i}")
}

/// The scripted model's token count of a prompt: one token per whitespace-separated word of
/// every message's text, tool-call names and arguments, and one per word of the tools offered
/// (their names, descriptions and schemas' keys and strings): a real server's prompt holds the
/// tools too. Not a real tokenizer: an honest count of what it received, so usage figures
/// move with the prompt.
pub fn prompt_tokens(messages: &[Value], tools: &[Value]) -> u64 {
    tools.iter().map(json_words).sum::<u64>() + messages_tokens(messages)
}

/// The words of a JSON value's keys and strings, split at anything but letters, digits, `_`
/// and `-` (a schema's `"type":"object"` is two).
fn json_words(value: &Value) -> u64 {
    fn split_words(text: &str) -> u64 {
        text.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
            .filter(|w| !w.is_empty())
            .count() as u64
    }
    match value {
        Value::String(text) => split_words(text),
        Value::Array(items) => items.iter().map(json_words).sum(),
        Value::Object(map) => map
            .iter()
            .map(|(key, value)| split_words(key) + json_words(value))
            .sum(),
        Value::Number(_) | Value::Bool(_) => 1,
        Value::Null => 0,
    }
}

/// [`prompt_tokens`] of the messages alone.
fn messages_tokens(messages: &[Value]) -> u64 {
    messages
        .iter()
        .map(|m| {
            let calls: u64 = m
                .get("tool_calls")
                .and_then(Value::as_array)
                .map(|calls| {
                    calls
                        .iter()
                        .map(|c| {
                            ["/function/name", "/function/arguments"]
                                .iter()
                                .filter_map(|p| c.pointer(p).and_then(Value::as_str))
                                .map(words)
                                .sum::<u64>()
                        })
                        .sum()
                })
                .unwrap_or(0);
            words(&content_text(m)) + calls
        })
        .sum()
}

/// The scripted model's token count of an answer, counted as [`prompt_tokens`] counts: a
/// streamed piece is one word, a call its name's and arguments' words.
pub fn answer_tokens(answer: &Answer) -> u64 {
    match answer {
        Answer::Text(pieces) => pieces.len() as u64,
        Answer::Calls(calls) => calls.iter().map(|(n, a)| words(n) + words(a)).sum(),
    }
}

fn words(text: &str) -> u64 {
    text.split_whitespace().count() as u64
}

/// Splits a sentence into streamed pieces, cut or padded to `words` words.
fn pieces(sentence: &str, words: Option<usize>) -> Vec<String> {
    let mut list: Vec<&str> = sentence.split_whitespace().collect();
    if let Some(n) = words {
        list.truncate(n);
        let mut i = 0;
        while list.len() < n {
            list.push(FILLER[i % FILLER.len()]);
            i += 1;
        }
    }
    list.iter()
        .enumerate()
        .map(|(i, w)| {
            if i == 0 {
                (*w).to_string()
            } else {
                format!(" {w}")
            }
        })
        .collect()
}

fn content_text(message: &Value) -> String {
    match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

fn previous_user_line(messages: &[Value]) -> Option<String> {
    messages
        .iter()
        .rev()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .nth(1)
        .map(content_text)
}

/// The built-in that ends the conversation; its result asks for a goodbye.
const END_SESSION: &str = "end_session";

/// "The clock tool says: ..." for the trailing tool messages; "Goodbye." after `end_session`.
fn tool_summary(messages: &[Value]) -> String {
    let results: Vec<&Value> = messages
        .iter()
        .rev()
        .take_while(|m| m.get("role").and_then(Value::as_str) == Some("tool"))
        .collect();
    // Ids are distinct per round here (`call_id`), but a client may reuse its own (`call_0`
    // in every round): the latest round that made the call wins.
    let name_of = |id: &str| -> String {
        messages
            .iter()
            .rev()
            .filter_map(|m| m.get("tool_calls").and_then(Value::as_array))
            .flatten()
            .find(|c| c.get("id").and_then(Value::as_str) == Some(id))
            .and_then(|c| c.pointer("/function/name").and_then(Value::as_str))
            .unwrap_or("tool")
            .to_string()
    };
    let mut goodbye = false;
    let mut parts: Vec<String> = results
        .iter()
        .rev()
        .filter_map(|m| {
            let id = m.get("tool_call_id").and_then(Value::as_str).unwrap_or("");
            let name = name_of(id);
            if name == END_SESSION {
                goodbye = true;
                return None;
            }
            let text = content_text(m);
            Some(format!(
                "The {name} tool says: {}.",
                text.trim().trim_end_matches('.')
            ))
        })
        .collect();
    if goodbye {
        parts.push("Goodbye.".to_string());
    }
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn user(text: &str) -> Value {
        json!({"role": "user", "content": text})
    }

    fn tool(name: &str, schema: Value) -> Value {
        json!({"type": "function", "function": {"name": name, "description": "", "parameters": schema}})
    }

    /// The tools offered count in the prompt, as a real server's prompt holds them: the wire
    /// inspector's "tools not in the prompt?" check does not take the scripted model for a
    /// server that left them out (tour N: every request to it was marked).
    #[test]
    fn the_tools_offered_count_in_the_prompt() {
        let tools: Vec<Value> = (0..15)
            .map(|n| {
                json!({"type": "function", "function": {"name": format!("tool_{n}"),
                "description": "Returns the value of the named thing, as servers describe them",
                "parameters": {"type": "object", "properties": {"name": {"type": "string",
                "description": "which one"}}, "required": ["name"]}}})
            })
            .collect();
        let messages = [user("what time is it")];
        let alone = prompt_tokens(&messages, &[]);
        let with_tools = prompt_tokens(&messages, &tools);
        assert_eq!(alone, 4);
        assert!(with_tools > alone + 15 * 10, "{with_tools}");
        let offered = crate::observe::rebuild::WholeRequest {
            tools_bytes: serde_json::to_string(&tools).unwrap().len(),
            ..Default::default()
        };
        assert!(!offered.tools_left_out(with_tools, false));
        assert!(
            offered.tools_left_out(alone, false),
            "the check itself still fires"
        );
    }

    #[test]
    fn plain_answer_is_deterministic_and_can_be_sized() {
        let s = ScriptSettings {
            pace: 0.0,
            words: None,
        };
        assert_eq!(
            answer(&[user("hello there")], &[], &s),
            Answer::Text(vec![
                "You".into(),
                " said:".into(),
                " hello".into(),
                " there".into()
            ])
        );
        let seven = ScriptSettings {
            pace: 0.0,
            words: Some(7),
        };
        match answer(&[user("hi")], &[], &seven) {
            Answer::Text(p) => assert_eq!(p.concat(), "You said: hi and that is all"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_system_prompt_asking_for_capitals_changes_the_answer() {
        let s = ScriptSettings::default();
        let system = |text: &str| json!({"role": "system", "content": text});
        let plain = [system("You are a helpful assistant."), user("hello")];
        let loud = [system("Answer in capital letters."), user("hello")];
        let text = |a: Answer| match a {
            Answer::Text(p) => p.concat(),
            other => panic!("{other:?}"),
        };
        assert_eq!(text(answer(&plain, &[], &s)), "You said: hello");
        assert_eq!(text(answer(&loud, &[], &s)), "YOU SAID: HELLO");
    }

    #[test]
    fn a_line_naming_tools_calls_each_with_filled_arguments() {
        let tools = [
            tool(
                "echo",
                json!({"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}),
            ),
            tool(
                "add",
                json!({"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}),
            ),
            tool("clock", json!({"type":"object","properties":{}})),
        ];
        let s = ScriptSettings::default();
        assert_eq!(
            answer(&[user("please add 2 and 3.5 then clock")], &tools, &s),
            Answer::Calls(vec![
                ("add".into(), r#"{"a":2.0,"b":3.5}"#.into()),
                ("clock".into(), "{}".into())
            ])
        );
        assert_eq!(
            answer(&[user("echo: good morning")], &tools, &s),
            Answer::Calls(vec![("echo".into(), r#"{"text":"good morning"}"#.into())])
        );
    }

    #[test]
    fn tool_results_become_a_sentence_and_history_is_read() {
        let msgs = [
            user("clock"),
            json!({"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"clock","arguments":"{}"}}]}),
            json!({"role":"tool","tool_call_id":"c1","content":"noon"}),
        ];
        match answer(&msgs, &[], &ScriptSettings::default()) {
            Answer::Text(p) => assert_eq!(p.concat(), "The clock tool says: noon."),
            other => panic!("{other:?}"),
        }
        let later = [
            user("clock"),
            json!({"role":"assistant","content":null,"tool_calls":[{"id":"call_0","type":"function","function":{"name":"clock","arguments":"{}"}}]}),
            json!({"role":"tool","tool_call_id":"call_0","content":"noon"}),
            json!({"role":"assistant","content":"The clock tool says: noon."}),
            user("echo this"),
            json!({"role":"assistant","content":null,"tool_calls":[{"id":"call_0","type":"function","function":{"name":"echo","arguments":"{}"}}]}),
            json!({"role":"tool","tool_call_id":"call_0","content":"this"}),
        ];
        match answer(&later, &[], &ScriptSettings::default()) {
            Answer::Text(p) => assert_eq!(p.concat(), "The echo tool says: this."),
            other => panic!("{other:?}"),
        }
        let bye = [
            user("bye, end_session"),
            json!({"role":"assistant","content":null,"tool_calls":[{"id":"call_0","type":"function","function":{"name":"end_session","arguments":"{}"}}]}),
            json!({"role":"tool","tool_call_id":"call_0","content":"The conversation ends after this reply. Say goodbye."}),
        ];
        match answer(&bye, &[], &ScriptSettings::default()) {
            Answer::Text(p) => assert_eq!(p.concat(), "Goodbye."),
            other => panic!("{other:?}"),
        }
        let history = [
            user("we open at nine"),
            json!({"role":"assistant","content":"ok"}),
            user("what did I say?"),
        ];
        match answer(&history, &[], &ScriptSettings::default()) {
            Answer::Text(p) => assert_eq!(p.concat(), "Earlier you said: we open at nine"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn call_ids_are_distinct_per_turn_and_round_and_repeatable() {
        let round = |id: &str| json!({"role":"assistant","content":null,"tool_calls":[{"id":id,"type":"function","function":{"name":"clock","arguments":"{}"}}]});
        let result = |id: &str| json!({"role":"tool","tool_call_id":id,"content":"noon"});
        let first = [user("clock")];
        assert_eq!(call_id(&first, 0), "call_1_1_0");
        assert_eq!(call_id(&first, 1), "call_1_1_1");
        let second_round = [user("clock"), round("call_1_1_0"), result("call_1_1_0")];
        assert_eq!(call_id(&second_round, 0), "call_1_2_0");
        let next_turn = [
            user("clock"),
            round("call_1_1_0"),
            result("call_1_1_0"),
            json!({"role":"assistant","content":"The clock tool says: noon."}),
            user("clock again"),
        ];
        assert_eq!(call_id(&next_turn, 0), "call_2_1_0");
        assert_eq!(call_id(&next_turn, 0), call_id(&next_turn, 0));
    }
}
