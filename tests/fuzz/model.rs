//! Fuzz targets for the model client: the stream parser, the tool-call delta assembler, the
//! schema converter and the scripted model.

use proptest::prelude::*;
use serde_json::{Value, json};
use turnscope::model::client::parse_sse_body;
use turnscope::model::scripted::{Answer, ScriptSettings, answer};
use turnscope::tools::openai_shape::schema::{Limits, to_openai_parameters};

/// Splits `bytes` at the given (sorted, deduplicated) cut points.
fn split(bytes: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut at = 0;
    for &c in cuts {
        let c = c.min(bytes.len());
        if c > at {
            out.push(bytes[at..c].to_vec());
            at = c;
        }
    }
    out.push(bytes[at..].to_vec());
    out
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        prop_oneof![
            super::one_of(&[
                "#/$defs/A",
                "#/$defs/B",
                "#/definitions/A",
                "#/properties/x",
                "#",
                "https://example.com/s.json"
            ]),
            "[a-z$#/~%0-9]{0,12}",
        ]
        .prop_map(Value::String),
    ];
    leaf.prop_recursive(6, 200, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop_oneof![
                        super::one_of(&[
                            "$ref",
                            "$defs",
                            "definitions",
                            "type",
                            "properties",
                            "items",
                            "anyOf",
                            "required"
                        ]),
                        "[a-zA-Z]{1,6}",
                    ],
                    inner
                ),
                0..5
            )
            .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn the_stream_parser_never_panics_on_any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..600),
                                                  cuts in prop::collection::vec(0usize..600, 0..6)) {
        let mut cuts = cuts;
        cuts.sort_unstable();
        let _ = parse_sse_body(split(&bytes, &cuts), &mut |_| {});
    }

    #[test]
    fn the_stream_parser_never_panics_on_sse_shaped_junk(lines in prop::collection::vec(
        prop_oneof![
            super::one_of(&["data: [DONE]", "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}", "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":99999999999}]}}]}", "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":{\"arguments\":\"{\"}}]}}]}", "data: {\"error\":null}", "data: {\"choices\":null}"]),
            "data: [ -~]{0,40}",
            "[a-z:]{0,10} ?[ -~]{0,20}",
            Just(String::new()),
        ], 0..12)) {
        let body = lines.join("\n") + "\n\n";
        let _ = parse_sse_body(vec![body.into_bytes()], &mut |_| {});
    }

    #[test]
    fn pieces_and_tool_calls_survive_any_chunking(
        pieces in prop::collection::vec("[ -~]{1,8}", 0..6),
        calls in prop::collection::vec(("[a-z_]{1,10}", "[ -~]{0,20}", 1usize..4), 0..4),
        cuts in prop::collection::vec(0usize..2000, 0..10),
    ) {
        let mut events: Vec<Value> = pieces
            .iter()
            .map(|p| json!({"choices": [{"index": 0, "delta": {"content": p}}]}))
            .collect();
        // Each call: a head with id and name, then its arguments in `parts` fragments,
        // fragments of different calls interleaved round-robin.
        let mut fragments: Vec<Vec<String>> = calls
            .iter()
            .map(|(_, args, parts)| {
                let chars: Vec<char> = args.chars().collect();
                let size = chars.len().div_ceil(*parts).max(1);
                chars.chunks(size).map(|c| c.iter().collect()).collect()
            })
            .collect();
        for (i, (name, _, _)) in calls.iter().enumerate() {
            events.push(json!({"choices": [{"delta": {"tool_calls": [
                {"index": i, "id": format!("id{i}"), "function": {"name": name, "arguments": ""}}]}}]}));
        }
        loop {
            let mut any = false;
            for (i, f) in fragments.iter_mut().enumerate() {
                if !f.is_empty() {
                    any = true;
                    let part = f.remove(0);
                    events.push(json!({"choices": [{"delta": {"tool_calls": [
                        {"index": i, "function": {"arguments": part}}]}}]}));
                }
            }
            if !any { break; }
        }
        events.push(json!({"choices": [{"delta": {}, "finish_reason": "stop"}]}));
        let body: String = events.iter().map(|e| format!("data: {e}\n\n")).collect::<String>() + "data: [DONE]\n\n";
        let mut cuts = cuts;
        cuts.sort_unstable();
        let mut seen = Vec::new();
        let done = parse_sse_body(split(body.as_bytes(), &cuts), &mut |p| seen.push(p)).expect("well-formed stream parses");
        prop_assert_eq!(&seen, &pieces);
        prop_assert_eq!(done.text, pieces.concat());
        prop_assert_eq!(done.tool_calls.len(), calls.len());
        for (i, (name, args, _)) in calls.iter().enumerate() {
            prop_assert_eq!(&done.tool_calls[i].name, name);
            prop_assert_eq!(&done.tool_calls[i].arguments, args);
            prop_assert_eq!(&done.tool_calls[i].id, &format!("id{i}"));
        }
    }

    #[test]
    fn the_schema_converter_never_panics_and_is_a_fixpoint(schema in json_value()) {
        // Once converted, nothing is left to inline: converting again changes nothing.
        let limits = Limits { max_depth: 32, max_nodes: 20_000 };
        if let Ok(out) = to_openai_parameters(Some(&schema), &limits) {
            prop_assert_eq!(out.get("type"), Some(&json!("object")));
            let again = to_openai_parameters(Some(&out), &limits);
            prop_assert_eq!(again.as_ref().ok(), Some(&out), "second pass: {:?}", again);
        }
    }

    #[test]
    fn the_scripted_model_answers_any_conversation(
        lines in prop::collection::vec("[ -~]{0,40}", 1..4),
        tool_names in prop::collection::vec("[a-z]{1,6}", 0..3),
        schema in json_value(),
    ) {
        let messages: Vec<Value> = lines.iter().map(|l| json!({"role": "user", "content": l})).collect();
        let tools: Vec<Value> = tool_names
            .iter()
            .map(|n| json!({"type": "function", "function": {"name": n, "parameters": schema}}))
            .collect();
        match answer(&messages, &tools, &ScriptSettings::default()) {
            Answer::Text(pieces) => prop_assert!(!pieces.is_empty()),
            Answer::Calls(calls) => {
                for (_, args) in calls {
                    prop_assert!(serde_json::from_str::<Value>(&args).is_ok());
                }
            }
        }
    }
}
