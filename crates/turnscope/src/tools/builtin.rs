//! Built-in tools every bot has unless its config says otherwise: `clock`, `echo`, and the
//! session-control tool `end_session`.

use serde_json::json;

use super::FnTool;

/// Names no MCP server may claim, even when the built-in is turned off: session-control
/// tools, which a model must never reach on a server by mistake.
pub(crate) const RESERVED_NAMES: &[&str] = &["end_session"];

/// What `end_session` tells the model.
pub(crate) const END_SESSION_REPLY: &str =
    "The conversation ends after this reply. Say goodbye in one short sentence; ask nothing.";

/// Every built-in, in precedence order: `clock`, `echo`, `end_session`.
pub fn all() -> Vec<FnTool> {
    vec![clock(), echo(), end_session()]
}

/// `end_session`: the bot ends the conversation. The turn still finishes (the model says
/// goodbye), then the session closes and frees its slot.
pub fn end_session() -> FnTool {
    FnTool::with_context(
        "end_session",
        "Ends this conversation for good. Call it when the user says goodbye or asks to stop, \
         then say goodbye in the same reply.",
        json!({
            "type": "object",
            "properties": {
                "reason": {"type": "string", "description": "Why the conversation ends (for the logs)."}
            }
        }),
        |args, cx| async move {
            let reason = args
                .get("reason")
                .and_then(|r| r.as_str())
                .filter(|r| !r.trim().is_empty())
                .unwrap_or("the bot ended the conversation")
                .to_string();
            match cx.control {
                Some(control) => {
                    control.request_end(reason);
                    Ok(END_SESSION_REPLY.to_string())
                }
                None => Err(
                    "end_session works only inside a conversation, and this call belongs to none"
                        .to_string(),
                ),
            }
        },
    )
    .with_source("builtin")
}

/// `clock`: the current UTC date and time.
pub fn clock() -> FnTool {
    FnTool::new(
        "clock",
        "Tells the current date and time in UTC.",
        json!({"type": "object", "properties": {}}),
        |_| async {
            let secs = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            Ok(format_utc(secs))
        },
    )
    .with_source("builtin")
}

/// `echo`: gives back the text it is given.
pub fn echo() -> FnTool {
    FnTool::new(
        "echo",
        "Repeats the given text back.",
        json!({
            "type": "object",
            "properties": {"text": {"type": "string", "description": "Text to repeat."}},
            "required": ["text"]
        }),
        |args| async move {
            match args.get("text").and_then(|t| t.as_str()) {
                Some(text) => Ok(text.to_string()),
                None => Err(format!(
                    "echo: expected a string `text` argument, got {args}"
                )),
            }
        },
    )
    .with_source("builtin")
}

/// Formats seconds since the epoch as `YYYY-MM-DD HH:MM:SS UTC` (civil-from-days algorithm).
pub fn format_utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::super::{CallContext, SessionControl};

    #[tokio::test]
    async fn end_session_asks_the_session_to_end() {
        let tool = super::end_session();
        let control = SessionControl::new();
        let cx = CallContext {
            session: 3,
            turn: 1,
            control: Some(control.clone()),
        };
        let outcome = tool
            .run(serde_json::json!({"reason": "user said bye"}), &cx)
            .await;
        assert!(!outcome.is_error, "{outcome:?}");
        assert_eq!(control.end_requested().as_deref(), Some("user said bye"));
        let detached = tool
            .run(serde_json::json!({}), &CallContext::detached())
            .await;
        assert!(detached.is_error);
    }

    #[test]
    fn formats_known_instants() {
        assert_eq!(super::format_utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(super::format_utc(1_796_036_400), "2026-11-30 11:00:00 UTC");
    }
}
