//! Turns an MCP tool's `inputSchema` into the `parameters` schema of an OpenAI function tool:
//! a self-contained object schema with every local `$ref` inlined, because many
//! OpenAI-compatible providers reject `$ref`. The conversion does no I/O, is capped by
//! [`Limits`], and gives byte-identical output for equal input; [`convert`] states the rules.

use crate::json::json_kind;
use serde_json::{Map, Value, json};
use std::fmt;

/// Bounds on how large the inlined schema may grow.
///
/// `max_depth` counts JSON nesting levels of the output plus one per `$ref`
/// followed; `max_nodes` counts JSON values produced (objects, arrays and
/// scalars, including ones a sibling keyword later overrides).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Deepest nesting allowed (the root schema is depth 0).
    pub max_depth: usize,
    /// Most JSON values the output may contain.
    pub max_nodes: usize,
}

impl Default for Limits {
    /// Depth 64 and 100 000 nodes: far beyond real tool schemas (a few
    /// thousand nodes at most), small enough to stop an expansion bomb early.
    fn default() -> Self {
        Limits {
            max_depth: 64,
            max_nodes: 100_000,
        }
    }
}

/// The result of [`convert`]: the `parameters` object and what was left out.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversion {
    /// The self-contained object schema to send as `function.parameters`.
    pub parameters: Value,
    /// JSON pointers (into the original `inputSchema`) of non-schema
    /// fragments that were dropped, each once, in the order found.
    pub dropped: Vec<String>,
}

/// What went wrong in a conversion; [`SchemaError::pointer`] says where.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SchemaErrorKind {
    /// A `$ref` leads back into a schema that is still being inlined.
    Cycle {
        /// The `$ref` text that closes the loop.
        reference: String,
        /// Pointers of the schemas on the loop, ending with the repeat.
        chain: Vec<String>,
    },
    /// A `$ref` names another document (a URL, a file, `other.json#...`).
    RemoteRef {
        /// The `$ref` text.
        reference: String,
    },
    /// A `$ref` (or `$dynamicRef`/`$recursiveRef`) that cannot be resolved
    /// locally: not a string, an anchor, a bad escape.
    BadRef {
        /// The reference as JSON text (a string keeps its quotes).
        reference: String,
        /// Why it was refused.
        reason: String,
    },
    /// A local `$ref` whose JSON pointer finds nothing in the document.
    MissingTarget {
        /// The `$ref` text.
        reference: String,
    },
    /// A local `$ref` that points at something that is not a schema.
    TargetNotSchema {
        /// The `$ref` text.
        reference: String,
        /// What is there instead, e.g. "a string".
        found: &'static str,
    },
    /// The inlined schema nests deeper than [`Limits::max_depth`].
    TooDeep {
        /// The limit in force.
        max_depth: usize,
    },
    /// The inlined schema grows past [`Limits::max_nodes`].
    TooLarge {
        /// The limit in force.
        max_nodes: usize,
    },
    /// The top-level schema does not describe a JSON object.
    NotObject {
        /// What it describes instead.
        found: String,
    },
}

/// Why an `inputSchema` cannot be offered to OpenAI, and where.
///
/// The message says what happened, at which JSON pointer of the original
/// `inputSchema`, and how to fix it. It does not know the tool's name; the
/// caller should put that in front when logging.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError {
    kind: SchemaErrorKind,
    pointer: String,
}

impl SchemaError {
    /// What went wrong.
    pub fn kind(&self) -> &SchemaErrorKind {
        &self.kind
    }

