//! `turnscope test` on the real binary: the example file passes against the embedded bot, every
//! kind of expectation fails with expected vs got, the three exit codes, repeat with a pass
//! rate, `--jobs` running sessions at once, JUnit and JSON output; `url` the other targets.

mod url;

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use crate::support::binary::WAIT;
use crate::support::scratch::Scratch;

fn scratch(name: &str) -> Scratch {
    Scratch::new(&format!("ct-{name}"))
}

/// `turnscope test ARGS` to its end (killed past [`WAIT`] × 2).
async fn turnscope_test(args: &[&str], dir: &Path) -> Output {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_turnscope"));
    command
        .arg("test")
        .args(args)
        .current_dir(dir)
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .kill_on_drop(true);
    tokio::time::timeout(WAIT * 2, command.output())
        .await
        .expect("turnscope test ends in time")
        .expect("turnscope test runs")
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exited, not killed")
}

fn text(o: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The `--json` lines of `o`: the cases, then the summary.
fn json_lines(o: &Output) -> (Vec<Value>, Value) {
    let lines: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?} is not JSON: {e}")))
        .collect();
    let (summary, cases) = lines.split_last().expect("a summary line");
    assert_eq!(summary["type"], "summary", "{summary}");
    (cases.to_vec(), summary.clone())
}

fn example() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/bot.test.toml")
        .display()
        .to_string()
}

#[tokio::test]
async fn the_example_file_passes_against_the_embedded_bot_with_junit_and_json() {
    let dir = scratch("example");
    let out = turnscope_test(
        &[
            "--pace",
            "0",
            "--jobs",
            "4",
            "--json",
            "--junit",
            "report.xml",
            &example(),
        ],
        &dir,
    )
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out));
    let (cases, summary) = json_lines(&out);
    assert_eq!(cases.len(), 8, "{}", text(&out));
    assert!(
        cases.iter().all(|c| c["status"] == "passed"),
        "{}",
        text(&out)
    );
    assert_eq!(
        (summary["passed"].as_u64(), summary["failed"].as_u64()),
        (Some(8), Some(0))
    );
    let repeated = cases
        .iter()
        .find(|c| c["case"] == "answers the same every time")
        .unwrap();
    assert_eq!(
        (repeated["runs"].as_u64(), repeated["passed_runs"].as_u64()),
        (Some(3), Some(3))
    );
    let xml = std::fs::read_to_string(dir.join("report.xml")).unwrap();
    assert!(
        xml.contains("<testsuite name=") && xml.contains("tests=\"8\" failures=\"0\""),
        "{xml}"
    );
    assert_eq!(xml.matches("<testcase ").count(), 8, "{xml}");
}

/// One failing case per kind of expectation, each against a reply of the embedded bot.
const FAILING: &str = r#"
[[case]]
name = "contains"
[[case.turn]]
say = "hello"
reply_contains = "goodbye"

[[case]]
name = "not contains"
[[case.turn]]
say = "hello"
reply_not_contains = "hello"

[[case]]
name = "matches"
[[case.turn]]
say = "hello"
reply_matches = '^\d+$'

[[case]]
name = "strict order"
[[case.turn]]
say = "clock and echo hi"
tools = [{ name = "echo" }, { name = "clock" }]

[[case]]
name = "unordered count"
[[case.turn]]
say = "clock and echo hi"
tools = [{ name = "echo" }]
tools_match = "unordered"

[[case]]
name = "subset extra call"
[[case.turn]]
say = "clock and echo hi"
tools = [{ name = "clock" }]
tools_match = "subset"

[[case]]
name = "superset missing call"
[[case.turn]]
say = "echo hi"
tools = [{ name = "echo" }, { name = "clock" }]
tools_match = "superset"

[[case]]
name = "args"
[[case.turn]]
say = "echo hi"
tools = [{ name = "echo", args = { text = "bye" } }]

[[case]]
name = "end reason"
[[case.turn]]
say = "hello"
end_reason = "interrupted"

[[case]]
name = "first piece"
[[case.turn]]
say = "hello"
first_piece_ms = 0.001

[[case]]
name = "total"
[[case.turn]]
say = "hello"
total_ms = 0.001

[[case]]
name = "stops at the failing turn"
[[case.turn]]
say = "one"
reply_contains = "one"
[[case.turn]]
say = "two"
reply_contains = "three"
[[case.turn]]
say = "never said"
"#;

