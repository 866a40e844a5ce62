//! Tool arguments checked against the tool's input schema before a call leaves: the console's
//! hand-call form (live, as each field is typed) and `turnscope tools call` use it, so a
//! wrong argument is named (which field, which rule) before any server sees it.
//!
//! The checking is `boon`'s (JSON Schema drafts 4 to 2020-12): writing a validator here would
//! be a second, weaker one. It never fetches anything: a `$ref` to another document makes the
//! schema uncheckable ([`ArgsCheck::problem`]), and the call then goes out unchecked, as the
//! bot's own calls do.

use crate::tools::openai_shape::schema::pointer_token as escape;
use std::fmt;

use boon::{Compiler, Draft, ErrorKind, Schemas, ValidationError};
use serde_json::Value;

/// Where the schema is filed inside the validator (never fetched).
const SCHEMA_URL: &str = "urn:turnscope:tool-input";

/// One way the arguments break the schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgError {
    /// The field, as a JSON pointer into the arguments (`/party/adults`, `/tags/0`); `""` is the
    /// arguments object itself. A missing required field is named by its own pointer.
    pub pointer: String,
    /// The schema keyword that failed: `required`, `type`, `enum`, `minimum`, …
    pub rule: &'static str,
    /// What is wrong, in words: `want integer, but got string`.
    pub message: String,
}

impl ArgError {
    /// The field as a person reads it: `party.adults`, `tags[0]`, or `(the arguments)`.
    pub fn field(&self) -> String {
        field_label(&self.pointer)
    }
}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} ({})", self.field(), self.message, self.rule)
    }
}

/// `/party/adults` → `party.adults`, `/tags/0` → `tags[0]`, `` → `(the arguments)`.
pub fn field_label(pointer: &str) -> String {
    if pointer.is_empty() {
        return "(the arguments)".into();
    }
    let mut out = String::new();
    for token in pointer.trim_start_matches('/').split('/') {
        let token = token.replace("~1", "/").replace("~0", "~");
        if !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit()) && !out.is_empty() {
            out.push_str(&format!("[{token}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&token);
        }
    }
    out
}

/// A tool's input schema, compiled once, checking any number of argument objects.
pub struct ArgsCheck {
    compiled: Option<(Schemas, boon::SchemaIndex)>,
    problem: Option<String>,
}

impl fmt::Debug for ArgsCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ArgsCheck")
            .field("compiled", &self.compiled.is_some())
            .field("problem", &self.problem)
            .finish()
    }
}

/// Refuses every load: a schema is checked only against what it holds itself.
struct NoFetch;

impl boon::UrlLoader for NoFetch {
    fn load(&self, url: &str) -> Result<Value, Box<dyn std::error::Error>> {
        Err(format!("{url} is another document, and tool schemas are never fetched").into())
    }
}

impl ArgsCheck {
    /// Compiles `schema` (a missing `$schema` means draft 2020-12, as MCP's 2026-07-28 says).
    /// A schema that does not compile gives a check that passes everything and says why
    /// ([`ArgsCheck::problem`]).
    pub fn new(schema: &Value) -> Self {
        let schema = match schema {
            Value::Null => Value::Bool(true),
            other => other.clone(),
        };
        let mut compiler = Compiler::new();
        compiler.set_default_draft(Draft::V2020_12);
        compiler.use_loader(Box::new(NoFetch));
        let mut schemas = Schemas::new();
        let compiled = match compiler.add_resource(SCHEMA_URL, schema) {
            Ok(()) => compiler.compile(SCHEMA_URL, &mut schemas),
            Err(e) => Err(e),
        };
        match compiled {
            Ok(index) => Self {
                compiled: Some((schemas, index)),
                problem: None,
            },
            Err(e) => Self {
                compiled: None,
                problem: Some(format!(
                    "the tool's input schema cannot be checked here ({}); arguments go out unchecked",
                    one_line(&format!("{e:#}"))
                )),
            },
        }
    }

    /// Why the schema cannot check arguments, when it cannot.
    pub fn problem(&self) -> Option<&str> {
        self.problem.as_deref()
    }

    /// Every way `args` breaks the schema (empty: they pass), the innermost failures first
    /// named by field; at most [`MAX_ERRORS`].
    pub fn errors(&self, args: &Value) -> Vec<ArgError> {
        let Some((schemas, index)) = &self.compiled else {
            return Vec::new();
        };
        match schemas.validate(args, *index) {
            Ok(()) => Vec::new(),
            Err(e) => {
                let mut out = Vec::new();
                collect(&e, &mut out);
                out.dedup();
                out.truncate(MAX_ERRORS);
                out
            }
        }
    }
}