    /// RFC 6901 JSON pointer into the original `inputSchema` where the
    /// problem sits: the `$ref` keyword itself for reference errors, the
    /// place expansion stopped for limit errors, `""` for the root.
    pub fn pointer(&self) -> &str {
        &self.pointer
    }
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use SchemaErrorKind as K;
        let at = format!("#{}", self.pointer);
        write!(f, "inputSchema ")?;
        match &self.kind {
            K::Cycle { reference, chain } => {
                let chain: Vec<String> = chain.iter().map(|p| format!("#{p}")).collect();
                write!(
                    f,
                    "is recursive: $ref {reference:?} at {at} leads back into a schema that is \
                     still being expanded ({}), and OpenAI parameters must be a finite tree; \
                     fix the tool's inputSchema to break the cycle (for example replace the \
                     recursive $ref with a plain object schema)",
                    chain.join(" -> ")
                )
            }
            K::RemoteRef { reference } => write!(
                f,
                "$ref {reference:?} at {at} points to another document, which is never \
                 fetched; fix the tool's inputSchema to bundle that schema under $defs and \
                 refer to it as \"#/$defs/...\""
            ),
            K::BadRef { reference, reason } => write!(
                f,
                "reference {reference} at {at} cannot be resolved: {reason}; fix the tool's \
                 inputSchema to use a local JSON-pointer $ref such as \"#/$defs/Name\""
            ),
            K::MissingTarget { reference } => write!(
                f,
                "$ref {reference:?} at {at} points to nothing in the document; fix the tool's \
                 inputSchema to add the missing definition or correct the reference"
            ),
            K::TargetNotSchema { reference, found } => write!(
                f,
                "$ref {reference:?} at {at} points to {found}, not a schema (expected an \
                 object or a boolean); fix the tool's inputSchema to point the $ref at a schema"
            ),
            K::TooDeep { max_depth } => write!(
                f,
                "nests deeper than {max_depth} levels once $refs are inlined (stopped at {at}); \
                 fix the tool's inputSchema to be flatter, or raise Limits::max_depth"
            ),
            K::TooLarge { max_nodes } => write!(
                f,
                "grows past {max_nodes} JSON values once $refs are inlined (stopped at {at}); \
                 fix the tool's inputSchema to reuse fewer large definitions, or raise \
                 Limits::max_nodes"
            ),
            K::NotObject { found } => write!(
                f,
                "top level must describe an object of named arguments (expected \"type\": \
                 \"object\" with \"properties\"), found {found} at {at}; fix the tool's \
                 inputSchema to take its arguments as properties of an object"
            ),
        }
    }
}

impl std::error::Error for SchemaError {}

/// Converts an MCP `inputSchema` into an OpenAI `parameters` object schema.
///
/// A missing or `null` schema (or `{}` / `true`) becomes
/// `{"type":"object","properties":{}}`. See [`convert`] for the rules; this
/// is the same conversion without the list of dropped fragments.
pub fn to_openai_parameters(schema: Option<&Value>, limits: &Limits) -> Result<Value, SchemaError> {
    convert(schema, limits).map(|done| done.parameters)
}

