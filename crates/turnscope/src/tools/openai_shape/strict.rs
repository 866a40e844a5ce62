//! The strict-mode version of a tool's `parameters`, for clients that send tools with OpenAI's
//! `strict: true` (`GET /v1/tools?strict=true`), and the reasons one cannot exist.
//!
//! Strict mode (Structured Outputs for function calls) accepts a subset of JSON Schema: every
//! object closed (`additionalProperties: false`), every property listed in `required` (an
//! optional one is written as nullable instead), no composition at the top, no `allOf`, `not`,
//! conditionals or dependent keywords, a short list of string formats, and at most
//! [`MAX_DEPTH`] levels of nesting and [`MAX_PROPERTIES`] properties. [`to_strict`] makes that
//! version where the meaning survives (each change listed in [`Strict::changes`]) and says why
//! not where it does not ([`Problem`]).

use super::schema::pointer_token as escape;
use serde_json::{Map, Value, json};

use super::schema::{Limits, convert};

/// Deepest nesting of objects strict mode accepts.
pub const MAX_DEPTH: usize = 10;
/// Most object properties strict mode accepts over a whole schema.
pub const MAX_PROPERTIES: usize = 5000;
/// The string formats strict mode accepts.
pub const FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];
/// Keywords strict mode refuses wherever they stand.
pub const REFUSED: &[&str] = &[
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "patternProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "contains",
    "minContains",
    "maxContains",
    "uniqueItems",
    "prefixItems",
];

/// Why a tool has no strict-mode version, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// JSON pointer into the tool's `parameters`.
    pub pointer: String,
    /// What strict mode refuses there.
    pub reason: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at #{}", self.reason, self.pointer)
    }
}

/// A strict-mode `parameters` and what was changed to get it.
#[derive(Debug, Clone, PartialEq)]
pub struct Strict {
    /// The schema to send with `strict: true`.
    pub parameters: Value,
    /// Each change, in words (`#/properties/units made nullable (it was optional)`).
    pub changes: Vec<String>,
}

/// The strict-mode version of `parameters` (a tool's input schema; `$ref`s are inlined first).
///
/// Changes made: objects closed with `additionalProperties: false`; optional properties listed
/// in `required` and made nullable (`"type": ["T", "null"]`, `null` added to an `enum`, a
/// `{"type": "null"}` choice added to an `anyOf`); `oneOf` read as `anyOf`; `default` and an
/// unsupported `format` moved into the `description`.
///
/// # Errors
/// Everything strict mode refuses and no change can mend: an object open to other keys,
/// composition at the top, a refused keyword, a property with no type to make nullable, too
/// deep or too many properties; each with its JSON pointer.
pub fn to_strict(parameters: &Value) -> Result<Strict, Vec<Problem>> {
    let inlined = convert(Some(parameters), &Limits::default()).map_err(|e| {
        vec![Problem {
            pointer: e.pointer().to_string(),
            reason: e.to_string(),
        }]
    })?;
    let mut walk = Walk::default();
    let mut root = inlined.parameters;
    for key in ["anyOf", "oneOf", "allOf", "enum", "not"] {
        if root.get(key).is_some() {
            walk.refuse("", format!("`{key}` at the top level"));
        }
    }
    walk.schema(&mut root, String::new(), 0);
    if walk.properties > MAX_PROPERTIES {
        walk.refuse(
            "",
            format!(
                "{} properties in all, more than the {MAX_PROPERTIES} strict mode takes",
                walk.properties
            ),
        );
    }
    if walk.problems.is_empty() {
        Ok(Strict {
            parameters: root,
            changes: walk.changes,
        })
    } else {
        Err(walk.problems)
    }
}

#[derive(Default)]
struct Walk {
    problems: Vec<Problem>,
    changes: Vec<String>,
    properties: usize,
}

impl Walk {
    fn refuse(&mut self, pointer: &str, reason: String) {
        self.problems.push(Problem {
            pointer: pointer.to_string(),
            reason,
        });
    }

    fn schema(&mut self, node: &mut Value, at: String, depth: usize) {
        let Value::Object(map) = node else {
            if node == &Value::Bool(true) {
                self.refuse(&at, "a schema that accepts anything (`true`)".into());
            }
            return;
        };
        for key in REFUSED {
            if map.contains_key(*key) {
                self.refuse(&at, format!("`{key}`"));
            }
        }
        if let Some(one_of) = map.remove("oneOf") {
            map.insert("anyOf".into(), one_of);
            self.changes.push(format!("#{at}: oneOf read as anyOf"));
        }
        move_to_description(map, "default", &at, &mut self.changes);
        if let Some(format) = map.get("format").and_then(Value::as_str)
            && !FORMATS.contains(&format)
        {
            move_to_description(map, "format", &at, &mut self.changes);
        }
        let is_object = map.get("type").is_some_and(|t| has_type(t, "object"))
            || map.contains_key("properties");
        if is_object {
            if depth >= MAX_DEPTH {
                self.refuse(
                    &at,
                    format!("objects nested deeper than the {MAX_DEPTH} levels strict mode takes"),
                );
                return;
            }
            self.object(map, &at, depth);
        }
        for key in ["items", "additionalItems"] {
            if let Some(inner) = map.get_mut(key) {
                self.schema(inner, format!("{at}/{key}"), depth);
            }
        }
        if let Some(Value::Array(choices)) = map.get_mut("anyOf") {
            for (i, choice) in choices.iter_mut().enumerate() {
                self.schema(choice, format!("{at}/anyOf/{i}"), depth);
            }
        }
    }