/// Most errors reported for one set of arguments.
pub const MAX_ERRORS: usize = 16;

/// The leaves of boon's error tree as [`ArgError`]s. `anyOf`/`oneOf` failures are reported as
/// themselves: their branches' errors would contradict each other.
fn collect(e: &ValidationError<'_, '_>, out: &mut Vec<ArgError>) {
    let pointer = e.instance_location.to_string();
    match &e.kind {
        ErrorKind::Group | ErrorKind::Schema { .. } | ErrorKind::Reference { .. }
            if !e.causes.is_empty() =>
        {
            for cause in &e.causes {
                collect(cause, out);
            }
        }
        ErrorKind::AllOf if !e.causes.is_empty() => {
            for cause in &e.causes {
                collect(cause, out);
            }
        }
        ErrorKind::Required { want } => {
            for name in want {
                out.push(ArgError {
                    pointer: format!("{pointer}/{}", escape(name)),
                    rule: "required",
                    message: "required, and missing".into(),
                });
            }
        }
        ErrorKind::AdditionalProperties { got } => {
            for name in got {
                out.push(ArgError {
                    pointer: format!("{pointer}/{}", escape(name)),
                    rule: "additionalProperties",
                    message: "not a field of this tool".into(),
                });
            }
        }
        ErrorKind::AnyOf | ErrorKind::OneOf(None) if consts(e).is_some() => out.push(ArgError {
            pointer,
            rule: "enum",
            message: format!(
                "value must be one of {}",
                consts(e).unwrap_or_default().join(", ")
            ),
        }),
        ErrorKind::AnyOf | ErrorKind::OneOf(None) if the_branch_meant(e).is_some() => {
            if let Some(branch) = the_branch_meant(e) {
                collect(branch, out);
            }
        }
        ErrorKind::AnyOf | ErrorKind::OneOf(_) => out.push(ArgError {
            pointer,
            rule: keyword(&e.kind),
            message: match &e.kind {
                ErrorKind::OneOf(Some((i, j))) => {
                    format!("must match exactly one of the choices, but matches #{i} and #{j}")
                }
                _ => "matches none of the allowed shapes".into(),
            },
        }),
        kind => out.push(ArgError {
            pointer,
            rule: keyword(kind),
            message: one_line(&kind.to_string()),
        }),
    }
}

/// The one branch of a failed choice that the value was meant for: every other branch
/// failed only on the value's type there (`Optional[Model]`, pydantic's `anyOf: [{$ref},
/// {type: null}]`, given an object: the object's branch), so its errors are the real ones
/// (`/style/times: maximum 5`, not "matches none of the allowed shapes").
fn the_branch_meant<'a, 's, 'v>(
    e: &'a ValidationError<'s, 'v>,
) -> Option<&'a ValidationError<'s, 'v>> {
    fn only_type_here(branch: &ValidationError<'_, '_>, at: &str) -> bool {
        if branch.causes.is_empty() {
            return matches!(branch.kind, ErrorKind::Type { .. })
                && branch.instance_location.to_string() == at;
        }
        branch.causes.iter().all(|c| only_type_here(c, at))
    }
    let at = e.instance_location.to_string();
    let mut meant = e.causes.iter().filter(|b| !only_type_here(b, &at));
    match (meant.next(), meant.next()) {
        (Some(branch), None) if e.causes.len() > 1 => Some(branch),
        _ => None,
    }
}

/// The values of a choice among constants (`oneOf: [{const: a}, {const: b}]`, how schemars and
/// pydantic write an enum with a description per value), when every branch failed on one.
fn consts(e: &ValidationError<'_, '_>) -> Option<Vec<String>> {
    fn leaves<'a, 's, 'v>(e: &'a ValidationError<'s, 'v>, out: &mut Vec<&'a ErrorKind<'s, 'v>>) {
        if e.causes.is_empty() {
            out.push(&e.kind);
        }
        for c in &e.causes {
            leaves(c, out);
        }
    }
    let mut found = Vec::new();
    for cause in &e.causes {
        leaves(cause, &mut found);
    }
    let values: Vec<String> = found
        .iter()
        .map(|k| match k {
            ErrorKind::Const { want } => Some(match want {
                Value::String(s) => format!("'{s}'"),
                other => other.to_string(),
            }),
            _ => None,
        })
        .collect::<Option<_>>()?;
    (!values.is_empty()).then_some(values)
}

