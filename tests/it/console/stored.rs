//! Sessions a store file keeps, seen from a console started after a restart: a session an MCP
//! client chatted on is listed as `stored` before any client reopens it, its transcript and
//! turn view open from the turns in the file, a line typed into it is refused with what to
//! do, and the client's next `chat` on its handle reopens it as a live session. The person's
//! own conversation in the console goes on after a restart: the console kept its handle.

use super::{Screen, mcp_url};
use crate::support::mcp::Client;

/// A console on a store file in its scratch folder, so a restart finds what it kept.
const ON_A_STORE_FILE: [&str; 6] = [
    "--port",
    "0",
    "--pace",
    "0.005",
    "--store",
    "sqlite:sessions.sqlite3",
];

#[tokio::test]
async fn a_stored_session_is_listed_and_opened_after_a_restart() {
    let args = ON_A_STORE_FILE;
    let mut s = Screen::start(&args).await;
    let first = s.wait_text("Type a line; Enter sends").await;
    let client = Client::connect(&mcp_url(&first)).await;
    let handle = client.start().await;
    let reply = client.chat(&handle, "remember the word teapot").await.text;
    assert!(reply.contains("teapot"), "{reply}");
    s.wait_text("mcp: ").await;
    // The client holds its session: q asks once, a second q quits (the store keeps it).
    s.send(b"\x1b").await;
    s.send(b"q").await;
    s.wait_text("q again quits").await;
    s.send(b"q").await;
    assert!(s.wait_exit().await.success());
    drop(client);

    let mut s = s.restart(&args).await;
    let listed = s.wait_all(&["Type a line; Enter sends", "stored"]).await;
    assert!(
        listed.contains("1 open"),
        "only the person's new session is open: {listed}"
    );
    // Select the client's stored session (the most recently used stored one, right below
    // the person's own): its transcript comes from the file.
    s.send(b"\x1b").await;
    s.send(b"j").await;
    let screen = s
        .wait_all(&["Transcript · stored ", "user remember the word teapot"])
        .await;
    assert!(screen.contains("turn 1 · completed"), "{screen}");
    s.send(b"w").await;
    s.wait_text("Turn 1 of stored ").await;
    s.send(b"\x1b").await;

    // A line into it is refused (the console holds no handle), saying who reopens it.
    s.send(b"3").await;
    s.send(b"hello").await;
    s.send(b"\r").await;
    s.wait_text("is stored, not open").await;

    // The client's next chat on its handle reopens it: a live session again, no stored row.
    // An empty line reopens it without a turn: its row counts the conversation's turn (it
    // said 0, as a session that never had one).
    let url = mcp_url(&s.text());
    let client = Client::connect(&url).await;
    client.chat(&handle, "").await;
    let screen = s.wait_text("2 open").await;
    let row: Vec<&str> = screen
        .lines()
        .find(|l| l.contains(&handle[..8]) && !l.contains("stored"))
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    let state = row.iter().position(|w| *w == "idle").expect("an idle row");
    assert_eq!(
        row[state - 2],
        "1",
        "turns of the reopened session: {screen}"
    );
    let reply = client.chat(&handle, "what was the word?").await.text;
    assert!(!reply.is_empty());
    let screen = s.wait_text("2 open").await;
    assert!(!screen.contains("Transcript · stored "), "{screen}");
    // Row 2 is the reopened session now: its transcript has both turns.
    s.send(b"\x1b").await;
    s.send(b"j").await;
    s.wait_all(&[
        "user remember the word teapot",
        "user what was the word?",
        "Transcript · #2 mcp: ",
    ])
    .await;
    s.send(b"\x1b").await;
    s.send(b"q").await;
    s.wait_text("q again quits").await;
    s.send(b"q").await;
    assert!(s.wait_exit().await.success());
    drop(client);
}

/// A console on [`ON_A_STORE_FILE`] in which the person said "remember the word teapot", then
/// quit (Ctrl+C): the store file keeps the conversation, the console its handle.
async fn chatted_then_quit() -> Screen {
    let mut s = Screen::start(&ON_A_STORE_FILE).await;
    s.wait_text("Type a line; Enter sends").await;
    s.send(b"remember the word teapot\r").await;
    s.wait_text("turn 1 · completed").await;
    s.send(b"\x03").await;
    assert!(s.wait_exit().await.success());
    s
}

