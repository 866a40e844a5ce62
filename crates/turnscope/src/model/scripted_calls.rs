//! Which tools the scripted model calls for a line, and with which arguments: a fixed rule, so a
//! demo does what a person expects and a test gets the same calls every time (docs/models.md
//! states it with examples).
//!
//! 1. The line is cut into clauses at the words `and`, `then`, `also` and at `,` `;`; a clause
//!    that names no tool belongs to the one before it (`add 2 and 3` stays one clause).
//! 2. In a clause, a tool is named by its exact name as a word (`echo`, `get_weather`). A clause
//!    naming none may name one by a word of its description's first sentence: a word of five or
//!    more letters that is not a common word ([`COMMON`]); the earliest such word picks the tool
//!    (`what is the weather in Paris` → the tool described as "Get the weather forecast for a
//!    city.").
//! 3. A tool's words run from its name (or description word) to the next tool named in the
//!    clause, or the clause's end. Its required arguments are filled from them: strings get
//!    the words after the name without leading small words such as `in`, `for`, `me` (`echo hi` →
//!    `"hi"`, `weather in Paris` → `"Paris"`; the whole clause when nothing follows), numbers and integers take
//!    the numbers among them in order (1 when none), booleans `true`, enums their first value,
//!    arrays `[]`, objects `{}`.

use serde_json::{Map, Value, json};

/// Words that cut a line into clauses.
const SEPARATOR_WORDS: [&str; 3] = ["and", "then", "also"];

/// Common words a description shares with ordinary lines; they never pick a tool.
const COMMON: [&str; 30] = [
    "about", "after", "again", "always", "answer", "before", "being", "called", "calls", "could",
    "every", "first", "given", "other", "please", "reply", "result", "return", "returns", "should",
    "tells", "their", "there", "these", "thing", "those", "using", "where", "which", "would",
];

/// Small words dropped from the start of a string argument (`weather in Paris` → `Paris`).
const LEADING: [&str; 11] = [
    "about", "at", "for", "in", "is", "me", "of", "on", "please", "to", "with",
];

/// A word of the line: its lower-case text and its byte span.
#[derive(Debug, Clone)]
struct Word {
    lower: String,
    start: usize,
    end: usize,
}

/// The line's words (letters, digits, `_`, `-`, `.` inside a number) with their spans.
fn words(line: &str) -> Vec<Word> {
    let mut out = Vec::new();
    let mut start = None;
    let bytes = line.as_bytes();
    for (i, c) in line.char_indices() {
        let joins_number =
            c == '.' && start.is_some() && bytes.get(i + 1).is_some_and(u8::is_ascii_digit);
        let inside = c.is_alphanumeric() || c == '_' || c == '-' || joins_number;
        match (inside, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                out.push(Word {
                    lower: line[s..i].to_lowercase(),
                    start: s,
                    end: i,
                });
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push(Word {
            lower: line[s..].to_lowercase(),
            start: s,
            end: line.len(),
        });
    }
    out
}

/// The clauses of a line as ranges of its words: cut at separator words and at `,`/`;`
/// between words.
fn clauses(line: &str, words: &[Word]) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut begin = 0;
    for (i, w) in words.iter().enumerate() {
        let punct_before = i > 0 && line[words[i - 1].end..w.start].contains([',', ';']);
        if SEPARATOR_WORDS.contains(&w.lower.as_str()) {
            out.push(begin..i);
            begin = i + 1;
        } else if punct_before {
            out.push(begin..i);
            begin = i;
        }
    }
    out.push(begin..words.len());
    out.retain(|r| !r.is_empty());
    out
}

/// A clause: a range of the line's words.
type Clause = std::ops::Range<usize>;

/// A tool a clause names: (the word naming it, the tool's index).
type Hit = (usize, usize);

/// A tool offered: its name, its words of description, its parameters schema.
struct Offered<'a> {
    name: &'a str,
    lower: String,
    described_by: Vec<String>,
    schema: Value,
}

