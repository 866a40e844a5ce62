//! The `e` report: a session's turns, waterfalls, whole tool calls and its frames as text.

use super::fixture;
use crate::draw::export::session_report;

#[test]
fn the_report_holds_turns_tool_results_and_frames() {
    let mut c = fixture::console();
    c.frames.all = true;
    let report = session_report(&c, 1);
    assert!(
        report.starts_with("turnscope session #1 · console (you)"),
        "{report}"
    );
    assert!(report.contains("you   what does the clock say"), "{report}");
    assert!(
        report.contains("result 2026-01-01 12:00:00 UTC"),
        "{report}"
    );
    assert!(report.contains("waterfall"), "{report}");
    assert!(report.contains("FunctionCallResult"), "{report}");
    assert!(
        !report.contains("Once upon"),
        "only session #1's frames: {report}"
    );
}
