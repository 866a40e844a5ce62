//! Which model providers would refuse or mangle a tool's input schema, and why: OpenAI's strict
//! mode, Gemini's function declarations and Claude's tool use each accept a different part of
//! JSON Schema, and a request that offers one tool they refuse fails whole. The console's Tools
//! pane marks each tool with what [`check`] finds; nothing here changes a schema.
//!
//! The rules are the providers' documented limits and the errors they answer with:
//! - **OpenAI strict mode**: whatever [`strict::to_strict`] cannot mend (and, when it can, that
//!   the schema as sent is not strict yet: `/v1/tools?strict=true` serves the mended one).
//! - **Gemini** (`functionDeclarations[].parameters`, an OpenAPI 3.0 subset; its
//!   OpenAI-compatible endpoint takes the same): fields it has no slot for are refused
//!   (`additionalProperties`, `$ref`, `oneOf`, `allOf`, `not`, `const`, …), every schema needs a
//!   `type` and only one (`nullable` instead of `["T","null"]`), arrays need `items`, strings
//!   take only the `enum` and `date-time` formats, and `enum` only strings.
//! - **Claude**: no `oneOf`, `allOf` or `anyOf` at the top of `input_schema`.

use super::openai_shape::schema::pointer_token as escape;
use std::fmt;

use serde_json::Value;

use super::openai_shape::strict;

/// A provider whose limits a schema is held to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Target {
    /// OpenAI function calling with `strict: true`.
    OpenAiStrict,
    /// Gemini function declarations.
    Gemini,
    /// Anthropic's Claude tool use.
    Claude,
}

impl Target {
    /// The name shown before each finding.
    pub fn label(self) -> &'static str {
        match self {
            Target::OpenAiStrict => "OpenAI strict",
            Target::Gemini => "Gemini",
            Target::Claude => "Claude",
        }
    }
}

/// One thing a provider would refuse or change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Whose limit.
    pub target: Target,
    /// Where, as a JSON pointer into the schema (`""` is the top).
    pub pointer: String,
    /// What, and what follows.
    pub reason: String,
    /// OpenAI strict mode refuses the schema as sent, and its strict version exists
    /// ([`strict::to_strict`] mends it): what turnscope's OpenAI bridge serves at
    /// `/v1/tools?strict=true`.
    pub mended: bool,
}

/// Where a tool's strict version is served, for what [`Finding::text`] points to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StrictServed {
    /// This turnscope's OpenAI bridge offers the tool (the bot's own).
    Here,
    /// A watched turnscope's bot offers it: that server's bridge serves it, while it runs
    /// (which a viewer cannot see).
    Watched,
    /// No bridge of turnscope's offers it (an attached bot's `tools/list`).
    Nowhere,
}

impl Finding {
    /// The finding as one line; a mended one says where its strict version is served, as
    /// `served` tells (nothing for a tool no bridge of turnscope's offers).
    pub fn text(&self, served: StrictServed) -> String {
        let mut text = format!("{}: {}", self.target.label(), self.reason);
        if self.mended {
            text.push_str(match served {
                StrictServed::Here => "; GET /v1/tools?strict=true serves a strict version",
                StrictServed::Watched => {
                    "; the watched server's GET /v1/tools?strict=true serves a strict version \
                     while its OpenAI bridge runs"
                }
                StrictServed::Nowhere => "",
            });
        }
        if !self.pointer.is_empty() {
            text.push_str(&format!(" (at #{})", self.pointer));
        }
        text
    }
}

impl fmt::Display for Finding {
    /// [`Finding::text`] of a tool the bridge offers.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text(StrictServed::Here))
    }
}

/// Most findings listed per provider; the rest are counted in one more.
pub const PER_TARGET: usize = 4;

/// Keywords Gemini's schema has no field for.
const GEMINI_UNKNOWN: &[&str] = &[
    "additionalProperties",
    "$ref",
    "$defs",
    "definitions",
    "$schema",
    "$id",
    "oneOf",
    "allOf",
    "not",
    "const",
    "if",
    "then",
    "else",
    "patternProperties",
    "propertyNames",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "uniqueItems",
    "prefixItems",
    "contains",
    "dependentRequired",
    "dependentSchemas",
    "unevaluatedProperties",
    "examples",
];