/// Converts an MCP `inputSchema` and reports which non-schema fragments were
/// dropped on the way.
///
/// Rules beyond the module overview:
///
/// * **Keywords beside a `$ref`** are merged into a copy of the target, and
///   the sibling wins when both set the same keyword; two keywords merge
///   instead of replacing: `properties` (union, the sibling's entry wins per
///   name) and `required` (union, target's names first). A boolean target
///   with siblings becomes `{}` (`true`) or `{"not":{}}` (`false`) first.
///   This keeps annotations such as `description` next to the ref, which
///   OpenAI models read, without introducing an `allOf` that several
///   providers and strict mode refuse.
/// * **Top level**: after inlining it must be an object schema. No `type`
///   gets `"type":"object"` unless the schema only has combinators
///   (`anyOf`, `oneOf`, `allOf`, `not`, `if`, `enum`, `const`) and no
///   `properties`, which is refused, as is any other `type`; a `type` array
///   containing `"object"` (e.g. `["object","null"]`) is narrowed to
///   `"object"`. A missing `properties` is added as `{}`.
/// * Nested `$id` does not change how refs resolve: every `#...` ref is a
///   pointer into the whole `inputSchema`.
///
/// MCP servers (mostly generated from Pydantic or zod models) share pieces of
/// their argument schemas under `$defs` (draft-07: `definitions`) and pull them
/// in with `$ref`. Many OpenAI-compatible providers reject `$ref`, unresolved
/// pointers or a `null` schema, so this module builds a self-contained copy:
///
/// * every local `$ref` (`#/$defs/..`, `#/definitions/..`, any JSON pointer
///   into the same document with `~0`/`~1` and percent-encoding decoded, or an
///   absolute ref whose base is the root `$id`) is replaced by a copy of its
///   target; a definition used twice is copied twice;
/// * recursion, refs to other documents (`https://..`, `file://..`,
///   `other.json#..`), anchors, `$dynamicRef` and missing targets are errors
///   naming the JSON pointer of the offending `$ref`; nothing is fetched, the
///   conversion does no I/O;
/// * [`Limits`] cap the expansion, so a schema that doubles at every level
///   cannot exhaust memory or the stack;
/// * `$defs`, `definitions`, `$schema`, `$id`, `$anchor`, `$comment` and the
///   other core `$`-keywords are removed from every schema object;
/// * the top level is always an object schema with `properties`.
///
/// A fragment standing where a schema belongs but not being one (a string in
/// `properties`, a number in `anyOf`) is dropped instead of failing the tool;
/// [`convert`] lists them for a warning. Values of non-schema keywords
/// (`enum`, `const`, `default`, `examples`, unknown extensions) are copied
/// untouched, even when they hold a `$ref` key. Keys come out in
/// `serde_json::Map` order (sorted, `preserve_order` is off), so equal input
/// gives byte-identical output.
pub fn convert(schema: Option<&Value>, limits: &Limits) -> Result<Conversion, SchemaError> {
    let root = match schema {
        None | Some(Value::Null) | Some(Value::Bool(true)) => {
            return Ok(Conversion {
                parameters: empty_parameters(),
                dropped: Vec::new(),
            });
        }
        Some(root @ Value::Object(_)) => root,
        Some(Value::Bool(false)) => return Err(not_object("", REJECT_ALL.into())),
        Some(other) => {
            return Err(not_object(
                "",
                format!("{} instead of a schema object", json_kind(other)),
            ));
        }
    };
    let root_base = root
        .get("$id")
        .and_then(Value::as_str)
        .map(|id| id.split_once('#').map_or(id, |(base, _)| base))
        .filter(|base| !base.is_empty());
    let mut expander = Expander {
        root,
        root_base,
        limits,
        nodes: 0,
        at: String::new(),
        active: vec![String::new()],
        dropped: Vec::new(),
    };
    let expanded = expander.schema(root, 0)?;
    // A `type` that came in through a root `$ref` is not at `/type`.
    let type_at = if root.get("type").is_some() {
        "/type"
    } else {
        ""
    };
    Ok(Conversion {
        parameters: finish_root(expanded, type_at)?,
        dropped: expander.dropped,
    })
}

/// `{"type":"object","properties":{}}`, the schema of a tool without arguments.
fn empty_parameters() -> Value {
    json!({"type": "object", "properties": {}})
}

/// How a `false` root is described in [`SchemaErrorKind::NotObject`].
const REJECT_ALL: &str = "`false` (a schema that accepts nothing)";

/// Keywords that alone (without `properties`) mean the root is not simply
/// "an object with these arguments".
const ROOT_COMBINATORS: [&str; 7] = ["anyOf", "oneOf", "allOf", "not", "if", "enum", "const"];

/// Applies the top-level rules to the inlined root.
/// `type_at` is the pointer to blame for a wrong `type`.
fn finish_root(expanded: Option<Value>, type_at: &str) -> Result<Value, SchemaError> {
    let mut map = match expanded {
        Some(Value::Object(map)) => map,
        Some(Value::Bool(false)) => {
            return Err(not_object("", REJECT_ALL.into()));
        }
        _ => return Ok(empty_parameters()),
    };
    match map.get("type") {
        None => {
            if !map.contains_key("properties")
                && let Some(key) = ROOT_COMBINATORS.iter().find(|k| map.contains_key(**k))
            {
                return Err(not_object(
                    "",
                    format!("a schema with `{key}` and no `type`"),
                ));
            }
            map.insert("type".into(), Value::String("object".into()));
        }
        Some(Value::String(t)) if t == "object" => {}
        Some(Value::Array(types)) if types.iter().any(|t| t == "object") => {
            map.insert("type".into(), Value::String("object".into()));
        }
        Some(other) => return Err(not_object(type_at, format!("`\"type\": {other}`"))),
    }
    if !map.get("properties").is_some_and(Value::is_object) {
        map.insert("properties".into(), Value::Object(Map::new()));
    }
    Ok(Value::Object(map))
}

