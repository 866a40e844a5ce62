//! The hand-call form: one field per property of a tool's input schema, typed by the schema
//! (text, number, integer, yes/no, a choice among its `enum` or `const` values, and JSON edited
//! in place for arrays, nested objects and anything else), required ones marked, defaults filled
//! in, descriptions as hints. Every key re-checks the arguments against the whole schema
//! (`turnscope::tools::validate`), so what would be refused is shown, field by field, before
//! anything is sent.
//!
//! Pure view state: it edits text and builds a JSON object; the input layer decides what keys
//! mean and the loop makes the call.

use std::cell::Cell;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::{Map, Value};
use turnscope::tools::validate::{ArgError, ArgsCheck};

use super::line_edit::{Edit, LineEdit};
use super::nav::Follow;

/// How a text field sent as `""` shows.
pub const EMPTY_TEXT: &str = "\"\" (empty text)";

/// How a field is edited.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldKind {
    /// A string, typed as is.
    Text,
    /// A number.
    Number,
    /// A whole number.
    Integer,
    /// `true` / `false` (and unset when optional).
    Bool,
    /// One of these values (and unset when optional).
    Choice(Vec<Value>),
    /// JSON typed in place (arrays, nested objects, anything else).
    Json,
}

impl FieldKind {
    /// What the form says the field takes.
    pub fn label(&self) -> &'static str {
        match self {
            FieldKind::Text => "text",
            FieldKind::Number => "number",
            FieldKind::Integer => "integer",
            FieldKind::Bool => "yes/no",
            FieldKind::Choice(_) => "choice",
            FieldKind::Json => "JSON",
        }
    }
}

/// One argument of the tool.
#[derive(Debug, Clone)]
pub struct Field {
    /// The property's name.
    pub name: String,
    /// How it is edited.
    pub kind: FieldKind,
    /// Whether the schema requires it.
    pub required: bool,
    /// The schema's description, shown as a hint.
    pub hint: String,
    /// The schema's default, when it gives one.
    pub default: Option<Value>,
    /// The text typed (text, number, integer and JSON fields).
    pub text: LineEdit,
    /// The value picked (yes/no and choice fields); `None` is unset.
    pub picked: Option<Value>,
    /// A text field left empty on purpose: it sends `""` rather than nothing (`Del` on the
    /// empty field switches; typing clears it).
    pub empty_text: bool,
}

impl Field {
    /// The value the field gives, `None` when it is left empty, or why its text is not one.
    pub fn value(&self) -> Result<Option<Value>, String> {
        let text = self.text.text();
        match &self.kind {
            FieldKind::Bool | FieldKind::Choice(_) => Ok(self.picked.clone()),
            FieldKind::Text if text.is_empty() && self.empty_text => {
                Ok(Some(Value::String(String::new())))
            }
            _ if text.is_empty() => Ok(None),
            FieldKind::Text => Ok(Some(Value::String(text))),
            FieldKind::Number => number(text.trim()).map(Some),
            FieldKind::Integer => integer(text.trim()).map(Some),
            FieldKind::Json => serde_json::from_str::<Value>(&text)
                .map(Some)
                .map_err(|e| format!("not JSON yet: {e}")),
        }
    }

    /// The field's value as one line, for the form.
    pub fn shown(&self) -> String {
        match &self.kind {
            FieldKind::Bool | FieldKind::Choice(_) => match &self.picked {
                Some(Value::String(s)) => s.clone(),
                Some(v) => v.to_string(),
                None => "(unset)".into(),
            },
            FieldKind::Text if self.empty_text && self.text.text().is_empty() => EMPTY_TEXT.into(),
            _ => self.text.text(),
        }
    }

