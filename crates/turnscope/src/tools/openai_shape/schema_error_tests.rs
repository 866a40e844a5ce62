//! Unit tests for `schema.rs`: inputs that are rejected, and the limits.
//! Case numbers refer to bridges.md section 12 A.

use super::*;

#[test]
fn case08_self_cycle_is_rejected_at_the_ref() {
    let e = err(json!({
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/Node"}},
        "$defs": {"Node": {"type": "object", "properties": {
            "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}
        }}}
    }));
    assert_eq!(
        e.kind(),
        &cycle("#/$defs/Node", &["/$defs/Node", "/$defs/Node"])
    );
    assert_eq!(e.pointer(), "/$defs/Node/properties/children/items/$ref");
}

#[test]
fn case09_indirect_cycle_is_rejected_with_its_chain() {
    let e = err(json!({
        "type": "object",
        "properties": {"x": {"$ref": "#/$defs/A"}},
        "$defs": {
            "A": {"type": "object", "properties": {"b": {"$ref": "#/$defs/B"}}},
            "B": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}}
        }
    }));
    assert_eq!(
        e.kind(),
        &cycle("#/$defs/A", &["/$defs/A", "/$defs/B", "/$defs/A"])
    );
    assert_eq!(e.pointer(), "/$defs/B/properties/a/$ref");
    assert_eq!(
        e.to_string(),
        "inputSchema is recursive: $ref \"#/$defs/A\" at #/$defs/B/properties/a/$ref leads \
         back into a schema that is still being expanded (#/$defs/A -> #/$defs/B -> \
         #/$defs/A), and OpenAI parameters must be a finite tree; fix the tool's \
         inputSchema to break the cycle (for example replace the recursive $ref with a plain \
         object schema)"
    );
}

#[test]
fn ref_to_the_root_is_a_cycle() {
    for reference in ["#", ""] {
        let e = err(json!({"type": "object", "properties": {"me": {"$ref": reference}}}));
        assert_eq!(e.kind(), &cycle(reference, &["", ""]));
        assert_eq!(e.pointer(), "/properties/me/$ref");
    }
}

#[test]
fn case11_remote_and_file_refs_are_rejected_without_io() {
    // The module performs no I/O at all; these refs would otherwise hang or
    // read files, so getting an error back at once is the whole assertion.
    for reference in [
        "https://example.com/s.json",
        "http://127.0.0.1:9/s.json#/$defs/A",
        "file:///etc/passwd",
        "other.json#/x",
        "other.json",
    ] {
        let e = err(json!({"type": "object", "properties": {"r": {"$ref": reference}}}));
        assert_eq!(
            e.kind(),
            &SchemaErrorKind::RemoteRef {
                reference: reference.into()
            }
        );
        assert_eq!(e.pointer(), "/properties/r/$ref");
    }
}

#[test]
fn remote_ref_message_says_what_to_do() {
    let e = err(json!({"properties": {"r": {"$ref": "other.json#/x"}}}));
    assert_eq!(
        e.to_string(),
        "inputSchema $ref \"other.json#/x\" at #/properties/r/$ref points to another \
         document, which is never fetched; fix the tool's inputSchema to bundle that schema \
         under $defs and refer to it as \"#/$defs/...\""
    );
}

#[test]
fn case12_missing_target_is_rejected() {
    let e = err(json!({
        "type": "object",
        "properties": {"m": {"$ref": "#/$defs/Missing"}},
        "$defs": {"Other": {"type": "string"}}
    }));
    assert_eq!(
        e.kind(),
        &SchemaErrorKind::MissingTarget {
            reference: "#/$defs/Missing".into()
        }
    );
    assert_eq!(e.pointer(), "/properties/m/$ref");
    assert_eq!(
        e.to_string(),
        "inputSchema $ref \"#/$defs/Missing\" at #/properties/m/$ref points to nothing in the \
         document; fix the tool's inputSchema to add the missing definition or correct the \
         reference"
    );
}

#[test]
fn ref_to_a_non_schema_is_rejected() {
    let e = err(json!({
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"$ref": "#/properties/a/type"}}
    }));
    assert_eq!(
        e.kind(),
        &SchemaErrorKind::TargetNotSchema {
            reference: "#/properties/a/type".into(),
            found: "a string"
        }
    );
    assert_eq!(e.pointer(), "/properties/b/$ref");
}

#[test]
fn malformed_refs_are_rejected() {
    let cases = [
        (json!(42), "42", "$ref must be a string, found a number"),
        (
            json!("#node"),
            "\"#node\"",
            "named anchors are not supported, only JSON pointers (#/...)",
        ),
        (
            json!("#/$defs/a~2"),
            "\"#/$defs/a~2\"",
            "`~` in a JSON pointer must be followed by 0 or 1",
        ),
        (
            json!("#/$defs/a~"),
            "\"#/$defs/a~\"",
            "`~` in a JSON pointer must be followed by 0 or 1",
        ),
        (
            json!("#/$defs/%zz"),
            "\"#/$defs/%zz\"",
            "the fragment has invalid percent-encoding",
        ),
        (
            json!("#/$defs/%FF"),
            "\"#/$defs/%FF\"",
            "the fragment has invalid percent-encoding",
        ),
        (
            json!("#/$defs/%+1"),
            "\"#/$defs/%+1\"",
            "the fragment has invalid percent-encoding",
        ),
    ];
    for (reference, shown, reason) in cases {
        let e = err(json!({"type": "object", "properties": {"x": {"$ref": reference}}}));
        let expected = SchemaErrorKind::BadRef {
            reference: shown.into(),
            reason: reason.into(),
        };
        assert_eq!(e.kind(), &expected);
        assert_eq!(e.pointer(), "/properties/x/$ref");
    }
}

