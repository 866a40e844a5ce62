//! The limits on MCP tool sources (tools per server and in all, response size, connect budget),
//! read from the environment, and the response-size cap. [`McpLimits`] lists each variable, its
//! default and what happens at the limit.

use std::time::Duration;

use serde_json::json;

use super::ToolOutcome;

/// Environment variable: most tools taken from one server.
pub(crate) const ENV_MAX_TOOLS_PER_SERVER: &str = "MCP_MAX_TOOLS_PER_SERVER";
/// Environment variable: most tools taken from all servers together.
pub(crate) const ENV_MAX_TOOLS_TOTAL: &str = "MCP_MAX_TOOLS_TOTAL";
/// Environment variable: largest tool result the model may read, in bytes.
pub(crate) const ENV_MAX_RESPONSE_BYTES: &str = "MCP_MAX_RESPONSE_BYTES";
/// Environment variable: seconds for connecting to every server at start, together.
pub(crate) const ENV_CONNECT_TIMEOUT_SECONDS: &str = "MCP_CONNECT_TIMEOUT_SECONDS";

/// Most characters of an oversized result shown in its preview.
pub(crate) const PREVIEW_CHARS: usize = 200;

/// Why a limit variable from the environment is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitsError {
    /// Occurs when an `MCP_MAX_*` variable is set but not a whole number.
    #[error("{variable}: expected a whole number, got {value:?}; unset it for the default")]
    NotACount {
        /// The variable.
        variable: &'static str,
        /// Its value.
        value: String,
    },
    /// Occurs when `MCP_CONNECT_TIMEOUT_SECONDS` is not a number of seconds in range.
    #[error(
        "{ENV_CONNECT_TIMEOUT_SECONDS}: expected seconds >= 0 and at most {:e}, got {value:?}; unset it for the default",
        crate::config::MAX_SECONDS
    )]
    NotSeconds {
        /// Its value.
        value: String,
    },
}

/// The limits on MCP tool sources.
///
/// | variable | default | what happens at the limit |
/// | --- | --- | --- |
/// | `MCP_MAX_TOOLS_PER_SERVER` | 50 | a server's later tools (listing order) are left out, with a warning |
/// | `MCP_MAX_TOOLS_TOTAL` | 100 | servers are consumed in config order; later tools are left out |
/// | `MCP_MAX_RESPONSE_BYTES` | 1 MiB | a larger result never reaches the model: it reads a JSON error with the limit, the size and a preview |
/// | `MCP_CONNECT_TIMEOUT_SECONDS` | 10 | connecting and discovering, all servers together; a late server joins in the background |
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct McpLimits {
    /// Most tools taken from one server (first ones in its listing order).
    pub per_server: usize,
    /// Most tools taken from all servers together (servers in config order).
    pub total: usize,
    /// Largest result, in UTF-8 bytes, that reaches the model.
    pub response_bytes: usize,
    /// Time for connecting to every server at start, all together.
    pub connect_budget: Duration,
}

impl Default for McpLimits {
    fn default() -> Self {
        Self {
            per_server: 50,
            total: 100,
            response_bytes: 1024 * 1024,
            connect_budget: Duration::from_secs(10),
        }
    }
}

impl McpLimits {
    /// The defaults overlaid by the process environment.
    ///
    /// # Errors
    /// A variable that is set but not a number; the message names it.
    pub(crate) fn from_env() -> Result<Self, LimitsError> {
        Self::resolve(&|name| std::env::var(name).ok())
    }

    /// The defaults overlaid by the variables `env` returns.
    ///
    /// # Errors
    /// A variable that is set but not a number; the message names it.
    pub fn resolve(env: &dyn Fn(&str) -> Option<String>) -> Result<Self, LimitsError> {
        let mut limits = Self::default();
        let count = |variable: &'static str| -> Result<Option<usize>, LimitsError> {
            match env(variable).filter(|v| !v.trim().is_empty()) {
                None => Ok(None),
                Some(value) => value
                    .trim()
                    .parse::<usize>()
                    .map(Some)
                    .map_err(|_| LimitsError::NotACount { variable, value }),
            }
        };
        if let Some(n) = count(ENV_MAX_TOOLS_PER_SERVER)? {
            limits.per_server = n;
        }
        if let Some(n) = count(ENV_MAX_TOOLS_TOTAL)? {
            limits.total = n;
        }
        if let Some(n) = count(ENV_MAX_RESPONSE_BYTES)? {
            limits.response_bytes = n;
        }
        if let Some(v) = env(ENV_CONNECT_TIMEOUT_SECONDS).filter(|v| !v.trim().is_empty()) {
            let secs: f64 = v
                .trim()
                .parse()
                .ok()
                .filter(|s: &f64| crate::config::check_seconds("", *s, true).is_ok())
                .ok_or_else(|| LimitsError::NotSeconds { value: v.clone() })?;
            limits.connect_budget = Duration::from_secs_f64(secs);
        }
        Ok(limits)
    }
}

/// Most bytes of a result's typed content (its content blocks and `structuredContent` as
/// JSON: images and binary resources the model is not shown, but a hand call and the OpenAI
/// bridge hand on) kept: the largest message a stdio server may send, for every transport.
pub(crate) const TYPED_CONTENT_BYTES: usize = crate::mcp::stdio_child::MAX_LINE_BYTES;

