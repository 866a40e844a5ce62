//! `--junit FILE`: JUnit XML as CI dashboards read it: a `<testsuite>` per test file, a
//! `<testcase>` per case, `<failure>` for a case that failed, `<error>` for one that could
//! not be run or checked, the runs and pass rate in `<system-out>`.
//!
//! Written by hand: no XML crate is in the tree, and writing needs only escaping.

use std::fmt::Write as _;

use super::report::explain;
use super::run::{CaseResult, Status};

/// The report for `files` (in order) and their cases' `results`.
pub fn render(files: &[String], results: &[CaseResult], seconds: f64) -> String {
    let count = |rs: &[&CaseResult], s: Status| rs.iter().filter(|r| r.status == s).count();
    let all: Vec<&CaseResult> = results.iter().collect();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"turnscope test\" tests=\"{}\" failures=\"{}\" errors=\"{}\" time=\"{:.3}\">",
        all.len(),
        count(&all, Status::Failed),
        count(&all, Status::Error),
        seconds
    );
    for file in files {
        let cases: Vec<&CaseResult> = results.iter().filter(|r| &r.file == file).collect();
        let time: f64 = cases.iter().map(|r| r.ms).sum::<f64>() / 1000.0;
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"0\" time=\"{time:.3}\">",
            escape(file),
            cases.len(),
            count(&cases, Status::Failed),
            count(&cases, Status::Error),
        );
        for r in cases {
            let _ = writeln!(
                out,
                "    <testcase name=\"{}\" classname=\"{}\" time=\"{:.3}\">",
                escape(&r.case),
                escape(file),
                r.ms / 1000.0
            );
            if let Some((run, o)) = r.not_passed.first() {
                let detail = explain(*run, r.runs, o, None).join("\n");
                let headline = match (o.failures.first(), &o.error) {
                    (Some(f), _) => format!(
                        "turn {}: {}: expected {}, got {}",
                        o.turn.unwrap_or(0),
                        f.key,
                        f.expected,
                        f.got
                    ),
                    (None, Some(e)) => e.clone(),
                    (None, None) => "did not pass".to_string(),
                };
                let (tag, kind) = match r.status {
                    Status::Error => ("error", "not_run"),
                    _ => ("failure", "expectation"),
                };
                if r.status != Status::Passed {
                    let _ = writeln!(
                        out,
                        "      <{tag} message=\"{}\" type=\"{kind}\">{}</{tag}>",
                        escape(&headline),
                        escape(&detail)
                    );
                }
            }
            let _ = writeln!(
                out,
                "      <system-out>runs {}, passed {}, pass rate {:.3}, required {:.3}</system-out>",
                r.runs, r.passed_runs, r.pass_rate, r.required_pass_rate
            );
            out.push_str("    </testcase>\n");
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

/// Escapes text for an attribute or element; characters XML 1.0 cannot hold become U+FFFD.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' | '\t' | '\r' => out.push(c),
            c if (c as u32) < 0x20 => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn escapes_markup_and_control_characters() {
        assert_eq!(
            super::escape("a<b & \"c\"\u{1}"),
            "a&lt;b &amp; &quot;c&quot;\u{FFFD}"
        );
    }
}