fn not_object(pointer: &str, found: String) -> SchemaError {
    SchemaError {
        kind: SchemaErrorKind::NotObject { found },
        pointer: pointer.into(),
    }
}

/// Keywords whose value is a single schema (`items` also takes a list).
#[rustfmt::skip]
const ONE_SCHEMA: [&str; 12] = [
    "items", "additionalItems", "additionalProperties", "unevaluatedItems",
    "unevaluatedProperties", "propertyNames", "contains", "not", "if", "then", "else",
    "contentSchema",
];

/// Walks the schema, copying it with every `$ref` replaced by its target.
struct Expander<'a> {
    /// The whole original document; every local pointer resolves against it.
    root: &'a Value,
    /// The root `$id` without fragment; refs starting with it are local.
    root_base: Option<&'a str>,
    limits: &'a Limits,
    /// JSON values produced so far.
    nodes: usize,
    /// JSON pointer (in the original document) of the value being copied.
    at: String,
    /// Pointers of the schemas being expanded on the current path (the root
    /// first). Per path, so a definition used twice (a diamond) is fine.
    active: Vec<String>,
    dropped: Vec<String>,
}

type Step<T> = Result<T, SchemaError>;

impl<'a> Expander<'a> {
    fn fail(&self, kind: SchemaErrorKind) -> SchemaError {
        SchemaError {
            kind,
            pointer: self.at.clone(),
        }
    }

    /// Counts one produced value at `depth` and enforces the limits.
    fn count(&mut self, depth: usize) -> Step<()> {
        if depth > self.limits.max_depth {
            let max_depth = self.limits.max_depth;
            return Err(self.fail(SchemaErrorKind::TooDeep { max_depth }));
        }
        self.nodes += 1;
        if self.nodes > self.limits.max_nodes {
            let max_nodes = self.limits.max_nodes;
            return Err(self.fail(SchemaErrorKind::TooLarge { max_nodes }));
        }
        Ok(())
    }

    /// Runs `step` with `token` appended to the current pointer.
    fn within<T>(&mut self, token: &str, step: impl FnOnce(&mut Self) -> T) -> T {
        let len = self.at.len();
        self.at.push('/');
        push_escaped(&mut self.at, token);
        let out = step(self);
        self.at.truncate(len);
        out
    }

    fn drop_here(&mut self) {
        if !self.dropped.contains(&self.at) {
            self.dropped.push(self.at.clone());
        }
    }

    /// Copies one schema. `None` means "not a schema, dropped".
    fn schema(&mut self, node: &'a Value, depth: usize) -> Step<Option<Value>> {
        let map = match node {
            Value::Object(map) => map,
            Value::Bool(b) => {
                self.count(depth)?;
                return Ok(Some(Value::Bool(*b)));
            }
            _ => {
                self.drop_here();
                return Ok(None);
            }
        };
        self.count(depth)?;
        let target = match map.get("$ref") {
            Some(reference) => Some(self.within("$ref", |s| s.follow(reference, depth + 1))?),
            None => None,
        };
        let mut out = Map::new();
        for (key, value) in map {
            if let Some(copy) = self.within(key, |s| s.keyword(key, value, depth + 1))? {
                out.insert(key.clone(), copy);
            }
        }
        Ok(Some(match target {
            Some(target) => merge(target, out),
            None => Value::Object(out),
        }))
    }

