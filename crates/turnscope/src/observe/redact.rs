//! Keeps credentials out of every log line, event and message: [`redact`] masks with `***`
//! the value of every secret query or flag pair (`token=`, `access_token=`, `key=`,
//! `api_key=`, `api-key=`, `sig=`, `password=`…, and `--token VALUE` on a command line), of
//! every secret header written as `Name: value` (`Authorization`, `api-key`, `x-api-key`,
//! `Cookie`…, also as JSON), and the user info of every URL (`https://user:pass@host` →
//! `https://***@host`). [`RedactingWriter`] applies the same rules to every line the tracing
//! subscriber writes, third-party debug output included. It never parses URLs: it reads text
//! wherever a secret may sit in it.

use std::borrow::Cow;
use std::io::Write;

use tracing_subscriber::fmt::MakeWriter;

/// What a secret value is replaced with.
pub(crate) const MASK: &str = "***";

/// Query and flag keys whose values are secrets (matched case-insensitively, as a whole key,
/// leading `-` of a flag ignored): Xiaozhi's `token`, OAuth's `access_token`, API keys as
/// services name them, Azure's and S3's signatures (`sig`, `signature`), passwords.
const SECRET_KEYS: [&str; 15] = [
    "token",
    "access_token",
    "refresh_token",
    "id_token",
    "key",
    "api_key",
    "api-key",
    "apikey",
    "x-api-key",
    "sig",
    "signature",
    "password",
    "passwd",
    "secret",
    "client_secret",
];

/// Header names whose values are secrets (`Name: value`, matched case-insensitively).
const SECRET_HEADERS: [&str; 7] = [
    "authorization",
    "proxy-authorization",
    "api-key",
    "x-api-key",
    "x-auth-token",
    "cookie",
    "set-cookie",
];

/// `text` with every secret it holds replaced by `***` (see the module). Text without
/// secrets is returned as is, without copying; masking twice changes nothing more.
pub fn redact(text: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(text);
    for pass in [user_info, pairs, headers, flags] {
        if let Some(changed) = pass(&out) {
            out = Cow::Owned(changed);
        }
    }
    out
}

/// The first 8 characters of an id that is a secret (an MCP session id, a handle, an event
/// id made from them), then `…`: what messages and events may show of it.
pub fn id_prefix(id: &str) -> String {
    let mut shown: String = id.chars().take(8).collect();
    if id.chars().nth(8).is_some() {
        shown.push('…');
    }
    shown
}

/// Replaces each `range` of `text` (in order, not overlapping) with [`MASK`]; `None` when
/// there is none.
fn masked(text: &str, ranges: &[(usize, usize)]) -> Option<String> {
    if ranges.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    for &(start, end) in ranges {
        out.push_str(&text[copied..start]);
        out.push_str(MASK);
        copied = end;
    }
    out.push_str(&text[copied..]);
    Some(out)
}

/// Whether `c` ends a value (or a URL's authority) in running text.
fn ends_value(c: char) -> bool {
    matches!(c, '&' | '#' | '"' | '\'' | '<' | '>' | '\\') || c.is_whitespace()
}

fn is_key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// Where a value starting at `start` ends: at `ends` or the end of the text.
fn value_end(text: &str, start: usize, ends: impl Fn(char) -> bool) -> usize {
    text[start..].find(ends).map_or(text.len(), |p| start + p)
}

/// A value worth masking: not empty and not masked already.
fn unmasked(value: &str) -> bool {
    !value.is_empty() && !value.starts_with(MASK)
}

/// `scheme://user:pass@host` → `scheme://***@host`.
fn user_info(text: &str) -> Option<String> {
    let mut ranges = Vec::new();
    let mut from = 0;
    while let Some(found) = text[from..].find("://") {
        let start = from + found + 3;
        let end = value_end(text, start, |c| ends_value(c) || matches!(c, '/' | '?'));
        if let Some(at) = text[start..end].rfind('@')
            && unmasked(&text[start..start + at])
        {
            ranges.push((start, start + at));
        }
        from = end.max(start);
    }
    masked(text, &ranges)
}