#[test]
fn dynamic_refs_are_rejected() {
    let e = err(json!({"type": "object", "properties": {"x": {"$dynamicRef": "#meta"}}}));
    assert_eq!(
        e.kind(),
        &SchemaErrorKind::BadRef {
            reference: "\"#meta\"".into(),
            reason: "$dynamicRef needs dynamic scoping, which is not supported".into()
        }
    );
    assert_eq!(e.pointer(), "/properties/x/$dynamicRef");
}

#[test]
fn case14_non_object_roots_are_rejected() {
    let cases = [
        (json!({"type": "string"}), "/type", "`\"type\": \"string\"`"),
        (
            json!({"type": ["string", "null"]}),
            "/type",
            "`\"type\": [\"string\",\"null\"]`",
        ),
        (
            json!({"anyOf": [{"type": "object"}, {"type": "string"}]}),
            "",
            "a schema with `anyOf` and no `type`",
        ),
        (
            json!({"enum": ["a", "b"]}),
            "",
            "a schema with `enum` and no `type`",
        ),
        (json!(false), "", "`false` (a schema that accepts nothing)"),
        (
            json!([{"type": "object"}]),
            "",
            "an array instead of a schema object",
        ),
        (json!("object"), "", "a string instead of a schema object"),
        (
            json!({"$ref": "#/$defs/S", "$defs": {"S": {"type": "integer"}}}),
            "",
            "`\"type\": \"integer\"`",
        ),
    ];
    for (input, pointer, found) in cases {
        let e = err(input);
        assert_eq!(
            e.kind(),
            &SchemaErrorKind::NotObject {
                found: found.into()
            }
        );
        assert_eq!(e.pointer(), pointer);
    }
    assert_eq!(
        err(json!({"type": "string"})).to_string(),
        "inputSchema top level must describe an object of named arguments (expected \"type\": \
         \"object\" with \"properties\"), found `\"type\": \"string\"` at #/type; fix the tool's \
         inputSchema to take its arguments as properties of an object"
    );
}

#[test]
fn case18_expansion_bomb_hits_the_node_cap() {
    let e = err(chained_defs(20, 2));
    assert_eq!(e.kind(), &SchemaErrorKind::TooLarge { max_nodes: 100_000 });
    assert!(e.pointer().starts_with("/$defs/D"), "{}", e.pointer());
    assert!(e.to_string().contains("raise Limits::max_nodes"));
}

#[test]
fn node_cap_is_exact() {
    // root, properties, a, a.type, type: five values, in key order.
    let input = json!({"type": "object", "properties": {"a": {"type": "string"}}});
    let five = Limits {
        max_depth: 64,
        max_nodes: 5,
    };
    assert_eq!(to_openai_parameters(Some(&input), &five).unwrap(), input);
    let four = Limits {
        max_depth: 64,
        max_nodes: 4,
    };
    let e = to_openai_parameters(Some(&input), &four).unwrap_err();
    assert_eq!(e.kind(), &SchemaErrorKind::TooLarge { max_nodes: 4 });
    assert_eq!(e.pointer(), "/type");
}

#[test]
fn depth_cap_is_exact() {
    // root 0, properties 1, a 2, a.properties 3, b 4, b.type 5.
    let input =
        json!({"type": "object", "properties": {"a": {"properties": {"b": {"type": "string"}}}}});
    let five = Limits {
        max_depth: 5,
        max_nodes: 100,
    };
    assert_eq!(to_openai_parameters(Some(&input), &five).unwrap(), input);
    let four = Limits {
        max_depth: 4,
        max_nodes: 100,
    };
    let e = to_openai_parameters(Some(&input), &four).unwrap_err();
    assert_eq!(e.kind(), &SchemaErrorKind::TooDeep { max_depth: 4 });
    assert_eq!(e.pointer(), "/properties/a/properties/b/type");
}

#[test]
fn deep_ref_nesting_hits_the_depth_cap() {
    let e = err(chained_defs(30, 1));
    assert_eq!(e.kind(), &SchemaErrorKind::TooDeep { max_depth: 64 });
    // D<i> sits at depth 3 + 3i, so D20's property p0 is the first past 64.
    assert_eq!(e.pointer(), "/$defs/D20/properties/p0");
    assert_eq!(
        e.to_string(),
        format!(
            "inputSchema nests deeper than 64 levels once $refs are inlined (stopped at #{}); \
             fix the tool's inputSchema to be flatter, or raise Limits::max_depth",
            e.pointer()
        )
    );
}

#[test]
fn long_ref_chains_count_towards_depth() {
    // D0 -> D1 -> ... -> D100, each only a $ref: no nesting, many hops.
    let mut defs = Map::new();
    for i in 0..100 {
        defs.insert(
            format!("D{i}"),
            json!({"$ref": format!("#/$defs/D{}", i + 1)}),
        );
    }
    defs.insert("D100".into(), json!({"type": "string"}));
    let input =
        json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/D0"}}, "$defs": defs});
    let e = err(input.clone());
    assert_eq!(e.kind(), &SchemaErrorKind::TooDeep { max_depth: 64 });
    let roomy = Limits {
        max_depth: 200,
        max_nodes: 1000,
    };
    assert_eq!(
        to_openai_parameters(Some(&input), &roomy).unwrap(),
        json!({"type": "object", "properties": {"x": {"type": "string"}}})
    );
}

#[test]
fn error_is_a_std_error_with_a_fix_hint() {
    let e = err(json!({"type": "object", "properties": {"m": {"$ref": "#/$defs/Missing"}}}));
    let as_std: &dyn std::error::Error = &e;
    assert!(as_std.source().is_none());
    assert!(as_std.to_string().contains("fix the tool's inputSchema"));
}