    /// Copies the value of keyword `key`; `None` leaves the keyword out.
    fn keyword(&mut self, key: &str, value: &'a Value, depth: usize) -> Step<Option<Value>> {
        match key {
            "$ref" | "$schema" | "$id" | "$anchor" | "$dynamicAnchor" | "$recursiveAnchor"
            | "$vocabulary" | "$comment" | "$defs" | "definitions" => Ok(None),
            "$dynamicRef" | "$recursiveRef" => Err(self.fail(SchemaErrorKind::BadRef {
                reference: value.to_string(),
                reason: format!("{key} needs dynamic scoping, which is not supported"),
            })),
            "items" if value.is_array() => self.schema_list(value, depth),
            k if ONE_SCHEMA.contains(&k) => self.schema(value, depth),
            "allOf" | "anyOf" | "oneOf" | "prefixItems" => self.schema_list(value, depth),
            "properties" | "patternProperties" | "dependentSchemas" => {
                self.schema_map(value, depth, false)
            }
            // Draft-07: each entry is a schema or a list of property names.
            "dependencies" => self.schema_map(value, depth, true),
            _ => self.data(value, depth).map(Some),
        }
    }

    /// Copies an array of schemas, dropping entries that are not schemas.
    fn schema_list(&mut self, value: &'a Value, depth: usize) -> Step<Option<Value>> {
        let Value::Array(items) = value else {
            self.drop_here();
            return Ok(None);
        };
        self.count(depth)?;
        let mut out = Vec::with_capacity(items.len());
        for (index, item) in items.iter().enumerate() {
            if let Some(copy) = self.within(&index.to_string(), |s| s.schema(item, depth + 1))? {
                out.push(copy);
            }
        }
        if out.is_empty() && !items.is_empty() {
            return Ok(None);
        }
        Ok(Some(Value::Array(out)))
    }

    /// Copies a name → schema map, dropping entries that are not schemas.
    /// With `name_lists`, array entries are copied as data (`dependencies`).
    fn schema_map(
        &mut self,
        value: &'a Value,
        depth: usize,
        name_lists: bool,
    ) -> Step<Option<Value>> {
        let Value::Object(entries) = value else {
            self.drop_here();
            return Ok(None);
        };
        self.count(depth)?;
        let mut out = Map::new();
        for (name, entry) in entries {
            let copy = self.within(name, |s| {
                if name_lists && entry.is_array() {
                    s.data(entry, depth + 1).map(Some)
                } else {
                    s.schema(entry, depth + 1)
                }
            })?;
            if let Some(copy) = copy {
                out.insert(name.clone(), copy);
            }
        }
        Ok(Some(Value::Object(out)))
    }

    /// Copies a non-schema value verbatim (still counted against the limits).
    fn data(&mut self, value: &'a Value, depth: usize) -> Step<Value> {
        self.count(depth)?;
        Ok(match value {
            Value::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for (index, item) in items.iter().enumerate() {
                    out.push(self.within(&index.to_string(), |s| s.data(item, depth + 1))?);
                }
                Value::Array(out)
            }
            Value::Object(map) => {
                let mut out = Map::new();
                for (key, item) in map {
                    out.insert(key.clone(), self.within(key, |s| s.data(item, depth + 1))?);
                }
                Value::Object(out)
            }
            scalar => scalar.clone(),
        })
    }

    /// Resolves the `$ref` value found at `self.at` and copies its target.
    fn follow(&mut self, reference: &'a Value, depth: usize) -> Step<Value> {
        let Value::String(text) = reference else {
            return Err(self.fail(SchemaErrorKind::BadRef {
                reference: reference.to_string(),
                reason: format!("$ref must be a string, found {}", json_kind(reference)),
            }));
        };
        let tokens = self.parse_ref(text)?;
        let pointer = tokens.iter().fold(String::new(), |mut acc, token| {
            acc.push('/');
            push_escaped(&mut acc, token);
            acc
        });
        if let Some(start) = self.active.iter().position(|p| *p == pointer) {
            let mut chain = self.active[start..].to_vec();
            chain.push(pointer);
            let reference = text.clone();
            return Err(self.fail(SchemaErrorKind::Cycle { reference, chain }));
        }
        let Some(target) = resolve(self.root, &tokens) else {
            let reference = text.clone();
            return Err(self.fail(SchemaErrorKind::MissingTarget { reference }));
        };
        if !(target.is_object() || target.is_boolean()) {
            let (reference, found) = (text.clone(), json_kind(target));
            return Err(self.fail(SchemaErrorKind::TargetNotSchema { reference, found }));
        }
        let saved = std::mem::replace(&mut self.at, pointer.clone());
        self.active.push(pointer);
        let copied = self.schema(target, depth);
        self.active.pop();
        self.at = saved;
        // The target was checked to be an object or boolean, which always copies.
        Ok(copied?.unwrap_or(Value::Bool(true)))
    }

    /// Splits a local `$ref` into decoded JSON-pointer tokens.
    fn parse_ref(&self, text: &str) -> Step<Vec<String>> {
        let (base, fragment) = text.split_once('#').unwrap_or((text, ""));
        if !base.is_empty() && Some(base) != self.root_base {
            let reference = text.to_owned();
            return Err(self.fail(SchemaErrorKind::RemoteRef { reference }));
        }
        let bad = |reason: &str| {
            self.fail(SchemaErrorKind::BadRef {
                reference: Value::String(text.to_owned()).to_string(),
                reason: reason.to_owned(),
            })
        };
        let decoded = percent_decode(fragment)
            .ok_or_else(|| bad("the fragment has invalid percent-encoding"))?;
        if decoded.is_empty() {
            return Ok(Vec::new());
        }
        let Some(rest) = decoded.strip_prefix('/') else {
            return Err(bad(
                "named anchors are not supported, only JSON pointers (#/...)",
            ));
        };
        rest.split('/')
            .map(unescape_token)
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| bad("`~` in a JSON pointer must be followed by 0 or 1"))
    }
}

