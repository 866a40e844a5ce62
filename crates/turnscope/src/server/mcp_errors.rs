//! Protocol errors worded here where rmcp's would name only a method or say something else:
//! `-32601` for a method this server does not offer, naming the ones it does; what is wrong
//! with the params of a request this server knows (`initialize`, `tasks/get`, `tasks/cancel`,
//! `tasks/update`), as the `-32602` text that says what a valid one carries.
//!
//! rmcp reads a known method whose params do not fit its type as a different message (an
//! `initialize` without a session as a request that needs one, a `tasks/get` as an unknown
//! method); the field checks below say which field is at fault, in the words of
//! `crate::json::json_kind`.

use rmcp::ErrorData;
use rmcp::model::{ErrorCode, InitializeRequestParams};
use serde_json::{Map, Value};

/// Where the methods are specified, for a client that asked for one this server lacks.
const SPEC: &str = "https://modelcontextprotocol.io/specification";

/// `-32601` for `method`, which this server does not offer: the methods it does (the tasks
/// extension's when `tasks` is on) and where the protocol is specified.
pub(crate) fn method_not_found(method: &str, tasks: bool) -> ErrorData {
    let tasks = if tasks {
        ", and with the tasks extension (io.modelcontextprotocol/tasks) tasks/get, tasks/update \
         and tasks/cancel"
    } else {
        ""
    };
    let draft = match (
        matches!(method, "tasks/result" | "tasks/list"),
        tasks.is_empty(),
    ) {
        (false, _) => "",
        (true, false) => {
            " (tasks/result and tasks/list are the 2025-11-25 draft's; under the extension this \
             server offers, tasks/get carries a completed task's result, and tasks are not listed)"
        }
        (true, true) => {
            " (tasks/result and tasks/list are the 2025-11-25 draft's; this server offers no \
             tasks at all: its config turns them off ([server] tasks = false), so chat answers \
             synchronously, its result the reply)"
        }
    };
    ErrorData::new(
        ErrorCode::METHOD_NOT_FOUND,
        format!(
            "Method not found: {method}{draft}. This server offers initialize (2025-11-25 and older) or \
             server/discover (2026-07-28), ping, tools/list and tools/call (its tools: start, \
             chat){tasks}; no prompts, resources or completion. See {SPEC}."
        ),
        None,
    )
}

/// Where a request declares the tasks extension under 2026-07-28.
const TASKS_DECLARED_AT: &str = "params._meta[\"io.modelcontextprotocol/clientCapabilities\"]\
     .extensions[\"io.modelcontextprotocol/tasks\"] = {}";

/// `-32601` for `method` of the tasks extension (`tasks/get`, `tasks/update`,
/// `tasks/cancel`) when this server's config turns tasks off (rmcp's says only the method).
pub(crate) fn tasks_off(method: &str) -> ErrorData {
    ErrorData::new(
        ErrorCode::METHOD_NOT_FOUND,
        format!(
            "Method not found: {method}. This server's config turns tasks off ([server] tasks = \
             false): it offers no tasks extension (io.modelcontextprotocol/tasks), no chat call \
             becomes a task, and there is none to poll, update or cancel; chat answers \
             synchronously, its result the reply. To have long turns answered as tasks, set \
             [server] tasks = true (the default) and restart the server."
        ),
        None,
    )
}

/// `refusal` (rmcp's `-32021` for `method`, a request that did not declare the tasks
/// extension) with a message saying where to declare it; its code and `data` (the
/// `requiredCapabilities`) kept. `sessionless`: the request named a revision without
/// `initialize` (2026-07-28) in its own `_meta`; else it came in an MCP session (2025-11-25 or
/// older), whose chat calls never become tasks here.
pub(crate) fn tasks_undeclared(method: &str, sessionless: bool, refusal: ErrorData) -> ErrorData {
    let message = if sessionless {
        format!(
            "Missing required client capability: {method} belongs to the tasks extension \
             (io.modelcontextprotocol/tasks), which this request did not declare. Declare it in \
             each request's own {TASKS_DECLARED_AT} (MCP 2026-07-28), on tasks/* as on the chat \
             call that became the task; data.requiredCapabilities names it."
        )
    } else {
        format!(
            "Missing required client capability: {method} belongs to the tasks extension \
             (io.modelcontextprotocol/tasks), which this request did not declare. This server \
             makes tasks only of chat calls of a revision without initialize (MCP 2026-07-28) \
             that declare it in their own {TASKS_DECLARED_AT}; an MCP session's (2025-11-25 or \
             older) chat calls answer synchronously, and it has no task to poll. \
             data.requiredCapabilities names the capability."
        )
    };
    ErrorData::new(refusal.code, message, refusal.data)
}

/// What a valid `initialize` carries, for the texts that say what to send instead.
const VALID_INITIALIZE: &str = "{\"protocolVersion\": \"2025-11-25\", \"capabilities\": {}, \
     \"clientInfo\": {\"name\": \"your-client\", \"version\": \"1.0\"}}";

/// The field `name` of `object` (`path` is how the text names it), or what is wrong with it:
/// missing, or not what `fits` accepts (`want` names that kind).
fn field<'a>(
    object: &'a Map<String, Value>,
    name: &str,
    path: &str,
    want: &str,
    fits: fn(&Value) -> bool,
) -> Result<&'a Value, String> {
    match object.get(name) {
        None => Err(format!("{path} is missing")),
        Some(value) if fits(value) => Ok(value),
        Some(other) => Err(format!(
            "{path} must be {want}; received {}",
            crate::json::json_kind(other)
        )),
    }
}

