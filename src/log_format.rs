//! How a log line reads on stderr: `2026-12-01T16:38:28.006Z warn: MCP server `files` failed:
//! … server=files`. The time (UTC, milliseconds), the level in lower case, the message, then its
//! fields; no Rust module path, no padding. tracing-subscriber's own formats pad the level to
//! five cells (`  WARN`) and print the event's target, a Rust path a person has no use for; its
//! formats cannot leave out the one and keep the other tidy, hence this one.

use std::fmt;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The plain line format (see the module).
pub struct PlainFormat;

impl<S, N> FormatEvent<S, N> for PlainFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let level = match *event.metadata().level() {
            Level::ERROR => "error",
            Level::WARN => "warn",
            Level::INFO => "info",
            Level::DEBUG => "debug",
            Level::TRACE => "trace",
        };
        write!(writer, "{} {level}: ", utc_now())?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

/// Now as `2026-12-01T16:38:28.006Z`.
fn utc_now() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let day = turnscope::tools::builtin::format_utc(now.as_secs());
    // `2026-12-01 16:38:28 UTC` → `2026-12-01T16:38:28.006Z`
    let stamp = day.trim_end_matches(" UTC").replacen(' ', "T", 1);
    format!("{stamp}.{:03}Z", now.subsec_millis())
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    /// A writer into a shared buffer.
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_line_has_the_time_the_level_the_message_and_its_fields_and_nothing_else() {
        let buffer = Buffer::default();
        let out = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .event_format(super::PlainFormat)
            .with_writer(move || out.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(server = "files", "MCP server `files` failed: it exited");
        });
        let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        let (time, rest) = text.split_once(' ').unwrap();
        assert_eq!(time.len(), "2026-12-01T16:38:28.006Z".len(), "{text}");
        assert!(time.ends_with('Z') && time.contains('T'), "{text}");
        assert_eq!(
            rest,
            "warn: MCP server `files` failed: it exited server=\"files\"\n"
        );
        assert!(
            !text.contains("turnscope::") && !text.contains("  "),
            "{text}"
        );
    }
}