/// What each provider would refuse or change in `schema` (a tool's input schema as it is
/// sent to the model), at most [`PER_TARGET`] per provider.
pub fn check(schema: &Value) -> Vec<Finding> {
    let mut out = Vec::new();
    match strict::to_strict(schema) {
        Ok(done) if !done.changes.is_empty() => out.push(Finding {
            target: Target::OpenAiStrict,
            pointer: String::new(),
            reason: format!("refused as sent ({})", summary(&done.changes)),
            mended: true,
        }),
        Ok(_) => {}
        Err(problems) => out.extend(problems.into_iter().map(|p| Finding {
            target: Target::OpenAiStrict,
            pointer: p.pointer,
            reason: format!("refused, no strict version: {}", p.reason),
            mended: false,
        })),
    }
    let mut gemini = Vec::new();
    gemini_walk(schema, String::new(), &mut gemini);
    out.extend(gemini);
    if let Value::Object(map) = schema {
        for key in ["oneOf", "allOf", "anyOf"] {
            if map.contains_key(key) {
                out.push(Finding {
                    target: Target::Claude,
                    pointer: String::new(),
                    reason: format!(
                        "refused: `{key}` at the top level of input_schema (Claude answers HTTP 400 for the whole request)"
                    ),
                    mended: false,
                });
            }
        }
    }
    cap(out)
}

/// `3 optional fields made nullable, 2 objects closed, …` from the strict version's changes.
fn summary(changes: &[String]) -> String {
    let count = |needle: &str| changes.iter().filter(|c| c.contains(needle)).count();
    let mut parts = Vec::new();
    for (needle, one, many) in [
        ("made nullable", "optional field", "optional fields"),
        ("closed", "object not closed", "objects not closed"),
        ("oneOf read", "oneOf", "oneOfs"),
        ("default moved", "default", "defaults"),
        ("format moved", "unsupported format", "unsupported formats"),
    ] {
        match count(needle) {
            0 => {}
            1 => parts.push(format!("1 {one}")),
            n => parts.push(format!("{n} {many}")),
        }
    }
    parts.join(", ")
}

fn gemini_walk(node: &Value, at: String, out: &mut Vec<Finding>) {
    let Value::Object(map) = node else {
        if node == &Value::Bool(true) {
            out.push(gemini(
                &at,
                "a schema with no `type` (`true`), refused".into(),
            ));
        }
        return;
    };
    for key in GEMINI_UNKNOWN {
        if map.contains_key(*key) {
            out.push(gemini(&at, format!("`{key}` refused (no such field)")));
        }
    }
    match map.get("type") {
        None if !map.contains_key("anyOf") && !map.contains_key("$ref") => {
            out.push(gemini(&at, "no `type`, refused".into()));
        }
        Some(Value::Array(types)) => out.push(gemini(
            &at,
            format!(
                "a list of types ({}) refused; Gemini takes one type and `nullable`",
                Value::Array(types.clone())
            ),
        )),
        Some(Value::String(t)) => {
            if t == "array" && !map.contains_key("items") {
                out.push(gemini(&at, "an array with no `items`, refused".into()));
            }
            if t == "string"
                && let Some(format) = map.get("format").and_then(Value::as_str)
                && !["enum", "date-time"].contains(&format)
            {
                out.push(gemini(
                    &at,
                    format!("format `{format}` refused (strings take only enum and date-time)"),
                ));
            }
            if t != "string" && map.contains_key("enum") {
                out.push(gemini(
                    &at,
                    format!("`enum` on type {t}, refused (strings only)"),
                ));
            }
        }
        _ => {}
    }
    if let Some(Value::Object(properties)) = map.get("properties") {
        for (name, p) in properties {
            gemini_walk(p, format!("{at}/properties/{}", escape(name)), out);
        }
    }
    if let Some(items) = map.get("items") {
        gemini_walk(items, format!("{at}/items"), out);
    }
    if let Some(Value::Array(choices)) = map.get("anyOf") {
        for (i, c) in choices.iter().enumerate() {
            gemini_walk(c, format!("{at}/anyOf/{i}"), out);
        }
    }
}

