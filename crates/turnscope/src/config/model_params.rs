//! The request parameters of `[model]`: typed, validated here, and turned into the top-level
//! fields every chat-completions request carries, passed through unchanged (`extra` for a
//! server's own fields, e.g. llama.cpp's `top_k` or vLLM's `repetition_penalty`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::ModelSection;

/// `model.stop`: one stop sequence or several.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum Stop {
    /// `stop = "\n\n"`
    One(String),
    /// `stop = ["User:", "\n\n"]`
    Many(Vec<String>),
}

/// Request fields the client always sets itself; `model.extra` may not name them.
const OWN_FIELDS: [&str; 4] = ["model", "messages", "stream", "tools"];

/// Typed fields of `[model]`; `model.extra` may not name them either (set them by name).
const TYPED_FIELDS: [&str; 8] = [
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "stop",
    "seed",
    "tool_choice",
    "parallel_tool_calls",
];

impl ModelSection {
    /// The top-level request fields these settings send, in the OpenAI names.
    pub fn request_fields(&self) -> Map<String, Value> {
        let mut out = Map::new();
        if let Some(n) = self.max_tokens {
            out.insert("max_tokens".into(), json!(n));
        }
        if let Some(n) = self.max_completion_tokens {
            out.insert("max_completion_tokens".into(), json!(n));
        }
        if let Some(t) = self.temperature {
            out.insert("temperature".into(), json!(t));
        }
        if let Some(p) = self.top_p {
            out.insert("top_p".into(), json!(p));
        }
        match &self.stop {
            Some(Stop::One(s)) => {
                out.insert("stop".into(), json!(s));
            }
            Some(Stop::Many(list)) => {
                out.insert("stop".into(), json!(list));
            }
            None => {}
        }
        if let Some(seed) = self.seed {
            out.insert("seed".into(), json!(seed));
        }
        if let Some(choice) = &self.tool_choice {
            let value = match choice.as_str() {
                "auto" | "none" | "required" => json!(choice),
                name => json!({"type": "function", "function": {"name": name}}),
            };
            out.insert("tool_choice".into(), value);
        }
        if let Some(p) = self.parallel_tool_calls {
            out.insert("parallel_tool_calls".into(), json!(p));
        }
        for (k, v) in &self.extra {
            out.insert(k.clone(), v.clone());
        }
        out
    }
}

/// Checks the request parameters: ranges, shapes, and `extra` keys that would clash.
pub(super) fn check(m: &ModelSection) -> Result<(), String> {
    for (key, n) in [
        ("model.max_tokens", m.max_tokens),
        ("model.max_completion_tokens", m.max_completion_tokens),
    ] {
        if n == Some(0) {
            return Err(format!(
                "{key}: 0 would allow no token at all; expected at least 1 (or leave it out for the server's default)"
            ));
        }
    }
    if let Some(t) = m.temperature
        && !(t.is_finite() && (0.0..=2.0).contains(&t))
    {
        return Err(format!(
            "model.temperature: {t} is out of range; expected a number from 0 to 2"
        ));
    }
    if let Some(p) = m.top_p
        && !(p.is_finite() && p > 0.0 && p <= 1.0)
    {
        return Err(format!(
            "model.top_p: {p} is out of range; expected a number above 0 and at most 1"
        ));
    }
    if let Some(stop) = &m.stop {
        let list: Vec<&String> = match stop {
            Stop::One(s) => vec![s],
            Stop::Many(l) => l.iter().collect(),
        };
        if list.is_empty() || list.len() > 4 || list.iter().any(|s| s.is_empty()) {
            return Err(format!(
                "model.stop: {} sequences given; expected 1 to 4 non-empty strings (OpenAI allows at most 4)",
                list.len()
            ));
        }
    }
    if let Some(choice) = &m.tool_choice {
        let ok = !choice.is_empty()
            && choice
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !ok {
            return Err(format!(
                "model.tool_choice: {choice:?} is not usable; expected \"auto\", \"none\", \"required\" or one tool's name"
            ));
        }
    }
    for key in m.extra.keys() {
        if OWN_FIELDS.contains(&key.as_str()) {
            return Err(format!(
                "model.extra.{key}: turnscope sets `{key}` itself on every request; remove it from [model.extra]"
            ));
        }
        if TYPED_FIELDS.contains(&key.as_str()) {
            return Err(format!(
                "model.extra.{key}: set it as model.{key} instead, where it is checked; remove it from [model.extra]"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use serde_json::json;

    #[test]
    fn parameters_pass_through_under_their_openai_names() {
        let c = Config::parse(
            "[model]\nmax_tokens = 64\ntemperature = 0.2\ntop_p = 0.9\nstop = [\"User:\"]\nseed = 7\n\
             tool_choice = \"clock\"\nparallel_tool_calls = false\n[model.extra]\ntop_k = 40\ncache_prompt = true\n",
        )
        .unwrap();
        let f = c.model.request_fields();
        assert_eq!(
            serde_json::Value::Object(f),
            json!({
                "max_tokens": 64, "temperature": 0.2, "top_p": 0.9, "stop": ["User:"], "seed": 7,
                "tool_choice": {"type": "function", "function": {"name": "clock"}},
                "parallel_tool_calls": false, "top_k": 40, "cache_prompt": true
            })
        );
        assert!(c.model.include_usage);
        assert!(
            Config::parse("").unwrap().model.request_fields().is_empty(),
            "no parameter is sent unless set"
        );
    }

    #[test]
    fn bad_parameters_name_the_key_and_what_is_expected() {
        for (text, key) in [
            ("max_tokens = 0", "model.max_tokens"),
            ("temperature = 3.5", "model.temperature"),
            ("top_p = 0.0", "model.top_p"),
            ("stop = []", "model.stop"),
            ("stop = [\"a\",\"b\",\"c\",\"d\",\"e\"]", "model.stop"),
            ("tool_choice = \"a b\"", "model.tool_choice"),
            ("[model.extra]\nmessages = []", "model.extra.messages"),
            ("[model.extra]\nmax_tokens = 5", "model.extra.max_tokens"),
        ] {
            let e = Config::parse(&format!("[model]\n{text}\n"))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(key) && e.contains("expected") || e.contains("remove it"),
                "{text}: {e}"
            );
        }
        let e = Config::parse("[model]\nmax_tokenz = 5\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("max_tokenz"), "{e}");
    }
}
