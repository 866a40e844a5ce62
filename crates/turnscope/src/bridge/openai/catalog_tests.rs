use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::tools::{FnTool, Toolbox, Tools};

fn tool(name: &str, schema: Value) -> FnTool {
    let label = name.to_string();
    FnTool::new(name, &format!("{name} tool"), schema, move |_| {
        let label = label.clone();
        async move { Ok(label) }
    })
}

fn toolbox() -> Arc<dyn Tools> {
    Arc::new(
        Toolbox::new()
            .with(tool(
                "send",
                json!({
                    "type": "object",
                    "properties": {"to": {"$ref": "#/$defs/Email", "description": "recipient"}},
                    "$defs": {"Email": {"type": "string", "format": "email"}}
                }),
            ))
            .with(tool(
                "loop",
                json!({"$ref": "#/$defs/A", "$defs": {"A": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}}}}),
            ))
            .with(tool("self.audio.set_volume", Value::Null))
            .with(crate::tools::builtin::end_session()),
    )
}

#[test]
fn schemas_are_inlined_names_made_valid_and_a_rejected_tool_left_out() {
    let bus = Bus::default();
    let mut events = bus.subscribe();
    let catalog = Catalog::new(toolbox(), bus);
    let listing = catalog.listing();
    let names: Vec<&str> = listing
        .entries()
        .iter()
        .map(|e| e.openai_name.as_str())
        .collect();
    assert_eq!(names, ["send", "self_audio_set_volume"]);
    assert_eq!(listing.rejected(), ["loop"]);
    let send = &listing.entries()[0].function;
    assert_eq!(send["type"], "function");
    assert_eq!(send["function"]["description"], "send tool");
    assert_eq!(
        send["function"]["parameters"],
        json!({"type": "object", "properties": {"to": {"type": "string", "format": "email", "description": "recipient"}}})
    );
    let volume = listing.resolve("self_audio_set_volume").unwrap();
    assert_eq!(volume.tool, "self.audio.set_volume");
    assert_eq!(
        volume.function["function"]["parameters"],
        json!({"type": "object", "properties": {}})
    );
    assert_eq!(
        listing
            .resolve("self.audio.set_volume")
            .map(|e| &e.openai_name),
        Some(&volume.openai_name),
        "the tool set's own name is accepted too"
    );
    assert!(
        listing.resolve("end_session").is_none(),
        "session control is not offered"
    );
    assert!(listing.resolve("loop").is_none());

    let body: Value = serde_json::from_slice(&listing.body()).unwrap();
    assert_eq!(body.as_array().unwrap().len(), 2);
    assert!(!body.to_string().contains("$ref") && !body.to_string().contains("$defs"));

    let warning = std::iter::from_fn(|| events.try_recv())
        .find_map(|e| match &*e {
            Event::Log { level, message, .. } if level == "warn" => Some(message.clone()),
            _ => None,
        })
        .expect("a warning for the rejected tool");
    assert!(
        warning.contains("`loop`") && warning.contains("#/$defs/A/properties/a/$ref"),
        "{warning}"
    );
}

#[test]
fn a_listing_is_reused_until_the_specs_change_and_warnings_are_not_repeated() {
    let bus = Bus::default();
    let mut events = bus.subscribe();
    let catalog = Catalog::new(toolbox(), bus);
    let first = catalog.listing();
    let second = catalog.listing();
    assert!(Arc::ptr_eq(&first, &second));
    let warnings = std::iter::from_fn(|| events.try_recv())
        .filter(|e| matches!(&**e, Event::Log { .. }))
        .count();
    assert_eq!(warnings, 1);
}

/// A tool set whose specs are swapped at run time, like a registry after `list_changed`.
struct Swappable(std::sync::Mutex<Arc<[ToolSpec]>>);

#[async_trait::async_trait]
impl Tools for Swappable {
    fn specs(&self) -> Arc<[ToolSpec]> {
        self.0.lock().unwrap().clone()
    }
    async fn call(&self, name: &str, _arguments: Value) -> crate::tools::ToolOutcome {
        crate::tools::ToolOutcome::ok(name)
    }
}

fn spec(name: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: String::new(),
        input_schema: json!({"type": "object"}),
        source: "test".into(),
    }
}

#[test]
fn new_specs_give_a_new_listing_with_equal_specs_reusing_the_old_one() {
    let tools = Arc::new(Swappable(std::sync::Mutex::new(Arc::from(vec![spec("a")]))));
    let catalog = Catalog::new(tools.clone(), Bus::default());
    let first = catalog.listing();
    *tools.0.lock().unwrap() = Arc::from(vec![spec("a")]);
    assert!(Arc::ptr_eq(&first, &catalog.listing()), "same contents");
    *tools.0.lock().unwrap() = Arc::from(vec![spec("a"), spec("b")]);
    let names: Vec<String> = catalog
        .listing()
        .entries()
        .iter()
        .map(|e| e.openai_name.clone())
        .collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(catalog.listing().names(), "a, b");
}

#[test]
fn the_strict_listing_mends_what_it_can_and_serves_the_rest_not_strict() {
    let tools: Arc<dyn Tools> = Arc::new(
        Toolbox::new()
            .with(tool(
                "send",
                json!({"type": "object", "properties": {"to": {"type": "string"}, "cc": {"type": "string"}}, "required": ["to"]}),
            ))
            .with(tool(
                "tag",
                json!({"type": "object", "properties": {"labels": {"type": "object", "additionalProperties": {"type": "string"}}}, "required": ["labels"]}),
            )),
    );
    let bus = Bus::default();
    let mut events = bus.subscribe();
    let catalog = Catalog::new(tools, bus);
    let listing = catalog.listing();
    let (body, not_strict) = catalog.strict(&listing);
    let served: Value = serde_json::from_slice(&body).unwrap();
    let send = &served[0]["function"];
    assert_eq!(send["strict"], true);
    assert_eq!(send["parameters"]["required"], json!(["cc", "to"]));
    assert_eq!(
        send["parameters"]["properties"]["cc"]["type"],
        json!(["string", "null"])
    );
    assert_eq!(send["parameters"]["additionalProperties"], false);
    assert_eq!(served[1]["function"]["strict"], false);
    assert_eq!(not_strict, ["tag"]);
    let warned = std::iter::from_fn(|| events.try_recv())
        .filter_map(|e| match &*e {
            Event::Log { message, .. } => Some(message.clone()),
            _ => None,
        })
        .collect::<Vec<_>>();
    assert!(
        warned
            .iter()
            .any(|m| m.contains("`tag` has no OpenAI strict-mode version")),
        "{warned:?}"
    );
    // The plain listing is unchanged.
    let plain: Value = serde_json::from_slice(&listing.body()).unwrap();
    assert!(plain[0]["function"].get("strict").is_none());
}