fn gemini(at: &str, reason: String) -> Finding {
    Finding {
        target: Target::Gemini,
        pointer: at.to_string(),
        reason,
        mended: false,
    }
}

/// At most [`PER_TARGET`] findings per provider, the rest counted.
fn cap(findings: Vec<Finding>) -> Vec<Finding> {
    let mut out: Vec<Finding> = Vec::new();
    for target in [Target::OpenAiStrict, Target::Gemini, Target::Claude] {
        let mine: Vec<&Finding> = findings.iter().filter(|f| f.target == target).collect();
        out.extend(mine.iter().take(PER_TARGET).map(|f| (*f).clone()));
        if mine.len() > PER_TARGET {
            out.push(Finding {
                target,
                pointer: String::new(),
                reason: format!("and {} more", mine.len() - PER_TARGET),
                mended: false,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn said(schema: Value) -> Vec<String> {
        check(&schema).iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_plain_strict_schema_passes_everywhere() {
        let plain = json!({
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
            "additionalProperties": false
        });
        // Gemini refuses additionalProperties even when false.
        assert_eq!(
            said(plain),
            ["Gemini: `additionalProperties` refused (no such field)"]
        );
        let gemini_clean =
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
        let found = said(gemini_clean);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("OpenAI strict: refused as sent (1 object not closed)"));
        assert!(found[0].ends_with("GET /v1/tools?strict=true serves a strict version"));
    }

    /// A tool the bridge never offers (an attached bot's `tools/list`) is told what strict
    /// mode refuses, with no pointer to a strict version nobody serves; a watched bot's tool
    /// is pointed to its own server's bridge, which a viewer cannot see running.
    #[test]
    fn a_mended_finding_points_to_the_bridge_only_for_its_tools() {
        let open = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
        let found = check(&open);
        let strict = found
            .iter()
            .find(|f| f.target == Target::OpenAiStrict)
            .expect("strict mode refuses an open object");
        assert!(strict.mended);
        let bare = strict.text(StrictServed::Nowhere);
        assert_eq!(
            bare,
            "OpenAI strict: refused as sent (1 optional field, 1 object not closed)"
        );
        assert_eq!(
            strict.text(StrictServed::Here),
            format!("{bare}; GET /v1/tools?strict=true serves a strict version")
        );
        assert_eq!(
            strict.text(StrictServed::Watched),
            format!(
                "{bare}; the watched server's GET /v1/tools?strict=true serves a strict \
                 version while its OpenAI bridge runs"
            )
        );
    }

    #[test]
    fn each_provider_names_what_it_refuses() {
        let found = said(json!({
            "type": "object",
            "properties": {
                "site": {"type": "string", "format": "uri"},
                "maybe": {"type": ["string", "null"]},
                "tags": {"type": "array"},
                "n": {"type": "integer", "enum": [1, 2]},
                "any": {}
            },
            "anyOf": [{"required": ["site"]}, {"required": ["tags"]}]
        }));
        let all = found.join("\n");
        for want in [
            "OpenAI strict: refused, no strict version: `anyOf` at the top level",
            "Gemini: format `uri` refused",
            "Gemini: a list of types",
            "Gemini: `enum` on type integer",
            "Claude: refused: `anyOf` at the top level",
            "Gemini: and ",
        ] {
            assert!(all.contains(want), "{want:?} not in:\n{all}");
        }
        let tags = said(
            json!({"type": "object", "properties": {"tags": {"type": "array"}}, "required": ["tags"]}),
        );
        assert!(
            tags.iter()
                .any(|f| f == "Gemini: an array with no `items`, refused (at #/properties/tags)"),
            "{tags:?}"
        );
    }
}
