//! A tool called by a person rather than the model: the console's hand-call form and
//! `turnscope tools call`. The call takes the bot's own path ([`call_timed`] over the tool set's
//! `call_in`: the registry's routing, policy, response cap and the bot's tool timeout), after
//! two checks the model's calls do not get: the tool must exist, and the arguments must pass
//! its input schema ([`ArgsCheck`]), each failure naming the field and the rule. The result
//! keeps everything a person wants to see: the content blocks, `structuredContent`,
//! `isError`, its size and the time taken.

use std::fmt;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::timed::call_timed;
use super::validate::{ArgError, ArgsCheck};
use super::{CallContext, ToolOutcome, ToolSpec, Tools};
use crate::json::json_kind;
use crate::observe::event::{carried, now_us};
use crate::observe::{Bus, Event, ToolCallEvent};

/// Why a hand call was not made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No tool of that name is offered.
    UnknownTool {
        /// The name asked for.
        name: String,
        /// The names offered.
        known: Vec<String>,
    },
    /// The arguments are not a JSON object.
    NotAnObject {
        /// What they are instead (`an array`, `a string`, …).
        found: &'static str,
    },
    /// The arguments break the tool's input schema.
    Schema {
        /// The tool.
        tool: String,
        /// Each field and rule broken.
        errors: Vec<ArgError>,
        /// Arguments given that the schema's `properties` do not list: a misspelt name (`txt`
        /// for `text`) often explains a "required, and missing".
        strays: Vec<String>,
        /// The names the schema's `properties` list, said beside the strays (empty when the
        /// schema lists none, and then nothing is called a stray).
        properties: Vec<String>,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::UnknownTool { name, known } => write!(
                f,
                "no tool named `{name}`; the tools offered are: {}. Run `turnscope tools list` to see them",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            ),
            Refusal::NotAnObject { found } => write!(
                f,
                "the arguments are {found}, not a JSON object; give one object such as '{{\"text\": \"hi\"}}'"
            ),
            Refusal::Schema {
                tool,
                errors,
                strays,
                properties,
            } => {
                write!(f, "the arguments break `{tool}`'s input schema: ")?;
                let listed: Vec<String> = errors.iter().map(ToString::to_string).collect();
                write!(f, "{}", listed.join("; "))?;
                if !strays.is_empty() {
                    let strays: Vec<String> = strays.iter().map(|s| format!("`{s}`")).collect();
                    write!(
                        f,
                        "; {} {} not among its properties ({})",
                        strays.join(", "),
                        if strays.len() == 1 { "is" } else { "are" },
                        properties.join(", ")
                    )?;
                }
                write!(f, "; fix them and call again")
            }
        }
    }
}

/// A finished hand call.
#[derive(Debug, Clone, PartialEq)]
pub struct HandResult {
    /// The tool's name.
    pub tool: String,
    /// Where it comes from (`builtin`, `rust`, an MCP server's name).
    pub source: String,
    /// The arguments sent.
    pub arguments: Value,
    /// What came back.
    pub outcome: ToolOutcome,
    /// How long the call took.
    pub duration: Duration,
    /// Why the arguments went out unchecked, when the schema could not check them.
    pub unchecked: Option<String>,
}

/// The most bytes of arguments [`HandResult::to_json`] echoes back: the caller gave them,
/// and a large payload (a file sent whole) would only double the output.
pub const ARGUMENTS_ECHOED_BYTES: usize = 64 * 1024;

impl HandResult {
    /// The result's content blocks (MCP JSON): the typed blocks the tool gave, or its text as
    /// one text block.
    pub fn content(&self) -> Vec<Value> {
        if self.outcome.parts.is_empty() {
            vec![json!({"type": "text", "text": self.outcome.text})]
        } else {
            self.outcome.parts.clone()
        }
    }

    /// The size of the result as a model reads it, in bytes: its text (every text block, other
    /// blocks described), as the transcript's tool rows and the console's hand calls measure a
    /// result; neither the JSON around it nor `structuredContent` counts (the console said
    /// 44 B where `tools call` said 140 for the same answer: tour S M4).
    pub fn bytes(&self) -> usize {
        self.outcome.text.len()
    }

