//! The console's `t` key: a conversation typed in the console, exported as a conversation test
//! case, passes when `turnscope test` runs it back against a fresh bot.

use super::Screen;

#[tokio::test]
async fn a_session_exported_as_a_test_case_passes_when_run_back() {
    let mut s = Screen::start(&["--port", "0", "--pace", "0.002"]).await;
    s.wait_text("Type a line; Enter sends").await;
    for line in ["hello there", "echo a needle", "what did I say"] {
        s.send(line.as_bytes()).await;
        s.send(b"\r").await;
    }
    s.wait_text("turn 3 · completed").await;
    s.send(b"\x1b").await;
    s.send(b"t").await;
    let screen = s.wait_text("#1 test case: turnscope-session-1-").await;
    let name = screen
        .split("test case: ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .map(str::to_string)
        .expect("the file's name");
    assert!(name.ends_with(".test.toml"), "{name}");
    let path = s._dir.join(&name);
    let text = std::fs::read_to_string(&path).expect("the test case is written");
    assert!(text.contains("say = \"echo a needle\""), "{text}");
    assert!(text.contains("name = \"echo\""), "{text}");
    s.send(b"q").await;
    assert!(s.wait_exit().await.success());

    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_turnscope"))
        .args(["test", "--pace", "0", "--json"])
        .arg(&path)
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .output()
        .await
        .expect("turnscope test runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("\"passed\":1"), "{stdout}");
}
