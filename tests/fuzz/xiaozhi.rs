//! Fuzz targets for the JSON-RPC frames a Xiaozhi endpoint sends: the parse/classify layer
//! ([`jsonrpc::parse`]) on its own; `xiaozhi_socket` runs the real socket loop.
//!
//! Properties, from the bridge's rules (`../shared/reference/bridges.md`, cases 45–51): no
//! frame makes it panic or hang; every request is answered once with its id echoed byte for
//! byte (type included); a frame with a readable id but a bad shape is answered `-32600`; a
//! frame with no readable id, or not JSON, is dropped and counted as malformed; notifications
//! and responses get no answer; a blocked tool gets `-32000`.

use proptest::prelude::*;
use serde_json::{Value, json};
use turnscope::bridge::xiaozhi::jsonrpc::{self, Incoming};

use super::corpus;

pub const CORPUS: &str = "tests/fuzz_corpus/xiaozhi_frames";

/// Fragments worth inserting into a JSON-RPC frame.
pub const JSON_TOKENS: &[&str] = &[
    "\"",
    "{",
    "}",
    "[",
    "]",
    ":",
    ",",
    "null",
    "true",
    "0",
    "-1",
    "1e999",
    "9007199254740993",
    "\"id\"",
    "\"method\"",
    "\"params\"",
    "\"jsonrpc\":\"2.0\"",
    "\"result\"",
    "\"error\"",
    "\\u",
    "\\ud800",
    "{}",
    "[]",
    "\"tools/call\"",
    "\"ping\"",
    " ",
    "\n",
];

/// Ids the endpoint may send, as JSON text; each must come back exactly so.
fn good_id() -> impl Strategy<Value = String> {
    prop_oneof![
        super::one_of(&[
            "0",
            "-1",
            "-0",
            "1e3",
            "1.50",
            "9007199254740993",
            "18446744073709551616",
            "null",
            r#""3f2c9a1e-77d0-4d5e-9a52-0c1b2f3e4d5a_n_7""#,
            r#""a_s_x""#,
            r#""\u00e9t\u00e9""#,
            r#""""#,
        ]),
        any::<i64>().prop_map(|n| n.to_string()),
        "[ -~]{0,12}".prop_map(|s| Value::String(s).to_string()),
    ]
}

/// One frame built from parts, each part right, wrong-typed or missing.
#[derive(Debug, Clone)]
pub struct Parts {
    jsonrpc: Option<&'static str>,
    id: Option<(String, bool)>,
    method: Option<&'static str>,
    params: Option<&'static str>,
    reply: Option<&'static str>,
}

impl Parts {
    pub fn render(&self, order: &[usize], space: &str) -> String {
        let fields = [
            self.jsonrpc.map(|v| format!("\"jsonrpc\":{space}{v}")),
            self.id
                .as_ref()
                .map(|(v, _)| format!("\"id\":{space}{v}{space}")),
            self.method.map(|v| format!("\"method\":{space}{v}")),
            self.params.map(|v| format!("\"params\":{space}{v}")),
            self.reply.map(|v| format!("{v}:{space}{{}}")),
        ];
        let present: Vec<String> = order.iter().filter_map(|&i| fields[i].clone()).collect();
        format!("{{{space}{}{space}}}", present.join(&format!(",{space}")))
    }

    /// What `parse` must make of the frame: `None` for dropped, else the kind and the id.
    fn expected(&self) -> Option<(&'static str, Option<&str>)> {
        let id = match &self.id {
            Some((_, false)) => return None,
            Some((text, true)) => Some(text.as_str()),
            None => None,
        };
        let invalid = id.map(|id| ("invalid", Some(id)));
        // `null` for jsonrpc, method or params counts as absent.
        if self.jsonrpc != Some("\"2.0\"") {
            return invalid;
        }
        if self
            .params
            .is_some_and(|p| !(p.starts_with('{') || p.starts_with('[') || p == "null"))
        {
            return invalid;
        }
        match (self.method.filter(|m| *m != "null"), id) {
            (Some(m), Some(id)) if m.starts_with('"') => Some(("request", Some(id))),
            (Some(m), None) if m.starts_with('"') => Some(("notification", None)),
            (Some(_), _) => invalid,
            (None, Some(id)) if self.reply.is_some() => Some(("response", Some(id))),
            (None, _) => invalid,
        }
    }
}

pub fn parts() -> impl Strategy<Value = Parts> {
    let bad_id = prop::sample::select(&["{\"a\":1}", "[1]", "true", "false", "[]", "{}"][..]);
    (
        prop::option::of(prop::sample::select(
            &[
                "\"2.0\"",
                "\"2.0\"",
                "\"1.0\"",
                "2.0",
                "null",
                "\"2.0 \"",
                "[\"2.0\"]",
            ][..],
        )),
        prop::option::of(prop_oneof![
            3 => good_id().prop_map(|id| (id, true)),
            1 => bad_id.prop_map(|id| (id.to_string(), false)),
        ]),
        prop::option::of(prop::sample::select(
            &[
                "\"ping\"",
                "\"initialize\"",
                "\"tools/list\"",
                "\"tools/call\"",
                "\"notifications/initialized\"",
                "\"resources/list\"",
                "\"\"",
                "7",
                "null",
                "[]",
                "{}",
                "true",
            ][..],
        )),
        prop::option::of(prop::sample::select(
            &[
                "{}",
                "[]",
                "{\"name\":\"echo\",\"arguments\":{}}",
                "{\"name\":7}",
                "{\"cursor\":\"1\"}",
                "{\"cursor\":{}}",
                "null",
                "\"x\"",
                "3",
                "true",
            ][..],
        )),
        prop::option::of(prop::sample::select(&["\"result\"", "\"error\""][..])),
    )
        .prop_map(|(jsonrpc, id, method, params, reply)| Parts {
            jsonrpc,
            id,
            method,
            params,
            reply,
        })
}

