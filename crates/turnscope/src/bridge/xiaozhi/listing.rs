//! The `tools/list` answer the endpoint gets: the upstream's tools minus the filtered ones, cut
//! into pages (the cursor is the offset as decimal text), each `inputSchema` made self-contained
//! because callers behind the endpoint drop `$defs`. `tools_page` says what happens when a
//! schema cannot be inlined.

use serde_json::{Map, Value};

use crate::config::ToolFilter;
use crate::tools::openai_shape::schema::{self, Limits, SchemaError};

/// Tools per page when nothing else is configured: more than any endpoint is known to take
/// (field reports say ~30 tools already strain the official broker).
pub(crate) const DEFAULT_PAGE_SIZE: usize = 100;

/// The `tools` of `tools/list` for the page at `cursor`, with `nextCursor` when more
/// follow. `on_schema_error(tool, error)` hears about schemas sent unconverted.
///
/// # Errors
///
/// A cursor that is not one this bridge handed out (text for a `-32602` reply).
///
/// Callers behind the Xiaozhi endpoint keep only `type`/`properties`/`required` of a schema
/// (they drop `$defs`), so every local `$ref` is inlined with the same converter the OpenAI
/// bridge uses ([`crate::tools::openai_shape::schema`]). A schema that cannot be inlined (a cycle, a
/// remote ref) is sent as the server wrote it, and the caller is told so it can warn once.
pub(crate) fn tools_page(
    tools: Vec<Value>,
    filter: &ToolFilter,
    cursor: Option<&Value>,
    page_size: usize,
    mut on_schema_error: impl FnMut(&str, &SchemaError),
) -> Result<Value, String> {
    let start = match cursor {
        None | Some(Value::Null) => 0,
        Some(Value::String(s)) => s.parse::<usize>().map_err(|_| {
            format!("tools/list: unknown cursor {s:?}; start again without a cursor")
        })?,
        Some(other) => return Err(format!("tools/list: cursor must be a string, got {other}")),
    };
    let offered: Vec<Value> = tools
        .into_iter()
        .filter(|t| {
            t.get("name")
                .and_then(Value::as_str)
                .is_some_and(|n| filter.admits(n))
        })
        .collect();
    if start > offered.len() {
        return Err(format!(
            "tools/list: cursor {start} is past the end ({} tools); start again without a cursor",
            offered.len()
        ));
    }
    let page_size = page_size.max(1);
    let end = (start + page_size).min(offered.len());
    let page: Vec<Value> = offered[start..end]
        .iter()
        .cloned()
        .map(|tool| inline_schema(tool, &mut on_schema_error))
        .collect();
    let mut result = Map::new();
    result.insert("tools".into(), Value::Array(page));
    if end < offered.len() {
        result.insert("nextCursor".into(), Value::String(end.to_string()));
    }
    Ok(Value::Object(result))
}

fn inline_schema(mut tool: Value, on_error: &mut impl FnMut(&str, &SchemaError)) -> Value {
    let name = tool
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if let Some(obj) = tool.as_object_mut() {
        let original = obj.get("inputSchema");
        match schema::to_openai_parameters(original, &Limits::default()) {
            Ok(parameters) => {
                obj.insert("inputSchema".into(), parameters);
            }
            Err(e) => on_error(&name, &e),
        }
    }
    tool
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tools(n: usize) -> Vec<Value> {
        (0..n)
            .map(|i| json!({"name": format!("t{i}"), "inputSchema": {"type": "object", "properties": {}}}))
            .collect()
    }

    fn names(page: &Value) -> Vec<&str> {
        page["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn pages_follow_the_cursor_and_the_filter_strips_denied_tools() {
        let filter = ToolFilter {
            allow: vec![],
            deny: vec!["t1".into()],
        };
        let first = tools_page(tools(5), &filter, None, 2, |_, _| {}).unwrap();
        assert_eq!(names(&first), ["t0", "t2"]);
        assert_eq!(first["nextCursor"], "2");
        let second =
            tools_page(tools(5), &filter, Some(&first["nextCursor"]), 2, |_, _| {}).unwrap();
        assert_eq!(names(&second), ["t3", "t4"]);
        assert!(second.get("nextCursor").is_none());
        assert!(tools_page(tools(5), &filter, Some(&json!("zz")), 2, |_, _| {}).is_err());
        assert!(tools_page(tools(5), &filter, Some(&json!("9")), 2, |_, _| {}).is_err());
    }

    #[test]
    fn refs_are_inlined_and_bad_schemas_pass_unchanged() {
        let listed = vec![
            json!({"name": "mail", "description": "d", "inputSchema": {
                "type": "object",
                "properties": {"to": {"$ref": "#/$defs/Email"}},
                "$defs": {"Email": {"type": "string", "format": "email"}}
            }}),
            json!({"name": "loop", "inputSchema": {
                "type": "object",
                "properties": {"n": {"$ref": "#/$defs/N"}},
                "$defs": {"N": {"type": "object", "properties": {"next": {"$ref": "#/$defs/N"}}}}
            }}),
            json!({"name": "bare"}),
        ];
        let mut bad = Vec::new();
        let page = tools_page(listed.clone(), &ToolFilter::default(), None, 10, |n, _| {
            bad.push(n.to_string())
        })
        .unwrap();
        assert_eq!(
            page["tools"][0]["inputSchema"],
            json!({"type": "object", "properties": {"to": {"type": "string", "format": "email"}}})
        );
        assert_eq!(page["tools"][0]["description"], "d");
        assert_eq!(page["tools"][1], listed[1]);
        assert_eq!(
            page["tools"][2]["inputSchema"],
            json!({"type": "object", "properties": {}})
        );
        assert_eq!(bad, ["loop"]);
    }
}
