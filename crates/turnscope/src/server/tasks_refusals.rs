//! rmcp's refusals of the tasks extension's methods, reworded on their way out.
//!
//! rmcp checks `tasks/get`, `tasks/update` and `tasks/cancel` itself
//! (`validate_tasks_capability`, ahead of `ServerHandler::get_task` and the others, in the
//! `Service` it implements for every handler, which a handler cannot override and
//! `StreamableHttpService` cannot do without): a server whose capabilities lack the extension
//! (`[server] tasks = false`) gets `-32601` whose whole message is the method's name, and a
//! request that did not declare the extension gets `-32021` "Missing required client
//! capability". The `jsonrpc` layer passes the answer to such a request through [`explain`],
//! which puts turnscope's message (`mcp_errors`) in place of rmcp's, code and `data` kept, as
//! it rewrites rmcp's other bare answers after the fact. Only those two error objects, as rmcp
//! writes them, are replaced; anything else passes byte for byte.

use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::Response;
use futures::StreamExt;
use serde_json::Value;

use super::mcp_errors;

/// The method, when `value` is a request of the tasks extension rmcp checks itself.
pub(crate) fn task_method(value: &Value) -> Option<&'static str> {
    match value.get("method").and_then(Value::as_str)? {
        "tasks/get" => Some("tasks/get"),
        "tasks/update" => Some("tasks/update"),
        "tasks/cancel" => Some("tasks/cancel"),
        _ => None,
    }
}

/// rmcp's two refusals of `method` (the `-32601` as its types serialize it: code, then
/// message, and no data) and what each becomes. `sessionless`: the request named a revision without `initialize` in its
/// own `_meta`.
fn replacements(method: &str, sessionless: bool) -> [(Vec<u8>, Vec<u8>); 2] {
    let quoted = |text: &str| Value::from(text).to_string();
    let off = mcp_errors::tasks_off(method);
    let undeclared = mcp_errors::tasks_undeclared(
        method,
        sessionless,
        rmcp::ErrorData::new(
            rmcp::model::ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
            "",
            None,
        ),
    );
    [
        (
            format!("\"code\":-32601,\"message\":{}", quoted(method)).into_bytes(),
            format!("\"code\":-32601,\"message\":{}", quoted(&off.message)).into_bytes(),
        ),
        // Its `data` may come before or after the message: the message alone is rmcp's own.
        (
            b"\"message\":\"Missing required client capability\"".to_vec(),
            format!("\"message\":{}", quoted(&undeclared.message)).into_bytes(),
        ),
    ]
}

/// `chunk` with rmcp's refusal in it reworded (each JSON answer, and each SSE event, is one
/// chunk as rmcp writes it).
fn reworded(chunk: Bytes, replacements: &[(Vec<u8>, Vec<u8>)]) -> Bytes {
    for (from, to) in replacements {
        if let Some(at) = chunk.windows(from.len()).position(|w| w == from.as_slice()) {
            let mut out = Vec::with_capacity(chunk.len() + to.len());
            out.extend_from_slice(&chunk[..at]);
            out.extend_from_slice(to);
            out.extend_from_slice(&chunk[at + from.len()..]);
            return Bytes::from(out);
        }
    }
    chunk
}

/// The answer to a `method` request (a tasks method rmcp checks), its refusal reworded: JSON
/// or an SSE stream, the status and other headers as rmcp set them.
pub(crate) fn explain(response: Response, method: &str, sessionless: bool) -> Response {
    let replacements = replacements(method, sessionless);
    let (mut parts, body) = response.into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    let stream = body
        .into_data_stream()
        .map(move |chunk| chunk.map(|c| reworded(c, &replacements)));
    Response::from_parts(parts, Body::from_stream(stream))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ClientCapabilities;
    use serde_json::json;

    /// An rmcp error answer as it writes it.
    fn answer(error: rmcp::ErrorData) -> Bytes {
        Bytes::from(json!({"jsonrpc": "2.0", "id": 1, "error": error}).to_string())
    }

    #[test]
    fn only_rmcps_own_tasks_refusals_are_reworded() {
        let all = replacements("tasks/get", true);
        let off = reworded(
            answer(rmcp::ErrorData::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                "tasks/get",
                None,
            )),
            &all,
        );
        let off: Value = serde_json::from_slice(&off).unwrap();
        assert_eq!(off["error"]["code"], -32601);
        let message = off["error"]["message"].as_str().unwrap();
        assert!(message.contains("[server] tasks = false"), "{message}");
        let refusal = rmcp::ErrorData::missing_required_client_capability(
            ClientCapabilities::builder().enable_tasks().build(),
        );
        let data = serde_json::to_value(&refusal.data).unwrap();
        let undeclared = reworded(answer(refusal), &all);
        let undeclared: Value = serde_json::from_slice(&undeclared).unwrap();
        assert_eq!(undeclared["error"]["code"], -32021);
        assert_eq!(
            undeclared["error"]["data"], data,
            "requiredCapabilities kept"
        );
        let message = undeclared["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(
                "_meta[\"io.modelcontextprotocol/clientCapabilities\"].extensions[\"io.modelcontextprotocol/tasks\"]"
            ),
            "{message}"
        );
        // An SSE event carrying it, as a session's answer comes.
        let event = Bytes::from(format!(
            "data: {}\n\n",
            String::from_utf8_lossy(&answer(rmcp::ErrorData::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                "tasks/get",
                None
            )))
        ));
        assert!(String::from_utf8_lossy(&reworded(event, &all)).contains("tasks = false"));
        // turnscope's own answers (an unknown task) pass as they are.
        let unknown = answer(rmcp::ErrorData::invalid_params(
            "taskId: no task has this id",
            None,
        ));
        assert_eq!(reworded(unknown.clone(), &all), unknown);
    }
}