    /// The choices a yes/no or choice field steps through: a choice's unset first when
    /// optional; a yes/no's `false`, `true`, then unset (so a step from `false` is `true`).
    fn choices(&self) -> Vec<Option<Value>> {
        let mut out: Vec<Option<Value>> = Vec::new();
        match &self.kind {
            FieldKind::Bool => {
                out.extend([Some(Value::Bool(false)), Some(Value::Bool(true))]);
                if !self.required {
                    out.push(None);
                }
            }
            FieldKind::Choice(values) => {
                if !self.required {
                    out.push(None);
                }
                out.extend(values.iter().cloned().map(Some));
            }
            _ => {}
        }
        out
    }

    /// Steps a yes/no or choice field by `delta`.
    fn step(&mut self, delta: isize) {
        let choices = self.choices();
        if choices.is_empty() {
            return;
        }
        let len = choices.len() as isize;
        // From unset (a required one's, which is not among its choices): → the first, ← the last.
        let next = match choices.iter().position(|c| *c == self.picked) {
            Some(at) => (at as isize + delta).rem_euclid(len),
            None if delta > 0 => 0,
            None => len - 1,
        };
        self.picked = choices[next as usize].clone();
    }
}

/// The form of one tool.
#[derive(Debug)]
pub struct Form {
    /// The tool called.
    pub tool: String,
    /// Its fields, required ones first, each group by name (the workspace's `serde_json` keeps
    /// objects sorted, so the schema's own order is gone before here).
    pub fields: Vec<Field>,
    /// The field being edited.
    pub cursor: usize,
    /// Why the schema cannot check arguments, when it cannot (they go out unchecked).
    pub unchecked: Option<String>,
    /// Lines scrolled down, kept in range by the drawing.
    pub scroll: Cell<usize>,
    /// What the drawing keeps in sight: the field edited after a key that moves or edits,
    /// the answer after a send, nothing after PgUp/PgDn or the wheel.
    pub follow: Cell<Follow>,
    check: ArgsCheck,
    /// Each field's problem (its text is not a value yet) and what the schema says of the
    /// arguments as they stand.
    problems: Vec<(String, String)>,
}

/// What a key did to the form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormKey {
    /// Nothing to do outside the form.
    Handled,
    /// Enter: send, if the arguments pass.
    Send,
    /// Esc: close the form.
    Close,
}

