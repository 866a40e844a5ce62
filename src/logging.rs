//! Where the binary's log goes and what it lets through: stderr, through the redacting writer
//! (endpoint tokens masked) and [`crate::log_format`]'s plain lines, filtered by
//! `TURNSCOPE_LOG` or each mode's default, with the MCP SDK's per-request chatter left out.

use turnscope::bridge::xiaozhi::redact;

/// Logs to stderr at `warn` (`to_stderr`), or nothing (under the console, which has its Log
/// pane), unless `TURNSCOPE_LOG` says otherwise.
pub(crate) fn init(to_stderr: bool) {
    // rmcp's worker logs every failed connection attempt at error level; turnscope reports
    // those itself, once, with the server's name (`rmcp_quieted`).
    init_at(if to_stderr { "warn" } else { "off" });
}

/// What rmcp says that a person reading turnscope's log has no use for, unless their
/// `TURNSCOPE_LOG` names rmcp: three `info` lines per sessionless request (naming the client
/// `rmcp`, the SDK's own name, whoever it is), and a `warn` for each error turnscope answers a
/// request with on purpose (a poll of an unknown task: one a second per orphaned task).
/// Added only under a filter whose level for everything is `warn` or more verbose, so they
/// only ever lower rmcp's level (`error`, `turnscope=debug` or `off` leave rmcp as quiet as
/// they had it).
fn rmcp_quieted(filter: &str) -> String {
    if filter.contains("rmcp") {
        return filter.to_string();
    }
    // The level for every target: the last directive that names no target.
    let global = filter
        .split(',')
        .map(str::trim)
        .rfind(|d| !d.is_empty() && !d.contains('='))
        .map(str::to_ascii_lowercase);
    match global.as_deref() {
        Some("trace" | "debug" | "info") => {
            format!("{filter},rmcp=warn,rmcp::service=error,rmcp::transport::worker=off")
        }
        Some("warn") => format!("{filter},rmcp::service=error,rmcp::transport::worker=off"),
        _ => filter.to_string(),
    }
}

/// Logs to stderr at `default` unless `TURNSCOPE_LOG` says otherwise; endpoint tokens
/// (`token=…`) are masked in every line, third-party ones included.
pub(crate) fn init_at(default: &str) {
    let filter = std::env::var("TURNSCOPE_LOG")
        .ok()
        .and_then(|asked| tracing_subscriber::EnvFilter::try_new(rmcp_quieted(&asked)).ok())
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new(rmcp_quieted(default)));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .event_format(crate::log_format::PlainFormat)
        .with_writer(redact::RedactingWriter::new(std::io::stderr))
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::rmcp_quieted;

    #[test]
    fn rmcp_is_only_ever_quieted_never_raised() {
        assert!(rmcp_quieted("info").contains("rmcp=warn"));
        assert!(rmcp_quieted("warn").contains("rmcp::service=error"));
        assert!(!rmcp_quieted("warn").contains("rmcp=warn"));
        // Filters that had rmcp off, or name it, are left as they are (`off` is the console's:
        // nothing may reach stderr under it).
        for left in ["error", "off", "turnscope=debug", "", "info,rmcp=debug"] {
            assert_eq!(rmcp_quieted(left), left);
        }
    }
}