    fn object(&mut self, map: &mut Map<String, Value>, at: &str, depth: usize) {
        match map.get("additionalProperties") {
            None => {
                map.insert("additionalProperties".into(), Value::Bool(false));
                self.changes
                    .push(format!("#{at}: closed (additionalProperties: false)"));
            }
            Some(Value::Bool(false)) => {}
            Some(_) => self.refuse(
                at,
                "an object open to keys of any name (`additionalProperties`), which strict mode never allows"
                    .into(),
            ),
        }
        let required: Vec<String> = map
            .get("required")
            .and_then(Value::as_array)
            .map(|r| {
                r.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let Some(Value::Object(properties)) = map.get_mut("properties") else {
            map.insert("properties".into(), json!({}));
            map.insert("required".into(), json!([]));
            return;
        };
        self.properties += properties.len();
        let mut names = Vec::with_capacity(properties.len());
        for (name, property) in properties.iter_mut() {
            let here = format!("{at}/properties/{}", escape(name));
            if !required.contains(name) {
                if nullable(property) {
                    self.changes
                        .push(format!("#{here}: made nullable (it was optional)"));
                } else {
                    self.refuse(
                        &here,
                        "an optional property with no `type` to make nullable (strict mode requires every property)"
                            .into(),
                    );
                }
            }
            self.schema(property, here, depth + 1);
            names.push(Value::String(name.clone()));
        }
        map.insert("required".into(), Value::Array(names));
    }
}

/// Whether `t` (a `type` value) names `want`.
fn has_type(t: &Value, want: &str) -> bool {
    match t {
        Value::String(s) => s == want,
        Value::Array(list) => list.iter().any(|x| x == want),
        _ => false,
    }
}

/// Lets `property` also be `null`; `false` when it has nothing to add `null` to.
fn nullable(property: &mut Value) -> bool {
    let Value::Object(map) = property else {
        return false;
    };
    let mut done = false;
    match map.get_mut("type") {
        Some(Value::String(t)) => {
            let t = std::mem::take(t);
            map.insert("type".into(), json!([t, "null"]));
            done = true;
        }
        Some(Value::Array(list)) => {
            if !list.iter().any(|x| x == "null") {
                list.push(json!("null"));
            }
            done = true;
        }
        _ => {}
    }
    if let Some(Value::Array(values)) = map.get_mut("enum") {
        if !values.contains(&Value::Null) {
            values.push(Value::Null);
        }
        done = true;
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(choices)) = map.get_mut(key) {
            choices.push(json!({"type": "null"}));
            done = true;
        }
    }
    done
}

/// Moves keyword `key` out of the schema into its description: `(default: 3)`.
fn move_to_description(
    map: &mut Map<String, Value>,
    key: &str,
    at: &str,
    changes: &mut Vec<String>,
) {
    let Some(value) = map.remove(key) else {
        return;
    };
    let shown = match &value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let description = map
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let joined = if description.is_empty() {
        format!("({key}: {shown})")
    } else {
        format!("{description} ({key}: {shown})")
    };
    map.insert("description".into(), Value::String(joined));
    changes.push(format!("#{at}: {key} moved into the description"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn optional_fields_become_nullable_and_objects_close() {
        let params = json!({
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "units": {"type": "string", "enum": ["metric", "imperial"], "default": "metric"},
                "party": {"type": "object", "properties": {"adults": {"type": "integer"}}, "required": ["adults"]},
                "site": {"type": "string", "format": "uri"},
                "v": {"oneOf": [{"type": "string"}, {"type": "integer"}]}
            },
            "required": ["city", "party"]
        });
        let strict = to_strict(&params).unwrap();
        let p = &strict.parameters;
        assert_eq!(p["additionalProperties"], false);
        assert_eq!(
            p["required"],
            json!(["city", "party", "site", "units", "v"])
        );
        assert_eq!(p["properties"]["units"]["type"], json!(["string", "null"]));
        assert_eq!(
            p["properties"]["units"]["enum"],
            json!(["metric", "imperial", null])
        );
        assert_eq!(p["properties"]["units"]["description"], "(default: metric)");
        assert_eq!(p["properties"]["party"]["additionalProperties"], false);
        assert!(p["properties"]["site"].get("format").is_none());
        assert_eq!(p["properties"]["v"]["anyOf"][2], json!({"type": "null"}));
        assert!(
            strict
                .changes
                .iter()
                .any(|c| c.contains("units: made nullable"))
        );
    }

    #[test]
    fn what_cannot_be_mended_is_named_with_its_place() {
        let open = json!({"type": "object", "properties": {"m": {"type": "object", "additionalProperties": {"type": "string"}}}, "required": ["m"]});
        let problems = to_strict(&open).unwrap_err();
        assert_eq!(problems[0].pointer, "/properties/m", "{problems:?}");
        let top = json!({"type": "object", "properties": {"a": {"type": "string"}}, "anyOf": [{"required": ["a"]}]});
        assert!(to_strict(&top).unwrap_err()[0].reason.contains("top level"));
        let untyped = json!({"type": "object", "properties": {"x": {"description": "anything"}}});
        assert!(
            to_strict(&untyped).unwrap_err()[0]
                .reason
                .contains("no `type`")
        );
        let all_of = json!({"type": "object", "properties": {"x": {"type": "string", "allOf": [{"minLength": 1}]}}, "required": ["x"]});
        assert!(to_strict(&all_of).unwrap_err()[0].reason.contains("allOf"));
    }

    #[test]
    fn refs_are_inlined_first() {
        let params = json!({
            "type": "object",
            "properties": {"to": {"$ref": "#/$defs/Email"}},
            "required": ["to"],
            "$defs": {"Email": {"type": "string", "format": "email"}}
        });
        let strict = to_strict(&params).unwrap();
        assert_eq!(strict.parameters["properties"]["to"]["format"], "email");
        assert!(strict.parameters.get("$defs").is_none());
    }
}
