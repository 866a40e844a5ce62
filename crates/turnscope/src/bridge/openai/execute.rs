//! Running one tool call for the bridge: `POST /v1/execute`'s request and answer shapes, and
//! the [`Caller`] both `/v1/execute` and the chat-completions loop run calls through. A body that
//! is not a request object is a 400; every later failure (bad arguments, unknown tool, tool or
//! upstream error, timeout) is a tool-level result with `is_error: true`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::json::json_kind;
use serde_json::{Map, Value, json};

use super::catalog::{Catalog, Listing};
use crate::observe::{Bus, Event, ToolCallEvent};
use crate::tools::timed::call_timed;
use crate::tools::{CallContext, ToolOutcome};

/// A `/v1/execute` request.
///
/// A request is `{"name": "...", "arguments": ...}` where `arguments` is an object, the JSON
/// *string* OpenAI puts in `tool_calls[].function.arguments`, or absent/`null` (no
/// arguments).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ExecuteRequest {
    /// The tool's OpenAI name (or the tool set's own name for it).
    pub name: String,
    /// The arguments, or why they cannot be used.
    pub arguments: Result<Value, String>,
}

/// What a `/v1/execute` body must look like, for request-shape errors.
pub(crate) const EXPECTED_SHAPE: &str = "send a JSON object {\"name\": \"<tool name from GET /v1/tools>\", \
     \"arguments\": {...}} (arguments as an object, or as the JSON string a model's tool call carries)";

/// Reads a `/v1/execute` body.
///
/// # Errors
/// The body is not a JSON object with a string `name`: the message says what was found and
/// what shape is expected.
pub(crate) fn parse_request(body: &[u8]) -> Result<ExecuteRequest, String> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| format!("the request body is not JSON ({e}); {EXPECTED_SHAPE}"))?;
    let Value::Object(mut map) = value else {
        return Err(format!(
            "the request body is {}, not an object; {EXPECTED_SHAPE}",
            json_kind(&value)
        ));
    };
    let name = match map.remove("name") {
        Some(Value::String(name)) if !name.is_empty() => name,
        Some(Value::String(_)) => return Err(format!("`name` is empty; {EXPECTED_SHAPE}")),
        Some(other) => {
            return Err(format!(
                "`name` is {}, not a string; {EXPECTED_SHAPE}",
                json_kind(&other)
            ));
        }
        None => return Err(format!("`name` is missing; {EXPECTED_SHAPE}")),
    };
    let arguments = arguments_of(&name, map.remove("arguments").unwrap_or(Value::Null));
    Ok(ExecuteRequest { name, arguments })
}

/// A call's arguments as an object: an object as is, a JSON string parsed, nothing as `{}`.
///
/// # Errors
/// The arguments are not (the JSON text of) an object; the message names the tool.
pub(crate) fn arguments_of(tool: &str, raw: Value) -> Result<Value, String> {
    match raw {
        Value::Object(map) => Ok(Value::Object(map)),
        Value::Null => Ok(Value::Object(Map::new())),
        Value::String(text) if text.trim().is_empty() => Ok(Value::Object(Map::new())),
        Value::String(text) => match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(map)) => Ok(Value::Object(map)),
            Ok(other) => Err(format!(
                "the arguments for `{tool}` are {}, not a JSON object; send one object matching the tool's parameters",
                json_kind(&other)
            )),
            Err(e) => Err(format!(
                "the arguments for `{tool}` are not valid JSON ({e}); send one JSON object matching the tool's parameters"
            )),
        },
        other => Err(format!(
            "the arguments for `{tool}` are {}; send a JSON object (or the JSON text of one) matching the tool's parameters",
            json_kind(&other)
        )),
    }
}

/// The `/v1/execute` answer for an outcome.
///
/// The answer is `{"content": [...], "is_error": bool, "text": "..."}`: `content` holds the
/// result's typed blocks (MCP JSON: `{"type":"text","text":..}`, `{"type":"image",
/// "mimeType":..,"data":..}`, resources...), `text` the same result as one string (what a
/// model reads; images described), and `structured_content` is added when the tool gave
/// `structuredContent`.
pub fn answer(outcome: &ToolOutcome) -> Value {
    let content = if outcome.parts.is_empty() {
        vec![json!({"type": "text", "text": outcome.text})]
    } else {
        outcome.parts.clone()
    };
    let mut answer = json!({
        "content": content,
        "is_error": outcome.is_error,
        "text": outcome.text,
    });
    if let Some(structured) = &outcome.structured {
        answer["structured_content"] = structured.clone();
    }
    answer
}

/// Runs calls against a catalog's tools: name resolved, arguments checked, a timeout, and a
/// `ToolCall` event (session 0) for each.
#[derive(Clone)]
pub struct Caller {
    catalog: Arc<Catalog>,
    timeout: Duration,
    bus: Bus,
}

impl Caller {
    /// A caller giving each call at most `timeout`.
    pub fn new(catalog: Arc<Catalog>, timeout: Duration, bus: Bus) -> Self {
        Self {
            catalog,
            timeout,
            bus,
        }
    }

    /// The same caller with another timeout.
    pub(crate) fn with_timeout(&self, timeout: Duration) -> Caller {
        Caller {
            timeout,
            ..self.clone()
        }
    }

