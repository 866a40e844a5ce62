//! Keeps credentials out of every log line, event and message: [`redact`] replaces the value
//! of every `token=` (and `access_token=`, `key=`) pair with `***` (Xiaozhi endpoint URLs carry
//! their JWT that way); [`RedactingWriter`] applies the same rule to every line the tracing
//! subscriber writes, third-party debug output included. It never parses URLs.

use std::borrow::Cow;
use std::io::Write;

use tracing_subscriber::fmt::MakeWriter;

/// What a secret value is replaced with.
pub(crate) const MASK: &str = "***";

/// Query keys whose values are secrets (matched case-insensitively, as a whole key).
const SECRET_KEYS: [&str; 3] = ["token", "access_token", "key"];

/// `text` with the value of every `token=…` (see `SECRET_KEYS`) replaced by `***`. A value
/// runs to the next `&`, `#`, whitespace, quote, `<`, `>` or `\`. Text without secrets is
/// returned as is, without copying.
pub fn redact(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut i = 0;
    while let Some(pos) = text[i..].find('=') {
        let eq = i + pos;
        let key_start = text[..eq]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
            .map_or(0, |p| p + 1);
        let key = &text[key_start..eq];
        let value_start = eq + 1;
        let value_end = text[value_start..]
            .find(|c: char| {
                matches!(c, '&' | '#' | '"' | '\'' | '<' | '>' | '\\') || c.is_whitespace()
            })
            .map_or(text.len(), |p| value_start + p);
        let secret = SECRET_KEYS.iter().any(|k| k.eq_ignore_ascii_case(key))
            && value_end > value_start
            && !text[value_start..value_end].starts_with(MASK);
        if secret {
            let buf = out.get_or_insert_with(|| String::with_capacity(text.len()));
            buf.push_str(&text[copied..value_start]);
            buf.push_str(MASK);
            copied = value_end;
        }
        i = value_end.max(value_start);
        if i >= bytes.len() {
            break;
        }
    }
    match out {
        Some(mut buf) => {
            buf.push_str(&text[copied..]);
            Cow::Owned(buf)
        }
        None => Cow::Borrowed(text),
    }
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
    fn writer_masks_each_line() {
        let mut out = Vec::new();
        {
            let mut w = Redacted(&mut out);
            w.write_all(b"dial ws://h/?token=s3cret failed\n").unwrap();
        }
        assert_eq!(out, b"dial ws://h/?token=*** failed\n");
    }
}
