//! What `turnscope test` prints: a line per case as it is decided, a progress bar under them
//! on a terminal (none when stderr is not one), the summary (each failed expectation as
//! expected vs got, with the reply and the tool calls), and `--json` lines.
//!
//! The bar is one line of text redrawn with `\r`; no progress crate is in the tree and it
//! needs nothing more.

use std::io::{IsTerminal, Write};

use serde_json::json;

use super::expect::show_made;
use super::run::{CaseResult, RunOutcome, Status};

/// Where the lines go and what has been seen.
pub struct Reporter {
    /// JSON lines on stdout; the human lines then go to stderr.
    json: bool,
    /// stdout carries data (`--json`, or the events of `--events -`): the human lines go to
    /// stderr.
    stdout_is_data: bool,
    /// Draw the bar (stderr is a terminal).
    bar: bool,
    total: usize,
    done: usize,
    failed: usize,
}

impl Reporter {
    /// A reporter for `total` cases; `events_on_stdout` when `--events -` writes there.
    pub fn new(total: usize, json: bool, events_on_stdout: bool) -> Self {
        Self {
            json,
            stdout_is_data: json || events_on_stdout,
            bar: std::io::stderr().is_terminal(),
            total,
            done: 0,
            failed: 0,
        }
    }

    fn human(&self, text: &str) {
        if self.stdout_is_data {
            eprintln!("{text}");
        } else {
            println!("{text}");
        }
    }

    /// One case decided: its line (and its JSON line), then the bar again.
    pub fn case(&mut self, r: &CaseResult) {
        self.done += 1;
        if r.status != Status::Passed {
            self.failed += 1;
        }
        self.clear_bar();
        // A repeated case's time is its runs' added (they may have run side by side): said so,
        // or it reads longer than the whole run (tour M).
        let (time, runs) = if r.runs > 1 {
            (
                format!("{:.0} ms of runs in all", r.ms),
                format!(
                    ", {}/{} runs passed ({:.0} %, {:.0} % required)",
                    r.passed_runs,
                    r.runs,
                    r.pass_rate * 100.0,
                    r.required_pass_rate * 100.0
                ),
            )
        } else {
            (format!("{:.0} ms", r.ms), String::new())
        };
        self.human(&format!(
            "{} {} › {} ({time}{runs})",
            label(r.status),
            r.file,
            r.case,
        ));
        if self.json {
            println!("{}", case_json(r));
        }
        self.draw_bar();
    }

    fn clear_bar(&self) {
        if self.bar {
            eprint!("\r\x1b[2K");
        }
    }

    fn draw_bar(&self) {
        if !self.bar || self.done >= self.total {
            return;
        }
        const WIDTH: usize = 30;
        let filled = WIDTH * self.done / self.total.max(1);
        eprint!(
            "[{}{}] {}/{}, {} not passed",
            "#".repeat(filled),
            ".".repeat(WIDTH - filled),
            self.done,
            cases(self.total),
            self.failed
        );
        let _ = std::io::stderr().flush();
    }

    /// The summary of every case not passed, and the totals line.
    pub fn summary(&self, results: &[CaseResult], seconds: f64, jobs: usize, events: Option<&str>) {
        self.clear_bar();
        let bad: Vec<&CaseResult> = results
            .iter()
            .filter(|r| r.status != Status::Passed)
            .collect();
        if !bad.is_empty() {
            self.human("");
        }
        for r in &bad {
            self.human(&format!("{} {} › {}", label(r.status), r.file, r.case));
            if r.status == Status::Failed && r.runs > 1 {
                self.human(&format!(
                    "  pass rate: expected at least {:.0} %, got {:.0} % ({} of {} runs)",
                    r.required_pass_rate * 100.0,
                    r.pass_rate * 100.0,
                    r.passed_runs,
                    r.runs
                ));
            }
            // The first run that did not pass says why; the others are in --json.
            if let Some((run, o)) = r.not_passed.first() {
                for line in explain(*run, r.runs, o, events) {
                    self.human(&line);
                }
            }
        }
        let count = |s: Status| results.iter().filter(|r| r.status == s).count();
        let line = json!({
            "type": "summary",
            "passed": count(Status::Passed),
            "failed": count(Status::Failed),
            "errors": count(Status::Error),
            "cases": results.len(),
            "seconds": (seconds * 1000.0).round() / 1000.0,
            "jobs": jobs,
        });
        self.human(&format!(
            "\n{} passed, {} failed, {} not checkable or not run; {} in {:.2} s ({} at once)",
            count(Status::Passed),
            count(Status::Failed),
            count(Status::Error),
            cases(results.len()),
            seconds,
            jobs
        ));
        if self.json {
            println!("{line}");
        }
    }
}

fn label(s: Status) -> &'static str {
    match s {
        Status::Passed => "PASS ",
        Status::Failed => "FAIL ",
        Status::Error => "ERROR",
    }
}

/// The lines that tell why run `run` of `runs` did not pass.
pub fn explain(run: u32, runs: u32, o: &RunOutcome, events: Option<&str>) -> Vec<String> {
    let mut out = Vec::new();
    let run_label = if runs > 1 {
        format!("run {run} of {runs}, ")
    } else {
        String::new()
    };
    match (&o.turn, &o.said) {
        (Some(t), Some(said)) => out.push(format!("  {run_label}turn {t} said {said:?}")),
        _ => out.push(format!("  {run_label}before the first turn")),
    }
    for f in &o.failures {
        out.push(format!("  {}: expected {}", f.key, f.expected));
        out.push(format!("  {}  got {}", " ".repeat(f.key.len()), f.got));
    }
    if let Some(e) = &o.error {
        out.push(format!("  {e}"));
    }
    if let Some(rec) = &o.record {
        out.push(format!("  reply: {:?}", rec.reply));
        if let Some(calls) = &rec.tool_calls {
            out.push(format!("  tool calls: {}", show_made(calls)));
        }
        if let Some(reason) = &rec.end_reason {
            out.push(format!("  end reason: {reason}"));
        }
    }
    if let (Some(file), Some(n)) = (events, o.session) {
        out.push(format!(
            "  in the events: session {n}{}; open it with: turnscope replay {file}",
            o.session_turn
                .map(|t| format!(", turn {t}"))
                .unwrap_or_default()
        ));
    }
    out
}

/// `1 case`, `2 cases`.
fn cases(n: usize) -> String {
    format!("{n} case{}", if n == 1 { "" } else { "s" })
}

/// One case as a JSON line.
pub fn case_json(r: &CaseResult) -> serde_json::Value {
    json!({
        "type": "case",
        "file": r.file,
        "case": r.case,
        "status": r.status,
        "runs": r.runs,
        "passed_runs": r.passed_runs,
        "pass_rate": r.pass_rate,
        "required_pass_rate": r.required_pass_rate,
        "ms": (r.ms * 10.0).round() / 10.0,
        "not_passed": r.not_passed.iter().map(|(run, o)| json!({
            "run": run,
            "status": o.status,
            "turn": o.turn,
            "said": o.said,
            "failures": o.failures,
            "error": o.error,
            "reply": o.record.as_ref().map(|r| &r.reply),
            "tool_calls": o.record.as_ref().and_then(|r| r.tool_calls.as_ref()),
            "end_reason": o.record.as_ref().and_then(|r| r.end_reason.as_ref()),
            "reported": o.record.as_ref().map(|r| r.reported),
            "task": o.record.as_ref().and_then(|r| r.task.as_ref()),
            "session": o.session,
            "session_turn": o.session_turn,
        })).collect::<Vec<_>>(),
    })
}
