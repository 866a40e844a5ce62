//! Describing JSON values in error messages, for every layer that reads JSON from outside, so
//! an error says what kind of value came ("got a string") in the same words everywhere.

use serde_json::Value;

/// What kind of JSON `value` is, for error messages: `null`, `a boolean`, `a number`,
/// `a string`, `an array` or `an object`.
pub(crate) fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