/// `key=value` for a secret key (see `SECRET_KEYS`); the value runs to the next `&`, `#`,
/// whitespace, quote, `<`, `>` or `\`.
fn pairs(text: &str) -> Option<String> {
    let mut ranges = Vec::new();
    let mut i = 0;
    while let Some(pos) = text[i..].find('=') {
        let eq = i + pos;
        let key_start = text[..eq]
            .rfind(|c: char| !is_key_char(c))
            .map_or(0, |p| p + 1);
        let key = text[key_start..eq].trim_start_matches('-');
        let start = eq + 1;
        let end = value_end(text, start, ends_value);
        if is_secret_key(key) && unmasked(&text[start..end]) {
            ranges.push((start, end));
        }
        i = end.max(start);
        if i >= text.len() {
            break;
        }
    }
    masked(text, &ranges)
}

fn is_secret_key(key: &str) -> bool {
    SECRET_KEYS.iter().any(|k| k.eq_ignore_ascii_case(key))
}

/// `Name: value` for a secret header (see `SECRET_HEADERS`), also as JSON (`"Name": "value"`):
/// a quoted value runs to its closing quote, a bare one to the end of the line or a quote.
fn headers(text: &str) -> Option<String> {
    let mut ranges = Vec::new();
    let mut from = 0;
    while let Some(pos) = text[from..].find(':') {
        let colon = from + pos;
        from = colon + 1;
        let name_end = colon - usize::from(text[..colon].ends_with('"'));
        let name_start = text[..name_end]
            .rfind(|c: char| !is_key_char(c))
            .map_or(0, |p| p + 1);
        let name = &text[name_start..name_end];
        if !SECRET_HEADERS.iter().any(|h| h.eq_ignore_ascii_case(name)) {
            continue;
        }
        let after = &text[colon + 1..];
        let gap = after.len() - after.trim_start_matches([' ', '\t']).len();
        let mut start = colon + 1 + gap;
        let quoted = text[start..].starts_with('"');
        if quoted {
            start += 1;
        }
        let end = if quoted {
            value_end(text, start, |c| c == '"')
        } else {
            value_end(text, start, |c| matches!(c, '\r' | '\n' | '"' | '\''))
        };
        if unmasked(&text[start..end]) {
            ranges.push((start, end));
            from = end;
        }
    }
    masked(text, &ranges)
}

/// `--token VALUE` on a command line (a secret key as a flag, then its value after spaces).
fn flags(text: &str) -> Option<String> {
    let mut ranges = Vec::new();
    let mut from = 0;
    while let Some(pos) = text[from..].find("--") {
        let dashes = from + pos;
        let name_end = value_end(text, dashes + 2, |c| !is_key_char(c));
        from = name_end.max(dashes + 2);
        let word_start = dashes == 0 || text[..dashes].ends_with(char::is_whitespace);
        if !word_start || !is_secret_key(&text[dashes + 2..name_end]) {
            continue;
        }
        let after = &text[name_end..];
        let gap = after.len() - after.trim_start_matches(' ').len();
        if gap == 0 {
            continue;
        }
        let start = name_end + gap;
        let end = value_end(text, start, char::is_whitespace);
        if unmasked(&text[start..end]) && !text[start..].starts_with('-') {
            ranges.push((start, end));
            from = end;
        }
    }
    masked(text, &ranges)
}

/// A tracing writer that redacts secrets (see [`redact`]) from every line before it reaches
/// the wrapped writer.
#[derive(Debug, Clone)]
pub struct RedactingWriter<M> {
    inner: M,
}

impl<M> RedactingWriter<M> {
    /// Wraps a writer maker, e.g. `std::io::stderr`.
    pub fn new(inner: M) -> Self {
        Self { inner }
    }
}

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for RedactingWriter<M> {
    type Writer = Redacted<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        Redacted(self.inner.make_writer())
    }
}

/// One redacting write handle (see [`RedactingWriter`]).
#[derive(Debug)]
pub struct Redacted<W>(W);

