//! Unit tests for `schema.rs`; case numbers refer to bridges.md section 12 A.

use super::*;
use serde_json::json;

fn convert_default(input: &Value) -> Result<Value, SchemaError> {
    to_openai_parameters(Some(input), &Limits::default())
}

fn ok(input: Value) -> Value {
    match convert_default(&input) {
        Ok(out) => out,
        Err(e) => panic!("expected success, got: {e}"),
    }
}

fn err(input: Value) -> SchemaError {
    match convert_default(&input) {
        Ok(out) => panic!("expected an error, got: {out}"),
        Err(e) => e,
    }
}

/// True if any object anywhere in `value` has one of `keys`.
fn has_key_anywhere(value: &Value, keys: &[&str]) -> bool {
    match value {
        Value::Object(map) => map
            .iter()
            .any(|(k, v)| keys.contains(&k.as_str()) || has_key_anywhere(v, keys)),
        Value::Array(items) => items.iter().any(|v| has_key_anywhere(v, keys)),
        _ => false,
    }
}

fn cycle(reference: &str, chain: &[&str]) -> SchemaErrorKind {
    SchemaErrorKind::Cycle {
        reference: reference.into(),
        chain: chain.iter().map(|s| s.to_string()).collect(),
    }
}

/// `{type: object, properties: {<name>: {$ref: D0}}}` plus `levels` defs
/// where each `D<i>` refers to `D<i+1>` through `fanout` properties.
fn chained_defs(levels: usize, fanout: usize) -> Value {
    let mut defs = Map::new();
    for i in 0..levels {
        let mut props = Map::new();
        for f in 0..fanout {
            props.insert(format!("p{f}"), json!({"$ref": format!("#/$defs/D{}", i + 1)}));
        }
        defs.insert(format!("D{i}"), json!({"type": "object", "properties": props}));
    }
    defs.insert(format!("D{levels}"), json!({"type": "string"}));
    json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/D0"}}, "$defs": defs})
}

#[test]
fn limits_default_values() {
    assert_eq!(
        Limits::default(),
        Limits {
            max_depth: 64,
            max_nodes: 100_000
        }
    );
}

#[test]
fn case01_plain_object_schema_is_unchanged() {
    let input = json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]});
    assert_eq!(ok(input.clone()), input);
}

#[test]
fn case02_missing_null_empty_and_true_become_empty_object() {
    let expected = json!({"type": "object", "properties": {}});
    let limits = Limits::default();
    assert_eq!(to_openai_parameters(None, &limits).unwrap(), expected);
    assert_eq!(to_openai_parameters(Some(&Value::Null), &limits).unwrap(), expected);
    assert_eq!(ok(json!({})), expected);
    assert_eq!(ok(json!(true)), expected);
    assert_eq!(ok(json!({"$schema": "https://json-schema.org/draft/2020-12/schema"})), expected);
    assert_eq!(ok(json!({"type": "object"})), expected);
}

#[test]
fn no_type_but_properties_gets_type_object() {
    assert_eq!(
        ok(json!({"properties": {"n": {"type": "integer"}}})),
        json!({"type": "object", "properties": {"n": {"type": "integer"}}})
    );
}

#[test]
fn case03_defs_are_inlined_and_removed() {
    let input = json!({
        "type": "object",
        "properties": {"to": {"$ref": "#/$defs/Email"}, "from": {"$ref": "#/$defs/Sender"}},
        "required": ["to"],
        "$defs": {
            "Email": {"type": "string", "format": "email"},
            "Sender": {"type": "object", "properties": {"address": {"$ref": "#/$defs/Email"}}}
        }
    });
    let out = ok(input);
    assert_eq!(
        out,
        json!({
            "type": "object",
            "properties": {
                "to": {"type": "string", "format": "email"},
                "from": {"type": "object", "properties": {"address": {"type": "string", "format": "email"}}}
            },
            "required": ["to"]
        })
    );
    assert!(!has_key_anywhere(&out, &["$ref", "$defs", "definitions"]));
}

