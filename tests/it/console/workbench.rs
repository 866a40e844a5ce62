//! The workbench in the console of the real binary: a tool with nested and enum fields filled
//! and called through its form (a schema error shown, and nothing sent, before the fix), the
//! call saved in the project and run again after a restart; a recorded model request whose
//! system prompt is edited (in the console's editor, and in `$EDITOR`) and sent again to the
//! embedded model, the new answer beside the recorded one with the word diff, and the
//! session's history unchanged.

use super::Screen;

const DOWN: &[u8] = b"\x1b[B";
const END: &[u8] = b"\x1b[F";
const LEFT: &[u8] = b"\x1b[D";
const RIGHT: &[u8] = b"\x1b[C";
const CTRL_U: &[u8] = b"\x15";

/// A config whose tools come from the fixture server over stdio (the binary serves it).
fn fixture_config() -> String {
    format!(
        "[[mcp_servers]]\nname = \"fixture\"\ntransport = \"stdio\"\ncommand = \"{}\"\nargs = [\"fixture-server\", \"--stdio\"]\n",
        env!("CARGO_BIN_EXE_turnscope-dev")
    )
}

/// Focuses the Tools pane (from the input line) and puts the cursor on `plan_trip`.
async fn select_plan_trip(s: &mut Screen) {
    s.send(b"\x1b").await;
    s.send(b"6").await;
    s.wait_text("fixture (stdio): connected").await;
    s.send(b"z").await;
    s.send(b"g").await;
    // clock, echo, end_session, add, add_tool, big, fail, image, plan_trip.
    for _ in 0..8 {
        s.send(b"j").await;
    }
    s.wait_text("plan_trip  from fixture").await;
}

