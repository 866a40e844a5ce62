//! Unit tests for `schema.rs`: conversions that succeed. Case numbers refer
//! to bridges.md section 12 A; rejections live in `schema_error_tests.rs`.

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
            props.insert(
                format!("p{f}"),
                json!({"$ref": format!("#/$defs/D{}", i + 1)}),
            );
        }
        defs.insert(
            format!("D{i}"),
            json!({"type": "object", "properties": props}),
        );
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
    let input =
        json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]});
    assert_eq!(ok(input.clone()), input);
}

#[test]
fn case02_missing_null_empty_and_true_become_empty_object() {
    let expected = json!({"type": "object", "properties": {}});
    let limits = Limits::default();
    assert_eq!(to_openai_parameters(None, &limits).unwrap(), expected);
    assert_eq!(
        to_openai_parameters(Some(&Value::Null), &limits).unwrap(),
        expected
    );
    assert_eq!(ok(json!({})), expected);
    assert_eq!(ok(json!(true)), expected);
    assert_eq!(
        ok(json!({"$schema": "https://json-schema.org/draft/2020-12/schema"})),
        expected
    );
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
    for bad in [
        "#/properties/u/anyOf/01",
        "#/properties/u/anyOf/2",
        "#/properties/u/anyOf/-",
    ] {
        let mut input = base.clone();
        input["properties"]["v"] = json!({"$ref": bad});
        let e = err(input);
        assert_eq!(
            e.kind(),
            &SchemaErrorKind::MissingTarget {
                reference: bad.into()
            }
        );
        assert_eq!(e.pointer(), "/properties/v/$ref");
    }
}

#[test]
fn unreferenced_recursive_def_is_not_an_error() {
    let input = json!({
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "$defs": {"Loop": {"$ref": "#/$defs/Loop"}}
    });
    assert_eq!(
        ok(input),
        json!({"type": "object", "properties": {"a": {"type": "string"}}})
    );
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
fn absolute_ref_to_the_root_id_is_local() {
    let input = json!({
        "$id": "https://example.com/tool.json",
        "type": "object",
        "properties": {"a": {"$ref": "https://example.com/tool.json#/$defs/A"}},
        "$defs": {"A": {"type": "string"}}
    });
    assert_eq!(
        ok(input),
        json!({"type": "object", "properties": {"a": {"type": "string"}}})
    );
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
    assert_eq!(
        ok(input),
        json!({"type": "object", "properties": {}, "required": []})
    );
}

#[test]
fn root_object_combinations_are_accepted() {
    assert_eq!(
        ok(json!({"type": ["object", "null"], "properties": {"a": {"type": "string"}}})),
        json!({"type": "object", "properties": {"a": {"type": "string"}}})
    );
    assert_eq!(
        ok(
            json!({"properties": {"a": {}, "b": {}}, "oneOf": [{"required": ["a"]}, {"required": ["b"]}]})
        ),
        json!({
            "type": "object",
            "properties": {"a": {}, "b": {}},
            "oneOf": [{"required": ["a"]}, {"required": ["b"]}]
        })
    );
}

#[test]
fn case15_non_schema_property_is_dropped_and_reported() {
    let input =
        json!({"type": "object", "properties": {"type": "object", "x": {"type": "string"}}});
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
    assert_eq!(
        ok(input),
        json!({"type": "object", "properties": {"a": {"type": "string"}}})
    );
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
fn small_fanout_chain_fits_within_default_limits() {
    let out = ok(chained_defs(5, 2));
    assert!(!has_key_anywhere(&out, &["$ref", "$defs"]));
    let leaf = &out["properties"]["x"]["properties"]["p0"]["properties"]["p1"]["properties"]["p0"]
        ["properties"]["p1"]["properties"]["p0"];
    assert_eq!(leaf, &json!({"type": "string"}));
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

#[path = "schema_error_tests.rs"]
mod errors;