    /// The catalog calls go to.
    pub(crate) fn catalog(&self) -> &Arc<Catalog> {
        &self.catalog
    }

    /// Calls `name` (an OpenAI name from `listing`) with `arguments`. Every failure is an
    /// error outcome; an unknown name never reaches the tool set.
    pub async fn call(
        &self,
        listing: &Listing,
        name: &str,
        arguments: Result<Value, String>,
    ) -> ToolOutcome {
        let started = Instant::now();
        // Written only for a listener: the call's arguments as the event records them.
        let arguments_text = self.bus.is_listened().then(|| match &arguments {
            Ok(value) => value.to_string(),
            Err(_) => String::new(),
        });
        let outcome = match (listing.resolve(name), arguments) {
            (None, _) => {
                let mut text = format!(
                    "unknown tool `{name}`; the tools offered are: {}. Call one of those",
                    listing.names()
                );
                // Its tool may be one of a server not up yet (or down): said, not hidden.
                for why in self.catalog.tools().not_serving() {
                    text.push_str(". ");
                    text.push_str(&why);
                }
                ToolOutcome::error(text)
            }
            (Some(_), Err(message)) => ToolOutcome::error(message),
            (Some(entry), Ok(arguments)) => {
                let cx = CallContext::detached();
                let tools = &**self.catalog.tools();
                call_timed(tools, &entry.tool, arguments, &cx, self.timeout).await
            }
        };
        let limit = self.bus.wire().bytes();
        self.bus.publish_with(|| {
            // Arguments and result as the wire records them (cut by `[wire] max_kib`), and
            // when the call started, as a turn's tool calls are recorded.
            let mut result = outcome.text.clone();
            crate::observe::wire::cut_text(&mut result, limit);
            let mut arguments = arguments_text.unwrap_or_default();
            crate::observe::wire::cut_text(&mut arguments, limit);
            Event::ToolCall(ToolCallEvent {
                session: 0,
                turn: 0,
                name: name.to_string(),
                duration_us: started.elapsed().as_micros() as u64,
                result_bytes: outcome.text.len(),
                error: outcome.is_error.then(|| outcome.text.clone()),
                arguments,
                result,
                started_us: crate::observe::event::now_us()
                    .saturating_sub(started.elapsed().as_micros() as u64),
                ..ToolCallEvent::default()
            })
        });
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_may_be_an_object_a_json_string_or_nothing() {
        let object = parse_request(br#"{"name":"add","arguments":{"a":1}}"#).unwrap();
        assert_eq!(object.name, "add");
        assert_eq!(object.arguments, Ok(json!({"a": 1})));
        let text = parse_request(br#"{"name":"add","arguments":"{\"a\":1}"}"#).unwrap();
        assert_eq!(text.arguments, Ok(json!({"a": 1})));
        for none in [
            &br#"{"name":"clock"}"#[..],
            br#"{"name":"clock","arguments":null}"#,
            br#"{"name":"clock","arguments":"  "}"#,
        ] {
            assert_eq!(parse_request(none).unwrap().arguments, Ok(json!({})));
        }
    }

    #[test]
    fn bad_arguments_are_tool_level_errors_naming_the_tool() {
        let bad = parse_request(br#"{"name":"add","arguments":"{bad"}"#).unwrap();
        let message = bad.arguments.unwrap_err();
        assert!(
            message.contains("`add`") && message.contains("not valid JSON"),
            "{message}"
        );
        let array = parse_request(br#"{"name":"add","arguments":"[1,2]"}"#).unwrap();
        assert!(array.arguments.unwrap_err().contains("an array"));
        let number = parse_request(br#"{"name":"add","arguments":7}"#).unwrap();
        assert!(number.arguments.unwrap_err().contains("a number"));
    }

    #[test]
    fn a_body_that_is_not_a_request_says_what_shape_is_expected() {
        for (body, says) in [
            (&b"not json"[..], "not JSON"),
            (b"[1]", "an array, not an object"),
            (br#"{"arguments":{}}"#, "`name` is missing"),
            (br#"{"name":3}"#, "`name` is a number"),
            (br#"{"name":""}"#, "`name` is empty"),
        ] {
            let message = parse_request(body).unwrap_err();
            assert!(
                message.contains(says) && message.contains("{\"name\""),
                "{message}"
            );
        }
    }

    #[test]
    fn answers_carry_typed_content_text_and_structured_content() {
        let plain = answer(&ToolOutcome::ok("3"));
        assert_eq!(
            plain,
            json!({"content": [{"type": "text", "text": "3"}], "is_error": false, "text": "3"})
        );
        let image = json!({"type": "image", "mimeType": "image/png", "data": "AAAA"});
        let typed = ToolOutcome::ok("[image: image/png, 3 bytes; not shown to the model]")
            .with_content(vec![image.clone()], Some(json!({"w": 1})));
        let typed = answer(&typed);
        assert_eq!(typed["content"], json!([image]));
        assert_eq!(typed["structured_content"], json!({"w": 1}));
        assert!(answer(&ToolOutcome::error("boom"))["is_error"] == true);
    }
}