#[tokio::test]
async fn a_nested_and_enum_tool_is_called_through_its_form_and_a_saved_call_runs_after_a_restart() {
    let config = fixture_config();
    let mut s = Screen::start_with(
        &["--port", "0", "--pace", "0"],
        &[("turnscope.toml", &config)],
    )
    .await;
    s.wait_text("Type a line; Enter sends").await;
    select_plan_trip(&mut s).await;
    // The list marks it: Gemini refuses its oneOf, and the detail says so.
    s.wait_all(&["portability", "~plan_trip", "Gemini: `oneOf` refused"])
        .await;

    s.send(b"\r").await;
    s.wait_all(&[
        "call plan_trip",
        "*city",
        "*nights",
        "*party",
        "one of metric|imperial",
        "yes/no · default false",
        "JSON · Who travels.",
        "✗ adults: required, and missing (required)",
        "not ready:",
    ])
    .await;
    // Fill it, nights out of range: refused before sending, naming the rule.
    s.send(b"Oslo").await;
    s.send(DOWN).await;
    s.send(b"0").await;
    s.send(DOWN).await;
    s.send(CTRL_U).await;
    s.send(br#"{"adults": 2, "children": 1}"#).await;
    s.send(DOWN).await;
    s.send(DOWN).await;
    s.send(CTRL_U).await;
    s.send(br#"["quiet", "late"]"#).await;
    s.send(DOWN).await;
    s.send(RIGHT).await; // units: metric → imperial
    s.wait_all(&["✗ must be >=1, but got 0 (minimum)", "not ready:"])
        .await;
    s.send(b"\r").await;
    // Nothing was sent: the cursor went back to the field, no result is shown.
    let still = s.wait_text("▶*nights").await;
    assert!(!still.contains("result of plan_trip"), "{still}");
    s.send(b"\x7f").await;
    s.send(b"3").await;
    s.wait_text("ready: {").await;
    s.send(b"\r").await;
    s.wait_all(&[
        "3 nights in Oslo for 3 (imperial)",
        "result of plan_trip · isError false",
        "structuredContent",
        "\"guests\": 3",
    ])
    .await;

    // The list of hand calls: save it in the project.
    s.send(b"\x1b").await;
    s.send(b"h").await;
    s.wait_text("hand calls (1, 0 saved)").await;
    s.send(b"s").await;
    s.wait_text("hand calls (1, 1 saved)").await;
    s.send(b"\x1b").await;
    s.send(b"q").await;
    assert!(s.wait_exit().await.success());

    // Next time: the saved call is listed, and runs again.
    let mut s = s.restart(&["--port", "0", "--pace", "0"]).await;
    s.wait_text("Type a line; Enter sends").await;
    select_plan_trip(&mut s).await;
    s.send(b"h").await;
    s.wait_all(&[
        "hand calls (1, 1 saved)",
        "★ plan_trip({",
        "saved call, not run since the console started",
    ])
    .await;
    // Run again, the saved call's own row shows the answer (no second row beside a ★ still
    // saying "saved").
    s.send(b"\r").await;
    s.wait_all(&[
        "3 nights in Oslo for 3 (imperial)",
        "hand calls (1, 1 saved)",
    ])
    .await;
    s.send(b"\x1b").await;
    s.send(b"q").await;
    assert!(s.wait_exit().await.success());
}

/// Opens the turn view on the latest turn, its model requests whole, and the editor on the
/// first (`e`) or `$EDITOR` (`E`).
async fn edit_first_request(s: &mut Screen, key: &[u8]) {
    s.send(b"\x1b").await;
    s.send(b"w").await;
    s.wait_text("Model requests (1)").await;
    s.send(b"m").await;
    s.wait_text("system     You are a helpful assistant").await;
    s.send(key).await;
}

/// The test case `t` wrote in the console's directory (the notice says its name, under the
/// overlay).
async fn written_case(dir: &std::path::Path) -> String {
    let started = std::time::Instant::now();
    loop {
        let found = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .find(|e| e.file_name().to_string_lossy().ends_with(".test.toml"));
        if let Some(file) = found {
            return std::fs::read_to_string(file.path()).unwrap();
        }
        assert!(
            started.elapsed() < super::WAIT,
            "no .test.toml was written in {}",
            dir.display()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

fn assert_beside(screen: &str) {
    for want in [
        "variant 1 of 1 beside the recorded answer",
        "edited      /messages/0/content",
        "recorded",
        "variant 1",
        "finish      stop",
        "status      HTTP 200",
        // One run of changed words, one mark each side.
        "[-You said: hello there-]{+YOU SAID: HELLO THERE+}",
    ] {
        assert!(screen.contains(want), "{want:?} missing:\n{screen}");
    }
}

#[tokio::test]
async fn an_edited_system_prompt_is_resent_beside_the_recorded_answer_and_the_history_stays() {
    // $EDITOR is a script that makes the same edit as a person would in vi.
    let editor =
        "#!/bin/sh\nsed -i 's/Answer in one short sentence./Answer in capital letters./' \"$1\"\n";
    let mut s = Screen::start_env(
        &["--port", "0", "--pace", "0"],
        &[("edit.sh", editor)],
        &[("EDITOR", "sh ./edit.sh")],
    )
    .await;
    s.wait_text("Type a line; Enter sends").await;
    s.send(b"hello there").await;
    s.send(b"\r").await;
    s.wait_text("bot  You said: hello there").await;

    // In the console's editor: the system message is the fourth line of the body.
    edit_first_request(&mut s, b"e").await;
    s.wait_text("Edit model request 1 of turn 1 of #1").await;
    for _ in 0..3 {
        s.send(DOWN).await;
    }
    s.send(END).await;
    s.send(LEFT).await;
    s.send(LEFT).await;
    s.send(b" Answer in capital letters.").await;
    s.wait_text("one short sentence. Answer in capital letters.\",")
        .await;
    s.send(b"\x13").await; // Ctrl+S
    let beside = s
        .wait_all(&["variant 1 of 1 beside the recorded answer", "HELLO THERE+}"])
        .await;
    assert_beside(&beside);

    // t: the variant as a test case for `turnscope test`.
    s.send(b"t").await;
    let case = written_case(&s._dir).await;
    assert!(case.contains("say = \"hello there\""), "{case}");
    assert!(
        case.contains("reply_contains = [\"YOU SAID: HELLO THERE\"]"),
        "{case}"
    );
    assert!(case.contains("Answer in capital letters."), "{case}");
    // It holds for a bot with the variant's prompt, and fails for the recorded one.
    let prompt = "[bot]\nsystem_prompt = \"You are a helpful assistant. Answer in capital letters.\"\n[model]\npace = 0\n";
    std::fs::write(s._dir.join("loud.toml"), prompt).unwrap();
    std::fs::write(s._dir.join("variant.test.toml"), &case).unwrap();
    for (config, code) in [("loud.toml", 0), ("none.toml", 1)] {
        if config == "none.toml" {
            std::fs::write(s._dir.join(config), "[model]\npace = 0\n").unwrap();
        }
        let run = tokio::process::Command::new(env!("CARGO_BIN_EXE_turnscope"))
            .args(["test", "variant.test.toml", "--config", config])
            .current_dir(&*s._dir)
            .output()
            .await
            .unwrap();
        assert_eq!(
            run.status.code(),
            Some(code),
            "{config}: {}",
            String::from_utf8_lossy(&run.stderr)
        );
    }

    // In $EDITOR: the console hands the terminal over and sends what was saved.
    s.send(b"\x1b").await;
    s.send(b"E").await;
    // The whole screen is drawn again once the editor gives the terminal back.
    let second = s
        .wait_all(&["variant 2 of 2 beside the recorded answer", "{+YOU SAID"])
        .await;
    assert!(
        second.contains("edited      /messages/0/content"),
        "{second}"
    );
    s.send(LEFT).await;
    s.wait_text("variant 1 of 2").await;

    // The session's history is unchanged: the next line is answered under the old prompt,
    // and its request carries the recorded turn, not a variant.
    s.send(b"\x1b").await;
    s.send(b"\x1b").await;
    s.send(b"3").await;
    s.send(b"and again").await;
    s.send(b"\r").await;
    let after = s.wait_text("bot  You said: and again").await;
    assert!(!after.contains("YOU SAID"), "{after}");
    s.send(b"\x1b").await;
    s.send(b"w").await;
    s.wait_text("Turn 2 of #1").await;
    s.send(b"m").await;
    s.wait_all(&[
        "model 1 +1 assistant, +1 user",
        "4 messages",
        "system     You are a helpful assistant. Answer in one short sentence.",
        "assistant  You said: hello there",
    ])
    .await;
    s.send(b"\x1b").await;
    s.send(b"q").await;
    assert!(s.wait_exit().await.success());
}

/// `Esc` while an edited request is out cancels it (tour S M5: a hung model server held it
/// 60 s with no key to stop it): the request is dropped, so the server sees its connection
/// close, no variant comes, and the editor stays open with the edit until the next `Esc`.
#[tokio::test]
async fn esc_cancels_an_edited_request_a_hung_model_server_holds() {
    use tokio::io::AsyncReadExt;
    // A model server that takes the request and never answers.
    let hung = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1/chat/completions", hung.local_addr().unwrap());
    let mut s = Screen::start(&["--port", "0", "--pace", "0"]).await;
    s.wait_text("Type a line; Enter sends").await;
    s.send(b"hello there").await;
    s.send(b"\r").await;
    s.wait_text("bot  You said: hello there").await;
    edit_first_request(&mut s, b"e").await;
    s.wait_text("Edit model request 1 of turn 1 of #1").await;
    // The URL line: the hung server's.
    s.send(b"\t").await;
    s.send(CTRL_U).await;
    s.send(url.as_bytes()).await;
    s.send(b"\t").await;
    s.send(b"\x13").await; // Ctrl+S
    let (mut conn, _) = tokio::time::timeout(super::WAIT, hung.accept())
        .await
        .expect("the request reaches the hung server")
        .unwrap();
    s.wait_all(&["sending…", "Esc cancels it"]).await;
    s.send(b"\x1b").await;
    s.wait_text("the edited request was cancelled after").await;
    // Dropped: the connection closes (what was read before is the request).
    let closed = tokio::time::timeout(super::WAIT, async {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the connection was not closed");
    let open = s.wait_text("Edit model request 1 of turn 1 of #1").await;
    assert!(!open.contains("sending…"), "{open}");
    s.send(b"\x1b").await;
    let closed = s.wait_text("your edit is kept, not sent").await;
    assert!(!closed.contains("beside the recorded answer"), "{closed}");
    s.send(b"\x1b").await;
    s.send(b"q").await;
    assert!(s.wait_exit().await.success());
}

/// A request edited in `$EDITOR` can be cancelled while a slow model answers it (tour: once
/// the editor closed there was no editor to press Esc in): the variants show it in flight and
/// say Esc cancels it; Esc does, no variant comes, and `e` opens the edit as it was sent.
#[tokio::test]
async fn esc_cancels_a_request_sent_from_dollar_editor_while_it_is_in_flight() {
    // A long user line: the embedded model, a word every 0.3 s, takes half a minute on it.
    let words = "one two three four five six seven eight nine ten ".repeat(10);
    let editor = format!(
        "#!/bin/sh\nsed -i 's/\"content\": \"hello there\"/\"content\": \"hello there {words}\"/' \"$1\"\n"
    );
    let mut s = Screen::start_env(
        &["--port", "0", "--pace", "0.3"],
        &[("edit.sh", &editor)],
        &[("EDITOR", "sh ./edit.sh")],
    )
    .await;
    s.wait_text("Type a line; Enter sends").await;
    s.send(b"hello there").await;
    s.send(b"\r").await;
    s.wait_text("bot  You said: hello there").await;
    edit_first_request(&mut s, b"E").await;
    s.wait_all(&[
        "variant 1 of 1 · in flight",
        "waiting for the answer…",
        "Esc cancels the send",
    ])
    .await;
    s.send(b"\x1b").await;
    let cancelled = s.wait_text("the edited request was cancelled after").await;
    assert!(!cancelled.contains("in flight"), "{cancelled}");
    // No variant comes: v says there is none.
    s.send(b"v").await;
    s.wait_text("no variant of this request yet").await;
    // The edit is kept: e opens it as it was sent.
    s.send(b"e").await;
    s.wait_all(&[
        "your unsent edit, as you left it",
        "hello there one two three",
    ])
    .await;
    s.send(b"\x1b").await;
    s.send(b"\x1b").await;
    s.send(b"\x1b").await;
    s.send(b"q").await;
    assert!(s.wait_exit().await.success());
}