/// Merges a copied `$ref` target with the copied keywords beside the ref;
/// the rule is documented on [`convert`].
fn merge(target: Value, siblings: Map<String, Value>) -> Value {
    if siblings.is_empty() {
        return target;
    }
    let mut base = match target {
        Value::Object(map) => map,
        Value::Bool(false) => Map::from_iter([("not".to_owned(), json!({}))]),
        _ => Map::new(),
    };
    for (key, value) in siblings {
        let merged = match (key.as_str(), base.remove(&key), value) {
            ("properties", Some(Value::Object(mut mine)), Value::Object(theirs)) => {
                mine.extend(theirs);
                Value::Object(mine)
            }
            ("required", Some(Value::Array(mut mine)), Value::Array(theirs)) => {
                for name in theirs {
                    if !mine.contains(&name) {
                        mine.push(name);
                    }
                }
                Value::Array(mine)
            }
            (_, _, value) => value,
        };
        base.insert(key, merged);
    }
    Value::Object(base)
}

/// Follows decoded pointer tokens from the document root (RFC 6901).
fn resolve<'v>(root: &'v Value, tokens: &[String]) -> Option<&'v Value> {
    tokens.iter().try_fold(root, |node, token| match node {
        Value::Object(map) => map.get(token),
        Value::Array(items) => {
            let canonical = token == "0" || (!token.starts_with('0') && !token.is_empty());
            if !canonical || !token.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            items.get(token.parse::<usize>().ok()?)
        }
        _ => None,
    })
}

/// Decodes `%XX` escapes of a URI fragment; `None` if malformed or not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Undoes `~1` → `/` and `~0` → `~` in one pointer token.
fn unescape_token(token: &str) -> Option<String> {
    let mut out = String::with_capacity(token.len());
    let mut chars = token.chars();
    while let Some(c) = chars.next() {
        if c == '~' {
            match chars.next()? {
                '0' => out.push('~'),
                '1' => out.push('/'),
                _ => return None,
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

/// `name` as one JSON-pointer token (RFC 6901): `~` and `/` escaped.
pub fn pointer_token(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    push_escaped(&mut out, name);
    out
}

/// Appends `token` to a pointer with `~` and `/` escaped.
fn push_escaped(pointer: &mut String, token: &str) {
    for c in token.chars() {
        match c {
            '~' => pointer.push_str("~0"),
            '/' => pointer.push_str("~1"),
            c => pointer.push(c),
        }
    }
}

#[cfg(test)]
#[path = "schema_tests.rs"]
mod tests;