#[test]
fn case04_draft07_definitions_are_inlined_and_removed() {
    let input = json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"when": {"$ref": "#/definitions/Date"}},
        "definitions": {"Date": {"type": "string", "format": "date"}}
    });
    assert_eq!(
        ok(input),
        json!({"type": "object", "properties": {"when": {"type": "string", "format": "date"}}})
    );
}

#[test]
fn nested_defs_inside_a_definition_resolve_and_vanish() {
    let input = json!({
        "type": "object",
        "properties": {"o": {"$ref": "#/$defs/Outer"}},
        "$defs": {
            "Outer": {
                "type": "object",
                "properties": {"i": {"$ref": "#/$defs/Outer/$defs/Inner"}},
                "$defs": {"Inner": {"type": "integer", "minimum": 0}}
            }
        }
    });
    assert_eq!(
        ok(input),
        json!({"type": "object", "properties": {"o": {
            "type": "object", "properties": {"i": {"type": "integer", "minimum": 0}}
        }}})
    );
}

#[test]
fn case05_sibling_keywords_merge_and_win() {
    let input = json!({
        "type": "object",
        "properties": {"to": {"$ref": "#/$defs/E", "description": "recipient"}},
        "$defs": {"E": {"type": "string", "description": "an email address", "format": "email"}}
    });
    assert_eq!(
        ok(input),
        json!({"type": "object", "properties": {"to": {
            "type": "string", "description": "recipient", "format": "email"
        }}})
    );
}

#[test]
fn sibling_properties_and_required_are_unions() {
    let input = json!({
        "type": "object",
        "properties": {"p": {
            "$ref": "#/$defs/Base",
            "properties": {"b": {"type": "integer"}, "c": {"type": "boolean"}},
            "required": ["c", "a"],
            "type": ["object", "null"]
        }},
        "$defs": {"Base": {
            "type": "object",
            "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
            "required": ["a", "b"]
        }}
    });
    assert_eq!(
        ok(input),
        json!({"type": "object", "properties": {"p": {
            "type": ["object", "null"],
            "properties": {"a": {"type": "string"}, "b": {"type": "integer"}, "c": {"type": "boolean"}},
            "required": ["a", "b", "c"]
        }}})
    );
}

#[test]
fn siblings_next_to_boolean_targets() {
    let input = json!({
        "type": "object",
        "properties": {
            "any": {"$ref": "#/$defs/Any", "description": "anything"},
            "none": {"$ref": "#/$defs/None", "description": "nothing"},
            "bare": {"$ref": "#/$defs/None"}
        },
        "$defs": {"Any": true, "None": false}
    });
    assert_eq!(
        ok(input),
        json!({"type": "object", "properties": {
            "any": {"description": "anything"},
            "none": {"not": {}, "description": "nothing"},
            "bare": false
        }})
    );
}

#[test]
fn case06_pointer_ref_deep_into_properties() {
    let input = json!({
        "type": "object",
        "properties": {
            "body": {"anyOf": [
                {"type": "string"},
                {"type": "object", "properties": {"msg": {"type": "object", "properties": {
                    "bcc": {"type": "array", "items": {"type": "string", "format": "email"}}
                }}}}
            ]},
            "cc": {"type": "array", "items": {
                "$ref": "#/properties/body/anyOf/1/properties/msg/properties/bcc/items"
            }}
        }
    });
    let out = ok(input.clone());
    assert_eq!(out["properties"]["body"], input["properties"]["body"]);
    assert_eq!(
        out["properties"]["cc"],
        json!({"type": "array", "items": {"type": "string", "format": "email"}})
    );
}

#[test]
fn case07_pointer_escapes_and_percent_encoding() {
    let input = json!({
        "type": "object",
        "properties": {
            "slash": {"$ref": "#/$defs/a~1b"},
            "tilde": {"$ref": "#/$defs/t~0x"},
            "percent": {"$ref": "#/$defs/50%25"},
            "space": {"$ref": "#/$defs/with%20space"},
            "literal": {"$ref": "#/$defs/x~01"},
            "encoded_tilde": {"$ref": "#/$defs/a%7E1b"}
        },
        "$defs": {
            "a/b": {"type": "string"},
            "t~x": {"type": "integer"},
            "50%": {"type": "number"},
            "with space": {"type": "boolean"},
            "x~1": {"type": "null"}
        }
    });
    assert_eq!(
        ok(input),
        json!({"type": "object", "properties": {
            "slash": {"type": "string"},
            "tilde": {"type": "integer"},
            "percent": {"type": "number"},
            "space": {"type": "boolean"},
            "literal": {"type": "null"},
            "encoded_tilde": {"type": "string"}
        }})
    );
}