    /// The result as `turnscope tools call` prints it: MCP's `CallToolResult` fields
    /// (`content`, `structuredContent`, `isError`) plus the tool, its source, the arguments
    /// (up to [`ARGUMENTS_ECHOED_BYTES`]; larger ones are said by their size in
    /// `argumentsOmitted`), the size and the time in milliseconds; `unanswered` when the tool
    /// never answered (the content is then what the model would have read instead).
    pub fn to_json(&self) -> Value {
        let mut out = json!({
            "tool": self.tool,
            "source": self.source,
            "content": self.content(),
            "isError": self.outcome.is_error,
            "bytes": self.bytes(),
            "ms": (self.duration.as_secs_f64() * 1e6).round() / 1e3,
        });
        if let Some(s) = &self.outcome.structured {
            out["structuredContent"] = s.clone();
        }
        let arguments_bytes = self.arguments.to_string().len();
        if arguments_bytes <= ARGUMENTS_ECHOED_BYTES {
            out["arguments"] = self.arguments.clone();
        } else {
            out["argumentsOmitted"] = Value::String(format!(
                "{arguments_bytes} bytes, over the {} KiB echoed: the arguments given",
                ARGUMENTS_ECHOED_BYTES / 1024
            ));
        }
        if let Some(why) = &self.unchecked {
            out["unchecked"] = Value::String(why.clone());
        }
        if let Some(why) = &self.outcome.unanswered {
            let mut said = serde_json::to_value(why).unwrap_or_default();
            said["message"] = Value::String(why.to_string());
            out["unanswered"] = said;
        }
        out
    }
}

/// Finds `name` among `specs` and checks `arguments` against its schema.
///
/// # Errors
/// The tool is unknown, the arguments are not an object, or they break the schema.
pub fn check<'a>(
    specs: &'a [ToolSpec],
    name: &str,
    arguments: &Value,
) -> Result<(&'a ToolSpec, Option<String>), Refusal> {
    let Some(spec) = specs.iter().find(|s| s.name == name) else {
        return Err(Refusal::UnknownTool {
            name: name.to_string(),
            known: specs.iter().map(|s| s.name.clone()).collect(),
        });
    };
    if !arguments.is_object() {
        return Err(Refusal::NotAnObject {
            found: json_kind(arguments),
        });
    }
    let check = ArgsCheck::new(&spec.input_schema);
    let errors = check.errors(arguments);
    if !errors.is_empty() {
        let properties: Vec<String> = spec.input_schema["properties"]
            .as_object()
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default();
        let strays = if properties.is_empty() {
            Vec::new()
        } else {
            arguments
                .as_object()
                .map(|given| {
                    given
                        .keys()
                        .filter(|k| !properties.contains(k))
                        .cloned()
                        .collect()
                })
                .unwrap_or_default()
        };
        return Err(Refusal::Schema {
            tool: name.to_string(),
            errors,
            strays,
            properties,
        });
    }
    Ok((spec, check.problem().map(str::to_string)))
}

