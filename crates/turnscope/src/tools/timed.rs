//! One tool call under a time limit, as the bot's model processor, the OpenAI bridge and a
//! hand call (console form, `turnscope tools call`) all run it: through the tool set's
//! `call_in` (the registry's routing, policy and response cap), abandoned with an error
//! outcome when it takes longer than the limit.

use std::time::Duration;

use serde_json::Value;

use super::{CallContext, ToolOutcome, Tools, Unanswered};

/// Calls `name` on `tools` with `arguments`, giving it at most `timeout`; a call that takes
/// longer is dropped (an MCP server gets `notifications/cancelled`) and answered with an error
/// outcome saying so.
pub async fn call_timed(
    tools: &dyn Tools,
    name: &str,
    arguments: Value,
    cx: &CallContext,
    timeout: Duration,
) -> ToolOutcome {
    match tokio::time::timeout(timeout, tools.call_in(name, arguments, cx)).await {
        Ok(outcome) => outcome,
        Err(_) => ToolOutcome::unanswered(
            Unanswered::timed_out(timeout, "the bot's tool_timeout_seconds"),
            format!(
                "tool `{name}` took longer than {:.1} s and was abandoned; try again, or answer without it",
                timeout.as_secs_f64()
            ),
        ),
    }
}
