use serde_json::json;

use super::*;

fn request(text: &str) -> (RawId, String, Option<Value>) {
    match parse(text).unwrap().as_slice() {
        [Incoming::Request { id, method, params }] => (id.clone(), method.clone(), params.clone()),
        other => panic!("expected one request, got {other:?}"),
    }
}

#[test]
fn ids_are_echoed_byte_for_byte() {
    for id in [
        "0",
        "-1",
        "9007199254740993",
        "18446744073709551616",
        "1e3",
        "1.50",
        r#""3f2c9a1e-77d0-4d5e-9a52-0c1b2f3e4d5a_n_7""#,
        r#""\u00e9t\u00e9""#,
        "null",
    ] {
        let (raw, method, _) = request(&format!(
            r#"{{"jsonrpc":"2.0","id": {id} ,"method":"ping"}}"#
        ));
        assert_eq!(method, "ping");
        assert_eq!(raw.as_json(), id);
        assert_eq!(
            result_frame(&raw, &json!({})),
            format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#)
        );
    }
}

#[test]
fn params_are_kept_whole() {
    let text = r#"{"jsonrpc":"2.0","id":"u_n_7","method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"clientId":"c-1","serialNumber":"SN42","_meta":{"clientId":"c-1","serialNumber":"SN42","agentId":99}}}"#;
    let (_, _, params) = request(text);
    let expected: Value = serde_json::from_str(text).unwrap();
    assert_eq!(params.as_ref(), expected.get("params"));
}

#[test]
fn notifications_responses_and_batches() {
    assert_eq!(
        parse(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap(),
        vec![Incoming::Notification {
            method: "notifications/initialized".into(),
            params: None
        }]
    );
    assert!(matches!(
        parse(r#"{"jsonrpc":"2.0","id":3,"result":{}}"#)
            .unwrap()
            .as_slice(),
        [Incoming::Response { .. }]
    ));
    let batch =
        parse(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"x"}]"#)
            .unwrap();
    assert_eq!(batch.len(), 2);
    assert!(parse("  \n").unwrap().is_empty());
}

#[test]
fn garbage_is_malformed() {
    for text in [
        "not json",
        "{\"jsonrpc\":\"2.0\",",
        "[]",
        "42",
        "\"ping\"",
        r#"{"jsonrpc":"2.0","method":"ping","id":{"a":1}}"#,
        r#"{"jsonrpc":"1.0","method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}"#,
        // Found by fuzzing: white space that JSON does not allow around a value.
        "{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\u{b}",
        "\u{a0}{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}",
    ] {
        assert!(parse(text).is_err(), "{text}");
    }
}

#[test]
fn readable_id_with_bad_shape_is_invalid() {
    for text in [
        r#"{"jsonrpc":"1.0","id":5,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":5}"#,
        r#"{"jsonrpc":"2.0","id":5,"method":7}"#,
        r#"{"jsonrpc":"2.0","id":5,"method":"ping","params":"x"}"#,
    ] {
        match parse(text).unwrap().as_slice() {
            [Incoming::Invalid { id, .. }] => assert_eq!(id.as_json(), "5"),
            other => panic!("{text}: {other:?}"),
        }
    }
}

#[test]
fn error_frames() {
    let id = RawId::parse(r#""a_s_x""#).unwrap();
    assert_eq!(
        error_frame(&id, TOOL_BLOCKED, "blocked", None),
        r#"{"jsonrpc":"2.0","id":"a_s_x","error":{"code":-32000,"message":"blocked"}}"#
    );
    assert_eq!(
        error_frame(&RawId::null(), INVALID_REQUEST, "x", Some(&json!({"k": 1}))),
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"x","data":{"k":1}}}"#
    );
    assert!(RawId::parse("[1]").is_none());
    assert_eq!(
        notification_frame("notifications/tools/list_changed", None),
        r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#
    );
}