/// Calls `name` with `arguments` on `tools` as the bot would (at most `timeout`), after
/// [`check`]; publishes the call on `bus` as a `ToolCall` event of session 0.
///
/// # Errors
/// The [`check`] refused it; nothing was sent.
pub async fn call(
    tools: &dyn Tools,
    name: &str,
    arguments: Value,
    timeout: Duration,
    bus: &Bus,
) -> Result<HandResult, Refusal> {
    let specs = tools.specs();
    let (spec, unchecked) = check(&specs, name, &arguments)?;
    let source = spec.source.clone();
    let started_us = now_us();
    let started = Instant::now();
    let outcome = call_timed(
        tools,
        name,
        arguments.clone(),
        &CallContext::detached(),
        timeout,
    )
    .await;
    let result = HandResult {
        tool: name.to_string(),
        source,
        arguments,
        outcome,
        duration: started.elapsed(),
        unchecked,
    };
    bus.publish_with(|| {
        Event::ToolCall(ToolCallEvent {
            session: 0,
            turn: 0,
            name: result.tool.clone(),
            duration_us: result.duration.as_micros() as u64,
            result_bytes: result.outcome.text.len(),
            // A person reads it: the tool's own error, or why it never answered in their words
            // (not the text written for a model).
            error: result
                .outcome
                .is_error
                .then(|| match &result.outcome.unanswered {
                    Some(why) => format!("did not answer: {why}"),
                    None => result.outcome.text.clone(),
                }),
            arguments: result.arguments.to_string(),
            result: if result.outcome.is_error {
                String::new()
            } else {
                carried(&result.outcome.text)
            },
            started_us,
            retold: false,
            by_hand: true,
        })
    });
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{FnTool, Toolbox};

    fn tools() -> Toolbox {
        Toolbox::new()
            .with(FnTool::new(
                "greet",
                "Greets someone.",
                json!({"type": "object", "properties": {"who": {"type": "string"}}, "required": ["who"]}),
                |args| async move { Ok(format!("hello {}", args["who"].as_str().unwrap_or("?"))) },
            ))
            .with(FnTool::new(
                "nap",
                "Sleeps.",
                json!({"type": "object"}),
                |_| async move {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    Ok("awake".into())
                },
            ))
    }

    #[tokio::test]
    async fn a_hand_call_runs_checks_and_reports() {
        let tools = tools();
        let bus = Bus::default();
        let mut sub = bus.subscribe();
        let done = call(
            &tools,
            "greet",
            json!({"who": "Ada"}),
            Duration::from_secs(1),
            &bus,
        )
        .await
        .unwrap();
        assert_eq!(done.outcome.text, "hello Ada");
        let shown = done.to_json();
        assert_eq!(shown["content"][0]["text"], "hello Ada");
        assert_eq!(shown["isError"], false);
        assert_eq!(shown["arguments"], json!({"who": "Ada"}));
        assert_eq!(shown["bytes"], "hello Ada".len(), "the text's bytes");
        // Arguments over the echo's bound are said by their size, not repeated.
        let big = "x".repeat(ARGUMENTS_ECHOED_BYTES);
        let large = call(
            &tools,
            "greet",
            json!({"who": big}),
            Duration::from_secs(1),
            &bus,
        )
        .await
        .unwrap()
        .to_json();
        assert!(large.get("arguments").is_none());
        let omitted = large["argumentsOmitted"].as_str().unwrap();
        assert!(
            omitted.starts_with(&format!("{} bytes", ARGUMENTS_ECHOED_BYTES + 10)),
            "{omitted}"
        );
        let Some(event) = sub.try_recv() else {
            panic!("a ToolCall event")
        };
        assert!(matches!(&*event, Event::ToolCall(c) if c.name == "greet" && c.session == 0));

        let refused = call(
            &tools,
            "greet",
            json!({"who": 3}),
            Duration::from_secs(1),
            &bus,
        )
        .await
        .unwrap_err();
        assert!(
            refused.to_string().contains("who: want string"),
            "{refused}"
        );
        // A misspelt name is said beside the "missing" it causes; a correct call names none.
        let misspelt = call(
            &tools,
            "greet",
            json!({"wh": "Ada"}),
            Duration::from_secs(1),
            &bus,
        )
        .await
        .unwrap_err();
        assert_eq!(
            misspelt.to_string(),
            "the arguments break `greet`'s input schema: who: required, and missing (required); `wh` is \
             not among its properties (who); fix them and call again"
        );
        assert!(!refused.to_string().contains("not among"), "{refused}");
        let unknown = call(&tools, "nope", json!({}), Duration::from_secs(1), &bus)
            .await
            .unwrap_err();
        assert!(unknown.to_string().contains("greet, nap"), "{unknown}");
        let array = call(&tools, "greet", json!([1]), Duration::from_secs(1), &bus)
            .await
            .unwrap_err();
        assert!(array.to_string().contains("an array"), "{array}");
    }

    #[tokio::test]
    async fn the_bots_timeout_applies() {
        let done = call(
            &tools(),
            "nap",
            json!({}),
            Duration::from_millis(50),
            &Bus::default(),
        )
        .await
        .unwrap();
        assert!(done.outcome.is_error);
        assert!(
            done.outcome.text.contains("took longer than 0.1 s"),
            "{}",
            done.outcome.text
        );
    }
}