#[test]
fn pointer_into_arrays_uses_canonical_indexes() {
    let base = json!({
        "type": "object",
        "properties": {"u": {"anyOf": [{"type": "string"}, {"type": "integer"}]}},
    });
    let mut good = base.clone();
    good["properties"]["v"] = json!({"$ref": "#/properties/u/anyOf/1"});
    assert_eq!(ok(good)["properties"]["v"], json!({"type": "integer"}));
    for bad in ["#/properties/u/anyOf/01", "#/properties/u/anyOf/2", "#/properties/u/anyOf/-"] {
        let mut input = base.clone();
        input["properties"]["v"] = json!({"$ref": bad});
        let e = err(input);
        assert_eq!(e.kind(), &SchemaErrorKind::MissingTarget { reference: bad.into() });
        assert_eq!(e.pointer(), "/properties/v/$ref");
    }
}

#[test]
fn case08_self_cycle_is_rejected_at_the_ref() {
    let e = err(json!({
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/Node"}},
        "$defs": {"Node": {"type": "object", "properties": {
            "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}
        }}}
    }));
    assert_eq!(e.kind(), &cycle("#/$defs/Node", &["/$defs/Node", "/$defs/Node"]));
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
    assert_eq!(e.kind(), &cycle("#/$defs/A", &["/$defs/A", "/$defs/B", "/$defs/A"]));
    assert_eq!(e.pointer(), "/$defs/B/properties/a/$ref");
    assert_eq!(
        e.to_string(),
        "inputSchema is recursive: $ref \"#/$defs/A\" at #/$defs/B/properties/a/$ref leads \
         back into a schema that is still being expanded (#/$defs/A -> #/$defs/B -> \
         #/$defs/A); OpenAI parameters must be a finite tree, so fix the tool's inputSchema \
         to break the cycle (for example replace the recursive $ref with a plain object \
         schema)"
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
fn unreferenced_recursive_def_is_not_an_error() {
    let input = json!({
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "$defs": {"Loop": {"$ref": "#/$defs/Loop"}}
    });
    assert_eq!(ok(input), json!({"type": "object", "properties": {"a": {"type": "string"}}}));
}

#[test]
fn case10_diamond_is_inlined_at_every_site() {
    let input = json!({
        "type": "object",
        "properties": {
            "home": {"$ref": "#/$defs/Address"},
            "work": {"$ref": "#/$defs/Address"},
            "pair": {"type": "array", "items": [{"$ref": "#/$defs/Pt"}, {"$ref": "#/$defs/Pt"}]}
        },
        "$defs": {
            "Address": {"type": "object", "properties": {"at": {"$ref": "#/$defs/Pt"}, "near": {"$ref": "#/$defs/Pt"}}},
            "Pt": {"type": "number"}
        }
    });
    let address = json!({"type": "object", "properties": {"at": {"type": "number"}, "near": {"type": "number"}}});
    assert_eq!(
        ok(input),
        json!({"type": "object", "properties": {
            "home": address.clone(),
            "work": address,
            "pair": {"type": "array", "items": [{"type": "number"}, {"type": "number"}]}
        }})
    );
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
        assert_eq!(e.kind(), &SchemaErrorKind::RemoteRef { reference: reference.into() });
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
fn absolute_ref_to_the_root_id_is_local() {
    let input = json!({
        "$id": "https://example.com/tool.json",
        "type": "object",
        "properties": {"a": {"$ref": "https://example.com/tool.json#/$defs/A"}},
        "$defs": {"A": {"type": "string"}}
    });
    assert_eq!(ok(input), json!({"type": "object", "properties": {"a": {"type": "string"}}}));
}

#[test]
fn case12_missing_target_is_rejected() {
    let e = err(json!({
        "type": "object",
        "properties": {"m": {"$ref": "#/$defs/Missing"}},
        "$defs": {"Other": {"type": "string"}}
    }));
    assert_eq!(e.kind(), &SchemaErrorKind::MissingTarget { reference: "#/$defs/Missing".into() });
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
        &SchemaErrorKind::TargetNotSchema { reference: "#/properties/a/type".into(), found: "a string" }
    );
    assert_eq!(e.pointer(), "/properties/b/$ref");
}

#[test]
fn malformed_refs_are_rejected() {
    let cases = [
        (json!(42), "42", "$ref must be a string, found a number"),
        (json!("#node"), "\"#node\"", "named anchors are not supported, only JSON pointers (#/...)"),
        (json!("#/$defs/a~2"), "\"#/$defs/a~2\"", "`~` in a JSON pointer must be followed by 0 or 1"),
        (json!("#/$defs/a~"), "\"#/$defs/a~\"", "`~` in a JSON pointer must be followed by 0 or 1"),
        (json!("#/$defs/%zz"), "\"#/$defs/%zz\"", "the fragment has invalid percent-encoding"),
        (json!("#/$defs/%FF"), "\"#/$defs/%FF\"", "the fragment has invalid percent-encoding"),
    ];
    for (reference, shown, reason) in cases {
        let e = err(json!({"type": "object", "properties": {"x": {"$ref": reference}}}));
        let expected = SchemaErrorKind::BadRef { reference: shown.into(), reason: reason.into() };
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
fn case13_root_ref_is_inlined() {
    let input = json!({
        "$ref": "#/$defs/Args",
        "$defs": {"Args": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}
    });
    assert_eq!(
        ok(input),
        json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]})
    );
}

#[test]
fn root_ref_without_type_or_properties_is_completed() {
    let input = json!({"$ref": "#/definitions/Args", "definitions": {"Args": {"required": []}}});
    assert_eq!(ok(input), json!({"type": "object", "properties": {}, "required": []}));
}

#[test]
fn case14_non_object_roots_are_rejected() {
    let cases = [
        (json!({"type": "string"}), "/type", "`\"type\": \"string\"`"),
        (json!({"type": ["string", "null"]}), "/type", "`\"type\": [\"string\",\"null\"]`"),
        (json!({"anyOf": [{"type": "object"}, {"type": "string"}]}), "", "a schema with `anyOf` and no `type`"),
        (json!({"enum": ["a", "b"]}), "", "a schema with `enum` and no `type`"),
        (json!(false), "", "`false` (a schema that accepts nothing)"),
        (json!([{"type": "object"}]), "", "an array instead of a schema object"),
        (json!("object"), "", "a string instead of a schema object"),
        (json!({"$ref": "#/$defs/S", "$defs": {"S": {"type": "integer"}}}), "/type", "`\"type\": \"integer\"`"),
    ];
    for (input, pointer, found) in cases {
        let e = err(input);
        assert_eq!(e.kind(), &SchemaErrorKind::NotObject { found: found.into() });
        assert_eq!(e.pointer(), pointer);
    }
    assert_eq!(
        err(json!({"type": "string"})).to_string(),
        "top-level inputSchema must describe an object of named arguments (expected \"type\": \
         \"object\" with \"properties\"), found `\"type\": \"string\"` at #/type; fix the tool's \
         inputSchema to take its arguments as properties of an object"
    );
}

#[test]
fn root_object_combinations_are_accepted() {
    assert_eq!(
        ok(json!({"type": ["object", "null"], "properties": {"a": {"type": "string"}}})),
        json!({"type": "object", "properties": {"a": {"type": "string"}}})
    );
    assert_eq!(
        ok(json!({"properties": {"a": {}, "b": {}}, "oneOf": [{"required": ["a"]}, {"required": ["b"]}]})),
        json!({
            "type": "object",
            "properties": {"a": {}, "b": {}},
            "oneOf": [{"required": ["a"]}, {"required": ["b"]}]
        })
    );
}

#[test]
fn case15_non_schema_property_is_dropped_and_reported() {
    let input = json!({"type": "object", "properties": {"type": "object", "x": {"type": "string"}}});
    let done = convert(Some(&input), &Limits::default()).unwrap();
    assert_eq!(
        done.parameters,
        json!({"type": "object", "properties": {"x": {"type": "string"}}})
    );
    assert_eq!(done.dropped, vec!["/properties/type".to_string()]);
}

#[test]
fn other_non_schema_fragments_are_dropped_and_reported_once() {
    let input = json!({
        "type": "object",
        "properties": {
            "a": {"anyOf": [{"type": "string"}, "oops", 3]},
            "b": {"allOf": ["x"]},
            "c": {"type": "array", "items": "string"},
            "d": {"type": "object", "properties": ["not", "a", "map"]},
            "e": {"$ref": "#/$defs/Bad"},
            "f": {"$ref": "#/$defs/Bad"}
        },
        "$defs": {"Bad": {"type": "object", "additionalProperties": "no"}}
    });
    let done = convert(Some(&input), &Limits::default()).unwrap();
    assert_eq!(
        done.parameters,
        json!({"type": "object", "properties": {
            "a": {"anyOf": [{"type": "string"}]},
            "b": {},
            "c": {"type": "array"},
            "d": {"type": "object"},
            "e": {"type": "object"},
            "f": {"type": "object"}
        }})
    );
    let expected = [
        "/properties/a/anyOf/1",
        "/properties/a/anyOf/2",
        "/properties/b/allOf/0",
        "/properties/c/items",
        "/properties/d/properties",
        "/$defs/Bad/additionalProperties",
    ];
    assert_eq!(done.dropped, expected.map(String::from).to_vec());
}

#[test]
fn case16_tuple_items_pass_through_expanded() {
    let input = json!({
        "type": "object",
        "properties": {"pt": {"type": "array", "items": [{"type": "number"}, {"$ref": "#/$defs/L"}], "additionalItems": false}},
        "$defs": {"L": {"type": "string", "maxLength": 3}}
    });
    assert_eq!(
        ok(input),
        json!({"type": "object", "properties": {"pt": {
            "type": "array",
            "items": [{"type": "number"}, {"type": "string", "maxLength": 3}],
            "additionalItems": false
        }}})
    );
}

#[test]
fn case17_annotations_and_data_keywords_are_preserved_verbatim() {
    let input = json!({
        "type": "object",
        "properties": {
            "n": {"type": ["string", "null"], "format": "uri", "default": null},
            "e": {"enum": ["a", {"$ref": "#/not/resolved"}], "default": {"$ref": "data, not a ref"}},
            "c": {"const": {"definitions": 1}, "examples": [{"$defs": 2}], "x-vendor": {"$ref": "kept"}}
        },
        "additionalProperties": false
    });
    assert_eq!(ok(input.clone()), input);
}

#[test]
fn properties_named_like_keywords_are_kept() {
    let input = json!({
        "type": "object",
        "properties": {
            "$ref": {"type": "string"},
            "$defs": {"type": "string"},
            "definitions": {"type": "string"},
            "$id": {"type": "string"}
        }
    });
    assert_eq!(ok(input.clone()), input);
}

#[test]
fn meta_keywords_are_stripped_everywhere() {
    let input = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "urn:tool",
        "$comment": "generated",
        "type": "object",
        "properties": {"a": {"$id": "urn:a", "$anchor": "a", "$schema": "x", "type": "string"}}
    });
    assert_eq!(ok(input), json!({"type": "object", "properties": {"a": {"type": "string"}}}));
}

