//! `Mcp-Param-Handle`, the header MCP 2026-07-28 clients mirror `chat`'s `handle` argument
//! into (the tool annotates it `"x-mcp-header": "Handle"`, see `mcp_tools`), held to the body:
//! a balancer routes on the header and the server serves the body, so a header that differs
//! would send a call to one replica on behalf of another conversation. The header stays
//! optional (a client that does not mirror it is served as before); one that is sent must
//! carry the handle of the body.
//!
//! Handles are secrets: a refusal shows either value only as its first 8 characters.

use axum::http::HeaderMap;
use base64::Engine as _;
use serde_json::Value;

use crate::observe::redact::id_prefix;

/// The header, as clients send it.
const HEADER: &str = "mcp-param-handle";

/// What wraps a header value sent in base64 (MCP 2026-07-28's value encoding).
const BASE64_PREFIX: &str = "=?base64?";
const BASE64_SUFFIX: &str = "?=";

/// A header value as the text it stands for: unwrapped from `=?base64?…?=` when so sent;
/// `None` when it is not text (not visible ASCII, or base64 that does not decode to UTF-8).
fn decoded(value: &axum::http::HeaderValue) -> Option<String> {
    let text = value.to_str().ok()?;
    match text
        .strip_prefix(BASE64_PREFIX)
        .and_then(|inner| inner.strip_suffix(BASE64_SUFFIX))
    {
        Some(inner) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(inner)
                .ok()?;
            String::from_utf8(bytes).ok()
        }
        None => Some(text.to_string()),
    }
}

/// Why a `tools/call` of `chat` in `message` may not go on with the `Mcp-Param-Handle` header
/// of `headers` (the text of the refusal), or `None` when it may: no header, a call of
/// another tool, no string handle in the body (the call's own checks name that), or the
/// header carries the body's handle.
pub(crate) fn mismatch(headers: &HeaderMap, message: &Value) -> Option<String> {
    let mut sent = headers.get_all(HEADER).iter();
    let first = sent.next()?;
    if message.get("method").and_then(Value::as_str) != Some("tools/call") {
        return None;
    }
    let params = message.get("params")?;
    if params.get("name").and_then(Value::as_str) != Some("chat") {
        return None;
    }
    let handle = params.get("arguments")?.get("handle")?.as_str()?;
    if sent.next().is_some() {
        return Some(
            "Header mismatch: Mcp-Param-Handle was sent more than once; send it once, with the \
             handle argument of this chat call (or leave it out)."
                .to_string(),
        );
    }
    let Some(header) = decoded(first) else {
        return Some(
            "Header mismatch: the Mcp-Param-Handle header is not text (nor valid \
             =?base64?…?= of it); send the handle argument of this chat call as it is (or \
             leave the header out)."
                .to_string(),
        );
    };
    (header != handle).then(|| {
        format!(
            "Header mismatch: the Mcp-Param-Handle header ({}) is not the handle argument of \
             this chat call ({}). A balancer routes on the header and the server serves the \
             argument, so they must be the same handle: send the header from the same value as \
             params.arguments.handle (or leave it out).",
            shown(&header),
            shown(handle)
        )
    })
}

/// A handle as the mismatch names it: its first 8 characters, and its last 4 (the replica
/// tag a balancer routes on, no secret) when it is long enough to have them: two handles
/// that differ only in their tag read apart.
fn shown(handle: &str) -> String {
    let chars: Vec<char> = handle.chars().collect();
    if chars.len() < 36 {
        return id_prefix(handle);
    }
    let tag: String = chars[chars.len() - 4..].iter().collect();
    format!("{}{tag}", id_prefix(handle))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const HANDLE: &str = "0b6f3c52-9a3e-4d0e-8f65-6c1d2e3fa1b2";
    const OTHER: &str = "7c1d2e3f-9a3e-4d0e-8f65-6c1d2e3fa1b2";

    fn chat(handle: &str) -> Value {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "chat", "arguments": {"handle": handle, "line": "hi"}}})
    }

    fn with(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for v in values {
            headers.append(HEADER, v.parse().unwrap());
        }
        headers
    }

    #[test]
    fn the_header_must_carry_the_bodys_handle() {
        assert_eq!(mismatch(&with(&[]), &chat(HANDLE)), None);
        assert_eq!(mismatch(&with(&[HANDLE]), &chat(HANDLE)), None);
        let wrapped = format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(HANDLE)
        );
        assert_eq!(mismatch(&with(&[&wrapped]), &chat(HANDLE)), None);
        let text = mismatch(&with(&[OTHER]), &chat(HANDLE)).unwrap();
        assert!(
            text.contains("7c1d2e3f…a1b2") && text.contains("0b6f3c52…a1b2"),
            "{text}"
        );
        // Only the tag differs: the two read apart (tour K: both read `0b6f3c52…`).
        let retagged = format!("{}0000", &HANDLE[..32]);
        let text = mismatch(&with(&[&retagged]), &chat(HANDLE)).unwrap();
        assert!(
            text.contains("0b6f3c52…0000") && text.contains("0b6f3c52…a1b2"),
            "{text}"
        );
        assert!(!text.contains(HANDLE) && !text.contains(OTHER), "{text}");
        assert!(mismatch(&with(&[HANDLE, HANDLE]), &chat(HANDLE)).is_some());
        // Another tool, or no handle in the body: not this check's business.
        let start = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "start", "arguments": {}}});
        assert_eq!(mismatch(&with(&[OTHER]), &start), None);
    }
}