/// Checks what every parsed message promises: an id is a JSON string, number or `null`
/// found verbatim in the frame, and a reply built with it carries it back unchanged.
fn check_ids(text: &str, messages: &[Incoming]) -> Result<(), TestCaseError> {
    for m in messages {
        let id = match m {
            Incoming::Request { id, .. }
            | Incoming::Invalid { id, .. }
            | Incoming::Response { id } => id,
            Incoming::Notification { .. } => continue,
        };
        prop_assert!(text.contains(id.as_json()), "id {id} is not in {text:?}");
        let value: Value = serde_json::from_str(id.as_json()).expect("an id is JSON");
        prop_assert!(
            value.is_string() || value.is_number() || value.is_null(),
            "id {id}"
        );
        for reply in [
            jsonrpc::result_frame(id, &json!({})),
            jsonrpc::error_frame(id, jsonrpc::INVALID_REQUEST, "x", None),
        ] {
            match jsonrpc::parse(&reply).expect("a reply parses").as_slice() {
                [Incoming::Response { id: back }] => prop_assert_eq!(back.as_json(), id.as_json()),
                other => prop_assert!(false, "reply {reply} parsed as {other:?}"),
            }
        }
    }
    Ok(())
}

/// The parse of any text: never a panic, ids kept verbatim, text that is not JSON by the
/// grammar always dropped, and a single request agreeing with what a plain JSON reading of the frame says.
fn check_frame(text: &str) -> Result<(), TestCaseError> {
    let parsed = jsonrpc::parse(text);
    // JSON by the grammar: a lone surrogate escape such as "\ud800" is JSON text, though no
    // Rust string can hold it (so only a `Value` reading refuses it).
    let json = serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok();
    if !json && !text.trim_matches([' ', '\t', '\n', '\r']).is_empty() {
        prop_assert!(
            parsed.is_err(),
            "not JSON, yet parsed: {text:?} -> {parsed:?}"
        );
    }
    let Ok(messages) = parsed else { return Ok(()) };
    check_ids(text, &messages)?;
    if let [Incoming::Request { method, params, .. }] = messages.as_slice()
        && let Ok(Value::Object(v)) = serde_json::from_str::<Value>(text)
    {
        prop_assert_eq!(v.get("jsonrpc"), Some(&json!("2.0")));
        prop_assert_eq!(v.get("method"), Some(&Value::String(method.clone())));
        prop_assert_eq!(params.as_ref(), v.get("params").filter(|p| !p.is_null()));
    }
    Ok(())
}

proptest! {
    #[test]
    fn frames_from_parts_are_classified_as_the_rules_say(
        parts in parts(),
        order in Just(vec![0usize, 1, 2, 3, 4]).prop_shuffle(),
        space in prop::sample::select(&["", " ", "\n\t"][..]),
    ) {
        let text = parts.render(&order, space);
        let parsed = jsonrpc::parse(&text);
        let got = parsed.as_ref().ok().map(|m| match m.as_slice() {
            [Incoming::Request { id, .. }] => ("request", Some(id.as_json())),
            [Incoming::Notification { .. }] => ("notification", None),
            [Incoming::Response { id }] => ("response", Some(id.as_json())),
            [Incoming::Invalid { id, .. }] => ("invalid", Some(id.as_json())),
            other => panic!("one object gave {other:?}"),
        });
        prop_assert_eq!(got, parts.expected(), "{}", text);
        check_frame(&text)?;
    }

    #[test]
    fn mutated_real_frames_never_panic_and_keep_ids(bytes in corpus::mutated(corpus::load(CORPUS), JSON_TOKENS, 6)) {
        check_frame(&corpus::text(&bytes))?;
    }

    #[test]
    fn any_bytes_and_json_shaped_junk_never_panic(
        bytes in prop::collection::vec(any::<u8>(), 0..400),
        tokens in prop::collection::vec(prop::sample::select(JSON_TOKENS), 0..40),
    ) {
        check_frame(&corpus::text(&bytes))?;
        check_frame(&tokens.concat())?;
    }

    #[test]
    fn deep_nesting_is_dropped_not_a_stack_overflow(depth in 1usize..20_000, open in prop::sample::select(&["[", "{\"a\":", "[{\"id\":"][..])) {
        let text = open.repeat(depth);
        prop_assert!(jsonrpc::parse(&text).is_err());
        let batch = format!("[{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":{}}}]", open.repeat(depth));
        prop_assert!(jsonrpc::parse(&batch).is_err());
    }
}

#[test]
fn every_seed_parses_as_the_file_name_says() {
    for bytes in corpus::load(CORPUS) {
        let text = corpus::text(&bytes);
        let parsed = jsonrpc::parse(&text);
        assert_eq!(parsed.is_err(), text == "not json", "{text}: {parsed:?}");
    }
}
