//! JSON as the MCP pane shows it: what a message says before its `_meta` (objects list their
//! keys in order but `_meta` last, at every depth), on one line cut to the room it has, or
//! pretty-printed whole for the detail view. The one-line form stops writing at its bound, so
//! listing a message costs the cells it fills, not its size.

use std::fmt::Write as _;

use serde_json::Value;

/// A writer that stops at `max` bytes (on a character boundary) and says whether it did.
struct Bounded {
    out: String,
    max: usize,
    full: bool,
}

impl Bounded {
    fn push(&mut self, s: &str) {
        if self.full {
            return;
        }
        let room = self.max.saturating_sub(self.out.len());
        if s.len() <= room {
            self.out.push_str(s);
            return;
        }
        let mut end = room;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.out.push_str(&s[..end]);
        self.full = true;
    }
}

/// An object's entries with `_meta` last.
fn entries(map: &serde_json::Map<String, Value>) -> impl Iterator<Item = (&String, &Value)> {
    map.iter()
        .filter(|(k, _)| k.as_str() != "_meta")
        .chain(map.iter().filter(|(k, _)| k.as_str() == "_meta"))
}

fn scalar(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

fn one_line(v: &Value, w: &mut Bounded) {
    if w.full {
        return;
    }
    match v {
        Value::Object(map) => {
            w.push("{");
            for (i, (k, v)) in entries(map).enumerate() {
                if i > 0 {
                    w.push(",");
                }
                w.push(&scalar(&Value::String(k.clone())));
                w.push(":");
                one_line(v, w);
                if w.full {
                    return;
                }
            }
            w.push("}");
        }
        Value::Array(items) => {
            w.push("[");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    w.push(",");
                }
                one_line(item, w);
                if w.full {
                    return;
                }
            }
            w.push("]");
        }
        Value::String(s) => {
            // Escape only what fits: a long string is cut, not written whole first.
            let head = &s[..floor_boundary(s, w.max.saturating_sub(w.out.len()) + 1)];
            let quoted = scalar(&Value::String(head.to_string()));
            if head.len() < s.len() {
                w.push(&quoted[..quoted.len() - 1]);
                w.full = true;
            } else {
                w.push(&quoted);
            }
        }
        other => w.push(&scalar(other)),
    }
}

fn floor_boundary(s: &str, at: usize) -> usize {
    let mut end = at.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    end
}

/// `v` as one line of JSON, `_meta` last, at most about `max` bytes (cut ones end in `…`).
pub fn head(v: &Value, max: usize) -> String {
    let mut w = Bounded {
        out: String::new(),
        max,
        full: false,
    };
    one_line(v, &mut w);
    if w.full {
        w.out.push('…');
    }
    w.out
}

/// `v` pretty-printed (two-space indents), `_meta` last at every depth.
pub fn pretty(v: &Value) -> String {
    let mut out = String::new();
    pretty_into(v, 0, &mut out);
    out
}

fn pretty_into(v: &Value, depth: usize, out: &mut String) {
    let pad = |n: usize| "  ".repeat(n);
    match v {
        Value::Object(map) if !map.is_empty() => {
            out.push_str("{\n");
            let n = map.len();
            for (i, (k, v)) in entries(map).enumerate() {
                let _ = write!(
                    out,
                    "{}{}: ",
                    pad(depth + 1),
                    scalar(&Value::String(k.clone()))
                );
                pretty_into(v, depth + 1, out);
                out.push_str(if i + 1 < n { ",\n" } else { "\n" });
            }
            let _ = write!(out, "{}}}", pad(depth));
        }
        Value::Array(items) if !items.is_empty() => {
            out.push_str("[\n");
            for (i, item) in items.iter().enumerate() {
                out.push_str(&pad(depth + 1));
                pretty_into(item, depth + 1, out);
                out.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
            }
            let _ = write!(out, "{}]", pad(depth));
        }
        other => out.push_str(&scalar(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn meta_comes_last_and_a_head_stops_at_its_bound() {
        let v = json!({"_meta": {"a": 1}, "result": {"_meta": {}, "content": [{"text": "hi"}]}});
        assert_eq!(
            head(&v, 1000),
            r#"{"result":{"content":[{"text":"hi"}],"_meta":{}},"_meta":{"a":1}}"#
        );
        let p = pretty(&v);
        assert!(p.find("\"result\"").unwrap() < p.find("\"_meta\": {\n    \"a\"").unwrap());
        let back: Value = serde_json::from_str(&p).unwrap();
        assert_eq!(back, v, "still the same JSON");
        let long = json!({"text": "x".repeat(1_000_000)});
        let cut = head(&long, 40);
        assert!(cut.len() <= 44 && cut.ends_with('…'), "{cut}");
        assert!(cut.starts_with(r#"{"text":"xxx"#));
    }
}