fn keyword(kind: &ErrorKind<'_, '_>) -> &'static str {
    kind.keyword_path().map_or("schema", |k| k.keyword)
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn booking() -> Value {
        json!({
            "type": "object",
            "properties": {
                "city": {"type": "string", "minLength": 1},
                "units": {"type": "string", "enum": ["metric", "imperial"]},
                "party": {
                    "type": "object",
                    "properties": {"adults": {"type": "integer", "minimum": 1}},
                    "required": ["adults"]
                },
                "tags": {"type": "array", "items": {"type": "string"}}
            },
            "required": ["city", "party"],
            "additionalProperties": false
        })
    }

    #[test]
    fn good_arguments_pass_and_bad_ones_name_the_field_and_the_rule() {
        let check = ArgsCheck::new(&booking());
        assert!(check.problem().is_none());
        let good =
            json!({"city": "Oslo", "units": "metric", "party": {"adults": 2}, "tags": ["a"]});
        assert_eq!(check.errors(&good), vec![]);
        let bad = json!({"units": "kelvin", "party": {"adults": 0}, "tags": [3], "x": 1});
        let errors = check.errors(&bad);
        let said: Vec<String> = errors.iter().map(ToString::to_string).collect();
        for want in [
            "city: required, and missing (required)",
            "units: value must be one of 'metric', 'imperial' (enum)",
            "party.adults: must be >=1, but got 0 (minimum)",
            "tags[0]: want string, but got number (type)",
            "x: not a field of this tool (additionalProperties)",
        ] {
            assert!(
                said.iter().any(|s| s.starts_with(want)),
                "{want:?} not in {said:#?}"
            );
        }
    }

    #[test]
    fn a_schema_pointing_elsewhere_is_uncheckable_and_says_so() {
        let check = ArgsCheck::new(&json!({"$ref": "https://example.com/s.json"}));
        assert!(check.problem().unwrap().contains("unchecked"));
        assert!(check.errors(&json!({"anything": 1})).is_empty());
        // No schema at all accepts anything.
        assert!(
            ArgsCheck::new(&Value::Null)
                .errors(&json!({"a": 1}))
                .is_empty()
        );
    }

    #[test]
    fn one_of_is_reported_as_itself() {
        let check = ArgsCheck::new(&json!({
            "type": "object",
            "properties": {"v": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}
        }));
        let errors = check.errors(&json!({"v": true}));
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(
            (errors[0].pointer.as_str(), errors[0].rule),
            ("/v", "oneOf")
        );
    }

    /// pydantic's `Optional[Style]` given an object that breaks `Style`: the object's branch
    /// is the one meant, so its rule is named (it read "matches none of the allowed shapes").
    #[test]
    fn an_optional_models_errors_are_its_own() {
        let check = ArgsCheck::new(&json!({
            "type": "object",
            "properties": {"style": {"anyOf": [{"$ref": "#/$defs/Style"}, {"type": "null"}]}},
            "$defs": {"Style": {
                "type": "object",
                "properties": {"times": {"type": "integer", "maximum": 5}}
            }}
        }));
        let errors = check.errors(&json!({"style": {"times": 9}}));
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(
            (errors[0].pointer.as_str(), errors[0].rule),
            ("/style/times", "maximum"),
            "{}",
            errors[0]
        );
        // A value of neither shape still reads as the choice.
        let errors = check.errors(&json!({"style": 3}));
        assert_eq!(errors[0].rule, "anyOf", "{errors:?}");
    }

    #[test]
    fn a_choice_of_constants_reads_as_an_enum() {
        let check = ArgsCheck::new(&json!({
            "type": "object",
            "properties": {"units": {"oneOf": [
                {"const": "metric", "description": "km"},
                {"const": "imperial", "description": "miles"}
            ]}}
        }));
        let errors = check.errors(&json!({"units": "kelvin"}));
        assert_eq!(
            errors[0].to_string(),
            "units: value must be one of 'metric', 'imperial' (enum)"
        );
    }

    #[test]
    fn fields_read_as_paths() {
        assert_eq!(field_label("/party/adults"), "party.adults");
        assert_eq!(field_label("/tags/0"), "tags[0]");
        assert_eq!(field_label("/a~1b"), "a/b");
        assert_eq!(field_label(""), "(the arguments)");
    }
}