#[tokio::test]
async fn every_kind_of_expectation_fails_with_expected_vs_got_and_exit_1() {
    let dir = scratch("failing");
    std::fs::write(dir.join("f.test.toml"), FAILING).unwrap();
    let out = turnscope_test(
        &["--pace", "0.01", "--json", "--jobs", "3", "f.test.toml"],
        &dir,
    )
    .await;
    assert_eq!(code(&out), 1, "{}", text(&out));
    let (cases, summary) = json_lines(&out);
    assert_eq!(summary["failed"].as_u64(), Some(12), "{}", text(&out));
    let key = |name: &str| -> (String, Value) {
        let c = cases.iter().find(|c| c["case"] == name).unwrap();
        assert_eq!(c["status"], "failed", "{c}");
        let run = &c["not_passed"][0];
        (
            run["failures"][0]["key"].as_str().unwrap().to_string(),
            run.clone(),
        )
    };
    for (name, expected_key) in [
        ("contains", "reply_contains"),
        ("not contains", "reply_not_contains"),
        ("matches", "reply_matches"),
        ("strict order", "tools"),
        ("unordered count", "tools"),
        ("subset extra call", "tools"),
        ("superset missing call", "tools"),
        ("args", "tools"),
        ("end reason", "end_reason"),
        ("first piece", "first_piece_ms"),
        ("total", "total_ms"),
        ("stops at the failing turn", "reply_contains"),
    ] {
        assert_eq!(key(name).0, expected_key, "case {name}");
    }
    let (_, run) = key("args");
    let f = &run["failures"][0];
    assert!(
        f["expected"]
            .as_str()
            .unwrap()
            .contains(r#"echo({"text":"bye"})"#),
        "{f}"
    );
    assert!(
        f["got"]
            .as_str()
            .unwrap()
            .contains(r#"echo({"text":"hi"})"#),
        "{f}"
    );
    let (_, run) = key("stops at the failing turn");
    assert_eq!(
        (run["turn"].as_u64(), run["said"].as_str()),
        (Some(2), Some("two"))
    );
    assert_eq!(run["reply"], "You said: two");
    // The summary shows expected vs got for people.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("reply_contains: expected a reply containing \"goodbye\""),
        "{stderr}"
    );
    assert!(stderr.contains("got \"You said: hello\""), "{stderr}");
}

#[tokio::test]
async fn a_turn_ending_in_error_fails_no_error_and_matches_end_reason_error() {
    let dir = scratch("errors");
    // A model nobody serves: each turn ends in error.
    std::fs::write(
        dir.join("e.test.toml"),
        r#"
[[case]]
name = "no error"
[[case.turn]]
say = "hello"
no_error = true

[[case]]
name = "ends in error"
[[case.turn]]
say = "hello"
end_reason = "error"
"#,
    )
    .unwrap();
    let out = turnscope_test(
        &[
            "--model-url",
            "http://127.0.0.1:9/v1",
            "--json",
            "e.test.toml",
        ],
        &dir,
    )
    .await;
    assert_eq!(code(&out), 1, "{}", text(&out));
    let (cases, _) = json_lines(&out);
    let no_error = cases.iter().find(|c| c["case"] == "no error").unwrap();
    assert_eq!(
        no_error["not_passed"][0]["failures"][0]["key"], "no_error",
        "{no_error}"
    );
    let ends = cases.iter().find(|c| c["case"] == "ends in error").unwrap();
    assert_eq!(ends["status"], "passed", "{ends}");
}

/// A line after the turn whose bot ended the session (`end_session`) fails the case, saying
/// which turn ended it: it was an error of the run (exit 2) guessing at idle timeouts,
/// restarts and memory stores (tour M).
#[tokio::test]
async fn a_line_after_the_bot_ended_the_session_fails_naming_the_turn_that_ended_it() {
    let dir = scratch("ended");
    std::fs::write(
        dir.join("end.test.toml"),
        r#"
[[case]]
name = "after end"
[[case.turn]]
say = "thanks, end_session"
[[case.turn]]
say = "are you still there"
"#,
    )
    .unwrap();
    let out = turnscope_test(&["--pace", "0", "end.test.toml"], &dir).await;
    let said = text(&out);
    assert_eq!(code(&out), 1, "{said}");
    assert!(
        said.contains("turn 2 said \"are you still there\"")
            && said.contains("turn 1 ended it (the bot called end_session)")
            && !said.contains("300 seconds"),
        "{said}"
    );
}

/// A headless turnscope at zero pace on a free port with `extra` flags, and its MCP URL.
async fn headless_target(extra: &[&str]) -> (tokio::process::Child, String) {
    use crate::support::binary::{ready_line, serving, url_in};
    let mut args = vec!["--headless", "--port", "0", "--pace", "0"];
    args.extend_from_slice(extra);
    let mut server = serving(&args).spawn().expect("the server starts");
    let url = url_in(&ready_line(&mut server).await, "/mcp");
    (server, url)
}

/// A target that wants a bearer token is said to want one (it was reached), and a wrong
/// token is said to be refused, instead of "cannot reach"; the right one passes.
#[tokio::test]
async fn a_target_that_wants_a_token_says_so_and_a_wrong_token_is_named_refused() {
    use crate::support::binary::terminate;
    let (mut server, url) = headless_target(&["--auth-token", "right-token"]).await;
    let dir = scratch("token");
    std::fs::write(
        dir.join("hi.test.toml"),
        "[[case]]\nname = \"a\"\n[[case.turn]]\nsay = \"hi\"\nreply_contains = [\"hi\"]\n",
    )
    .unwrap();
    let out = turnscope_test(&["--url", &url, "hi.test.toml"], &dir).await;
    assert_eq!(code(&out), 2, "{}", text(&out));
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        said.contains(&format!("the MCP server at {url} asks for a bearer token"))
            && said.contains("--auth-token TOKEN"),
        "{said}"
    );
    let out = turnscope_test(
        &["--url", &url, "--auth-token", "wrong-token", "hi.test.toml"],
        &dir,
    )
    .await;
    assert_eq!(code(&out), 2, "{}", text(&out));
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(said.contains("refused the bearer token given"), "{said}");
    assert!(
        !said.contains("wrong-token"),
        "the token is not echoed: {said}"
    );
    // The port alone, as `turnscope attach` takes it.
    let port = url
        .trim_end_matches("/mcp")
        .rsplit(':')
        .next()
        .unwrap()
        .to_string();
    let out = turnscope_test(
        &[
            "--url",
            &port,
            "--auth-token",
            "right-token",
            "hi.test.toml",
        ],
        &dir,
    )
    .await;
    assert_eq!(code(&out), 0, "{}", text(&out));
    terminate(&mut server).await;
}

