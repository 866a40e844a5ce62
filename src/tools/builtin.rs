//! Built-in tools every bot has unless its config says otherwise.

use serde_json::json;

use super::FnTool;

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
fn format_utc(secs: u64) -> String {
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
    #[test]
    fn formats_known_instants() {
        assert_eq!(super::format_utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(super::format_utc(1_796_036_400), "2026-11-30 11:00:00 UTC");
    }
}