fn offered(tools: &[Value]) -> Vec<Offered<'_>> {
    tools
        .iter()
        .filter_map(|tool| {
            let name = tool.pointer("/function/name").and_then(Value::as_str)?;
            let description = tool
                .pointer("/function/description")
                .and_then(Value::as_str)
                .unwrap_or("");
            let first = description.split(". ").next().unwrap_or("");
            let described_by = words(first)
                .into_iter()
                .map(|w| w.lower)
                .filter(|w| w.chars().count() >= 5 && !COMMON.contains(&w.as_str()))
                .collect();
            Some(Offered {
                name,
                lower: name.to_lowercase(),
                described_by,
                schema: tool
                    .pointer("/function/parameters")
                    .cloned()
                    .unwrap_or(json!({})),
            })
        })
        .collect()
}

/// The calls for `line`: (tool name, JSON arguments text), in the order the line names them.
pub(crate) fn calls_for(line: &str, tools: &[Value]) -> Vec<(String, String)> {
    let tools = offered(tools);
    if tools.is_empty() {
        return Vec::new();
    }
    let words = words(line);
    // Each clause with the tools it names by name: (word index, tool index).
    let mut named: Vec<(Clause, Vec<Hit>)> = Vec::new();
    for clause in clauses(line, &words) {
        let hits: Vec<(usize, usize)> = clause
            .clone()
            .filter_map(|i| {
                tools
                    .iter()
                    .position(|t| t.lower == words[i].lower)
                    .map(|t| (i, t))
            })
            .collect();
        match named.last_mut() {
            // A clause naming nothing belongs to the tool before it.
            Some((last, last_hits)) if hits.is_empty() && !last_hits.is_empty() => {
                last.end = clause.end;
            }
            _ => named.push((clause, hits)),
        }
    }
    let mut out = Vec::new();
    for (clause, mut hits) in named {
        if hits.is_empty() {
            hits.extend(described(&words, &clause, &tools));
        }
        for (k, &(at, tool)) in hits.iter().enumerate() {
            let end = hits.get(k + 1).map_or(clause.end, |&(next, _)| next);
            let own = &words[at + 1..end];
            let text = own_text(line, own).unwrap_or_else(|| {
                line[words[clause.start].start..words[clause.end - 1].end].to_string()
            });
            let numbers: Vec<f64> = own.iter().filter_map(|w| w.lower.parse().ok()).collect();
            let args = arguments(&tools[tool].schema, &text, &numbers);
            out.push((tools[tool].name.to_string(), args.to_string()));
        }
    }
    out
}