/// A --url run whose own cases fill the target's session cap says so, and what to do.
#[tokio::test]
async fn a_url_run_that_fills_the_targets_cap_says_its_cases_hold_the_sessions() {
    use crate::support::binary::terminate;
    let (mut server, url) = headless_target(&["--sessions", "1"]).await;
    let dir = scratch("cap");
    std::fs::write(
        dir.join("two.test.toml"),
        "[[case]]\nname = \"a\"\n[[case.turn]]\nsay = \"hi\"\n\n[[case]]\nname = \"b\"\n[[case.turn]]\nsay = \"hi\"\n",
    )
    .unwrap();
    let out = turnscope_test(&["--url", &url, "two.test.toml"], &dir).await;
    let said = text(&out);
    assert_ne!(code(&out), 0, "{said}");
    assert!(
        said.contains("each case of a --url run keeps its conversation open on the target"),
        "{said}"
    );
    terminate(&mut server).await;
}

#[tokio::test]
async fn a_bad_file_or_an_unreachable_target_exits_2_naming_what() {
    let dir = scratch("exit2");
    std::fs::write(
        dir.join("bad.test.toml"),
        "[[case]]\nname = \"greets\"\n[[case.turn]]\nsay = \"hi\"\nreply_contain = \"hi\"\n",
    )
    .unwrap();
    let out = turnscope_test(&["bad.test.toml"], &dir).await;
    assert_eq!(code(&out), 2, "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("bad.test.toml:5: case 1 \"greets\", turn 1: ")
            && stderr.contains("reply_contain"),
        "{stderr}"
    );
    std::fs::write(
        dir.join("ok.test.toml"),
        "[[case]]\nname = \"a\"\n[[case.turn]]\nsay = \"hi\"\n",
    )
    .unwrap();
    let out = turnscope_test(&["--url", "http://127.0.0.1:9/mcp", "ok.test.toml"], &dir).await;
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("nothing listens at http://127.0.0.1:9/mcp (the connection was refused)"),
        "{}",
        text(&out)
    );
    let out = turnscope_test(&["missing.test.toml"], &dir).await;
    assert_eq!(code(&out), 2, "{}", text(&out));
    // The bot's flags with --url would do nothing: refused, not ignored.
    let out = turnscope_test(
        &[
            "--url",
            "http://127.0.0.1:9/mcp",
            "--pace",
            "0",
            "ok.test.toml",
        ],
        &dir,
    )
    .await;
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("apply only to the in-process bot"));
    // (A line on a session the bot ended fails its case: see
    // `a_line_after_the_bot_ended_the_session_fails_naming_the_turn_that_ended_it`.)
}

