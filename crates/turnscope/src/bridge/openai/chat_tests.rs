use serde_json::json;

use super::*;

#[test]
fn a_request_keeps_its_parameters_and_sets_aside_what_the_bridge_owns() {
    let body = json!({
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}],
        "tool_choice": "required",
        "temperature": 0.2,
        "stream": true,
        "stream_options": {"include_usage": true},
        "n": 1,
    });
    let request = parse_request(body.to_string().as_bytes()).unwrap();
    assert!(request.stream);
    assert!(request.include_usage);
    assert_eq!(request.messages.len(), 1);
    assert_eq!(
        request.client_names(),
        HashSet::from(["lookup".to_string()])
    );
    assert_eq!(request.tool_choice, Some(json!("required")));
    assert_eq!(
        Value::Object(request.extra),
        json!({"temperature": 0.2}),
        "model, messages, tools, stream, n and tool_choice are the bridge's"
    );
}

#[test]
fn requests_that_cannot_be_served_say_what_is_expected() {
    for (body, says) in [
        ("nope".to_string(), "not JSON"),
        ("[]".to_string(), "not a JSON object"),
        (json!({}).to_string(), "`messages` is missing"),
        (json!({"messages": []}).to_string(), "`messages` is empty"),
        (
            json!({"messages": [{"content": "x"}]}).to_string(),
            "messages[0] has no `role`",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}], "tools": {}}).to_string(),
            "`tools` must be an array",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "retrieval"}]}).to_string(),
            "tools[0] is not a function tool",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}], "n": 2}).to_string(),
            "`n` is 2",
        ),
        // Passed on or dropped unseen before (tour M).
        (
            json!({"messages": [{"role": "wizard", "content": "hi"}]}).to_string(),
            "messages[0].role is `wizard`",
        ),
        (
            json!({"messages": [{"role": "user", "content": 5}]}).to_string(),
            "messages[0].content is a number",
        ),
        (
            json!({"messages": [{"role": "user", "content": "hi"}], "stream": "yes"}).to_string(),
            "`stream` is a string",
        ),
        (
            json!({"messages": [{"role": "user", "content": null}]}).to_string(),
            "messages[0] (user) has no content",
        ),
        (
            json!({"messages": [{"role": "user", "content": [5]}]}).to_string(),
            "messages[0].content[0] is a number",
        ),
        (
            json!({"messages": [{"role": "user", "content": [{"type": "text"}]}]}).to_string(),
            "a text part with no `text`",
        ),
        (
            json!({"messages": [{"role": "tool", "content": "x"}]}).to_string(),
            "has no `tool_call_id`",
        ),
    ] {
        let message = parse_request(body.as_bytes()).unwrap_err();
        assert!(message.contains(says), "{body}: {message}");
    }
}

#[test]
fn unanswered_calls_in_a_history_get_a_result_after_the_answered_ones() {
    let mut messages = vec![
        json!({"role": "user", "content": "go"}),
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "x", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "y", "arguments": "{}"}},
        ]}),
        json!({"role": "tool", "tool_call_id": "a", "content": "done"}),
        json!({"role": "user", "content": "and?"}),
        json!({"role": "assistant", "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "z", "arguments": "{}"}},
        ]}),
    ];
    assert_eq!(close_orphans(&mut messages), 2);
    let roles: Vec<(&str, &str)> = messages
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap(),
                m.get("tool_call_id").and_then(Value::as_str).unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        roles,
        [
            ("user", ""),
            ("assistant", ""),
            ("tool", "a"),
            ("tool", "b"),
            ("user", ""),
            ("assistant", ""),
            ("tool", "c"),
        ]
    );
    assert!(
        messages[3]["content"]
            .as_str()
            .unwrap()
            .contains("did not run")
    );
    assert_eq!(
        close_orphans(&mut messages),
        0,
        "a closed history stays as it is"
    );
}