/// The tool a clause names by a word of its description: the earliest such word wins.
fn described(
    words: &[Word],
    clause: &std::ops::Range<usize>,
    tools: &[Offered<'_>],
) -> Option<(usize, usize)> {
    clause.clone().find_map(|i| {
        tools
            .iter()
            .position(|t| t.described_by.contains(&words[i].lower))
            .map(|t| (i, t))
    })
}

/// The text of `own` (a tool's words after its name), without leading small words; `None`
/// when nothing is left.
fn own_text(line: &str, own: &[Word]) -> Option<String> {
    let first = own
        .iter()
        .position(|w| !LEADING.contains(&w.lower.as_str()))?;
    let own = &own[first..];
    Some(line[own[0].start..own[own.len() - 1].end].to_string())
}

/// Arguments filling each required property of `schema` from a tool's words.
fn arguments(schema: &Value, text: &str, numbers: &[f64]) -> Value {
    let mut args = Map::new();
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let props = schema.get("properties").and_then(Value::as_object);
    let mut next_number = numbers.iter().copied();
    for name in required {
        let prop = props
            .and_then(|p| p.get(name))
            .cloned()
            .unwrap_or(json!({}));
        let ty = match prop.get("type") {
            Some(Value::String(t)) => t.clone(),
            Some(Value::Array(ts)) => ts
                .iter()
                .filter_map(Value::as_str)
                .find(|t| *t != "null")
                .unwrap_or("string")
                .to_string(),
            _ => "string".to_string(),
        };
        let value = if let Some(options) = prop.get("enum").and_then(Value::as_array) {
            options.first().cloned().unwrap_or(Value::Null)
        } else {
            match ty.as_str() {
                "integer" => json!(next_number.next().map(|n| n as i64).unwrap_or(1)),
                "number" => json!(next_number.next().unwrap_or(1.0)),
                "boolean" => json!(true),
                "array" => json!([]),
                "object" => json!({}),
                _ => json!(text),
            }
        };
        args.insert(name.to_string(), value);
    }
    Value::Object(args)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, description: &str, schema: Value) -> Value {
        json!({"type": "function", "function": {"name": name, "description": description, "parameters": schema}})
    }

    fn text_tool(name: &str, description: &str, field: &str) -> Value {
        tool(
            name,
            description,
            json!({"type": "object", "properties": {field: {"type": "string"}}, "required": [field]}),
        )
    }

    fn builtins() -> Vec<Value> {
        vec![
            tool(
                "clock",
                "Tells the current date and time in UTC.",
                json!({"type": "object", "properties": {}}),
            ),
            text_tool("echo", "Repeats the given text back.", "text"),
            tool(
                "end_session",
                "Ends this conversation for good. Call it when the user says goodbye or asks to stop, then say goodbye in the same reply.",
                json!({"type": "object", "properties": {"reason": {"type": "string"}}}),
            ),
            text_tool(
                "get_forecast",
                "Get the weather forecast for a city. Answers in degrees.",
                "city",
            ),
            tool(
                "add",
                "Add two numbers and return the sum as text.",
                json!({"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}),
            ),
        ]
    }

    fn calls(line: &str) -> Vec<(String, String)> {
        calls_for(line, &builtins())
    }

    fn call(name: &str, args: &str) -> (String, String) {
        (name.to_string(), args.to_string())
    }

    /// The examples docs/models.md gives, one by one.
    #[test]
    fn the_documented_examples() {
        assert_eq!(
            calls("echo hi and tell me the clock"),
            [call("echo", r#"{"text":"hi"}"#), call("clock", "{}")]
        );
        assert_eq!(
            calls("what is the weather in Paris"),
            [call("get_forecast", r#"{"city":"Paris"}"#)]
        );
        assert_eq!(
            calls("please add 2 and 3.5 then clock"),
            [call("add", r#"{"a":2.0,"b":3.5}"#), call("clock", "{}")]
        );
        assert_eq!(
            calls("echo good morning, echo good night"),
            [
                call("echo", r#"{"text":"good morning"}"#),
                call("echo", r#"{"text":"good night"}"#)
            ]
        );
        assert_eq!(calls("echo"), [call("echo", r#"{"text":"echo"}"#)]);
        assert_eq!(
            calls("thanks for the conversation"),
            [call("end_session", "{}")]
        );
        assert_eq!(calls("thanks, end_session"), [call("end_session", "{}")]);
        assert_eq!(
            calls("what does the clock say and echo hi"),
            [call("clock", "{}"), call("echo", r#"{"text":"hi"}"#)]
        );
        assert_eq!(
            calls("echo: good morning"),
            [call("echo", r#"{"text":"good morning"}"#)]
        );
    }

    #[test]
    fn ordinary_lines_call_nothing() {
        for line in [
            "hello there",
            "my name is Ada",
            "what time is it",
            "tell me about your opening hours, in detail please",
            "one two three",
            "back on the same handle",
            "a good answer please",
            "what did I say?",
            "",
        ] {
            assert_eq!(calls(line), [], "{line:?}");
        }
    }

    #[test]
    fn no_tools_offered_no_calls() {
        assert_eq!(calls_for("echo hi", &[]), []);
    }
}