impl<W: Write> Write for Redacted<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // The formatter writes each event in one call, so a secret never straddles writes.
        let text = String::from_utf8_lossy(buf);
        self.0.write_all(redact(&text).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_values_are_masked_everywhere() {
        assert_eq!(
            redact("wss://api.xiaozhi.me/mcp/?token=eyJhbGc.eyJ1c2Vy.sig"),
            "wss://api.xiaozhi.me/mcp/?token=***"
        );
        assert_eq!(
            redact("ws://h/mcp/?a=1&TOKEN=abc&b=2#frag"),
            "ws://h/mcp/?a=1&TOKEN=***&b=2#frag"
        );
        assert_eq!(
            redact("GET /mcp/?token=abc HTTP/1.1\r\nHost: x"),
            "GET /mcp/?token=*** HTTP/1.1\r\nHost: x"
        );
        assert_eq!(
            redact(r#"{"url":"ws://h/?access_token=zz"}"#),
            r#"{"url":"ws://h/?access_token=***"}"#
        );
        assert_eq!(redact("a=1 key=k token="), "a=1 key=*** token=");
    }

    #[test]
    fn other_text_is_untouched_and_not_copied() {
        let text = "mytoken is here; tokens=3; x == y; =token";
        assert!(matches!(redact(text), Cow::Borrowed(t) if t == text));
        assert!(matches!(redact("token=***"), Cow::Borrowed(_)));
        // A masked value is left alone, so redacting is idempotent and keeps what follows.
        assert_eq!(
            redact("dial ws://h/?token=***: refused"),
            "dial ws://h/?token=***: refused"
        );
        let once = redact("ws://h/?token=abc:x y").into_owned();
        assert_eq!(once, "ws://h/?token=*** y");
        assert_eq!(redact(&once), once);
    }

    #[test]
    fn api_keys_signatures_and_passwords_are_masked_in_urls() {
        assert_eq!(
            redact("https://h/v1?api_key=sk-1&sig=abc%3D&x=1"),
            "https://h/v1?api_key=***&sig=***&x=1"
        );
        assert_eq!(
            redact("https://res.openai.azure.com/o?api-key=k1&Signature=s"),
            "https://res.openai.azure.com/o?api-key=***&Signature=***"
        );
        assert_eq!(
            redact("--api-key=abc --password s3cret -v"),
            "--api-key=*** --password *** -v"
        );
        // A key's value as a flag, not a flag that merely mentions one.
        assert!(matches!(
            redact("--key-file k.pem --tokens 3"),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn user_info_is_masked_in_every_url() {
        assert_eq!(
            redact("model at https://alice:pa55@llm.example/v1 failed"),
            "model at https://***@llm.example/v1 failed"
        );
        assert_eq!(
            redact("GET http://ghp_abc@h:8080/x?q=a@b"),
            "GET http://***@h:8080/x?q=a@b"
        );
        assert!(matches!(
            redact("mailto a@b, http://h/x@y"),
            Cow::Borrowed(_)
        ));
        let once = redact("wss://u:p@h/?token=t").into_owned();
        assert_eq!(once, "wss://***@h/?token=***");
        assert_eq!(redact(&once), once);
    }

    #[test]
    fn secret_headers_are_masked_as_written_and_as_json() {
        assert_eq!(
            redact("--header \"api-key: abc123\" --header 'X-Org: o'"),
            "--header \"api-key: ***\" --header 'X-Org: o'"
        );
        assert_eq!(
            redact("Authorization: Bearer sk-1\r\nHost: h"),
            "Authorization: ***\r\nHost: h"
        );
        assert_eq!(
            redact(r#"{"x-api-key": "k", "accept": "*/*"}"#),
            r#"{"x-api-key": "***", "accept": "*/*"}"#
        );
        assert!(matches!(redact("authorization: ***"), Cow::Borrowed(_)));
    }

    #[test]
    fn ids_show_their_first_eight_characters() {
        assert_eq!(id_prefix("0123456789abcdef"), "01234567…");
        assert_eq!(id_prefix("short"), "short");
    }

    #[test]
    fn writer_masks_each_line() {
        let mut out = Vec::new();
        {
            let mut w = Redacted(&mut out);
            w.write_all(b"dial ws://h/?token=s3cret failed\n").unwrap();
        }
        assert_eq!(out, b"dial ws://h/?token=*** failed\n");
    }
}