impl Form {
    /// A form for `tool` from its input schema, filled from `values` (a call being edited
    /// again) or else from the schema's defaults.
    pub fn new(tool: &str, schema: &Value, values: Option<&Value>) -> Form {
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut fields: Vec<Field> = schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|props| {
                props
                    .iter()
                    .map(|(name, p)| field(name, p, required.contains(&name.as_str())))
                    .collect()
            })
            .unwrap_or_default();
        fields.sort_by_key(|f| !f.required);
        // Arguments the schema does not list (an edited call's extras) stay editable too.
        if let Some(Value::Object(given)) = values {
            for (name, value) in given {
                if !fields.iter().any(|f| &f.name == name) {
                    let mut extra = field(name, &Value::Bool(true), false);
                    extra.kind = FieldKind::Json;
                    fields.push(extra);
                }
                if let Some(f) = fields.iter_mut().find(|f| &f.name == name) {
                    fill(f, Some(value));
                }
            }
            for f in fields.iter_mut() {
                if !given.contains_key(&f.name) {
                    fill(f, None);
                }
            }
        }
        let check = ArgsCheck::new(schema);
        let mut form = Form {
            tool: tool.to_string(),
            fields,
            cursor: 0,
            unchecked: check.problem().map(str::to_string),
            scroll: Cell::new(0),
            follow: Cell::new(Follow::Cursor),
            check,
            problems: Vec::new(),
        };
        form.recheck();
        form
    }

    /// The arguments as they stand: every field with a value. Fields whose text is not a value
    /// yet are left out (and named in [`Form::problems`]).
    pub fn arguments(&self) -> Value {
        let mut out = Map::new();
        for f in &self.fields {
            if let Ok(Some(v)) = f.value() {
                out.insert(f.name.clone(), v);
            }
        }
        Value::Object(out)
    }

    /// Bytes of text typed in its fields (a kept draft's cost).
    pub fn typed_bytes(&self) -> usize {
        self.fields.iter().map(|f| f.text.text().len()).sum()
    }

    /// What is wrong now, as (field label, message): fields that do not parse, then what the
    /// schema says. Empty: the call can be sent.
    pub fn problems(&self) -> &[(String, String)] {
        &self.problems
    }

    /// The problems of the field named `name`: its own, and the schema's within it, named by
    /// their place in it (`adults: required, and missing`).
    pub fn problems_of(&self, name: &str) -> Vec<String> {
        self.problems
            .iter()
            .filter_map(|(field, m)| {
                if field == name {
                    Some(m.clone())
                } else if let Some(rest) = field.strip_prefix(&format!("{name}.")) {
                    Some(format!("{rest}: {m}"))
                } else {
                    field
                        .strip_prefix(name)
                        .filter(|rest| rest.starts_with('['))
                        .map(|rest| format!("{rest}: {m}"))
                }
            })
            .collect()
    }

    fn recheck(&mut self) {
        let mut problems = Vec::new();
        for f in &self.fields {
            if let Err(e) = f.value() {
                problems.push((f.name.clone(), e));
            }
        }
        let args = self.arguments();
        // A field whose text is not a value yet is "missing" only because of that: its own
        // problem is the one to say.
        let unparsed: Vec<String> = problems.iter().map(|(f, _)| f.clone()).collect();
        problems.extend(
            self.check
                .errors(&args)
                .iter()
                .filter(|e| !(e.rule == "required" && unparsed.contains(&e.field())))
                .map(|e: &ArgError| {
                    let field = e.field();
                    let kind = self
                        .fields
                        .iter()
                        .find(|f| f.name == field)
                        .map(|f| &f.kind);
                    let message = if e.rule == "required" && kind == Some(&FieldKind::Text) {
                        format!("{} ({}): type it, or Del for empty text", e.message, e.rule)
                    } else if e.rule == "required"
                        && matches!(kind, Some(FieldKind::Bool | FieldKind::Choice(_)))
                    {
                        format!("{} ({}): ← → picks one", e.message, e.rule)
                    } else {
                        format!("{} ({})", e.message, e.rule)
                    };
                    (field, message)
                }),
        );
        self.problems = problems;
    }

    /// Applies one key: move between fields, edit the current one, send, or close.
    pub fn key(&mut self, key: &KeyEvent) -> FormKey {
        let n = self.fields.len();
        match key.code {
            KeyCode::Esc => return FormKey::Close,
            KeyCode::Enter => return FormKey::Send,
            _ => self.follow.set(Follow::Cursor),
        }
        match key.code {
            KeyCode::Up | KeyCode::BackTab => {
                self.cursor = self.cursor.saturating_sub(1);
                return FormKey::Handled;
            }
            KeyCode::Down | KeyCode::Tab => {
                self.cursor = (self.cursor + 1).min(n.saturating_sub(1));
                return FormKey::Handled;
            }
            _ => {}
        }
        let Some(f) = self.fields.get_mut(self.cursor) else {
            return FormKey::Handled;
        };
        let changed = match f.kind {
            FieldKind::Bool | FieldKind::Choice(_) => match key.code {
                KeyCode::Left => {
                    f.step(-1);
                    true
                }
                // Space on a yes/no flips it (unset becomes yes); Del unsets it.
                KeyCode::Char(' ') if f.kind == FieldKind::Bool => {
                    f.picked = Some(Value::Bool(f.picked != Some(Value::Bool(true))));
                    true
                }
                KeyCode::Right | KeyCode::Char(' ') => {
                    f.step(1);
                    true
                }
                KeyCode::Backspace | KeyCode::Delete if !f.required => {
                    f.picked = None;
                    true
                }
                _ => false,
            },
            // `Del` on an empty text field: send `""`, or nothing again.
            FieldKind::Text if key.code == KeyCode::Delete && f.text.text().is_empty() => {
                f.empty_text = !f.empty_text;
                true
            }
            _ => {
                // Ctrl+Enter-less terminals: Alt+key combinations stay the line editor's.
                if key.modifiers.contains(KeyModifiers::CONTROL)
                    && matches!(key.code, KeyCode::Char('j'))
                {
                    false
                } else if f.text.key(key) == Edit::Changed {
                    f.empty_text = false;
                    true
                } else {
                    false
                }
            }
        };
        if changed {
            self.recheck();
        }
        FormKey::Handled
    }

    /// Pastes `text` into the field being edited, when it takes text (a yes/no or a choice
    /// does not).
    pub fn paste(&mut self, text: &str) {
        let Some(f) = self.fields.get_mut(self.cursor) else {
            return;
        };
        if matches!(f.kind, FieldKind::Bool | FieldKind::Choice(_)) {
            return;
        }
        self.follow.set(Follow::Cursor);
        if f.text.paste(text) == Edit::Changed {
            self.recheck();
        }
    }

    /// Moves the cursor to the first field with a problem.
    pub fn to_first_problem(&mut self) {
        let Some((label, _)) = self.problems.first() else {
            return;
        };
        let name = label
            .split(['.', '['])
            .next()
            .unwrap_or(label.as_str())
            .to_string();
        if let Some(i) = self.fields.iter().position(|f| f.name == name) {
            self.cursor = i;
            self.follow.set(Follow::Cursor);
        }
    }
}