#[tokio::test]
async fn a_repeated_case_reports_its_pass_rate_as_data() {
    let dir = scratch("repeat");
    std::fs::write(
        dir.join("r.test.toml"),
        r#"
[[case]]
name = "always"
repeat = 4
pass_rate = 0.75
[[case.turn]]
say = "ping"
reply_contains = "ping"

[[case]]
name = "never"
repeat = 3
pass_rate = 0.5
[[case.turn]]
say = "ping"
reply_contains = "pong"
"#,
    )
    .unwrap();
    let out = turnscope_test(
        &["--pace", "0", "--json", "--jobs", "2", "r.test.toml"],
        &dir,
    )
    .await;
    assert_eq!(code(&out), 1, "{}", text(&out));
    let (cases, _) = json_lines(&out);
    let always = cases.iter().find(|c| c["case"] == "always").unwrap();
    assert_eq!(
        (
            always["runs"].as_u64(),
            always["passed_runs"].as_u64(),
            always["pass_rate"].as_f64()
        ),
        (Some(4), Some(4), Some(1.0))
    );
    let never = cases.iter().find(|c| c["case"] == "never").unwrap();
    assert_eq!(
        (
            never["status"].as_str(),
            never["passed_runs"].as_u64(),
            never["required_pass_rate"].as_f64()
        ),
        (Some("failed"), Some(0), Some(0.5))
    );
    assert_eq!(never["not_passed"].as_array().unwrap().len(), 3);
    // With --json the people's lines go to stderr: a repeated case's time says it is its runs'
    // added (it read longer than the whole run: tour M).
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("ms of runs in all, 4/4 runs passed"),
        "{said}"
    );
}

/// Most sessions open at once in an events file.
fn most_open_at_once(events: &str) -> usize {
    let (mut open, mut most) = (0usize, 0usize);
    for line in events.lines() {
        let Ok(e) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if e["type"] == "session" {
            if e["closed"].is_null() {
                open += 1;
                most = most.max(open);
            } else {
                open = open.saturating_sub(1);
            }
        }
    }
    most
}

#[tokio::test]
async fn jobs_run_sessions_at_once_and_events_record_them() {
    let dir = scratch("jobs");
    let mut file = String::new();
    for i in 0..8 {
        file.push_str(&format!(
            "[[case]]\nname = \"case {i}\"\n[[case.turn]]\nsay = \"line {i}\"\nreply_contains = \"line {i}\"\n"
        ));
    }
    std::fs::write(dir.join("j.test.toml"), file).unwrap();
    for (jobs, expect_overlap) in [("1", false), ("4", true)] {
        let out = turnscope_test(
            &[
                "--pace",
                "0.05",
                "--jobs",
                jobs,
                "--events",
                "events.jsonl",
                "j.test.toml",
            ],
            &dir,
        )
        .await;
        assert_eq!(code(&out), 0, "{}", text(&out));
        let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
        let most = most_open_at_once(&events);
        if expect_overlap {
            assert!(
                most > 1,
                "--jobs {jobs}: at most {most} sessions open at once"
            );
            assert!(most <= 4, "--jobs {jobs}: {most} sessions open at once");
        } else {
            assert_eq!(most, 1, "--jobs 1 runs one session at a time");
        }
        assert_eq!(events.matches("\"type\":\"turn_started\"").count(), 8);
    }
}

#[tokio::test]
async fn a_failed_turn_is_named_in_the_events_for_replay() {
    let dir = scratch("events");
    std::fs::write(
        dir.join("f.test.toml"),
        "[[case]]\nname = \"wrong\"\n[[case.turn]]\nsay = \"hello\"\nreply_contains = \"bye\"\n",
    )
    .unwrap();
    let out = turnscope_test(
        &["--pace", "0", "--events", "ev.jsonl", "f.test.toml"],
        &dir,
    )
    .await;
    assert_eq!(code(&out), 1, "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout
            .contains("in the events: session 1, turn 1; open it with: turnscope replay ev.jsonl"),
        "{stdout}"
    );
    let events = std::fs::read_to_string(dir.join("ev.jsonl")).unwrap();
    assert!(
        events.contains("\"type\":\"turn_ended\""),
        "the failed turn's waterfall is recorded"
    );
    let log = events
        .lines()
        .find(|l| l.contains("test FAILED"))
        .expect("the failure is a log event");
    assert!(
        log.contains("(session 1, turn 1)") && log.contains("reply_contains"),
        "{log}"
    );
}