#[tokio::test]
async fn the_persons_own_conversation_goes_on_after_a_restart() {
    let args = ON_A_STORE_FILE;
    let s = chatted_then_quit().await;

    let mut s = s.restart(&args).await;
    // The person's new session points to the conversation they had before.
    s.wait_all(&["Type a line; Enter sends", "from before (1 turn) is stored"])
        .await;
    // The stored row is the person's (the console kept its handle): listed as theirs.
    s.send(b"\x1b").await;
    s.send(b"j").await;
    let screen = s
        .wait_all(&["Transcript · stored ", "you  remember the word teapot"])
        .await;
    let stored_row = screen
        .lines()
        .find(|l| l.contains("▶-"))
        .unwrap_or_default();
    assert!(stored_row.contains("console (you)"), "{screen}");
    // A line typed into it reopens it (the person's session now) and is answered there,
    // after the first turn.
    s.send(b"3").await;
    s.send(b"what was the word?\r").await;
    let screen = s
        .wait_all(&[
            "you  what was the word?",
            "turn 2 · completed",
            "Transcript · #2 console (you)",
        ])
        .await;
    assert!(screen.contains("you  remember the word teapot"), "{screen}");
    assert!(screen.contains("2 open"), "{screen}");
    assert!(!screen.contains("1 stored"), "no longer stored: {screen}");
    s.send(b"\x03").await;
    assert!(s.wait_exit().await.success());
}

/// A conversation of the person's that ends while listed (its idle lifetime runs out) leaves
/// the list at the next listing (every 2 s), not at the sweep (every 30 s): it is no longer
/// offered as one to go on with until a line into it fails. (A line into one that ended since
/// the last listing is said in the console's words, its line given back: `run::live`'s test.)
#[tokio::test]
async fn the_persons_stored_session_that_ended_leaves_the_list() {
    let args = ON_A_STORE_FILE;
    let s = chatted_then_quit().await;

    let short: Vec<&str> = args
        .iter()
        .copied()
        .chain(["--handle-seconds", "3"])
        .collect();
    let mut s = s.restart(&short).await;
    s.wait_all(&["from before (1 turn) is stored", "1 stored"])
        .await;
    // Idle past 3 s: gone from the list, while the sweep has not run yet.
    s.wait_for("the stored row gone", |text| {
        !text.contains("1 stored") && text.contains("1 open")
    })
    .await;
    s.send(b"\x03").await;
    assert!(s.wait_exit().await.success());
}

/// A stored conversation that had no greeting shows none after a greeting was configured: the
/// transcript showed the bot's greeting of today atop a conversation that never had it (tour U
/// #4), stored or reopened; the person's new session opens with it.
#[tokio::test]
async fn a_stored_conversation_without_a_greeting_shows_none_after_one_is_configured() {
    const GREETING: &str = "Hello, I am Hours.";
    let s = chatted_then_quit().await;
    std::fs::write(
        s._dir.join("turnscope.toml"),
        format!("[bot]\ngreeting = \"{GREETING}\"\n"),
    )
    .unwrap();

    let mut s = s.restart(&ON_A_STORE_FILE).await;
    // The person's new session opens with the greeting.
    let screen = s
        .wait_all(&["Type a line; Enter sends", "from before (1 turn) is stored"])
        .await;
    assert!(screen.contains(GREETING), "{screen}");
    // The stored conversation from before had none.
    s.send(b"\x1b").await;
    s.send(b"j").await;
    let screen = s
        .wait_all(&["Transcript · stored ", "you  remember the word teapot"])
        .await;
    assert!(!screen.contains(GREETING), "{screen}");
    // Reopened by a line, it still has none.
    s.send(b"3").await;
    s.send(b"what was the word?\r").await;
    let screen = s
        .wait_all(&["turn 2 · completed", "Transcript · #2 console (you)"])
        .await;
    assert!(!screen.contains(GREETING), "{screen}");
    s.send(b"\x03").await;
    assert!(s.wait_exit().await.success());
}

/// A console killed (`kill -9`) before anything was said in its session left that empty
/// session in the store, listed by the next console and by `sessions list` as someone else's
/// until its lifetime ran out (tour U #6). The next start on the store file deletes it, and
/// says so in the Log; a session something was said in is kept.
#[tokio::test]
async fn an_empty_console_session_a_kill_left_is_deleted_at_the_next_start() {
    let args = ON_A_STORE_FILE;
    // One conversation of the person's that is kept.
    let s = chatted_then_quit().await;
    let mut s = s.restart(&args).await;
    s.wait_all(&["Type a line; Enter sends", "1 stored"]).await;
    s.child.start_kill().unwrap();
    s.wait_exit().await;
    let store = format!("sqlite:{}", s._dir.join("sessions.sqlite3").display());
    let list = || async {
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_turnscope"))
            .args(["sessions", "list", "--store", &store])
            .output()
            .await
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let listed = list().await;
    assert!(
        listed.starts_with("2 stored sessions"),
        "the killed console's empty session is left behind: {listed}"
    );

    let mut s = s.restart(&args).await;
    let screen = s
        .wait_all(&["Type a line; Enter sends", "from before (1 turn) is stored"])
        .await;
    assert!(screen.contains("1 stored"), "{screen}");
    s.send(b"\x1b").await;
    s.send(b"8").await;
    s.wait_text("deleted 1 console session in which").await;
    s.send(b"\x03").await;
    assert!(s.wait_exit().await.success());
    let listed = list().await;
    assert!(
        listed.starts_with("1 stored session ") && listed.contains("     1 "),
        "only the conversation with a turn is kept: {listed}"
    );
}