/// The field of property `name` described by `schema`.
fn field(name: &str, schema: &Value, required: bool) -> Field {
    let kind = kind_of(schema);
    let hint = schema
        .get("description")
        .or_else(|| schema.get("title"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let mut f = Field {
        name: name.to_string(),
        kind,
        required,
        hint,
        default: schema.get("default").cloned(),
        text: LineEdit::default(),
        picked: None,
        empty_text: false,
    };
    // A `null` default (pydantic's `Optional[T] = None`) is what sending nothing gives: the
    // field starts empty, typed as its one other type.
    let start = f
        .default
        .clone()
        .filter(|d| !d.is_null())
        .or_else(|| match (&f.kind, required) {
            (FieldKind::Json, true) => Some(skeleton(schema)),
            _ => None,
        });
    // A required choice without a default starts unset, said missing until one is picked:
    // on its first value, Enter sent a value nobody chose (tour S L3).
    fill(&mut f, start.as_ref());
    f
}

/// `{}` for an object, `[]` for an array: somewhere to start typing.
fn skeleton(schema: &Value) -> Value {
    match schema.get("type").and_then(Value::as_str) {
        Some("array") => Value::Array(Vec::new()),
        _ => Value::Object(Map::new()),
    }
}

/// Puts `value` into the field (or empties it).
fn fill(f: &mut Field, value: Option<&Value>) {
    match (&f.kind, value) {
        (FieldKind::Bool | FieldKind::Choice(_), v) => f.picked = v.cloned(),
        (_, None) => {
            f.text = LineEdit::default();
            f.empty_text = false;
        }
        (FieldKind::Text, Some(Value::String(s))) => {
            f.text = LineEdit::new(s);
            f.empty_text = s.is_empty();
        }
        (FieldKind::Number | FieldKind::Integer, Some(Value::Number(n))) => {
            f.text = LineEdit::new(&n.to_string())
        }
        (FieldKind::Json, Some(v)) => f.text = LineEdit::new(&v.to_string()),
        (_, Some(other)) => {
            // A value of another kind than the schema says: edit it as JSON.
            f.kind = FieldKind::Json;
            f.text = LineEdit::new(&other.to_string());
        }
    }
}

/// How a property is edited: by its `type`, its `enum`, or its `oneOf`/`anyOf` of constants
/// (how schemars and pydantic write an enum whose values carry descriptions); a `oneOf`/`anyOf`
/// of one schema and `{"type": "null"}` (how pydantic writes `Optional[T]`) as that one schema,
/// as `"type": ["T", "null"]` is; JSON otherwise.
fn kind_of(schema: &Value) -> FieldKind {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return FieldKind::Choice(values.clone());
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(branches) = schema.get(key).and_then(Value::as_array) {
            let real: Vec<&Value> = branches.iter().filter(|b| !is_null_type(b)).collect();
            let consts: Option<Vec<Value>> = real.iter().map(|b| b.get("const").cloned()).collect();
            if let Some(values) = consts
                && !values.is_empty()
            {
                return FieldKind::Choice(values);
            }
            if let [one] = real.as_slice()
                && real.len() < branches.len()
            {
                return kind_of(one);
            }
        }
    }
    if let Some(value) = schema.get("const") {
        return FieldKind::Choice(vec![value.clone()]);
    }
    let ty = match schema.get("type") {
        Some(Value::String(t)) => Some(t.as_str()),
        // `["string", "null"]`: the one type besides null.
        Some(Value::Array(types)) => {
            let real: Vec<&str> = types
                .iter()
                .filter_map(Value::as_str)
                .filter(|t| *t != "null")
                .collect();
            (real.len() == 1).then(|| real[0])
        }
        _ => None,
    };
    match ty {
        Some("string") => FieldKind::Text,
        Some("number") => FieldKind::Number,
        Some("integer") => FieldKind::Integer,
        Some("boolean") => FieldKind::Bool,
        _ => FieldKind::Json,
    }
}

/// Whether a `oneOf`/`anyOf` branch takes only `null` (`{"type": "null"}`).
fn is_null_type(branch: &Value) -> bool {
    branch.get("type").and_then(Value::as_str) == Some("null")
        || branch.get("const") == Some(&Value::Null)
}

/// A typed number: a whole one stays one (`2`, not `2.0`), as the person typed it. Rust reads
/// `NaN` and `inf` as numbers, which JSON has no way to write: said so, apart from a number
/// too large for a `f64` (`1e999`).
fn number(text: &str) -> Result<Value, String> {
    if let Ok(n) = text.parse::<i64>() {
        return Ok(Value::from(n));
    }
    match text.parse::<f64>() {
        Ok(n) if n.is_finite() => serde_json::Number::from_f64(n)
            .map(Value::Number)
            .ok_or_else(|| format!("{text:?} is not a number JSON can hold")),
        Ok(_)
            if text
                .trim_start_matches(['+', '-'])
                .chars()
                .all(|c| c.is_ascii_alphabetic()) =>
        {
            Err(format!(
                "{text:?} is not a number JSON can hold (it has no NaN or infinity)"
            ))
        }
        Ok(_) => Err(format!("{text:?} is too large for a JSON number")),
        Err(_) => Err(format!("{text:?} is not a number")),
    }
}

/// A typed whole number: any that fits 64 bits (signed, or unsigned above `i64::MAX`), also
/// written with an exponent or a zero fraction (`1e3`, `3.0`: JSON Schema's `integer` takes
/// them), sent as a whole number; a longer one is said to be out of range rather than "not a
/// whole number".
fn integer(text: &str) -> Result<Value, String> {
    use std::num::IntErrorKind;
    let out_of_range = || {
        format!(
            "{text:?} is out of range: a whole number here is from \
             -9223372036854775808 to 18446744073709551615"
        )
    };
    match text.parse::<i64>() {
        Ok(n) => Ok(Value::from(n)),
        Err(e) => match (e.kind(), text.parse::<u64>()) {
            (_, Ok(n)) => Ok(Value::from(n)),
            (IntErrorKind::PosOverflow | IntErrorKind::NegOverflow, _) => Err(out_of_range()),
            _ => match text.parse::<f64>() {
                Ok(n) if n.is_finite() && n.fract() == 0.0 => {
                    // 2^63 and 2^64 as f64: the bounds of the two ranges, exactly.
                    if (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&n) {
                        Ok(Value::from(n as i64))
                    } else if (0.0..18_446_744_073_709_551_616.0).contains(&n) {
                        Ok(Value::from(n as u64))
                    } else {
                        Err(out_of_range())
                    }
                }
                Ok(n)
                    if n.is_infinite()
                        && !text
                            .trim_start_matches(['+', '-'])
                            .starts_with(|c: char| c.is_ascii_alphabetic()) =>
                {
                    Err(out_of_range())
                }
                _ => Err(format!("{text:?} is not a whole number")),
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn type_text(form: &mut Form, text: &str) {
        for c in text.chars() {
            form.key(&key(KeyCode::Char(c)));
        }
    }

    fn trip() -> Value {
        json!({
            "type": "object",
            "properties": {
                "breakfast": {"type": "boolean", "default": false, "description": "Whether breakfast is wanted."},
                "city": {"type": "string", "description": "Where to go."},
                "nights": {"type": "integer", "minimum": 1},
                "party": {"type": "object", "properties": {"adults": {"type": "integer", "minimum": 1}}, "required": ["adults"]},
                "tags": {"type": "array", "items": {"type": "string"}},
                "units": {"default": "metric", "oneOf": [{"const": "metric"}, {"const": "imperial"}]}
            },
            "required": ["city", "nights", "party"]
        })
    }

    #[test]
    fn a_number_too_long_is_said_too_large_not_malformed() {
        assert_eq!(integer("18446744073709551615"), Ok(json!(u64::MAX)));
        assert_eq!(integer("-3"), Ok(json!(-3)));
        let long = integer("99999999999999999999").unwrap_err();
        assert!(long.contains("is out of range"), "{long}");
        let low = integer("-99999999999999999999").unwrap_err();
        assert!(low.contains("is out of range"), "{low}");
        assert!(integer("3.5").unwrap_err().contains("not a whole number"));
        let mut form = Form::new(
            "f",
            &json!({"type": "object", "properties": {"r": {"type": "number"}}}),
            None,
        );
        type_text(&mut form, "1e999");
        assert!(form.problems_of("r")[0].contains("too large for a JSON number"));
    }

    #[test]
    fn fields_follow_the_schema_and_problems_show_before_sending() {
        let mut form = Form::new("plan_trip", &trip(), None);
        let names: Vec<&str> = form.fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            ["city", "nights", "party", "breakfast", "tags", "units"]
        );
        let kinds: Vec<&str> = form.fields.iter().map(|f| f.kind.label()).collect();
        assert_eq!(
            kinds,
            ["text", "integer", "JSON", "yes/no", "JSON", "choice"]
        );
        assert_eq!(form.fields[2].text.text(), "{}");
        assert_eq!(form.fields[5].shown(), "metric");
        let problems: Vec<String> = form.problems().iter().map(|(f, _)| f.clone()).collect();
        assert!(problems.contains(&"city".to_string()), "{problems:?}");
        assert!(
            problems.contains(&"party.adults".to_string()),
            "{problems:?}"
        );

        type_text(&mut form, "Oslo");
        form.key(&key(KeyCode::Down));
        type_text(&mut form, "x");
        assert!(form.problems_of("nights")[0].contains("not a whole number"));
        form.key(&key(KeyCode::Backspace));
        type_text(&mut form, "3");
        form.key(&key(KeyCode::Down));
        form.key(&key(KeyCode::Backspace));
        type_text(&mut form, "\"adults\": 2}");
        form.cursor = 5;
        form.key(&key(KeyCode::Right));
        assert!(form.problems().is_empty(), "{:?}", form.problems());
        assert_eq!(
            form.arguments(),
            json!({"city": "Oslo", "nights": 3, "party": {"adults": 2}, "breakfast": false, "units": "imperial"})
        );
        assert_eq!(form.key(&key(KeyCode::Enter)), FormKey::Send);
    }

    #[test]
    fn a_whole_number_in_a_number_field_is_sent_as_typed() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}});
        let mut form = Form::new("get-sum", &schema, None);
        type_text(&mut form, "2");
        form.key(&key(KeyCode::Down));
        type_text(&mut form, "3.5");
        assert_eq!(form.arguments().to_string(), r#"{"a":2,"b":3.5}"#);
    }

    #[test]
    fn an_edited_call_fills_the_form_again() {
        let given = json!({"city": "Rome", "nights": 2, "party": {"adults": 1}, "tags": ["a"]});
        let form = Form::new("plan_trip", &trip(), Some(&given));
        assert_eq!(form.fields[0].text.text(), "Rome");
        assert_eq!(form.fields[4].text.text(), "[\"a\"]");
        assert_eq!(form.fields[5].picked, None, "not given: unset");
        assert_eq!(form.arguments(), given);
    }

    #[test]
    fn an_empty_text_can_be_sent_and_an_unparsed_field_says_only_its_own_problem() {
        let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}, "text": {"type": "string"}}, "required": ["n", "text"]});
        let mut form = Form::new("echo", &schema, None);
        assert_eq!(
            form.problems_of("text"),
            ["required, and missing (required): type it, or Del for empty text"]
        );
        // n first: a text that is not a number says so, and only that.
        type_text(&mut form, "abc");
        assert_eq!(form.problems_of("n"), ["\"abc\" is not a whole number"]);
        for _ in 0..3 {
            form.key(&key(KeyCode::Backspace));
        }
        type_text(&mut form, "2");
        form.key(&key(KeyCode::Down));
        form.key(&key(KeyCode::Delete));
        assert!(form.problems().is_empty(), "{:?}", form.problems());
        assert_eq!(form.fields[1].shown(), EMPTY_TEXT);
        assert_eq!(form.arguments(), json!({"n": 2, "text": ""}));
        // Typing then erasing leaves it unset again; an edited call's "" comes back as one.
        type_text(&mut form, "x");
        form.key(&key(KeyCode::Backspace));
        assert_eq!(form.arguments(), json!({"n": 2}));
        let again = Form::new("echo", &schema, Some(&json!({"text": "", "n": 1})));
        assert_eq!(again.arguments(), json!({"n": 1, "text": ""}));
    }

    /// Numbers JSON cannot write are said as such, not "too large" (tour S L2: `NaN` was), and
    /// a whole number written `1e3` or `3.0` is taken by an integer field, as JSON Schema
    /// takes it.
    #[test]
    fn nan_is_not_said_too_large_and_an_integer_takes_an_exponent() {
        let nan = number("NaN").unwrap_err();
        assert!(nan.contains("not a number JSON can hold"), "{nan}");
        assert!(number("-inf").unwrap_err().contains("no NaN or infinity"));
        assert!(number("1e999").unwrap_err().contains("too large"));
        assert_eq!(number("2.5"), Ok(json!(2.5)));
        assert_eq!(integer("1e3"), Ok(json!(1000)));
        assert_eq!(integer("3.0"), Ok(json!(3)));
        assert_eq!(integer("-2e2"), Ok(json!(-200)));
        assert!(integer("2.5").unwrap_err().contains("not a whole number"));
        assert!(integer("1e30").unwrap_err().contains("out of range"));
        assert!(integer("NaN").unwrap_err().contains("not a whole number"));
    }

    /// A required choice with no default starts unset and is said missing, so Enter never
    /// sends a value nobody picked (tour S L3: it started on its first value); → picks the
    /// first, ← the last.
    #[test]
    fn a_required_choice_without_a_default_starts_unset() {
        let schema = json!({"type": "object", "properties": {
            "color": {"enum": ["red", "green", "blue"]},
            "loud": {"type": "boolean"}},
            "required": ["color", "loud"]});
        let mut form = Form::new("kinds", &schema, None);
        assert_eq!(form.fields[0].shown(), "(unset)");
        assert_eq!(form.fields[1].shown(), "(unset)");
        assert_eq!(
            form.problems_of("color"),
            ["required, and missing (required): ← → picks one"]
        );
        form.key(&key(KeyCode::Left));
        assert_eq!(form.arguments(), json!({"color": "blue"}));
        form.key(&key(KeyCode::Right));
        assert_eq!(form.arguments(), json!({"color": "red"}));
        form.key(&key(KeyCode::Down));
        form.key(&key(KeyCode::Right));
        assert_eq!(form.arguments(), json!({"color": "red", "loud": false}));
        assert!(form.problems().is_empty(), "{:?}", form.problems());
    }

    /// `Optional[...]` parameters as the Python MCP SDK (pydantic) writes them: `anyOf` of the
    /// type and `{"type": "null"}`, `default: null`. Each is edited as its one type, starts
    /// empty (nothing sent: the default), and a typed email needs no quotes (tour S M3: they
    /// were JSON fields prefilled `null`).
    #[test]
    fn pydantic_optional_parameters_are_edited_as_their_one_type() {
        let schema = json!({
            "type": "object",
            "properties": {
                "email": {"anyOf": [{"type": "string", "format": "email"}, {"type": "null"}], "default": null, "title": "Email"},
                "count": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": null},
                "ratio": {"oneOf": [{"type": "null"}, {"type": "number"}]},
                "color": {"anyOf": [{"enum": ["red", "green"], "type": "string"}, {"type": "null"}], "default": null},
                "size": {"anyOf": [{"const": "S"}, {"const": "M"}, {"type": "null"}]},
                "either": {"anyOf": [{"type": "integer"}, {"type": "string"}]}
            }
        });
        let mut form = Form::new("kinds", &schema, None);
        let kind = |form: &Form, name: &str| {
            form.fields
                .iter()
                .find(|f| f.name == name)
                .map(|f| f.kind.clone())
                .unwrap()
        };
        assert_eq!(kind(&form, "email"), FieldKind::Text);
        assert_eq!(kind(&form, "count"), FieldKind::Integer);
        assert_eq!(kind(&form, "ratio"), FieldKind::Number);
        assert_eq!(
            kind(&form, "color"),
            FieldKind::Choice(vec![json!("red"), json!("green")])
        );
        assert_eq!(
            kind(&form, "size"),
            FieldKind::Choice(vec![json!("S"), json!("M")])
        );
        assert_eq!(kind(&form, "either"), FieldKind::Json, "two real types");
        assert_eq!(form.arguments(), json!({}), "nothing sent: the defaults");
        assert!(form.problems().is_empty(), "{:?}", form.problems());
        form.cursor = form.fields.iter().position(|f| f.name == "email").unwrap();
        type_text(&mut form, "al@example.com");
        form.cursor = form.fields.iter().position(|f| f.name == "count").unwrap();
        type_text(&mut form, "3");
        assert!(form.problems().is_empty(), "{:?}", form.problems());
        assert_eq!(
            form.arguments(),
            json!({"email": "al@example.com", "count": 3})
        );
    }

    /// Space on an optional yes/no shown `false` (its default) makes it `true`, as the docs
    /// say (it went to "(unset)" first, so the call went out without the flag: tour J); the
    /// arrows step through unset too, and Del unsets it.
    #[test]
    fn space_flips_a_yes_no_and_unset_is_reached_by_the_arrows_or_del() {
        let schema = json!({"type": "object", "properties": {
            "includeImage": {"type": "boolean", "default": false}}});
        let mut form = Form::new("get-annotated-message", &schema, None);
        assert_eq!(form.fields[0].shown(), "false");
        form.key(&key(KeyCode::Char(' ')));
        assert_eq!(form.arguments(), json!({"includeImage": true}));
        form.key(&key(KeyCode::Char(' ')));
        assert_eq!(form.arguments(), json!({"includeImage": false}));
        form.key(&key(KeyCode::Right));
        assert_eq!(form.arguments(), json!({"includeImage": true}));
        form.key(&key(KeyCode::Right));
        assert_eq!(form.fields[0].shown(), "(unset)");
        form.key(&key(KeyCode::Char(' ')));
        assert_eq!(form.arguments(), json!({"includeImage": true}));
        form.key(&key(KeyCode::Delete));
        assert_eq!(form.arguments(), json!({}));
    }
}