#[test]
fn dependencies_keep_name_lists_and_expand_schemas() {
    let input = json!({
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "dependencies": {"a": ["b"], "c": {"$ref": "#/$defs/C"}},
        "$defs": {"C": {"required": ["d"]}}
    });
    assert_eq!(
        ok(input),
        json!({
            "type": "object",
            "properties": {"a": {"type": "string"}},
            "dependencies": {"a": ["b"], "c": {"required": ["d"]}}
        })
    );
}

#[test]
fn ref_to_a_ref_is_followed() {
    let input = json!({
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/A"}},
        "$defs": {"A": {"$ref": "#/$defs/B", "title": "A"}, "B": {"type": "string", "title": "B"}}
    });
    assert_eq!(
        ok(input),
        json!({"type": "object", "properties": {"a": {"type": "string", "title": "A"}}})
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
fn small_fanout_chain_fits_within_default_limits() {
    let out = ok(chained_defs(5, 2));
    assert!(!has_key_anywhere(&out, &["$ref", "$defs"]));
    let leaf = &out["properties"]["x"]["properties"]["p0"]["properties"]["p1"]["properties"]["p0"]
        ["properties"]["p1"]["properties"]["p0"];
    assert_eq!(leaf, &json!({"type": "string"}));
}

#[test]
fn node_cap_is_exact() {
    // root, properties, a, a.type, type: five values, in key order.
    let input = json!({"type": "object", "properties": {"a": {"type": "string"}}});
    let five = Limits { max_depth: 64, max_nodes: 5 };
    assert_eq!(to_openai_parameters(Some(&input), &five).unwrap(), input);
    let four = Limits { max_depth: 64, max_nodes: 4 };
    let e = to_openai_parameters(Some(&input), &four).unwrap_err();
    assert_eq!(e.kind(), &SchemaErrorKind::TooLarge { max_nodes: 4 });
    assert_eq!(e.pointer(), "/type");
}

#[test]
fn depth_cap_is_exact() {
    // root 0, properties 1, a 2, a.properties 3, b 4, b.type 5.
    let input = json!({"type": "object", "properties": {"a": {"properties": {"b": {"type": "string"}}}}});
    let five = Limits { max_depth: 5, max_nodes: 100 };
    assert_eq!(to_openai_parameters(Some(&input), &five).unwrap(), input);
    let four = Limits { max_depth: 4, max_nodes: 100 };
    let e = to_openai_parameters(Some(&input), &four).unwrap_err();
    assert_eq!(e.kind(), &SchemaErrorKind::TooDeep { max_depth: 4 });
    assert_eq!(e.pointer(), "/properties/a/properties/b/type");
}

#[test]
fn deep_ref_nesting_hits_the_depth_cap() {
    let e = err(chained_defs(30, 1));
    assert_eq!(e.kind(), &SchemaErrorKind::TooDeep { max_depth: 64 });
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
        defs.insert(format!("D{i}"), json!({"$ref": format!("#/$defs/D{}", i + 1)}));
    }
    defs.insert("D100".into(), json!({"type": "string"}));
    let input = json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/D0"}}, "$defs": defs});
    let e = err(input.clone());
    assert_eq!(e.kind(), &SchemaErrorKind::TooDeep { max_depth: 64 });
    let roomy = Limits { max_depth: 200, max_nodes: 1000 };
    assert_eq!(
        to_openai_parameters(Some(&input), &roomy).unwrap(),
        json!({"type": "object", "properties": {"x": {"type": "string"}}})
    );
}

#[test]
fn case19_output_is_deterministic() {
    let text = r##"{"required":["b","a"],"properties":{"b":{"$ref":"#/$defs/B","description":"bee"},
        "a":{"type":"string"}},"$defs":{"B":{"type":"integer","minimum":1}}}"##;
    let first: Value = serde_json::from_str(text).unwrap();
    let second: Value = serde_json::from_str(text).unwrap();
    let one = serde_json::to_string(&ok(first)).unwrap();
    let two = serde_json::to_string(&ok(second)).unwrap();
    assert_eq!(one, two);
    assert_eq!(
        one,
        r#"{"properties":{"a":{"type":"string"},"b":{"description":"bee","minimum":1,"type":"integer"}},"required":["b","a"],"type":"object"}"#
    );
}

#[test]
fn error_is_a_std_error_with_a_fix_hint() {
    let e = err(json!({"type": "object", "properties": {"m": {"$ref": "#/$defs/Missing"}}}));
    let as_std: &dyn std::error::Error = &e;
    assert!(as_std.source().is_none());
    assert!(as_std.to_string().contains("fix the tool's inputSchema"));
}
