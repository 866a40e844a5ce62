//! The console's debugging instruments end to end, on the real binary with a real rmcp client
//! alongside: the pipeline diagram, the mark on a session whose MCP client deleted its MCP
//! session, sorting and filtering the Sessions list, and scrubbing a replay inside a turn.

use super::{Screen, mcp_url};
use crate::support::mcp::Client;

/// A line long enough that the embedded model streams it for a while at the given pace.
const LONG_LINE: &str = "one two three four five six seven eight nine ten eleven twelve \
    thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty";

#[tokio::test]
async fn the_pipeline_diagram_shows_each_link_while_frames_flow() {
    let mut s = Screen::start(&["--port", "0", "--pace", "0.05"]).await;
    let first = s.wait_text("Type a line; Enter sends").await;
    let client = Client::connect(&mcp_url(&first)).await;
    let handle = client.start().await;
    // Select the client's session and watch its Frames pane while it streams.
    s.send(b"\x1b").await;
    s.send(b"j").await;
    s.wait_text("Transcript · #2").await;
    s.send(b"4").await;
    s.send(b"z").await;
    let quiet = s.wait_text("pipeline #2: ").await;
    assert!(quiet.contains("pipeline #2: source"), "{quiet}");
    let chat = {
        let handle = handle.clone();
        tokio::spawn(async move {
            client.chat(&handle, LONG_LINE).await;
            client
        })
    };
    // Every processor in order, and a rate on the links the reply streams over.
    let flowing = s
        .wait_for("a link with frames per second", |t| t.contains("/s→"))
        .await;
    for stage in ["input", "model", "output", "sink"] {
        assert!(flowing.contains(stage), "{stage} missing:\n{flowing}");
    }
    let client = chat.await.expect("the chat answers");
    // a: the diagram sums every session.
    s.send(b"a").await;
    s.wait_text("pipeline, all sessions: source").await;
    s.send(b"q").await;
    s.send(b"q").await;
    assert!(s.wait_exit().await.success());
    drop(client);
}

#[tokio::test]
async fn a_client_that_deletes_its_mcp_session_is_marked_gone() {
    let mut s = Screen::start(&["--port", "0", "--pace", "0.002"]).await;
    let first = s.wait_text("Type a line; Enter sends").await;
    let client = Client::connect(&mcp_url(&first)).await;
    let handle = client.start().await;
    client.chat(&handle, "hello before leaving").await;
    s.wait_text("mcp: ").await;
    // rmcp's client deletes its MCP session (DELETE /mcp) when it closes.
    client
        .service
        .cancel()
        .await
        .expect("the client closes cleanly");
    let marked = s.wait_text("client gone").await;
    assert!(
        marked.contains("2 open"),
        "the bot session stays open:\n{marked}"
    );
    // Another client chatting on the handle holds it again; when it closes, it is gone again.
    let again = Client::connect(&mcp_url(&first)).await;
    again.chat(&handle, "back on the same handle").await;
    s.wait_for("the mark taken off", |t| !t.contains("client gone"))
        .await;
    again
        .service
        .cancel()
        .await
        .expect("the second client closes cleanly");
    s.wait_text("client gone").await;
    // The Log says what happened and what to do.
    s.send(b"\x1b").await;
    s.send(b"8").await;
    let log = s.wait_text("its MCP session ended").await;
    assert!(log.contains("#2"), "{log}");
    // Nobody holds #2 any more: q quits without asking.
    s.send(b"q").await;
    assert!(s.wait_exit().await.success());
    assert!(s.restored());
}

#[tokio::test]
async fn sessions_sort_and_filter_from_the_keyboard() {
    let mut s = Screen::start(&["--port", "0", "--pace", "0.002"]).await;
    let first = s.wait_text("Type a line; Enter sends").await;
    let client = Client::connect(&mcp_url(&first)).await;
    let quiet = client.start().await;
    let busy = client.start().await;
    client.chat(&busy, "a line on the busy one").await;
    client.chat(&quiet, "").await;
    s.wait_text("3 open").await;
    s.send(b"\x1b").await;
    s.send(b"1").await;
    // s: the latest active first; #3 (the busy one) heads the list.
    s.send(b"s").await;
    let sorted = s.wait_text("latest active first").await;
    let first_row = sorted
        .lines()
        .find(|l| l.contains("console (you)") || l.contains("mcp: "))
        .expect("a session row");
    let number = first_row.trim_start_matches(['│', '┃', ' ', '▶']);
    assert!(number.starts_with("3 "), "#3 first:\n{sorted}");
    s.send(b"s").await;
    s.wait_text("most errors first").await;
    s.send(b"s").await;
    s.wait_for("the sort back to numbers", |t| {
        !t.contains("most errors first")
    })
    .await;
    // /: only what matches; Esc gives the whole list back.
    s.send(b"/mcp").await;
    let filtered = s.wait_text("2 shown").await;
    assert!(!filtered.contains("console (you)"), "{filtered}");
    s.send(b"\r").await;
    s.send(b"\x1b").await;
    s.wait_text("console (you)").await;
    s.send(b"/#3").await;
    let one = s.wait_text("1 shown").await;
    assert!(
        one.contains("Transcript · #3"),
        "the selection follows:\n{one}"
    );
    s.send(b"\r").await;
    s.send(b"q").await;
    s.send(b"q").await;
    assert!(s.wait_exit().await.success());
    drop(client);
}

#[tokio::test]
async fn a_replay_scrubs_inside_a_turn() {
    let dir = std::env::temp_dir().join(format!("turnscope-scrub-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let events = dir.join("run.jsonl");
    let events_arg = events.to_str().unwrap().to_string();
    let mut s = Screen::start(&["--port", "0", "--pace", "0.002", "--events", &events_arg]).await;
    s.wait_text("Type a line; Enter sends").await;
    s.send(b"what does the clock say").await;
    s.send(b"\r").await;
    s.wait_text("turn 1 · completed").await;
    s.send(b"\x03").await;
    assert!(s.wait_exit().await.success());

    let mut r = Screen::start(&["replay", &events_arg]).await;
    r.wait_text("read-only").await;
    r.wait_text("turn 1 · completed").await;
    // [ to the turn's end, then , back one step: the turn is open again, part way through.
    r.send(b"[").await;
    r.wait_text("turn end 1 of 1").await;
    r.send(b",").await;
    let inside = r.wait_text("(, . scrub)").await;
    assert!(
        inside.contains("#1 turn 1"),
        "the header says where:\n{inside}"
    );
    // Back to the tool call: the transcript shows it while the turn has no end yet.
    r.wait_for("a step before the turn's end", |t| {
        !t.contains("turn 1 · completed")
    })
    .await;
    for _ in 0..40 {
        if r.text().contains("started") {
            break;
        }
        r.send(b",").await;
    }
    let started = r.wait_text("#1 turn 1 started").await;
    assert!(!started.contains("tool clock"), "{started}");
    r.send(b".").await;
    r.wait_text("model request done").await;
    // . on through the pieces reaches the turn's end again.
    for _ in 0..60 {
        if r.text().contains("turn end 1 of 1") {
            break;
        }
        r.send(b".").await;
    }
    let end = r.wait_text("turn end 1 of 1").await;
    assert!(end.contains("turn 1 · completed"), "{end}");
    r.send(b"q").await;
    assert!(r.wait_exit().await.success());
    std::fs::remove_dir_all(&dir).ok();
}