/// The `-32602` for a `tasks/*` request of the extension whose params rmcp could not read
/// (so it took it for an unknown method): the field at fault and what the method takes.
/// `None` for any other method.
pub(crate) fn task_params_invalid(method: &str, params: Option<&Value>) -> Option<ErrorData> {
    let (takes, update) = match method {
        "tasks/get" | "tasks/cancel" => ("{\"taskId\": \"…\"}", false),
        "tasks/update" => ("{\"taskId\": \"…\", \"inputResponses\": {…}}", true),
        _ => return None,
    };
    let checks = || -> Result<(), String> {
        let params = object_params(params)?;
        field(
            params,
            "taskId",
            "params.taskId",
            "a string",
            Value::is_string,
        )?;
        if update {
            field(
                params,
                "inputResponses",
                "params.inputResponses",
                "an object",
                Value::is_object,
            )?;
        }
        Ok(())
    };
    let fault = checks()
        .err()
        .unwrap_or_else(|| "params were refused".to_string());
    Some(ErrorData::invalid_params(
        format!(
            "Invalid params: {method}'s {fault}. It takes params {takes}, taskId being the one \
             of the task a chat call answered with (CreateTaskResult)."
        ),
        None,
    ))
}

/// `params` as an object, or what is wrong with it.
fn object_params(params: Option<&Value>) -> Result<&Map<String, Value>, String> {
    match params {
        Some(Value::Object(params)) => Ok(params),
        Some(other) => Err(format!(
            "params must be an object; received {}",
            crate::json::json_kind(other)
        )),
        None => Err("params is missing".to_string()),
    }
}

/// The first thing wrong with `initialize`'s params, or `None` when they fit.
fn initialize_fault(params: Option<&Value>) -> Option<String> {
    let checks = || -> Result<(), String> {
        let params = object_params(params)?;
        field(
            params,
            "protocolVersion",
            "params.protocolVersion",
            "a string",
            Value::is_string,
        )?;
        field(
            params,
            "capabilities",
            "params.capabilities",
            "an object",
            Value::is_object,
        )?;
        let info = field(
            params,
            "clientInfo",
            "params.clientInfo",
            "an object",
            Value::is_object,
        )?;
        let info = info.as_object().expect("checked to be an object");
        for name in ["name", "version"] {
            field(
                info,
                name,
                &format!("params.clientInfo.{name}"),
                "a string",
                Value::is_string,
            )?;
        }
        // Anything else rmcp's own type refuses (a capability of the wrong shape…).
        serde_json::from_value::<InitializeRequestParams>(Value::Object(params.clone()))
            .map(drop)
            .map_err(|e| format!("params do not fit ({e})"))
    };
    checks().err()
}

/// The `-32602` text for an `initialize` whose params rmcp refused: what is wrong (the first
/// fault found) and what a valid one carries.
pub(crate) fn initialize_invalid(params: Option<&Value>) -> String {
    let fault = initialize_fault(params).unwrap_or_else(|| "params were refused".to_string());
    format!(
        "Invalid params: initialize's {fault}. A valid initialize carries params \
         {VALID_INITIALIZE} (protocolVersion one of 2024-11-05, 2025-06-18, 2025-11-25; \
         2026-07-28 clients send no initialize)."
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fault(params: Value) -> Option<String> {
        initialize_fault(Some(&params))
    }

    #[test]
    fn a_missing_method_is_told_which_exist() {
        let e = method_not_found("prompts/list", true);
        assert_eq!(e.code, ErrorCode::METHOD_NOT_FOUND);
        assert!(e.message.contains("Method not found: prompts/list"));
        assert!(e.message.contains("tools/call") && e.message.contains("tasks/get"));
        assert!(!method_not_found("x", false).message.contains("tasks/get"));
        // tasks/list and tasks/result: what the server offers instead depends on the config.
        let on = method_not_found("tasks/list", true).message;
        assert!(
            on.contains("under the extension this server offers"),
            "{on}"
        );
        let off = method_not_found("tasks/list", false).message;
        assert!(
            !off.contains("the extension this server offers")
                && off.contains("[server] tasks = false")
                && off.contains("chat answers synchronously"),
            "{off}"
        );
    }

    #[test]
    fn a_task_request_is_told_which_field_is_at_fault() {
        let text = |method: &str, params: Value| {
            task_params_invalid(method, Some(&params))
                .map(|e| (e.code, e.message.into_owned()))
                .unwrap()
        };
        let (code, message) = text("tasks/get", json!({}));
        assert_eq!(code, ErrorCode::INVALID_PARAMS);
        assert!(message.contains("params.taskId is missing"), "{message}");
        let (_, message) = text("tasks/cancel", json!({"taskId": 5}));
        assert!(
            message.contains("params.taskId must be a string; received a number"),
            "{message}"
        );
        let (_, message) = text("tasks/update", json!({"taskId": "t"}));
        assert!(
            message.contains("params.inputResponses is missing"),
            "{message}"
        );
        assert!(task_params_invalid("tasks/list", None).is_none());
    }

    #[test]
    fn an_initialize_is_told_which_field_is_at_fault() {
        assert_eq!(initialize_fault(None).as_deref(), Some("params is missing"));
        assert_eq!(
            fault(json!("x")).as_deref(),
            Some("params must be an object; received a string")
        );
        assert_eq!(
            fault(json!({"capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}))
                .as_deref(),
            Some("params.protocolVersion is missing")
        );
        assert_eq!(
            fault(json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c"}}))
                .as_deref(),
            Some("params.clientInfo.version is missing")
        );
        assert_eq!(
            fault(json!({"protocolVersion": 3, "capabilities": {}, "clientInfo": {}})).as_deref(),
            Some("params.protocolVersion must be a string; received a number")
        );
        assert_eq!(
            fault(json!({"protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "c", "version": "1"}})),
            None
        );
    }
}