/// `outcome` if its text fits in `limit` bytes and its typed content in
/// [`TYPED_CONTENT_BYTES`]; else an error outcome whose text is the JSON
/// `{"error":"response_too_large","limit_bytes":..,"size_bytes":..,"preview":".."}`, so the
/// model can narrow its request and try again.
pub(crate) fn cap_response(outcome: ToolOutcome, limit: usize) -> ToolOutcome {
    let size = outcome.text.len();
    if size > limit {
        let preview: String = outcome.text.chars().take(PREVIEW_CHARS).collect();
        return too_large(size, limit, Some(preview), TOO_LARGE_HINT);
    }
    if outcome.parts.is_empty() && outcome.structured.is_none() {
        return outcome;
    }
    let typed = json_bytes(&outcome.parts) + outcome.structured.as_ref().map_or(0, json_bytes);
    if typed > TYPED_CONTENT_BYTES {
        // The text (what the model reads) describes the typed content: it is the preview.
        let preview: String = outcome.text.chars().take(PREVIEW_CHARS).collect();
        // The model never saw the images or binary resources: its hint says what was large.
        return too_large(
            typed,
            TYPED_CONTENT_BYTES,
            Some(preview),
            "the result's images or binary resources were too large to keep; ask for fewer or \
             smaller ones",
        );
    }
    outcome
}

/// The size of `value` as JSON, counted as it is written out (nothing is kept).
fn json_bytes(value: &impl serde::Serialize) -> usize {
    /// A writer that only counts.
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// The same error for a reply of `size` bytes that a stdio server sent over the `limit` of one
/// message: it was dropped unread, so there is no preview.
pub(crate) fn cap_response_dropped(size: usize, limit: usize) -> ToolOutcome {
    too_large(size, limit, None, TOO_LARGE_HINT)
}

/// What a model reads to do about a result over the cap.
const TOO_LARGE_HINT: &str = "the result was too large to read; ask for less (a narrower query, fewer items or a smaller page)";

fn too_large(size: usize, limit: usize, preview: Option<String>, hint: &str) -> ToolOutcome {
    let mut error = json!({
        "error": "response_too_large",
        "limit_bytes": limit,
        "size_bytes": size,
        "hint": hint,
    });
    let dropped = preview.is_none();
    if let Some(preview) = preview {
        error["preview"] = preview.into();
    }
    ToolOutcome::unanswered(
        crate::tools::Unanswered::TooLarge {
            size_bytes: size,
            limit_bytes: limit,
            dropped,
        },
        error.to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn typed_content_over_its_bound_is_refused_though_its_text_is_short() {
        let blob = |bytes: usize| {
            let mut outcome = ToolOutcome::ok("[resource file:///b.bin: application/zip; binary]");
            outcome.parts = vec![
                json!({"type": "resource", "resource": {"uri": "file:///b.bin", "blob": "A".repeat(bytes)}}),
            ];
            outcome
        };
        let fits = blob(TYPED_CONTENT_BYTES - 200);
        assert_eq!(cap_response(fits.clone(), 1024), fits);
        let over = cap_response(blob(TYPED_CONTENT_BYTES), 1024);
        assert!(over.parts.is_empty(), "the blob is not kept");
        let said: Value = serde_json::from_str(&over.text).unwrap();
        assert_eq!(said["error"], "response_too_large");
        assert_eq!(said["limit_bytes"], TYPED_CONTENT_BYTES);
        assert!(said["size_bytes"].as_u64().unwrap() > TYPED_CONTENT_BYTES as u64);
        assert!(said["preview"].as_str().unwrap().starts_with("[resource"));
        assert!(
            said["hint"]
                .as_str()
                .unwrap()
                .contains("images or binary resources were too large"),
            "{said}"
        );
    }

    #[test]
    fn exactly_the_limit_passes_and_one_byte_more_does_not() {
        let limit = 1024 * 1024;
        let fits = ToolOutcome::ok("x".repeat(limit));
        assert_eq!(cap_response(fits.clone(), limit), fits);
        let over = cap_response(ToolOutcome::ok("x".repeat(limit + 1)), limit);
        assert!(over.is_error);
        let v: Value = serde_json::from_str(&over.text).unwrap();
        assert_eq!(v["error"], "response_too_large");
        assert_eq!(v["limit_bytes"], 1_048_576);
        assert_eq!(v["size_bytes"], 1_048_577);
        assert_eq!(v["preview"].as_str().unwrap(), "x".repeat(PREVIEW_CHARS));
    }

    #[test]
    fn the_preview_is_cut_on_a_character_boundary() {
        // 3-byte characters: a byte cut would split one.
        let text = "€".repeat(1000);
        let over = cap_response(ToolOutcome::ok(text.clone()), 100);
        let v: Value = serde_json::from_str(&over.text).unwrap();
        let preview = v["preview"].as_str().unwrap();
        assert_eq!(preview.chars().count(), PREVIEW_CHARS);
        assert!(text.starts_with(preview));
        assert_eq!(v["size_bytes"], 3000);
    }

    #[test]
    fn limits_come_from_the_environment() {
        let env = |name: &str| match name {
            ENV_MAX_TOOLS_PER_SERVER => Some("5".to_string()),
            ENV_CONNECT_TIMEOUT_SECONDS => Some("0.5".to_string()),
            _ => None,
        };
        let limits = McpLimits::resolve(&env).unwrap();
        assert_eq!(limits.per_server, 5);
        assert_eq!(limits.total, 100);
        assert_eq!(limits.connect_budget, Duration::from_millis(500));
        let bad = |name: &str| (name == ENV_MAX_TOOLS_TOTAL).then(|| "lots".to_string());
        let e = McpLimits::resolve(&bad).unwrap_err().to_string();
        assert!(e.contains(ENV_MAX_TOOLS_TOTAL) && e.contains("lots"), "{e}");
    }
}
