//! `turnscope tools list` and `turnscope tools call` on the real binary: against the fixture
//! server (stdio, from the config) with each exit code (0 a result, 1 the tool's error, 2 an
//! unknown tool, arguments the schema refuses with field and rule named, arguments that are not
//! JSON, an unreachable server), and against Node's server-everything (ignored unless the
//! interop suite points `TURNSCOPE_INTEROP_EVERYTHING` at it).

use std::path::{Path, PathBuf};

use serde_json::Value;

/// A directory holding `turnscope.toml` with `config`, removed on drop.
struct Project(PathBuf);

impl Project {
    fn new(name: &str, config: &str) -> Project {
        let dir =
            std::env::temp_dir().join(format!("turnscope-tools-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("turnscope.toml"), config).unwrap();
        Project(dir)
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `turnscope tools ARGS` in `dir`: exit code, stdout as JSON, stderr.
async fn tools(dir: &Path, args: &[&str]) -> (i32, Value, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_turnscope"))
        .arg("tools")
        .args(args)
        .current_dir(dir)
        .env("MCP_CONNECT_TIMEOUT_SECONDS", "5")
        .output()
        .await
        .expect("turnscope runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{stdout}"));
    (
        out.status.code().expect("an exit code"),
        json,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn fixture_config() -> String {
    format!(
        "[[mcp_servers]]\nname = \"fixture\"\ntransport = \"stdio\"\ncommand = \"{}\"\nargs = [\"fixture-server\", \"--stdio\"]\ntimeout_seconds = 1\n",
        env!("CARGO_BIN_EXE_turnscope-dev")
    )
}

#[tokio::test]
async fn tools_call_against_the_fixture_server_with_each_exit_code() {
    let p = Project::new("fixture", &fixture_config());
    let (code, listed, _) = tools(&p.0, &["list"]).await;
    assert_eq!(code, 0, "{listed}");
    assert_eq!(listed["sources"][0]["state"], "up", "{listed}");
    let trip = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "plan_trip")
        .expect("plan_trip is listed");
    assert_eq!(trip["source"], "fixture");
    assert!(trip["inputSchema"]["properties"]["party"].is_object());
    let portability = trip["portability"].to_string();
    assert!(
        portability.contains("Gemini: `oneOf` refused"),
        "{portability}"
    );

    let args = r#"{"city": "Oslo", "nights": 3, "party": {"adults": 2, "children": 1}, "units": "imperial", "tags": ["quiet"]}"#;
    let (code, done, _) = tools(&p.0, &["call", "plan_trip", "--args", args]).await;
    assert_eq!(code, 0, "{done}");
    assert_eq!(done["isError"], false);
    assert_eq!(
        done["content"][0]["text"],
        "3 nights in Oslo for 3 (imperial)"
    );
    assert_eq!(done["structuredContent"]["guests"], 3);
    assert_eq!(done["source"], "fixture");
    // Its size is its text's, as the console's hand calls and the transcript say it (not the
    // JSON of its content and structuredContent: tour S M4).
    assert_eq!(
        done["bytes"],
        "3 nights in Oslo for 3 (imperial)".len(),
        "{done}"
    );
    assert!(done["ms"].as_f64().is_some());

    let (code, failed, err) =
        tools(&p.0, &["call", "fail", "--args", r#"{"message": "boom"}"#]).await;
    assert_eq!(code, 1, "{failed}");
    assert_eq!(failed["isError"], true);
    assert_eq!(failed["content"][0]["text"], "boom");
    assert!(err.contains("answered with an error"), "{err}");

    let (code, unknown, _) = tools(&p.0, &["call", "nope"]).await;
    assert_eq!(code, 2);
    let message = unknown["error"].as_str().unwrap();
    assert!(
        message.contains("no tool named `nope`") && message.contains("plan_trip"),
        "{message}"
    );

    let bad = r#"{"city": "Oslo", "nights": 0, "party": {}, "units": "kelvin"}"#;
    let (code, refused, err) = tools(&p.0, &["call", "plan_trip", "--args", bad]).await;
    assert_eq!(code, 2, "{refused}");
    let errors: Vec<(String, String)> = refused["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["field"].as_str().unwrap().to_string(),
                e["rule"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for want in [
        ("nights", "minimum"),
        ("party.adults", "required"),
        ("units", "enum"),
    ] {
        assert!(
            errors.contains(&(want.0.to_string(), want.1.to_string())),
            "{want:?} not in {errors:?}"
        );
    }
    assert!(
        err.contains("nights: must be >=1, but got 0 (minimum)"),
        "{err}"
    );

    let (code, not_json, _) = tools(&p.0, &["call", "echo", "--args", "{text: hi}"]).await;
    assert_eq!(code, 2);
    assert!(
        not_json["error"]
            .as_str()
            .unwrap()
            .contains("--args is not JSON")
    );

    // The tool never answered: exit 3, and which way, apart from an isError the tool gave.
    let (code, slow, err) = tools(&p.0, &["call", "slow", "--args", r#"{"ms": 5000}"#]).await;
    assert_eq!(code, 3, "{slow}");
    assert_eq!(slow["unanswered"]["kind"], "timed_out", "{slow}");
    assert!(
        err.contains("no answer within 1.0 s (timeout_seconds of [[mcp_servers]] fixture)"),
        "{err}"
    );
    let (code, big, _) = tools(&p.0, &["call", "big", "--args", r#"{"bytes": 2000000}"#]).await;
    assert_eq!(code, 3, "{big}");
    assert_eq!(big["unanswered"]["kind"], "too_large", "{big}");
    assert_eq!(big["unanswered"]["size_bytes"], 2_000_000, "{big}");

    // Arguments from a file.
    std::fs::write(p.0.join("args.json"), r#"{"text": "from a file"}"#).unwrap();
    let (code, echoed, _) = tools(&p.0, &["call", "echo", "--args", "@args.json"]).await;
    assert_eq!(code, 0, "{echoed}");
    assert_eq!(echoed["content"][0]["text"], "from a file");
}

#[tokio::test]
async fn an_unreachable_server_is_exit_2_naming_it() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let config =
        format!("[[mcp_servers]]\nname = \"gone\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n");
    let p = Project::new("gone", &config);
    let (code, listed, err) = tools(&p.0, &["list"]).await;
    assert_eq!(code, 2, "{listed}");
    assert_eq!(listed["sources"][0]["state"], "down", "{listed}");
    assert!(err.contains("MCP server gone: down"), "{err}");
    assert!(
        err.contains("nothing listens there (the connection was refused)"),
        "{err}"
    );
    // The built-ins are still listed.
    assert!(listed["tools"].to_string().contains("\"clock\""));
    let (code, refused, _) = tools(&p.0, &["call", "fetch"]).await;
    assert_eq!(code, 2);
    let message = refused["error"].as_str().unwrap();
    assert!(
        message.contains("no tool named `fetch`")
            && message.contains("unreachable")
            && message.contains("gone"),
        "{message}"
    );
    // A built-in still answers.
    let (code, clock, _) = tools(&p.0, &["call", "clock"]).await;
    assert_eq!(code, 0, "{clock}");
}

/// A server that answers `initialize` with 401 (a turnscope run with `--auth-token`) is
/// said to want credentials, with the `headers` line that gives them; a wrong token is said
/// to be refused; the right one lists its tools.
#[tokio::test]
async fn a_server_that_wants_a_token_says_how_to_give_it() {
    use crate::support::binary::{ready_line, serving, terminate, url_in};
    let mut server = serving(&["--headless", "--port", "0", "--auth-token", "right-token"])
        .spawn()
        .expect("the server starts");
    let url = url_in(&ready_line(&mut server).await, "/mcp");
    let entry = format!("[[mcp_servers]]\nname = \"guarded\"\nurl = \"{url}\"\n");
    let p = Project::new("guarded", &entry);
    let (code, listed, err) = tools(&p.0, &["list"]).await;
    assert_eq!(code, 2, "{listed}");
    assert!(
        err.contains("down after 1 attempt: ")
            && err.contains("it asks for credentials (HTTP 401/403)")
            && err.contains("headers = { Authorization = \"Bearer ${TOKEN}\" }"),
        "{err}"
    );
    let wrong = Project::new(
        "guarded-wrong",
        &format!("{entry}headers = {{ Authorization = \"Bearer wrong-token\" }}\n"),
    );
    let (code, _, err) = tools(&wrong.0, &["list"]).await;
    assert_eq!(code, 2);
    assert!(
        err.contains("refused the Authorization header given"),
        "{err}"
    );
    assert!(
        !err.contains("wrong-token"),
        "the token is not echoed: {err}"
    );
    let right = Project::new(
        "guarded-right",
        &format!("{entry}headers = {{ Authorization = \"Bearer right-token\" }}\n"),
    );
    let (code, listed, _) = tools(&right.0, &["list"]).await;
    assert_eq!(code, 0, "{listed}");
    assert!(listed["tools"].to_string().contains("\"chat\""), "{listed}");
    terminate(&mut server).await;
}

#[tokio::test]
async fn a_reader_that_closes_the_pipe_early_is_no_panic() {
    // `turnscope tools list | head -c 10`: the reader is gone before the listing is written.
    let p = Project::new("pipe", "");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_turnscope"))
        .args(["tools", "list"])
        .current_dir(&p.0)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("turnscope runs");
    drop(child.stdout.take());
    let out = child.wait_with_output().await.unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[tokio::test]
#[ignore = "needs TURNSCOPE_INTEROP_EVERYTHING (server-everything's dist/index.js) and node"]
async fn tools_call_against_node_server_everything() {
    let everything = std::env::var("TURNSCOPE_INTEROP_EVERYTHING")
        .expect("TURNSCOPE_INTEROP_EVERYTHING points to server-everything's dist/index.js");
    let config = format!(
        "[bot]\nbuiltin_tools = false\n\n[[mcp_servers]]\nname = \"everything\"\ntransport = \"stdio\"\ncommand = \"node\"\nargs = [\"{everything}\", \"stdio\"]\n"
    );
    let p = Project::new("everything", &config);
    let (code, listed, _) = tools(&p.0, &["list"]).await;
    assert_eq!(code, 0, "{listed}");
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"echo") && names.contains(&"get-sum"),
        "{names:?}"
    );

    let (code, echoed, _) = tools(&p.0, &["call", "echo", "--args", r#"{"message": "hi"}"#]).await;
    assert_eq!(code, 0, "{echoed}");
    assert_eq!(echoed["content"][0]["text"], "Echo: hi");
    let (code, sum, _) = tools(&p.0, &["call", "get-sum", "--args", r#"{"a": 2, "b": 3}"#]).await;
    assert_eq!(code, 0, "{sum}");
    assert!(
        sum["content"][0]["text"].as_str().unwrap().contains('5'),
        "{sum}"
    );

    // Refused before the server sees it: server-everything's own schema names the rule.
    let (code, refused, _) = tools(
        &p.0,
        &["call", "get-sum", "--args", r#"{"a": "two", "b": 3}"#],
    )
    .await;
    assert_eq!(code, 2, "{refused}");
    assert_eq!(refused["errors"][0]["field"], "a", "{refused}");
    assert_eq!(refused["errors"][0]["rule"], "type", "{refused}");
    // The server's own error result is exit 1: gzip-file-as-resource cannot fetch a closed
    // loopback port.
    let (code, failed, _) = tools(
        &p.0,
        &[
            "call",
            "gzip-file-as-resource",
            "--args",
            r#"{"data": "http://127.0.0.1:1/x"}"#,
        ],
    )
    .await;
    assert_eq!(code, 1, "{failed}");
    assert_eq!(failed["isError"], true, "{failed}");
    let (code, unknown, _) = tools(&p.0, &["call", "no-such-tool"]).await;
    assert_eq!(code, 2, "{unknown}");
    assert!(
        unknown["error"].as_str().unwrap().contains("get-sum"),
        "{unknown}"
    );
}

/// SIGTERM (or Ctrl-C) on `tools call` ends it with 143 (130) and the MCP servers it started
/// with it: the server's whole process group, here a wrapper that does not exec and a helper
/// it started (tour I: turnscope died at the signal and they ran on, orphaned).
#[tokio::test]
async fn a_signalled_tools_call_ends_the_servers_it_started() {
    let dir = std::env::temp_dir().join(format!("turnscope-tools-signal-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let helper_pid = dir.join("helper.pid");
    let script = format!(
        "sleep 300 & echo $! > '{}'; '{}' fixture-server --stdio; wait",
        helper_pid.display(),
        env!("CARGO_BIN_EXE_turnscope-dev")
    );
    let config = format!(
        "[[mcp_servers]]\nname = \"wrapped\"\ncommand = \"sh\"\nargs = [\"-c\", {}]\n",
        serde_json::to_string(&script).unwrap()
    );
    let p = Project::new("signal", &config);
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_turnscope"))
        .args(["tools", "call", "slow", "--args", r#"{"ms": 60000}"#])
        .current_dir(&p.0)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("turnscope runs");
    let started = std::time::Instant::now();
    while !helper_pid.exists() {
        assert!(started.elapsed().as_secs() < 30, "the server never started");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let helper: u32 = std::fs::read_to_string(&helper_pid)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let pid = child.id().unwrap().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let out = tokio::time::timeout(std::time::Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("it ends")
        .unwrap();
    assert_eq!(out.status.code(), Some(143));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("terminated (SIGTERM)"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ended = std::time::Instant::now();
    while crate::support::process::runs(helper) {
        assert!(ended.elapsed().as_secs() < 10, "the helper ran on");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A stdio server does not inherit turnscope's own bearer token (tour I: every server got
/// `TURNSCOPE_AUTH_TOKEN`); one given it in its `env` has it.
#[tokio::test]
async fn a_stdio_server_is_not_handed_turnscopes_token() {
    let dir = std::env::temp_dir().join(format!("turnscope-tools-token-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let server = |name: &str, env: &str| {
        let seen = dir.join(format!("{name}.seen"));
        let script = format!(
            "echo \"${{TURNSCOPE_AUTH_TOKEN:-unset}}\" > '{}'; exec '{}' fixture-server --stdio",
            seen.display(),
            env!("CARGO_BIN_EXE_turnscope-dev")
        );
        format!(
            "[[mcp_servers]]\nname = \"{name}\"\ncommand = \"sh\"\nargs = [\"-c\", {}]\n{env}",
            serde_json::to_string(&script).unwrap()
        )
    };
    let config =
        server("plain", "") + &server("given", "env = { TURNSCOPE_AUTH_TOKEN = \"for-it\" }\n");
    let p = Project::new("token", &config);
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_turnscope"))
        .args(["tools", "list"])
        .current_dir(&p.0)
        .env("TURNSCOPE_AUTH_TOKEN", "s3cret-of-turnscope")
        .output()
        .await
        .expect("turnscope runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen = |name: &str| std::fs::read_to_string(dir.join(format!("{name}.seen"))).unwrap();
    assert_eq!(seen("plain").trim(), "unset");
    assert_eq!(seen("given").trim(), "for-it");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A server the policy refused is listed as refused, said on stderr, and fails the command
/// (tour I: `tools list` said nothing of it and exited 0, so a CI check passed with the
/// server never run); a call of one of its tools says the server was not started.
#[tokio::test]
async fn tools_list_says_which_servers_the_policy_refused() {
    let config = format!("[policy]\nstdio_enabled = false\n{}", fixture_config());
    let p = Project::new("refused", &config);
    let (code, listed, stderr) = tools(&p.0, &["list"]).await;
    assert_eq!(code, 2, "{stderr}");
    let source = &listed["sources"][0];
    assert_eq!(source["name"], "fixture");
    assert_eq!(source["state"], "refused");
    assert!(
        source["error"]
            .as_str()
            .unwrap()
            .contains("stdio servers are turned off"),
        "{source}"
    );
    assert!(
        stderr.contains("fixture: not started (")
            && stderr.contains("stdio servers are turned off"),
        "{stderr}"
    );
    // A call of its tool says why the tool is unknown.
    let (code, refused, _) = tools(&p.0, &["call", "plan_trip"]).await;
    assert_eq!(code, 2, "{refused}");
    let message = refused["error"].as_str().unwrap_or_default();
    assert!(
        message.contains("not started, so their tools are unknown: fixture: not started ("),
        "{message}"
    );
}

/// A `cwd` that does not exist is said as such, not as a command that cannot be found
/// (tour I).
#[tokio::test]
async fn a_missing_cwd_is_named() {
    let config = format!("{}cwd = \"no-such-folder\"\n", fixture_config());
    let p = Project::new("cwd", &config);
    let (code, listed, stderr) = tools(&p.0, &["list"]).await;
    assert_eq!(code, 2, "{stderr}");
    let error = listed["sources"][0]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("no-such-folder (`cwd`) does not exist"),
        "{listed}\n{stderr}"
    );
}

/// `tools call` waits for the server that answers for its tool, not for an unrelated one
/// that never comes up (here a `sleep` that never answers `initialize`, under a connect
/// budget of two minutes): the call is made, and nothing is said of the slow one. A call of
/// an unknown name (the slow one could answer for it) still waits the budget and says it ran
/// out. (A server before the tool's in precedence is waited for too: the same rule.)
#[tokio::test]
async fn a_call_does_not_wait_for_an_unrelated_slow_server() {
    let config = format!(
        "{}[[mcp_servers]]\nname = \"mute\"\ntransport = \"stdio\"\ncommand = \"sleep\"\nargs = [\"600\"]\n",
        fixture_config()
    );
    let p = Project::new("mute", &config);
    let run = |budget: &'static str, args: &'static [&'static str]| {
        tokio::process::Command::new(env!("CARGO_BIN_EXE_turnscope"))
            .arg("tools")
            .args(args)
            .current_dir(&p.0)
            .env("MCP_CONNECT_TIMEOUT_SECONDS", budget)
            .output()
    };
    let started = std::time::Instant::now();
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        run(
            "120",
            &[
                "call",
                "plan_trip",
                "--args",
                r#"{"city": "Oslo", "nights": 1, "party": {"adults": 1}}"#,
            ],
        ),
    )
    .await
    .expect("the call does not wait for `mute`'s two-minute budget")
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("mute"), "{stderr}");
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
    // An unknown name could be `mute`'s: the budget is waited out, and said.
    let out = run("2", &["call", "no_such_tool"]).await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    assert!(
        stdout.contains("mute: still connecting when the connect budget ran out")
            && stdout.contains("MCP_CONNECT_TIMEOUT_SECONDS"),
        "{stdout}"
    );
}
